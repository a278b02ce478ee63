/* Sparse attention (sparse.h): each predictor's selection rules, the kernel against the engine's
 * dense attention (k >= T: to rounding, 1e-6, since dense sums through matrix products), exact
 * top-k recall, the window's self-attention at k = 1, and the whole-model evaluator: with
 * k >= T its loss is model_forward's, bit for bit, for every variant and predictor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "test_probe_util.h"
#include "layers.h"
#include "model.h"
#include "probes/probe_engine_model.h"
#include "rng.h"
#include "sparse.h"
#include "tokenizer.h"

#define TM 64
#define DM 32

static void rand_unit(real *x, int n, int d, rng_state *r) {
    for (int t = 0; t < n; t++) {
        double s = 0;
        for (int i = 0; i < d; i++) {
            x[t * d + i] = (real)rng_normal_polar(r);
            s += (double)x[t * d + i] * x[t * d + i];
        }
        for (int i = 0; i < d; i++) x[t * d + i] = (real)(x[t * d + i] / sqrt(s));
    }
}

static sparse_input head_input(const real *q, const real *k, const real *v, int T, int d, real scale) {
    sparse_input in = {.T = T,
                       .d = d,
                       .q = q,
                       .k = k,
                       .v = v,
                       .q_stride = d,
                       .k_stride = d,
                       .v_stride = d,
                       .scale = scale,
                       .q_unrot = q,
                       .k_unrot = k,
                       .unrot_stride = d};
    return in;
}

static int run_head(const sparse_config *c, const sparse_input *in, real *y, sparse_ws **keep) {
    sparse_ws *ws;
    engine_error err;
    if (sparse_ws_new(&ws, c, in->T, in->d, &err)) return -1;
    int rc = sparse_attention(ws, in, y, in->d, &err);
    if (keep)
        *keep = ws;
    else
        sparse_ws_free(ws);
    return rc;
}

TEST(config_bounds_and_names) {
    sparse_config c;
    engine_error err;
    for (int p = 0; p < SPARSE_PREDICTOR_COUNT; p++) {
        sparse_predictor back;
        CHECK(sparse_predictor_parse(sparse_predictor_name((sparse_predictor)p), &back) == 0 && (int)back == p);
        sparse_config_defaults(&c, (sparse_predictor)p, 8);
        CHECK(sparse_config_validate(&c, 32, &err) == ENGINE_OK);
    }
    sparse_predictor x = SPARSE_TOPK;
    CHECK(sparse_predictor_parse("nope", &x) == -1 && x == SPARSE_TOPK);
    CHECK(!strcmp(sparse_predictor_name(SPARSE_PREDICTOR_COUNT), "unknown"));
    sparse_config_defaults(&c, SPARSE_WINDOW, 0);
    CHECK(sparse_config_validate(&c, 32, &err) == ENGINE_ERR_INVALID);
    sparse_config_defaults(&c, SPARSE_LSH, 4);
    c.lsh_bits = 17;
    CHECK(sparse_config_validate(&c, 32, &err) == ENGINE_ERR_INVALID);
    CHECK(strstr(err.message, "lsh_bits") != NULL);
    c.lsh_bits = 6, c.lsh_tables = 0;
    CHECK(sparse_config_validate(&c, 32, &err) == ENGINE_ERR_INVALID);
    sparse_config_defaults(&c, SPARSE_HAMMING, 4);
    c.hamming_bits = 65;
    CHECK(sparse_config_validate(&c, 32, &err) == ENGINE_ERR_INVALID);
    sparse_config_defaults(&c, SPARSE_TOPK, 4);
    CHECK(sparse_config_validate(&c, 0, &err) == ENGINE_ERR_INVALID);
    sparse_ws *ws;
    CHECK(sparse_ws_new(&ws, &c, 0, 8, &err) == ENGINE_ERR_INVALID && ws == NULL);
    /* the unrotated predictor needs its vectors; T and d are checked */
    sparse_config_defaults(&c, SPARSE_UNROTATED, 2);
    CHECK(sparse_ws_new(&ws, &c, 8, 4, &err) == ENGINE_OK);
    real q[32] = {0};
    sparse_input in = head_input(q, q, q, 8, 4, 1);
    in.q_unrot = NULL;
    CHECK(sparse_select(ws, &in, &err) == ENGINE_ERR_INVALID);
    in = head_input(q, q, q, 9, 4, 1);
    CHECK(sparse_select(ws, &in, &err) == ENGINE_ERR_INVALID);
    in = head_input(q, q, q, 8, 3, 1);
    CHECK(sparse_select(ws, &in, &err) == ENGINE_ERR_INVALID);
    int n;
    CHECK(sparse_chosen(ws, 0, &n) == NULL && n == 0);
    sparse_ws_free(ws);
    sparse_ws_free(NULL);
}

