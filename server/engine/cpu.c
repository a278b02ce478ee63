#include "cpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_X86 1
#define TGT_512 __attribute__((target("avx512f,fma")))
#define TGT_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define TGT_256 __attribute__((target("avx2,fma")))
#endif

static pthread_once_t feat_once = PTHREAD_ONCE_INIT, fast_once = PTHREAD_ONCE_INIT;
static int has_bf16, has_512, has_256, bf16_fast;
static atomic_int bf16_off;

static void feat_init(void) {
#ifdef CPU_X86
    __builtin_cpu_init();
    has_512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    has_256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    has_bf16 = has_512 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bf16");
#endif
}

int cpu_has_avx512bf16(void) {
    pthread_once(&feat_once, feat_init);
    return has_bf16 && !atomic_load(&bf16_off);
}

void cpu_disable_bf16(int on) { atomic_store(&bf16_off, on ? 1 : 0); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef CPU_X86
/* 24 independent accumulator chains, enough to cover either instruction's latency, held in named
 * locals (an array would live in memory in instrumented builds and time the stores instead).
 * Returns the FLOPs done; *sink keeps the result alive. */
/* clang-format off */
#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) \
                  X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)
/* clang-format on */
#define DECL(i) __m512 a##i = _mm512_set1_ps((float)(i)*1e-3f);
#define SUM(i) s = _mm512_add_ps(s, a##i);
TGT_512 static double loop_fma512(long iters, float *sink) {
    __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    CHAINS(DECL)
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, x, y);
    for (long r = 0; r < iters; r++) { CHAINS(STEP) }
#undef STEP
    __m512 s = _mm512_setzero_ps();
    CHAINS(SUM)
    *sink += _mm512_reduce_add_ps(s);
    return (double)iters * 24 * 16 * 2;
}

#define DECL8(i) __m256 b##i = _mm256_set1_ps((float)(i)*1e-3f);
#define CHAINS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
TGT_256 static double loop_fma256(long iters, float *sink) {
    __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    CHAINS12(DECL8)
#define STEP(i) b##i = _mm256_fmadd_ps(b##i, x, y);
    for (long r = 0; r < iters; r++) { CHAINS12(STEP) }
#undef STEP
    __m256 s = _mm256_setzero_ps();
#define SUM8(i) s = _mm256_add_ps(s, b##i);
    CHAINS12(SUM8)
    float f[8];
    _mm256_storeu_ps(f, s);
    for (int i = 0; i < 8; i++) *sink += f[i];
    return (double)iters * 12 * 8 * 2;
}

/* vdpbf16ps: 16 lanes, each two products and two additions = 64 FLOPs per instruction. */
TGT_BF16 static double loop_dp(long iters, float *sink) {
    __m512bh p = (__m512bh)_mm512_set1_epi32(0x3f803f80), q = (__m512bh)_mm512_set1_epi32(0x33d633d6);
    CHAINS(DECL)
#define STEP(i) a##i = _mm512_dpbf16_ps(a##i, p, q);
    for (long r = 0; r < iters; r++) { CHAINS(STEP) }
#undef STEP
    __m512 s = _mm512_setzero_ps();
    CHAINS(SUM)
    *sink += _mm512_reduce_add_ps(s);
    return (double)iters * 24 * 16 * 4;
}
#endif

static double fma_rate(long iters, float *sink) {
    double t0 = now_s(), f = 0;
#ifdef CPU_X86
    if (has_512)
        f = loop_fma512(iters, sink);
    else if (has_256)
        f = loop_fma256(iters * 2, sink);
#else
    (void)iters;
    (void)sink;
#endif
    double dt = now_s() - t0;
    return dt > 0 ? f / dt : 0;
}

static double dp_rate(long iters, float *sink) {
#ifdef CPU_X86
    if (!has_bf16) return 0;
    double t0 = now_s(), f = loop_dp(iters, sink), dt = now_s() - t0;
    return dt > 0 ? f / dt : 0;
#else
    (void)iters;
    (void)sink;
    return 0;
#endif
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void cpu_measure_peaks(double seconds, double *fma_flops, double *bf16_flops) {
    pthread_once(&feat_once, feat_init);
    float sink = 0;
    /* size one round from a short trial so each takes about seconds / 8 */
    long it = 2000;
    double r = fma_rate(it, &sink);
    if (r > 0) it = (long)(seconds / 8 * r / (24 * 32));
    if (it < 1000) it = 1000;
    double f[8], d[8];
    for (int i = 0; i < 8; i++) {
        f[i] = fma_rate(it, &sink);
        d[i] = dp_rate(it / 2, &sink);
    }
    qsort(f, 8, sizeof f[0], cmp_d);
    qsort(d, 8, sizeof d[0], cmp_d);
    *fma_flops = 0.5 * (f[3] + f[4]) + 0 * sink;
    *bf16_flops = 0.5 * (d[3] + d[4]);
}

static void fast_init(void) {
    pthread_once(&feat_once, feat_init);
    if (!has_bf16) return;
    float sink = 0;
    double best_f = 0, best_d = 0;
    /* ~2 ms of both to bring the core to its AVX-512 clock (a cold core runs wide vectors slowly at
     * first), then 20 interleaved rounds of ~30 us each, keeping the best of each: load only ever
     * slows a loop down. The two kinds measured here differ by 4x, so the answer does not flip. */
    for (int i = 0; i < 10; i++) {
        fma_rate(2000, &sink);
        dp_rate(1000, &sink);
    }
    for (int i = 0; i < 20; i++) {
        double f = fma_rate(4000, &sink), d = dp_rate(2000, &sink);
        if (f > best_f) best_f = f;
        if (d > best_d) best_d = d;
    }
    bf16_fast = best_d > best_f + 0 * sink;
}

int cpu_bf16_dot_is_fast(void) {
    if (!cpu_has_avx512bf16()) return 0;
    pthread_once(&fast_once, fast_init);
    return bf16_fast;
}
