/* The model probes (attention_map, topk_prediction): first on a hand-built model whose q, k and
 * weights this test computes itself (rotation by complex multiplication, ranking by qsort), then
 * on the engine's own model through probe_engine_model, against the model's own figures. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "test_probe_util.h"
#include "model.h"
#include "probes/probe_engine_model.h"
#include "tokenizer.h"

#define L 2
#define H 2
#define D 4
#define TMAX 40

typedef struct {
    int cosine;  /* cos/tau or q.k/tau */
    double base; /* 0: no rotation */
    int calls;
} toy;

static engine_status toy_tokenize(void *self, const char *text, int *ids, int cap, int *n, engine_error *err) {
    int len = (int)strlen(text);
    for (int i = 0; i < len && i < cap; i++) ids[i] = (unsigned char)text[i];
    *n = len;
    return ENGINE_OK;
}

static double toy_q(int l, int h, int t, int id, int i) {
    return sin(0.37 * id + 1.1 * i + 0.5 * l + 0.9 * h + 0.05 * t);
}
static double toy_k(int l, int h, int t, int id, int i) {
    return cos(0.23 * id - 0.7 * i + 0.3 * l - 0.4 * h + 0.11 * t);
}
static double toy_tau(int l, int h) { return 0.1 + 0.05 * (l * H + h); }

/* The score of query t against key s, rotation written with complex numbers. */
static double toy_score(const toy *m, const int *ids, int l, int h, int t, int s) {
    double complex acc = 0;
    double nq = 0, nk = 0;
    for (int p = 0; p < D / 2; p++) {
        double complex qp = toy_q(l, h, t, ids[t], 2 * p) + I * toy_q(l, h, t, ids[t], 2 * p + 1);
        double complex kp = toy_k(l, h, s, ids[s], 2 * p) + I * toy_k(l, h, s, ids[s], 2 * p + 1);
        double th = m->base > 0 ? pow(m->base, -2.0 * p / D) : 0;
        acc += qp * conj(kp) * cexp(I * (t - s) * th);
        nq += creal(qp * conj(qp)), nk += creal(kp * conj(kp));
    }
    double v = creal(acc);
    return (m->cosine ? v / sqrt(nq * nk) : v) / toy_tau(l, h);
}

static void toy_weights(const toy *m, const int *ids, int T, int l, int h, double *w /* [T*T] */) {
    for (int t = 0; t < T; t++) {
        double mx = -1e300, z = 0;
        for (int s = 0; s <= t; s++) mx = fmax(mx, toy_score(m, ids, l, h, t, s));
        for (int s = 0; s < T; s++) w[t * T + s] = s <= t ? exp(toy_score(m, ids, l, h, t, s) - mx) : 0;
        for (int s = 0; s <= t; s++) z += w[t * T + s];
        for (int s = 0; s <= t; s++) w[t * T + s] /= z;
    }
}

static engine_status toy_inspect(void *self, const int *ids, int T, float *q, float *k, float *weights, float *tau,
                                 engine_error *err) {
    toy *m = self;
    m->calls++;
    static double w[TMAX * TMAX];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            size_t lh = (size_t)l * H + h;
            for (int t = 0; t < T; t++)
                for (int i = 0; i < D; i++) {
                    if (q) q[(lh * T + t) * D + i] = (float)toy_q(l, h, t, ids[t], i);
                    if (k) k[(lh * T + t) * D + i] = (float)toy_k(l, h, t, ids[t], i);
                }
            if (weights) {
                toy_weights(m, ids, T, l, h, w);
                for (int i = 0; i < T * T; i++) weights[lh * T * T + i] = (float)w[i];
            }
            if (tau) tau[lh] = (float)toy_tau(l, h);
        }
    return ENGINE_OK;
}

static probe_model toy_model(toy *m) {
    probe_model pm = {.n_layer = L,
                      .n_head = H,
                      .head_dim = D,
                      .max_seq = TMAX,
                      .vocab_size = 256,
                      .self = m,
                      .tokenize = toy_tokenize,
                      .inspect = toy_inspect,
                      .piece = NULL,
                      .rope_base = m->base,
                      .rope_half_split = 0,
                      .cosine = m->cosine};
    return pm;
}

