/* The engine's matrix products (own AVX-512 kernels where the CPU has them, BLAS elsewhere) against
 * a double-precision reference on random matrices: every form (A B^T, A B, A^T B), with and without
 * accumulation, row strides wider than the rows, and odd shapes (tails of the 12-row and 32-column
 * tiles, K = 0, K longer than one packed block): each entry within K 2^-23 of the sum of |terms|.
 * The same bits from either entry point of a tile (a product's rows computed in one call or split).
 * The bf16 products likewise, on vdpbf16ps (or portable loops) and on AMX tiles; and the bf16
 * conversions that feed them (pairs, transposes) against bf16_from_float entry by entry. */
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "bf16.h"
#include "cpu.h"
#include "gemm.h"
#include "rng.h"

static void fill(float *x, long n, rng_state *r) {
    for (long i = 0; i < n; i++) x[i] = (float)rng_normal(r);
}

/* form 0: C = A B^T (A [M][K], B [N][K]); 1: C = A B (B [K][N]); 2: C = A^T B (A [K][M], B [K][N]) */
static int check_form(int form, int M, int N, int K, int acc, char *why, size_t wl) {
    int lda = (form == 2 ? M : K) + 3, ldb = (form == 0 ? K : N) + 5, ldc = N + 2;
    long na = (long)(form == 2 ? K : M) * lda + 1, nb = (long)(form == 0 ? N : K) * ldb + 1, nc = (long)M * ldc + 1;
    float *A = malloc(sizeof(float) * na), *B = malloc(sizeof(float) * nb), *C = malloc(sizeof(float) * nc),
          *C0 = malloc(sizeof(float) * nc);
    rng_state r;
    rng_seed(&r, (uint64_t)(form * 1000003 + M * 1009 + N * 31 + K));
    fill(A, na, &r);
    fill(B, nb, &r);
    fill(C0, nc, &r);
    memcpy(C, C0, sizeof(float) * nc);
    if (form == 0)
        gemm_nt(M, N, K, A, lda, B, ldb, C, ldc, acc);
    else if (form == 1)
        gemm_nn(M, N, K, A, lda, B, ldb, C, ldc, acc);
    else
        gemm_tn(M, N, K, A, lda, B, ldb, C, ldc, acc);
    int ok = 1;
    for (int m = 0; m < M && ok; m++)
        for (int n = 0; n < N; n++) {
            double s = acc ? C0[(long)m * ldc + n] : 0, a = fabs(s);
            for (int k = 0; k < K; k++) {
                double x = form == 2 ? A[(long)k * lda + m] : A[(long)m * lda + k];
                double y = form == 0 ? B[(long)n * ldb + k] : B[(long)k * ldb + n];
                s += x * y;
                a += fabs(x * y);
            }
            double tol = (K + 2) * a / (1 << 23) + 1e-30;
            if (!(fabs(s - C[(long)m * ldc + n]) <= tol)) {
                snprintf(why, wl, "form %d M%d N%d K%d acc %d: C[%d][%d] %.9g, reference %.9g", form, M, N, K, acc, m,
                         n, C[(long)m * ldc + n], s);
                ok = 0;
                break;
            }
        }
    /* what lies outside C's rows is untouched */
    for (int m = 0; m < M && ok; m++)
        for (int n = N; n < ldc; n++)
            if (C[(long)m * ldc + n] != C0[(long)m * ldc + n]) {
                snprintf(why, wl, "form %d M%d N%d K%d: wrote past a row (column %d)", form, M, N, K, n);
                ok = 0;
                break;
            }
    free(A);
    free(B);
    free(C);
    free(C0);
    return ok;
}

