#include "probe_rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void probe_rng_seed(probe_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    r->has_spare = 0;
}

static uint64_t next64(probe_rng *r) {
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

double probe_rng_uniform(probe_rng *r) { return (double)(next64(r) >> 11) * 0x1.0p-53; }

double probe_rng_normal(probe_rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u, v, s;
    do {
        u = 2.0 * probe_rng_uniform(r) - 1.0;
        v = 2.0 * probe_rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double f = sqrt(-2.0 * log(s) / s);
    r->spare = v * f;
    r->has_spare = 1;
    return u * f;
}

void probe_lcg_seed(probe_lcg *g, uint32_t seed) {
    seed %= 2147483647u;
    g->x = seed ? seed : 1;
    g->has_spare = 0;
}

uint32_t probe_lcg_next(probe_lcg *g) {
    g->x = (uint32_t)(((uint64_t)g->x * 16807u) % 2147483647u);
    return g->x;
}

double probe_lcg_normal(probe_lcg *g) {
    if (g->has_spare) {
        g->has_spare = 0;
        return g->spare;
    }
    double u, v, s;
    do {
        u = 2.0 * (probe_lcg_next(g) / 2147483647.0) - 1.0;
        v = 2.0 * (probe_lcg_next(g) / 2147483647.0) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double f = sqrt(-2.0 * log(s) / s);
    g->spare = v * f;
    g->has_spare = 1;
    return u * f;
}
