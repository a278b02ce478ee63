/* Training throughput of the seed configuration (L3 H4 C128 T128 V50257, B32 by default) for
 * one attention variant: tokens/s, ms/step, peak RSS, and model FLOP utilisation against the
 * FMA peak measured by this same program on as many threads at once: MFU is the median over steps
 * of each step's FLOP rate against the peak measured right before and right after that step (a
 * busy machine lowers both). The CPU-time MFU divides by the CPU time the run actually got
 * instead, against the peak per CPU-second: a figure that other load disturbs much less.
 * AVX-512 FMAs where the CPU has them (the build uses -march=native), else AVX2.
 *   bench_train [--attention dot|rope|cosine_rope] [--steps N] [--batch B] [--threads N] [--lmhead-blas]
 * --lmhead-blas runs the output layer through BLAS instead of the engine's own kernels, to compare.
 * Data are uniformly random token ids from the engine's generator: throughput does not depend
 * on what the tokens are. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "rng.h"
#include "train.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- FMA peak: 12 independent chains of 16-lane fused multiply-adds (2 FLOPs per lane) ---- */
static double cpu_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    double duration;
    double seconds, cpu_seconds;
    double flops;
    float sink;
} peak_arg;

#ifdef __AVX512F__
#define VEC __m512
#define LANES 16
#define VSET _mm512_set1_ps
#define VFMA _mm512_fmadd_ps
#define VSUM _mm512_reduce_add_ps
#else /* AVX2 + FMA */
#define VEC __m256
#define LANES 8
#define VSET _mm256_set1_ps
#define VFMA _mm256_fmadd_ps
static float VSUM(__m256 v) {
    float f[8], s = 0;
    _mm256_storeu_ps(f, v);
    for (int i = 0; i < 8; i++) s += f[i];
    return s;
}
#endif

static void *peak_thread(void *p) {
    peak_arg *a = p;
    VEC acc[12], x = VSET(0.999999f), y = VSET(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = VSET((float)i * 1e-3f);
    long iters = 0;
    double t0 = now_s(), t1, c0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    do {
        for (int r = 0; r < 100000; r++) {
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) acc[i] = VFMA(acc[i], x, y);
        }
        iters += 100000;
        t1 = now_s();
    } while (t1 - t0 < a->duration);
    float s = 0;
    for (int i = 0; i < 12; i++) s += VSUM(acc[i]);
    a->sink = s;
    a->seconds = t1 - t0;
    a->cpu_seconds = cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    a->flops = (double)iters * 12 * LANES * 2;
    return NULL;
}

/* Total FLOP/s of `threads` threads at once (wall clock); *per_cpu_s gets FLOPs per CPU-second
 * of one thread, which does not depend on how much of the machine others are using. */
static double fma_peak(int threads, double duration, double *per_cpu_s) {
    pthread_t t[64];
    peak_arg a[64];
    memset(a, 0, sizeof a);
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; i++) a[i].duration = duration;
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, peak_thread, &a[i]);
    double total = 0, flops = 0, cpu = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        total += a[i].flops / a[i].seconds;
        flops += a[i].flops;
        cpu += a[i].cpu_seconds;
    }
    *per_cpu_s = flops / cpu;
    return total;
}

/* ---- training ---- */
typedef struct {
    int B, T, V;
    uint64_t seed;
} rand_src;

static engine_status rand_batch(void *ctx, corpus_split split, long step, int32_t *out, engine_error *err) {
    rand_src *r = ctx;
    rng_state g;
    rng_seed(&g, r->seed + (uint64_t)step * 2 + (split == CORPUS_SPLIT_VAL));
    for (long i = 0; i < (long)r->B * (r->T + 1); i++) out[i] = (int32_t)(rng_next_u64(&g) % (uint64_t)r->V);
    return ENGINE_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    int warmup, threads;
    double step_flops;
    double ms[1000], cpu[1000], mfu[1000], loss_first, loss_last, last_cpu, last_peak;
    int n;
} stats;

