/* Rows into the contract's objects (store_rows.h). */
#include "store/common/store_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/common/store_error.h"
#include "store/common/store_query.h"

json_t *store_col_text(const store_row *r, int col) {
    const char *t = r->ops->text(r, col);
    return t ? json_string(t) : json_null();
}

json_t *store_col_real(const store_row *r, int col) {
    return r->ops->is_null(r, col) ? json_null() : json_real(r->ops->real(r, col));
}

json_t *store_col_int(const store_row *r, int col) {
    return r->ops->is_null(r, col) ? json_null() : json_integer(r->ops->i64(r, col));
}

json_t *store_col_json(const store_row *r, int col, json_t *fallback) {
    const char *t = r->ops->text(r, col);
    json_t *v = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;
    if (!v) return fallback;
    json_decref(fallback);
    return v;
}

double store_col_real_or_nan(const store_row *r, int col) {
    return r->ops->is_null(r, col) ? NAN : r->ops->real(r, col);
}

/* The object, or NULL (freed) when a member could not be set. */
static json_t *whole(json_t *o, int bad) {
    if (!bad) return o;
    json_decref(o);
    return NULL;
}

static json_t *col_i64(const store_row *r, int col) { return json_integer(r->ops->i64(r, col)); }

json_t *store_run_from_row(const store_row *r) {
    json_t *o = json_object();
    int bad = !o;
    bad |= json_object_set_new(o, "id", col_i64(r, 0));
    bad |= json_object_set_new(o, "name", store_col_text(r, 1));
    bad |= json_object_set_new(o, "experiment_id", store_col_int(r, 2));
    bad |= json_object_set_new(o, "variant", store_col_text(r, 3));
    bad |= json_object_set_new(o, "replicate", col_i64(r, 17));
    bad |= json_object_set_new(o, "config", store_col_json(r, 4, json_object()));
    bad |= json_object_set_new(o, "seed", col_i64(r, 5));
    bad |= json_object_set_new(o, "status", store_col_text(r, 6));
    bad |= json_object_set_new(o, "step", col_i64(r, 7));
    bad |= json_object_set_new(o, "total_steps", col_i64(r, 8));
    bad |= json_object_set_new(o, "note", store_col_text(r, 9));
    bad |= json_object_set_new(o, "error", store_col_text(r, 10));
    bad |= json_object_set_new(o, "created_at", store_col_real(r, 11));
    bad |= json_object_set_new(o, "started_at", store_col_real(r, 12));
    bad |= json_object_set_new(o, "finished_at", store_col_real(r, 13));
    bad |= json_object_set_new(o, "corpus", store_col_text(r, 14));
    bad |= json_object_set_new(o, "checkpoint_step", col_i64(r, 15));
    bad |= json_object_set_new(o, "tags", store_col_json(r, 16, json_array()));
    json_t *prov = store_col_json(r, 19, json_null()); /* migration 0010; null before */
    if (json_is_object(prov))
        bad |= json_object_set_new(o, "provenance", prov);
    else
        json_decref(prov);
    json_t *source = store_col_text(r, 18); /* "attnlab" or "external" (migration 0009) */
    if (source && json_is_string(source) && !strcmp(json_string_value(source), "external"))
        bad |= json_object_set_new(o, "source", source);
    else
        json_decref(source);
    return whole(o, bad);
}

json_t *store_experiment_from_row(const store_row *r) {
    json_t *o = json_object();
    int bad = !o;
    bad |= json_object_set_new(o, "id", col_i64(r, 0));
    bad |= json_object_set_new(o, "name", store_col_text(r, 1));
    bad |= json_object_set_new(o, "preset", store_col_text(r, 2));
    bad |= json_object_set_new(o, "base", store_col_json(r, 3, json_object()));
    bad |= json_object_set_new(o, "variants", store_col_json(r, 4, json_array()));
    bad |= json_object_set_new(o, "replicates", col_i64(r, 7));
    bad |= json_object_set_new(o, "created_at", store_col_real(r, 5));
    bad |= json_object_set_new(o, "run_count", col_i64(r, 6));
    return whole(o, bad);
}

