/* Training throughput of the seed configuration (L3 H4 C128 T128 V50257, B32 by default) for
 * one attention variant: tokens/s, ms/step, peak RSS, and model FLOP utilisation against the
 * FMA peak measured by this same program on as many threads at once (so a busy machine lowers
 * both). Needs AVX-512 (the build uses -march=native).
 *   bench_train [--attention dot|rope|cosine_rope] [--steps N] [--batch B] [--threads N]
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
typedef struct {
    double seconds;
    double flops;
    float sink;
} peak_arg;

static void *peak_thread(void *p) {
    peak_arg *a = p;
    __m512 acc[12], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    long iters = 0;
    double t0 = now_s(), t1;
    do {
        for (int r = 0; r < 100000; r++) {
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
        }
        iters += 100000;
        t1 = now_s();
    } while (t1 - t0 < 0.5);
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(acc[i]);
    a->sink = s;
    a->seconds = t1 - t0;
    a->flops = (double)iters * 12 * 16 * 2;
    return NULL;
}

static double fma_peak(int threads) {
    pthread_t t[64];
    peak_arg a[64];
    memset(a, 0, sizeof a);
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, peak_thread, &a[i]);
    double total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        total += a[i].flops / a[i].seconds;
    }
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

typedef struct {
    int warmup;
    double ms_sum, tok_sum, loss_first, loss_last;
    int n;
} stats;

static void on_step(void *ctx, const train_step_metrics *m) {
    stats *s = ctx;
    if (m->step == 1) s->loss_first = m->loss;
    s->loss_last = m->loss;
    if (m->step <= s->warmup) return;
    s->ms_sum += m->step_ms;
    s->tok_sum += m->tokens_per_s;
    s->n++;
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
        } else {
            fprintf(stderr, "usage: bench_train [--attention KIND] [--steps N] [--batch B] [--threads N]\n");
            return 2;
        }
    }
    if (threads < 1) threads = 1;
    double peak = fma_peak(threads);
    rand_src rs = {c.batch, c.model.seq_len, c.model.vocab, 42};
    train_source src = {.ctx = &rs, .batch = rand_batch, .has_val = 0};
    stats st = {.warmup = c.steps > 2 ? 1 : 0};
    train_callbacks cb = {.ctx = &st, .on_step = on_step};
    engine_error err;
    if (train_run_source(&c, &src, threads, NULL, &cb, &err)) {
        fprintf(stderr, "bench_train: %s\n", err.message);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double ms = st.ms_sum / st.n, tps = (double)c.batch * c.model.seq_len / (ms / 1000);
    double flops = model_config_train_flops_per_token(&c.model) * tps;
    printf("%-12s threads %d  B%d T%d  %7.1f ms/step  %7.0f tokens/s  %6.1f GFLOP/s  FMA peak %6.1f GFLOP/s  "
           "MFU %5.1f%%  peak RSS %5.0f MB  (est. %zu MB)  loss %.3f -> %.3f\n",
           attention_kind_name(c.model.attention), threads, c.batch, c.model.seq_len, ms, tps, flops / 1e9, peak / 1e9,
           100 * flops / peak, ru.ru_maxrss / 1024.0, train_config_memory_bytes(&c, threads) >> 20, st.loss_first,
           st.loss_last);
    return 0;
}