TEST(products_match_double_reference) {
    printf("kernels: %s (OpenBLAS core %s)\n", gemm_uses_own_kernels() ? "own AVX-512" : "BLAS", gemm_blas_core());
    int Ms[] = {1, 5, 12, 13, 25, 64};
    int Ns[] = {1, 7, 16, 17, 32, 33, 48, 100};
    int Ks[] = {0, 1, 3, 31, 128, 300};
    char why[200];
    for (int form = 0; form < 3; form++)
        for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
            for (size_t j = 0; j < sizeof Ns / sizeof *Ns; j++)
                for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
                    for (int acc = 0; acc < 2; acc++)
                        CHECK_MSG(check_form(form, Ms[i], Ns[j], Ks[k], acc, why, sizeof why), "%s", why);
}

TEST(blas_and_own_kernels_agree) {
    char why[200];
    for (int b = 0; b < 2; b++) {
        gemm_use_blas(b);
        int ok = check_form(0, 37, 384, 128, 0, why, sizeof why) && check_form(1, 37, 512, 128, 1, why, sizeof why) &&
                 check_form(2, 32, 512, 1000, 1, why, sizeof why);
        gemm_use_blas(0);
        CHECK_MSG(ok, "%s: %s", b ? "BLAS" : "own kernels", why);
    }
}

/* A product's rows computed at once or in two calls give the same bits (the engine splits rows
 * between threads by fixed items; this is what keeps results independent of the split). */
TEST(row_split_gives_the_same_bits) {
    const int M = 50, N = 70, K = 129;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K), *C1 = malloc(sizeof(float) * M * N),
          *C2 = malloc(sizeof(float) * M * N);
    rng_state r;
    rng_seed(&r, 3);
    fill(A, (long)M * K, &r);
    fill(B, (long)N * K, &r);
    gemm_nt(M, N, K, A, K, B, K, C1, N, 0);
    gemm_nt(23, N, K, A, K, B, K, C2, N, 0);
    gemm_nt(M - 23, N, K, A + 23 * K, K, B, K, C2 + 23 * N, N, 0);
    int same = memcmp(C1, C2, sizeof(float) * M * N) == 0;
    free(A);
    free(B);
    free(C1);
    free(C2);
    CHECK(same);
}

/* bf16 products: A rounded to bf16 rows, B packed in pairs from B as it is and from B^T (the two
 * ways the model packs weights), against a double sum over the rounded inputs within K 2^-23 of the
 * sum of |terms|; tails of the 12-row and 32-column tiles, odd K, accumulation; the same bits for a
 * product's rows in one call or two. Where the CPU lacks AVX-512 BF16, the portable loop. */
/* The product through gemm_bf16, or (amx) through gemm_bf16_amx, which must take it. */
static void bf16_product(int amx, int M, int N, int K, const bf16 *A, int lda, const bf16 *Bp, const bf16 *Bt, float *C,
                         int ldc, int acc) {
    if (!amx || !gemm_bf16_amx(M, N, K, A, lda, Bt, C, ldc, acc)) gemm_bf16(M, N, K, A, lda, Bp, C, ldc, acc);
}