static json_t *run_with(const char *kind, const char *params, const probe_model *pm, probe_error *err) {
    json_t *p = params ? json_loads(params, 0, NULL) : NULL, *res = NULL;
    probe_context ctx = {.model = pm};
    engine_status st = probe_run(kind, p, &ctx, &res, err);
    json_decref(p);
    return st ? NULL : res;
}

static const char *const TEXT = "the cat sat on the mat, it was tired";

TEST(attention_map_matches_hand_computation) {
    toy m = {1, 10000, 0};
    probe_model pm = toy_model(&m);
    probe_error err;
    json_t *res = run_with("attention_map", "{\"text\": \"the cat sat on the mat, it was tired\", \"max_tokens\": 30}",
                           &pm, &err);
    CHECK_MSG(res != NULL, "%s: %s", err.field, err.message);
    int T = 30, ids[TMAX];
    for (int i = 0; i < T; i++) ids[i] = (unsigned char)TEXT[i];
    CHECK_NEAR(tp_sum(res, "n_tokens"), 30, 0);
    CHECK_EQ_INT(tp_bool(res, "truncated"), 1);
    const json_t *tok = tp_table(res, "tokens");
    CHECK_EQ_INT(tp_nrows(tok), 30);
    CHECK_NEAR(tp_cell(tok, 4, "id"), 'c', 0);
    const json_t *heads = tp_table(res, "heads");
    CHECK_EQ_INT(tp_nrows(heads), L * H);
    static double w[TMAX * TMAX];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            toy_weights(&m, ids, T, l, h, w);
            double ent = 0;
            for (int t = 0; t < T; t++)
                for (int s = 0; s <= t; s++) ent -= w[t * T + s] > 0 ? w[t * T + s] * log(w[t * T + s]) / T : 0;
            int r = l * H + h;
            CHECK_NEAR(tp_cell(heads, r, "layer"), l, 0);
            CHECK_NEAR(tp_cell(heads, r, "head"), h, 0);
            CHECK_NEAR(tp_cell(heads, r, "tau"), toy_tau(l, h), 1e-7);
            CHECK_NEAR(tp_cell(heads, r, "mean_entropy"), ent, 1e-5);
            char name[32];
            snprintf(name, sizeof name, "attention_l%d_h%d", l, h);
            const json_t *map = tp_table(res, name);
            CHECK_MSG(map != NULL, "missing %s", name);
            CHECK_EQ_INT(tp_nrows(map), T);
            CHECK_NEAR(tp_cell(map, 17, "k5"), w[17 * T + 5], 1e-6);
            CHECK_NEAR(tp_cell(map, 3, "k9"), 0, 0); /* causal */
        }
    CHECK(tp_sum(res, "max_row_sum_error") < 1e-5);
    json_decref(res);
}

typedef struct {
    double v;
    int i;
} ranked;

static int by_value_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? 1 : -1;
    return x->i - y->i;
}

/* recall@k and mass for one query: picks by predictor pred, truth by w. */
static void score_query(const double *pred, const double *w, int n, int k, double *recall, double *mass) {
    ranked a[TMAX], b[TMAX];
    for (int s = 0; s < n; s++) a[s] = (ranked){w[s], s}, b[s] = (ranked){pred[s], s};
    qsort(a, (size_t)n, sizeof a[0], by_value_desc);
    qsort(b, (size_t)n, sizeof b[0], by_value_desc);
    int hit = 0;
    double ms = 0;
    for (int x = 0; x < k; x++) {
        ms += w[b[x].i];
        for (int y = 0; y < k; y++) hit += b[x].i == a[y].i;
    }
    *recall = (double)hit / k;
    *mass = ms;
}

