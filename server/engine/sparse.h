/* Sparse attention for evaluation and inference: each query attends only to k keys chosen by a
 * predictor, with the softmax taken over the chosen keys alone (causal: keys 0..t for query t).
 *
 * One head at a time (sparse_attention): q, k [T][d] are the vectors the variant scores, i.e.
 * model_inspect's q_used / k_used (raw for dot, rotated for rope, normalised then rotated for
 * cosine_rope), score(t, s) = scale * q_t . k_s, and v [T][d] the values. A query with t+1 <= k
 * keys attends to all of them (its selection is complete, no predictor is consulted), so k >= T
 * is dense attention. The predictors, with what each costs for T queries (d = head width):
 *
 *   SPARSE_DENSE      every causal key. O(T^2 d). The reference.
 *   SPARSE_TOPK       the k largest scores (ties: the lower position). O(t d) scores and O(t)
 *                     selection per query: O(T^2 d) in all. The upper bound on what any predictor
 *                     of size k can capture, not a saving. For cosine_rope it ranks keys by the
 *                     score itself (the cosine of the rotated unit vectors): its picks are the
 *                     true top-k attention weights by construction.
 *   SPARSE_LSH        angular LSH: lsh_tables tables of lsh_bits random hyperplanes (seeded), a
 *                     vector's bucket = its sign pattern. Per query: the lsh_candidates most recent
 *                     keys in its bucket in each table (causal), scored exactly, the best k kept;
 *                     a query that shares no bucket with any key attends to itself alone. Hashing
 *                     O(T tables bits d) for q and k, then per query O(tables cand) bucket walk +
 *                     O(n_cand d) scores, n_cand <= tables * lsh_candidates: O(T tables cand d),
 *                     linear in T. Sign hashes ignore length, so on cosine_rope's unit vectors the
 *                     collision probability is 1 - angle/pi per bit: angular nearest neighbours of
 *                     the very vectors that are scored.
 *   SPARSE_HAMMING    the same hyperplane codes (hamming_bits of them, one table), every causal
 *                     key ranked by Hamming distance to the query's code (ties: the more recent
 *                     key), the k nearest kept. Hashing O(T bits d), then per query O(t) XOR +
 *                     popcount + a counting selection: O(T^2) integer operations without a d
 *                     factor, + O(T k d).
 *   SPARSE_UNROTATED  the k largest cosines of the unrotated vectors (q_unrot, k_unrot: the raw
 *                     projections) - position left out of the ranking. Brute force here, O(T^2 d);
 *                     its vectors do not depend on position, so an index over them could be built
 *                     once per key and reused by every later query.
 *   SPARSE_WINDOW     the k most recent keys t-k+1..t (the naive baseline). O(1) per query.
 * Every predictor then costs O(k d) per query for the attention itself.
 *
 * Summation order: scores are summed over i = 0..d-1 in 8 interleaved partial sums, the softmax
 * exponentials with libm, values accumulated key by key in ascending position. The engine's
 * dense kernel (layers.h attention_forward_unit) forms the same sums through matrix products
 * and a polynomial exp, so the two agree to rounding (~1e-6), not bit for bit.
 *
 * Nothing here allocates per call: a workspace made once per (config, T, d) holds every
 * buffer. A workspace serves one thread at a time. */
#ifndef ENGINE_SPARSE_H
#define ENGINE_SPARSE_H

#include <stdint.h>

#include "corpus.h"
#include "error.h"
#include "real.h"
#include "tasks.h"

typedef enum {
    SPARSE_DENSE = 0,
    SPARSE_TOPK,
    SPARSE_LSH,
    SPARSE_HAMMING,
    SPARSE_UNROTATED,
    SPARSE_WINDOW,
    SPARSE_PREDICTOR_COUNT
} sparse_predictor;

#define SPARSE_MAX_TABLES 16
#define SPARSE_MAX_LSH_BITS 16
#define SPARSE_MAX_HAMMING_BITS 64

typedef struct {
    sparse_predictor predictor;
    int k;              /* keys per query, >= 1 */
    int lsh_tables;     /* SPARSE_LSH: 1..16 */
    int lsh_bits;       /* SPARSE_LSH: hyperplanes per table, 1..16 (2^bits buckets); 0: chosen by the
                           workspace so a bucket holds about k of max_T keys, log2(max_T/k) rounded,
                           at least 1 */
    int lsh_candidates; /* SPARSE_LSH: most recent bucket mates taken per table, 0 (= k) or 1..65536 */
    int hamming_bits;   /* SPARSE_HAMMING: code length 1..64 */
    uint64_t seed;      /* the hyperplanes (rng.h) */
} sparse_config;

/* predictor, k as given; 4 tables of automatic width, candidates = k, 32 Hamming bits, seed 1234. */
void sparse_config_defaults(sparse_config *c, sparse_predictor p, int k);
/* Bounds above, and head width d in 1..1024. ENGINE_ERR_INVALID with a message otherwise. */
engine_status sparse_config_validate(const sparse_config *c, int d, engine_error *err);
/* "dense", "topk", "lsh", "hamming", "unrotated", "window"; "unknown" outside. */
const char *sparse_predictor_name(sparse_predictor p);
/* *p = the predictor named s; 0 ok, -1 unknown (p untouched). */
int sparse_predictor_parse(const char *s, sparse_predictor *p);

/* One head's inputs. Rows t of q, k, v at q + t*q_stride etc. (d reals each). q_unrot/k_unrot
 * (rows at + t*unrot_stride) are needed by SPARSE_UNROTATED only (NULL otherwise is fine). */
typedef struct {
    int T, d;
    const real *q, *k, *v;
    long q_stride, k_stride, v_stride;
    real scale; /* the score multiplier g: 1/tau, or 1/sqrt(d) */
    const real *q_unrot, *k_unrot;
    long unrot_stride;
} sparse_input;

