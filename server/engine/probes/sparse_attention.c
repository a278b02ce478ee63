/* sparse_attention: seed 000's third question as an O(N k) attention mode, on a run's real queries
 * and keys. Each query keeps k keys chosen by a predictor (sparse.h): exact top-k by score (the
 * upper bound), angular LSH buckets over the vectors the variant scores, Hamming ranking of the
 * same hyperplane codes, the cosine of the unrotated vectors, and the naive window of the k most
 * recent keys. For every predictor and k: recall@k (the share of the true top-k attention weights
 * found; ties count as found) and the attention mass the k picks hold, per head and overall;
 * queries with no more than k keys are skipped (any choice is perfect there), and a random pick's
 * expectation is given for scale. A softmax renormalised over the picks differs from dense
 * attention by exactly 1 - mass in total variation, so mass is what the output loses.
 * The adapter gives q and k before the rotary embedding; the probe forms what the score uses from
 * the run's own rules (normalised with the engine's epsilon for cosine attention, then rotated).
 * Next to that, where the adapter can compute it (probe_model.sparse_loss), the model's next-token
 * loss with every head under each predictor and k, and dense: on the same tokens, or averaged over
 * `windows` validation windows from `window` (the run's validation loss is over such windows).
 * Input: token ids, a validation window of the run's corpus, or text (probe_model_input); a run
 * trained on a task corpus has no text tokenizer and reads validation window 0 by default. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "probe_impl.h"
#include "rope_math.h"
#include "sparse.h"

#define MAX_WINDOWS 16

static const double def_ks[] = {1, 2, 4, 8, 16, 32};

static const probe_param params[] = {
    PROBE_ROW_MODEL_TEXT(probe_model_default_text, 8192),
    {.name = "ids",
     .type = PROBE_PARAM_INT_LIST,
     .help = "token ids to run instead of the text (a task corpus has no text tokenizer)",
     .min = 0,
     .max = 1048575,
     .min_len = 0,
     .max_len = PROBE_MODEL_MAX_TOKENS + 1},
    PROBE_ROW_INT("window", "a validation window of the run's corpus instead of the text (-1: the text or ids)", -1, -1,
                  100000000),
    PROBE_ROW_INT("windows",
                  "validation windows from `window` that the loss is averaged over (recall and mass: the first)", 1, 1,
                  MAX_WINDOWS),
    PROBE_ROW_MAX_TOKENS("tokens kept from the start of the input", 2, PROBE_MODEL_MAX_TOKENS + 1),
    PROBE_ROW_MODEL_KS(def_ks),
    PROBE_ROW_INT("lsh_tables", "LSH: hash tables", 4, 1, SPARSE_MAX_TABLES),
    PROBE_ROW_INT("lsh_bits", "LSH: hyperplanes per table (0: about k keys per bucket)", 0, 0, SPARSE_MAX_LSH_BITS),
    PROBE_ROW_INT("lsh_candidates", "LSH: most recent bucket mates taken per table (0: k)", 0, 0, 4096),
    PROBE_ROW_INT("hamming_bits", "Hamming ranking: code length", 32, 1, SPARSE_MAX_HAMMING_BITS),
    PROBE_ROW_SEED("seed of the hyperplanes"),
};

/* The predictors reported, in column order. */
static const sparse_predictor preds[] = {SPARSE_TOPK, SPARSE_LSH, SPARSE_HAMMING, SPARSE_UNROTATED, SPARSE_WINDOW};
#define NP 5

