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

static const double def_ks[] = {4, 8, 16, 32};

static const probe_param params[] = {
    PROBE_ROW_MODEL_TEXT(probe_model_default_text, 8192),
    PROBE_ROW_MAX_TOKENS("tokens kept from the start of the text", 2, PROBE_MODEL_MAX_TOKENS),
    PROBE_ROW_MODEL_KS(def_ks),
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

/* One head's working arrays, made once per run for a window of T tokens and heads of width D. */
typedef struct {
    int T, D, rope, half, nk;
    const double *ks;             /* the k values, ks[0..nk) */
    double *wt, *pb, *pa;         /* query t's true weights and cosines before / after rotation, [T] */
    double *kr, *qr, *theta, *kn; /* keys rotated [T][D], query t rotated [D], angles [D], key norms [T] */
    int *truth, *pick_b, *pick_a; /* the top-k index lists, [T] each */
    unsigned char *taken;         /* [T] */
    double *block;                /* the doubles above, in one allocation */
    int *idx;                     /* the index lists, in one allocation */
} topk_scratch;

/* Makes s for a window of T tokens of model m and the k values ks[0..nk): 0, or -1 when an
 * allocation failed (scratch_free frees what was made). */
static int scratch_init(topk_scratch *s, const probe_model *m, int T, const double *ks, int nk) {
    const int D = m->head_dim;
    *s = (topk_scratch){.T = T, .D = D, .rope = m->rope_base > 0, .half = m->rope_half_split, .nk = nk, .ks = ks};
    s->block = malloc(sizeof(double) * (size_t)(3 * T + T * D + 2 * D + T + 1));
    s->idx = malloc(sizeof(int) * (size_t)(3 * T));
    s->taken = malloc((size_t)T);
    if (!s->block || !s->idx || !s->taken) return -1;
    s->wt = s->block, s->pb = s->wt + T, s->pa = s->pb + T, s->kr = s->pa + T, s->qr = s->kr + (size_t)T * D;
    s->theta = s->qr + D, s->kn = s->theta + D;
    s->truth = s->idx, s->pick_b = s->idx + T, s->pick_a = s->idx + 2 * T;
    if (s->rope) probe_rope_thetas(D, m->rope_base, s->theta);
    return 0;
}

static void scratch_free(topk_scratch *s) { free(s->block), free(s->idx), free(s->taken); }

/* The head's keys K [T][D] rotated to their positions (when the model rotates) and their norms. */
static void head_keys(topk_scratch *s, const float *K) {
    const int D = s->D;
    for (int t = 0; t < s->T; t++) {
        const float *kt = K + (size_t)t * D;
        if (s->rope)
            rotate_f(kt, s->kr + (size_t)t * D, D, s->theta, t, s->half);
        else
            for (int i = 0; i < D; i++) s->kr[(size_t)t * D + i] = kt[i];
        double n2 = 0;
        for (int i = 0; i < D; i++) n2 += (double)kt[i] * kt[i];
        s->kn[t] = sqrt(n2);
    }
}

/* Query t's cosines with keys 0..t, before (pb) and after (pa) rotation, and its weights (wt). */
static void query_scores(topk_scratch *s, const float *Q, const float *K, const float *W, int t) {
    const int D = s->D;
    const float *qt = Q + (size_t)t * D;
    if (s->rope)
        rotate_f(qt, s->qr, D, s->theta, t, s->half);
    else
        for (int i = 0; i < D; i++) s->qr[i] = qt[i];
    double qn = 0;
    for (int i = 0; i < D; i++) qn += (double)qt[i] * qt[i];
    qn = sqrt(qn);
    for (int j = 0; j <= t; j++) {
        double db = 0, da = 0;
        for (int i = 0; i < D; i++) {
            db += (double)qt[i] * K[(size_t)j * D + i];
            da += s->qr[i] * s->kr[(size_t)j * D + i];
        }
        double nn = qn * s->kn[j] > 0 ? qn * s->kn[j] : 1;
        s->pb[j] = db / nn, s->pa[j] = da / nn, s->wt[j] = W[(size_t)t * s->T + j];
    }
}

/* Adds a query with n keys to acc[k][6] (recall and mass before, after; count; a random pick's
 * expected recall) for every k below n. */
static void rank_query(topk_scratch *s, int n, double *acc) {
    for (int j = 0; j < s->nk; j++) {
        int kk = (int)s->ks[j];
        if (n <= kk) continue;
        top_k(s->wt, n, kk, s->truth, s->taken);
        top_k(s->pb, n, kk, s->pick_b, s->taken);
        top_k(s->pa, n, kk, s->pick_a, s->taken);
        double *a = acc + (size_t)j * 6;
        for (int x = 0; x < n; x++) s->taken[x] = 0;
        for (int x = 0; x < kk; x++) s->taken[s->truth[x]] = 1;
        for (int x = 0; x < kk; x++) {
            a[0] += s->taken[s->pick_b[x]] / (double)kk, a[1] += s->wt[s->pick_b[x]];
            a[2] += s->taken[s->pick_a[x]] / (double)kk, a[3] += s->wt[s->pick_a[x]];
        }
        a[4] += 1, a[5] += (double)kk / n; /* a random pick's expected recall and mass */
    }
}

/* The tables "topk" (over every head) and "topk_by_head" from acc[lh][k][6]. */
static void topk_tables(probe_out *out, const double *acc, int L, int H, const double *ks, int nk) {
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
            probe_row(out, hrows, "iiidddd", (int)(lh / H), (int)(lh % H), (int)ks[j], a[0] / c, a[2] / c, a[1] / c,
                      a[3] / c);
        }
        double c = tot[4] > 0 ? tot[4] : NAN;
        probe_row(out, rows, "idddddd", (int)ks[j], tot[0] / c, tot[1] / c, tot[2] / c, tot[3] / c, tot[5] / c,
                  (double)tot[4]);
    }
}

