/* Random numbers for the probes: one seeded generator per study (xoshiro256**, seeded through
 * splitmix64) with Marsaglia's polar method for normals; and the Park-Miller minimal standard
 * generator, kept only to reproduce the per-vector seeding mistake that seed 003 describes. */
#ifndef PROBE_RNG_H
#define PROBE_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
    double spare;
    int has_spare;
} probe_rng;

void probe_rng_seed(probe_rng *r, uint64_t seed);
double probe_rng_uniform(probe_rng *r); /* [0, 1) */
double probe_rng_normal(probe_rng *r);  /* N(0, 1), Marsaglia polar */

/* Park-Miller: x <- 16807 x mod (2^31 - 1). Seed 0 is mapped to 1 (0 is a fixed point). */
typedef struct {
    uint32_t x;
    double spare;
    int has_spare;
} probe_lcg;

void probe_lcg_seed(probe_lcg *g, uint32_t seed);
uint32_t probe_lcg_next(probe_lcg *g);   /* the next state, in [1, 2^31 - 2] */
double probe_lcg_normal(probe_lcg *g);   /* N(0, 1) by the polar method on the LCG's uniforms */

#endif
