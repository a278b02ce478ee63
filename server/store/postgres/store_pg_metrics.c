/* Metric points on PostgreSQL: every SQL statement about the metrics table (store_metrics.c's twin). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/common/store_summary.h"
#include "store/postgres/store_pg.h"
#include "util/log.h"

/* Points per INSERT statement (one transaction holds them all). */
#define CHUNK 8192

typedef struct {
    char *buf;
    size_t len, cap;
    int failed;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1) cap *= 2;
        char *g = realloc(b->buf, cap);
        if (!g) {
            b->failed = 1;
            return;
        }
        b->buf = g;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
}

static void sb_str(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_num(strbuf *b, double v) {
    char t[40];
    int n = isnan(v)   ? snprintf(t, sizeof t, "NaN")
            : isinf(v) ? snprintf(t, sizeof t, "%sInfinity", v < 0 ? "-" : "")
                       : snprintf(t, sizeof t, "%.17g", v);
    sb_add(b, t, (size_t)n);
}

static void sb_int(strbuf *b, long long v) {
    char t[32];
    int n = snprintf(t, sizeof t, "%lld", v);
    sb_add(b, t, (size_t)n);
}

/* Keys are [a-z0-9._] in practice; quoted anyway. */
static void sb_quoted(strbuf *b, const char *s, size_t max) {
    sb_add(b, "\"", 1);
    for (size_t i = 0; i < max && s[i]; i++) {
        if (s[i] == '"' || s[i] == '\\') sb_add(b, "\\", 1);
        sb_add(b, s + i, 1);
    }
    sb_add(b, "\"", 1);
}

/* Columns of PostgreSQL array literals built side by side, a row at a time, to be sent as the
 * statement's parameters and read back with unnest: cols_open, then for each row cols_row and one
 * sb_* per column (col[j]), then cols_close; cols_free in every case. */
#define MAX_COLS 10
typedef struct {
    strbuf col[MAX_COLS];
    int n;
    size_t rows;
} pg_cols;

static void cols_open(pg_cols *x, int n) {
    memset(x, 0, sizeof *x);
    x->n = n;
    for (int j = 0; j < n; j++) sb_str(&x->col[j], "{");
}

static void cols_row(pg_cols *x) {
    if (x->rows++)
        for (int j = 0; j < x->n; j++) sb_str(&x->col[j], ",");
}

/* STORE_OK, or STORE_ERROR (recorded) when a column ran out of memory. */
static store_status cols_close(pg_cols *x) {
    int failed = 0;
    for (int j = 0; j < x->n; j++) {
        sb_str(&x->col[j], "}");
        failed |= x->col[j].failed;
    }
    return failed ? spg_fail_msg("insert metrics: out of memory") : STORE_OK;
}

/* The columns as parameters $first.. of p (p keeps pointers into them: free after the statement). */
static void cols_params(const pg_cols *x, pg_params *p) {
    for (int j = 0; j < x->n; j++) pg_p_text(p, x->col[j].buf);
}

static void cols_free(pg_cols *x) {
    for (int j = 0; j < x->n; j++) free(x->col[j].buf);
}

/* ---- series summaries (metric_summaries, migration 0008; the rule: store_summary.h) ---------- */

/* PostgreSQL's min()/max() keep the later of equal values; its avg() adds plainly. */
#define PG_SUMMARY_FLAGS STORE_SUMMARY_TIES_LATER
/* The two-key advisory lock class under which a run's summaries are read and written. */
#define SUMMARY_LOCK_CLASS 0x4d53554d
#define KEY_MAX STORE_METRIC_KEY_MAX
#define SUMMARY_COLUMNS STORE_SUMMARY_COLUMNS

/* One series of a batch: its points idx[from .. from + n), sorted by step. */
typedef struct {
    long long run;
    const char *key; /* its points' key (at most KEY_MAX bytes) */
    size_t from, n;
    store_summary sum;
    int recompute, changed;
} pg_series;

/* The series of (run, key), or NULL; ser is sorted by run, then key as strncmp orders them. */
static pg_series *series_find(pg_series *ser, size_t n, long long run, const char *key) {
    if (!key) return NULL;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = run != ser[mid].run ? (run < ser[mid].run ? -1 : 1) : strncmp(key, ser[mid].key, KEY_MAX);
        if (!c) return &ser[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

static void summary_from_row(const pg_res *r, int row, int col, store_summary *sum) {
    store_row x = spg_row(r, row);
    store_summary_from_row(&x, col, sum);
}

/* The series' runs and keys as two columns (only those with want[i] set; all when want is NULL). */
static void series_cols(const pg_series *ser, size_t n, const int *want, pg_cols *x) {
    cols_open(x, 2);
    for (size_t i = 0; i < n; i++) {
        if (want && !want[i]) continue;
        cols_row(x);
        sb_int(&x->col[0], ser[i].run);
        sb_quoted(&x->col[1], ser[i].key, KEY_MAX);
    }
}

/* The batch's series (idx: the points let in, sorted and one per step), in *ser_out. */
static store_status series_of_batch(const store_metric *points, const size_t *idx, size_t u, pg_series **ser_out,
                                    size_t *n_out) {
    *ser_out = NULL;
    *n_out = 0;
    size_t n_ser = 0;
    for (size_t i = 0; i < u; i++)
        if (i == 0 || points[idx[i]].run_id != points[idx[i - 1]].run_id ||
            strncmp(points[idx[i]].key, points[idx[i - 1]].key, KEY_MAX))
            n_ser++;
    if (n_ser == 0) return STORE_OK;
    pg_series *ser = calloc(n_ser, sizeof *ser);
    if (!ser) return spg_fail_msg("insert metrics: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < u; i++) {
        const store_metric *p = &points[idx[i]];
        if (k == 0 || p->run_id != ser[k - 1].run || strncmp(p->key, ser[k - 1].key, KEY_MAX))
            ser[k++] = (pg_series){.run = p->run_id, .key = p->key, .from = i};
        ser[k - 1].n++;
    }
    *ser_out = ser;
    *n_out = n_ser;
    return STORE_OK;
}

/* The series' runs' summaries locked for this transaction (an advisory lock per run, taken in run
 * order), and their summary rows read into ser. */
static store_status summaries_lock_and_read(pg_conn *c, pg_series *ser, size_t n_ser) {
    pg_cols runs, all;
    cols_open(&runs, 1);
    for (size_t i = 0; i < n_ser; i++)
        if (i == 0 || ser[i].run != ser[i - 1].run) {
            cols_row(&runs);
            sb_int(&runs.col[0], ser[i].run);
        }
    series_cols(ser, n_ser, NULL, &all);
    store_status s = cols_close(&runs);
    if (s == STORE_OK) s = cols_close(&all);
    if (s == STORE_OK) {
        pg_params p;
        pg_params_init(&p);
        cols_params(&runs, &p);
        pg_p_int(&p, SUMMARY_LOCK_CLASS);
        s = spg_fail(c, pg_cmd(c, "lock metric summaries",
                               "SELECT pg_advisory_xact_lock($2::int, (t.x & 2147483647)::int) FROM "
                               "(SELECT DISTINCT x FROM unnest($1::bigint[]) AS x ORDER BY x) t",
                               &p, NULL));
    }
    pg_res *r = NULL;
    if (s == STORE_OK) {
        pg_params p;
        pg_params_init(&p);
        cols_params(&all, &p);
        s = spg_fail(c, pg_exec(c, "read metric summaries",
                                "SELECT s.run_id, s.key, s.count, s.last_step, s.last_value, s.min_value, s.min_step, "
                                "s.max_value, s.sum, s.sum_err FROM metric_summaries s JOIN unnest($1::bigint[], "
                                "$2::text[]) AS u(run_id, key) ON s.run_id = u.run_id AND s.key = u.key",
                                &p, &r));
    }
    for (int i = 0; s == STORE_OK && i < pg_nrows(r); i++) {
        pg_series *x = series_find(ser, n_ser, pg_get_i64(r, i, 0), pg_get_text(r, i, 1));
        if (x) summary_from_row(r, i, 2, &x->sum);
    }
    pg_clear(r);
    cols_free(&runs);
    cols_free(&all);
    return s;
}

/* How many of a series' points (sorted by step) lie at or before the last step its summary has
 * seen: those a rewrite may change. */
static size_t rewrites_of(const pg_series *x, const store_metric *points, const size_t *idx) {
    size_t j = 0;
    while (x->sum.count > 0 && j < x->n && points[idx[x->from + j]].step <= x->sum.last_step) j++;
    return j;
}

/* The points at or before their series' last step: is each stored with this value already? A
 * series with one that is not (a rewritten step with another value, a step arriving late) is
 * marked for a recomputation from its rows (summaries_write, once the points are in). */
static store_status mark_rewrites(pg_conn *c, const store_metric *points, const size_t *idx, pg_series *ser,
                                  size_t n_ser) {
    pg_cols cand;
    cols_open(&cand, 3);
    for (size_t i = 0; i < n_ser; i++)
        for (size_t j = 0, k = rewrites_of(&ser[i], points, idx); j < k; j++) {
            const store_metric *p = &points[idx[ser[i].from + j]];
            cols_row(&cand);
            sb_int(&cand.col[0], p->run_id);
            sb_quoted(&cand.col[1], p->key, KEY_MAX);
            sb_int(&cand.col[2], p->step);
        }
    store_status s = cols_close(&cand);
    pg_res *r = NULL;
    if (s == STORE_OK && cand.rows) {
        pg_params p;
        pg_params_init(&p);
        cols_params(&cand, &p);
        s = spg_fail(c, pg_exec(c, "read rewritten metrics",
                                "SELECT m.value FROM unnest($1::bigint[], $2::text[], $3::int[]) WITH ORDINALITY "
                                "AS u(run_id, key, step, i) LEFT JOIN metrics m ON m.run_id = u.run_id AND "
                                "m.key = u.key AND m.step = u.step ORDER BY u.i",
                                &p, &r));
        if (s == STORE_OK && (size_t)pg_nrows(r) != cand.rows)
            s = spg_fail_msg("read rewritten metrics: a row is missing");
        int row = 0;
        for (size_t i = 0; s == STORE_OK && i < n_ser; i++)
            for (size_t j = 0, k = rewrites_of(&ser[i], points, idx); j < k; j++, row++) {
                const store_metric *pt = &points[idx[ser[i].from + j]];
                double old = pg_get_double(r, row, 0);
                if (pg_get_isnull(r, row, 0) || memcmp(&old, &pt->value, sizeof old)) ser[i].recompute = 1;
            }
    }
    pg_clear(r);
    cols_free(&cand);
    return s;
}

/* Before the batch's points are written, in its transaction (idx: the points let in, sorted and one
 * per step): *ser_out, the batch's series, with their summaries read (locked) and their points
 * folded in: those after the series' last step. A point at or before it that stores the value
 * already there (bit for bit: a bit-identical resume) changes nothing; any other marks the series
 * for a recomputation (mark_rewrites). */
static store_status summaries_read(pg_conn *c, const store_metric *points, const size_t *idx, size_t u,
                                   pg_series **ser_out, size_t *n_out) {
    store_status s = series_of_batch(points, idx, u, ser_out, n_out);
    pg_series *ser = *ser_out;
    size_t n_ser = *n_out;
    if (s != STORE_OK || n_ser == 0) return s;
    s = summaries_lock_and_read(c, ser, n_ser);
    if (s == STORE_OK) s = mark_rewrites(c, points, idx, ser, n_ser);
    for (size_t i = 0; s == STORE_OK && i < n_ser; i++) {
        if (ser[i].recompute) continue;
        for (size_t j = 0; j < ser[i].n; j++) {
            const store_metric *p = &points[idx[ser[i].from + j]];
            if (ser[i].sum.count > 0 && p->step <= ser[i].sum.last_step) continue; /* stored as it is */
            store_summary_add(&ser[i].sum, p->step, p->value, PG_SUMMARY_FLAGS);
            ser[i].changed = 1;
        }
    }
    return s;
}

/* The series marked for it, their summaries recomputed from their rows (in step order). */
static store_status summaries_recompute(pg_conn *c, pg_series *ser, size_t n_ser) {
    int *want = calloc(n_ser, sizeof *want);
    if (!want) return spg_fail_msg("insert metrics: out of memory");
    for (size_t i = 0; i < n_ser; i++)
        if (ser[i].recompute) {
            want[i] = 1;
            store_summary_init(&ser[i].sum);
        }
    pg_cols x;
    series_cols(ser, n_ser, want, &x);
    free(want);
    store_status s = cols_close(&x);
    if (s == STORE_OK && x.rows) {
        pg_params p;
        pg_params_init(&p);
        cols_params(&x, &p);
        pg_res *r = NULL;
        s = spg_fail(c, pg_exec(c, "recompute metric summaries",
                                "SELECT m.run_id, m.key, m.step, m.value FROM metrics m JOIN unnest($1::bigint[], "
                                "$2::text[]) AS u(run_id, key) ON m.run_id = u.run_id AND m.key = u.key "
                                "ORDER BY m.run_id, m.key COLLATE \"C\", m.step",
                                &p, &r));
        for (int i = 0; s == STORE_OK && i < pg_nrows(r); i++) {
            pg_series *y = series_find(ser, n_ser, pg_get_i64(r, i, 0), pg_get_text(r, i, 1));
            if (y && y->recompute)
                store_summary_add(&y->sum, pg_get_int(r, i, 2), pg_get_double(r, i, 3), PG_SUMMARY_FLAGS);
        }
        pg_clear(r);
    }
    cols_free(&x);
    return s;
}

/* After the batch's points are written: the series marked are recomputed, and every changed
 * summary is written (the run's, when it still exists). */
static store_status summaries_write(pg_conn *c, pg_series *ser, size_t n_ser) {
    if (n_ser == 0) return STORE_OK;
    store_status s = summaries_recompute(c, ser, n_ser);
    if (s != STORE_OK) return s;
    pg_cols a;
    cols_open(&a, 10);
    for (size_t i = 0; i < n_ser; i++) {
        const store_summary *m = &ser[i].sum;
        if (!(ser[i].changed || ser[i].recompute) || m->count == 0) continue;
        cols_row(&a);
        sb_int(&a.col[0], ser[i].run);
        sb_quoted(&a.col[1], ser[i].key, KEY_MAX);
        sb_int(&a.col[2], m->count);
        sb_int(&a.col[3], m->last_step);
        sb_num(&a.col[4], m->last_value);
        sb_num(&a.col[5], m->min_value);
        sb_int(&a.col[6], m->min_step);
        sb_num(&a.col[7], m->max_value);
        sb_num(&a.col[8], m->sum);
        sb_num(&a.col[9], m->sum_err);
    }
    s = cols_close(&a);
    if (s == STORE_OK && a.rows) {
        pg_params p;
        pg_params_init(&p);
        cols_params(&a, &p);
        s = spg_fail(c, pg_cmd(c, "write metric summaries",
                               "INSERT INTO metric_summaries (run_id, key, " SUMMARY_COLUMNS ") "
                               "SELECT u.* FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::int[], "
                               "$5::float8[], $6::float8[], $7::int[], $8::float8[], $9::float8[], $10::float8[]) "
                               "AS u(run_id, key, count, last_step, last_value, min_value, min_step, max_value, sum, "
                               "sum_err) WHERE EXISTS (SELECT 1 FROM runs r WHERE r.id = u.run_id) "
                               "ON CONFLICT (run_id, key) DO UPDATE SET count = EXCLUDED.count, "
                               "last_step = EXCLUDED.last_step, last_value = EXCLUDED.last_value, "
                               "min_value = EXCLUDED.min_value, min_step = EXCLUDED.min_step, "
                               "max_value = EXCLUDED.max_value, sum = EXCLUDED.sum, sum_err = EXCLUDED.sum_err",
                               &p, NULL));
    }
    cols_free(&a);
    return s;
}

/* ---- the batch ------------------------------------------------------------------------------- */

/* A run of the batch, with the steps and wall times its points cover and whether they may land. */
typedef struct {
    long long run, token;
    int from, to, allowed;
    double w0, w1; /* the points' wall times: a batch's window (the next batch's are later) */
} run_span;

/* The runs of the points idx[0..u) (sorted by run) into *out (n_runs of them); NULL when out of
 * memory (recorded). */
static run_span *batch_runs(store *st, const store_metric *points, const size_t *idx, size_t u, size_t *n_runs) {
    *n_runs = 0;
    for (size_t i = 0; i < u; i++)
        if (i == 0 || points[idx[i]].run_id != points[idx[i - 1]].run_id) (*n_runs)++;
    run_span *runs = calloc(*n_runs ? *n_runs : 1, sizeof *runs);
    if (!runs) {
        spg_fail_msg("insert metrics: out of memory");
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < u; i++) {
        const store_metric *p = &points[idx[i]];
        if (i == 0 || p->run_id != points[idx[i - 1]].run_id) {
            runs[k].run = p->run_id;
            runs[k].token = spg_held_token(st, p->run_id);
            runs[k].from = runs[k].to = p->step;
            runs[k].w0 = runs[k].w1 = p->wall_time;
            runs[k].allowed = 1;
            k++;
        }
        run_span *r = &runs[k - 1];
        if (p->step < r->from) r->from = p->step;
        if (p->step > r->to) r->to = p->step;
        if (p->wall_time < r->w0) r->w0 = p->wall_time;
        if (p->wall_time > r->w1) r->w1 = p->wall_time;
    }
    return runs;
}

/* Runs held here keep a share lock on their row until the commit: the lease cannot pass to another
 * node between the check and the write. A run whose lease is gone is not allowed: its points are
 * left out, like those of a run deleted meanwhile. */
static store_status fence_runs(pg_conn *c, run_span *runs, size_t n_runs) {
    pg_cols held;
    cols_open(&held, 2);
    for (size_t i = 0; i < n_runs; i++)
        if (runs[i].token) {
            cols_row(&held);
            sb_int(&held.col[0], runs[i].run);
            sb_int(&held.col[1], runs[i].token);
            runs[i].allowed = 0;
        }
    store_status s = cols_close(&held);
    if (s == STORE_OK && held.rows) {
        pg_params p;
        pg_params_init(&p);
        cols_params(&held, &p);
        pg_res *r = NULL;
        s = spg_fail(c, pg_exec(c, "fence metrics",
                                "SELECT r.id FROM runs r JOIN unnest($1::bigint[], $2::bigint[]) AS f(run, tok) "
                                "ON r.id = f.run AND r.lease_token = f.tok FOR SHARE OF r",
                                &p, &r));
        for (int i = 0; s == STORE_OK && i < pg_nrows(r); i++)
            for (size_t j = 0; j < n_runs; j++)
                if (runs[j].run == pg_get_i64(r, i, 0)) runs[j].allowed = 1;
        pg_clear(r);
        for (size_t j = 0; s == STORE_OK && j < n_runs; j++)
            if (!runs[j].allowed)
                log_warn("store: run %lld: metric points left out: this node no longer holds its lease", runs[j].run);
    }
    cols_free(&held);
    return s;
}

/* The points idx[0..u), CHUNK to a statement (those of a run deleted meanwhile are skipped). */
static store_status insert_points(pg_conn *c, const store_metric *points, const size_t *idx, size_t u) {
    store_status s = STORE_OK;
    for (size_t done = 0; s == STORE_OK && done < u;) {
        pg_cols a;
        cols_open(&a, 5);
        for (size_t in_chunk = 0; done < u && in_chunk < CHUNK; done++, in_chunk++) {
            const store_metric *p = &points[idx[done]];
            cols_row(&a);
            sb_int(&a.col[0], p->run_id);
            sb_quoted(&a.col[1], p->key, KEY_MAX);
            sb_int(&a.col[2], p->step);
            sb_num(&a.col[3], p->value);
            sb_num(&a.col[4], p->wall_time);
        }
        s = cols_close(&a);
        if (s == STORE_OK) {
            pg_params p;
            pg_params_init(&p);
            cols_params(&a, &p);
            s = spg_fail(c, pg_cmd(c, "insert metrics",
                                   "INSERT INTO metrics (run_id, key, step, value, wall_time) "
                                   "SELECT u.run_id, u.key, u.step, u.value, u.wall_time FROM unnest($1::bigint[], "
                                   "$2::text[], $3::int[], $4::float8[], $5::float8[]) AS u(run_id, key, step, value, "
                                   "wall_time) WHERE EXISTS (SELECT 1 FROM runs r WHERE r.id = u.run_id) "
                                   "ON CONFLICT (run_id, key, step) DO UPDATE SET value = EXCLUDED.value, "
                                   "wall_time = EXCLUDED.wall_time",
                                   &p, NULL));
        }
        cols_free(&a);
    }
    return s;
}

/* Other nodes' viewers hear which steps of which runs are now stored (inside the transaction:
 * delivered on commit). */
static store_status notify_runs(store *st, pg_conn *c, const run_span *runs, size_t n_runs) {
    json_t *node = json_string(spg_node(st));
    char *node_text = node ? json_dumps(node, JSON_ENCODE_ANY) : NULL;
    json_decref(node);
    if (!node_text) return spg_fail_msg("insert metrics: out of memory");
    pg_cols notes;
    cols_open(&notes, 1);
    for (size_t i = 0; i < n_runs; i++) {
        if (!runs[i].allowed) continue;
        char note[256];
        snprintf(note, sizeof note,
                 "{\"t\":\"m\",\"run\":%lld,\"from\":%d,\"to\":%d,\"w0\":%.17g,\"w1\":%.17g,\"node\":", runs[i].run,
                 runs[i].from, runs[i].to, runs[i].w0, runs[i].w1);
        strbuf one = {0};
        sb_str(&one, note);
        sb_str(&one, node_text);
        sb_str(&one, "}");
        cols_row(&notes);
        if (one.failed)
            notes.col[0].failed = 1;
        else
            sb_quoted(&notes.col[0], one.buf, one.len);
        free(one.buf);
    }
    free(node_text);
    store_status s = cols_close(&notes);
    if (s == STORE_OK && notes.rows) {
        pg_params p;
        pg_params_init(&p);
        cols_params(&notes, &p);
        s = spg_fail(c, pg_cmd(c, "notify metrics", "SELECT pg_notify('attnlab_events', x) FROM unnest($1::text[]) x",
                               &p, NULL));
    }
    cols_free(&notes);
    return s;
}

store_status store_pg_metrics_insert(store *st, const store_metric *points, size_t n) {
    if (n == 0) return STORE_OK;
    /* One point per (run, key, step) (ON CONFLICT may not touch a row twice), in series and step
     * order, NaN left out, as with SQLite (store_metric_distinct). */
    size_t u = 0, n_runs = 0;
    size_t *idx = store_metric_distinct_new(points, n, &u);
    run_span *runs = idx ? batch_runs(st, points, idx, u, &n_runs) : NULL;
    pg_conn *c = runs ? spg_get(st) : NULL;
    if (!c) {
        free(idx);
        free(runs);
        return STORE_ERROR;
    }
    store_status s = spg_fail(c, pg_begin(c));
    if (s == STORE_OK) s = fence_runs(c, runs, n_runs);
    /* Only the points let in from here on. */
    size_t allowed = 0;
    for (size_t i = 0, at = 0; i < u; i++) {
        while (runs[at].run != points[idx[i]].run_id) at++;
        if (runs[at].allowed) idx[allowed++] = idx[i];
    }
    pg_series *ser = NULL;
    size_t n_ser = 0;
    if (s == STORE_OK) s = summaries_read(c, points, idx, allowed, &ser, &n_ser);
    if (s == STORE_OK) s = insert_points(c, points, idx, allowed);
    if (s == STORE_OK) s = summaries_write(c, ser, n_ser);
    if (s == STORE_OK) s = notify_runs(st, c, runs, n_runs);
    free(ser);
    s = spg_fail(c, pg_finish(c, s));
    spg_put(st, c);
    free(idx);
    free(runs);
    return s;
}

/* The points of a statement's rows (key, step, value, wall_time) matching keys, on a connection of
 * the pool for the statement only. */
static store_status points_of(store *st, const char *what, const char *sql, const pg_params *p, long long run_id,
                              const char *keys, store_metric **points, size_t *n) {
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_res *r = NULL;
    store_status s = spg_fail(c, pg_exec(c, what, sql, p, &r));
    spg_put(st, c);
    store_points got = {0};
    for (int i = 0; s == STORE_OK && i < pg_nrows(r); i++) {
        store_row row = spg_row(r, i);
        if (store_points_add_row(&got, &row, run_id, keys) < 0) s = STORE_ERROR;
    }
    pg_clear(r);
    return store_points_done(s, &got, points, n);
}

store_status store_pg_metrics_points(store *st, long long run_id, const char *keys, int since_step,
                                     store_metric **points, size_t *n) {
    *points = NULL;
    *n = 0;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, run_id);
    pg_p_int(&p, since_step);
    return points_of(st, "read metrics",
                     "SELECT key, step, value, wall_time FROM metrics WHERE run_id = $1 AND step >= $2 "
                     "ORDER BY key COLLATE \"C\", step",
                     &p, run_id, keys, points, n);
}

store_status store_pg_metrics_range(store *st, long long run_id, const char *key, int from_step, int to_step,
                                    size_t limit, store_metric **points, size_t *n) {
    *points = NULL;
    *n = 0;
    limit = store_range_limit(limit);
    if (from_step >= to_step) return STORE_OK;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, run_id);
    pg_p_text(&p, key);
    pg_p_int(&p, from_step);
    pg_p_int(&p, to_step);
    pg_p_int(&p, (long long)limit);
    /* The primary key (run_id, key, step) holds the range in step order. */
    return points_of(st, "read a metric range",
                     "SELECT key, step, value, wall_time FROM metrics WHERE run_id = $1 AND key = $2 "
                     "AND step >= $3 AND step < $4 ORDER BY step LIMIT $5",
                     &p, run_id, NULL, points, n);
}

store_status store_pg_metrics_summary(store *st, long long run_id, json_t **out) {
    *out = NULL;
    json_t *sum = json_object();
    if (!sum) return spg_fail_msg("summary: out of memory");
    pg_conn *c = spg_get(st);
    if (!c) {
        json_decref(sum);
        return STORE_ERROR;
    }
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, run_id);
    pg_res *r = NULL;
    /* One row per series (migration 0008): step_of_min is the first step holding the minimum,
     * mean the one avg() gives over the rows. */
    store_status s = spg_fail(c, pg_exec(c, "summary",
                                         "SELECT key, " SUMMARY_COLUMNS " FROM metric_summaries WHERE run_id = $1 "
                                         "ORDER BY key COLLATE \"C\"",
                                         &p, &r));
    spg_put(st, c);
    for (int i = 0; s == STORE_OK && i < pg_nrows(r); i++) {
        store_summary m;
        summary_from_row(r, i, 1, &m);
        if (json_object_set_new(sum, pg_get_text(r, i, 0), store_summary_json(&m, PG_SUMMARY_FLAGS)) < 0)
            s = spg_fail_msg("summary: out of memory");
    }
    pg_clear(r);
    return store_list_done(s, sum, 0, out, NULL);
}