/* The summary figures, what "after rotation" means for this model, and the charts. */
static void topk_summary(probe_out *out, const probe_model *m, int T, int cut, const char *source) {
    const int rope = m->rope_base > 0;
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
}

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    const probe_model *m = ctx->model;
    const int D = m->head_dim;
    if (D < 1 || D > 1024 || (m->rope_base > 0 && D % 2))
        return probe_fail(err, ENGINE_ERR_INVALID, "run", "head_dim %d is not supported", D);
    double ks[PROBE_MODEL_MAX_KS];
    const int nk = probe_p_list(p, "ks", ks, PROBE_MODEL_MAX_KS);
    int ids[PROBE_MODEL_MAX_TOKENS + 1], T = 0, cut = 0;
    char source[64];
    /* text, or validation window 0 of a run without a text tokenizer (a task corpus) */
    engine_status st =
        probe_model_input(m, p, (int)probe_p_int(p, "max_tokens"), ids, &T, &cut, source, sizeof source, err);
    if (st) return st;
    if (T > m->max_seq) T = m->max_seq;
    const int L = m->n_layer, H = m->n_head;
    probe_model_pass pass;
    topk_scratch s = {0};
    /* acc[layer][head][k][6]: recall before, mass before, recall after, mass after, queries, random */
    double *acc = calloc((size_t)L * H * nk * 6, sizeof(double));
    if ((st = probe_model_forward(m, ids, T, 1, 0, &pass, err))) goto done;
    if (scratch_init(&s, m, T, ks, nk) || !acc) {
        st = probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
        goto done;
    }
    for (size_t lh = 0; lh < (size_t)L * H; lh++) {
        const float *Q = pass.q + lh * T * D, *K = pass.k + lh * T * D, *W = pass.w + lh * T * T;
        head_keys(&s, K);
        for (int t = 0; t < T; t++) {
            query_scores(&s, Q, K, W, t);
            rank_query(&s, t + 1, acc + lh * nk * 6);
        }
    }
    topk_tables(out, acc, L, H, ks, nk);
    topk_summary(out, m, T, cut, source);
done:
    probe_model_pass_free(&pass);
    scratch_free(&s);
    free(acc);
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
