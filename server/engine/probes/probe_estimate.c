/* Work estimates of the model probes (probe_estimate.h). Each follows its kind's run: the passes it
 * makes through the model and the loops it runs over layers, heads, queries and keys, with the
 * input at its longest (max_tokens, cut to the model's length). */
#include "probe_estimate.h"

#include <stdio.h>
#include <string.h>

#include "probe_impl.h"

#define MAX_KS 16

double probe_forward_flops(const probe_size *s, int T) {
    double C = s->d_model, L = s->n_layer, V = s->vocab, t = T;
    /* 2 FLOPs per weight and token (12 C^2 per block, the output layer V C), and QK^T and AV over
     * t(t+1)/2 query-key pairs, 2 x 2 C FLOPs each, per layer */
    return 2 * t * (L * 12 * C * C + V * C) + L * 2 * t * (t + 1) * C;
}

/* What every model kind's work is made of: the input's length (max_tokens, at most the model's
 * window), the heads, a head's width, and the ks asked for (their number and sum; none for a kind
 * without them). */
typedef struct {
    double T, heads, D, sum_k;
    int nk;
} shape;

static shape shape_of(const json_t *params, const probe_size *s) {
    long T = probe_p_int(params, "max_tokens");
    shape sh = {.T = (double)(T > s->seq_len ? s->seq_len
                              : T < 1        ? 1
                                             : T),
                .heads = (double)s->n_layer * s->n_head,
                .D = (double)s->d_model / s->n_head};
    double ks[MAX_KS];
    sh.nk = json_object_get(params, "ks") ? probe_p_list(params, "ks", ks, MAX_KS) : 0;
    for (int j = 0; j < sh.nk; j++) sh.sum_k += ks[j];
    return sh;
}

/* One forward pass that keeps q, k and the weights, then per head and query the entropy, the
 * maximum and the distance over its keys; the answer holds a T x (T + 1) table per head. */
void probe_estimate_attention_map(const json_t *params, const probe_size *s, probe_cost *cost) {
    shape x = shape_of(params, s);
    cost->flops = probe_forward_flops(s, (int)x.T) + x.heads * x.T * x.T * 8;
    cost->cells = x.heads * x.T * (x.T + 1) + x.heads * 8 + x.T * 3;
    cost->lower = "max_tokens";
}

/* One forward pass; per head, query and k of ks: the cosine scores of every key before and after
 * rotation (head_dim each) and three top-k selections over them, O(T k) each. */
void probe_estimate_topk_prediction(const json_t *params, const probe_size *s, probe_cost *cost) {
    shape x = shape_of(params, s);
    cost->flops = probe_forward_flops(s, (int)x.T) + x.heads * x.T * (x.T * x.D * 4 * 2 + 3 * x.T * x.sum_k);
    cost->cells = x.heads * x.nk * 8 + x.nk * 8;
    cost->lower = "max_tokens";
}

/* One forward pass that keeps q and k; for each of the 5 predictors and each k, per head and
 * query, the predictor's scores over the keys (head_dim each, LSH codes of lsh_tables x lsh_bits
 * bits, hamming_bits) and a top-k; then the loss: a forward pass per window, dense and under each
 * predictor and k, its attention chosen the same way. */
void probe_estimate_sparse_attention(const json_t *params, const probe_size *s, probe_cost *cost) {
    shape x = shape_of(params, s);
    long bits = probe_p_int(params, "lsh_bits"); /* 0: chosen per k, at most log2 of the keys */
    double codes = (double)probe_p_int(params, "lsh_tables") * (double)(bits > 0 ? bits : 16) +
                   (double)probe_p_int(params, "hamming_bits");
    double windows = (double)probe_p_int(params, "windows"), nk = x.nk > 0 ? x.nk : 1;
    double select = x.heads * x.T * (x.T * (x.D * 2 + codes) + x.T * x.sum_k / nk); /* one predictor, one k */
    double fwd = probe_forward_flops(s, (int)x.T);
    double loss_passes = windows * (1 + 5.0 * nk);
    cost->flops = fwd + 5 * nk * select + loss_passes * (fwd + select);
    cost->cells = x.heads * 5 * nk * 7 + nk * 16;
    /* the factor that multiplies most: the windows, then the ks, then the tokens */
    cost->lower = windows > 1 ? "windows" : nk > 1 ? "ks" : "max_tokens";
}

engine_status probe_estimate_check(const probe_kind *kind, const json_t *params, const probe_size *s,
                                   double max_flops_scale, probe_cost *cost, probe_error *err) {
    memset(cost, 0, sizeof *cost);
    if (!kind->estimate) return ENGINE_OK;
    if (s->n_layer < 1 || s->n_head < 1 || s->d_model < 1 || s->seq_len < 1 || s->vocab < 1)
        return probe_fail(err, ENGINE_ERR_INVALID, "run", "the model's size cannot be read for the probe's estimate");
    kind->estimate(params, s, cost);
    double max_flops = PROBE_MAX_FLOPS * max_flops_scale;
    if (cost->flops > max_flops)
        return probe_fail(err, ENGINE_ERR_INVALID, cost->lower,
                          "%s on this model (%d layers x %d heads, d_model %d, vocab %d) is estimated at %.3g "
                          "floating-point operations, over the bound of %.3g: lower %s",
                          kind->name, s->n_layer, s->n_head, s->d_model, s->vocab, cost->flops, max_flops, cost->lower);
    if (cost->cells > PROBE_MAX_CELLS)
        return probe_fail(err, ENGINE_ERR_INVALID, cost->lower,
                          "%s on this model (%d layers x %d heads) would answer about %.3g table cells, over the "
                          "bound of %.3g: lower %s",
                          kind->name, s->n_layer, s->n_head, cost->cells, PROBE_MAX_CELLS, cost->lower);
    return ENGINE_OK;
}
