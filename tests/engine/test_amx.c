/* The AMX kernel path. Its kernels are one source (lmhead_amx_kernels.h) with two backends: the AMX
 * intrinsics (lmhead.c) and a C emulation of the documented tile semantics (amx_emu.h). On any CPU:
 * the emulation against a direct computation (TDPBF16PS's order, DAZ, FTZ, shapes), then the whole
 * output layer on the amx path through the emulated tiles (the real kernels' packing, tiling, tails
 * and epilogue) against the double reference of lmhead_cases.h for every shape family and odd
 * shapes, the same bits for 1 and 3 threads, and the rows whose bound lies far above their logits.
 * On a CPU with AMX-BF16, also the hardware kernels against the same reference and against the
 * emulation; elsewhere that case says SKIP with the reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "amx_emu.h"
#include "cpu.h"
#include "kernel_path.h"
#include "lmhead_amx.h"
#include "lmhead_cases.h"

static uint16_t rand_bf16(rng_state *r, double scale) { return bf16_from_float((float)(scale * rng_normal(r))); }

/* TDPBF16PS against its definition, written out in double: every product of two bf16 is exact, so
 * the emulation may differ from the double sum by the fp32 rounding of its 32 additions only. */
TEST(emulated_tdpbf16ps_follows_the_documented_semantics) {
    rng_state r;
    rng_seed(&r, 5);
    uint16_t a[16][32], b[16][32];
    float c[16][16], out[16][16];
    for (int m = 0; m < 16; m++)
        for (int k = 0; k < 32; k++) {
            a[m][k] = rand_bf16(&r, 1.0);
            b[m][k] = rand_bf16(&r, 1.0);
        }
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) c[m][n] = (float)rng_normal(&r);
    atomic_store(&amx_emu_misuse, 0);
    amx_emu_begin(lmhead_amx_config);
    amx_emu_load(0, c, 64);
    amx_emu_load(4, a, 64);
    amx_emu_load(6, b, 64);
    amx_emu_dp(0, 4, 6);
    amx_emu_store(0, out, 64);
    CHECK_EQ_INT(atomic_load(&amx_emu_misuse), 0);
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            double want = c[m][n], mag = fabs(c[m][n]);
            float seq = c[m][n];
            for (int k = 0; k < 16; k++)
                for (int i = 0; i < 2; i++) {
                    double t = (double)bf16_to_float(a[m][2 * k + i]) * bf16_to_float(b[k][2 * n + i]);
                    want += t;
                    mag += fabs(t);
                    seq += (float)t; /* the documented order, in fp32: exactly the emulation's */
                }
            CHECK_MSG(fabs(out[m][n] - want) <= 33 * mag / (1 << 24), "[%d][%d] %.9g vs %.9g", m, n, out[m][n], want);
            CHECK_MSG(out[m][n] == seq, "[%d][%d] %.9g, the documented order gives %.9g", m, n, out[m][n], seq);
        }
    /* DAZ: a denormal bf16 input counts as zero; FTZ: a denormal result becomes zero */
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    memset(c, 0, sizeof c);
    a[0][0] = 0x0001;                /* row 0: a denormal (2^-133) */
    a[1][0] = a[2][0] = 0x0080;      /* rows 1, 2: 2^-126, the smallest normal */
    b[0][0] = 0x7180;                /* column 0: 2^100 */
    b[0][2] = bf16_from_float(0.5f); /* column 1: 0.5, so rows 1 and 2 give 2^-127, a denormal */
    amx_emu_load(1, c, 64);
    amx_emu_load(4, a, 64);
    amx_emu_load(6, b, 64);
    amx_emu_dp(1, 4, 6);
    amx_emu_store(1, out, 64);
    CHECK_MSG(out[0][0] == 0.0f, "DAZ: %g", out[0][0]); /* 2^-33 without it */
    CHECK(out[1][0] == 0x1p-26f && out[2][0] == 0x1p-26f);
    CHECK_MSG(out[1][1] == 0.0f && out[2][1] == 0.0f, "FTZ: %g", out[1][1]);
    AMX_END();
    /* a tile op with no configuration loaded is misuse */
    amx_emu_dp(0, 4, 6);
    CHECK_EQ_INT(atomic_load(&amx_emu_misuse), 1);
    atomic_store(&amx_emu_misuse, 0);
}

/* One case on the amx path (the installed backend), 1 and 3 threads, against the double reference. */
static void amx_case(long N, int C, int V, int chunk, double wscale) {
    atomic_store(&amx_emu_misuse, 0);
    lm_case lc = make_case(N, C, V, (uint64_t)(N * 131 + C * 7 + V), wscale);
    CHECK(lc.x && lc.w && lc.tg && lc.loss && lc.dx && lc.dw);
    int rc = run_bf16(&lc, 1, chunk, KERNEL_PATH_AMX);
    char why[200] = "run failed";
    int ok = rc == 0 && check_case(&lc, why, sizeof why);
    if (!ok) free_case(&lc);
    CHECK_MSG(ok, "N%ld C%d V%d amx: %s", N, C, V, why);
    lm_case l3 = make_case(N, C, V, (uint64_t)(N * 131 + C * 7 + V), wscale);
    rc = run_bf16(&l3, 3, chunk, KERNEL_PATH_AMX);
    int same = rc == 0 && same_bits(lc.loss, l3.loss, (size_t)N) && same_bits(lc.dx, l3.dx, (size_t)N * C) &&
               same_bits(lc.dw, l3.dw, (size_t)V * C);
    free_case(&l3);
    free_case(&lc);
    CHECK_MSG(same, "N%ld C%d V%d amx: 3 threads differ from 1", N, C, V);
    CHECK_EQ_INT(atomic_load(&amx_emu_misuse), 0);
}

