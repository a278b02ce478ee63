/* What bounds an AMX tile kernel on this CPU: the time of TDPBF16PS alone (the register-resident
 * peak, the reference every other line is a ratio of), of tile loads alone, of loads mixed with
 * products that do not read them, of loads each read at once by the next product, and of the
 * output layer's 2 x 2 block at K = 128 with its operands in L1. One thread; the best of 9 rounds.
 * Then TDPBF16PS and the 2 x 2 block on every core at once: whether each core has a tile unit of
 * its own (x cores the one-thread rate) or the virtual CPUs share one (x1), which is what the
 * engine's MFU should be judged against. On the KVM host of 2026-12 the block is bimodal from one
 * process to the next (61-83 % or 23-32 % of the peak): run it several times before concluding.
 * Last, the engine's own output-layer kernels (lmhead_amx_kernels.h, built here a second time with
 * empty epilogues) on one chunk at the seed configuration's shape, phase by phase: each pass's
 * products alone, its softmax epilogues alone, the two as the kernel runs them (how much they
 * overlap), the dx and dW products, and what the whole chunk reaches of the peak against what it
 * could reach were nothing to overlap.
 * Exits 0 with a line saying so where there are no tiles. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "lmhead.h"
#include "lmhead_amx.h"
#include "lmhead_amx_hw.h"

/* the engine's kernels: with its AVX-512 epilogues (hw), and with none (noepi: the products alone) */
#define AMX_SFX hw
#include "lmhead_amx_epi.h"
#define AMX_EPI_SUMS amx_epi_sums_avx512
#define AMX_EPI_GRAD amx_epi_grad_avx512
#include "lmhead_amx_kernels.h"
#undef AMX_SFX
static void no_sums(const lmhead_amx_chunk *k, const float *T, long v0, int r0) {
    (void)k, (void)T, (void)v0, (void)r0;
}
static void no_grad(const lmhead_amx_chunk *k, const float *T, long vb, long v0, long vend, int r0) {
    (void)k, (void)T, (void)vb, (void)v0, (void)vend, (void)r0;
}
#define AMX_SFX noepi
#define AMX_EPI_SUMS no_sums
#define AMX_EPI_GRAD no_grad
#include "lmhead_amx_kernels.h"

#define AMXT __attribute__((target("amx-tile,amx-bf16"), noinline))

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char buf[8192] __attribute__((aligned(64)));