/* One head's vectors as the score uses them (used) and as projected (raw), in real. */
static void head_vectors(const probe_model *m, const float *Q, const float *K, int T, int D, const double *theta,
                         real *qu, real *ku, real *qr, real *kr, double *tmp) {
    for (int w = 0; w < 2; w++) {
        const float *src = w ? K : Q;
        real *used = w ? ku : qu, *raw = w ? kr : qr;
        for (int t = 0; t < T; t++) {
            const float *x = src + (size_t)t * D;
            double n2 = 0;
            for (int i = 0; i < D; i++) raw[(size_t)t * D + i] = (real)x[i], n2 += (double)x[i] * x[i];
            double r = m->cosine ? 1.0 / sqrt(n2 + COSINE_NORM_EPS) : 1.0;
            for (int i = 0; i < D; i++) tmp[i] = x[i] * r;
            if (m->rope_base > 0)
                probe_rope_rotate(tmp, tmp + D, D, theta, t,
                                  m->rope_half_split ? PROBE_ROPE_HALF_SPLIT : PROBE_ROPE_INTERLEAVED);
            else
                memcpy(tmp + D, tmp, sizeof(double) * (size_t)D);
            for (int i = 0; i < D; i++) used[(size_t)t * D + i] = (real)tmp[D + i];
        }
    }
}

/* The settings of predictor pred at k from the resolved parameters. */
static void config_for(const json_t *p, sparse_predictor pred, int k, sparse_config *c) {
    sparse_config_defaults(c, pred, k);
    c->lsh_tables = (int)probe_p_int(p, "lsh_tables");
    c->lsh_bits = (int)probe_p_int(p, "lsh_bits");
    c->lsh_candidates = (int)probe_p_int(p, "lsh_candidates");
    c->hamming_bits = (int)probe_p_int(p, "hamming_bits");
    c->seed = (uint64_t)probe_p_int(p, "seed");
}

/* What the measurements share: the model, its forward pass over T tokens, the k values, and one
 * head's working arrays (made once per run). */
typedef struct {
    const probe_model *m;
    const json_t *p;
    probe_model_pass pass;
    int T, D, L, H, nk;
    const double *ks;
    real *qu, *ku, *qr, *kr, *att; /* the head's vectors used and raw [T][D], its weights [T][T] */
    double *theta, *tmp;           /* rotary angles [D], head_vectors' scratch [2 D] */
    real *vec;                     /* qu ... att, in one allocation */
} sparse_run;

/* Makes r's working arrays for its T and D and its rotary angles: 0, or -1 when an allocation
 * failed (what was made is freed with the rest by run). */
static int run_buffers(sparse_run *r) {
    const size_t TD = (size_t)r->T * r->D;
    r->vec = malloc(sizeof(real) * (4 * TD + (size_t)r->T * r->T));
    r->theta = malloc(sizeof(double) * (size_t)(3 * r->D + 1));
    if (!r->vec || !r->theta) return -1;
    r->qu = r->vec, r->ku = r->qu + TD, r->qr = r->ku + TD, r->kr = r->qr + TD, r->att = r->kr + TD;
    r->tmp = r->theta + r->D;
    if (r->m->rope_base > 0) probe_rope_thetas(r->D, r->m->rope_base, r->theta);
    return 0;
}

/* Every head's picks by ws, added to acc[lh * stride] (recall, mass and keys per query). */
static engine_status select_heads(sparse_run *r, sparse_ws *ws, sparse_quality *acc, size_t stride, probe_error *err) {
    const int T = r->T, D = r->D;
    engine_error e = {0};
    for (int lh = 0; lh < r->L * r->H; lh++) {
        head_vectors(r->m, r->pass.q + (size_t)lh * T * D, r->pass.k + (size_t)lh * T * D, T, D, r->theta, r->qu, r->ku,
                     r->qr, r->kr, r->tmp);
        for (size_t i = 0; i < (size_t)T * T; i++) r->att[i] = (real)r->pass.w[(size_t)lh * T * T + i];
        sparse_input in = {.T = T,
                           .d = D,
                           .q = r->qu,
                           .k = r->ku,
                           .v = r->qu,
                           .q_stride = D,
                           .k_stride = D,
                           .v_stride = D,
                           .scale = 1,
                           .q_unrot = r->qr,
                           .k_unrot = r->kr,
                           .unrot_stride = D};
        engine_status st = sparse_select(ws, &in, &e);
        if (st) return probe_fail(err, st, "run", "%s", e.message);
        sparse_quality_add(ws, r->att, T, &acc[(size_t)lh * stride]);
    }
    return ENGINE_OK;
}

/* acc[lh][pred][k]: every predictor's quality at every k on every head; lsh_bits[k]: the LSH
 * width used at k. */