/* Rows ragged against the 32-row padding and the chunks; V short of every tile multiple (16, 32)
 * and of the dW slices' 16-row starts; C of 16 and 48 (the logits' 32-column steps padded), 64, 128
 * (the seed's). The products contract over C (logits), V (dx) and the rows (dW). */
static void amx_shapes(void) {
    amx_case(37, 16, 101, 16, 0.5);
    amx_case(203, 48, 257, 64, 0.3);
    amx_case(130, 128, 1237, 128, 0.2);
    amx_case(64, 64, 2, 32, 1.0);
    amx_case(96, 32, 17, 32, 0.7);
    amx_case(33, 80, 1024, 128, 0.3);
}

TEST(amx_kernels_emulated_match_double_reference) {
    lmhead_amx_use(&amx_emu_kernels);
    long before = atomic_load(&amx_emu_dps);
    CHECK(kernel_path_supported(KERNEL_PATH_AMX, NULL, 0));
    amx_shapes();
    long dps = atomic_load(&amx_emu_dps) - before;
    lmhead_amx_use(NULL);
    printf("%ld emulated TDPBF16PS\n", dps);
    CHECK(dps > 0);
}

TEST(amx_far_bound_is_recomputed) {
    lmhead_amx_use(&amx_emu_kernels);
    lm_case lc = make_case(45, 32, 77, 3, 0.1);
    CHECK(lc.x);
    for (int c = 0; c < 32; c++) lc.w[5 * 32 + c] = c == 0 ? 400.0f : 0.0f;
    for (long r = 0; r < 45; r++) lc.x[r * 32] = 0;
    int rc = run_bf16(&lc, 2, 16, KERNEL_PATH_AMX);
    lmhead_amx_use(NULL);
    char why[200] = "run failed";
    int ok = rc == 0 && check_case(&lc, why, sizeof why);
    free_case(&lc);
    CHECK_MSG(ok, "%s", why);
}

/* Without the CPU's tiles (and no emulation installed) the amx path is refused with the reason. */
TEST(amx_path_needs_the_tiles) {
    char why[160];
    if (cpu_has_amx_bf16()) {
        CHECK(kernel_path_supported(KERNEL_PATH_AMX, why, sizeof why));
        return;
    }
    CHECK(!kernel_path_supported(KERNEL_PATH_AMX, why, sizeof why));
    CHECK_MSG(strstr(why, "AMX") != NULL, "%s", why);
    lmhead_bf16 *b;
    engine_error err;
    CHECK(lmhead_bf16_new_on(&b, 100, 32, KERNEL_PATH_AMX, &err) == ENGINE_ERR_INVALID);
    CHECK_MSG(strstr(err.message, "amx") && strstr(err.message, why), "%s", err.message);
}

/* The hardware kernels: the same cases, and every result within the reference's bounds of the
 * emulation's (the hardware's internal order of additions is not specified to the bit). */
TEST(amx_kernels_on_hardware) {
    SKIP_IF(!cpu_has_amx_bf16(), "amx kernels on hardware (%s)", cpu_amx_missing() ? cpu_amx_missing() : "no AMX");
    lmhead_amx_use(NULL);
    amx_shapes();
    lm_case h = make_case(130, 128, 1237, 7, 0.2), e = make_case(130, 128, 1237, 7, 0.2);
    CHECK(run_bf16(&h, 2, 128, KERNEL_PATH_AMX) == 0);
    lmhead_amx_use(&amx_emu_kernels);
    int rc = run_bf16(&e, 2, 128, KERNEL_PATH_AMX);
    lmhead_amx_use(NULL);
    CHECK(rc == 0);
    double dl = 0, dd = 0;
    for (long i = 0; i < 130; i++) dl = fmax(dl, fabs(h.loss[i] - e.loss[i]));
    for (long i = 0; i < 130 * 128; i++) dd = fmax(dd, fabs(h.dx[i] - e.dx[i]));
    printf("hardware vs emulated tiles: max |loss difference| %.3g, max |dx difference| %.3g\n", dl, dd);
    free_case(&h);
    free_case(&e);
    CHECK(dl < 1e-3);
}

int main(void) {
    RUN(emulated_tdpbf16ps_follows_the_documented_semantics);
    RUN(amx_kernels_emulated_match_double_reference);
    RUN(amx_far_bound_is_recomputed);
    RUN(amx_path_needs_the_tiles);
    RUN(amx_kernels_on_hardware);
    return test_summary();
}