json_t *store_corpus_from_row(const store_row *r) {
    json_t *o = json_object();
    int bad = !o;
    bad |= json_object_set_new(o, "name", store_col_text(r, 0));
    bad |= json_object_set_new(o, "source", store_col_text(r, 1));
    bad |= json_object_set_new(o, "tokenizer", store_col_text(r, 2));
    bad |= json_object_set_new(o, "documents", col_i64(r, 3));
    bad |= json_object_set_new(o, "bytes", col_i64(r, 4));
    bad |= json_object_set_new(o, "tokens", col_i64(r, 5));
    bad |= json_object_set_new(o, "status", store_col_text(r, 6));
    bad |= json_object_set_new(o, "error", store_col_text(r, 7));
    bad |= json_object_set_new(o, "builtin", json_boolean(r->ops->boolean(r, 8)));
    bad |= json_object_set_new(o, "created_at", store_col_real(r, 9));
    bad |= json_object_set_new(o, "runs", col_i64(r, 10));
    const char *task = r->ops->text(r, 11);
    if (task) {
        json_t *t = json_loads(task, 0, NULL);
        bad |= !t || json_object_set_new(o, "task", t);
    }
    return whole(o, bad);
}

json_t *store_probe_from_row(const store_row *r) {
    json_t *o = json_object();
    int bad = !o;
    bad |= json_object_set_new(o, "id", col_i64(r, 0));
    bad |= json_object_set_new(o, "kind", store_col_text(r, 1));
    bad |= json_object_set_new(o, "params", store_col_json(r, 2, json_object()));
    bad |= json_object_set_new(o, "run_id", store_col_int(r, 3));
    bad |= json_object_set_new(o, "status", store_col_text(r, 4));
    bad |= json_object_set_new(o, "error", store_col_text(r, 5));
    bad |= json_object_set_new(o, "created_at", store_col_real(r, 6));
    bad |= json_object_set_new(o, "duration_ms", store_col_real(r, 7));
    bad |= json_object_set_new(o, "result", store_col_json(r, 8, json_null()));
    return whole(o, bad);
}

json_t *store_probe_table_from_row(const store_row *r, int with_rows) {
    json_t *t = json_object();
    int bad = !t;
    bad |= json_object_set_new(t, "name", store_col_text(r, 0));
    bad |= json_object_set_new(t, "columns", store_col_json(r, 1, json_array()));
    if (with_rows)
        bad |= json_object_set_new(t, "rows", store_col_json(r, 2, json_array()));
    else
        bad |= json_object_set_new(t, "row_count", col_i64(r, 2));
    return whole(t, bad);
}

json_t *store_idempotency_from_row(const store_row *r) {
    json_t *o = json_object();
    int bad = !o;
    bad |= json_object_set_new(o, "kind", store_col_text(r, 0));
    bad |= json_object_set_new(o, "id", store_col_int(r, 1));
    bad |= json_object_set_new(o, "request_hash", store_col_text(r, 2));
    bad |= json_object_set_new(o, "created_at", store_col_real(r, 3));
    return whole(o, bad);
}

json_t *store_artifact_from_row(const store_row *r) {
    json_t *o = json_object();
    int bad = !o;
    bad |= json_object_set_new(o, "path", store_col_text(r, 0));
    bad |= json_object_set_new(o, "kind", store_col_text(r, 1));
    bad |= json_object_set_new(o, "run_id", store_col_int(r, 2));
    bad |= json_object_set_new(o, "step", store_col_int(r, 3));
    bad |= json_object_set_new(o, "bytes", store_col_int(r, 4));
    bad |= json_object_set_new(o, "sha256", store_col_text(r, 5));
    bad |= json_object_set_new(o, "created_at", store_col_real(r, 6));
    return whole(o, bad);
}

json_t *store_node_from_row(const store_row *r) {
    json_t *o = json_object();
    int bad = !o;
    bad |= json_object_set_new(o, "id", store_col_text(r, 0));
    bad |= json_object_set_new(o, "host", store_col_text(r, 1));
    bad |= json_object_set_new(o, "url", store_col_text(r, 2));
    bad |= json_object_set_new(o, "role", store_col_text(r, 3));
    bad |= json_object_set_new(o, "capacity", col_i64(r, 4));
    bad |= json_object_set_new(o, "pid", store_col_int(r, 5));
    bad |= json_object_set_new(o, "version", store_col_text(r, 6));
    bad |= json_object_set_new(o, "started_at", store_col_real(r, 7));
    bad |= json_object_set_new(o, "last_heartbeat", store_col_real(r, 8));
    bad |= json_object_set_new(o, "heartbeat_age_s", store_col_real(r, 9));
    bad |= json_object_set_new(o, "alive", json_boolean(r->ops->boolean(r, 10)));
    bad |= json_object_set_new(o, "stopped_at", store_col_real(r, 11));
    bad |= json_object_set_new(o, "running", store_col_json(r, 12, json_array()));
    return whole(o, bad);
}

