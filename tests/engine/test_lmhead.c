/* The fp32 output layer (the float build's own AVX-512 kernels where d_model is a multiple of 16 up
 * to 128, and BLAS) against the double reference of lmhead_cases.h, from the inputs as they are:
 * logits (K = d_model), dx (K = vocabulary), dW (K = rows); ragged rows, vocabularies short of every
 * tile, d_model off the kernels' range (BLAS then); the same bits for 1 and 3 threads. The bf16 paths
 * have theirs in test_bf16.c and test_amx.c. */
#include "../support/test.h"
#include "lmhead_cases.h"

static void fp32_case(long N, int C, int V, int chunk, double wscale, int blas) {
    lm_case lc = make_case(N, C, V, (uint64_t)(N * 131 + C * 7 + V), wscale);
    CHECK(lc.x && lc.w && lc.tg && lc.loss && lc.dx && lc.dw);
    char why[200] = "run failed";
    int ok = run_fp32(&lc, 1, chunk, blas) == 0 && check_case_as(&lc, 0, why, sizeof why);
    if (!ok) free_case(&lc);
    CHECK_MSG(ok, "N%ld C%d V%d %s: %s", N, C, V, blas ? "BLAS" : "kernels", why);
    lm_case l3 = make_case(N, C, V, (uint64_t)(N * 131 + C * 7 + V), wscale);
    int same = run_fp32(&l3, 3, chunk, blas) == 0 && same_bits(lc.loss, l3.loss, (size_t)N) &&
               same_bits(lc.dx, l3.dx, (size_t)N * C) && same_bits(lc.dw, l3.dw, (size_t)V * C);
    free_case(&l3);
    free_case(&lc);
    CHECK_MSG(same, "N%ld C%d V%d %s: 3 threads differ from 1", N, C, V, blas ? "BLAS" : "kernels");
}

static void shapes(int blas) {
    fp32_case(37, 16, 101, 16, 0.5, blas);
    fp32_case(203, 48, 257, 64, 0.3, blas);
    fp32_case(130, 128, 1237, 128, 0.2, blas);
    fp32_case(64, 64, 2, 32, 1.0, blas);
    fp32_case(33, 24, 99, 48, 0.4, blas); /* d_model the kernels do not take: BLAS either way */
}

TEST(lmhead_fp32_kernels_match_double_reference) {
    SKIP_IF(!lmhead_uses_kernels(128), "fp32 output-layer kernels (CPU lacks AVX-512F, or the double build)");
    shapes(0);
}

TEST(lmhead_fp32_blas_matches_double_reference) { shapes(1); }

int main(void) {
    RUN(lmhead_fp32_kernels_match_double_reference);
    RUN(lmhead_fp32_blas_matches_double_reference);
    return test_summary();
}
