/* Metric points on PostgreSQL: every SQL statement about the metrics table (store_metrics.c's twin). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_pg.h"

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
    int n = isinf(v) ? snprintf(t, sizeof t, "%sInfinity", v < 0 ? "-" : "") : snprintf(t, sizeof t, "%.17g", v);
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

static int by_point(const void *a, const void *b, void *base) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const store_metric *p = (const store_metric *)base + i, *q = (const store_metric *)base + j;
    if (p->run_id != q->run_id) return p->run_id < q->run_id ? -1 : 1;
    int k = strncmp(p->key, q->key, sizeof p->key);
    if (k) return k;
    if (p->step != q->step) return p->step < q->step ? -1 : 1;
    return i < j ? -1 : i > j; /* the later of two equal points wins */
}

store_status store_pg_metrics_insert(store *st, const store_metric *points, size_t n) {
    if (n == 0) return STORE_OK;
    /* One point per (run, key, step), the last given (ON CONFLICT may not touch a row twice),
     * NaN left out (SQL has no NaN point: such a step has none, as with SQLite). */
    size_t *idx = malloc(n * sizeof *idx);
    if (!idx) return spg_fail_msg("insert metrics: out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(points[i].value)) idx[m++] = i;
    qsort_r(idx, m, sizeof *idx, by_point, (void *)points);
    size_t u = 0;
    for (size_t i = 0; i < m; i++) {
        const store_metric *p = &points[idx[i]];
        if (i + 1 < m) {
            const store_metric *q = &points[idx[i + 1]];
            if (q->run_id == p->run_id && q->step == p->step && !strncmp(q->key, p->key, sizeof p->key)) continue;
        }
        idx[u++] = idx[i];
    }
    /* The runs in the batch (idx is sorted by run), with the steps they cover. */
    typedef struct {
        long long run, token;
        int from, to, allowed;
        double w0, w1; /* the points' wall times: a batch's window (the next batch's are later) */
    } run_span;
    size_t n_runs = 0;
    for (size_t i = 0; i < u; i++)
        if (i == 0 || points[idx[i]].run_id != points[idx[i - 1]].run_id) n_runs++;
    run_span *runs = calloc(n_runs ? n_runs : 1, sizeof *runs);
    if (!runs) {
        free(idx);
        return spg_fail_msg("insert metrics: out of memory");
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

    pg_conn *c = spg_get(st);
    if (!c) {
        free(idx);
        free(runs);
        return STORE_ERROR;
    }
    store_status s = spg_fail(c, pg_begin(c));
    /* Runs held here keep a share lock on their row until the commit: the lease cannot pass to
     * another node between the check and the write. Points of a run whose lease is gone are left
     * out, like those of a run deleted meanwhile. */
    strbuf held_runs = {0}, held_tokens = {0};
    int n_held = 0;
    sb_str(&held_runs, "{");
    sb_str(&held_tokens, "{");
    for (size_t i = 0; i < n_runs; i++)
        if (runs[i].token) {
            if (n_held++) {
                sb_str(&held_runs, ",");
                sb_str(&held_tokens, ",");
            }
            sb_int(&held_runs, runs[i].run);
            sb_int(&held_tokens, runs[i].token);
            runs[i].allowed = 0;
        }
    sb_str(&held_runs, "}");
    sb_str(&held_tokens, "}");
    if (held_runs.failed || held_tokens.failed) s = spg_fail_msg("insert metrics: out of memory");
    if (s == STORE_OK && n_held) {
        pg_params p;
        pg_params_init(&p);
        pg_p_text(&p, held_runs.buf);
        pg_p_text(&p, held_tokens.buf);
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
    free(held_runs.buf);
    free(held_tokens.buf);

    size_t done = 0, r_at = 0;
    while (s == STORE_OK && done < u) {
        strbuf a_run = {0}, a_key = {0}, a_step = {0}, a_val = {0}, a_wall = {0};
        sb_str(&a_run, "{");
        sb_str(&a_key, "{");
        sb_str(&a_step, "{");
        sb_str(&a_val, "{");
        sb_str(&a_wall, "{");
        size_t in_chunk = 0;
        for (; done < u && in_chunk < CHUNK; done++) {
            const store_metric *p = &points[idx[done]];
            while (runs[r_at].run != p->run_id) r_at++;
            if (!runs[r_at].allowed) continue;
            if (in_chunk++) {
                sb_str(&a_run, ",");
                sb_str(&a_key, ",");
                sb_str(&a_step, ",");
                sb_str(&a_val, ",");
                sb_str(&a_wall, ",");
            }
            sb_int(&a_run, p->run_id);
            sb_quoted(&a_key, p->key, sizeof p->key);
            sb_int(&a_step, p->step);
            sb_num(&a_val, p->value);
            sb_num(&a_wall, p->wall_time);
        }
        sb_str(&a_run, "}");
        sb_str(&a_key, "}");
        sb_str(&a_step, "}");
        sb_str(&a_val, "}");
        sb_str(&a_wall, "}");
        if (a_run.failed || a_key.failed || a_step.failed || a_val.failed || a_wall.failed)
            s = spg_fail_msg("insert metrics: out of memory");
        else if (in_chunk) {
            pg_params p;
            pg_params_init(&p);
            pg_p_text(&p, a_run.buf);
            pg_p_text(&p, a_key.buf);
            pg_p_text(&p, a_step.buf);
            pg_p_text(&p, a_val.buf);
            pg_p_text(&p, a_wall.buf);
            s = pg_cmd(c, "insert metrics",
                       "INSERT INTO metrics (run_id, key, step, value, wall_time) "
                       "SELECT u.run_id, u.key, u.step, u.value, u.wall_time FROM unnest($1::bigint[], $2::text[], "
                       "$3::int[], $4::float8[], $5::float8[]) AS u(run_id, key, step, value, wall_time) "
                       "WHERE EXISTS (SELECT 1 FROM runs r WHERE r.id = u.run_id) "
                       "ON CONFLICT (run_id, key, step) DO UPDATE SET value = EXCLUDED.value, "
                       "wall_time = EXCLUDED.wall_time",
                       &p, NULL);
            s = spg_fail(c, s);
        }
        free(a_run.buf);
        free(a_key.buf);
        free(a_step.buf);
        free(a_val.buf);
        free(a_wall.buf);
    }
    /* Other nodes' viewers hear which steps of which runs are now stored. */
    if (s == STORE_OK) {
        strbuf notes = {0};
        sb_str(&notes, "{");
        int any = 0;
        for (size_t i = 0; i < n_runs; i++) {
            if (!runs[i].allowed) continue;
            char note[256];
            snprintf(note, sizeof note,
                     "{\"t\":\"m\",\"run\":%lld,\"from\":%d,\"to\":%d,\"w0\":%.17g,\"w1\":%.17g,\"node\":", runs[i].run,
                     runs[i].from, runs[i].to, runs[i].w0, runs[i].w1);
            json_t *node = json_string(spg_node(st));
            char *node_text = node ? json_dumps(node, JSON_ENCODE_ANY) : NULL;
            json_decref(node);
            if (!node_text) {
                notes.failed = 1;
                break;
            }
            strbuf one = {0};
            sb_str(&one, note);
            sb_str(&one, node_text);
            sb_str(&one, "}");
            free(node_text);
            if (one.failed) notes.failed = 1;
            if (any++) sb_str(&notes, ",");
            if (!one.failed) sb_quoted(&notes, one.buf, one.len);
            free(one.buf);
        }
        sb_str(&notes, "}");
        if (notes.failed)
            s = spg_fail_msg("insert metrics: out of memory");
        else if (any) {
            pg_params p;
            pg_params_init(&p);
            pg_p_text(&p, notes.buf);
            s = spg_fail(c, pg_cmd(c, "notify metrics",
                                   "SELECT pg_notify('attnlab_events', x) FROM unnest($1::text[]) x", &p, NULL));
        }
        free(notes.buf);
    }
    s = spg_fail(c, pg_finish(c, s));
    spg_put(st, c);
    free(idx);
    free(runs);
    return s;
}

/* A key matches a comma-separated list of names and prefixes ("tau.*"). */
static int key_matches(const char *key, const char *keys) {
    if (!keys || !*keys) return 1;
    const char *p = keys;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && p[len - 1] == '*') {
            if (!strncmp(key, p, len - 1)) return 1;
        } else if (len == strlen(key) && !strncmp(key, p, len)) {
            return 1;
        }
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

store_status store_pg_metrics_points(store *st, long long run_id, const char *keys, int since_step,
                                     store_metric **points, size_t *n) {
    *points = NULL;
    *n = 0;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, run_id);
    pg_p_int(&p, since_step);
    pg_res *r = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "read metrics",
                            "SELECT key, step, value, wall_time FROM metrics WHERE run_id = $1 AND step >= $2 "
                            "ORDER BY key COLLATE \"C\", step",
                            &p, &r));
    spg_put(st, c);
    int rows = s == STORE_OK ? pg_nrows(r) : 0;
    store_metric *got = rows ? malloc((size_t)rows * sizeof *got) : NULL;
    if (rows && !got) s = spg_fail_msg("read metrics: out of memory");
    size_t count = 0;
    for (int i = 0; s == STORE_OK && i < rows; i++) {
        const char *key = pg_get_text(r, i, 0);
        if (!key || !key_matches(key, keys)) continue;
        store_metric *m = &got[count++];
        m->run_id = run_id;
        snprintf(m->key, sizeof m->key, "%s", key);
        m->step = pg_get_int(r, i, 1);
        m->value = pg_get_double(r, i, 2);
        m->wall_time = pg_get_double(r, i, 3);
    }
    pg_clear(r);
    if (s != STORE_OK || count == 0) {
        free(got);
        return s;
    }
    *points = got;
    *n = count;
    return STORE_OK;
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
    /* step_of_min: the first step holding the minimum. */
    store_status s =
        spg_fail(c, pg_exec(c, "summary",
                            "SELECT m.key, min(m.value), max(m.value), avg(m.value), count(*), max(m.step), "
                            "  (SELECT l.value FROM metrics l WHERE l.run_id = m.run_id AND l.key = m.key "
                            "   ORDER BY l.step DESC LIMIT 1), "
                            "  (SELECT min(s.step) FROM metrics s WHERE s.run_id = m.run_id AND s.key = m.key "
                            "   AND s.value = min(m.value)) "
                            "FROM metrics m WHERE m.run_id = $1 GROUP BY m.run_id, m.key ORDER BY m.key COLLATE \"C\"",
                            &p, &r));
    spg_put(st, c);
    for (int i = 0; s == STORE_OK && i < pg_nrows(r); i++) {
        json_t *o = json_pack("{s:f, s:f, s:f, s:f, s:i, s:I, s:i}", "last", pg_get_double(r, i, 6), "min",
                              pg_get_double(r, i, 1), "max", pg_get_double(r, i, 2), "mean", pg_get_double(r, i, 3),
                              "step_of_min", pg_get_int(r, i, 7), "count", (json_int_t)pg_get_i64(r, i, 4), "last_step",
                              pg_get_int(r, i, 5));
        if (json_object_set_new(sum, pg_get_text(r, i, 0), o) < 0) s = spg_fail_msg("summary: out of memory");
    }
    pg_clear(r);
    if (s != STORE_OK) {
        json_decref(sum);
        return s;
    }
    *out = sum;
    return STORE_OK;
}