static void expected_topk(const toy *m, const int *ids, int T, int k, int after, double *recall, double *mass) {
    static double w[TMAX * TMAX];
    double sr = 0, sm = 0, pred[TMAX], wt[TMAX];
    int cnt = 0;
    toy cosm = {1, after ? m->base : 0, 0}; /* the predictor: cosine, rotated or not, tau irrelevant */
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            toy_weights(m, ids, T, l, h, w);
            for (int t = k; t < T; t++) {
                for (int s = 0; s <= t; s++) {
                    pred[s] = toy_score(&cosm, ids, l, h, t, s);
                    wt[s] = (float)w[t * T + s]; /* what the probe sees */
                }
                double r, ms;
                score_query(pred, wt, t + 1, k, &r, &ms);
                sr += r, sm += ms, cnt++;
            }
        }
    *recall = sr / cnt;
    *mass = sm / cnt;
}

static void check_topk(toy *m, int exact_after) {
    probe_error err;
    probe_model pm = toy_model(m);
    json_t *res = run_with("topk_prediction", "{\"text\": \"the cat sat on the mat, it was tired\", \"ks\": [2, 4, 8]}",
                           &pm, &err);
    if (!res) {
        test_fail_at(__FILE__, __LINE__, "%s: %s", err.field, err.message);
        return;
    }
    int T = (int)strlen(TEXT), ids[TMAX];
    for (int i = 0; i < T; i++) ids[i] = (unsigned char)TEXT[i];
    const json_t *t = tp_table(res, "topk");
    static const int ks[] = {2, 4, 8};
    for (int j = 0; j < 3; j++) {
        double rb, mb, ra, ma;
        expected_topk(m, ids, T, ks[j], 0, &rb, &mb);
        expected_topk(m, ids, T, ks[j], 1, &ra, &ma);
        if (fabs(tp_cell(t, j, "recall_before") - rb) > 1e-9 || fabs(tp_cell(t, j, "mass_before") - mb) > 1e-6 ||
            fabs(tp_cell(t, j, "recall_after") - ra) > 1e-9 || fabs(tp_cell(t, j, "mass_after") - ma) > 1e-6) {
            test_fail_at(__FILE__, __LINE__, "k=%d: probe %g %g %g %g, here %g %g %g %g", ks[j],
                         tp_cell(t, j, "recall_before"), tp_cell(t, j, "mass_before"), tp_cell(t, j, "recall_after"),
                         tp_cell(t, j, "mass_after"), rb, mb, ra, ma);
            break;
        }
        if (exact_after && tp_cell(t, j, "recall_after") != 1.0) {
            test_fail_at(__FILE__, __LINE__, "k=%d: cosine model, rotated cosine must rank exactly (%g)", ks[j],
                         tp_cell(t, j, "recall_after"));
            break;
        }
        CHECK_NEAR(tp_cell(t, j, "queries"), (T - ks[j]) * L * H, 0);
    }
    json_decref(res);
}

TEST(topk_on_cosine_model_is_exact_after_rotation) {
    toy m = {1, 10000, 0};
    check_topk(&m, 1);
}

TEST(topk_on_dot_model_matches_hand_ranking) {
    toy m = {0, 100, 0};
    check_topk(&m, 0);
}

TEST(model_probes_refuse_bad_params) {
    toy m = {1, 10000, 0};
    probe_model pm = toy_model(&m);
    probe_error err;
    CHECK(run_with("topk_prediction", "{\"ks\": [0]}", &pm, &err) == NULL);
    CHECK(strcmp(err.field, "ks") == 0);
    CHECK(run_with("attention_map", "{\"max_tokens\": 100000}", &pm, &err) == NULL);
    CHECK(strcmp(err.field, "max_tokens") == 0);
    CHECK(run_with("attention_map", "{\"colour\": 1}", &pm, &err) == NULL);
    CHECK(strcmp(err.field, "colour") == 0);
    CHECK_EQ_INT(m.calls, 0);
    /* a model too big for the buffers is refused before any forward pass */
    pm.n_layer = 4096, pm.n_head = 64;
    CHECK(run_with("attention_map", NULL, &pm, &err) == NULL);
    CHECK(strcmp(err.field, "max_tokens") == 0);
    CHECK_EQ_INT(m.calls, 0);
}

static long alloc_left;
static void *failing_malloc(size_t n) { return alloc_left-- > 0 ? malloc(n) : NULL; }

