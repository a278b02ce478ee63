#include "api/api_series.h"

#include "util/csv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *api_series_one_json(const store_metric *p, size_t n, int max_points) {
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
        if (json_object_set_new(out, points[lo].key, api_series_one_json(points + lo, hi - lo, max_points)) < 0) {
            json_decref(out);
            return NULL;
        }
        lo = hi;
    }
    return out;
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

struct api_series_csv {
    store_metric *points; /* taken */
    cell *cells;          /* the points by step, then column */
    const char **keys;    /* the columns, pointing into points */
    size_t n, pos;        /* cells written so far */
    int n_keys, header;   /* header: written */
};

void api_series_csv_close(api_series_csv *c) {
    if (!c) return;
    free(c->points);
    free(c->cells);
    free(c->keys);
    free(c);
}

api_series_csv *api_series_csv_open(store_metric *points, size_t n) {
    api_series_csv *c = calloc(1, sizeof *c);
    if (!c) {
        free(points);
        return NULL;
    }
    c->points = points;
    c->n = n;
    /* Keys become columns in their sorted order (the points come grouped by key, sorted). */
    c->cells = malloc((n ? n : 1) * sizeof *c->cells);
    c->keys = malloc((n ? n : 1) * sizeof *c->keys);
    if (!c->cells || !c->keys) {
        api_series_csv_close(c);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(points[i].key, points[i - 1].key)) c->keys[c->n_keys++] = points[i].key;
        c->cells[i] = (cell){points[i].step, c->n_keys - 1, &points[i]};
    }
    qsort(c->cells, n, sizeof *c->cells, by_step_then_col);
    return c;
}

int api_series_csv_next(api_series_csv *c, size_t max, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    if (c->header && c->pos >= c->n) return 0;
    csv_buf t = {0};
    if (!c->header) {
        csv_cells(&t, "step,wall_time");
        for (int k = 0; k < c->n_keys; k++) csv_text(&t, c->keys[k]);
        csv_end_row(&t);
        c->header = 1;
    }
    const cell *cells = c->cells;
    while (c->pos < c->n && t.len < max && !t.failed) { /* whole rows, one per step */
        size_t lo = c->pos, hi = lo;
        while (hi < c->n && cells[hi].step == cells[lo].step) hi++;
        csv_int(&t, cells[lo].step);
        csv_cellf(&t, "%.3f", cells[hi - 1].p->wall_time);
        size_t k = lo;
        for (int col = 0; col < c->n_keys; col++) {
            if (k < hi && cells[k].col == col) {
                csv_real(&t, cells[k].p->value, 9);
                k++;
            } else {
                csv_empty(&t, 1);
            }
        }
        csv_end_row(&t);
        c->pos = hi;
    }
    *text = csv_take(&t, len);
    return *text ? 1 : -1;
}

/* ---- experiments ------------------------------------------------------------------------- */

static json_t *band_num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

