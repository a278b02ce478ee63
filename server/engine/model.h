/* The GPT-2-style pre-LayerNorm decoder: configuration, parameter layout, forward and backward
 * passes and metrics (weights files: model_io.h).
 *
 *   x = wte[tok] (+ wpe[pos] for `dot`)
 *   per block: x = x + proj(attn(ln1(x))); x = x + mlp(ln2(x)), mlp = fc(C->4C), GELU(tanh), proj(4C->C)
 *   logits = lm_head(lnf(x)), untied from wte; loss = mean next-token cross-entropy.
 * Attention (causal; qkv output is [q | k | v]; head h uses dims h*d .. h*d+d-1, d = C/H): the
 * variants are the rows of the table in attention.h (config.attention is a row index):
 *   dot          score = q.k / sqrt(d), learned absolute positions wpe
 *   rope         score = (R_m q).(R_n k) / sqrt(d), no wpe, v never rotated
 *   cosine_rope  q^ = q / sqrt(sum q^2 + 1e-6) (same for k), then rotated; score = (R_m q^).(R_n k^) / tau_h,
 *                tau a learned parameter per layer and head, stored as tau (linear) or log tau (log)
 *   cosine_rope_scale  as cosine_rope but score = min(s_h, clamp) (R_m q^).(R_n k^), s learned per layer
 *                and head, stored as s or log s (Swin V2: log, init 10, clamp 100; nGPT: init sqrt(d))
 * RoPE: adjacent pairs (2i, 2i+1) ("interleaved"), angle m * base^(-2i/d), tables computed in double.
 * LayerNorm: eps LAYERNORM_EPS (1e-5) inside the square root, biased variance.
 *
 * Parameters, gradients and activations each live in one allocation made by model_new; nothing
 * is allocated per step. A model is used by one caller thread at a time; it owns a pool of
 * n_threads workers for its passes, and results are bit-identical for a given thread count. */
#ifndef ENGINE_MODEL_H
#define ENGINE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "error.h"
#include "kernel_path.h"
#include "precision.h"
#include "real.h"

typedef struct {
    int n_layer, n_head, d_model, seq_len, vocab;
    int attention;              /* row of the attention table (attention_at, attention_index) */
    double rope_base;           /* 10000 */
    double tau_init;            /* <= 0 means sqrt(d) */
    tau_param_kind tau_param;   /* how tau is parameterised (variants whose scale is a tau) */
    double scale_init;          /* s at initialisation (variants whose scale is s * cos); <= 0 means sqrt(d) */
    tau_param_kind scale_param; /* how s is parameterised: s (linear) or log s (log) */
    double scale_clamp;         /* s is used as min(s, scale_clamp); 0 = no clamp */
} model_config;

/* The seed experiment: L3 H4 C128 T128 V50257, rope base 10000, tau sqrt(d) linear, dot;
 * s sqrt(d) linear without clamp. */
void model_config_defaults(model_config *c);
/* Limits: a row of the attention table, layers 1..24, heads divide d_model, d_model <= 1024
 * (with an even head width for variants that rotate), seq_len 1..4096, vocab 2..1048576,
 * rope_base > 1, tau_init and scale_init finite, scale_clamp 0 or finite and not below the initial s.
 * ENGINE_ERR_INVALID otherwise. */
engine_status model_config_validate(const model_config *c, engine_error *err);
/* The config's attention row (NULL if the index is outside the table). */
const attention_variant *model_config_attention(const model_config *c);
/* The learned scale's form and parameterisation as the config sets them (init resolved). */
attention_scale model_config_scale(const model_config *c);
const char *tau_param_name(tau_param_kind k); /* "linear", "log" */
int tau_param_parse(const char *s, tau_param_kind *k);
size_t model_config_param_count(const model_config *c);
/* Model FLOPs of one training step (forward + backward, matmuls and attention) per token. */
double model_config_train_flops_per_token(const model_config *c);

