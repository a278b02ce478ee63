/* Tests only: random output-layer cases (x, w, targets) and their check against a double-precision
 * reference computed from the same bf16-rounded inputs, shared by the tests of every bf16 kernel
 * path (test_bf16.c: vdpbf16ps and the portable loops; test_amx.c: the AMX kernels). The three
 * products contract over the three shape families: the logits over d_model (K = C), dx over the
 * vocabulary (K = V), dW over the chunk's rows (K = tokens); the bounds grow with each K. */
#ifndef TESTS_LMHEAD_CASES_H
#define TESTS_LMHEAD_CASES_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "kernel_path.h"
#include "lmhead.h"
#include "rng.h"
#include "threads.h"

typedef struct {
    long N;
    int C, V;
    float *x, *w;
    int32_t *tg;
    /* results */
    float *loss, *dx, *dw;
} lm_case;

typedef struct {
    lmhead_args a;
    threadpool *pool;
} run_ctx;

static inline void run_fn(void *ctx, int tid, int nth) {
    run_ctx *r = ctx;
    lmhead_thread(&r->a, r->pool, tid, nth);
}

/* Runs the bf16 output layer on lc with nth threads and chunks of `chunk` rows, on kernel path
 * `path`; 0 on success. */
static inline int run_bf16(lm_case *lc, int nth, int chunk, kernel_path_id path) {
    engine_error err;
    threadpool *pool;
    lmhead_bf16 *b;
    if (threads_create(&pool, nth, &err)) return -1;
    if (lmhead_bf16_new_on(&b, lc->V, lc->C, path, &err)) {
        printf("%s\n", err.message);
        threads_free(pool);
        return -1;
    }
    lmhead_bf16_refresh(b, lc->w, pool);
    size_t per = lmhead_scratch_per_thread(lc->C, lc->V);
    float *buf = calloc(per * (size_t)nth, sizeof(float));
    atomic_long tickets[LMHEAD_SLICES];
    for (int i = 0; i < LMHEAD_SLICES; i++) atomic_init(&tickets[i], 0);
    memset(lc->dw, 0, sizeof(float) * (size_t)lc->V * lc->C);
    run_ctx r = {.pool = pool,
                 .a = {.x = lc->x,
                       .w = lc->w,
                       .targets = lc->tg,
                       .N = lc->N,
                       .C = lc->C,
                       .V = lc->V,
                       .losses = lc->loss,
                       .dx = lc->dx,
                       .dw = lc->dw,
                       .grad_scale = (float)(1.0 / lc->N),
                       .buf = buf,
                       .buf_stride = per,
                       .chunk_rows = chunk,
                       .tickets = tickets,
                       .bf = b}};
    threads_run(pool, run_fn, &r);
    free(buf);
    lmhead_bf16_free(b);
    threads_free(pool);
    return 0;
}

static inline lm_case make_case(long N, int C, int V, uint64_t seed, double wscale) {
    lm_case lc = {.N = N, .C = C, .V = V};
    lc.x = malloc(sizeof(float) * N * C);
    lc.w = malloc(sizeof(float) * (size_t)V * C);
    lc.tg = malloc(sizeof(int32_t) * N);
    lc.loss = malloc(sizeof(float) * N);
    lc.dx = malloc(sizeof(float) * N * C);
    lc.dw = malloc(sizeof(float) * (size_t)V * C);
    rng_state r;
    rng_seed(&r, seed);
    for (long i = 0; i < N * C; i++) lc.x[i] = (float)rng_normal(&r);
    for (long i = 0; i < (long)V * C; i++) lc.w[i] = (float)(wscale * rng_normal(&r));
    for (long i = 0; i < N; i++) lc.tg[i] = (int32_t)(rng_next_u64(&r) % (uint64_t)V);
    return lc;
}

static inline void free_case(lm_case *lc) {
    free(lc->x);
    free(lc->w);
    free(lc->tg);
    free(lc->loss);
    free(lc->dx);
    free(lc->dw);
}

/* Double reference from the inputs as the path reads them (bf16: rounded to bf16; fp32: as they
 * are); every result within its bound (u = 2^-24; e = 2^-8 and f = 2^-7 in bf16, where E and s_r x_r
 * are rounded to bf16, 2^-20 in fp32):
 *   loss: 1e-5 + 4 C u A_r + V u        (A_r = max_v sum_c |x_rc w_vc|: the logits' fp32 sums; V u: the sum of exps)
 *   dx:   g (e + V u + 4 C u A_r) sum_v p_v |w_vc|   (sums over V)
 *   dW:   g (f + N u + 4 C u A) sum_r p_rv |x_rc| + g 2^-20 sum_{r: t_r = v} |x_rc|   (sums over the rows) */