/* The brief of row i of the briefs statement below (columns: loss count, min, last; val_loss count,
 * min, last; tau series count, min, max): the object store_run_brief describes, or NULL when out
 * of memory. */
static json_t *brief_from_row(const pg_res *r, int i) {
    json_t *brief = json_object();
    int bad = !brief;
    static const char *const keys[] = {"loss", "val_loss"};
    for (int k = 0; !bad && k < 2; k++)
        if (pg_get_i64(r, i, 3 * k) > 0)
            bad |=
                store_brief_series(brief, keys[k], pg_get_double(r, i, 3 * k + 2), pg_get_double(r, i, 3 * k + 1)) < 0;
    if (!bad && pg_get_i64(r, i, 6) > 0)
        bad |= store_brief_tau(brief, pg_get_double(r, i, 7), pg_get_double(r, i, 8)) < 0;
    if (bad) {
        json_decref(brief);
        return NULL;
    }
    return brief;
}

/* The PostgreSQL array literal "{id,id,...}" of n ids; NULL when out of memory. Free it. */
static char *id_array(const long long *ids, size_t n) {
    enum { ID_TEXT = 21 }; /* "-9223372036854775808" and a comma */
    if (n > (SIZE_MAX - 3) / ID_TEXT) return NULL;
    char *arr = malloc(n * ID_TEXT + 3);
    if (!arr) return NULL;
    size_t used = 0;
    arr[used++] = '{';
    for (size_t i = 0; i < n; i++) used += (size_t)snprintf(arr + used, ID_TEXT + 1, "%s%lld", i ? "," : "", ids[i]);
    arr[used++] = '}';
    arr[used] = 0;
    return arr;
}