/* One named parameter tensor: its place in the flat parameter (and gradient) array. */
typedef struct {
    char name[40];
    int ndim;
    int64_t shape[2];
    size_t offset, numel;
    int is_tau; /* the variant's learned per-head scale (tau): the optimiser may skip weight decay */
} model_tensor;

typedef struct model model;

/* Allocates a model for batches of up to `batch` windows of up to seq_len tokens, with
 * gradients when with_grads. Parameters start at zero: call model_init_params or load weights.
 * ENGINE_ERR_INVALID (bad config/batch/threads) or ENGINE_ERR_NOMEM. */
engine_status model_new(model **out, const model_config *cfg, int batch, int n_threads, int with_grads,
                        engine_error *err);
void model_free(model *m); /* NULL is fine */
/* Peak bytes model_new would allocate (parameters, gradients, activations, scratch). */
size_t model_memory_bytes(const model_config *cfg, int batch, int n_threads, int with_grads);

const model_config *model_get_config(const model *m);
size_t model_param_count(const model *m);
/* The parameters, to write (marks the bf16 copies stale: they are refreshed before the next pass) or
 * to read. */
real *model_params(model *m);
const real *model_params_read(const model *m);
real *model_grads(model *m); /* NULL without gradients */
struct threadpool;
struct threadpool *model_threads(model *m); /* the model's worker pool, for work between passes */
int model_tensor_count(const model *m);
const model_tensor *model_tensor_at(const model *m, int i);
const model_tensor *model_tensor_find(const model *m, const char *name);

/* Normal(0, 0.02) for every weight matrix and embedding in tensor order from one rng_state
 * seeded with `seed`; biases 0; LayerNorm weights 1; tau = tau_init (or its log). */
void model_init_params(model *m, uint64_t seed);

/* A target that is not counted: no loss and no gradient at that position (PyTorch's
 * ignore_index); the loss is the mean over the counted positions, 0 when there are none. */
#define MODEL_TARGET_IGNORE (-1)

/* Forward pass over inputs[B*T] (B <= batch, T <= seq_len). With targets[B*T], *loss receives
 * the mean cross-entropy over the counted targets; without (NULL), only the activations are
 * computed. Token ids outside 0..vocab-1 (targets: and not MODEL_TARGET_IGNORE) and sizes beyond
 * the model's are ENGINE_ERR_INVALID, with nothing computed. */
engine_status model_forward(model *m, const int32_t *inputs, const int32_t *targets, int B, int T, double *loss,
                            engine_error *err);
/* Zeroes the gradients, then forward + backward: gradients of the mean loss end up in
 * model_grads. Needs a model made with gradients. ENGINE_ERR_CANCELLED if the interrupt check
 * (model_set_interrupt) said stop. */
engine_status model_forward_backward(model *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                                     double *loss, engine_error *err);

/* Optional: check(ctx) is polled between layers of every pass; when it returns non-zero the pass
 * stops and returns ENGINE_ERR_CANCELLED, parameters untouched (gradients and activations are
 * then incomplete). Lets a caller cancel within a step instead of after it. NULL: no check. */
void model_set_interrupt(model *m, int (*check)(void *ctx), void *ctx);

/* bf16 mixed precision (precision.h) for the products that have bf16 kernels (the output layer,
 * d_model a multiple of 16, and on a path with a bf16 unit the blocks' linear products forward and
 * for the input gradients; the weight gradients stay fp32); the default is fp32. The bf16 weight copies are refreshed
 * before a pass when the parameters may have changed since the last (model_params, model_init_params, loads): once per
 * training step, after the optimiser. ENGINE_ERR_INVALID in the double build or for a d_model the kernels do not take,
 * ENGINE_ERR_NOMEM; the model is unchanged then. */
engine_status model_set_precision(model *m, precision_kind p, engine_error *err);
precision_kind model_precision(const model *m);
/* Bytes bf16 precision adds to a model of this config for batches of up to `batch` windows on
 * n_threads threads (an upper bound). */
