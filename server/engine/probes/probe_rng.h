/* The probes draw their random vectors from the engine's generator (rng.h: rng_seed, then
 * rng_normal_polar). Kept here only the Park-Miller minimal standard generator, to reproduce the
 * per-vector seeding mistake that seed 003 describes. */
#ifndef PROBE_RNG_H
#define PROBE_RNG_H

#include <stdint.h>

/* Park-Miller: x <- 16807 x mod (2^31 - 1). Seed 0 is mapped to 1 (0 is a fixed point). */
typedef struct {
    uint32_t x;
    double spare;
    int has_spare;
} probe_lcg;

void probe_lcg_seed(probe_lcg *g, uint32_t seed);
uint32_t probe_lcg_next(probe_lcg *g); /* the next state, in [1, 2^31 - 2] */
double probe_lcg_normal(probe_lcg *g); /* N(0, 1) by the polar method on the LCG's uniforms */

#endif
