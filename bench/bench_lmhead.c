/* The output layer alone (logits, softmax cross-entropy, dx and dW of N rows against a vocabulary
 * of V at width C) in fp32 (the engine's AVX-512 kernels, or BLAS where they do not apply) and in
 * bf16 mixed precision, one after the other in rounds (A B A B), with the fp32 FMA peak and the
 * bf16 dot-product peak (and the AMX peak where the CPU has it) measured by this program on as many
 * threads, right around each round.
 *   bench_lmhead [--rows N] [--vocab V] [--dim C] [--threads T] [--rounds R] [--kernel-path NAME]
 * The bf16 rounds run on the process's bf16 kernel path (kernel_path.h), or on the one named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#include "cpu.h"
#include "kernel_path.h"
#include "lmhead.h"
#include "mem.h"
#include "rng.h"
#include "threads.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    double seconds, fma, dp, amx;
} peak_arg;

static void *peak_thread(void *p) {
    peak_arg *a = p;
    cpu_measure_peaks(a->seconds, &a->fma, &a->dp);
    a->amx = cpu_has_amx_bf16() ? cpu_measure_amx_peak(a->seconds / 2) : 0;
    return NULL;
}

/* Total fp32 FMA, bf16 dot-product and AMX (0 without) FLOP/s of `threads` threads at once. */
static void peaks(int threads, double seconds, double *fma, double *dp, double *amx) {
    pthread_t t[64];
    peak_arg a[64];
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; i++) {
        a[i].seconds = seconds;
        pthread_create(&t[i], NULL, peak_thread, &a[i]);
    }
    *fma = *dp = *amx = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        *fma += a[i].fma;
        *dp += a[i].dp;
        *amx += a[i].amx;
    }
}

typedef struct {
    lmhead_args a;
    threadpool *pool;
} run_ctx;

static void run_fn(void *ctx, int tid, int nth) {
    run_ctx *r = ctx;
    lmhead_thread(&r->a, r->pool, tid, nth);
}