store_status store_pg_run_brief(store *st, long long run_id, json_t **out) {
    *out = NULL;
    json_t *brief = json_object();
    if (!brief) return spg_fail_msg("brief: out of memory");
    pg_conn *c = spg_get(st);
    if (!c) {
        json_decref(brief);
        return STORE_ERROR;
    }
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, run_id);
    pg_res *r = NULL;
    /* Each part reads one key's rows through the primary key index. */
    store_status s = spg_fail(
        c, pg_exec(c, "brief",
                   "SELECT (SELECT count(*) FROM metrics WHERE run_id = $1 AND key = 'loss'), "
                   "(SELECT min(value) FROM metrics WHERE run_id = $1 AND key = 'loss'), "
                   "(SELECT value FROM metrics WHERE run_id = $1 AND key = 'loss' ORDER BY step DESC LIMIT 1), "
                   "(SELECT count(*) FROM metrics WHERE run_id = $1 AND key = 'val_loss'), "
                   "(SELECT min(value) FROM metrics WHERE run_id = $1 AND key = 'val_loss'), "
                   "(SELECT value FROM metrics WHERE run_id = $1 AND key = 'val_loss' ORDER BY step DESC LIMIT 1), "
                   "t.n, t.lo, t.hi FROM (SELECT count(*) AS n, min(value) AS lo, max(value) AS hi FROM metrics "
                   "WHERE run_id = $1 AND starts_with(key, 'tau.') AND step = (SELECT max(step) FROM metrics "
                   "WHERE run_id = $1 AND key = 'tau.0.0')) t",
                   &p, &r));
    spg_put(st, c);
    if (s == STORE_OK && pg_nrows(r) != 1) s = spg_fail_msg("brief: an aggregate gave no row");
    static const char *const keys[] = {"loss", "val_loss"};
    for (int k = 0; s == STORE_OK && k < 2; k++)
        if (pg_get_i64(r, 0, 3 * k) > 0 &&
            json_object_set_new(brief, keys[k],
                                json_pack("{s:f, s:f}", "last", pg_get_double(r, 0, 3 * k + 2), "min",
                                          pg_get_double(r, 0, 3 * k + 1))) < 0)
            s = spg_fail_msg("brief: out of memory");
    if (s == STORE_OK && pg_get_i64(r, 0, 6) > 0 &&
        json_object_set_new(brief, "tau",
                            json_pack("{s:f, s:f}", "min", pg_get_double(r, 0, 7), "max", pg_get_double(r, 0, 8))) < 0)
        s = spg_fail_msg("brief: out of memory");
    pg_clear(r);
    if (s != STORE_OK) {
        json_decref(brief);
        return s;
    }
    *out = brief;
    return STORE_OK;
}
