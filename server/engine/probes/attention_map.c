/* attention_map: a trained run's attention on a short text: the T x T weights of every layer
 * and head, each head's tau, and how spread each head's attention is (entropy per query row,
 * averaged; also as a fraction of the uniform row's ln(t+1)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe_impl.h"

#define MAX_TOKENS 256

static const probe_param params[] = {
    {.name = "text",
     .type = PROBE_PARAM_TEXT,
     .help = "text to run through the model",
     .def_str = "The cat sat on the mat because it was tired, and then it slept.",
     .max_len = 4096},
    {.name = "max_tokens",
     .type = PROBE_PARAM_INT,
     .help = "tokens kept from the start of the text",
     .def = 64,
     .min = 1,
     .max = MAX_TOKENS},
};

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    const probe_model *m = ctx->model;
    int ids[MAX_TOKENS], T = 0, cut = 0;
    engine_status st =
        probe_model_tokens(m, probe_p_str(p, "text"), (int)probe_p_int(p, "max_tokens"), ids, &T, &cut, err);
    if (st) return st;
    int L = m->n_layer, H = m->n_head;
    size_t nw = (size_t)L * H * T * T;
    float *w = malloc(sizeof(float) * nw), *tau = malloc(sizeof(float) * (size_t)(L * H));
    double *row = malloc(sizeof(double) * (size_t)(T + 1));
    if (!w || !tau || !row) {
        free(w), free(tau), free(row);
        return probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    }
    engine_error e = {0};
    st = m->inspect(m->self, ids, T, NULL, NULL, w, tau, &e);
    if (st) {
        free(w), free(tau), free(row);
        return probe_fail(err, st, "run", "forward pass failed: %s", e.message);
    }

    probe_model_token_table(out, m, ids, T);
    static const char *const hcols[] = {
        "name", "layer", "head", "tau", "mean_entropy", "entropy_fraction", "mean_max_weight", "mean_distance"};
    json_t *heads = probe_table(out, "heads", hcols, 8);
    double tau_lo = INFINITY, tau_hi = -INFINITY, worst_sum = 0;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            const float *W = w + ((size_t)l * H + h) * T * T;
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
                worst_sum = fmax(worst_sum, fabs(s_t - 1));
                ent += e_t / T, mx += m_t / T;
                if (t > 0) frac += e_t / log(t + 1.0), nfrac++;
            }
            char label[32];
            snprintf(label, sizeof label, "L%d H%d", l, h);
            probe_row(out, heads, "siiddddd", label, l, h, (double)tau[l * H + h], ent, nfrac ? frac / nfrac : NAN, mx,
                      dist);
            tau_lo = fmin(tau_lo, tau[l * H + h]), tau_hi = fmax(tau_hi, tau[l * H + h]);
        }

    /* One T x T table per head: row t holds query t's weights over keys 0..T-1. */
    char name[48];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            json_t *cols = json_array();
            json_array_append_new(cols, json_string("query"));
            for (int s = 0; cols && s < T; s++) {
                snprintf(name, sizeof name, "k%d", s);
                json_array_append_new(cols, json_string(name));
            }
            if (cols && json_array_size(cols) != (size_t)(T + 1)) {
                json_decref(cols);
                cols = NULL;
            }
            snprintf(name, sizeof name, "attention_l%d_h%d", l, h);
            json_t *rows = probe_table_cols(out, name, cols);
            const float *W = w + ((size_t)l * H + h) * T * T;
            for (int t = 0; t < T; t++) {
                row[0] = t;
                for (int s = 0; s < T; s++) row[1 + s] = s <= t ? W[(size_t)t * T + s] : 0;
                probe_row_nums(out, rows, row, T + 1);
            }
            char title[64];
            snprintf(title, sizeof title, "layer %d head %d", l, h);
            probe_chart(out, name, "heatmap", "query", NULL, title, 0);
        }
    probe_summary_int(out, "n_tokens", T);
    probe_summary_bool(out, "truncated", cut);
    probe_summary_int(out, "n_layer", L);
    probe_summary_int(out, "n_head", H);
    probe_summary_num(out, "tau_min", tau_lo);
    probe_summary_num(out, "tau_max", tau_hi);
    probe_summary_num(out, "max_row_sum_error", worst_sum);
    free(w), free(tau), free(row);
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
