/* attention_map: a trained run's attention on a short text: the T x T weights of every layer
 * and head, each head's tau, and how spread each head's attention is (entropy per query row,
 * averaged; also as a fraction of the uniform row's ln(t+1)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe_impl.h"

static const probe_param params[] = {
    PROBE_ROW_MODEL_TEXT("The cat sat on the mat because it was tired, and then it slept.", 4096),
    PROBE_ROW_MAX_TOKENS("tokens kept from the start of the text", 1, PROBE_MODEL_MAX_TOKENS),
};

/* One head's row of the table "heads": its tau, the mean entropy of its query rows (and as a
 * fraction of the uniform row's), the mean largest weight and the mean distance attended, from its
 * T x T weights W; *worst_sum keeps the largest |row sum - 1| seen. */
static void head_row(probe_out *out, json_t *rows, const float *W, int T, int l, int h, double tau, double *worst_sum) {
    double ent = 0, frac = 0, mx = 0, dist = 0;
    int nfrac = 0;
    for (int t = 0; t < T; t++) {
        double e_t = 0, m_t = 0, s_t = 0;
        for (int s = 0; s <= t; s++) {
            double x = W[(size_t)t * T + s];
            if (x > 0) e_t -= x * log(x);
            m_t = fmax(m_t, x);
            dist += x * (t - s) / T;
            s_t += x;
        }
        *worst_sum = fmax(*worst_sum, fabs(s_t - 1));
        ent += e_t / T, mx += m_t / T;
        if (t > 0) frac += e_t / log(t + 1.0), nfrac++;
    }
    char label[32];
    snprintf(label, sizeof label, "L%d H%d", l, h);
    probe_row(out, rows, "siiddddd", label, l, h, tau, ent, nfrac ? frac / nfrac : NAN, mx, dist);
}

/* One head's T x T table (row t: query t's weights over keys 0..T-1) and its heatmap; row has
 * T + 1 places. */
static void head_map(probe_out *out, const float *W, int T, int l, int h, double *row) {
    char name[48], title[64];
    json_t *cols = probe_cols_add(json_array(), "query");
    for (int s = 0; s < T; s++) cols = probe_cols_add(cols, "k%d", s);
    snprintf(name, sizeof name, "attention_l%d_h%d", l, h);
    json_t *rows = probe_table_cols(out, name, cols);
    for (int t = 0; t < T; t++) {
        row[0] = t;
        for (int s = 0; s < T; s++) row[1 + s] = s <= t ? W[(size_t)t * T + s] : 0;
        probe_row_nums(out, rows, row, T + 1);
    }
    snprintf(title, sizeof title, "layer %d head %d", l, h);
    probe_chart(out, name, "heatmap", "query", NULL, title, 0);
}

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    const probe_model *m = ctx->model;
    int ids[PROBE_MODEL_MAX_TOKENS], T = 0, cut = 0;
    engine_status st =
        probe_model_tokens(m, probe_p_str(p, "text"), (int)probe_p_int(p, "max_tokens"), ids, &T, &cut, err);
    if (st) return st;
    const int L = m->n_layer, H = m->n_head;
    probe_model_pass pass;
    double *row = malloc(sizeof(double) * (size_t)(T + 1));
    if ((st = probe_model_forward(m, ids, T, 0, 1, &pass, err)) || !row) {
        probe_model_pass_free(&pass);
        free(row);
        return st ? st : probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    }

    probe_model_token_table(out, m, ids, T);
    static const char *const hcols[] = {
        "name", "layer", "head", "tau", "mean_entropy", "entropy_fraction", "mean_max_weight", "mean_distance"};
    json_t *heads = probe_table(out, "heads", hcols, 8);
    double tau_lo = INFINITY, tau_hi = -INFINITY, worst_sum = 0;
    for (int lh = 0; lh < L * H; lh++) {
        head_row(out, heads, pass.w + (size_t)lh * T * T, T, lh / H, lh % H, pass.tau[lh], &worst_sum);
        tau_lo = fmin(tau_lo, pass.tau[lh]), tau_hi = fmax(tau_hi, pass.tau[lh]);
    }
    for (int lh = 0; lh < L * H; lh++) head_map(out, pass.w + (size_t)lh * T * T, T, lh / H, lh % H, row);
    probe_summary_int(out, "n_tokens", T);
    probe_summary_bool(out, "truncated", cut);
    probe_summary_int(out, "n_layer", L);
    probe_summary_int(out, "n_head", H);
    probe_summary_num(out, "tau_min", tau_lo);
    probe_summary_num(out, "tau_max", tau_hi);
    probe_summary_num(out, "max_row_sum_error", worst_sum);
    probe_model_pass_free(&pass);
    free(row);
    static const char *const ey[] = {"entropy_fraction", NULL};
    probe_chart(out, "heads", "bar", "name", ey, "attention entropy per head (fraction of uniform)", 0);
    return ENGINE_OK;
}

const probe_kind probe_kind_attention_map = {
    .name = "attention_map",
    .title = "Attention map (trained run)",
    .description = "a run's attention weights per layer and head on a text, with each head's tau and entropy",
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .needs_model = 1,
    .run = run,
    .estimate = probe_estimate_attention_map,
};
