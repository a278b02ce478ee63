#include "metric_batches.h"

#include <math.h>
#include <stdio.h>

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng_state >> 33) % n;
}

static double random_value(int signed_zero) {
    static const double ties[] = {0.5, 1, 1.25, 2, 3};
    switch (rnd(6)) {
    case 0: return ties[rnd(5)];
    case 1: return signed_zero ? (rnd(2) ? 0.0 : -0.0) : 0.75;
    default: return (double)rnd(1000000) / 300007.0 + 0.1;
    }
}

size_t metric_batch_random(series_model *m, store_metric *pts, size_t cap, int signed_zero) {
    static const char *const names[METRIC_BATCH_SERIES] = {"loss", "val_loss", "lr", "tau"};
    size_t n = 0, want = 1 + rnd(30);
    while (n + 2 <= cap && n < want) {
        int r = (int)rnd(2), k = (int)rnd(METRIC_BATCH_SERIES), kind = (int)rnd(20), step;
        double v = random_value(signed_zero);
        int *next = &m->next[r][k];
        if (kind < 12 || *next <= 1) { /* append, now and then leaving a step out */
            if (*next == 0) *next = 1;
            if (rnd(5) == 0) *next += 1;
            step = (*next)++;
        } else {
            step = 1 + (int)rnd((unsigned)(*next - 1));
            if (kind < 15 && m->stored[r][k][step]) v = m->value[r][k][step]; /* the same value again */
        }
        if (step >= METRIC_BATCH_MAX_STEP) continue;
        if (kind == 19) v = NAN;
        for (int t = 0; t < (k == 3 ? 2 : 1); t++) {
            store_metric *p = &pts[n++];
            *p = (store_metric){.run_id = m->run[r], .step = step, .value = v + t, .wall_time = 1000 + n};
            p->key = k == 3 ? (t ? "tau.0.1" : "tau.0.0") : names[k];
        }
        if (!isnan(v)) {
            m->stored[r][k][step] = 1;
            m->value[r][k][step] = v;
        }
        if (rnd(8) == 0 && n < cap) { /* twice in one batch */
            pts[n] = pts[n - 1];
            n++;
        }
    }
    return n;
}