TEST(k_at_least_T_is_dense_attention_for_every_predictor) {
    /* Against the engine's dense kernel on the same inputs: not bit for bit (dense forms the sums
     * through matrix products and a polynomial exp), within 1e-6. All predictors with k >= T
     * take every key and run the same code, so they agree with each other exactly. */
    static real q[TM * DM], k[TM * DM], v[TM * DM], att[TM * TM], yd[TM * DM], y0[TM * DM], y[TM * DM];
    rng_state r;
    rng_seed(&r, 7);
    rand_unit(q, TM, DM, &r);
    rand_unit(k, TM, DM, &r);
    for (int i = 0; i < TM * DM; i++) v[i] = (real)rng_normal_polar(&r);
    real scale = (real)(1 / 0.15); /* a sharp cosine head, as a trained tau gives */
    double ent = 0;
    attention_forward_unit(q, k, DM, v, DM, att, yd, DM, TM, DM, scale, &ent);
    sparse_input in = head_input(q, k, v, TM, DM, scale);
    for (int p = 0; p < SPARSE_PREDICTOR_COUNT; p++)
        for (int kk = TM; kk <= TM + 5; kk += 5) {
            sparse_config c;
            sparse_config_defaults(&c, (sparse_predictor)p, kk);
            CHECK(run_head(&c, &in, y, NULL) == ENGINE_OK);
            double worst = 0;
            for (int i = 0; i < TM * DM; i++) worst = fmax(worst, fabs((double)y[i] - yd[i]));
            CHECK_MSG(worst < 1e-6, "%s k=%d differs from dense by %g", sparse_predictor_name((sparse_predictor)p), kk,
                      worst);
            if (p == 0 && kk == TM) memcpy(y0, y, sizeof y0);
            CHECK_MSG(!memcmp(y, y0, sizeof y), "%s k=%d is not the same bits as dense k=T",
                      sparse_predictor_name((sparse_predictor)p), kk);
        }
    /* SPARSE_DENSE ignores k */
    sparse_config c;
    sparse_config_defaults(&c, SPARSE_DENSE, 1);
    CHECK(run_head(&c, &in, y, NULL) == ENGINE_OK);
    CHECK(!memcmp(y, y0, sizeof y));
}

TEST(window_of_one_attends_only_to_itself) {
    static real q[TM * DM], k[TM * DM], v[TM * DM], y[TM * DM];
    rng_state r;
    rng_seed(&r, 8);
    rand_unit(q, TM, DM, &r);
    rand_unit(k, TM, DM, &r);
    for (int i = 0; i < TM * DM; i++) v[i] = (real)rng_normal_polar(&r);
    sparse_config c;
    sparse_config_defaults(&c, SPARSE_WINDOW, 1);
    sparse_input in = head_input(q, k, v, TM, DM, 5);
    sparse_ws *ws;
    CHECK(run_head(&c, &in, y, &ws) == ENGINE_OK);
    CHECK(!memcmp(y, v, sizeof y)); /* one key: weight exactly 1 */
    for (int t = 0; t < TM; t++) {
        int n;
        const int *ch = sparse_chosen(ws, t, &n);
        CHECK(n == 1 && ch[0] == t);
    }
    sparse_ws_free(ws);
    /* window k: the k most recent keys, fewer at the start */
    sparse_config_defaults(&c, SPARSE_WINDOW, 5);
    CHECK(run_head(&c, &in, y, &ws) == ENGINE_OK);
    for (int t = 0; t < TM; t++) {
        int n;
        const int *ch = sparse_chosen(ws, t, &n);
        CHECK_EQ_INT(n, t + 1 < 5 ? t + 1 : 5);
        for (int j = 0; j < n; j++) CHECK_EQ_INT(ch[j], t - n + 1 + j);
    }
    sparse_ws_free(ws);
}

/* Integer-valued q and k: every score is exact in float, in any summation order, so the dense
 * kernel's weights rank keys exactly as the predictor's scores do (ties included). */
static void int_vectors(real *x, int n, int d, rng_state *r) {
    for (int i = 0; i < n * d; i++) x[i] = (real)((int)(rng_next_u64(r) % 7) - 3);
}