void store_summary_from_row(const store_row *r, int col, store_summary *sum) {
    sum->count = r->ops->i64(r, col);
    sum->last_step = (int)r->ops->i64(r, col + 1);
    sum->last_value = r->ops->real(r, col + 2);
    sum->min_value = r->ops->real(r, col + 3);
    sum->min_step = (int)r->ops->i64(r, col + 4);
    sum->max_value = r->ops->real(r, col + 5);
    sum->sum = store_col_real_or_nan(r, col + 6);
    sum->sum_err = store_col_real_or_nan(r, col + 7);
}

json_t *store_summary_json(const store_summary *m, int flags) {
    return json_pack("{s:f, s:f, s:f, s:f, s:i, s:I, s:i}", "last", m->last_value, "min", m->min_value, "max",
                     m->max_value, "mean", store_summary_mean(m, flags), "step_of_min", m->min_step, "count",
                     (json_int_t)m->count, "last_step", m->last_step);
}

int store_brief_series(json_t *brief, const char *key, double last, double min) {
    return json_object_set_new(brief, key, json_pack("{s:f, s:f}", "last", last, "min", min));
}

int store_brief_tau(json_t *brief, double min, double max) {
    return json_object_set_new(brief, "tau", json_pack("{s:f, s:f}", "min", min, "max", max));
}

int store_points_add_row(store_points *p, const store_row *r, long long run_id, const char *keys) {
    const char *key = r->ops->text(r, 0);
    if (!key || !store_key_matches(key, keys)) return 0;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        store_metric *grown = realloc(p->v, cap * sizeof *grown);
        if (grown) p->v = grown;
        size_t *at = grown ? realloc(p->key_at, cap * sizeof *at) : NULL;
        if (!at) {
            store_fail("read metrics: out of memory");
            return -1;
        }
        p->key_at = at;
        p->cap = cap;
    }
    size_t len = strlen(key);
    int same = p->n > 0 && !strcmp(p->keys + p->key_at[p->n - 1], key);
    if (!same) {
        if (p->keys_len + len + 1 > p->keys_cap) {
            size_t cap = p->keys_cap ? p->keys_cap * 2 : 4096;
            while (cap < p->keys_len + len + 1) cap *= 2;
            char *grown = realloc(p->keys, cap);
            if (!grown) {
                store_fail("read metrics: out of memory");
                return -1;
            }
            p->keys = grown;
            p->keys_cap = cap;
        }
        memcpy(p->keys + p->keys_len, key, len + 1);
        p->key_at[p->n] = p->keys_len;
        p->keys_len += len + 1;
    } else {
        p->key_at[p->n] = p->key_at[p->n - 1];
    }
    store_metric *m = &p->v[p->n++];
    m->run_id = run_id;
    m->key = NULL;
    m->step = (int)r->ops->i64(r, 1);
    m->value = r->ops->real(r, 2);
    m->wall_time = r->ops->real(r, 3);
    return 0;
}

store_status store_points_done(store_status s, store_points *p, store_metric **out, size_t *n) {
    store_metric *all = NULL;
    if (s == STORE_OK && p->n > 0) { /* the keys go after the points, in the same block */
        all = realloc(p->v, p->n * sizeof *all + p->keys_len);
        if (all)
            p->v = NULL;
        else
            s = store_fail("read metrics: out of memory");
    }
    if (all) {
        char *keys = (char *)(all + p->n);
        memcpy(keys, p->keys, p->keys_len);
        for (size_t i = 0; i < p->n; i++) all[i].key = keys + p->key_at[i];
        *out = all;
        *n = p->n;
    }
    free(p->v);
    free(p->key_at);
    free(p->keys);
    memset(p, 0, sizeof *p);
    return s;
}
