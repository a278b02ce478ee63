#include "probe_rng.h"

#include <math.h>

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
