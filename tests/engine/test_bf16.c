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
#include "lmhead_amx.h"
#include "rng.h"
#include "threads.h"
#include "lmhead_cases.h"

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

/* ---- the output layer (lmhead_cases.h) ---- */

/* N rows (ragged against the 32-row padding and the chunks), odd V (a half-empty last pair,
 * vocabulary tiles of 12 with a tail), C of 16, 48 (column tiles of 64 with a 48 tail) and 128. */
static void lmhead_case(long N, int C, int V, int chunk, double wscale, int portable) {
    kernel_path_id path = portable ? KERNEL_PATH_BF16_PORTABLE : KERNEL_PATH_AVX512_BF16;
    lm_case lc = make_case(N, C, V, (uint64_t)(N * 131 + C * 7 + V), wscale);
    CHECK(lc.x && lc.w && lc.tg && lc.loss && lc.dx && lc.dw);
    int rc = run_bf16(&lc, 1, chunk, path);
    CHECK(rc == 0);
    char why[200];
    int ok = check_case(&lc, why, sizeof why);
    if (!ok) free_case(&lc);
    CHECK_MSG(ok, "N%ld C%d V%d %s: %s", N, C, V, portable ? "portable" : "kernels", why);
    /* the same bits with 3 threads */
    lm_case l3 = make_case(N, C, V, (uint64_t)(N * 131 + C * 7 + V), wscale);
    rc = run_bf16(&l3, 3, chunk, path);
    int same = rc == 0 && same_bits(lc.loss, l3.loss, (size_t)N) && same_bits(lc.dx, l3.dx, (size_t)N * C) &&
               same_bits(lc.dw, l3.dw, (size_t)V * C);
    free_case(&l3);
    free_case(&lc);
    CHECK_MSG(same, "N%ld C%d V%d: 3 threads differ from 1", N, C, V);
}

TEST(lmhead_bf16_kernels_match_double_reference) {
    SKIP_IF(!cpu_has_avx512bf16(), "avx512_bf16 kernels (CPU lacks AVX-512 BF16)");
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
        if (!portable && !cpu_has_avx512bf16()) {
            free_case(&lc);
            continue;
        }
        int rc = run_bf16(&lc, 2, 16, portable ? KERNEL_PATH_BF16_PORTABLE : KERNEL_PATH_AVX512_BF16);
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
    /* the vdpbf16ps and portable layouts (the process's own bf16 path may be amx: below) */
    CHECK(lmhead_bf16_new_on(&b, V, C, KERNEL_PATH_BF16_PORTABLE, &err) == ENGINE_OK);
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
    /* the amx layouts: wa row-major [V16][C32], wt tile-major (amx_wt_at), zero beyond V and C */
    if (kernel_path_supported(KERNEL_PATH_AMX, NULL, 0)) {
        CHECK(lmhead_bf16_new_on(&b, V, C, KERNEL_PATH_AMX, &err) == ENGINE_OK);
        lmhead_bf16_refresh(b, w, NULL);
        const int C32 = 32, V32 = 32;
        for (int v = 0; v < 16; v++)
            for (int c = 0; c < C32; c++) {
                bf16 h = v < V && c < C ? bf16_from_float(w[v * C + c]) : 0;
                CHECK_EQ_INT(b->wa[v * C32 + c], h);
                if (c < C) CHECK_EQ_INT(b->wt[amx_wt_at(V32, c, v)], h);
            }
        CHECK(b->wmax >= sqrt(best) && b->wmax <= sqrt(best) * 1.00001);
        lmhead_bf16_free(b);
    } else {
        printf("SKIP amx layouts (%s)\n", cpu_amx_missing() ? cpu_amx_missing() : "no AMX");
    }
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