TEST(exact_topk_has_recall_one_and_the_top_mass) {
    static real q[TM * DM], k[TM * DM], v[TM * DM], att[TM * TM], yd[TM * DM], y[TM * DM];
    rng_state r;
    rng_seed(&r, 9);
    int_vectors(q, TM, DM, &r);
    int_vectors(k, TM, DM, &r);
    for (int i = 0; i < TM * DM; i++) v[i] = (real)rng_normal_polar(&r);
    real scale = 0.125f;
    double ent = 0;
    attention_forward_unit(q, k, DM, v, DM, att, yd, DM, TM, DM, scale, &ent);
    sparse_input in = head_input(q, k, v, TM, DM, scale);
    static const int ks[] = {1, 3, 8, 20};
    for (int j = 0; j < 4; j++) {
        sparse_config c;
        sparse_config_defaults(&c, SPARSE_TOPK, ks[j]);
        sparse_ws *ws;
        CHECK(run_head(&c, &in, y, &ws) == ENGINE_OK);
        sparse_quality qa = {0};
        sparse_quality_add(ws, att, TM, &qa);
        CHECK_EQ_INT(qa.queries, TM - ks[j]);
        CHECK_NEAR(qa.recall / qa.queries, 1.0, 0);
        CHECK_NEAR(qa.keys, (double)ks[j] * qa.queries, 0);
        /* the mass equals the sum of the k largest weights, computed here by sorting */
        double want = 0;
        for (int t = ks[j]; t < TM; t++) {
            real row[TM];
            memcpy(row, att + t * TM, sizeof(real) * (size_t)(t + 1));
            for (int a = 0; a < ks[j]; a++)
                for (int b = a + 1; b <= t; b++)
                    if (row[b] > row[a]) {
                        real tmp = row[a];
                        row[a] = row[b];
                        row[b] = tmp;
                    }
            for (int a = 0; a < ks[j]; a++) want += row[a];
        }
        CHECK_NEAR(qa.mass, want, 1e-5);
        /* chosen keys are causal, ascending, and none scores below an unchosen one */
        for (int t = 0; t < TM; t++) {
            int n;
            const int *ch = sparse_chosen(ws, t, &n);
            CHECK_EQ_INT(n, t + 1 < ks[j] ? t + 1 : ks[j]);
            for (int a = 0; a < n; a++) CHECK(ch[a] <= t && (a == 0 || ch[a - 1] < ch[a]));
        }
        sparse_ws_free(ws);
    }
    /* the window predictor on the same head is worse (or equal), never better */
    sparse_config c;
    sparse_config_defaults(&c, SPARSE_WINDOW, 3);
    sparse_ws *ws;
    CHECK(run_head(&c, &in, y, &ws) == ENGINE_OK);
    sparse_quality qw = {0};
    sparse_quality_add(ws, att, TM, &qw);
    CHECK(qw.recall < qw.queries && qw.mass > 0);
    sparse_ws_free(ws);
}

TEST(lsh_finds_a_key_in_the_query_direction_and_is_seeded) {
    static real q[TM * DM], k[TM * DM], v[TM * DM], y[TM * DM];
    rng_state r;
    rng_seed(&r, 10);
    rand_unit(q, TM, DM, &r);
    rand_unit(k, TM, DM, &r);
    for (int i = 0; i < TM * DM; i++) v[i] = (real)rng_normal_polar(&r);
    /* key 3 points where query 50 points (scaled: signs ignore length); key 4 the opposite way */
    for (int i = 0; i < DM; i++) k[3 * DM + i] = 2 * q[50 * DM + i], k[4 * DM + i] = -q[50 * DM + i];
    sparse_input in = head_input(q, k, v, TM, DM, 4);
    for (int p = SPARSE_LSH; p <= SPARSE_HAMMING; p++) {
        sparse_config c;
        sparse_config_defaults(&c, (sparse_predictor)p, 4);
        c.lsh_candidates = TM; /* walk whole buckets */
        sparse_ws *ws, *ws2;
        CHECK(run_head(&c, &in, y, &ws) == ENGINE_OK);
        int n, found = 0, opposite = 0;
        const int *ch = sparse_chosen(ws, 50, &n);
        for (int j = 0; j < n; j++) found |= ch[j] == 3, opposite |= ch[j] == 4;
        CHECK_MSG(found && !opposite, "%s: key 3 found %d, key 4 %d", sparse_predictor_name((sparse_predictor)p), found,
                  opposite);
        for (int t = 0; t < TM; t++) {
            ch = sparse_chosen(ws, t, &n);
            CHECK(n >= 1 && n <= (t + 1 < 4 ? t + 1 : 4));
            for (int j = 0; j < n; j++) CHECK(ch[j] >= 0 && ch[j] <= t && (j == 0 || ch[j - 1] < ch[j]));
        }
        /* the same seed gives the same picks; a second call on the same workspace too */
        CHECK(run_head(&c, &in, y, &ws2) == ENGINE_OK);
        CHECK(sparse_attention(ws, &in, y, DM, NULL) == ENGINE_OK);
        for (int t = 0; t < TM; t++) {
            int n1, n2;
            const int *a = sparse_chosen(ws, t, &n1), *b = sparse_chosen(ws2, t, &n2);
            CHECK(n1 == n2 && !memcmp(a, b, sizeof(int) * (size_t)n1));
        }
        sparse_ws_free(ws);
        sparse_ws_free(ws2);
    }
}

