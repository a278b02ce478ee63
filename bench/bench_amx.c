/* What bounds an AMX tile kernel on this CPU: the time of TDPBF16PS alone (the register-resident
 * peak, the reference every other line is a ratio of), of tile loads alone, of loads mixed with
 * products that do not read them, of loads each read at once by the next product, and of the
 * output layer's 2 x 2 block at K = 128 with its operands in L1. One thread; the best of 9 rounds.
 * Then TDPBF16PS and the 2 x 2 block on every core at once: whether each core has a tile unit of
 * its own (x cores the one-thread rate) or the virtual CPUs share one (x1), which is what the
 * engine's MFU should be judged against. On the KVM host of 2026-12 the block is bimodal from one
 * process to the next (61-83 % or 23-32 % of the peak): run it several times before concluding.
 * Exits 0 with a line saying so where there are no tiles. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "lmhead_amx.h"

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

int main(void) {
    if (!cpu_has_amx_bf16()) {
        printf("bench_amx: no AMX here (%s)\n", cpu_amx_missing() ? cpu_amx_missing() : "CPU lacks AMX-BF16");
        return 0;
    }
    for (int i = 0; i < 8192; i++) buf[i] = (char)(i % 7);
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
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 2) return 0;
    if (cores > 64) cores = 64;
    double pp = par_ns(products, n, (int)cores) / 4, pb = par_ns(block, n / 4, (int)cores) / 16;
    if (pp <= 0 || pb <= 0) return 0;
    printf("AMX on all %ld cores at once (x = the one-thread rate of the same operation; x%ld: a unit per core):\n",
           cores, cores);
    printf("  TDPBF16PS                                %6.2f ns  x%.2f (%.0f GFLOP/s together)\n", pp, p / pp,
           16384 / pp);
    printf("  2 x 2 block at K = 128, per product      %6.2f ns  x%.2f\n", pb, b / pb);
    return 0;
}