typedef struct sparse_ws sparse_ws;

/* A workspace for heads of up to max_T positions and width d under config c (copied; the
 * hyperplanes are drawn here). ENGINE_ERR_INVALID (bad config, max_T < 1), ENGINE_ERR_NOMEM. */
engine_status sparse_ws_new(sparse_ws **out, const sparse_config *c, int max_T, int d, engine_error *err);
void sparse_ws_free(sparse_ws *ws); /* NULL is fine */
/* The workspace's config, with an automatic lsh_bits resolved. */
const sparse_config *sparse_ws_config(const sparse_ws *ws);

/* Runs the predictor only: afterwards sparse_chosen gives each query's keys. T must be in
 * 1..max_T and d the workspace's; SPARSE_UNROTATED needs q_unrot/k_unrot. ENGINE_ERR_INVALID
 * otherwise (nothing computed). */
engine_status sparse_select(sparse_ws *ws, const sparse_input *in, engine_error *err);
/* The predictor, then attention over the chosen keys: y + t*y_stride receives query t's output
 * (d reals). Errors as sparse_select. */
engine_status sparse_attention(sparse_ws *ws, const sparse_input *in, real *y, long y_stride, engine_error *err);
/* After sparse_select or sparse_attention: query t's chosen key positions, ascending, *n of
 * them (1 <= *n <= min(k, t+1); t+1 for SPARSE_DENSE). NULL (and *n = 0) for t outside the last
 * call's 0..T-1. */
const int *sparse_chosen(const sparse_ws *ws, int t, int *n);

/* How the chosen keys compare with dense attention, summed over queries. Only queries with
 * more than k keys count (a complete selection is trivially perfect). */
typedef struct {
    double recall; /* sum of recall@k: chosen keys whose dense weight is >= the query's k-th
                      largest (ties count as found), / k */
    double mass;   /* sum of the dense attention weight on the chosen keys */
    double keys;   /* sum of the number of keys chosen (LSH may choose fewer than k) */
    long queries;  /* how many queries were counted */
} sparse_quality;

/* Adds the last selection's figures to *q, against dense probabilities att (row t at
 * att + t*att_stride, entries 0..t used), for the T queries of that call. Needs T scratch reals
 * in the workspace (it has them). */
void sparse_quality_add(sparse_ws *ws, const real *att, long att_stride, sparse_quality *q);

/* ---- a whole model with sparse attention --------------------------------------------------
 * The model's own forward pass (model.h: embeddings, pre-LayerNorm blocks, the variant's q/k
 * transform from the attention table, output layer and cross-entropy), recomputed here from the
 * model's public tensors and run on the model's worker pool, with every head's attention
 * replaced by sparse_attention under one config. Where a head's selection is complete for every
 * query (k >= T, or SPARSE_DENSE) the head runs the engine's dense kernel, so with k >= T the
 * loss is bit-identical to model_forward's (a test pins this; it also guards against this
 * file drifting from model.c). The lm-head runs with the engine's kernels as model_forward does
 * by default (model_set_lmhead_blas off). */
struct model;
typedef struct sparse_eval sparse_eval;

/* Buffers for batches of up to max_B windows of the model's seq_len. The model must outlive
 * the evaluator and is only read (its parameters) and its worker pool used; do not run other
 * passes on the model while sparse_eval_run runs. ENGINE_ERR_INVALID, ENGINE_ERR_NOMEM. */
engine_status sparse_eval_new(sparse_eval **out, struct model *m, int max_B, engine_error *err);
void sparse_eval_free(sparse_eval *ev); /* NULL is fine */
/* 1: complete selections also go through the sparse kernel (for tests: it must then agree with
 * the dense loss to rounding). Default 0. */
void sparse_eval_set_gather_always(sparse_eval *ev, int on);

/* Forward pass over inputs[B*T] with attention under cfg. With targets, *loss = the mean next-
 * token cross-entropy (as model_forward). argmax (may be NULL): [B*T] the most likely next token
 * at each position (lowest id on ties), from logits recomputed by a plain product (they can
 * differ from the loss's logits in the last bit). quality (may be NULL): [n_layer*n_head] sums
 * of recall/mass against the dense attention of the same layer input (adds a dense pass per
 * head; see sparse_quality), added to what it holds. Errors: ENGINE_ERR_INVALID (config, sizes,
 * token ids, as model_forward), ENGINE_ERR_NOMEM. */
engine_status sparse_eval_run(sparse_eval *ev, const sparse_config *cfg, const int32_t *inputs, const int32_t *targets,
                              int B, int T, double *loss, int32_t *argmax, sparse_quality *quality, engine_error *err);

/* The mean loss over batches 0..n_batches-1 of one split, read as train.c's evaluation reads
 * them (a loader made here from c and lc; each row split into inputs and next-token targets; the
 * mean of the batch means), with attention under cfg: for k >= lc->seq_len, the run's validation
 * loss bit for bit (of a run that counted every target: loss_on answers counts fewer). With tc (the task corpus c
 * holds, may be NULL) and acc (may be NULL), the exact-match accuracy of the argmax predictions on tc's answer
 * positions is added to *acc. lc->batch <= max_B and lc->seq_len <= the model's seq_len, else ENGINE_ERR_INVALID; the
 * loader's errors; ENGINE_ERR_NOMEM. */
engine_status sparse_eval_split(sparse_eval *ev, const sparse_config *cfg, const corpus *c,
                                const corpus_loader_config *lc, corpus_split split, int n_batches,
                                const tasks_corpus *tc, double *mean_loss, tasks_acc *acc, engine_error *err);

#endif