TEST(lsh_with_one_bucket_is_exact_topk) {
    /* one table, one hyperplane, every vector on its positive side: all keys share the query's
     * bucket, so with whole buckets walked the candidates are every key, scored exactly */
    static real q[TM * DM], k[TM * DM], v[TM * DM], y1[TM * DM], y2[TM * DM];
    rng_state r;
    rng_seed(&r, 11);
    rand_unit(q, TM, DM, &r);
    rand_unit(k, TM, DM, &r);
    for (int i = 0; i < TM * DM; i++) v[i] = (real)rng_normal_polar(&r);
    sparse_config c;
    sparse_config_defaults(&c, SPARSE_LSH, 6);
    c.lsh_tables = 1, c.lsh_bits = 1, c.lsh_candidates = TM;
    /* every vector close to one direction e: one hyperplane puts them all on the same side */
    real e[DM];
    rand_unit(e, 1, DM, &r);
    for (int t = 0; t < TM; t++)
        for (int i = 0; i < DM; i++) {
            q[t * DM + i] = e[i] + (real)(1e-3 * rng_normal_polar(&r));
            k[t * DM + i] = e[i] + (real)(1e-3 * rng_normal_polar(&r));
        }
    sparse_input in = head_input(q, k, v, TM, DM, 50);
    sparse_ws *wl, *wt;
    CHECK(run_head(&c, &in, y1, &wl) == ENGINE_OK);
    sparse_config ct;
    sparse_config_defaults(&ct, SPARSE_TOPK, 6);
    CHECK(run_head(&ct, &in, y2, &wt) == ENGINE_OK);
    CHECK(!memcmp(y1, y2, sizeof y1));
    sparse_ws_free(wl);
    sparse_ws_free(wt);
}

TEST(unrotated_on_unit_vectors_is_topk_and_hamming_ties_go_to_recent_keys) {
    static real q[TM * DM], k[TM * DM], v[TM * DM], y1[TM * DM], y2[TM * DM];
    rng_state r;
    rng_seed(&r, 12);
    rand_unit(q, TM, DM, &r);
    rand_unit(k, TM, DM, &r);
    for (int i = 0; i < TM * DM; i++) v[i] = (real)rng_normal_polar(&r);
    sparse_input in = head_input(q, k, v, TM, DM, 3);
    sparse_config cu, ct;
    sparse_config_defaults(&cu, SPARSE_UNROTATED, 7);
    sparse_config_defaults(&ct, SPARSE_TOPK, 7);
    sparse_ws *wu, *wt;
    CHECK(run_head(&cu, &in, y1, &wu) == ENGINE_OK);
    CHECK(run_head(&ct, &in, y2, &wt) == ENGINE_OK);
    int same = 0;
    for (int t = 0; t < TM; t++) {
        int n1, n2;
        const int *a = sparse_chosen(wu, t, &n1), *b = sparse_chosen(wt, t, &n2);
        same += n1 == n2 && !memcmp(a, b, sizeof(int) * (size_t)n1);
    }
    CHECK(same >= TM - 2); /* 1/|k| rounds, so a near tie may go the other way */
    sparse_ws_free(wu);
    sparse_ws_free(wt);
    /* all keys identical: every Hamming distance ties, so the k most recent win (= window) */
    for (int t = 0; t < TM; t++) memcpy(k + t * DM, k, sizeof(real) * DM);
    sparse_config ch, cw;
    sparse_config_defaults(&ch, SPARSE_HAMMING, 5);
    sparse_config_defaults(&cw, SPARSE_WINDOW, 5);
    CHECK(run_head(&ch, &in, y1, NULL) == ENGINE_OK);
    CHECK(run_head(&cw, &in, y2, NULL) == ENGINE_OK);
    CHECK(!memcmp(y1, y2, sizeof y1));
}

/* ---- the whole model ---- */

static model *tiny_model(int attention, int C, int T, int nth, uint64_t seed) {
    model_config c;
    model_config_defaults(&c);
    c.n_layer = 2, c.n_head = 2, c.d_model = C, c.seq_len = T, c.vocab = 61, c.attention = attention;
    model *m;
    engine_error err;
    if (model_new(&m, &c, 3, nth, 0, &err)) return NULL;
    model_init_params(m, seed);
    /* sharpen attention so heads have something to find: larger q/k projections */
    char nm[40];
    for (int l = 0; l < c.n_layer; l++) {
        snprintf(nm, sizeof nm, "h.%d.attn.qkv.w", l);
        const model_tensor *t = model_tensor_find(m, nm);
        real *p = model_params(m) + t->offset;
        for (size_t i = 0; i < (size_t)2 * C * C; i++) p[i] *= 40;
    }
    return m;
}

static void tokens(int32_t *x, int n, int V, uint64_t seed) {
    rng_state r;
    rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int32_t)(rng_next_u64(&r) % (uint64_t)V);
}

