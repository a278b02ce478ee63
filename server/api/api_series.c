#include "api/api_series.h"

#include "util/csv.h"
#include "util/json_text.h"

#include <limits.h>
#include <stdint.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- downsampling: a series' points seen one at a time -------------------------------------- */

/* The picks of a series of n points cut into `buckets` buckets (see api_series.h): each bucket's
 * first lowest and first highest point, in index order, once if they are one. Points come in order
 * through down_add; down_end closes the last bucket. The same code serves a series held whole and
 * one read from the store a range at a time, so both give the same picks. */
typedef struct {
    size_t n, buckets, k, lo, hi, i, imin, imax;
    store_metric vmin, vmax;
    store_metric *out; /* up to 2 per bucket; keys not kept */
    size_t n_out;
} downsampler;

static void down_range(downsampler *d) {
    d->lo = d->k * d->n / d->buckets;
    d->hi = (d->k + 1) * d->n / d->buckets;
}

static int down_init(downsampler *d, size_t n, int max_points) {
    memset(d, 0, sizeof *d);
    d->n = n;
    d->buckets = (size_t)max_points / 2;
    if (d->buckets < 1) d->buckets = 1;
    d->out = malloc(2 * d->buckets * sizeof *d->out);
    down_range(d);
    return d->out ? 0 : -1;
}

static void down_flush(downsampler *d) {
    if (d->lo >= d->hi || d->i < d->hi) return; /* an empty bucket, or one not seen whole */
    const store_metric *first = d->imin < d->imax ? &d->vmin : &d->vmax,
                       *second = d->imin < d->imax ? &d->vmax : &d->vmin;
    d->out[d->n_out] = *first;
    d->out[d->n_out++].key = NULL;
    if (d->imin != d->imax) {
        d->out[d->n_out] = *second;
        d->out[d->n_out++].key = NULL;
    }
}

static void down_add(downsampler *d, const store_metric *p) {
    while (d->i >= d->hi && d->k + 1 < d->buckets) {
        down_flush(d);
        d->k++;
        down_range(d);
    }
    if (d->i == d->lo) {
        d->imin = d->imax = d->i;
        d->vmin = d->vmax = *p;
    } else {
        if (p->value < d->vmin.value) d->imin = d->i, d->vmin = *p;
        if (p->value > d->vmax.value) d->imax = d->i, d->vmax = *p;
    }
    d->i++;
}

static void down_end(downsampler *d) { down_flush(d); }

