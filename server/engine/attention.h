/* The table of attention variants: one row per variant, in a fixed order (the row index is what
 * model_config.attention holds). Everything that depends on the variant reads its row: the
 * model's parameter layout, activation sizes and passes (model.c), config validation (model.c,
 * run_config.c), the metrics a run records (jobs.c), probes (probe_engine_model.c), and the API's
 * RunConfig `attention` enum (server/api/openapi.json, whose list a test compares with this table;
 * the dashboard and the client read that enum). HACKING.md has the recipe for a new row.
 *
 * A variant is described by
 *   - flags: learned absolute positions (wpe), RoPE rotation of q and k, q/k normalised;
 *   - how q and k become the vectors the score uses: a per-(batch, head) forward transform and
 *     its backward (NULL: the raw projections are used as they are);
 *   - the score's multiplier g (score = g * q_used . k_used): fixed (a function of the head
 *     width), or a learned tensor h.{l}.<suffix> [n_head] per layer in one of the scale forms
 *     below, with its parameterisation (linear or log) and initial value from the config.
 * The engine then does the rest: causal softmax, values, backward, and dL/dg per head. */
#ifndef ENGINE_ATTENTION_H
#define ENGINE_ATTENTION_H

#include "real.h"

/* q^ = q / sqrt(sum q^2 + COSINE_NORM_EPS) for the variants that normalise q and k. */
#define COSINE_NORM_EPS 1e-6

/* Row flags. */
#define ATTENTION_LEARNED_POSITIONS 1u /* a learned absolute position table wpe [seq_len, C] is added */
#define ATTENTION_ROTATES 2u           /* q and k are rotated by RoPE (the head width must be even) */
#define ATTENTION_NORMALISES_QK 4u     /* q and k are scaled to unit length before the score */

/* How a learned scale parameter theta enters: linear (the value is theta) or log (the value is
 * e^theta, theta = log value, so it stays positive). */
typedef enum { TAU_PARAM_LINEAR = 0, TAU_PARAM_LOG = 1 } tau_param_kind;

/* The score multiplier's forms. */
typedef enum {
    ATTENTION_SCALE_FIXED = 0, /* g = fixed_scale(d); no parameter */
    ATTENTION_SCALE_TAU = 1,   /* g = 1/tau, tau learned per layer and head (config tau_init, tau_param) */
    ATTENTION_SCALE_MULT = 2,  /* g = min(s, clamp), s learned per layer and head (config scale_init,
                                * scale_param, scale_clamp; clamp 0 = none) */
} attention_scale_form;

/* One (batch element, head) unit's q and k, for a variant's transform. Row t of raw q is at
 * q + t*raw_stride (k likewise), of the used q at q_used + t*used_stride; aux_per_head reals per
 * row that the forward keeps for the backward at q_aux + t*aux_stride (k_aux likewise); RoPE
 * angles of position t at rope_cos + t*(d/2) (rope_sin likewise). In the backward, dq/dk (rows at
 * + t*d_stride) hold dL/d(used q, k) on entry and receive dL/d(raw q, k), in place. */
typedef struct {
    int T, d;
    const real *q, *k;
    long raw_stride;
    real *q_used, *k_used;
    long used_stride;
    real *q_aux, *k_aux;
    long aux_stride;
    real *dq, *dk;
    long d_stride;
    const real *rope_cos, *rope_sin;
} attention_qk_unit;

typedef struct {
    const char *name;    /* as in the API and in weights files: "dot", "rope", ... */
    const char *summary; /* one line: the score it computes */
    unsigned flags;      /* ATTENTION_* flags above */
    /* q and k as the score uses them (NULL: raw); both or neither. They write only the unit's
     * rows of q_used/k_used and q_aux/k_aux (forward) or dq/dk (backward). */
    void (*qk_forward)(const attention_qk_unit *u);
    void (*qk_backward)(const attention_qk_unit *u);
    int aux_per_head; /* reals per row and head kept by qk_forward for q and for k each (0: none) */
    attention_scale_form scale;
    double (*fixed_scale)(int d); /* ATTENTION_SCALE_FIXED: g for head width d */
    const char *scale_suffix;     /* learned forms: the tensor h.{l}.<suffix>, e.g. "attn.tau" */
} attention_variant;

/* The scale of one model: its form and the parameterisation its config chose. */
typedef struct {
    attention_scale_form form;
    tau_param_kind param;
    double init;  /* the learned value (tau or s, not its log) at initialisation */
    double clamp; /* ATTENTION_SCALE_MULT: s is used as min(s, clamp); 0 = none */
} attention_scale;

/* The rows: attention_count() of them, indexes 0..count-1. attention_at is NULL outside. */
int attention_count(void);
const attention_variant *attention_at(int i);
/* The row named `name`, or NULL (also for NULL). */
const attention_variant *attention_find(const char *name);
/* The row index of `name`, or -1. */
int attention_index(const char *name);
/* The row's name for an index; "unknown" outside the table. */
const char *attention_kind_name(int i);
/* *k = the row index of s; 0 ok, -1 unknown (k untouched). */
int attention_kind_parse(const char *s, int *k);
/* Tensors per layer the row adds to the 12 every block has (its learned scale: 0 or 1). */
int attention_layer_extra_tensors(const attention_variant *v);

/* The multiplier g of one head from its parameter theta (ignored for the fixed form, which
 * needs d). */
real attention_scale_value(const attention_variant *v, const attention_scale *s, int d, real theta);
/* dL/dtheta from dL/dg, given theta and g = attention_scale_value(theta). 0 for the fixed form
 * and where the clamp holds s (as torch.clamp: the gradient passes at the bound itself). */
double attention_scale_dtheta(const attention_scale *s, real theta, double g, double dg);
/* theta at initialisation: init, or log(init) for the log parameterisation. */
double attention_scale_theta0(const attention_scale *s);
/* The learned value (tau or s) at initialisation from the config's (tau_init, scale_init):
 * `configured` when it is above 0, else sqrt(head_dim). The one rule: the model, the service's
 * config defaults and statistics, and (as GET /api/attention-kinds states it) the dashboard. */
double attention_scale_init(double configured, int head_dim);
/* The temperature a run starts with, as the engine records it (tau.L.H): the initial tau for
 * ATTENTION_SCALE_TAU, 1 / min(s0, clamp) for ATTENTION_SCALE_MULT (clamp 0: none); NaN for a
 * fixed scale (there is no tau). */
double attention_initial_tau(const attention_scale *s);

#endif