TEST(k_at_least_T_gives_the_dense_loss_exactly) {
    enum { T = 24, B = 3 };
    int32_t in[B * T], tg[B * T];
    tokens(in, B * T, 61, 1);
    tokens(tg, B * T, 61, 2);
    static const int widths[] = {32, 24}; /* 32: the lm-head's own kernels; 24: BLAS */
    for (int a = 0; a < attention_count(); a++)
        for (int w = 0; w < 2; w++) {
            const attention_variant *av = attention_at(a);
            if (!av) continue;
            model *m = tiny_model(a, widths[w], T, 2, 3 + a);
            CHECK_MSG(m != NULL, "model %s", av->name);
            double dense;
            engine_error err;
            CHECK(model_forward(m, in, tg, B, T, &dense, &err) == ENGINE_OK);
            sparse_eval *ev;
            CHECK(sparse_eval_new(&ev, m, B, &err) == ENGINE_OK);
            for (int p = 0; p < SPARSE_PREDICTOR_COUNT; p++) {
                sparse_config c;
                sparse_config_defaults(&c, (sparse_predictor)p, T);
                double loss = 0;
                CHECK(sparse_eval_run(ev, &c, in, tg, B, T, &loss, NULL, NULL, &err) == ENGINE_OK);
                CHECK_MSG(loss == dense, "%s C%d %s k=T: %.17g vs model_forward %.17g", av->name, widths[w],
                          sparse_predictor_name((sparse_predictor)p), loss, dense);
                c.k = T + 7;
                CHECK(sparse_eval_run(ev, &c, in, tg, B, T, &loss, NULL, NULL, &err) == ENGINE_OK);
                CHECK(loss == dense);
            }
            /* the gather kernel itself at k = T: the dense loss to rounding */
            sparse_eval_set_gather_always(ev, 1);
            sparse_config c;
            sparse_config_defaults(&c, SPARSE_TOPK, T);
            double loss = 0;
            CHECK(sparse_eval_run(ev, &c, in, tg, B, T, &loss, NULL, NULL, &err) == ENGINE_OK);
            CHECK_MSG(fabs(loss - dense) < 2e-5 * dense, "%s gather %.9g vs %.9g", av->name, loss, dense);
            sparse_eval_set_gather_always(ev, 0);
            /* fewer keys than T changes the loss */
            sparse_config_defaults(&c, SPARSE_WINDOW, 1);
            CHECK(sparse_eval_run(ev, &c, in, tg, B, T, &loss, NULL, NULL, &err) == ENGINE_OK);
            CHECK(isfinite(loss) && loss != dense);
            /* a shorter batch than the model's window also matches */
            double d2, l2;
            CHECK(model_forward(m, in, tg, 2, T - 5, &d2, &err) == ENGINE_OK);
            sparse_config_defaults(&c, SPARSE_LSH, T - 5);
            CHECK(sparse_eval_run(ev, &c, in, tg, 2, T - 5, &l2, NULL, NULL, &err) == ENGINE_OK);
            CHECK(l2 == d2);
            sparse_eval_free(ev);
            model_free(m);
        }
}

TEST(bf16_output_layer_is_mirrored) {
#if !REAL_IS_DOUBLE
    enum { T = 16, B = 2 };
    int32_t in[B * T], tg[B * T];
    tokens(in, B * T, 61, 4);
    tokens(tg, B * T, 61, 5);
    model *m = tiny_model(attention_index("cosine_rope"), 32, T, 1, 9);
    CHECK(m != NULL);
    engine_error err;
    if (model_set_precision(m, PRECISION_BF16, &err) != ENGINE_OK) {
        model_free(m);
        return; /* not available in this build */
    }
    double dense, loss;
    CHECK(model_forward(m, in, tg, B, T, &dense, &err) == ENGINE_OK);
    sparse_eval *ev;
    CHECK(sparse_eval_new(&ev, m, B, &err) == ENGINE_OK);
    sparse_config c;
    sparse_config_defaults(&c, SPARSE_HAMMING, T);
    CHECK(sparse_eval_run(ev, &c, in, tg, B, T, &loss, NULL, NULL, &err) == ENGINE_OK);
    CHECK_MSG(loss == dense, "%.17g vs %.17g", loss, dense);
    sparse_eval_free(ev);
    model_free(m);
#endif
}

