/* topk_prediction: seed 000's third open question, on a run's real queries and keys. If keys are
 * ranked by the cosine of the normalised q and k (before the rotary embedding, and after it),
 * how many of the true top-k attention weights does that ranking find (recall@k), and how much
 * of the attention mass do its k picks hold? Queries with no more than k keys to choose from are
 * skipped (any choice is perfect there); a random pick's expectation is given for scale.
 * For cosine_rope the cosine after rotation is the score itself (cos(R q^, R k^) / tau, tau > 0
 * only sharpens it), so its "after rotation" recall is 1 by construction, not a finding: the result
 * says so (after_rotation_is_the_score, note). */
#include <math.h>
#include <stdlib.h>

#include "probe_impl.h"
#include "rope_math.h"

#define MAX_TOKENS 256
#define MAX_KS 16

static const double def_ks[] = {4, 8, 16, 32};

static const probe_param params[] = {
    {.name = "text",
     .type = PROBE_PARAM_TEXT,
     .help = "text to run through the model",
     .def_str = "In the beginning the river ran quietly past the mill, and the miller, who had lived by the river "
                "all his life, listened to it every night before he slept. One winter the river froze, and the mill "
                "stood still.",
     .max_len = 8192},
    {.name = "max_tokens",
     .type = PROBE_PARAM_INT,
     .help = "tokens kept from the start of the text",
     .def = 64,
     .min = 2,
     .max = MAX_TOKENS},
    {.name = "ks",
     .type = PROBE_PARAM_INT_LIST,
     .help = "how many keys each query keeps",
     .min = 1,
     .max = MAX_TOKENS,
     .def_list = def_ks,
     .def_len = 4,
     .min_len = 1,
     .max_len = MAX_KS},
};

/* idx[0..k) = the k largest of v[0..n), largest first; ties go to the lower index. O(n k). */
static void top_k(const double *v, int n, int k, int *idx, unsigned char *taken) {
    for (int i = 0; i < n; i++) taken[i] = 0;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!taken[i] && (best < 0 || v[i] > v[best])) best = i;
        idx[j] = best;
        taken[best] = 1;
    }
}

