/* Sparse attention's cost against dense attention, one head, one thread: time per query for
 * N = 128 .. 16384 keys at head width 32, synthetic q, k, v drawn as random unit vectors (the
 * cost does not depend on what they hold). Sparse times include the predictor's own work (the
 * selection runs inside every timed call); its share is printed beside them.
 *   dense        exact causal attention in blocks of 64 query rows: scores and values through
 *                the engine's matrix products (gemm.h, OpenBLAS), softmax with the engine's vector
 *                exp; O(N^2 d), O(64 N) memory
 *   engine       layers.h attention_forward_unit, the kernel training uses (a full N x N matrix:
 *                up to N = 4096 here), as a cross-check of the dense figure
 *   window/lsh/hamming/topk  sparse.h with k keys per query (k = 32, 64); topk (exact, O(N^2 d)
 *                scalar) up to N = 4096
 * The crossover is the smallest N from which a sparse mode stays faster than dense for every
 * larger N measured. Times are this thread's CPU time (the machine may be shared: waiting for a
 * CPU is not counted, though other load still costs caches), the best of three timed rounds. Usage: bench_sparse
 * [--max-n N] [--min-ms MS] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fastmath.h"
#include "gemm.h"
#include "layers.h"
#include "rng.h"
#include "sparse.h"

#define D 32
#define BQ 64
#define NK 2
#define NMODES 4

static const int ks[NK] = {32, 64};
static const sparse_predictor modes[NMODES] = {SPARSE_WINDOW, SPARSE_LSH, SPARSE_HAMMING, SPARSE_TOPK};

/* This thread's CPU time: what the computation cost, whatever else the machine is running. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void unit_rows(float *x, int n, rng_state *r) {
    for (int t = 0; t < n; t++) {
        double s = 0;
        for (int i = 0; i < D; i++) x[t * D + i] = (float)rng_normal_polar(r), s += (double)x[t * D + i] * x[t * D + i];
        for (int i = 0; i < D; i++) x[t * D + i] = (float)(x[t * D + i] / sqrt(s));
    }
}

/* Exact causal attention in blocks of BQ query rows; S holds BQ x N scores. */
static void dense_blocked(const float *q, const float *k, const float *v, float *y, float *S, int N, float scale) {
    for (int r0 = 0; r0 < N; r0 += BQ) {
        int rb = N - r0 < BQ ? N - r0 : BQ, r1 = r0 + rb;
        gemm_nt(rb, r1, D, q + (size_t)r0 * D, D, k, D, S, N, 0);
        for (int i = 0; i < rb; i++) {
            float *p = S + (size_t)i * N;
            int n = r0 + i + 1;
            float mx = -INFINITY;
            for (int s = 0; s < n; s++) {
                p[s] *= scale;
                if (p[s] > mx) mx = p[s];
            }
            fm_v16 vs = fm_splat(0), vm = fm_splat(mx);
            int s = 0;
            for (; s + 16 <= n; s += 16) {
                fm_v16 e = fm_exp16(fm_load(p + s) - vm);
                fm_store(p + s, e);
                vs += e;
            }
            double sum = 0;
            for (int j = 0; j < 16; j++) sum += vs[j];
            for (; s < n; s++) p[s] = fm_expf(p[s] - mx), sum += p[s];
            float inv = (float)(1.0 / sum);
            for (s = 0; s < n; s++) p[s] *= inv;
            for (; s < r1; s++) p[s] = 0;
        }
        gemm_nn(rb, D, r1, S, N, v, D, y + (size_t)r0 * D, D, 0);
    }
}

typedef struct {
    int mode; /* -2 dense, -1 engine, else index into modes */
    int k;
    const float *q, *k_, *v;
    float *y, *S, *att;
    sparse_ws *ws;
    int N;
    float scale;
    int select_only;
} job;

static void run_once(job *j) {
    if (j->mode == -2) {
        dense_blocked(j->q, j->k_, j->v, j->y, j->S, j->N, j->scale);
    } else if (j->mode == -1) {
        double ent = 0;
        attention_forward_unit(j->q, j->k_, D, j->v, D, j->att, j->y, D, j->N, D, j->scale, &ent);
    } else {
        sparse_input in = {.T = j->N,
                           .d = D,
                           .q = j->q,
                           .k = j->k_,
                           .v = j->v,
                           .q_stride = D,
                           .k_stride = D,
                           .v_stride = D,
                           .scale = j->scale};
        if (j->select_only)
            sparse_select(j->ws, &in, NULL);
        else
            sparse_attention(j->ws, &in, j->y, D, NULL);
    }
}