/* After each step: its times, then a short FMA peak measurement, so that every step is judged
 * against the peak measured just before and just after it (the machine may be shared and its
 * load change from one second to the next). The peak's own CPU time is kept out of the steps. */
static void on_step(void *ctx, const train_step_metrics *m) {
    stats *s = ctx;
    double c = cpu_s(CLOCK_PROCESS_CPUTIME_ID), dc = c - s->last_cpu, pc;
    if (m->step == 1) s->loss_first = m->loss;
    s->loss_last = m->loss;
    double before = s->last_peak;
    s->last_peak = fma_peak(s->threads, 0.25, &pc);
    if (m->step > s->warmup && s->n < 1000) {
        s->cpu[s->n] = dc;
        s->mfu[s->n] = s->step_flops / (m->step_ms / 1000) / (0.5 * (before + s->last_peak));
        s->ms[s->n++] = m->step_ms;
    }
    s->last_cpu = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}



int main(int argc, char **argv) {
    train_config c;
    train_config_defaults(&c);
    c.steps = 6;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--attention") && i + 1 < argc) {
            if (attention_kind_parse(argv[++i], &c.model.attention)) return 2;
        } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
            c.steps = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            c.batch = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--lmhead-blas")) {
            c.lmhead_blas = 1;
        } else {
            fprintf(stderr, "usage: bench_train [--attention KIND] [--steps N] [--batch B] [--threads N] [--lmhead-blas]\n");
            return 2;
        }
    }
    if (threads < 1) threads = 1;
    if (c.steps < 2) c.steps = 2;
    double per_cpu_before, per_cpu_after;
    double peak_before = fma_peak(threads, 0.5, &per_cpu_before);
    rand_src rs = {c.batch, c.model.seq_len, c.model.vocab, 42};
    train_source src = {.ctx = &rs, .batch = rand_batch, .has_val = 0};
    stats st = {.warmup = 1, .threads = threads, .last_peak = peak_before,
                .step_flops = model_config_train_flops_per_token(&c.model) * c.batch * c.model.seq_len,
                .last_cpu = cpu_s(CLOCK_PROCESS_CPUTIME_ID)};
    train_callbacks cb = {.ctx = &st, .on_step = on_step};
    engine_error err;
    if (train_run_source(&c, &src, threads, NULL, &cb, &err)) {
        fprintf(stderr, "bench_train: %s\n", err.message);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double peak_after = fma_peak(threads, 0.5, &per_cpu_after), peak = 0.5 * (peak_before + peak_after);
    double per_cpu = 0.5 * (per_cpu_before + per_cpu_after);
    /* the median step: robust to a step slowed down by whatever else the machine runs */
    double ms = median(st.ms, st.n), cpu = median(st.cpu, st.n), mfu = median(st.mfu, st.n);
    double tps = (double)c.batch * c.model.seq_len / (ms / 1000);
    double step_flops = model_config_train_flops_per_token(&c.model) * c.batch * c.model.seq_len;
    double flops = step_flops / (ms / 1000);
    printf("%-12s%s threads %d  B%d T%d  %7.1f ms/step (median of %d)  %7.0f tokens/s  %6.1f GFLOP/s  "
           "FMA peak %6.1f GFLOP/s (before %.1f, after %.1f)  MFU %5.1f%% (median of per-step ratios)  "
           "CPU-time MFU %5.1f%% (%.2f CPU-s/step, peak %.1f GFLOP per CPU-s)  peak RSS %5.0f MB (est. %zu MB)  "
           "loss %.3f -> %.3f\n",
           attention_kind_name(c.model.attention), c.lmhead_blas ? " (BLAS output layer)" : "", threads, c.batch, c.model.seq_len, ms, st.n, tps, flops / 1e9,
           peak / 1e9, peak_before / 1e9, peak_after / 1e9, 100 * mfu, 100 * step_flops / (cpu * per_cpu),
           cpu, per_cpu / 1e9, ru.ru_maxrss / 1024.0, train_config_memory_bytes(&c, threads) >> 20, st.loss_first,
           st.loss_last);
    return 0;
}