int main(int argc, char **argv) {
    long N = 4096;
    int V = 50257, C = 128, threads = (int)sysconf(_SC_NPROCESSORS_ONLN), rounds = 3, bf16_only = 0, no_peaks = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            N = atol(argv[++i]);
        else if (!strcmp(argv[i], "--vocab") && i + 1 < argc)
            V = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc)
            C = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernel-path") && i + 1 < argc) {
            engine_error e;
            if (kernel_path_force(argv[++i], &e)) {
                fprintf(stderr, "bench_lmhead: %s\n", e.message);
                return 2;
            }
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bf16-only"))
            bf16_only = 1;
        else if (!strcmp(argv[i], "--no-peaks"))
            no_peaks = 1;
        else {
            fprintf(stderr, "usage: bench_lmhead [--rows N] [--vocab V] [--dim C] [--threads T] [--rounds R] "
                            "[--kernel-path NAME] [--bf16-only] [--no-peaks]\n");
            return 2;
        }
    }
    engine_error err;
    threadpool *pool;
    lmhead_bf16 *b = NULL;
    if (threads_create(&pool, threads, &err)) return 1;
    float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * (size_t)V * C);
    float *dx = malloc(sizeof(float) * N * C), *dw = calloc((size_t)V * C, sizeof(float)),
          *loss = malloc(sizeof(float) * N);
    int32_t *tg = malloc(sizeof(int32_t) * N);
    size_t per = lmhead_scratch_per_thread(C, V);
    float *buf = mem_calloc64(per * (size_t)threads, sizeof(float));
    if (!x || !w || !dx || !dw || !loss || !tg || !buf) return 1;
    rng_state r;
    rng_seed(&r, 1);
    for (long i = 0; i < N * C; i++) x[i] = (float)rng_normal(&r);
    for (long i = 0; i < (long)V * C; i++) w[i] = (float)(0.02 * rng_normal(&r));
    for (long i = 0; i < N; i++) tg[i] = (int32_t)(rng_next_u64(&r) % (uint64_t)V);
    int have_bf16 = lmhead_bf16_applies(C) && lmhead_bf16_new(&b, V, C, &err) == ENGINE_OK;
    if (have_bf16) lmhead_bf16_refresh(b, w, pool);
    double flops = 6.0 * N * V * C;
    double best[2] = {0, 0}, fsum = 0, dsum = 0, asum = 0;
    const int on_amx = have_bf16 && kernel_path_for_precision(PRECISION_BF16) == KERNEL_PATH_AMX;
    int np = 0;
    atomic_long tickets[LMHEAD_SLICES];
    printf("output layer N%ld C%d V%d, %d threads, %.1f GFLOP per pass (logits, dx, dW); bf16 kernels: %s\n", N, C, V,
           threads, flops / 1e9, kernel_path_name_for_precision(PRECISION_BF16));
    for (int round = 0; round < rounds; round++) {
        for (int mode = bf16_only && have_bf16; mode < 1 + have_bf16; mode++) {
            double f = 0, d = 0, am = 0;
            if (!no_peaks) peaks(threads, 0.2, &f, &d, &am);
            fsum += f;
            dsum += d;
            asum += am;
            np++;
            for (int i = 0; i < LMHEAD_SLICES; i++) atomic_init(&tickets[i], 0);
            /* chunks as the model sizes them (model.c) */
            const lmhead_bf16 *mb = mode ? b : NULL;
            long R = lmhead_max_rows(mb) > LMHEAD_MAX_ROWS ? (N + 7) / 8 : (N + 15) / 16;
            R = (R + 15) / 16 * 16;
            if (R > lmhead_max_rows(mb)) R = lmhead_max_rows(mb);
            run_ctx rc = {.pool = pool,
                          .a = {.x = x,
                                .w = w,
                                .targets = tg,
                                .N = N,
                                .C = C,
                                .V = V,
                                .losses = loss,
                                .dx = dx,
                                .dw = dw,
                                .grad_scale = (float)(1.0 / N),
                                .buf = buf,
                                .buf_stride = per,
                                .chunk_rows = (int)R,
                                .tickets = tickets,
                                .bf = mode ? b : NULL}};
            double t0 = now_s();
            threads_run(pool, run_fn, &rc);
            double dt = now_s() - t0;
            double rate = flops / dt;
            if (rate > best[mode]) best[mode] = rate;
            printf("  round %d %-5s %8.1f ms  %6.1f GFLOP/s  (peaks around it: fp32 FMA %.1f, bf16 dot %.1f, AMX %.1f "
                   "GFLOP/s)  %5.1f%% of fp32 FMA peak, %5.1f%% of bf16 dot peak",
                   round + 1, mode ? "bf16" : "fp32", 1000 * dt, rate / 1e9, f / 1e9, d / 1e9, am / 1e9,
                   f > 0 ? 100 * rate / f : 0.0, d > 0 ? 100 * rate / d : 0.0);
            if (mode && on_amx) printf(", %5.1f%% of the AMX peak", am > 0 ? 100 * rate / am : 0.0);
            printf("\n");
        }
    }
    double f = fsum / np, d = dsum / np, am = asum / np;
    printf("best: fp32 %.1f GFLOP/s = %.1f%% of the fp32 FMA peak (%.1f)", best[0] / 1e9,
           f > 0 ? 100 * best[0] / f : 0.0, f / 1e9);
    if (have_bf16)
        printf("; bf16 %.1f GFLOP/s = %.1f%% of the bf16 dot-product peak (%.1f), %.2fx fp32", best[1] / 1e9,
               d > 0 ? 100 * best[1] / d : 0.0, d / 1e9, best[0] > 0 ? best[1] / best[0] : 0.0);
    /* the fused layer's share of the tiles' peak, counting its 6 N V C useful FLOPs (the amx path computes
     * the logits twice: 8 N V C) */
    if (on_amx)
        printf("; amx: %.1f%% of the AMX peak (%.1f GFLOP/s; target >= 50%%: %s)", am > 0 ? 100 * best[1] / am : 0.0,
               am / 1e9, am > 0 && best[1] >= 0.5 * am ? "met" : "missed");
    printf("\n");
    lmhead_bf16_free(b);
    threads_free(pool);
    free(x);
    free(w);
    free(dx);
    free(dw);
    free(loss);
    free(tg);
    mem_free64(buf);
    return 0;
}
