/* Folding points into a series' summary (store_summary.h). */
#include "store/common/store_summary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/common/store_error.h"

void store_summary_init(store_summary *s) { *s = (store_summary){0}; }

void store_summary_add(store_summary *s, int step, double value, int flags) {
    if (s->count == 0) {
        s->min_value = s->max_value = value;
        s->min_step = step;
        s->sum = s->sum_err = 0.0; /* the aggregates start from 0.0: -0.0 + 0.0 is 0.0 */
    } else {
        int later = (flags & STORE_SUMMARY_TIES_LATER) != 0;
        if (value < s->min_value) s->min_step = step;
        if (value < s->min_value || (later && value == s->min_value)) s->min_value = value;
        if (value > s->max_value || (later && value == s->max_value)) s->max_value = value;
    }
    if (flags & STORE_SUMMARY_COMPENSATED) {
        /* SQLite's kahanBabuskaNeumaierStep, operation for operation. */
        volatile double sum = s->sum, t = sum + value;
        if (fabs(sum) > fabs(value))
            s->sum_err += (sum - t) + value;
        else
            s->sum_err += (value - t) + sum;
        s->sum = t;
    } else {
        s->sum += value;
    }
    s->count++;
    s->last_step = step;
    s->last_value = value;
}

double store_summary_mean(const store_summary *s, int flags) {
    double r = s->sum;
    if ((flags & STORE_SUMMARY_COMPENSATED) && isfinite(s->sum_err)) r += s->sum_err;
    return r / (double)s->count;
}

static int by_point(const void *a, const void *b, void *base) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const store_metric *p = (const store_metric *)base + i, *q = (const store_metric *)base + j;
    if (p->run_id != q->run_id) return p->run_id < q->run_id ? -1 : 1;
    int k = strcmp(p->key, q->key);
    if (k) return k;
    if (p->step != q->step) return p->step < q->step ? -1 : 1;
    return i < j ? -1 : i > j; /* the later of two equal points wins */
}

size_t store_metric_distinct(const store_metric *points, size_t n, size_t *idx) {
    size_t m = 0, u = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(points[i].value)) idx[m++] = i;
    qsort_r(idx, m, sizeof *idx, by_point, (void *)points);
    for (size_t i = 0; i < m; i++) {
        const store_metric *p = &points[idx[i]];
        if (i + 1 < m) {
            const store_metric *q = &points[idx[i + 1]];
            if (q->run_id == p->run_id && q->step == p->step && !strcmp(q->key, p->key)) continue;
        }
        idx[u++] = idx[i];
    }
    return u;
}

size_t *store_metric_distinct_new(const store_metric *points, size_t n, size_t *u) {
    *u = 0;
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    if (!idx) {
        store_fail("insert metrics: out of memory");
        return NULL;
    }
    *u = store_metric_distinct(points, n, idx);
    return idx;
}