static int check_bf16_on(int amx, int M, int N, int K, int trans, int acc, char *why, size_t wl) {
    int Kp = K + K % 2, ldc = N + 3, lda = Kp + 2;
    long nb = (long)K * N;
    float *A = malloc(sizeof(float) * ((size_t)M * K + 1)), *B = malloc(sizeof(float) * ((size_t)nb + 1)),
          *C = malloc(sizeof(float) * (size_t)M * ldc), *C0 = malloc(sizeof(float) * (size_t)M * ldc),
          *C2 = malloc(sizeof(float) * (size_t)M * ldc);
    bf16 *Ab = malloc(sizeof(bf16) * ((size_t)M * lda + 1)),
         *Bp = malloc(sizeof(bf16) * (gemm_bf16_packed_count(K, N) + 1)),
         *Bt = malloc(sizeof(bf16) * (gemm_bf16_packed_count(K, N) + 1));
    rng_state r;
    rng_seed(&r, (uint64_t)(M * 1009 + N * 31 + K * 7 + trans));
    fill(A, (long)M * K, &r);
    fill(B, nb, &r);
    fill(C0, (long)M * ldc, &r);
    /* B(k, n): [K][N] as it is, or the transpose of a [N][K] array */
    gemm_bf16_rows(Ab, lda, A, K, M, K);
    if (trans)
        gemm_bf16_pack(Bp, K, N, B, 1, K);
    else
        gemm_bf16_pack(Bp, K, N, B, N, 1);
    if (amx && trans)
        gemm_bf16_pack_tiles(Bt, K, N, B, 1, K);
    else if (amx)
        gemm_bf16_pack_tiles(Bt, K, N, B, N, 1);
    memcpy(C, C0, sizeof(float) * (size_t)M * ldc);
    memcpy(C2, C0, sizeof(float) * (size_t)M * ldc);
    bf16_product(amx, M, N, K, Ab, lda, Bp, Bt, C, ldc, acc);
    int half = amx ? M / 64 * 32 : M / 2;
    bf16_product(amx, half, N, K, Ab, lda, Bp, Bt, C2, ldc, acc);
    bf16_product(amx, M - half, N, K, Ab + (long)half * lda, lda, Bp, Bt, C2 + (long)half * ldc, ldc, acc);
    int ok = memcmp(C, C2, sizeof(float) * (size_t)M * ldc) == 0;
    if (!ok) snprintf(why, wl, "M%d N%d K%d: rows split in two calls give other bits", M, N, K);
    for (int m = 0; m < M && ok; m++)
        for (int n = 0; n < N; n++) {
            double s = acc ? C0[(long)m * ldc + n] : 0, a = fabs(s);
            for (int k = 0; k < K; k++) {
                double x = bf16_round(A[(long)m * K + k]);
                double y = bf16_round(trans ? B[(long)n * K + k] : B[(long)k * N + n]);
                s += x * y;
                a += fabs(x * y);
            }
            double tol = (K + 2) * a / (1 << 23) + 1e-30;
            if (!(fabs(s - C[(long)m * ldc + n]) <= tol)) {
                snprintf(why, wl, "M%d N%d K%d trans %d acc %d: C[%d][%d] %.9g, reference %.9g", M, N, K, trans, acc, m,
                         n, C[(long)m * ldc + n], s);
                ok = 0;
                break;
            }
            if (n == N - 1 && C[(long)m * ldc + N] != C0[(long)m * ldc + N]) {
                snprintf(why, wl, "M%d N%d K%d: wrote past a row", M, N, K);
                ok = 0;
            }
        }
    free(A);
    free(B);
    free(C);
    free(C0);
    free(C2);
    free(Ab);
    free(Bp);
    free(Bt);
    return ok;
}

static int check_bf16(int M, int N, int K, int trans, int acc, char *why, size_t wl) {
    return check_bf16_on(0, M, N, K, trans, acc, why, wl);
}

TEST(bf16_products_match_double_reference) {
    if (!gemm_bf16_available()) printf("(no AVX-512 BF16: the portable loop)\n");
    int Ms[] = {1, 5, 12, 13, 25, 64};
    int Ns[] = {1, 7, 16, 17, 32, 33, 48, 100};
    int Ks[] = {1, 2, 3, 31, 128, 300, 513};
    char why[200];
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
        for (size_t j = 0; j < sizeof Ns / sizeof *Ns; j++)
            for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
                for (int t = 0; t < 2; t++)
                    CHECK_MSG(check_bf16(Ms[i], Ns[j], Ks[k], t, (int)((i + j + k) % 2), why, sizeof why), "%s", why);
}

/* The same products on AMX tiles: every shape the model gives them (multiples of 32: the blocks'
 * rows, C, 3C, 4C), against the same reference and in one call or two; other shapes refused with C
 * untouched. Skipped, by name, on a CPU without AMX. */