static inline int check_case_as(const lm_case *lc, int bf, char *why, size_t whylen) {
#define IN(x) (bf ? (double)bf16_round(x) : (double)(x))
    const long N = lc->N;
    const int C = lc->C, V = lc->V;
    const double g = 1.0 / N, u = 1.0 / (1 << 24);
    double *p = malloc(sizeof(double) * V), *dw = calloc((size_t)V * C, sizeof(double)),
           *dwb = calloc((size_t)V * C, sizeof(double));
    double Amax = 0;
    int ok = 1;
    for (long r = 0; r < N && ok; r++) {
        const float *x = lc->x + r * C;
        double mx = -INFINITY, A = 0;
        for (int v = 0; v < V; v++) {
            double l = 0, a = 0;
            for (int c = 0; c < C; c++) {
                double t = IN(x[c]) * IN(lc->w[(long)v * C + c]);
                l += t;
                a += fabs(t);
            }
            p[v] = l;
            mx = l > mx ? l : mx;
            A = a > A ? a : A;
        }
        Amax = A > Amax ? A : Amax;
        double s = 0;
        for (int v = 0; v < V; v++) s += exp(p[v] - mx);
        double loss = log(s) + mx - p[lc->tg[r]];
        for (int v = 0; v < V; v++) p[v] = exp(p[v] - mx) / s;
        double dl = 4 * C * u * A;
        if (!(fabs(loss - lc->loss[r]) <= 1e-5 + dl + V * u)) {
            snprintf(why, whylen, "row %ld: loss %.9g, reference %.9g", r, lc->loss[r], loss);
            ok = 0;
            break;
        }
        for (int c = 0; c < C; c++) {
            double d = 0, b = 0;
            for (int v = 0; v < V; v++) {
                double wv = IN(lc->w[(long)v * C + c]);
                d += p[v] * wv;
                b += p[v] * fabs(wv);
            }
            d = g * (d - IN(lc->w[(long)lc->tg[r] * C + c]));
            double tol = g * ((bf ? 1.0 / 256 : 1.0 / (1 << 20)) + V * u + dl) * b + 1e-12;
            if (!(fabs(d - lc->dx[r * C + c]) <= tol)) {
                snprintf(why, whylen, "dx[%ld][%d] %.9g, reference %.9g (bound %.3g)", r, c, lc->dx[r * C + c], d, tol);
                ok = 0;
                break;
            }
        }
        for (int v = 0; v < V; v++)
            for (int c = 0; c < C; c++) {
                double xv = IN(x[c]);
                dw[(long)v * C + c] += g * (p[v] - (v == lc->tg[r])) * xv;
                dwb[(long)v * C + c] += g * p[v] * fabs(xv) + (v == lc->tg[r] ? g * fabs(xv) / (1 << 20) : 0);
            }
    }
    for (long i = 0; ok && i < (long)V * C; i++) {
        double tol = ((bf ? 1.0 / 128 : 1.0 / (1 << 20)) + N * u + 4 * C * u * Amax) * dwb[i] + 1e-12;
        if (!(fabs(dw[i] - lc->dw[i]) <= tol)) {
            snprintf(why, whylen, "dW[%ld][%ld] %.9g, reference %.9g (bound %.3g)", i / C, i % C, lc->dw[i], dw[i],
                     tol);
            ok = 0;
        }
    }
    free(p);
    free(dw);
    free(dwb);
    return ok;
#undef IN
}

/* The bf16 paths' check. */
static inline int check_case(const lm_case *lc, char *why, size_t whylen) { return check_case_as(lc, 1, why, whylen); }

/* Runs the fp32 output layer (the float build's own kernels, or BLAS when use_blas) on lc. */
static inline int run_fp32(lm_case *lc, int nth, int chunk, int use_blas) {
    engine_error err;
    threadpool *pool;
    if (threads_create(&pool, nth, &err)) return -1;
    size_t per = lmhead_scratch_per_thread(lc->C, lc->V);
    float *buf = calloc(per * (size_t)nth, sizeof(float));
    atomic_long tickets[LMHEAD_SLICES];
    for (int i = 0; i < LMHEAD_SLICES; i++) atomic_init(&tickets[i], 0);
    memset(lc->dw, 0, sizeof(float) * (size_t)lc->V * lc->C);
    run_ctx r = {.pool = pool,
                 .a = {.x = lc->x,
                       .w = lc->w,
                       .targets = lc->tg,
                       .N = lc->N,
                       .C = lc->C,
                       .V = lc->V,
                       .losses = lc->loss,
                       .dx = lc->dx,
                       .dw = lc->dw,
                       .grad_scale = (float)(1.0 / lc->N),
                       .buf = buf,
                       .buf_stride = per,
                       .use_blas = use_blas,
                       .chunk_rows = chunk,
                       .tickets = tickets}};
    threads_run(pool, run_fn, &r);
    free(buf);
    threads_free(pool);
    return 0;
}

static inline int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

#endif
