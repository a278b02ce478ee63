/* What a store query is asked (store_query.h). */
#include "store/common/store_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/common/store_error.h"

const char *const store_run_statuses[] = {"queued", "running", "succeeded", "failed", "cancelled", "interrupted", NULL};

int store_run_status_ended(const char *status) {
    for (int i = 2; status && store_run_statuses[i]; i++)
        if (!strcmp(status, store_run_statuses[i])) return 1;
    return 0;
}

const char *const store_run_sorts[STORE_RUN_SORT_COUNT + 1] = {
    "id",    "-id",      "created_at", "-created_at", "name",      "-name",        "status",        "-status", "loss",
    "-loss", "val_loss", "-val_loss",  "min_loss",    "-min_loss", "min_val_loss", "-min_val_loss", NULL};

int store_run_sort_index(const char *sort) {
    for (int i = 0; sort && i < STORE_RUN_SORT_COUNT; i++)
        if (!strcmp(sort, store_run_sorts[i])) return i;
    return -1;
}

int store_config_key_ok(const char *k) {
    size_t n = k ? strlen(k) : 0;
    if (n < 1 || n > 63) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_')) return 0;
    return 1;
}

/* A byte of a search word: an ASCII letter or digit, or a byte of a multi-byte UTF-8 character. */
static int search_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

/* Calls word(w, n, ctx) for each word of q; returns the number of words, or -1 for a word over
 * STORE_SEARCH_MAX_WORD bytes or more than STORE_SEARCH_MAX_WORDS words. */
static int search_words(const char *q, void (*word)(const char *w, size_t n, void *ctx), void *ctx) {
    int count = 0;
    for (const char *p = q; p && *p;) {
        if (!search_byte((unsigned char)*p)) {
            p++;
            continue;
        }
        size_t n = 0;
        while (search_byte((unsigned char)p[n])) n++;
        if (n > STORE_SEARCH_MAX_WORD || ++count > STORE_SEARCH_MAX_WORDS) return -1;
        if (word) word(p, n, ctx);
        p += n;
    }
    return count;
}

int store_search_ok(const char *q) { return search_words(q, NULL, NULL) >= 1; }

typedef struct {
    const char *before, *after, *join;
    char *out;
    size_t len, used;
    int n, failed;
} search_text;

static void spell_word(const char *w, size_t n, void *ctx) {
    search_text *t = ctx;
    int a = snprintf(t->out + t->used, t->len - t->used, "%s%s%.*s%s", t->n++ ? t->join : "", t->before, (int)n, w,
                     t->after);
    if (a < 0 || (size_t)a >= t->len - t->used) {
        t->failed = 1;
        return;
    }
    t->used += (size_t)a;
}

int store_search_spell(const char *q, const char *before, const char *after, const char *join, char *out, size_t len) {
    search_text t = {.before = before, .after = after, .join = join, .out = out, .len = len};
    if (len) out[0] = 0;
    if (!len || search_words(q, spell_word, &t) < 1 || t.failed) return -1;
    return 0;
}

char *store_run_name_after(const char *run_name, const char *asked, const char *taken) {
    size_t n = asked ? strlen(asked) : 0;
    if (!run_name || !taken || !strcmp(asked ? asked : "", taken) || strncmp(run_name, asked ? asked : "", n) ||
        run_name[n] != '/')
        return NULL;
    char *out = NULL;
    return asprintf(&out, "%s%s", taken, run_name + n) < 0 ? NULL : out;
}

store_status store_runs_insert(const store_new_run *runs, size_t n, const char *asked, const char *taken,
                               long long experiment_id, store_run_insert_fn insert, void *backend, long long *ids) {
    store_status s = STORE_OK;
    for (size_t i = 0; s == STORE_OK && i < n; i++) {
        store_new_run r = runs[i];
        char *renamed = store_run_name_after(r.name, asked, taken);
        if (renamed) r.name = renamed;
        s = insert(backend, &r, experiment_id, &ids[i]);
        free(renamed);
    }
    return s;
}

store_status store_runs_created(store_status s, long long id, long long *exp_id, long long *ids, long long *run_ids,
                                size_t n) {
    if (s == STORE_OK) {
        if (exp_id) *exp_id = id;
        for (size_t i = 0; i < n; i++) run_ids[i] = ids[i];
    }
    free(ids);
    return s;
}

void store_experiment_name_nth(const char *name, int n, char *buf, size_t len) {
    if (n <= 1)
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "%s (%d)", name, n);
}

/* What each sort orders by (in store_run_sorts' order, ascending then descending): a column of
 * runs, or a value of a series' summary (the last step's or the lowest). */