TEST(amx_products_match_double_reference) {
    SKIP_IF(!cpu_has_amx_bf16(), "amx products (%s)", cpu_amx_missing() ? cpu_amx_missing() : "no AMX");
    int Ms[] = {32, 64, 256};
    int Ns[] = {32, 128, 384, 512};
    int Ks[] = {32, 128, 512};
    char why[200];
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
        for (size_t j = 0; j < sizeof Ns / sizeof *Ns; j++)
            for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
                for (int t = 0; t < 2; t++)
                    CHECK_MSG(check_bf16_on(1, Ms[i], Ns[j], Ks[k], t, (int)((i + j + k + t) % 2), why, sizeof why),
                              "amx: %s", why);
    bf16 a[64 * 64] = {0}, b[64 * 64] = {0};
    float c[64 * 64];
    for (int i = 0; i < 64 * 64; i++) c[i] = (float)i;
    CHECK(!gemm_bf16_amx(33, 32, 32, a, 64, b, c, 64, 0));
    CHECK(!gemm_bf16_amx(32, 48, 32, a, 64, b, c, 64, 0));
    CHECK(!gemm_bf16_amx(32, 32, 31, a, 64, b, c, 64, 0));
    int same = 1;
    for (int i = 0; i < 64 * 64; i++) same &= c[i] == (float)i;
    CHECK_MSG(same, "a refused product wrote to C");
}

/* gemm_bf16_pack, gemm_bf16_pack_tiles and gemm_bf16_cols (vectorised where the CPU has AVX-512
 * BF16) equal the scalar rounding of each entry, on odd shapes with strided rows: pairs with an odd
 * K's zero half, tiles, and transposes with the 16 x 16 blocks' tails in both directions. */
TEST(bf16_conversions_match_scalar_rounding) {
    rng_state r;
    rng_seed(&r, 7);
    int shapes[][2] = {{1, 1}, {2, 16}, {5, 17}, {16, 16}, {33, 48}, {50, 37}, {64, 128}, {32, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int M = shapes[i][0], K = shapes[i][1], lds = K + 3, ldd = M + 5;
        float *src = malloc(sizeof(float) * (size_t)M * lds);
        bf16 *t = malloc(sizeof(bf16) * (size_t)K * ldd), *p = malloc(sizeof(bf16) * gemm_bf16_packed_count(M, K));
        fill(src, (long)M * lds, &r);
        memset(t, 0xff, sizeof(bf16) * (size_t)K * ldd);
        gemm_bf16_cols(t, ldd, src, lds, M, K);
        gemm_bf16_pack(p, M, K, src, lds, 1); /* B(k = row m, n = column) in pairs of rows */
        int bad_t = 0, bad_p = 0, pad = 1;
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++) {
                bf16 want = bf16_from_float(src[(long)m * lds + k]);
                bad_t += t[(long)k * ldd + m] != want;
                bad_p += p[((size_t)(m / 2) * K + k) * 2 + (m & 1)] != want;
            }
        for (int k = 0; M % 2 && k < K; k++) pad &= p[((size_t)(M / 2) * K + k) * 2 + 1] == 0;
        if (M % 32 == 0 && K % 32 == 0) { /* the tile layout, where its sides allow it */
            gemm_bf16_pack_tiles(p, M, K, src, lds, 1);
            for (int m = 0; m < M; m++)
                for (int k = 0; k < K; k++)
                    bad_p += p[gemm_bf16_tile_at(K, m, k)] != bf16_from_float(src[(long)m * lds + k]);
        }
        for (int k = 0; k < K; k++)
            for (int m = M; m < ldd; m++) pad &= t[(long)k * ldd + m] == 0xffff; /* nothing past M written */
        CHECK_MSG(!bad_t && !bad_p && pad, "%d x %d: %d transposed and %d paired entries differ, padding %s", M, K,
                  bad_t, bad_p, pad ? "right" : "wrong");
        free(src);
        free(t);
        free(p);
    }
}

int main(void) {
    gemm_init();
    RUN(products_match_double_reference);
    RUN(blas_and_own_kernels_agree);
    RUN(row_split_gives_the_same_bits);
    RUN(bf16_products_match_double_reference);
    RUN(amx_products_match_double_reference);
    RUN(bf16_conversions_match_scalar_rounding);
    return test_summary();
}