json_t *api_band_json(const stats_band_point *p, size_t n, int max_points) {
    const char *names[6] = {"steps", "n", "mean", "std", "min", "max"};
    json_t *arr[6], *o = json_object();
    int bad = !o;
    for (int c = 0; c < 6; c++) bad |= !(arr[c] = json_array());
    size_t buckets = max_points > 0 && n > (size_t)max_points ? (size_t)max_points / 2 : n;
    if (buckets < 1) buckets = 1;
    for (size_t k = 0; k < buckets && !bad && n; k++) {
        size_t lo = k * n / buckets, hi = (k + 1) * n / buckets;
        if (lo >= hi) continue;
        /* The bucket's lowest and highest mean, in step order (NaN means lose to any number). */
        size_t imin = lo, imax = lo;
        for (size_t i = lo; i < hi; i++) {
            if (p[i].mean < p[imin].mean || (isnan(p[imin].mean) && !isnan(p[i].mean))) imin = i;
            if (p[i].mean > p[imax].mean || (isnan(p[imax].mean) && !isnan(p[i].mean))) imax = i;
        }
        size_t pick[2] = {imin < imax ? imin : imax, imin < imax ? imax : imin};
        size_t pick_n = hi - lo == 1 || pick[0] == pick[1] ? 1 : 2;
        for (size_t j = 0; j < pick_n && !bad; j++) {
            const stats_band_point *b = &p[pick[j]];
            bad |= json_array_append_new(arr[0], json_integer(b->step));
            bad |= json_array_append_new(arr[1], json_integer((json_int_t)b->n));
            bad |= json_array_append_new(arr[2], band_num(b->mean));
            bad |= json_array_append_new(arr[3], band_num(b->std));
            bad |= json_array_append_new(arr[4], band_num(b->min));
            bad |= json_array_append_new(arr[5], band_num(b->max));
        }
    }
    for (int c = 0; c < 6; c++) {
        if (bad)
            json_decref(arr[c]);
        else
            bad |= json_object_set_new(o, names[c], arr[c]) < 0; /* takes arr[c] either way */
    }
    if (bad || json_object_set_new(o, "count", json_integer((json_int_t)n)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The cells after "replicate,run_id,value": n,mean,std,ci_lo,ci_hi,t,p,p_holm,boot_lo,boot_hi,reason,
 * ci_method (a paired row's ci is the t interval); figures in %.10g, empty where they do not exist. */
static void csv_figures(csv_buf *t, const json_t *o, const char *mean_key) {
    csv_number(t, json_object_get(o, "n"), 10);
    csv_number(t, json_object_get(o, mean_key), 10);
    csv_number(t, json_object_get(o, "std"), 10);
    csv_number(t, json_array_get(json_object_get(o, "ci"), 0), 10);
    csv_number(t, json_array_get(json_object_get(o, "ci"), 1), 10);
    csv_number(t, json_object_get(o, "t"), 10);
    csv_number(t, json_object_get(o, "p"), 10);
    csv_number(t, json_object_get(o, "p_holm"), 10);
    csv_number(t, json_array_get(json_object_get(o, "bootstrap_ci"), 0), 10);
    csv_number(t, json_array_get(json_object_get(o, "bootstrap_ci"), 1), 10);
    csv_text(t, json_string_value(json_object_get(o, "reason")));
    const char *method = json_string_value(json_object_get(o, "ci_method"));
    csv_text(t, method ? method : "t");
    csv_end_row(t);
}

int api_stats_csv(const json_t *stats, char **csv, size_t *len) {
    csv_buf t = {0};
    csv_cells(&t, "kind,metric,variant,variant_b,replicate,run_id,value,n,mean,std,ci_lo,ci_hi,t,p,p_holm,boot_lo,"
                  "boot_hi,reason,ci_method");
    csv_end_row(&t);
    size_t i, k;
    json_t *v, *val;
    const char *metric;
    json_t *summary;
    json_array_foreach(json_object_get(stats, "variants"), i, v) {
        const char *vname = json_string_value(json_object_get(v, "name"));
        json_object_foreach(json_object_get(v, "metrics"), metric, summary) {
            json_array_foreach(json_object_get(summary, "values"), k, val) {
                csv_cells(&t, "value");
                csv_text(&t, metric);
                csv_text(&t, vname);
                csv_empty(&t, 1); /* variant_b */
                csv_number(&t, json_object_get(val, "replicate"), 10);
                csv_number(&t, json_object_get(val, "run_id"), 10);
                csv_number(&t, json_object_get(val, "value"), 10);
                csv_empty(&t, 12); /* the 12 cells of a summary row */
                csv_end_row(&t);
            }
            csv_cells(&t, "summary");
            csv_text(&t, metric);
            csv_text(&t, vname);
            csv_empty(&t, 4); /* variant_b, replicate, run_id, value */
            csv_figures(&t, summary, "mean");
        }
    }
    json_array_foreach(json_object_get(stats, "comparisons"), i, v) {
        csv_cells(&t, "paired");
        csv_text(&t, json_string_value(json_object_get(v, "metric")));
        csv_text(&t, json_string_value(json_object_get(v, "a")));
        csv_text(&t, json_string_value(json_object_get(v, "b")));
        csv_empty(&t, 3); /* replicate, run_id, value */
        csv_figures(&t, v, "mean_diff");
    }
    *csv = csv_take(&t, len);
    return *csv ? 0 : -1;
}
