/* Folding points into a series' summary (store_summary.h). */
#include "store_summary.h"

#include <math.h>
#include <sqlite3.h>

int store_summary_sqlite_flags(void) { return sqlite3_libversion_number() >= 3043000 ? STORE_SUMMARY_COMPENSATED : 0; }

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