static engine_status measure_quality(sparse_run *r, sparse_quality *acc, int *lsh_bits, probe_error *err) {
    engine_error e = {0};
    for (int pi = 0; pi < NP; pi++)
        for (int j = 0; j < r->nk; j++) {
            sparse_config c;
            sparse_ws *ws = NULL;
            config_for(r->p, preds[pi], (int)r->ks[j], &c);
            engine_status st = sparse_ws_new(&ws, &c, r->T, r->D, &e);
            if (st) return probe_fail(err, st, st == ENGINE_ERR_NOMEM ? "" : "ks", "%s", e.message);
            if (preds[pi] == SPARSE_LSH) lsh_bits[j] = sparse_ws_config(ws)->lsh_bits;
            st = select_heads(r, ws, acc + (size_t)pi * r->nk + j, (size_t)NP * r->nk, err);
            sparse_ws_free(ws);
            if (st) return st;
        }
    return ENGINE_OK;
}

/* Adds the loss of n tokens src under every predictor and k (row 0: dense, once, at k index 0),
 * divided by n_windows, to loss[pred][k]. */
static engine_status add_losses(const sparse_run *r, const probe_context *ctx, const int *src, int n, int n_windows,
                                double *loss, probe_error *err) {
    engine_error e = {0};
    for (int pi = 0; pi <= NP; pi++)
        for (int j = 0; j < (pi ? r->nk : 1); j++) {
            sparse_config c;
            config_for(r->p, pi ? preds[pi - 1] : SPARSE_DENSE, (int)r->ks[j], &c);
            double v = 0;
            if (probe_cancelled(ctx)) return probe_fail(err, ENGINE_ERR_CANCELLED, "", "cancelled");
            engine_status st = r->m->sparse_loss(r->m->self, src, n, &c, &v, &e);
            if (st)
                return probe_fail(err, st, "run", "the %s loss failed: %s", sparse_predictor_name(c.predictor),
                                  e.message);
            loss[(size_t)pi * r->nk + j] += v / n_windows;
        }
    return ENGINE_OK;
}

/* loss[pred][k] averaged over n_windows windows: the input ids (n_in tokens), then the validation
 * windows after w0; *positions: the positions scored. */
static engine_status measure_loss(const sparse_run *r, const probe_context *ctx, const int *ids, int n_in, long w0,
                                  int n_windows, double *loss, int *positions, probe_error *err) {
    int wids[PROBE_MODEL_MAX_TOKENS + 1];
    engine_error e = {0};
    for (int wi = 0; wi < n_windows; wi++) {
        int n = n_in;
        const int *src = ids;
        if (wi > 0) {
            engine_status st = r->m->val_window(r->m->self, w0 + wi, wids, n_in, &n, &e);
            if (st) return probe_fail(err, st, "windows", "reading window %ld failed: %s", w0 + wi, e.message);
            src = wids;
        }
        *positions += n - 1;
        engine_status st = add_losses(r, ctx, src, n, n_windows, loss, err);
        if (st) return st;
    }
    for (int j = 1; j < r->nk; j++) loss[j] = loss[0];
    return ENGINE_OK;
}

/* The tables "recall", "mass", "keys_per_query" (per k: each predictor over every head, a random
 * pick's expectation rnd[k], the queries counted) and "by_head". */
