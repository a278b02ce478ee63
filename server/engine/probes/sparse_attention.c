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

#define MAX_TOKENS 256
#define MAX_KS 16
#define MAX_WINDOWS 16

static const double def_ks[] = {1, 2, 4, 8, 16, 32};

static const probe_param params[] = {
    {.name = "text",
     .type = PROBE_PARAM_TEXT,
     .help = "text to run through the model",
     .def_str = "In the beginning the river ran quietly past the mill, and the miller, who had lived by the river "
                "all his life, listened to it every night before he slept. One winter the river froze, and the mill "
                "stood still.",
     .max_len = 8192},
    {.name = "ids",
     .type = PROBE_PARAM_INT_LIST,
     .help = "token ids to run instead of the text (a task corpus has no text tokenizer)",
     .min = 0,
     .max = 1048575,
     .min_len = 0,
     .max_len = MAX_TOKENS + 1},
    {.name = "window",
     .type = PROBE_PARAM_INT,
     .help = "a validation window of the run's corpus instead of the text (-1: the text or ids)",
     .def = -1,
     .min = -1,
     .max = 100000000},
    {.name = "windows",
     .type = PROBE_PARAM_INT,
     .help = "validation windows from `window` that the loss is averaged over (recall and mass: the first)",
     .def = 1,
     .min = 1,
     .max = MAX_WINDOWS},
    {.name = "max_tokens",
     .type = PROBE_PARAM_INT,
     .help = "tokens kept from the start of the input",
     .def = 64,
     .min = 2,
     .max = MAX_TOKENS + 1},
    {.name = "ks",
     .type = PROBE_PARAM_INT_LIST,
     .help = "how many keys each query keeps",
     .min = 1,
     .max = MAX_TOKENS,
     .def_list = def_ks,
     .def_len = 6,
     .min_len = 1,
     .max_len = MAX_KS},
    {.name = "lsh_tables",
     .type = PROBE_PARAM_INT,
     .help = "LSH: hash tables",
     .def = 4,
     .min = 1,
     .max = SPARSE_MAX_TABLES},
    {.name = "lsh_bits",
     .type = PROBE_PARAM_INT,
     .help = "LSH: hyperplanes per table (0: about k keys per bucket)",
     .def = 0,
     .min = 0,
     .max = SPARSE_MAX_LSH_BITS},
    {.name = "lsh_candidates",
     .type = PROBE_PARAM_INT,
     .help = "LSH: most recent bucket mates taken per table (0: k)",
     .def = 0,
     .min = 0,
     .max = 4096},
    {.name = "hamming_bits",
     .type = PROBE_PARAM_INT,
     .help = "Hamming ranking: code length",
     .def = 32,
     .min = 1,
     .max = SPARSE_MAX_HAMMING_BITS},
    {.name = "seed",
     .type = PROBE_PARAM_INT,
     .help = "seed of the hyperplanes",
     .def = 1234,
     .min = 0,
     .max = 2147483647},
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

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    const probe_model *m = ctx->model;
    const int D = m->head_dim;
    if (D < 1 || D > 1024 || (m->rope_base > 0 && D % 2))
        return probe_fail(err, ENGINE_ERR_INVALID, "run", "head_dim %d is not supported", D);
    double ks_d[MAX_KS];
    const int nk = probe_p_list(p, "ks", ks_d, MAX_KS);
    int ids[MAX_TOKENS + 1], n_in = 0, cut = 0;
    char source[64];
    engine_status st =
        probe_model_input(m, p, (int)probe_p_int(p, "max_tokens"), ids, &n_in, &cut, source, sizeof source, err);
    if (st) return st;
    /* attention over at most max_seq positions; the loss also scores the token after them */
    const int T = n_in < m->max_seq ? n_in : m->max_seq;
    const int L = m->n_layer, H = m->n_head;
    const size_t nqk = (size_t)L * H * T * D, nw = (size_t)L * H * T * T;
    float *q = malloc(sizeof(float) * nqk), *k = malloc(sizeof(float) * nqk), *w = malloc(sizeof(float) * nw);
    real *vec = malloc(sizeof(real) * (4 * (size_t)T * D + (size_t)T * T));
    double *theta = malloc(sizeof(double) * (size_t)(3 * D + 1));
    /* acc[lh][pred][k] and per k the random pick's expectation */
    sparse_quality *acc = calloc((size_t)L * H * NP * nk, sizeof *acc);
    double *rnd = calloc((size_t)nk, sizeof(double));
    /* loss[pred][k] (pred 0: dense, then preds[]), summed over the windows */
    double *loss = calloc((size_t)(NP + 1) * nk, sizeof(double));
    int *wids = malloc(sizeof(int) * (MAX_TOKENS + 1));
    sparse_ws *ws = NULL;
    if (!q || !k || !w || !vec || !theta || !acc || !rnd || !loss || !wids) {
        st = probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
        goto done;
    }
    engine_error e = {0};
    if ((st = m->inspect(m->self, ids, T, q, k, w, NULL, &e))) {
        st = probe_fail(err, st, "run", "forward pass failed: %s", e.message);
        goto done;
    }
    real *qu = vec, *ku = qu + (size_t)T * D, *qr = ku + (size_t)T * D, *kr = qr + (size_t)T * D,
         *att = kr + (size_t)T * D;
    double *tmp = theta + D;
    if (m->rope_base > 0) probe_rope_thetas(D, m->rope_base, theta);
    int lsh_bits_used[MAX_KS] = {0};

    for (int pi = 0; pi < NP; pi++)
        for (int j = 0; j < nk; j++) {
            sparse_config c;
            sparse_config_defaults(&c, preds[pi], (int)ks_d[j]);
            c.lsh_tables = (int)probe_p_int(p, "lsh_tables");
            c.lsh_bits = (int)probe_p_int(p, "lsh_bits");
            c.lsh_candidates = (int)probe_p_int(p, "lsh_candidates");
            c.hamming_bits = (int)probe_p_int(p, "hamming_bits");
            c.seed = (uint64_t)probe_p_int(p, "seed");
            if ((st = sparse_ws_new(&ws, &c, T, D, &e))) {
                st = probe_fail(err, st, st == ENGINE_ERR_NOMEM ? "" : "ks", "%s", e.message);
                goto done;
            }
            if (preds[pi] == SPARSE_LSH) lsh_bits_used[j] = sparse_ws_config(ws)->lsh_bits;
            for (int lh = 0; lh < L * H; lh++) {
                head_vectors(m, q + (size_t)lh * T * D, k + (size_t)lh * T * D, T, D, theta, qu, ku, qr, kr, tmp);
                for (size_t i = 0; i < (size_t)T * T; i++) att[i] = (real)w[(size_t)lh * T * T + i];
                sparse_input in = {.T = T,
                                   .d = D,
                                   .q = qu,
                                   .k = ku,
                                   .v = qu,
                                   .q_stride = D,
                                   .k_stride = D,
                                   .v_stride = D,
                                   .scale = 1,
                                   .q_unrot = qr,
                                   .k_unrot = kr,
                                   .unrot_stride = D};
                if ((st = sparse_select(ws, &in, &e))) {
                    st = probe_fail(err, st, "run", "%s", e.message);
                    goto done;
                }
                sparse_quality_add(ws, att, T, &acc[((size_t)lh * NP + pi) * nk + j]);
            }
            sparse_ws_free(ws);
            ws = NULL;
        }
    for (int j = 0; j < nk; j++) {
        double s = 0;
        long n = 0;
        for (int t = (int)ks_d[j]; t < T; t++) s += ks_d[j] / (t + 1), n++;
        rnd[j] = n ? s / n : NAN;
    }
    /* the loss with each predictor, next to dense, on the same tokens (or windows) */
    const int from_window = !strncmp(source, "validation window", 17);
    const int n_windows = from_window ? (int)probe_p_int(p, "windows") : 1;
    int loss_tokens = 0;
    if (m->sparse_loss) {
        const long w0 = from_window ? (json_is_integer(json_object_get(p, "window")) &&
                                               json_integer_value(json_object_get(p, "window")) >= 0
                                           ? (long)json_integer_value(json_object_get(p, "window"))
                                           : 0)
                                    : 0;
        for (int wi = 0; wi < n_windows; wi++) {
            int nw_tok = n_in;
            const int *src = ids;
            if (wi > 0) {
                if ((st = m->val_window(m->self, w0 + wi, wids, n_in, &nw_tok, &e))) {
                    st = probe_fail(err, st, "windows", "reading window %ld failed: %s", w0 + wi, e.message);
                    goto done;
                }
                src = wids;
            }
            loss_tokens += nw_tok - 1;
            /* dense (row 0) does not depend on k: computed once, at k index 0 */
            for (int pi = 0; pi <= NP; pi++)
                for (int j = 0; j < (pi ? nk : 1); j++) {
                    sparse_config c;
                    sparse_config_defaults(&c, pi ? preds[pi - 1] : SPARSE_DENSE, (int)ks_d[j]);
                    c.lsh_tables = (int)probe_p_int(p, "lsh_tables");
                    c.lsh_bits = (int)probe_p_int(p, "lsh_bits");
                    c.lsh_candidates = (int)probe_p_int(p, "lsh_candidates");
                    c.hamming_bits = (int)probe_p_int(p, "hamming_bits");
                    c.seed = (uint64_t)probe_p_int(p, "seed");
                    double v = 0;
                    if (probe_cancelled(ctx)) {
                        st = probe_fail(err, ENGINE_ERR_CANCELLED, "", "cancelled");
                        goto done;
                    }
                    if ((st = m->sparse_loss(m->self, src, nw_tok, &c, &v, &e))) {
                        st = probe_fail(err, st, "run", "the %s loss failed: %s", sparse_predictor_name(c.predictor),
                                        e.message);
                        goto done;
                    }
                    loss[(size_t)pi * nk + j] += v / n_windows;
                }
        }
        for (int j = 1; j < nk; j++) loss[j] = loss[0];
    }

    static const char *const cols[] = {"k", "topk", "lsh", "hamming", "unrotated", "window", "random", "queries"};
    json_t *rrows = probe_table(out, "recall", cols, 8);
    json_t *mrows = probe_table(out, "mass", cols, 8);
    json_t *krows = probe_table(out, "keys_per_query", cols, 8);
    static const char *const hcols[] = {"layer", "head", "predictor", "k", "recall", "mass", "keys_per_query"};
    json_t *hrows = probe_table(out, "by_head", hcols, 7);
    for (int j = 0; j < nk; j++) {
        double r[NP], ms[NP], kq[NP];
        long queries = 0;
        for (int pi = 0; pi < NP; pi++) {
            sparse_quality t = {0};
            for (int lh = 0; lh < L * H; lh++) {
                const sparse_quality *a = &acc[((size_t)lh * NP + pi) * nk + j];
                t.recall += a->recall, t.mass += a->mass, t.keys += a->keys, t.queries += a->queries;
                double c = a->queries ? (double)a->queries : NAN;
                probe_row(out, hrows, "iisiddd", lh / H, lh % H, sparse_predictor_name(preds[pi]), (int)ks_d[j],
                          a->recall / c, a->mass / c, a->keys / c);
            }
            double c = t.queries ? (double)t.queries : NAN;
            r[pi] = t.recall / c, ms[pi] = t.mass / c, kq[pi] = t.keys / c;
            queries = t.queries;
        }
        probe_row(out, rrows, "iddddddi", (int)ks_d[j], r[0], r[1], r[2], r[3], r[4], rnd[j], (int)queries);
        probe_row(out, mrows, "iddddddi", (int)ks_d[j], ms[0], ms[1], ms[2], ms[3], ms[4], rnd[j], (int)queries);
        probe_row(out, krows, "iddddddi", (int)ks_d[j], kq[0], kq[1], kq[2], kq[3], kq[4], ks_d[j], (int)queries);
    }
    if (m->sparse_loss) {
        static const char *const lcols[] = {"k", "dense", "topk", "lsh", "hamming", "unrotated", "window"};
        json_t *lrows = probe_table(out, "loss", lcols, 7);
        for (int j = 0; j < nk; j++) {
            const double *lv = loss;
            probe_row(out, lrows, "idddddd", (int)ks_d[j], lv[j], lv[nk + j], lv[2 * nk + j], lv[3 * nk + j],
                      lv[4 * nk + j], lv[5 * nk + j]);
        }
        probe_summary_num(out, "dense_loss", loss[0]);
        probe_summary_int(out, "loss_windows", n_windows);
        probe_summary_int(out, "loss_positions", loss_tokens);
    }
    probe_summary_str(out, "input", source);
    probe_summary_int(out, "n_tokens", T);
    probe_summary_bool(out, "truncated", cut);
    probe_summary_bool(out, "rope", m->rope_base > 0);
    probe_summary_bool(out, "cosine_attention", m->cosine);
    probe_summary_int(out, "lsh_tables", probe_p_int(p, "lsh_tables"));
    probe_summary_int(out, "lsh_bits_at_first_k", lsh_bits_used[0]);
    probe_summary_int(out, "hamming_bits", probe_p_int(p, "hamming_bits"));
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
done:
    sparse_ws_free(ws);
    free(q), free(k), free(w), free(vec), free(theta), free(acc), free(rnd), free(loss), free(wids);
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