static void rotate_f(const float *x, double *out, int d, const double *theta, double pos, int half) {
    double tmp[1024];
    for (int i = 0; i < d; i++) tmp[i] = x[i];
    probe_rope_rotate(tmp, out, d, theta, pos, half ? PROBE_ROPE_HALF_SPLIT : PROBE_ROPE_INTERLEAVED);
}

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    const probe_model *m = ctx->model;
    int D = m->head_dim;
    if (D < 1 || D > 1024 || (m->rope_base > 0 && D % 2))
        return probe_fail(err, ENGINE_ERR_INVALID, "run", "head_dim %d is not supported", D);
    double ks_d[MAX_KS];
    int nk = probe_p_list(p, "ks", ks_d, MAX_KS);
    int ids[MAX_TOKENS + 1], T = 0, cut = 0;
    char source[64];
    /* text, or validation window 0 of a run without a text tokenizer (a task corpus) */
    engine_status st =
        probe_model_input(m, p, (int)probe_p_int(p, "max_tokens"), ids, &T, &cut, source, sizeof source, err);
    if (st) return st;
    if (T > m->max_seq) T = m->max_seq;
    int L = m->n_layer, H = m->n_head;
    size_t nqk = (size_t)L * H * T * D, nw = (size_t)L * H * T * T;
    float *q = malloc(sizeof(float) * nqk), *k = malloc(sizeof(float) * nqk), *w = malloc(sizeof(float) * nw);
    /* scratch: true weights, two predictors, rotated k's (T x D), rotated q, norms, theta, index lists */
    double *scr = malloc(sizeof(double) * (size_t)(3 * T + T * D + 2 * D + T + 1));
    int *idx = malloc(sizeof(int) * (size_t)(3 * T));
    unsigned char *taken = malloc((size_t)T);
    /* acc[layer][head][k][4]: recall before, mass before, recall after, mass after; cnt: queries used */
    double *acc = calloc((size_t)L * H * nk * 6, sizeof(double));
    if (!q || !k || !w || !scr || !idx || !taken || !acc) {
        st = probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
        goto done;
    }
    engine_error e = {0};
    if ((st = m->inspect(m->self, ids, T, q, k, w, NULL, &e))) {
        st = probe_fail(err, st, "run", "forward pass failed: %s", e.message);
        goto done;
    }
    double *wt = scr, *pb = wt + T, *pa = pb + T, *kr = pa + T, *qr = kr + (size_t)T * D, *theta = qr + D,
           *kn = theta + D;
    int *truth = idx, *pick_b = idx + T, *pick_a = idx + 2 * T;
    int rope = m->rope_base > 0;
    if (rope) probe_rope_thetas(D, m->rope_base, theta);

    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            size_t lh = (size_t)l * H + h;
            const float *Q = q + lh * T * D, *K = k + lh * T * D, *W = w + lh * T * T;
            for (int s = 0; s < T; s++) {
                if (rope)
                    rotate_f(K + (size_t)s * D, kr + (size_t)s * D, D, theta, s, m->rope_half_split);
                else
                    for (int i = 0; i < D; i++) kr[(size_t)s * D + i] = K[(size_t)s * D + i];
                double n2 = 0;
                for (int i = 0; i < D; i++) n2 += (double)K[(size_t)s * D + i] * K[(size_t)s * D + i];
                kn[s] = sqrt(n2);
            }
            for (int t = 0; t < T; t++) {
                const float *qt = Q + (size_t)t * D;
                if (rope)
                    rotate_f(qt, qr, D, theta, t, m->rope_half_split);
                else
                    for (int i = 0; i < D; i++) qr[i] = qt[i];
                double qn = 0;
                for (int i = 0; i < D; i++) qn += (double)qt[i] * qt[i];
                qn = sqrt(qn);
                int n = t + 1;
                for (int s = 0; s < n; s++) {
                    double db = 0, da = 0;
                    for (int i = 0; i < D; i++) {
                        db += (double)qt[i] * K[(size_t)s * D + i];
                        da += qr[i] * kr[(size_t)s * D + i];
                    }
                    double nn = qn * kn[s] > 0 ? qn * kn[s] : 1;
                    pb[s] = db / nn, pa[s] = da / nn, wt[s] = W[(size_t)t * T + s];
                }
                for (int j = 0; j < nk; j++) {
                    int kk = (int)ks_d[j];
                    if (n <= kk) continue;
                    top_k(wt, n, kk, truth, taken);
                    top_k(pb, n, kk, pick_b, taken);
                    top_k(pa, n, kk, pick_a, taken);
                    double *a = acc + (lh * nk + j) * 6;
                    for (int x = 0; x < n; x++) taken[x] = 0;
                    for (int x = 0; x < kk; x++) taken[truth[x]] = 1;
                    for (int x = 0; x < kk; x++) {
                        a[0] += taken[pick_b[x]] / (double)kk, a[1] += wt[pick_b[x]];
                        a[2] += taken[pick_a[x]] / (double)kk, a[3] += wt[pick_a[x]];
                    }
                    a[4] += 1, a[5] += (double)kk / n; /* a random pick's expected recall and mass */
                }
            }
        }

    static const char *const cols[] = {"k",          "recall_before", "mass_before", "recall_after",
                                       "mass_after", "recall_random", "queries"};
    json_t *rows = probe_table(out, "topk", cols, 7);
    static const char *const hcols[] = {"layer",        "head",        "k",         "recall_before",
                                        "recall_after", "mass_before", "mass_after"};
    json_t *hrows = probe_table(out, "topk_by_head", hcols, 7);
    for (int j = 0; j < nk; j++) {
        double tot[6] = {0};
        for (size_t lh = 0; lh < (size_t)L * H; lh++) {
            const double *a = acc + (lh * nk + j) * 6;
            for (int x = 0; x < 6; x++) tot[x] += a[x];
            double c = a[4] > 0 ? a[4] : NAN;
            probe_row(out, hrows, "iiidddd", (int)(lh / H), (int)(lh % H), (int)ks_d[j], a[0] / c, a[2] / c, a[1] / c,
                      a[3] / c);
        }
        double c = tot[4] > 0 ? tot[4] : NAN;
        probe_row(out, rows, "idddddd", (int)ks_d[j], tot[0] / c, tot[1] / c, tot[2] / c, tot[3] / c, tot[5] / c,
                  (double)tot[4]);
    }
    probe_summary_int(out, "n_tokens", T);
    probe_summary_bool(out, "truncated", cut);
    probe_summary_bool(out, "rope", rope);
    probe_summary_bool(out, "cosine_attention", m->cosine);
    probe_summary_str(out, "input", source);
    /* cosine attention scores by the cosine of the rotated unit vectors: ranking by it is ranking
     * by the score, so recall_after is 1 (up to float ties) by construction */
    const int after_is_score = m->cosine != 0;
    probe_summary_bool(out, "after_rotation_is_the_score", after_is_score);
    probe_summary_str(out, "note",
                      after_is_score
                          ? "cosine attention: the cosine after rotation IS the score (cos(R q^, R k^) / tau), so "
                            "recall_after and mass_after are 1 and the true top-k mass by construction, not a "
                            "prediction; recall_before (position left out) is the figure that tests a predictor"
                          : (rope ? "rotated dot product: the score also weighs the vectors' lengths, so the cosine "
                                    "after rotation is a genuine predictor of the score's top-k"
                                  : "dot product: the score also weighs the vectors' lengths, so ranking by their "
                                    "cosine is a genuine predictor of the score's top-k"));
    static const char *const y[] = {"recall_before", "recall_after", "recall_random", NULL};
    probe_chart(out, "topk", "line", "k", y, "recall@k of cosine ranking vs true attention", 1);
    static const char *const my[] = {"mass_before", "mass_after", NULL};
    probe_chart(out, "topk", "line", "k", my, "attention mass captured by the cosine top-k", 1);
done:
    free(q), free(k), free(w), free(scr), free(idx), free(taken), free(acc);
    return st;
}

const probe_kind probe_kind_topk_prediction = {
    .name = "topk_prediction",
    .title = "Top-k key prediction (trained run)",
    .description =
        "recall@k and mass captured when keys are ranked by cosine of normalised q, k (before/after rotation)",
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .needs_model = 1,
    .run = run,
    .estimate = probe_estimate_topk_prediction,
};