/* {"steps","values","wall_times","count"} of points p[0..n) as they are, count as given. */
static json_t *series_object(const store_metric *p, size_t n, size_t count) {
    json_t *steps = json_array(), *values = json_array(), *walls = json_array(), *o = json_object();
    int bad = !steps || !values || !walls || !o;
    for (size_t i = 0; i < n && !bad; i++) {
        bad |= json_array_append_new(steps, json_integer(p[i].step));
        bad |= json_array_append_new(values, json_real(p[i].value));
        bad |= json_array_append_new(walls, json_real(p[i].wall_time));
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
    bad |= json_object_set_new(o, "count", json_integer((json_int_t)count));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *api_series_one_json(const store_metric *p, size_t n, int max_points) {
    if (max_points <= 0 || n <= (size_t)max_points) return series_object(p, n, n);
    downsampler d;
    if (down_init(&d, n, max_points) < 0) return NULL;
    for (size_t i = 0; i < n; i++) down_add(&d, &p[i]);
    down_end(&d);
    json_t *o = series_object(d.out, d.n_out, n);
    free(d.out);
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

/* ---- one series read from the store a range at a time ------------------------------------- */

static char *dump_compact(const json_t *v) {
    return json_text_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
}

enum { PASS_STEPS, PASS_VALUES, PASS_WALLS };

struct api_series_reader {
    store *st;
    long long run_id;
    char key[STORE_METRIC_KEY_MAX + 1];
    int since, end;    /* every pass reads [since, end) */
    size_t count, cap; /* points from since on (once known); a pass stops after cap (SIZE_MAX: none) */
    int known, max_points;
    size_t limit, bound; /* bound: the summary's count, all the points there can be */
    int stage;           /* 0 not started, 1..3 the passes of a long series' arrays (1 + PASS_*), 4 done */
    store_series_cursor cur;
    size_t got;               /* points of the current pass so far */
    unsigned long long hash;  /* of the steps of the first pass, checked by the others */
    unsigned long long check; /* the same over the current pass */
    int last;                 /* the last step of the first pass */
    size_t emitted;           /* points the answer holds */
    int as_points;            /* a source of points (api_series_reader_points) rather than of text */
    downsampler d;
    int has_picks;
};

api_series_reader *api_series_reader_open(store *st, long long run_id, const char *key, int since_step, long long count,
                                          int last_step, int max_points) {
    api_series_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->st = st;
    r->run_id = run_id;
    snprintf(r->key, sizeof r->key, "%s", key);
    r->since = since_step;
    r->max_points = max_points;
    r->limit = store_series_range_points();
    /* Read from 0, the store's summary counts the points to read, and their last step bounds the
     * passes: later points (a run still training) are left to the next request, as the whole
     * series read at once would have. From a later step the count is not known up front. */
    r->bound = count > 0 ? (size_t)count : 0;
    r->known = since_step <= 0 && count > 0;
    r->count = r->known ? (size_t)count : 0;
    r->end = r->known && last_step < INT_MAX ? last_step + 1 : INT_MAX;
    r->cap = SIZE_MAX;
    r->last = since_step;
    return r;
}

void api_series_reader_close(api_series_reader *r) {
    if (!r) return;
    store_series_cursor_done(&r->cur);
    free(r->d.out);
    free(r);
}

size_t api_series_reader_emitted(const api_series_reader *r) { return r->emitted; }

static unsigned long long mix(unsigned long long h, int step) {
    h ^= (unsigned long long)(unsigned)step + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static void pass_start(api_series_reader *r) {
    store_series_cursor_init(&r->cur, r->st, r->run_id, r->key, r->since, r->end, r->limit);
    r->got = 0;
    r->check = 0;
}

/* The next range of the current pass, at most cap points in all: 1 with r->cur.pts[0..*n), 0 at
 * the pass's end, -1 when the store fails. */
static int pass_next(api_series_reader *r, size_t *n) {
    *n = 0;
    if (r->got >= r->cap) {
        store_series_cursor_done(&r->cur);
        return 0;
    }
    int got = store_series_cursor_next(&r->cur);
    if (got <= 0) return got;
    *n = r->cur.n;
    if (*n > r->cap - r->got) *n = r->cap - r->got;
    for (size_t i = 0; i < *n; i++) r->check = mix(r->check, r->cur.pts[i].step);
    r->got += *n;
    if (*n) r->last = r->cur.pts[*n - 1].step;
    return 1;
}

/* Counts the points from since on (their last step bounds the later passes): 0 when there are
 * none, -1 when the store fails. */
static int count_pass(api_series_reader *r) {
    r->cap = SIZE_MAX;
    pass_start(r);
    size_t n;
    int got;
    while ((got = pass_next(r, &n)) > 0) {}
    if (got < 0) return -1;
    r->known = 1;
    r->count = r->cap = r->got;
    r->end = r->got && r->last < INT_MAX ? r->last + 1 : r->end;
    return r->got ? 1 : 0;
}

/* Reads the series whole into the downsampler's picks: 0, -1 when the store fails, -2 when the
 * series does not hold r->count points (a summary that does not match the rows: count again). */
static int downsample_pass(api_series_reader *r) {
    free(r->d.out);
    if (down_init(&r->d, r->count, r->max_points) < 0) return -1;
    pass_start(r);
    r->cap = r->count + 1; /* one more tells a series longer than counted */
    size_t n;
    int got;
    while ((got = pass_next(r, &n)) > 0)
        for (size_t i = 0; i < n && r->d.i < r->count; i++) down_add(&r->d, &r->cur.pts[i]);
    store_series_cursor_done(&r->cur);
    if (got < 0) return -1;
    if (r->got != r->count) return -2;
    down_end(&r->d);
    r->has_picks = 1;
    r->emitted = r->d.n_out;
    return 0;
}

/* What the series needs before its first piece: 1 to go on, 0 when it has no point from since on,
 * -1 on failure. Downsampled answers have their picks; others have their first range read. */
static int series_begin(api_series_reader *r) {
    if (r->max_points > 0 && r->bound > (size_t)r->max_points) { /* it may be downsampled */
        for (int tries = 0;; tries++) {
            if (!r->known || tries) {
                int c = count_pass(r);
                if (c <= 0) return c;
            }
            if (r->count <= (size_t)r->max_points) break;
            int d = downsample_pass(r);
            if (d == 0) return 1;
            if (d == -1 || tries) return -1;
        }
    }
    r->cap = SIZE_MAX; /* every point up to the end step */
    pass_start(r);
    size_t n;
    return pass_next(r, &n);
}

int api_series_reader_points(api_series_reader *r, const store_metric **points, size_t *n) {
    *points = NULL;
    *n = 0;
    if (r->stage == 4) return 0;
    if (r->stage == 0) {
        r->as_points = 1;
        int b = series_begin(r);
        if (b <= 0) {
            r->stage = 4;
            return b;
        }
        r->stage = 1;
        if (r->has_picks) {
            r->stage = 4;
            *points = r->d.out;
            *n = r->d.n_out;
            return 1;
        }
        *points = r->cur.pts;
        *n = r->got;
        r->emitted += *n;
        return 1;
    }
    int got = pass_next(r, n);
    if (got <= 0) {
        r->stage = 4;
        return got;
    }
    *points = r->cur.pts;
    r->emitted += *n;
    return 1;
}

/* The text of points' steps, values or wall times as members of a JSON array (no brackets). */
static char *array_part(const store_metric *p, size_t n, int what) {
    json_t *a = json_array();
    int bad = !a;
    for (size_t i = 0; i < n && !bad; i++)
        bad |= json_array_append_new(a, what == PASS_STEPS    ? json_integer(p[i].step)
                                        : what == PASS_VALUES ? json_real(p[i].value)
                                                              : json_real(p[i].wall_time));
    char *t = bad ? NULL : dump_compact(a);
    json_decref(a);
    size_t len = t ? strlen(t) : 0;
    if (!t || len < 2) {
        free(t);
        return NULL;
    }
    memmove(t, t + 1, len - 2);
    t[len - 2] = 0;
    return t;
}

/* before + text (taken) into *out. */
static int joined(char **out, const char *before, char *text, const char *after) {
    if (!text) return -1;
    int rc = asprintf(out, "%s%s%s", before, text, after);
    free(text);
    if (rc < 0) *out = NULL;
    return rc < 0 ? -1 : 0;
}

int api_series_reader_next(api_series_reader *r, const char *before, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    if (r->stage == 4) return 0;
    static const char *const names[] = {"steps", "values", "wall_times"};
    if (r->stage == 0) {
        int b = series_begin(r);
        if (b <= 0) {
            r->stage = 4;
            return b;
        }
        json_t *k = json_string(r->key);
        char *kt = k ? dump_compact(k) : NULL, *head = NULL;
        json_decref(k);
        if (!kt || asprintf(&head, "%s%s:", before, kt) < 0) head = NULL;
        free(kt);
        if (!head) return -1;
        int whole = r->has_picks || r->cur.over || r->got >= r->cap;
        if (whole) { /* the series in one object, as api_series_one_json writes it */
            r->stage = 4;
            size_t count = r->has_picks ? r->count : r->got;
            json_t *o =
                r->has_picks ? series_object(r->d.out, r->d.n_out, count) : series_object(r->cur.pts, r->got, count);
            r->emitted = r->has_picks ? r->d.n_out : r->got;
            char *ot = o ? dump_compact(o) : NULL;
            json_decref(o);
            int rc = joined(text, head, ot, "");
            free(head);
            if (rc < 0) return -1;
            *len = strlen(*text);
            return 1;
        }
        /* A long series: its steps range by range, then its values and wall times the same way. */
        r->stage = 1 + PASS_STEPS;
        char *open = NULL;
        int rc = asprintf(&open, "%s{\"steps\":[", head);
        free(head);
        if (rc < 0 || joined(text, open, array_part(r->cur.pts, r->got, PASS_STEPS), "") < 0) {
            free(open);
            return -1;
        }
        free(open);
        *len = strlen(*text);
        return 1;
    }
    int what = r->stage - 1;
    size_t first = r->got;
    size_t n;
    int got = pass_next(r, &n);
    if (got < 0) return -1;
    if (got > 0)
        return joined(text, first ? "," : "", array_part(r->cur.pts, n, what), "") < 0 ? -1 : (*len = strlen(*text), 1);
    /* This pass is over. */
    if (what == PASS_STEPS) {
        r->count = r->cap = r->got;
        r->hash = r->check;
        r->end = r->last < INT_MAX ? r->last + 1 : INT_MAX;
        r->emitted = r->count;
    } else if (r->got != r->count || r->check != r->hash) {
        return -1; /* the series changed while it was read: the answer is cut rather than wrong */
    }
    if (what == PASS_WALLS) {
        r->stage = 4;
        if (asprintf(text, "],\"count\":%zu}", r->count) < 0) return *text = NULL, -1;
    } else {
        r->stage++;
        pass_start(r);
        if (asprintf(text, "],\"%s\":[", names[what + 1]) < 0) return *text = NULL, -1;
    }
    *len = strlen(*text);
    return 1;
}

/* ---- a run's CSV, its series merged by step -------------------------------------------------- */

/* One column: its key and its cursor's current range, pos the next point in it. */
typedef struct {
    store_series_cursor cur;
    size_t pos;
    int over;
} column;

struct api_series_csv {
    store *st;
    long long run_id;
    column *cols;
    int n_keys, header; /* header: written */
    char **keys;
    int failed;
};

void api_series_csv_close(api_series_csv *c) {
    if (!c) return;
    for (int k = 0; k < c->n_keys; k++) {
        if (c->cols) store_series_cursor_done(&c->cols[k].cur);
        free(c->keys[k]);
    }
    free(c->cols);
    free(c->keys);
    free(c);
}

api_series_csv *api_series_csv_open(store *st, long long run_id, const json_t *summary) {
    api_series_csv *c = calloc(1, sizeof *c);
    size_t nk = json_object_size(summary);
    if (!c) return NULL;
    c->st = st;
    c->run_id = run_id;
    c->cols = calloc(nk ? nk : 1, sizeof *c->cols);
    c->keys = calloc(nk ? nk : 1, sizeof *c->keys);
    if (!c->cols || !c->keys) {
        api_series_csv_close(c);
        return NULL;
    }
    /* The ranges of all columns together hold about one range of points. */
    size_t limit = store_series_range_points() / (nk ? nk : 1);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)summary, key, v) {
        json_int_t last = json_integer_value(json_object_get(v, "last_step"));
        if (!(c->keys[c->n_keys] = strdup(key))) {
            api_series_csv_close(c);
            return NULL;
        }
        store_series_cursor_init(&c->cols[c->n_keys].cur, st, run_id, key, 0, last < INT_MAX ? (int)last + 1 : INT_MAX,
                                 limit);
        c->cols[c->n_keys].over = 0;
        c->n_keys++;
    }
    return c;
}

/* Column k's next point (NULL at its end); -1 in *failed when the store fails. */
static const store_metric *column_head(api_series_csv *c, int k) {
    column *col = &c->cols[k];
    while (!col->over && col->pos >= col->cur.n) {
        int got = store_series_cursor_next(&col->cur);
        col->pos = 0;
        if (got < 0) c->failed = 1;
        if (got <= 0) col->over = 1;
    }
    return col->over ? NULL : &col->cur.pts[col->pos];
}

int api_series_csv_next(api_series_csv *c, size_t max, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    csv_buf t = {0};
    if (!c->header) {
        csv_cells(&t, "step,wall_time");
        for (int k = 0; k < c->n_keys; k++) csv_text(&t, c->keys[k]);
        csv_end_row(&t);
        c->header = 1;
    }
    while (t.len < max && !t.failed && !c->failed) { /* whole rows, one per step */
        int step = 0, any = 0, last_col = -1;
        for (int k = 0; k < c->n_keys; k++) {
            const store_metric *p = column_head(c, k);
            if (p && (!any || p->step < step)) step = p->step, any = 1;
        }
        if (!any || c->failed) break;
        for (int k = 0; k < c->n_keys; k++) {
            const store_metric *p = column_head(c, k);
            if (p && p->step == step) last_col = k;
        }
        csv_int(&t, step);
        csv_cellf(&t, "%.3f", column_head(c, last_col)->wall_time);
        for (int k = 0; k < c->n_keys; k++) {
            const store_metric *p = column_head(c, k);
            if (p && p->step == step) {
                csv_real(&t, p->value, 9);
                c->cols[k].pos++;
            } else {
                csv_empty(&t, 1);
            }
        }
        csv_end_row(&t);
    }
    if (c->failed) {
        csv_free(&t);
        return -1;
    }
    if (!t.len && !t.failed) {
        csv_free(&t);
        return 0;
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
