/* bfloat16: the upper 16 bits of an IEEE float (8 exponent bits, 7 stored mantissa bits), so a
 * conversion to float is a shift and products of two of them are exact in float. Mixed precision
 * here means: fp32 master weights and optimiser state, bf16 copies of the inputs of matrix
 * products, fp32 accumulation (vdpbf16ps where the CPU has it, cpu.h), everything else in fp32.
 * Rounding to bf16 is to nearest, ties to even; NaN stays NaN. Engine-internal. */
#ifndef ENGINE_BF16_H
#define ENGINE_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t bf16;

static inline bf16 bf16_from_float(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}

static inline float bf16_to_float(bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* f rounded to the nearest bf16, as a float. */
static inline float bf16_round(float f) { return bf16_to_float(bf16_from_float(f)); }

/* dst[i] = bf16(src[i]) for n values (vectorised where the CPU allows; same results). */
void bf16_from_floats(bf16 *dst, const float *src, size_t n);

#endif