static void quality_tables(probe_out *out, const sparse_run *r, const sparse_quality *acc, const double *rnd) {
    const int nk = r->nk, H = r->H;
    static const char *const cols[] = {"k", "topk", "lsh", "hamming", "unrotated", "window", "random", "queries"};
    json_t *rrows = probe_table(out, "recall", cols, 8);
    json_t *mrows = probe_table(out, "mass", cols, 8);
    json_t *krows = probe_table(out, "keys_per_query", cols, 8);
    static const char *const hcols[] = {"layer", "head", "predictor", "k", "recall", "mass", "keys_per_query"};
    json_t *hrows = probe_table(out, "by_head", hcols, 7);
    for (int j = 0; j < nk; j++) {
        double rc[NP], ms[NP], kq[NP];
        long queries = 0;
        for (int pi = 0; pi < NP; pi++) {
            sparse_quality t = {0};
            for (int lh = 0; lh < r->L * H; lh++) {
                const sparse_quality *a = &acc[((size_t)lh * NP + pi) * nk + j];
                t.recall += a->recall, t.mass += a->mass, t.keys += a->keys, t.queries += a->queries;
                double c = a->queries ? (double)a->queries : NAN;
                probe_row(out, hrows, "iisiddd", lh / H, lh % H, sparse_predictor_name(preds[pi]), (int)r->ks[j],
                          a->recall / c, a->mass / c, a->keys / c);
            }
            double c = t.queries ? (double)t.queries : NAN;
            rc[pi] = t.recall / c, ms[pi] = t.mass / c, kq[pi] = t.keys / c;
            queries = t.queries;
        }
        const int k = (int)r->ks[j];
        probe_row(out, rrows, "iddddddi", k, rc[0], rc[1], rc[2], rc[3], rc[4], rnd[j], (int)queries);
        probe_row(out, mrows, "iddddddi", k, ms[0], ms[1], ms[2], ms[3], ms[4], rnd[j], (int)queries);
        probe_row(out, krows, "iddddddi", k, kq[0], kq[1], kq[2], kq[3], kq[4], r->ks[j], (int)queries);
    }
}

/* The table "loss" and its summary figures. */
static void loss_table(probe_out *out, const double *loss, const double *ks, int nk, int n_windows, int positions) {
    static const char *const lcols[] = {"k", "dense", "topk", "lsh", "hamming", "unrotated", "window"};
    json_t *lrows = probe_table(out, "loss", lcols, 7);
    for (int j = 0; j < nk; j++)
        probe_row(out, lrows, "idddddd", (int)ks[j], loss[j], loss[nk + j], loss[2 * nk + j], loss[3 * nk + j],
                  loss[4 * nk + j], loss[5 * nk + j]);
    probe_summary_num(out, "dense_loss", loss[0]);
    probe_summary_int(out, "loss_windows", n_windows);
    probe_summary_int(out, "loss_positions", positions);
}

/* The summary figures about the input and the predictors, and the charts. */
static void sparse_summary(probe_out *out, const sparse_run *r, const char *source, int cut, int lsh_bits_at_first_k) {
    const probe_model *m = r->m;
    probe_summary_str(out, "input", source);
    probe_summary_int(out, "n_tokens", r->T);
    probe_summary_bool(out, "truncated", cut);
    probe_summary_bool(out, "rope", m->rope_base > 0);
    probe_summary_bool(out, "cosine_attention", m->cosine);
    probe_summary_int(out, "lsh_tables", probe_p_int(r->p, "lsh_tables"));
    probe_summary_int(out, "lsh_bits_at_first_k", lsh_bits_at_first_k);
    probe_summary_int(out, "hamming_bits", probe_p_int(r->p, "hamming_bits"));
    probe_summary_str(out, "topk_predictor",
                      m->cosine ? "the score itself: keys ranked by cos(R q^, R k^), the cosine of the rotated unit "
                                  "vectors (tau only sharpens it), so the picks are the true top-k weights; recall 1 "
                                  "up to float ties, the upper bound for any predictor of k keys"
                                : (m->rope_base > 0 ? "keys ranked by the score (R q).(R k), rotated dot product: the "
                                                      "true top-k weights, the upper bound for any predictor of k keys"
                                                    : "keys ranked by the score q.k: the true top-k weights, the upper "
                                                      "bound for any predictor of k keys"));
    probe_summary_str(out, "lsh_predictor",
                      m->cosine ? "random hyperplanes over the very unit vectors that are scored: a bucket collision "
                                  "per bit has probability 1 - angle/pi, angular nearest neighbours of the score"
                                : "random hyperplanes over the scored vectors' directions; their lengths, which the "
                                  "score also uses, are ignored");
    static const char *const y[] = {"topk", "lsh", "hamming", "unrotated", "window", "random", NULL};
    probe_chart(out, "recall", "line", "k", y, "recall@k of each predictor against the true attention", 1);
    probe_chart(out, "mass", "line", "k", y, "attention mass held by the k keys each predictor picks", 1);
    if (m->sparse_loss) {
        static const char *const ly[] = {"dense", "topk", "lsh", "hamming", "unrotated", "window", NULL};
        probe_chart(out, "loss", "line", "k", ly, "validation loss with each predictor's k keys per query, and dense",
                    1);
    }
}