/* Seconds per call: best of 3 rounds, each of enough calls to last min_s. */
static double time_it(job *j, double min_s) {
    run_once(j); /* warm */
    double best = 1e30;
    for (int round = 0; round < 3; round++) {
        int calls = 0;
        double t0 = now_s(), t;
        do {
            run_once(j);
            calls++;
            t = now_s() - t0;
        } while (t < min_s);
        if (t / calls < best) best = t / calls;
    }
    return best;
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
    if (max_n < 128 || max_n > 65536) {
        fprintf(stderr, "bench_sparse: --max-n must be in 128..65536\n");
        return 2;
    }
    gemm_init();
    double load[3] = {0};
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
    size_t cap = (size_t)max_n;
    float *q = malloc(sizeof(float) * cap * D), *k = malloc(sizeof(float) * cap * D),
          *v = malloc(sizeof(float) * cap * D), *y = malloc(sizeof(float) * cap * D),
          *S = malloc(sizeof(float) * (size_t)BQ * cap);
    float *att = malloc(sizeof(float) * 4096 * 4096);
    if (!q || !k || !v || !y || !S || !att) {
        fprintf(stderr, "bench_sparse: out of memory\n");
        return 1;
    }
    rng_state r;
    rng_seed(&r, 1234);
    unit_rows(q, max_n, &r);
    unit_rows(k, max_n, &r);
    unit_rows(v, max_n, &r);
    int nn = 0;
    for (int N = 128; N <= max_n; N *= 2) nn++;
    double *dense_us = calloc((size_t)nn, sizeof(double)), *sp_us = calloc((size_t)nn * NK * NMODES, sizeof(double));
    if (!dense_us || !sp_us) return 1;
    int row = 0;
    for (int N = 128; N <= max_n; N *= 2, row++) {
        job j = {.q = q, .k_ = k, .v = v, .y = y, .S = S, .att = att, .N = N, .scale = (float)(1 / sqrt((double)D))};
        j.mode = -2;
        double td = time_it(&j, min_ms / 1e3) / N * 1e6;
        dense_us[row] = td;
        printf("%7d %9.3f", N, td);
        if (N <= 4096) {
            j.mode = -1;
            printf(" %9.3f", time_it(&j, min_ms / 1e3) / N * 1e6);
        } else {
            printf(" %9s", "-");
        }
        for (int kk = 0; kk < NK; kk++)
            for (int m = 0; m < NMODES; m++) {
                double *cell = &sp_us[((size_t)row * NK + kk) * NMODES + m];
                if (modes[m] == SPARSE_TOPK && N > 4096) {
                    *cell = -1;
                    printf(" %17s", "-");
                    continue;
                }
                sparse_config c;
                sparse_config_defaults(&c, modes[m], ks[kk]);
                engine_error err;
                if (sparse_ws_new(&j.ws, &c, N, D, &err)) {
                    fprintf(stderr, "bench_sparse: %s\n", err.message);
                    return 1;
                }
                j.mode = m, j.k = ks[kk];
                j.select_only = 0;
                double ts = time_it(&j, min_ms / 1e3) / N * 1e6;
                j.select_only = 1;
                double tp = time_it(&j, min_ms / 1e3) / N * 1e6;
                sparse_ws_free(j.ws);
                *cell = ts;
                char txt[40];
                snprintf(txt, sizeof txt, "%.3f [%.3f]", ts, tp);
                printf(" %17s", txt);
            }
        printf("\n");
        fflush(stdout);
    }
    printf("crossover (smallest N from which the mode stays faster than dense):\n");
    for (int kk = 0; kk < NK; kk++)
        for (int m = 0; m < NMODES; m++) {
            int from = -1;
            for (int rr = nn - 1; rr >= 0; rr--) {
                double s = sp_us[((size_t)rr * NK + kk) * NMODES + m];
                if (s < 0) continue; /* not measured at this N */
                if (s < dense_us[rr])
                    from = rr;
                else
                    break;
            }
            printf("  %-9s k=%-3d ", sparse_predictor_name(modes[m]), ks[kk]);
            if (from < 0)
                printf("none up to N = %d\n", modes[m] == SPARSE_TOPK && max_n > 4096 ? 4096 : max_n);
            else
                printf("N = %d (%.1fx faster at N = %d)\n", 128 << from,
                       dense_us[modes[m] == SPARSE_TOPK && nn > 6 ? 5 : nn - 1] /
                           sp_us[((size_t)(modes[m] == SPARSE_TOPK && nn > 6 ? 5 : nn - 1) * NK + kk) * NMODES + m],
                       modes[m] == SPARSE_TOPK && nn > 6 ? 4096 : 128 << (nn - 1));
        }
    free(q), free(k), free(v), free(y), free(S), free(att), free(dense_us), free(sp_us);
    return 0;
}
