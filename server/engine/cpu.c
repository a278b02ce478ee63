#include "cpu.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_X86 1
#define TGT_512 __attribute__((target("avx512f,fma")))
#define TGT_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define TGT_256 __attribute__((target("avx2,fma")))
#define TGT_AMX __attribute__((target("amx-tile,amx-bf16")))
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
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

/* ---- AMX: the CPU's word (cpuid), the OS's (XCR0) and the kernel's permission (arch_prctl) ---- */
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int has_amx;
static char amx_why[160] = "CPU lacks AMX-BF16";

static void amx_init(void) {
#ifdef CPU_X86
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22))) return;
    /* xgetbv needs OSXSAVE (cpuid 1, ecx bit 27); XCR0 bits 17 and 18 are the tile config and data */
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) {
        snprintf(amx_why, sizeof amx_why, "the OS does not enable XSAVE, so not the AMX tile state");
        return;
    }
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & (3u << 17)) != (3u << 17)) {
        snprintf(amx_why, sizeof amx_why, "the OS does not enable the AMX tile state (XCR0)");
        return;
    }
    /* Linux hands the tile data state (XFEATURE_XTILEDATA, 18) out per process on request */
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18) != 0) {
        snprintf(amx_why, sizeof amx_why, "the kernel refused the AMX tile state (arch_prctl: %s)", strerror(errno));
        return;
    }
    has_amx = 1;
    amx_why[0] = 0;
#endif
}

int cpu_has_amx_bf16(void) {
    pthread_once(&amx_once, amx_init);
    return has_amx && !atomic_load(&bf16_off);
}

const char *cpu_amx_missing(void) {
    pthread_once(&amx_once, amx_init);
    if (atomic_load(&bf16_off)) return "bf16 units disabled (tests)";
    return has_amx ? NULL : amx_why;
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

/* TDPBF16PS on four independent accumulator tiles (16 rows x 16 fp32), every tile 16 x 64 bytes
 * (palette 1): 16 x 16 x 32 x 2 FLOPs per instruction. */
TGT_AMX static double loop_amx(long iters, float *sink) {
    unsigned char cfg[64] __attribute__((aligned(64))) = {0};
    cfg[0] = 1; /* palette 1 */
    for (int t = 0; t < 8; t++) {
        cfg[16 + 2 * t] = 64; /* colsb, little-endian 16 bits */
        cfg[48 + t] = 16;     /* rows */
    }
    static const uint16_t one[16 * 32] __attribute__((aligned(64))) = {0x3f80};
    float out[16 * 16] __attribute__((aligned(64)));
    _tile_loadconfig(cfg);
    _tile_loadd(4, one, 64);
    _tile_loadd(5, one, 64);
    _tile_loadd(6, one, 64);
    _tile_loadd(7, one, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (long r = 0; r < iters; r++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    *sink += out[0];
    return (double)iters * 4 * 16 * 16 * 32 * 2;
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

static double amx_rate(long iters, float *sink) {
#ifdef CPU_X86
    pthread_once(&amx_once, amx_init);
    if (!has_amx) return 0;
    double t0 = now_s(), f = loop_amx(iters, sink), dt = now_s() - t0;
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

void cpu_quick_peaks(int rounds, double *fma_flops, double *bf16_flops, double *amx_flops) {
    pthread_once(&feat_once, feat_init);
    float sink = 0;
    double best_f = 0, best_d = 0, best_a = 0;
    pthread_once(&amx_once, amx_init);
    const int dp = has_bf16, amx = has_amx;
    /* ~2 ms of each to bring the core to its wide-vector clock (a cold core runs wide vectors slowly
     * at first), then short interleaved rounds, keeping the best of each */
    for (int i = 0; i < 10; i++) {
        fma_rate(2000, &sink);
        if (dp) dp_rate(1000, &sink);
        if (amx) amx_rate(200, &sink);
    }
    for (int i = 0; i < rounds; i++) {
        double f = fma_rate(4000, &sink), d = dp ? dp_rate(2000, &sink) : 0, a = amx ? amx_rate(400, &sink) : 0;
        if (f > best_f) best_f = f;
        if (d > best_d) best_d = d;
        if (a > best_a) best_a = a;
    }
    *fma_flops = best_f + 0 * sink;
    *bf16_flops = best_d;
    *amx_flops = best_a;
}

double cpu_measure_amx_peak(double seconds) {
    pthread_once(&amx_once, amx_init);
    if (!has_amx) return 0;
    float sink = 0;
    long it = 200;
    double r = amx_rate(it, &sink);
    if (r > 0) it = (long)(seconds / 8 * r / (4.0 * 16 * 16 * 32 * 2));
    if (it < 100) it = 100;
    double a[8];
    for (int i = 0; i < 8; i++) a[i] = amx_rate(it, &sink);
    qsort(a, 8, sizeof a[0], cmp_d);
    return 0.5 * (a[3] + a[4]) + 0 * sink;
}

static void fast_init(void) {
    pthread_once(&feat_once, feat_init);
    if (!has_bf16) return;
    /* The two kinds measured here differ by 4x where they differ, so the answer does not flip. */
    double f, d, a;
    cpu_quick_peaks(20, &f, &d, &a);
    bf16_fast = d > f;
}

int cpu_bf16_dot_is_fast(void) {
    if (!cpu_has_avx512bf16()) return 0;
    pthread_once(&fast_once, fast_init);
    return bf16_fast;
}
