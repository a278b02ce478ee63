#include "api_series.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One series: the n points share a key and are in step order. */
static json_t *series_json(const store_metric *p, size_t n, int max_points) {
    json_t *steps = json_array(), *values = json_array(), *walls = json_array(), *o = json_object();
    int bad = !steps || !values || !walls || !o;
    if (!bad && (max_points <= 0 || n <= (size_t)max_points)) {
        for (size_t i = 0; i < n && !bad; i++) {
            bad |= json_array_append_new(steps, json_integer(p[i].step));
            bad |= json_array_append_new(values, json_real(p[i].value));
            bad |= json_array_append_new(walls, json_real(p[i].wall_time));
        }
    } else if (!bad) {
        size_t buckets = (size_t)max_points / 2;
        if (buckets < 1) buckets = 1;
        for (size_t k = 0; k < buckets && !bad; k++) {
            size_t lo = k * n / buckets, hi = (k + 1) * n / buckets;
            if (lo >= hi) continue;
            size_t imin = lo, imax = lo;
            for (size_t i = lo; i < hi; i++) {
                if (p[i].value < p[imin].value) imin = i;
                if (p[i].value > p[imax].value) imax = i;
            }
            size_t pick[2] = {imin < imax ? imin : imax, imin < imax ? imax : imin};
            size_t pick_n = pick[0] == pick[1] ? 1 : 2;
            for (size_t j = 0; j < pick_n && !bad; j++) {
                bad |= json_array_append_new(steps, json_integer(p[pick[j]].step));
                bad |= json_array_append_new(values, json_real(p[pick[j]].value));
                bad |= json_array_append_new(walls, json_real(p[pick[j]].wall_time));
            }
        }
    }
    if (bad || json_object_set_new(o, "steps", steps) < 0) {
        json_decref(steps);
        json_decref(values);
        json_decref(walls);
        json_decref(o);
        return NULL;
    }
    bad |= json_object_set_new(o, "values", values);
    bad |= json_object_set_new(o, "wall_times", walls);
    bad |= json_object_set_new(o, "count", json_integer((json_int_t)n));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *api_series_json(const store_metric *points, size_t n, int max_points) {
    json_t *out = json_object();
    if (!out) return NULL;
    for (size_t lo = 0; lo < n;) {
        size_t hi = lo + 1;
        while (hi < n && !strcmp(points[hi].key, points[lo].key)) hi++;
        if (json_object_set_new(out, points[lo].key, series_json(points + lo, hi - lo, max_points)) < 0) {
            json_decref(out);
            return NULL;
        }
        lo = hi;
    }
    return out;
}

typedef struct {
    char *data;
    size_t len, cap;
    int failed;
} text_buf;

static void text_add(text_buf *t, const char *s, size_t n) {
    if (t->failed) return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + n + 1) cap *= 2;
        char *g = realloc(t->data, cap);
        if (!g) {
            t->failed = 1;
            return;
        }
        t->data = g;
        t->cap = cap;
    }
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = 0;
}

static void text_printf(text_buf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_printf(text_buf *t, const char *fmt, ...) {
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) text_add(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* A point's place in the CSV: its row (step) and column (key index). */
typedef struct {
    int step;
    int col;
    const store_metric *p;
} cell;

static int by_step_then_col(const void *a, const void *b) {
    const cell *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return (x->col > y->col) - (x->col < y->col);
}

int api_series_csv(const store_metric *points, size_t n, char **csv, size_t *len) {
    *csv = NULL;
    *len = 0;
    text_buf t = {0};
    /* Keys become columns in their sorted order (the points come grouped by key, sorted). */
    cell *cells = malloc((n ? n : 1) * sizeof *cells);
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    int n_keys = 0;
    if (!cells || !keys) {
        free(cells);
        free(keys);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(points[i].key, points[i - 1].key)) keys[n_keys++] = points[i].key;
        cells[i] = (cell){points[i].step, n_keys - 1, &points[i]};
    }
    qsort(cells, n, sizeof *cells, by_step_then_col);
    text_add(&t, "step,wall_time", 14);
    for (int k = 0; k < n_keys; k++) {
        text_add(&t, ",", 1);
        text_add(&t, keys[k], strlen(keys[k]));
    }
    text_add(&t, "\n", 1);
    for (size_t lo = 0; lo < n;) {
        size_t hi = lo;
        while (hi < n && cells[hi].step == cells[lo].step) hi++;
        text_printf(&t, "%d,%.3f", cells[lo].step, cells[hi - 1].p->wall_time);
        size_t c = lo;
        for (int k = 0; k < n_keys; k++) {
            if (c < hi && cells[c].col == k) {
                text_printf(&t, ",%.9g", cells[c].p->value);
                c++;
            } else {
                text_add(&t, ",", 1);
            }
        }
        text_add(&t, "\n", 1);
        lo = hi;
    }
    free(cells);
    free(keys);
    if (t.failed) {
        free(t.data);
        return -1;
    }
    *csv = t.data;
    *len = t.len;
    return 0;
}