TEST(evaluator_quality_argmax_threads_and_errors) {
    enum { T = 20, B = 2 };
    int32_t in[B * T], tg[B * T], am1[B * T], am2[B * T];
    tokens(in, B * T, 61, 6);
    tokens(tg, B * T, 61, 7);
    model *m1 = tiny_model(attention_index("cosine_rope"), 32, T, 1, 11);
    model *m2 = tiny_model(attention_index("cosine_rope"), 32, T, 2, 11);
    CHECK(m1 && m2);
    sparse_eval *e1, *e2;
    engine_error err;
    CHECK(sparse_eval_new(&e1, m1, B, &err) == ENGINE_OK);
    CHECK(sparse_eval_new(&e2, m2, B, &err) == ENGINE_OK);
    sparse_config c;
    sparse_config_defaults(&c, SPARSE_LSH, 4);
    sparse_quality q1[4] = {{0}}, q2[4] = {{0}};
    double l1, l2;
    CHECK(sparse_eval_run(e1, &c, in, tg, B, T, &l1, am1, q1, &err) == ENGINE_OK);
    CHECK(sparse_eval_run(e2, &c, in, tg, B, T, &l2, am2, q2, &err) == ENGINE_OK);
    CHECK(l1 == l2); /* thread count does not change a bit */
    CHECK(!memcmp(am1, am2, sizeof am1));
    CHECK(!memcmp(q1, q2, sizeof q1));
    for (int i = 0; i < B * T; i++) CHECK(am1[i] >= 0 && am1[i] < 61);
    for (int lh = 0; lh < 4; lh++) {
        CHECK_EQ_INT(q1[lh].queries, B * (T - 4));
        CHECK(q1[lh].recall >= 0 && q1[lh].recall <= q1[lh].queries);
        CHECK(q1[lh].mass > 0 && q1[lh].mass <= q1[lh].queries * (1 + 1e-5));
        CHECK(q1[lh].keys >= q1[lh].queries && q1[lh].keys <= 4.0 * q1[lh].queries);
    }
    /* exact top-k captures at least as much mass as the window, head by head */
    sparse_quality qt[4] = {{0}}, qw[4] = {{0}};
    sparse_config_defaults(&c, SPARSE_TOPK, 4);
    CHECK(sparse_eval_run(e1, &c, in, tg, B, T, &l1, NULL, qt, &err) == ENGINE_OK);
    sparse_config_defaults(&c, SPARSE_WINDOW, 4);
    CHECK(sparse_eval_run(e1, &c, in, tg, B, T, &l1, NULL, qw, &err) == ENGINE_OK);
    CHECK(qt[0].mass >= qw[0].mass - 1e-6); /* layer 0 sees the same input under both */
    CHECK(qt[0].recall >= 0.9 * qt[0].queries);
    /* argmax without targets; dense argmax is deterministic */
    sparse_config_defaults(&c, SPARSE_DENSE, 1);
    CHECK(sparse_eval_run(e1, &c, in, NULL, B, T, NULL, am1, NULL, &err) == ENGINE_OK);
    CHECK(sparse_eval_run(e2, &c, in, NULL, B, T, NULL, am2, NULL, &err) == ENGINE_OK);
    CHECK(!memcmp(am1, am2, sizeof am1));
    /* errors */
    CHECK(sparse_eval_run(e1, &c, in, tg, B + 2, T, &l1, NULL, NULL, &err) == ENGINE_ERR_INVALID);
    CHECK(sparse_eval_run(e1, &c, in, tg, B, T + 1, &l1, NULL, NULL, &err) == ENGINE_ERR_INVALID);
    in[3] = 61;
    CHECK(sparse_eval_run(e1, &c, in, tg, B, T, &l1, NULL, NULL, &err) == ENGINE_ERR_INVALID);
    CHECK(strstr(err.message, "vocabulary") != NULL);
    in[3] = 0;
    c.k = 0;
    CHECK(sparse_eval_run(e1, &c, in, tg, B, T, &l1, NULL, NULL, &err) == ENGINE_ERR_INVALID);
    sparse_eval *e3 = (sparse_eval *)&c;
    CHECK(sparse_eval_new(&e3, m1, 0, &err) == ENGINE_ERR_INVALID && e3 == NULL);
    sparse_eval_free(e1);
    sparse_eval_free(e2);
    sparse_eval_free(NULL);
    model_free(m1);
    model_free(m2);
}