/* The validation window the loss starts from: `window` when the input is one (else 0). */
static long first_window(const json_t *p) {
    const json_t *w = json_object_get(p, "window");
    return json_is_integer(w) && json_integer_value(w) >= 0 ? (long)json_integer_value(w) : 0;
}

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    sparse_run r = {
        .m = ctx->model, .p = p, .D = ctx->model->head_dim, .L = ctx->model->n_layer, .H = ctx->model->n_head};
    if (r.D < 1 || r.D > 1024 || (r.m->rope_base > 0 && r.D % 2))
        return probe_fail(err, ENGINE_ERR_INVALID, "run", "head_dim %d is not supported", r.D);
    double ks[PROBE_MODEL_MAX_KS];
    r.nk = probe_p_list(p, "ks", ks, PROBE_MODEL_MAX_KS), r.ks = ks;
    int ids[PROBE_MODEL_MAX_TOKENS + 1], n_in = 0, cut = 0;
    char source[64];
    engine_status st =
        probe_model_input(r.m, p, (int)probe_p_int(p, "max_tokens"), ids, &n_in, &cut, source, sizeof source, err);
    if (st) return st;
    /* attention over at most max_seq positions; the loss also scores the token after them */
    r.T = n_in < r.m->max_seq ? n_in : r.m->max_seq;
    /* acc[lh][pred][k]; per k the random pick's expectation; loss[pred][k] (pred 0: dense, then
     * preds[]), summed over the windows */
    sparse_quality *acc = calloc((size_t)r.L * r.H * NP * r.nk, sizeof *acc);
    double *rnd = calloc((size_t)r.nk, sizeof(double)), *loss = calloc((size_t)(NP + 1) * r.nk, sizeof(double));
    if ((st = probe_model_forward(r.m, ids, r.T, 1, 0, &r.pass, err))) goto done;
    if (run_buffers(&r) || !acc || !rnd || !loss) {
        st = probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
        goto done;
    }
    int lsh_bits[PROBE_MODEL_MAX_KS] = {0};
    if ((st = measure_quality(&r, acc, lsh_bits, err))) goto done;
    for (int j = 0; j < r.nk; j++) {
        double s = 0;
        long n = 0;
        for (int t = (int)ks[j]; t < r.T; t++) s += ks[j] / (t + 1), n++;
        rnd[j] = n ? s / n : NAN;
    }
    /* the loss with each predictor, next to dense, on the same tokens (or windows) */
    const int from_window = !strncmp(source, "validation window", 17);
    const int n_windows = from_window ? (int)probe_p_int(p, "windows") : 1;
    int positions = 0;
    if (r.m->sparse_loss &&
        (st = measure_loss(&r, ctx, ids, n_in, from_window ? first_window(p) : 0, n_windows, loss, &positions, err)))
        goto done;
    quality_tables(out, &r, acc, rnd);
    if (r.m->sparse_loss) loss_table(out, loss, ks, r.nk, n_windows, positions);
    sparse_summary(out, &r, source, cut, lsh_bits[0]);
done:
    probe_model_pass_free(&r.pass);
    free(r.vec), free(r.theta), free(acc), free(rnd), free(loss);
    return st;
}

const probe_kind probe_kind_sparse_attention = {
    .name = "sparse_attention",
    .title = "Sparse attention predictors (trained run)",
    .description = "k keys per query chosen by exact top-k, angular LSH, Hamming codes, unrotated cosine or a "
                   "window: recall@k and attention mass captured, per head and overall, and the model's loss with "
                   "each predictor next to dense",
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .needs_model = 1,
    .run = run,
    .estimate = probe_estimate_sparse_attention,
};
