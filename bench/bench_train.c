/* Training throughput of the seed configuration (L3 H4 C128 T128 V50257, B32 by default) for
 * one attention variant: tokens/s, ms/step, peak RSS, and model FLOP utilisation against the
 * FMA peak measured by this same program on as many threads at once: MFU is the median over steps
 * of each step's FLOP rate against the peak measured right before and right after that step (a
 * busy machine lowers both). The CPU-time MFU divides by the CPU time the run actually got
 * instead, against the peak per CPU-second: a figure that other load disturbs much less.
 * AVX-512 FMAs where the CPU has them (the build uses -march=native), else AVX2.
 *   bench_train [--attention dot|rope|cosine_rope] [--steps N] [--batch B] [--threads N] [--lmhead-blas]
 *               [--precision fp32|bf16]   (default: precision_default(), printed by --default-precision)
 *               [--kernel-path amx|avx512_bf16|fp32|bf16_portable]   (forces the path, and the precision to its
 *                own unless a later --precision says otherwise; --default-kernel-path prints the chosen one,
 *                --kernel-paths the table: name, unit, "runs" or why not, GFLOP/s of one thread)
 *               [--tokens FILE | --write-tokens FILE] [--no-peaks] [--json] [--blas]
 * --blas sends the products the engine's own kernels take (gemm.h) to OpenBLAS instead, to compare.
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

#include "cpu.h"
#include "gemm.h"
#include "kernel_path.h"
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

typedef struct {
    double seconds, fma, dp, amx;
} dot_arg;

static void *dot_thread(void *p) {
    dot_arg *a = p;
    a->dp = a->amx = 0;
    if (cpu_has_avx512bf16()) cpu_measure_peaks(a->seconds, &a->fma, &a->dp);
    if (cpu_has_amx_bf16()) a->amx = cpu_measure_amx_peak(a->seconds);
    return NULL;
}

/* Total vdpbf16ps and TDPBF16PS FLOP/s of `threads` threads at once (0 for a unit the CPU lacks). */
static void unit_peaks(int threads, double seconds, double *dp, double *amx) {
    *dp = *amx = 0;
    if (!cpu_has_avx512bf16() && !cpu_has_amx_bf16()) return;
    pthread_t t[64];
    dot_arg a[64];
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; i++) {
        a[i].seconds = seconds;
        pthread_create(&t[i], NULL, dot_thread, &a[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        *dp += a[i].dp;
        *amx += a[i].amx;
    }
}

/* ---- training ---- */
typedef struct {
    int B, T, V;
    uint64_t seed;
    FILE *file; /* --tokens: batches from this file instead */
    long file_batches;
} rand_src;

static engine_status rand_batch(void *ctx, corpus_split split, long step, int32_t *out, engine_error *err) {
    rand_src *r = ctx;
    if (r->file) {
        /* batch `step` of a token file (int32, batch after batch), cycling */
        long per = (long)r->B * (r->T + 1), nb = r->file_batches;
        if (fseek(r->file, (long)((step % nb) * per * (long)sizeof(int32_t)), SEEK_SET) != 0 ||
            fread(out, sizeof(int32_t), (size_t)per, r->file) != (size_t)per)
            return engine_fail(err, ENGINE_ERR_IO, "token file: batch %ld is unreadable", step % nb);
        return ENGINE_OK;
    }
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
    int warmup, threads, no_peaks;
    double step_flops;
    double ms[1000], cpu[1000], mfu[1000], loss_first, loss_last, last_cpu, last_peak;
    double part[TRAIN_TIME_PARTS][1000]; /* each step's time by part (train.h) */
    char path[32];                       /* the kernel path the run reported */
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
    if (!s->no_peaks) s->last_peak = fma_peak(s->threads, 0.25, &pc);
    snprintf(s->path, sizeof s->path, "%s", m->kernel_path ? m->kernel_path : "?");
    if (m->step > s->warmup && s->n < 1000) {
        for (int i = 0; i < TRAIN_TIME_PARTS; i++) s->part[i][s->n] = m->time_ms ? m->time_ms[i] : 0;
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
    c.precision = precision_default();
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    const char *tokens = NULL, *write_tokens = NULL;
    int no_peaks = 0, json = 0;
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
        } else if (!strcmp(argv[i], "--kernel-path") && i + 1 < argc) {
            engine_error e;
            if (kernel_path_force(argv[++i], &e)) {
                fprintf(stderr, "bench_train: %s\n", e.message);
                return 2;
            }
            c.precision = precision_default();
        } else if (!strcmp(argv[i], "--default-kernel-path")) {
            printf("%s\n", kernel_path_name());
            return 0;
        } else if (!strcmp(argv[i], "--kernel-paths")) {
            /* the table as this CPU sees it: name, unit, runs or why not, one thread's measured rate */
            for (int k = 0; k < KERNEL_PATH_COUNT; k++) {
                char why[160];
                int ok = kernel_path_supported((kernel_path_id)k, why, sizeof why);
                printf("%s\t%s\t%s\t%.1f\n", kernel_path_row((kernel_path_id)k)->name,
                       kernel_path_row((kernel_path_id)k)->unit, ok ? "runs" : why,
                       kernel_path_rate((kernel_path_id)k) / 1e9);
            }
            return 0;
        } else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
            if (precision_parse(argv[++i], &c.precision)) return 2;
        } else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) {
            tokens = argv[++i];
        } else if (!strcmp(argv[i], "--write-tokens") && i + 1 < argc) {
            write_tokens = argv[++i];
        } else if (!strcmp(argv[i], "--no-peaks")) {
            no_peaks = 1;
        } else if (!strcmp(argv[i], "--blas")) {
            gemm_use_blas(1);
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--blas-core")) {
            printf("%s\n", gemm_blas_core());
            return 0;
        } else if (!strcmp(argv[i], "--default-precision")) {
            printf("%s\n", precision_name(precision_default()));
            return 0;
        } else {
            fprintf(stderr,
                    "usage: bench_train [--attention KIND] [--steps N] [--batch B] [--threads N] [--lmhead-blas]\n"
                    "                   [--precision fp32|bf16] [--tokens FILE | --write-tokens FILE] [--no-peaks] "
                    "[--json]\n"
                    "                   [--blas] [--default-precision] [--blas-core] [--kernel-path NAME]\n"
                    "                   [--default-kernel-path] [--kernel-paths]\n");
            return 2;
        }
    }
    rand_src rs = {c.batch, c.model.seq_len, c.model.vocab, 42, NULL, 0};
    if (write_tokens) {
        /* the token stream every peer of `make bench` trains on: `steps` batches of B x (T+1) */
        FILE *f = fopen(write_tokens, "wb");
        int32_t *b = malloc(sizeof(int32_t) * (size_t)c.batch * (c.model.seq_len + 1));
        engine_error e;
        if (!f || !b) return 1;
        for (long k = 0; k < c.steps; k++) {
            rand_batch(&rs, CORPUS_SPLIT_TRAIN, k, b, &e);
            if (fwrite(b, sizeof(int32_t), (size_t)c.batch * (c.model.seq_len + 1), f) !=
                (size_t)c.batch * (c.model.seq_len + 1))
                return 1;
        }
        free(b);
        return fclose(f) ? 1 : 0;
    }
    if (tokens) {
        if (!(rs.file = fopen(tokens, "rb")) || fseek(rs.file, 0, SEEK_END)) {
            fprintf(stderr, "bench_train: cannot read %s\n", tokens);
            return 1;
        }
        rs.file_batches = ftell(rs.file) / (long)(sizeof(int32_t) * (size_t)c.batch * (c.model.seq_len + 1));
        if (rs.file_batches < 1) {
            fprintf(stderr, "bench_train: %s holds no whole batch\n", tokens);
            return 1;
        }
    }
    if (threads < 1) threads = 1;
    if (c.steps < 2) c.steps = 2;
    double per_cpu_before = 0, per_cpu_after = 0, dp_before = 0, dp_after = 0, amx_before = 0, amx_after = 0;
    double peak_before = no_peaks ? 0 : fma_peak(threads, 0.5, &per_cpu_before);
    if (!no_peaks) unit_peaks(threads, 0.4, &dp_before, &amx_before);
    train_source src = {.ctx = &rs, .batch = rand_batch, .has_val = 0};
    stats st = {.warmup = 1,
                .threads = threads,
                .no_peaks = no_peaks,
                .last_peak = peak_before,
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
    double peak_after = no_peaks ? 0 : fma_peak(threads, 0.5, &per_cpu_after), peak = 0.5 * (peak_before + peak_after);
    if (!no_peaks) unit_peaks(threads, 0.4, &dp_after, &amx_after);
    double dpeak = 0.5 * (dp_before + dp_after), apeak = 0.5 * (amx_before + amx_after);
    double per_cpu = 0.5 * (per_cpu_before + per_cpu_after);
    /* the median step: robust to a step slowed down by whatever else the machine runs */
    double ms = median(st.ms, st.n), cpu = median(st.cpu, st.n), mfu = median(st.mfu, st.n);
    double tps = (double)c.batch * c.model.seq_len / (ms / 1000);
    double step_flops = model_config_train_flops_per_token(&c.model) * c.batch * c.model.seq_len;
    double flops = step_flops / (ms / 1000);
    /* the peak of the unit the run's path computes its products on */
    int kp = kernel_path_parse(st.path);
    double upeak = kp == KERNEL_PATH_AMX ? apeak : kp == KERNEL_PATH_AVX512_BF16 ? dpeak : peak;
    double part[TRAIN_TIME_PARTS];
    for (int i = 0; i < TRAIN_TIME_PARTS; i++) part[i] = median(st.part[i], st.n);
    if (json) {
        printf("{\"impl\":\"attnlab\",\"mode\":\"%s\",\"attention\":\"%s\",\"threads\":%d,\"batch\":%d,\"seq\":%d,"
               "\"steps\":%ld,\"ms_per_step\":%.1f,\"tokens_per_s\":%.1f,\"gflops\":%.2f,\"fma_peak_gflops\":%.2f,"
               "\"bf16_peak_gflops\":%.2f,\"amx_peak_gflops\":%.2f,\"mfu_fma\":%.4f,\"mfu_bf16\":%.4f,"
               "\"kernel_path\":\"%s\",\"unit_peak_gflops\":%.2f,\"mfu_unit\":%.4f,\"peak_rss_mb\":%.1f,"
               "\"loss_first\":%.4f,\"loss_last\":%.4f,\"bf16_kernels\":\"%s\",\"time_ms\":{",
               precision_name(c.precision), attention_kind_name(c.model.attention), threads, c.batch, c.model.seq_len,
               c.steps, ms, tps, flops / 1e9, peak / 1e9, dpeak / 1e9, apeak / 1e9, peak > 0 ? flops / peak : 0,
               dpeak > 0 ? flops / dpeak : 0, st.path, upeak / 1e9, upeak > 0 ? flops / upeak : 0,
               ru.ru_maxrss / 1024.0, st.loss_first, st.loss_last, st.path);
        for (int i = 0; i < TRAIN_TIME_PARTS; i++)
            printf("%s\"%s\":%.1f", i ? "," : "", train_time_part_name(i), part[i]);
        printf("}}\n");
        return 0;
    }
    printf("%-12s %s%s threads %d  B%d T%d  %7.1f ms/step (median of %d)  %7.0f tokens/s  %6.1f GFLOP/s  "
           "FMA peak %6.1f GFLOP/s (before %.1f, after %.1f)  MFU %5.1f%% (median of per-step ratios)  "
           "CPU-time MFU %5.1f%% (%.2f CPU-s/step, peak %.1f GFLOP per CPU-s)  peak RSS %5.0f MB (est. %zu MB)  "
           "loss %.3f -> %.3f\n",
           attention_kind_name(c.model.attention), precision_name(c.precision),
           c.lmhead_blas ? " (BLAS output layer)" : "", threads, c.batch, c.model.seq_len, ms, st.n, tps, flops / 1e9,
           peak / 1e9, peak_before / 1e9, peak_after / 1e9, 100 * mfu, 100 * step_flops / (cpu * per_cpu), cpu,
           per_cpu / 1e9, ru.ru_maxrss / 1024.0, train_config_memory_bytes(&c, threads) >> 20, st.loss_first,
           st.loss_last);
    if (dpeak > 0)
        printf("             bf16 dot-product peak %.1f GFLOP/s: MFU against it %.1f%%\n", dpeak / 1e9,
               100 * flops / dpeak);
    if (apeak > 0)
        printf("             AMX TDPBF16PS peak %.1f GFLOP/s: MFU against it %.1f%%\n", apeak / 1e9,
               100 * flops / apeak);
    printf("             kernel path %s; median step time by part:", st.path);
    for (int i = 0; i < TRAIN_TIME_PARTS; i++) printf(" %s %.1f ms", train_time_part_name(i), part[i]);
    printf("\n");
    return 0;
}