TEST(split_evaluation_is_the_runs_validation_loss_and_scores_task_answers) {
    /* a copy_offset corpus, evaluated as train.c evaluates: the mean of model_forward over the
     * first validation batches; sparse_eval_split with k >= T gives the same bits */
    tasks_config tcfg;
    tasks_config_defaults(&tcfg, tasks_kind_index("copy_offset"));
    engine_error err;
    CHECK(tasks_config_set(&tcfg, "vocab", 64, &err) == ENGINE_OK);
    CHECK(tasks_config_set(&tcfg, "seq_len", 48, &err) == ENGINE_OK);
    CHECK(tasks_config_set(&tcfg, "windows", 60, &err) == ENGINE_OK);
    tasks_corpus *tc;
    CHECK(tasks_generate(&tc, &tcfg, &err) == ENGINE_OK);
    corpus *cp;
    CHECK(corpus_from_tokens(&cp, tc->tokens, tc->n_tokens, &err) == ENGINE_OK);
    model_config c;
    model_config_defaults(&c);
    c.n_layer = 2, c.n_head = 2, c.d_model = 32, c.seq_len = 48, c.vocab = 64,
    c.attention = attention_index("cosine_rope");
    model *m;
    CHECK(model_new(&m, &c, 3, 2, 0, &err) == ENGINE_OK);
    model_init_params(m, 5);
    corpus_loader_config lc = {
        .seq_len = 48, .batch = 3, .order = CORPUS_ORDER_SHUFFLED, .seed = 3, .val_fraction = 0.25};
    corpus_loader *l;
    CHECK(corpus_loader_new(&l, cp, &lc, &err) == ENGINE_OK);
    int32_t batch[3 * 49], in[3 * 48], tg[3 * 48];
    double want = 0;
    long answers = 0;
    for (int i = 0; i < 4; i++) {
        CHECK(corpus_loader_batch(l, CORPUS_SPLIT_VAL, i, batch, &err) == ENGINE_OK);
        for (int b = 0; b < 3; b++)
            for (int t = 0; t < 48; t++) {
                in[b * 48 + t] = batch[b * 49 + t];
                tg[b * 48 + t] = batch[b * 49 + t + 1];
            }
        double loss;
        CHECK(model_forward(m, in, tg, 3, 48, &loss, &err) == ENGINE_OK);
        want += loss;
        for (int b = 0; b < 3; b++) {
            size_t start;
            CHECK(corpus_loader_window_start(l, CORPUS_SPLIT_VAL, i, b, &start, &err) == ENGINE_OK);
            for (int t = 0; t < 48; t++) answers += tc->labels[start + t + 1] != 0;
        }
    }
    want /= 4;
    corpus_loader_free(l);
    sparse_eval *ev;
    CHECK(sparse_eval_new(&ev, m, 3, &err) == ENGINE_OK);
    sparse_config sc;
    sparse_config_defaults(&sc, SPARSE_LSH, 48);
    double got;
    tasks_acc acc;
    tasks_acc_init(&acc, tc->n_buckets);
    CHECK(sparse_eval_split(ev, &sc, cp, &lc, CORPUS_SPLIT_VAL, 4, tc, &got, &acc, &err) == ENGINE_OK);
    CHECK_MSG(got == want, "%.17g vs %.17g", got, want);
    CHECK_EQ_INT(acc.total, answers);
    CHECK(acc.total > 0 && acc.correct >= 0 && acc.correct <= acc.total);
    long per_bucket = 0;
    for (int b = 0; b < acc.n_buckets; b++) per_bucket += acc.b_total[b];
    CHECK_EQ_INT(per_bucket, answers);
    /* a window of 4 keys: a different loss; the loss alone without a task corpus */
    sparse_config_defaults(&sc, SPARSE_WINDOW, 4);
    CHECK(sparse_eval_split(ev, &sc, cp, &lc, CORPUS_SPLIT_VAL, 4, NULL, &got, NULL, &err) == ENGINE_OK);
    CHECK(isfinite(got) && got != want);
    lc.batch = 4;
    CHECK(sparse_eval_split(ev, &sc, cp, &lc, CORPUS_SPLIT_VAL, 4, NULL, &got, NULL, &err) == ENGINE_ERR_INVALID);
    lc.batch = 3;
    CHECK(sparse_eval_split(ev, &sc, cp, &lc, CORPUS_SPLIT_VAL, 0, NULL, &got, NULL, &err) == ENGINE_ERR_INVALID);
    sparse_eval_free(ev);
    model_free(m);
    corpus_free(cp);
    tasks_corpus_free(tc);
}

/* ---- the probe ---- */

static json_t *probe_on(const probe_engine_model *pm, const char *params, probe_error *err) {
    json_t *p = json_loads(params, 0, NULL), *res = NULL;
    probe_context ctx = {.model = &pm->view};
    engine_status st = probe_run("sparse_attention", p, &ctx, &res, err);
    json_decref(p);
    return st ? NULL : res;
}

