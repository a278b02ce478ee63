/* A series read a range at a time (store.h: store_series_cursor), over the contract's
 * store_metrics_range: the same for every backend. */
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "store/common/store_query.h"
#include "store/store.h"

static atomic_size_t peak;

void store_series_cursor_init(store_series_cursor *c, store *st, long long run_id, const char *key, int from_step,
                              int to_step, size_t limit) {
    memset(c, 0, sizeof *c);
    c->st = st;
    c->run_id = run_id;
    size_t len = strlen(key);
    if (len > STORE_METRIC_KEY_MAX) len = STORE_METRIC_KEY_MAX; /* no stored key is longer */
    memcpy(c->key, key, len);
    c->key[len] = 0;
    c->from = from_step;
    c->to = to_step;
    c->limit = store_range_limit(limit);
}

int store_series_cursor_next(store_series_cursor *c) {
    free(c->pts);
    c->pts = NULL;
    c->n = 0;
    if (c->over || c->from >= c->to) return 0;
    if (store_metrics_range(c->st, c->run_id, c->key, c->from, c->to, c->limit, &c->pts, &c->n) != STORE_OK) {
        c->over = 1;
        return -1;
    }
    size_t seen = atomic_load(&peak);
    while (c->n > seen && !atomic_compare_exchange_weak(&peak, &seen, c->n)) {}
    int last = c->n ? c->pts[c->n - 1].step : 0;
    if (c->n < c->limit || last == INT_MAX)
        c->over = 1; /* a short range is the series' end */
    else
        c->from = last + 1;
    return c->n ? 1 : 0;
}

void store_series_cursor_done(store_series_cursor *c) {
    free(c->pts);
    c->pts = NULL;
    c->n = 0;
    c->over = 1;
}

size_t store_series_cursor_peak(void) { return atomic_load(&peak); }

size_t store_series_range_points(void) {
    static atomic_size_t chosen;
    size_t v = atomic_load(&chosen);
    if (v) return v;
    v = STORE_SERIES_RANGE_POINTS;
    const char *env = getenv("ATTNLAB_TEST_RANGE_POINTS");
    if (env && *env) {
        char *end;
        long long x = strtoll(env, &end, 10);
        if (!*end && x >= 1 && x <= STORE_METRICS_RANGE_MAX) v = (size_t)x;
    }
    atomic_store(&chosen, v);
    return v;
}
