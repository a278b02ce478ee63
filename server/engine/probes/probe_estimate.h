/* The work a model probe's parameters ask of a model of a given size, estimated before any of it is
 * done (before the request waits for the probe worker, before the model is loaded): pure functions
 * of the resolved parameters and the model's shape, one per kind (probe_kind.estimate), and the
 * bounds a request is checked against. Work is counted in floating-point operations of the
 * forward passes and of the probe's own loops over heads, queries and keys (about 1e10 a second on
 * one core of the reference machine, where the probe worker runs single-threaded), and in table
 * cells of the answer (each a number in its JSON). */
#ifndef PROBE_ESTIMATE_H
#define PROBE_ESTIMATE_H

#include <jansson.h>

#include "probe.h"

/* The most work one probe request may ask: about a minute of the probe worker, and an answer of at
 * most a few tens of MB. */
#define PROBE_MAX_FLOPS 6e11
#define PROBE_MAX_CELLS 4e6

/* The model a probe would read: what its checkpoint's config says. */
typedef struct probe_size {
    int n_layer, n_head, d_model, seq_len, vocab;
} probe_size;

/* A request's estimate: the work, the answer's cells, and the parameter that lowers it most. */
typedef struct probe_cost {
    double flops, cells;
    const char *lower; /* a parameter name of the kind */
} probe_cost;

/* One forward pass of T tokens through the model: its matrix products and causal attention. */
double probe_forward_flops(const probe_size *s, int T);

void probe_estimate_attention_map(const json_t *params, const probe_size *s, probe_cost *cost);
void probe_estimate_topk_prediction(const json_t *params, const probe_size *s, probe_cost *cost);
void probe_estimate_sparse_attention(const json_t *params, const probe_size *s, probe_cost *cost);

/* The kind's estimate for complete params (probe_params_resolve's) on a model of size s into *cost
 * (zero for a kind without one), checked against PROBE_MAX_FLOPS scaled by max_flops_scale (1: as
 * is; tests lower it) and PROBE_MAX_CELLS: ENGINE_OK, or ENGINE_ERR_INVALID with err naming the
 * parameter to lower, the estimate and the bound. */
engine_status probe_estimate_check(const probe_kind *kind, const json_t *params, const probe_size *s,
                                   double max_flops_scale, probe_cost *cost, probe_error *err);

#endif