TEST(probe_reports_recall_and_mass_against_the_runs_own_weights) {
    static const char *const text = "the quick brown fox jumps over the lazy dog; the dog sleeps on.";
    enum { T = 40 };
    tokenizer *tok;
    engine_error e;
    CHECK(tokenizer_new_bytes(&tok, &e) == ENGINE_OK);
    for (int variant = 0; variant < 2; variant++) {
        const char *name = variant ? "dot" : "cosine_rope";
        model_config c;
        model_config_defaults(&c);
        c.n_layer = 2, c.n_head = 2, c.d_model = 32, c.seq_len = 64, c.vocab = 256, c.attention = attention_index(name);
        model *m;
        CHECK(model_new(&m, &c, 1, 1, 0, &e) == ENGINE_OK);
        model_init_params(m, 21);
        const model_tensor *qkv = model_tensor_find(m, "h.0.attn.qkv.w");
        for (size_t i = 0; i < (size_t)2 * 32 * 32; i++) model_params(m)[qkv->offset + i] *= 40;
        probe_engine_model pm;
        CHECK(probe_engine_model_init(&pm, m, tok, &e) == ENGINE_OK);
        probe_error perr;
        json_t *res = probe_on(&pm,
                               "{\"text\": \"the quick brown fox jumps over the lazy dog; the dog sleeps on.\", "
                               "\"max_tokens\": 40, \"ks\": [1, 4, 8, 40]}",
                               &perr);
        CHECK_MSG(res != NULL, "%s: %s", perr.field, perr.message);
        CHECK_NEAR(tp_sum(res, "n_tokens"), T, 0);
        CHECK_EQ_INT(tp_bool(res, "cosine_attention"), !variant);
        CHECK(json_is_string(json_object_get(json_object_get(res, "summary"), "topk_predictor")));
        const json_t *rec = tp_table(res, "recall"), *mass = tp_table(res, "mass"), *bh = tp_table(res, "by_head");
        CHECK(rec && mass && bh && tp_table(res, "keys_per_query"));
        CHECK_EQ_INT(tp_nrows(rec), 4);
        CHECK_EQ_INT(tp_nrows(bh), 2 * 2 * 5 * 4);
        /* exact top-k finds the model's own top weights (up to float near-ties) */
        for (int r = 0; r < 3; r++) {
            CHECK_MSG(tp_cell(rec, r, "topk") > 0.98, "%s k row %d: topk recall %g", name, r, tp_cell(rec, r, "topk"));
            CHECK(tp_cell(mass, r, "topk") >= tp_cell(mass, r, "window") - 1e-6);
            CHECK(tp_cell(mass, r, "topk") >= tp_cell(mass, r, "lsh") - 1e-6);
            CHECK(tp_cell(mass, r, "topk") <= 1 + 1e-5);
        }
        CHECK(isnan(tp_cell(rec, 3, "topk")) && tp_cell(rec, 3, "queries") == 0); /* k = T: nothing to choose */
        /* the window's mass and the random expectation, recomputed from the model's own maps */
        int32_t ids[T];
        for (int i = 0; i < T; i++) ids[i] = (unsigned char)text[i];
        model_inspect ins;
        CHECK(model_forward_inspect(m, ids, T, &ins, &e) == ENGINE_OK);
        static const int ks[] = {1, 4, 8};
        for (int j = 0; j < 3; j++) {
            double sum = 0, rnd = 0;
            long n = 0;
            for (int lh = 0; lh < 4; lh++)
                for (int t = ks[j]; t < T; t++) {
                    for (int s = t - ks[j] + 1; s <= t; s++) sum += ins.att[((size_t)lh * T + t) * T + s];
                    n++;
                }
            for (int t = ks[j]; t < T; t++) rnd += (double)ks[j] / (t + 1);
            CHECK_NEAR(tp_cell(mass, j, "window"), sum / n, 1e-6);
            CHECK_NEAR(tp_cell(mass, j, "random"), rnd / (T - ks[j]), 1e-12);
            CHECK_NEAR(tp_cell(rec, j, "queries"), n, 0);
        }
        model_inspect_free(&ins);
        /* deterministic */
        json_t *again = probe_on(&pm,
                                 "{\"text\": \"the quick brown fox jumps over the lazy dog; the dog sleeps on.\", "
                                 "\"max_tokens\": 40, \"ks\": [1, 4, 8, 40]}",
                                 &perr);
        CHECK(again && json_equal(res, again));
        json_decref(again);
        json_decref(res);
        model_free(m);
    }
    tokenizer_free(tok);
    /* a model probe without a model */
    probe_error perr;
    json_t *res = NULL;
    CHECK(probe_run("sparse_attention", NULL, NULL, &res, &perr) == ENGINE_ERR_INVALID && res == NULL);
    CHECK(!strcmp(perr.field, "run"));
    const probe_kind *k = probe_find("sparse_attention");
    CHECK(k && k->needs_model && k->title && k->title[0]);
}

int main(void) {
    RUN(config_bounds_and_names);
    RUN(k_at_least_T_is_dense_attention_for_every_predictor);
    RUN(window_of_one_attends_only_to_itself);
    RUN(exact_topk_has_recall_one_and_the_top_mass);
    RUN(lsh_finds_a_key_in_the_query_direction_and_is_seeded);
    RUN(lsh_with_one_bucket_is_exact_topk);
    RUN(unrotated_on_unit_vectors_is_topk_and_hamming_ties_go_to_recent_keys);
    RUN(k_at_least_T_gives_the_dense_loss_exactly);
    RUN(bf16_output_layer_is_mirrored);
    RUN(evaluator_quality_argmax_threads_and_errors);
    RUN(split_evaluation_is_the_runs_validation_loss_and_scores_task_answers);
    RUN(probe_reports_recall_and_mass_against_the_runs_own_weights);
    return test_summary();
}