typedef struct {
    const char *column; /* NULL: the series' */
    int text;           /* a text column */
    const char *summary_column, *key;
} run_order;
static const run_order run_orders[STORE_RUN_SORT_COUNT / 2] = {
    {"r.id", 0, NULL, NULL},        {"r.created_at", 0, NULL, NULL},    {"r.name", 1, NULL, NULL},
    {"r.status", 1, NULL, NULL},    {NULL, 0, "last_value", "loss"},    {NULL, 0, "last_value", "val_loss"},
    {NULL, 0, "min_value", "loss"}, {NULL, 0, "min_value", "val_loss"},
};

void store_run_order_sql(const char *sort, const store_order_dialect *d, char *buf, size_t len) {
    int at = store_run_sort_index(sort);
    if (at < 0) {
        snprintf(buf, len, "r.id DESC");
        return;
    }
    const char *dir = at % 2 ? "DESC" : "ASC";
    const run_order *o = &run_orders[at / 2];
    if (o->column && !strcmp(o->column, "r.id")) {
        snprintf(buf, len, "r.id %s", dir);
    } else if (o->column) {
        snprintf(buf, len, "%s%s %s, r.id %s", o->column, o->text ? d->text_collate : "", dir, dir);
    } else {
        /* Runs without the series last, in either direction; ties by id. */
        char x[160];
        snprintf(x, sizeof x, "(SELECT m.%s FROM metric_summaries m WHERE m.run_id = r.id AND m.key = '%s')",
                 o->summary_column, o->key);
        if (d->nulls_last)
            snprintf(buf, len, "%s %s NULLS LAST, r.id %s", x, dir, dir);
        else
            snprintf(buf, len, "%s IS NULL, %s %s, r.id %s", x, x, dir, dir);
    }
}

size_t store_range_limit(size_t limit) {
    return limit < 1 ? 1 : limit > STORE_METRICS_RANGE_MAX ? STORE_METRICS_RANGE_MAX : limit;
}

int store_key_matches(const char *key, const char *keys) {
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

int store_probe_split(const json_t *result, char **rest_text, json_t **tables) {
    *rest_text = NULL;
    *tables = NULL;
    if (!result) return 0;
    json_t *rest = json_deep_copy(result);
    json_t *t = rest ? json_incref(json_object_get(rest, "tables")) : NULL;
    if (rest) json_object_del(rest, "tables");
    char *text = rest ? json_dumps(rest, JSON_COMPACT) : NULL;
    json_decref(rest);
    if (!text) {
        json_decref(t);
        return -1;
    }
    *rest_text = text;
    *tables = t;
    return 0;
}

store_status store_probe_tables_insert(long long probe_id, const json_t *tables, store_table_insert_fn insert,
                                       void *ctx) {
    size_t i;
    json_t *t;
    json_array_foreach(tables, i, t) {
        char *cols = json_dumps(json_object_get(t, "columns"), JSON_COMPACT);
        char *rows = json_dumps(json_object_get(t, "rows"), JSON_COMPACT);
        const char *name = json_string_value(json_object_get(t, "name"));
        store_status s = cols && rows && name ? insert(ctx, probe_id, (long long)i, name, cols, rows)
                                              : store_fail("insert probe table: a table without name, columns or rows");
        free(cols);
        free(rows);
        if (s != STORE_OK) return s;
    }
    return STORE_OK;
}

store_status store_probe_attach_tables(json_t *result, json_t *tables, store_status s) {
    if (s == STORE_OK && json_object_set_new(result, "tables", tables) < 0)
        return store_fail("probe tables: out of memory");
    if (s != STORE_OK) json_decref(tables);
    return s;
}

int store_ids_push(store_ids *ids, long long id, const char *what) {
    if (ids->n == ids->cap) {
        int cap = ids->cap ? ids->cap * 2 : 16;
        long long *grown = realloc(ids->v, (size_t)cap * sizeof *grown);
        if (!grown) {
            store_fail("%s: out of memory", what);
            return -1;
        }
        ids->v = grown;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return 0;
}

store_status store_ids_done(store_status s, store_ids *ids, long long **out, int *n) {
    if (s != STORE_OK) {
        free(ids->v);
        return s;
    }
    *out = ids->v;
    *n = ids->n;
    return STORE_OK;
}

json_t *store_run_counts_zero(void) {
    json_t *counts = json_object();
    for (int i = 0; counts && store_run_statuses[i]; i++)
        if (json_object_set_new(counts, store_run_statuses[i], json_integer(0)) < 0) {
            json_decref(counts);
            return NULL;
        }
    return counts;
}

store_status store_list_done(store_status s, json_t *list, long long count, json_t **out, long long *total) {
    if (s != STORE_OK) {
        json_decref(list);
        return s;
    }
    *out = list;
    if (total) *total = count;
    return STORE_OK;
}