/* each function does n iterations of four tile operations */
AMXT static void products(long n) {
    _tile_loadconfig(lmhead_amx_config);
    for (long i = 0; i < n; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_release();
}
AMXT static void loads(long n) {
    _tile_loadconfig(lmhead_amx_config);
    for (long i = 0; i < n; i++) {
        _tile_loadd(4, buf, 64);
        _tile_loadd(5, buf + 1024, 64);
        _tile_loadd(6, buf + 2048, 64);
        _tile_loadd(7, buf + 3072, 64);
    }
    _tile_release();
}
/* two loads and two products per iteration, the products reading tiles the loads do not write */
AMXT static void apart(long n) {
    _tile_loadconfig(lmhead_amx_config);
    for (long i = 0; i < n; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(5, buf, 64);
        _tile_dpbf16ps(1, 4, 6);
        _tile_loadd(7, buf + 1024, 64);
    }
    _tile_release();
}
/* two loads and two products per iteration, each product reading the tile just loaded */
AMXT static void at_once(long n) {
    _tile_loadconfig(lmhead_amx_config);
    for (long i = 0; i < n; i++) {
        _tile_loadd(4, buf, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(5, buf + 1024, 64);
        _tile_dpbf16ps(1, 5, 6);
    }
    _tile_release();
}
/* the output layer's logits block: 2 x 2 accumulators over K = 128 (4 steps of 32), then stored;
 * 16 products and 16 loads per block, operands in L1 */
AMXT static void block(long n) {
    static _Thread_local float out[1024] __attribute__((aligned(64))); /* each thread its own: no shared lines */
    _tile_loadconfig(lmhead_amx_config);
    for (long i = 0; i < n; i++) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int k = 0; k < 4; k++) {
            _tile_loadd(6, buf + 2048 * (k & 1), 64);
            _tile_loadd(7, buf + 1024 + 2048 * (k & 1), 64);
            _tile_loadd(4, buf + 4096, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_loadd(5, buf + 5120, 64);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, out, 64);
        _tile_stored(1, out + 256, 64);
        _tile_stored(2, out + 512, 64);
        _tile_stored(3, out + 768, 64);
    }
    _tile_release();
}

/* TDPBF16PS beside the epilogues' AVX-512 exp on independent data, at the ratio of the output
 * layer's pass 1 (four products and 16 vectors of 16 exps: a 16 x 16 tile's logits at K = 128):
 * whether the vector units work while the tiles do. mode 1: products only, 2: exps only, 3: both. */
static volatile float exp_sink;
static float logits[256] __attribute__((aligned(64))); /* main fills them: -2 .. 2 */
__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16"), noinline)) static void
mixed(long n, int mode) {
    const float *q = logits;
    const __m512 l2e = _mm512_set1_ps(1.44269504f), ul = _mm512_set1_ps(4.0f);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    _tile_loadconfig(lmhead_amx_config);
    for (long i = 0; i < n; i++) {
        if (mode & 1) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        if (mode & 2)
            for (int j = 0; j < 16; j += 2) {
                s0 = _mm512_add_ps(s0, exp2_taylor(_mm512_fmsub_ps(_mm512_load_ps(q + 16 * j), l2e, ul), 6));
                s1 = _mm512_add_ps(s1, exp2_taylor(_mm512_fmsub_ps(_mm512_load_ps(q + 16 * j + 16), l2e, ul), 6));
            }
    }
    _tile_release();
    exp_sink = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}
static void mixed_products(long n) { mixed(n, 1); }
static void mixed_exps(long n) { mixed(n, 2); }
static void mixed_both(long n) { mixed(n, 3); }

static double best_ns(void (*fn)(long), long n) {
    double best = 1e30;
    fn(n / 10);
    for (int r = 0; r < 9; r++) {
        double t = now_s();
        fn(n);
        t = now_s() - t;
        if (t < best) best = t;
    }
    return 1e9 * best / (double)n;
}

/* fn(n) on `nth` threads started together (a barrier), the best of 9 rounds of the slowest thread's
 * time: ns per iteration of all threads together (0: no barrier); exits when a thread cannot start. */
typedef struct {
    void (*fn)(long);
    long n;
    pthread_barrier_t *go;
    double t;
} par_arg;

static void *par_main(void *p) {
    par_arg *a = p;
    pthread_barrier_wait(a->go);
    double t = now_s();
    a->fn(a->n);
    a->t = now_s() - t;
    return NULL;
}

static double par_ns(void (*fn)(long), long n, int nth) {
    pthread_t th[64];
    par_arg arg[64];
    pthread_barrier_t go;
    double best = 1e30;
    if (nth > 64 || pthread_barrier_init(&go, NULL, (unsigned)nth) != 0) return 0;
    for (int r = 0; r < 9; r++) {
        for (int i = 0; i < nth; i++) {
            arg[i] = (par_arg){fn, n, &go, 0};
            if (pthread_create(&th[i], NULL, par_main, &arg[i]) != 0) { /* the others wait at the barrier */
                fprintf(stderr, "bench_amx: cannot start thread %d of %d\n", i + 1, nth);
                exit(1);
            }
        }
        double slowest = 0;
        for (int i = 0; i < nth; i++) {
            pthread_join(th[i], NULL);
            if (arg[i].t > slowest) slowest = arg[i].t;
        }
        if (slowest < best) best = slowest;
    }
    pthread_barrier_destroy(&go);
    return 1e9 * best / ((double)n * nth);
}

/* ---- the output layer's kernels on one chunk ---- */

static double
cpu_s(void) { /* this thread's CPU time: a pass descheduled by the host's or the VM's other work is not counted */
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *zalloc(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, n);
    if (p) memset(p, 0, n);
    return p;
}

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;
static float uniform(void) { /* in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* the softmax epilogues alone, as many tiles as a pass hands them, on a stage that stays in L1 */
static void epilogues_alone(const lmhead_amx_chunk *k, int grad) {
    const long blocks = (long)(k->V16 / 32) * (k->RP / 32), rb = k->RP / 32, vbk = LMHEAD_AMX_VB / 32;
    for (long i = 0; i < blocks; i++) {
        long v0 = grad ? 32 * ((i / rb) % vbk) : 32 * (i / rb);
        amx_epilogues_hw(k, k->stage + 1024 * (i & 1), v0, (int)(32 * (i % rb)), k->V16, grad, 0, LMHEAD_AMX_VB);
    }
}

/* the dx and dW products of pass 2 alone, over the whole vocabulary, on whatever E holds */
AMXT static void dx_alone(const lmhead_amx_chunk *k) {
    _tile_loadconfig(lmhead_amx_config);
    for (long vb = 0; vb < k->V; vb += LMHEAD_AMX_VB) {
        long n = k->V - vb < LMHEAD_AMX_VB ? k->V - vb : LMHEAD_AMX_VB;
        amx_dx_block_hw(k, vb, (n + 31) / 32 * 32);
    }
    _tile_release();
}
AMXT static void dw_alone(const lmhead_amx_chunk *k, float *dW) {
    _tile_loadconfig(lmhead_amx_config);
    for (long vb = 0; vb < k->V; vb += LMHEAD_AMX_VB)
        for (long v0 = vb; v0 + 32 <= k->V && v0 < vb + LMHEAD_AMX_VB; v0 += 32)
            amx_dw_pair_hw(k, v0 - vb, dW + (size_t)v0 * (size_t)k->C);
    _tile_release();
}

enum { PH_SUMS, PH_SUMS_PROD, PH_SUMS_EPI, PH_GRAD, PH_GRAD_PROD, PH_GRAD_EPI, PH_DX, PH_DW, PH_CHUNK, PH_N };

/* One chunk of RP rows at V x C (multiples of 32), every phase timed in turn, the best of `rounds`
 * rounds; p: TDPBF16PS alone (ns), b: the 2 x 2 block's ns per product. Returns 0, or -1 when the
 * buffers cannot be had. */
static int chunk_phases(int RP, int V, int C, int rounds, double p, double b) {
    const size_t vc = (size_t)V * (size_t)C;
    bf16 *wa = zalloc(2 * vc), *wt = zalloc(2 * vc), *XP = zalloc(2 * (size_t)RP * C), *XR = zalloc(2 * (size_t)RP * C);
    bf16 *Eb = zalloc(2 * (size_t)LMHEAD_AMX_VB * RP), *E2b = zalloc(2 * (size_t)LMHEAD_AMX_VB * RP);
    float *DXT = zalloc(4 * (size_t)RP * C), *stage = zalloc(4 * lmhead_amx_stage_floats(C)), *dW = zalloc(4 * vc);
    float *rowv = zalloc(4 * 6 * (size_t)RP);
    int32_t *tg = zalloc(4 * (size_t)RP);
    int ok = wa && wt && XP && XR && Eb && E2b && DXT && stage && dW && rowv && tg;
    if (ok) {
        /* weights ~ 0.1 and activations ~ 1 (the logits of a trained head), each row's bound 4 */
        for (long v = 0; v < V; v++)
            for (int c = 0; c < C; c++) {
                bf16 h = bf16_from_float(0.1f * uniform());
                wa[(size_t)v * C + c] = h;
                wt[amx_wt_at(V, c, v)] = h;
            }
        for (int r = 0; r < RP; r++) {
            for (int c = 0; c < C; c++) {
                bf16 h = bf16_from_float(uniform());
                XP[amx_xp_at(RP, c, r)] = h;
                XR[amx_xr_at(C, r, c)] = h;
            }
            rowv[r] = 4;               /* U */
            rowv[RP + r] = 1.0f / V;   /* sc */
            rowv[2 * RP + r] = -1e30f; /* mx */
            tg[r] = (int32_t)(((long)r * 7919) % V);
        }
        for (size_t i = 0; i < 2048; i++) stage[i] = 2 * uniform();
        lmhead_amx_chunk k = {.C = C,
                              .C32 = C,
                              .V = V,
                              .V16 = V,
                              .V32 = V,
                              .RP = RP,
                              .rows = RP,
                              .wa = wa,
                              .wt = wt,
                              .XP = XP,
                              .XR = XR,
                              .Eb = Eb,
                              .E2b = E2b,
                              .DXT = DXT,
                              .stage = stage,
                              .U = rowv,
                              .sc = rowv + RP,
                              .mx = rowv + 2 * RP,
                              .sm = rowv + 3 * RP,
                              .tl = rowv + 4 * RP,
                              .tg = tg};
        double best[PH_N];
        for (int i = 0; i < PH_N; i++) best[i] = 1e30;
        for (int r = 0; r < rounds; r++)
            for (int ph = 0; ph < PH_N; ph++) {
                double t = cpu_s();
                switch (ph) {
                case PH_SUMS: amx_sums_hw(&k); break;
                case PH_SUMS_PROD: amx_sums_noepi(&k); break;
                case PH_SUMS_EPI: epilogues_alone(&k, 0); break;
                case PH_GRAD: amx_backward_hw(&k, 0, V, NULL, 0); break;
                case PH_GRAD_PROD: amx_backward_noepi(&k, 0, V, NULL, 0); break;
                case PH_GRAD_EPI: epilogues_alone(&k, 1); break;
                case PH_DX: dx_alone(&k); break;
                case PH_DW: dw_alone(&k, dW); break;
                case PH_CHUNK:
                    amx_sums_hw(&k);
                    amx_backward_hw(&k, 0, V, dW, 1);
                    break;
                }
                t = 1e3 * (cpu_s() - t);
                if (t < best[ph]) best[ph] = t;
            }
        const double prod = (double)(RP / 16) * (double)(V / 16) * (double)(C / 32); /* products per pass */
        const double pass_ms = 1e-6 * prod * p;                                      /* one pass at the peak */
#define OVERLAP(all, a, e) (100 * ((a) + (e) - (all)) / ((a) < (e) ? (a) : (e)))
        printf("The output layer's kernels on one chunk (%d rows, V %d, C %d; ms of thread CPU time, the best of %d "
               "rounds; %% of the TDPBF16PS peak):\n",
               RP, V, C, rounds);
        printf("  pass 1, logits + sums        %7.2f: products alone %6.2f (%.0f%%), epilogues alone %6.2f; overlap "
               "%.0f%%\n",
               best[PH_SUMS], best[PH_SUMS_PROD], 100 * pass_ms / best[PH_SUMS_PROD], best[PH_SUMS_EPI],
               OVERLAP(best[PH_SUMS], best[PH_SUMS_PROD], best[PH_SUMS_EPI]));
        printf("  pass 2, logits + gradient    %7.2f: products alone %6.2f (%.0f%%), epilogues alone %6.2f; overlap "
               "%.0f%%\n",
               best[PH_GRAD], best[PH_GRAD_PROD], 100 * pass_ms / best[PH_GRAD_PROD], best[PH_GRAD_EPI],
               OVERLAP(best[PH_GRAD], best[PH_GRAD_PROD], best[PH_GRAD_EPI]));
        printf("  pass 2, dx products          %7.2f (%.0f%%)\n", best[PH_DX], 100 * pass_ms / best[PH_DX]);
        printf("  pass 2, dW products          %7.2f (%.0f%%)\n", best[PH_DW], 100 * pass_ms / best[PH_DW]);
        /* the three products the layer needs, against the chunk's time; and what it would reach with
         * no overlap of tiles and epilogues, every product at the 2 x 2 block's rate, or at the peak */
        const double epi = best[PH_SUMS_EPI] + best[PH_GRAD_EPI];
        printf("  the chunk                    %7.2f: %.0f%% of the peak (3 products' FLOPs); with no overlap, at "
               "most %.0f%% at the block's rate, %.0f%% at the peak\n",
               best[PH_CHUNK], 100 * 3 * pass_ms / best[PH_CHUNK], 100 * 3 * pass_ms / (4 * pass_ms * b / p + epi),
               100 * 3 * pass_ms / (4 * pass_ms + epi));
#undef OVERLAP
    }
    free(wa), free(wt), free(XP), free(XR), free(Eb), free(E2b), free(DXT), free(stage), free(dW), free(rowv), free(tg);
    return ok ? 0 : -1;
}

int main(void) {
    if (!cpu_has_amx_bf16()) {
        printf("bench_amx: no AMX here (%s)\n", cpu_amx_missing() ? cpu_amx_missing() : "CPU lacks AMX-BF16");
        return 0;
    }
    for (int i = 0; i < 8192; i++) buf[i] = (char)(i % 7);
    for (int i = 0; i < 256; i++) logits[i] = (float)((i * 37) % 101) / 25.0f - 2.0f;
    const long n = 100000;
    double p = best_ns(products, n) / 4, l = best_ns(loads, n) / 4, a = best_ns(apart, n) / 2,
           o = best_ns(at_once, n) / 2, b = best_ns(block, n / 4) / 16;
    printf("AMX on one thread (ns per operation; x = against one TDPBF16PS alone, %.0f GFLOP/s):\n", 16384 / p);
    printf("  TDPBF16PS alone                          %6.2f ns  x1.00\n", p);
    printf("  tile load (1 KB from L1) alone           %6.2f ns  x%.2f\n", l, l / p);
    printf("  load + product, apart                    %6.2f ns  x%.2f (x%.2f if they overlapped)\n", a, a / p,
           (l > p ? l : p) / p);
    printf("  load + product reading it at once        %6.2f ns  x%.2f\n", o, o / p);
    printf("  2 x 2 block at K = 128, per product      %6.2f ns  x%.2f: %.0f%% of the peak (this process)\n", b, b / p,
           100 * p / b);
    double mp = best_ns(mixed_products, n / 4), me = best_ns(mixed_exps, n / 4), mb = best_ns(mixed_both, n / 4);
    printf("  4 products beside 256 exps (AVX-512)     %6.2f ns; products alone %.2f, exps alone %.2f: %s\n", mb, mp,
           me, mb < 0.9 * (mp + me) ? "they overlap" : "no overlap (the sum or more)");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 64) cores = 64;
    double pp = cores >= 2 ? par_ns(products, n, (int)cores) / 4 : 0,
           pb = cores >= 2 ? par_ns(block, n / 4, (int)cores) / 16 : 0;
    if (pp > 0 && pb > 0) {
        printf("AMX on all %ld cores at once (x = the one-thread rate of the same operation; x%ld: a unit per core):\n",
               cores, cores);
        printf("  TDPBF16PS                                %6.2f ns  x%.2f (%.0f GFLOP/s together)\n", pp, p / pp,
               16384 / pp);
        printf("  2 x 2 block at K = 128, per product      %6.2f ns  x%.2f\n", pb, b / pb);
    }
    /* the seed configuration's output layer: a 512-row chunk of the 4096 rows of a step */
    if (chunk_phases(LMHEAD_AMX_MAX_ROWS, 50304, 128, 5, p, b) != 0) {
        fprintf(stderr, "bench_amx: out of memory for the chunk's buffers\n");
        return 1;
    }
    return 0;
}
