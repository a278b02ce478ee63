/* What sparse attention costs against dense attention: one head, on the calling thread, over
 * synthetic q, k, v (random unit vectors drawn once from a seed: the cost does not depend on what
 * they hold). The one timing core behind bench/bench_sparse and the sparse_cost probe.
 *
 * The kernels timed, for N queries over their causal keys at head width d:
 *   dense    exact causal attention in blocks of SPARSE_TIMING_BLOCK query rows: scores and values
 *            through the engine's matrix products (gemm.h), the softmax with the engine's vector
 *            exp (float build; libm exp in the double build); O(N^2 d) time, O(64 N) memory.
 *   engine   layers.h attention_forward_unit, the kernel training uses (a full N x N matrix, so
 *            N <= SPARSE_TIMING_ENGINE_MAX_N): a cross-check of the dense figure.
 *   sparse   sparse.h's sparse_attention under a config (predictor, k): the predictor runs inside
 *            every timed call, so its time is included; sparse_select alone gives its own share.
 * A time is this thread's CPU time (CLOCK_THREAD_CPUTIME_ID: waiting for a CPU on a shared machine
 * is not counted, though other load still costs caches), per query: the best over `rounds` timed
 * rounds, each of as many calls as last at least min_s, after one untimed warm-up call. Times are
 * measurements, not results: they differ from run to run (nothing here is deterministic but the
 * inputs).
 *
 * A sparse_timing holds the inputs and every buffer (made once, checked); it serves one thread at a
 * time. Nothing here exits or prints. */
#ifndef ENGINE_SPARSE_TIMING_H
#define ENGINE_SPARSE_TIMING_H

#include <stdint.h>

#include "error.h"
#include "real.h"
#include "sparse.h"

#define SPARSE_TIMING_BLOCK 64          /* query rows per block of the dense kernel */
#define SPARSE_TIMING_MAX_N 65536       /* the most queries a sparse_timing can hold */
#define SPARSE_TIMING_ENGINE_MAX_N 4096 /* the engine kernel's N x N matrix: up to 64 MiB */
#define SPARSE_TIMING_TOPK_MAX_N 4096   /* exact top-k (O(N^2 d), scalar): timed up to here by both callers */
#define SPARSE_TIMING_MAX_ROUNDS 16

typedef struct sparse_timing sparse_timing;

typedef struct {
    double min_s; /* each timed round repeats calls until it has lasted this much CPU time, > 0 */
    int rounds;   /* timed rounds, the best kept: 1..SPARSE_TIMING_MAX_ROUNDS */
} sparse_timing_cfg;

/* Inputs for up to max_N queries (1..SPARSE_TIMING_MAX_N) at head width d (1..1024): q, k, v rows
 * drawn as unit vectors from seed (rng.h normals, each row normalised), the output and the dense
 * kernel's SPARSE_TIMING_BLOCK x max_N scores. The engine kernel's matrix is made by its own call.
 * ENGINE_ERR_INVALID (sizes), ENGINE_ERR_NOMEM. */
engine_status sparse_timing_new(sparse_timing **out, int max_N, int d, uint64_t seed, engine_error *err);
void sparse_timing_free(sparse_timing *c); /* NULL is fine */
int sparse_timing_max_n(const sparse_timing *c);
int sparse_timing_d(const sparse_timing *c);
/* Row t of the unit-vector inputs (d reals each; t in 0..max_N-1): for tests. */
const real *sparse_timing_q(const sparse_timing *c);
const real *sparse_timing_k(const sparse_timing *c);
const real *sparse_timing_v(const sparse_timing *c);
/* The last timed call's output, N rows of d reals (query t at + t*d): for tests. */
const real *sparse_timing_output(const sparse_timing *c);

/* Each fills *us_per_query with the best round's CPU microseconds per query for N queries
 * (1..max_N) under timing t; the score scale is 1/sqrt(d). ENGINE_ERR_INVALID (N, timing, and
 * for the engine kernel N > SPARSE_TIMING_ENGINE_MAX_N), ENGINE_ERR_NOMEM (engine: its N x N
 * matrix). On an error *us_per_query is left as it was. */
engine_status sparse_timing_dense(sparse_timing *c, int N, const sparse_timing_cfg *t, double *us_per_query,
                                  engine_error *err);
engine_status sparse_timing_engine(sparse_timing *c, int N, const sparse_timing_cfg *t, double *us_per_query,
                                   engine_error *err);
/* Sparse attention under cfg (validated; a workspace is made for N outside the timing): *total_us
 * per query with the predictor included, and *predictor_us (may be NULL: not timed) the predictor
 * alone (sparse_select). SPARSE_UNROTATED is refused (it needs unrotated vectors, which synthetic
 * inputs do not have). Errors as above, and sparse_ws_new's. */
engine_status sparse_timing_sparse(sparse_timing *c, const sparse_config *cfg, int N, const sparse_timing_cfg *t,
                                   double *total_us, double *predictor_us, engine_error *err);

/* The crossover over n measurements at increasing N: the index of the smallest N from which the
 * sparse time stays below the dense time at every larger N measured; -1 when it is not below at the
 * largest measured N (or nothing is measured). Entries with sparse_us[i] < 0 or not finite, or a
 * dense_us[i] that is not positive and finite, are "not measured" and skipped. */
int sparse_timing_crossover(const double *dense_us, const double *sparse_us, int n);

/* This thread's CPU time in seconds (the clock of the figures above). */
double sparse_timing_cpu_s(void);

#endif