size_t model_bf16_bytes(const model_config *cfg, int batch, int n_threads);
/* The kernel path (kernel_path.h) the model's products take: "fp32" in fp32, in bf16 the path its
 * bf16 copies were made for when model_set_precision switched it to bf16. */
kernel_path_id model_kernel_path(const model *m);

/* For evaluators that mirror the forward pass (sparse.c): block `layer`'s linear `which` applied to
 * nr rows x with its bias, out[nr][outputs] = x W^T + b, on thread tid of the model's pool, exactly
 * as the model's forward pass computes it (in bf16 precision through its packed bf16 weights, else
 * fp32). model_linear_prepare (outside any threads_run of the pool) first brings those copies up to
 * date with the parameters; a model pass does it itself. */
enum { MODEL_LINEAR_QKV, MODEL_LINEAR_PROJ, MODEL_LINEAR_FC, MODEL_LINEAR_FCP };
void model_linear_prepare(model *m);
void model_linear_forward(model *m, int tid, int layer, int which, real *out, const real *x, long nr);

/* Where the last pass's wall time went (model_forward, or model_forward_backward both ways), in ms:
 * the output layer (its fused products, softmax and loss, and the bf16 copies' refresh), the other
 * matrix products (the phases around them: layer norms, GELU, RoPE and the residual adds included),
 * attention (scores, softmax, weighted sums, both ways) and the rest (embeddings). */
enum { MODEL_TIME_OUTPUT_LAYER, MODEL_TIME_PRODUCTS, MODEL_TIME_ATTENTION, MODEL_TIME_OTHER, MODEL_TIME_PARTS };
void model_time_ms(const model *m, double out[MODEL_TIME_PARTS]);

/* 1: the output layer uses BLAS even where its own kernels apply (see lmhead.h); for tests and
 * benchmarks that compare the two. */
void model_set_lmhead_blas(model *m, int on);

/* After a forward pass: mean attention entropy (nats) over all query rows, per layer and head
 * (out[l*H + h]). */
void model_attention_entropy(const model *m, float *out);
/* After a forward pass, from the attention weights it kept, per layer and head (out[l*H + h]):
 * dist, the mean attended distance sum_s p(t,s) (t - s) over all query rows of the pass (0: every
 * query on itself); entropy_frac, the mean over query rows t >= 1 of the row's entropy divided by
 * ln(t + 1), the entropy of uniform attention over its t + 1 keys (1: uniform, 0: one key).
 * Either output may be NULL. Serial, O(L B H T^2) on the calling thread (a 1/d share of the
 * attention's own cost). */
void model_attention_distance(const model *m, float *dist, float *entropy_frac);
/* Effective temperature per layer and head: 1 / the score's multiplier (tau for cosine_rope,
 * 1/s for cosine_rope_scale, sqrt(d) for the fixed-scale variants). */
void model_tau(const model *m, float *out);

/* For probes: one window of tokens through the model, keeping what attention did. All arrays are
 * float, row-major, indexed [layer][head][position]...:
 *   att    [L][H][T][T]  probabilities (row = query position; zeros above the diagonal)
 *   q_raw, k_raw [L][H][T][d]  straight out of the qkv projection
 *   q_used, k_used [L][H][T][d] what the score uses: = raw (dot), rotated (rope), normalised then
 *                  rotated (cosine_rope): the variant's q/k transform
 *   tau    [L][H]         effective scale denominator (tau, or sqrt(d))
 *   entropy [L][H]        mean row entropy of att */
typedef struct {
    int n_layer, n_head, T, head_dim;
    float *att, *q_raw, *k_raw, *q_used, *k_used, *tau, *entropy;
} model_inspect;

/* Runs tokens[T] (T <= seq_len) through m and fills *out (allocated here; free with
 * model_inspect_free). Bad tokens or T: ENGINE_ERR_INVALID. */
engine_status model_forward_inspect(model *m, const int32_t *tokens, int T, model_inspect *out, engine_error *err);
void model_inspect_free(model_inspect *ins);

#endif
