/* The engine's one seeded random generator. Algorithm: xoshiro256** (Blackman & Vigna, 2018)
 * whose 256-bit state is filled from the seed by four outputs of splitmix64. Normal samples use
 * the Box-Muller transform on two uniforms in (0,1) (53-bit), both outputs used in turn.
 * The stream is a pure function of the seed, identical on every platform. */
#ifndef ENGINE_RNG_H
#define ENGINE_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
    int have_spare;  /* Box-Muller yields pairs; the second is kept for the next call */
    double spare;
} rng_state;

void rng_seed(rng_state *r, uint64_t seed);
uint64_t rng_next_u64(rng_state *r);
double rng_uniform(rng_state *r);  /* in (0, 1), never exactly 0 or 1 */
double rng_normal(rng_state *r);   /* standard normal */

#endif
