/* Sparse attention's cost against dense attention, one head, one thread: time per query for
 * N = 128 .. 16384 keys at head width 32, synthetic q, k, v drawn as random unit vectors (the
 * cost does not depend on what they hold). Sparse times include the predictor's own work (the
 * selection runs inside every timed call); its share is printed beside them.
 *   dense        exact causal attention in blocks of 64 query rows (scores and values through the
 *                engine's matrix products, softmax with its vector exp), O(N^2 d), O(64 N) memory
 *   engine       layers.h attention_forward_unit, the kernel training uses (a full N x N matrix:
 *                up to N = 4096 here), as a cross-check of the dense figure
 *   window/lsh/hamming/topk  sparse.h with k keys per query (k = 32, 64); topk (exact, O(N^2 d)
 *                scalar) up to N = 4096
 * The kernels, the timing (this thread's CPU time, best of three rounds of at least --min-ms each)
 * and the crossover (the smallest N from which a sparse mode stays faster than dense for every
 * larger N measured) are sparse_timing.h's, the same code the sparse_cost probe runs.
 * Usage: bench_sparse [--max-n N] [--min-ms MS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparse_timing.h"

#define D 32
#define NK 2
#define NMODES 4
#define MAX_ROWS 16

static const int ks[NK] = {32, 64};
static const sparse_predictor modes[NMODES] = {SPARSE_WINDOW, SPARSE_LSH, SPARSE_HAMMING, SPARSE_TOPK};

static int fail(const engine_error *err) {
    fprintf(stderr, "bench_sparse: %s\n", err->message);
    return 1;
}

int main(int argc, char **argv) {
    int max_n = 16384;
    double min_ms = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max-n") && i + 1 < argc)
            max_n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-ms") && i + 1 < argc)
            min_ms = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_sparse [--max-n N] [--min-ms MS]\n");
            return 2;
        }
    }
    if (max_n < 128 || max_n > SPARSE_TIMING_MAX_N) {
        fprintf(stderr, "bench_sparse: --max-n must be in 128..%d\n", SPARSE_TIMING_MAX_N);
        return 2;
    }
    if (!(min_ms > 0)) {
        fprintf(stderr, "bench_sparse: --min-ms must be positive\n");
        return 2;
    }
    double load[3] = {-1, -1, -1};
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) {
        if (fscanf(lf, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = load[1] = load[2] = -1;
        fclose(lf);
    }
    printf("sparse attention, one head, d %d, one thread, unit q/k/v; load average %.2f %.2f %.2f\n", D, load[0],
           load[1], load[2]);
    printf("CPU us per query (sparse: predictor included; in brackets the predictor's own share)\n");
    printf("%7s %9s %9s", "N", "dense", "engine");
    for (int kk = 0; kk < NK; kk++)
        for (int m = 0; m < NMODES; m++) {
            char h[32];
            snprintf(h, sizeof h, "%s k%d", sparse_predictor_name(modes[m]), ks[kk]);
            printf(" %17s", h);
        }
    printf("\n");
    engine_error err;
    sparse_timing *c = NULL;
    if (sparse_timing_new(&c, max_n, D, 1234, &err)) return fail(&err);
    const sparse_timing_cfg timing = {.min_s = min_ms / 1e3, .rounds = 3};
    int nn = 0;
    double dense_us[MAX_ROWS], sp_us[NK][NMODES][MAX_ROWS];
    for (int N = 128; N <= max_n && nn < MAX_ROWS; N *= 2, nn++) {
        if (sparse_timing_dense(c, N, &timing, &dense_us[nn], &err)) return fail(&err);
        printf("%7d %9.3f", N, dense_us[nn]);
        if (N <= SPARSE_TIMING_ENGINE_MAX_N) {
            double te;
            if (sparse_timing_engine(c, N, &timing, &te, &err)) return fail(&err);
            printf(" %9.3f", te);
        } else {
            printf(" %9s", "-");
        }
        for (int kk = 0; kk < NK; kk++)
            for (int m = 0; m < NMODES; m++) {
                double *cell = &sp_us[kk][m][nn];
                if (modes[m] == SPARSE_TOPK && N > SPARSE_TIMING_TOPK_MAX_N) {
                    *cell = -1;
                    printf(" %17s", "-");
                    continue;
                }
                sparse_config cfg;
                sparse_config_defaults(&cfg, modes[m], ks[kk]);
                double tp;
                if (sparse_timing_sparse(c, &cfg, N, &timing, cell, &tp, &err)) return fail(&err);
                char txt[40];
                snprintf(txt, sizeof txt, "%.3f [%.3f]", *cell, tp);
                printf(" %17s", txt);
            }
        printf("\n");
        fflush(stdout);
    }
    printf("crossover (smallest N from which the mode stays faster than dense):\n");
    for (int kk = 0; kk < NK; kk++)
        for (int m = 0; m < NMODES; m++) {
            int from = sparse_timing_crossover(dense_us, sp_us[kk][m], nn);
            int last = nn - 1; /* the largest N this mode was measured at */
            while (last > 0 && sp_us[kk][m][last] < 0) last--;
            printf("  %-9s k=%-3d ", sparse_predictor_name(modes[m]), ks[kk]);
            if (from < 0)
                printf("none up to N = %d\n", 128 << last);
            else
                printf("N = %d (%.1fx faster at N = %d)\n", 128 << from, dense_us[last] / sp_us[kk][m][last],
                       128 << last);
        }
    sparse_timing_free(c);
    return 0;
}