store_status store_pg_run_briefs(store *st, const long long *ids, size_t n, json_t **out) {
    *out = NULL;
    json_t *all = json_array();
    if (!all) return spg_fail_msg("brief: out of memory");
    if (n == 0) {
        *out = all;
        return STORE_OK;
    }
    if (n > INT_MAX) {
        json_decref(all);
        return spg_fail_msg("brief: too many runs");
    }
    char *arr = id_array(ids, n);
    if (!arr) {
        json_decref(all);
        return spg_fail_msg("brief: out of memory");
    }
    pg_conn *c = spg_get(st);
    if (!c) {
        free(arr);
        json_decref(all);
        return STORE_ERROR;
    }
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, arr);
    pg_res *r = NULL;
    /* One row per id, in the ids' order (an id twice: twice; no such run: no series). Index lookups
     * in the series' summaries (migration 0008); the temperatures are the tau.* series' at the last
     * step of tau.0.0 (all of them are written at every step together). */
    store_status s = spg_fail(
        c, pg_exec(c, "brief",
                   "SELECT coalesce(l.count, 0), l.min_value, l.last_value, coalesce(v.count, 0), v.min_value, "
                   "v.last_value, t.n, t.lo, t.hi, b.ord FROM unnest($1::bigint[]) WITH ORDINALITY AS b (id, ord) "
                   "CROSS JOIN LATERAL (SELECT count(*) AS n, min(m.last_value) AS lo, max(m.last_value) AS hi "
                   "FROM metric_summaries m WHERE m.run_id = b.id AND starts_with(m.key, 'tau.') AND m.last_step = "
                   "(SELECT z.last_step FROM metric_summaries z WHERE z.run_id = b.id AND z.key = 'tau.0.0')) t "
                   "LEFT JOIN metric_summaries l ON l.run_id = b.id AND l.key = 'loss' "
                   "LEFT JOIN metric_summaries v ON v.run_id = b.id AND v.key = 'val_loss' ORDER BY b.ord",
                   &p, &r));
    spg_put(st, c);
    free(arr);
    if (s == STORE_OK && pg_nrows(r) != (int)n) s = spg_fail_msg("brief: not one row per run");
    for (int i = 0; s == STORE_OK && i < (int)n; i++) {
        if (pg_get_i64(r, i, 9) != (long long)i + 1) {
            s = spg_fail_msg("brief: rows out of order");
            break;
        }
        if (json_array_append_new(all, brief_from_row(r, i)) < 0) s = spg_fail_msg("brief: out of memory");
    }
    pg_clear(r);
    return store_list_done(s, all, 0, out, NULL);
}

store_status store_pg_run_brief(store *st, long long run_id, json_t **out) {
    *out = NULL;
    json_t *all = NULL;
    store_status s = store_pg_run_briefs(st, &run_id, 1, &all);
    if (s != STORE_OK) return s;
    *out = json_incref(json_array_get(all, 0));
    json_decref(all);
    return STORE_OK;
}