TEST(model_probes_report_json_allocation_failures) {
    toy m = {1, 10000, 0};
    probe_model pm = toy_model(&m);
    static const char *const kinds[] = {"attention_map", "topk_prediction", "sparse_attention"};
    json_t *params = json_loads("{\"text\": \"abcdef\", \"max_tokens\": 5}", 0, NULL);
    CHECK(params != NULL);
    probe_context ctx = {.model = &pm};
    for (int c = 0; c < 3; c++) {
        int ok = 0;
        for (long n = 0; n < 100000 && !ok; n++) {
            json_t *res = NULL;
            probe_error err;
            alloc_left = n;
            json_set_alloc_funcs(failing_malloc, free);
            engine_status st = probe_run(kinds[c], params, &ctx, &res, &err);
            json_set_alloc_funcs(malloc, free);
            if (st == ENGINE_OK) {
                ok = 1;
                json_decref(res);
            } else {
                CHECK_MSG(st == ENGINE_ERR_NOMEM, "%s: allocation %ld: %s", kinds[c], n, err.message);
                CHECK(res == NULL);
            }
        }
        CHECK(ok);
    }
    json_decref(params);
}

static model *tiny_engine_model(int kind) {
    model_config c;
    model_config_defaults(&c);
    c.n_layer = 2, c.n_head = 2, c.d_model = 16, c.seq_len = 32, c.vocab = 256, c.attention = kind;
    model *m = NULL;
    engine_error e;
    if (model_new(&m, &c, 1, 1, 0, &e)) return NULL;
    model_init_params(m, 11);
    return m;
}

TEST(engine_model_through_adapter) {
    model *m = tiny_engine_model(attention_index("cosine_rope"));
    tokenizer *tok = NULL;
    engine_error e;
    CHECK(m != NULL);
    CHECK(tokenizer_new_bytes(&tok, &e) == ENGINE_OK);
    probe_engine_model pm;
    CHECK(probe_engine_model_init(&pm, m, tok, &e) == ENGINE_OK);
    CHECK_EQ_INT(pm.view.head_dim, 8);
    CHECK(pm.view.cosine == 1 && pm.view.rope_base == 10000);
    probe_error err;
    json_t *res = run_with("attention_map", NULL, &pm.view, &err);
    CHECK_MSG(res != NULL, "%s: %s", err.field, err.message);
    /* the model's own entropy and tau, from the same forward pass */
    float ent[4], tau[4];
    model_attention_entropy(m, ent);
    model_tau(m, tau);
    const json_t *heads = tp_table(res, "heads");
    for (int r = 0; r < 4; r++) {
        CHECK_NEAR(tp_cell(heads, r, "tau"), tau[r], 1e-6);
        CHECK_NEAR(tp_cell(heads, r, "tau"), sqrt(8.0), 1e-5); /* tau_init = sqrt(d) */
        CHECK_NEAR(tp_cell(heads, r, "mean_entropy"), ent[r], 1e-4);
    }
    CHECK_NEAR(tp_sum(res, "n_tokens"), 32, 0); /* default text is longer than seq_len */
    CHECK(strcmp(
              json_string_value(json_array_get(json_array_get(json_object_get(tp_table(res, "tokens"), "rows"), 0), 2)),
              "T") == 0);
    json_decref(res);
    res = run_with("topk_prediction", "{\"ks\": [4, 8]}", &pm.view, &err);
    CHECK_MSG(res != NULL, "%s: %s", err.field, err.message);
    const json_t *t = tp_table(res, "topk");
    /* cosine_rope scores are exactly the rotated cosines / tau: ranking must agree (up to float) */
    CHECK(tp_cell(t, 0, "recall_after") > 0.97);
    CHECK(tp_cell(t, 1, "recall_after") > 0.97);
    json_decref(res);
    tokenizer_free(tok);
    model_free(m);
}

int main(void) {
    RUN(attention_map_matches_hand_computation);
    RUN(topk_on_cosine_model_is_exact_after_rotation);
    RUN(topk_on_dot_model_matches_hand_ranking);
    RUN(model_probes_refuse_bad_params);
    RUN(model_probes_report_json_allocation_failures);
    RUN(engine_model_through_adapter);
    return test_summary();
}
