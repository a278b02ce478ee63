/* Mixed precision pieces against exact references: bf16 rounding (nearest, ties to even, NaN,
 * infinities, subnormals; the vector conversion equal to the scalar one), and the bf16 output
 * layer (logits, losses, dx, dW) against a double-precision computation from the same bf16-rounded
 * inputs on random matrices of odd shapes: errors within bounds that grow with the length of each
 * sum (K), for the AVX-512 BF16 kernels where the CPU has them and for the portable loops; the same
 * bits for 1 and 3 threads; rows whose logits all lie far below their bound. */
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "bf16.h"
#include "cpu.h"
#include "lmhead.h"
#include "rng.h"
#include "threads.h"

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

TEST(rounding_is_nearest_even) {
    CHECK_EQ_INT(bf16_from_float(1.0f), 0x3f80);
    CHECK_EQ_INT(bf16_from_float(-2.0f), 0xc000);
    /* 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1) */
    CHECK_EQ_INT(bf16_from_float(float_of(0x3f808000u)), 0x3f80);
    /* (1 + 2^-7) + 2^-8: halfway, the even neighbour is 1 + 2^-6 */
    CHECK_EQ_INT(bf16_from_float(float_of(0x3f818000u)), 0x3f82);
    CHECK_EQ_INT(bf16_from_float(float_of(0x3f808001u)), 0x3f81); /* above halfway */
    CHECK_EQ_INT(bf16_from_float(float_of(0x3f807fffu)), 0x3f80); /* below */
    CHECK_EQ_INT(bf16_from_float(INFINITY), 0x7f80);
    CHECK_EQ_INT(bf16_from_float(-INFINITY), 0xff80);
    CHECK_EQ_INT(bf16_from_float(float_of(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds up to inf */
    CHECK(isnan(bf16_to_float(bf16_from_float(NAN))));
    CHECK(isnan(bf16_to_float(bf16_from_float(float_of(0x7f800001u))))); /* a NaN that would round to inf */
    CHECK_EQ_INT(bf16_from_float(float_of(0x00018000u)), 0x0002);        /* subnormals round too */
    CHECK_EQ_INT(bf16_from_float(-0.0f), 0x8000);
    CHECK(bf16_to_float(0x3f81) == 1.0078125f);
}

TEST(vector_conversion_matches_scalar) {
    enum { N = 4099 };
    float *x = malloc(sizeof(float) * N);
    bf16 *a = malloc(sizeof(bf16) * N);
    CHECK(x && a);
    rng_state r;
    rng_seed(&r, 7);
    for (int i = 0; i < N; i++) x[i] = float_of((uint32_t)rng_next_u64(&r)); /* every bit pattern */
    x[5] = NAN;
    x[17] = INFINITY;
    x[18] = float_of(0x00000001u);
    x[19] = float_of(0x80400000u);
    x[20] = float_of(0x3f808000u);
    for (int pass = 0; pass < 2; pass++) {
        cpu_disable_bf16(pass);
        bf16_from_floats(a, x, N);
        for (int i = 0; i < N; i++) {
            bf16 want = bf16_from_float(x[i]);
            int ok = isnan(x[i]) ? isnan(bf16_to_float(a[i])) : a[i] == want;
            if (!ok) cpu_disable_bf16(0);
            CHECK_MSG(ok, "pass %d, %08x -> %04x, want %04x", pass, bits_of(x[i]), a[i], want);
        }
    }
    cpu_disable_bf16(0);
    free(x);
    free(a);
}

/* ---- the output layer ---- */

typedef struct {
    long N;
    int C, V;
    float *x, *w;
    int32_t *tg;
    /* results */
    float *loss, *dx, *dw;
} lm_case;

typedef struct {
    lmhead_args a;
    threadpool *pool;
} run_ctx;

static void run_fn(void *ctx, int tid, int nth) {
    run_ctx *r = ctx;
    lmhead_thread(&r->a, r->pool, tid, nth);
}

/* Runs the bf16 output layer on lc with nth threads; 0 on success. */
static int run_bf16(lm_case *lc, int nth, int chunk) {
    engine_error err;
    threadpool *pool;
    lmhead_bf16 *b;
    if (threads_create(&pool, nth, &err) || lmhead_bf16_new(&b, lc->V, lc->C, &err)) return -1;
    lmhead_bf16_refresh(b, lc->w, pool);
    size_t per = lmhead_scratch_per_thread(lc->C, lc->V);
    float *buf = calloc(per * (size_t)nth, sizeof(float));
    atomic_long tickets[LMHEAD_SLICES];
    for (int i = 0; i < LMHEAD_SLICES; i++) atomic_init(&tickets[i], 0);
    memset(lc->dw, 0, sizeof(float) * (size_t)lc->V * lc->C);
    run_ctx r = {.pool = pool,
                 .a = {.x = lc->x,
                       .w = lc->w,
                       .targets = lc->tg,
                       .N = lc->N,
                       .C = lc->C,
                       .V = lc->V,
                       .losses = lc->loss,
                       .dx = lc->dx,
                       .dw = lc->dw,
                       .grad_scale = (float)(1.0 / lc->N),
                       .buf = buf,
                       .buf_stride = per,
                       .chunk_rows = chunk,
                       .tickets = tickets,
                       .bf = b}};
    threads_run(pool, run_fn, &r);
    free(buf);
    lmhead_bf16_free(b);
    threads_free(pool);
    return 0;
}

static lm_case make_case(long N, int C, int V, uint64_t seed, double wscale) {
    lm_case lc = {.N = N, .C = C, .V = V};
    lc.x = malloc(sizeof(float) * N * C);
    lc.w = malloc(sizeof(float) * (size_t)V * C);
    lc.tg = malloc(sizeof(int32_t) * N);
    lc.loss = malloc(sizeof(float) * N);
    lc.dx = malloc(sizeof(float) * N * C);
    lc.dw = malloc(sizeof(float) * (size_t)V * C);
    rng_state r;
    rng_seed(&r, seed);
    for (long i = 0; i < N * C; i++) lc.x[i] = (float)rng_normal(&r);
    for (long i = 0; i < (long)V * C; i++) lc.w[i] = (float)(wscale * rng_normal(&r));
    for (long i = 0; i < N; i++) lc.tg[i] = (int32_t)(rng_next_u64(&r) % (uint64_t)V);
    return lc;
}

static void free_case(lm_case *lc) {
    free(lc->x);
    free(lc->w);
    free(lc->tg);
    free(lc->loss);
    free(lc->dx);
    free(lc->dw);
}

/* Double reference from the bf16-rounded inputs; every result within its bound:
 *   loss: 1e-5 + 4 C 2^-24 A_r            (A_r = max_v sum_c |x_rc w_vc|: the logits' fp32 sums)
 *   dx:   g (2^-8 + V 2^-24 + 4 C 2^-24 A_r) sum_v p_v |w_vc|   (E rounded to bf16, sums over V)
 *   dW:   g (2^-7 + N 2^-24 + 4 C 2^-24 A) sum_r p_rv |x_rc| + g 2^-20 sum_{r: t_r = v} |x_rc| */
static int check_case(const lm_case *lc, char *why, size_t whylen) {
    const long N = lc->N;
    const int C = lc->C, V = lc->V;
    const double g = 1.0 / N, u = 1.0 / (1 << 24);
    double *p = malloc(sizeof(double) * V), *dw = calloc((size_t)V * C, sizeof(double)),
           *dwb = calloc((size_t)V * C, sizeof(double));
    double Amax = 0;
    int ok = 1;
    for (long r = 0; r < N && ok; r++) {
        const float *x = lc->x + r * C;
        double mx = -INFINITY, A = 0;
        for (int v = 0; v < V; v++) {
            double l = 0, a = 0;
            for (int c = 0; c < C; c++) {
                double t = (double)bf16_round(x[c]) * bf16_round(lc->w[(long)v * C + c]);
                l += t;
                a += fabs(t);
            }
            p[v] = l;
            mx = l > mx ? l : mx;
            A = a > A ? a : A;
        }
        Amax = A > Amax ? A : Amax;
        double s = 0;
        for (int v = 0; v < V; v++) s += exp(p[v] - mx);
        double loss = log(s) + mx - p[lc->tg[r]];
        for (int v = 0; v < V; v++) p[v] = exp(p[v] - mx) / s;
        double dl = 4 * C * u * A;
        if (!(fabs(loss - lc->loss[r]) <= 1e-5 + dl)) {
            snprintf(why, whylen, "row %ld: loss %.9g, reference %.9g", r, lc->loss[r], loss);
            ok = 0;
            break;
        }
        for (int c = 0; c < C; c++) {
            double d = 0, b = 0;
            for (int v = 0; v < V; v++) {
                double wv = bf16_round(lc->w[(long)v * C + c]);
                d += p[v] * wv;
                b += p[v] * fabs(wv);
            }
            d = g * (d - bf16_round(lc->w[(long)lc->tg[r] * C + c]));
            double tol = g * (1.0 / 256 + V * u + dl) * b + 1e-12;
            if (!(fabs(d - lc->dx[r * C + c]) <= tol)) {
                snprintf(why, whylen, "dx[%ld][%d] %.9g, reference %.9g (bound %.3g)", r, c, lc->dx[r * C + c], d, tol);
                ok = 0;
                break;
            }
        }
        for (int v = 0; v < V; v++)
            for (int c = 0; c < C; c++) {
                double xv = bf16_round(x[c]);
                dw[(long)v * C + c] += g * (p[v] - (v == lc->tg[r])) * xv;
                dwb[(long)v * C + c] += g * p[v] * fabs(xv) + (v == lc->tg[r] ? g * fabs(xv) / (1 << 20) : 0);
            }
    }
    for (long i = 0; ok && i < (long)V * C; i++) {
        double tol = (1.0 / 128 + N * u + 4 * C * u * Amax) * dwb[i] + 1e-12;
        if (!(fabs(dw[i] - lc->dw[i]) <= tol)) {
            snprintf(why, whylen, "dW[%ld][%ld] %.9g, reference %.9g (bound %.3g)", i / C, i % C, lc->dw[i], dw[i],
                     tol);
            ok = 0;
        }
    }
    free(p);
    free(dw);
    free(dwb);
    return ok;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

/* N rows (ragged against the 32-row padding and the chunks), odd V (a half-empty last pair,
 * vocabulary tiles of 12 with a tail), C of 16, 48 (column tiles of 64 with a 48 tail) and 128. */
static void lmhead_case(long N, int C, int V, int chunk, double wscale, int portable) {
    lm_case lc = make_case(N, C, V, (uint64_t)(N * 131 + C * 7 + V), wscale);
    CHECK(lc.x && lc.w && lc.tg && lc.loss && lc.dx && lc.dw);
    cpu_disable_bf16(portable);
    int rc = run_bf16(&lc, 1, chunk);
    cpu_disable_bf16(0);
    CHECK(rc == 0);
    char why[200];
    int ok = check_case(&lc, why, sizeof why);
    if (!ok) free_case(&lc);
    CHECK_MSG(ok, "N%ld C%d V%d %s: %s", N, C, V, portable ? "portable" : "kernels", why);
    /* the same bits with 3 threads */
    lm_case l3 = make_case(N, C, V, (uint64_t)(N * 131 + C * 7 + V), wscale);
    cpu_disable_bf16(portable);
    rc = run_bf16(&l3, 3, chunk);
    cpu_disable_bf16(0);
    int same = rc == 0 && same_bits(lc.loss, l3.loss, (size_t)N) && same_bits(lc.dx, l3.dx, (size_t)N * C) &&
               same_bits(lc.dw, l3.dw, (size_t)V * C);
    free_case(&l3);
    free_case(&lc);
    CHECK_MSG(same, "N%ld C%d V%d: 3 threads differ from 1", N, C, V);
}

TEST(lmhead_bf16_kernels_match_double_reference) {
    if (!cpu_has_avx512bf16()) { printf("(no AVX-512 BF16 on this CPU: the portable loops stand in)\n"); }
    lmhead_case(37, 16, 101, 16, 0.5, 0);
    lmhead_case(203, 48, 257, 64, 0.3, 0);
    lmhead_case(130, 128, 1237, 128, 0.2, 0);
    lmhead_case(64, 64, 2, 32, 1.0, 0);
}

TEST(lmhead_bf16_portable_matches_double_reference) {
    lmhead_case(37, 16, 101, 16, 0.5, 1);
    lmhead_case(70, 48, 257, 64, 0.3, 1);
    lmhead_case(33, 128, 99, 128, 0.2, 1);
}

/* One output row of huge norm that no input points along: every row's bound |x| max|w| is then
 * far above its largest logit, and the chunk is recomputed against that logit. */
TEST(lmhead_bf16_far_bound_is_recomputed) {
    for (int portable = 0; portable < 2; portable++) {
        lm_case lc = make_case(45, 32, 77, 3, 0.1);
        CHECK(lc.x);
        for (int c = 0; c < 32; c++) lc.w[5 * 32 + c] = c == 0 ? 400.0f : 0.0f;
        for (long r = 0; r < 45; r++) lc.x[r * 32] = 0;
        cpu_disable_bf16(portable);
        int rc = run_bf16(&lc, 2, 16);
        cpu_disable_bf16(0);
        char why[200];
        int ok = rc == 0 && check_case(&lc, why, sizeof why);
        free_case(&lc);
        CHECK_MSG(ok, "%s: %s", portable ? "portable" : "kernels", rc ? "run failed" : why);
    }
}

TEST(lmhead_bf16_refresh_copies_and_bounds) {
    const int V = 7, C = 16;
    float w[7 * 16];
    for (int i = 0; i < V * C; i++) w[i] = (float)(i % 13) * 0.37f - 2.0f;
    lmhead_bf16 *b;
    engine_error err;
    CHECK(lmhead_bf16_new(&b, V, C, &err) == ENGINE_OK);
    lmhead_bf16_refresh(b, w, NULL);
    double best = 0;
    for (int v = 0; v < V; v++) {
        double sq = 0;
        for (int c = 0; c < C; c++) {
            bf16 h = bf16_from_float(w[v * C + c]);
            CHECK_EQ_INT(b->wb[v * C + c], h);
            CHECK_EQ_INT(b->wp[(v / 2) * 2 * C + 2 * c + (v & 1)], h);
            sq += (double)bf16_to_float(h) * bf16_to_float(h);
        }
        best = sq > best ? sq : best;
    }
    for (int c = 0; c < C; c++) CHECK_EQ_INT(b->wp[3 * 2 * C + 2 * c + 1], 0); /* the missing 8th row */
    CHECK(b->wmax >= sqrt(best) && b->wmax <= sqrt(best) * 1.00001);
    lmhead_bf16_free(b);
    CHECK(lmhead_bf16_new(&b, V, 20, &err) == ENGINE_ERR_INVALID); /* d_model not a multiple of 16 */
}

int main(void) {
    RUN(rounding_is_nearest_even);
    RUN(vector_conversion_matches_scalar);
    RUN(lmhead_bf16_refresh_copies_and_bounds);
    RUN(lmhead_bf16_kernels_match_double_reference);
    RUN(lmhead_bf16_portable_matches_double_reference);
    RUN(lmhead_bf16_far_bound_is_recomputed);
    return test_summary();
}
