/* The engine's one seeded random generator, used by training and by the probes. Algorithm:
 * xoshiro256** (Blackman & Vigna, 2018) whose 256-bit state is filled from the seed by four
 * outputs of splitmix64. Two normal samplers, each yielding pairs (the second is kept for the next
 * call): rng_normal, Box-Muller on two uniforms in (0,1) (model initialisation), and
 * rng_normal_polar, Marsaglia's polar method on uniforms in [0,1) (the probes' random vectors).
 * Draw one stream's normals with one of them. The stream is a pure function of the seed,
 * identical on every platform. */
#ifndef ENGINE_RNG_H
#define ENGINE_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
    int have_spare; /* normals come in pairs; the second is kept for the next call */
    double spare;
} rng_state;

void rng_seed(rng_state *r, uint64_t seed);
uint64_t rng_next_u64(rng_state *r);
double rng_uniform(rng_state *r);      /* in (0, 1), never exactly 0 or 1 */
double rng_uniform01(rng_state *r);    /* in [0, 1): the top 53 bits times 2^-53 */
double rng_normal(rng_state *r);       /* standard normal (Box-Muller) */
double rng_normal_polar(rng_state *r); /* standard normal (Marsaglia polar, on rng_uniform01) */

#endif
