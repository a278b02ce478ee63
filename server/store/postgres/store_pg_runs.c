/* Runs and their tags on PostgreSQL: every SQL statement about runs (store_runs.c's twin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/store_pg.h"

/* The run columns (store_rows.h: tags, replicate, source), then the node that holds the run (its place:
 * STORE_RUN_COLUMN_COUNT). */
#define RUN_COLUMNS                                                                                                    \
    STORE_RUN_COLUMNS_BEFORE_TAGS                                                                                      \
    "coalesce((SELECT json_agg(t.tag ORDER BY t.tag COLLATE \"C\") FROM run_tags t WHERE t.run_id = r.id)"             \
    "::text, '[]'), r.replicate, r.source, r.provenance, r.node_id"

/* The run object of a RUN_COLUMNS row, with the node; NULL when out of memory. */
static json_t *run_from_row(const store_row *r) {
    json_t *o = store_run_from_row(r);
    if (o && json_object_set_new(o, "node", store_col_text(r, STORE_RUN_COLUMN_COUNT)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static store_status put_tags(pg_conn *c, long long id, const json_t *tags) {
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, id);
    store_status s = pg_cmd(c, "clear tags", "DELETE FROM run_tags WHERE run_id = $1", &p, NULL);
    if (s != STORE_OK) return spg_fail(c, s);
    if (json_array_size(tags) == 0) return STORE_OK;
    char *arr = spg_array_json(tags);
    if (!arr) return spg_fail_msg("add tags: out of memory");
    pg_p_text(&p, arr);
    s = pg_cmd(c, "add tags",
               "INSERT INTO run_tags (run_id, tag) SELECT $1, t FROM unnest($2::text[]) t ON CONFLICT DO NOTHING", &p,
               NULL);
    free(arr);
    return spg_fail(c, s);
}

store_status store_pg_run_insert(store *st, pg_conn *c, const store_new_run *run, long long experiment_id,
                                 long long *id_out) {
    long long id = spg_next_id(c, "runs");
    if (id < 0) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, run->name ? run->name : "");
    if (experiment_id)
        pg_p_int(&p, experiment_id);
    else
        pg_p_null(&p);
    pg_p_text(&p, run->variant ? run->variant : "");
    pg_p_text(&p, run->config_json);
    pg_p_int(&p, run->seed);
    pg_p_int(&p, run->total_steps);
    pg_p_text(&p, run->note ? run->note : "");
    pg_p_double(&p, spg_now());
    pg_p_text(&p, run->corpus ? run->corpus : "");
    pg_p_int(&p, id);
    pg_p_int(&p, run->replicate > 0 ? run->replicate : 0);
    pg_p_text(&p, run->external ? "true" : "false");
    store_status s =
        pg_cmd(c, "insert run",
               "INSERT INTO runs (name, experiment_id, variant, config, seed, status, total_steps, note, "
               "created_at, corpus, id, replicate, source, started_at) VALUES ($1, $2, $3, $4, $5, "
               "CASE WHEN $12::boolean THEN 'running' ELSE 'queued' END, $6, $7, $8::float8, $9, $10, $11, "
               "CASE WHEN $12::boolean THEN 'external' ELSE 'attnlab' END, CASE WHEN $12::boolean THEN $8::float8 END)",
               &p, NULL);
    if (s == STORE_CONFLICT) s = STORE_ERROR; /* a fresh id from the counter cannot be taken */
    if (s != STORE_OK) return spg_fail(c, s);
    if (run->tags && put_tags(c, id, run->tags) != STORE_OK) return STORE_ERROR;
    char idtext[32];
    snprintf(idtext, sizeof idtext, "%lld", id);
    s = run->external ? STORE_OK : spg_notify(c, "attnlab_jobs", idtext); /* no node trains an external run */
    if (s != STORE_OK) return spg_fail(c, s);
    (void)st;
    *id_out = id;
    return STORE_OK;
}

store_status spg_idempotency_put(pg_conn *c, const store_idempotency *k, long long run_id, long long experiment_id) {
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, k->key);
    pg_p_text(&p, run_id ? "run" : "experiment");
    if (run_id)
        pg_p_int(&p, run_id);
    else
        pg_p_null(&p);
    if (experiment_id && !run_id)
        pg_p_int(&p, experiment_id);
    else
        pg_p_null(&p);
    pg_p_text(&p, k->request_hash);
    pg_p_double(&p, spg_now());
    /* STORE_CONFLICT (a unique violation): recorded already, by an earlier request or one alongside. */
    return spg_fail(c, pg_cmd(c, "record idempotency key",
                              STORE_IDEMPOTENCY_INSERT("$1", "$2", "$3", "$4", "$5", "$6::float8"), &p, NULL));
}

store_status store_pg_idempotency_get(store *st, const char *key, json_t **out) {
    *out = NULL;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, key);
    pg_res *r = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "get idempotency key",
                            "SELECT " STORE_IDEMPOTENCY_COLUMNS " FROM idempotency_keys WHERE key = $1", &p, &r));
    spg_put(st, c);
    if (s == STORE_OK) s = spg_one(r, store_idempotency_from_row, out, "get idempotency key");
    pg_clear(r);
    return s;
}

store_status store_pg_run_create(store *st, const store_new_run *run, long long *id_out) {
    *id_out = 0;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    long long id = 0;
    store_status s = spg_fail(c, pg_begin(c));
    if (s == STORE_OK) s = store_pg_run_insert(st, c, run, run->experiment_id, &id);
    if (s == STORE_OK && run->idempotency) s = spg_idempotency_put(c, run->idempotency, id, 0);
    s = spg_fail(c, pg_finish(c, s));
    spg_put(st, c);
    if (s == STORE_OK) *id_out = id;
    return s;
}

static store_status run_get_on(pg_conn *c, long long id, json_t **out) {
    *out = NULL;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, id);
    pg_res *r = NULL;
    store_status s = spg_fail(c, pg_exec(c, "get run", "SELECT " RUN_COLUMNS " FROM runs r WHERE r.id = $1", &p, &r));
    if (s == STORE_OK) s = spg_one(r, run_from_row, out, "get run");
    pg_clear(r);
    return s;
}

store_status store_pg_run_get(store *st, long long id, json_t **out) {
    *out = NULL;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    store_status s = run_get_on(c, id, out);
    spg_put(st, c);
    return s;
}

/* Whether a run exists: STORE_OK, STORE_NOT_FOUND or STORE_ERROR. */
static store_status run_exists(pg_conn *c, long long id) {
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, id);
    pg_res *r = NULL;
    store_status s = pg_exec(c, "find run", "SELECT 1 FROM runs WHERE id = $1", &p, &r);
    if (s == STORE_OK && pg_nrows(r) == 0) s = STORE_NOT_FOUND;
    pg_clear(r);
    return spg_fail(c, s);
}

/* Text compared byte by byte (as SQLite does), NULLs last written as such. */
static const store_order_dialect dialect = {.text_collate = " COLLATE \"C\"", .nulls_last = 1};

store_status store_pg_run_list(store *st, const store_run_filter *f, json_t **runs, long long *total) {
    *runs = NULL;
    *total = 0;
    char order[400];
    store_run_order_sql(f->sort, &dialect, order, sizeof order);
    if (f->n_config < 0 || f->n_config > STORE_RUN_MAX_CONFIG_FILTERS)
        return spg_fail_msg("list runs: too many filters");
    char where[1600] =
        " WHERE ($1::text IS NULL OR r.status = $1::text) AND ($2::text IS NULL OR r.variant = $2::text) "
        "AND ($3::bigint = 0 OR r.experiment_id = $3::bigint) "
        "AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.id AND t.tag = $4::text))";
    /* Config filter i: its key is $(7+2i), its value (JSON text) $(8+2i); jsonb compares numbers as
     * numbers. */
    for (int i = 0; i < f->n_config; i++) {
        if (!store_config_key_ok(f->config[i].key) || !f->config[i].value_json)
            return spg_fail_msg("list runs: a config filter's key is not a field name");
        size_t used = strlen(where);
        snprintf(where + used, sizeof where - used, " AND (r.config::jsonb -> $%d::text) = $%d::jsonb", 7 + 2 * i,
                 8 + 2 * i);
    }
    /* The search: a tsquery of its words, after the config filters' parameters. */
    char match[STORE_SEARCH_SPELL_MAX];
    if (f->search) {
        if (store_search_spell(f->search, "'", "':*", " & ", match, sizeof match) < 0)
            return spg_fail_msg("list runs: not a search");
        size_t used = strlen(where);
        snprintf(where + used, sizeof where - used, " AND " STORE_PG_RUN_WORDS " @@ to_tsquery('simple', $%d::text)",
                 7 + 2 * f->n_config);
    }
    /* The page and the number of matching runs in one statement (one snapshot); a page past the
     * end has no row to carry the count, which is then read alone. */
    char sql[4096], count_sql[2048];
    snprintf(sql, sizeof sql,
             "SELECT " RUN_COLUMNS ", count(*) OVER () FROM runs r %s ORDER BY %s LIMIT $5::bigint OFFSET $6::bigint",
             where, order);
    /* Every parameter is sent to both; the count names the page's two so that their types are known. */
    snprintf(count_sql, sizeof count_sql, "SELECT count(*), $5::bigint, $6::bigint FROM runs r %s", where);
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, f->status);
    pg_p_text(&p, f->variant);
    pg_p_int(&p, f->experiment_id);
    pg_p_text(&p, f->tag);
    pg_p_int(&p, f->limit);
    pg_p_int(&p, f->offset);
    for (int i = 0; i < f->n_config; i++) {
        pg_p_text(&p, f->config[i].key);
        pg_p_text(&p, f->config[i].value_json);
    }
    if (f->search) pg_p_text(&p, match);

    json_t *list = json_array();
    if (!list) return spg_fail_msg("list runs: out of memory");
    pg_conn *c = spg_get(st);
    if (!c) {
        json_decref(list);
        return STORE_ERROR;
    }
    pg_res *r = NULL;
    long long count = 0;
    store_status s = spg_fail(c, pg_exec(c, "list runs", sql, &p, &r));
    if (s == STORE_OK) s = spg_rows(r, run_from_row, list, "list runs");
    if (s == STORE_OK && pg_nrows(r) > 0) count = pg_get_i64(r, 0, STORE_RUN_COLUMN_COUNT + 1);
    pg_clear(r);
    r = NULL;
    if (s == STORE_OK && json_array_size(list) == 0 && f->offset > 0) {
        s = spg_fail(c, pg_exec(c, "count runs", count_sql, &p, &r));
        if (s == STORE_OK) count = pg_get_i64(r, 0, 0);
        pg_clear(r);
    }
    spg_put(st, c);
    return store_list_done(s, list, count, runs, total);
}

static char *status_payload(store *st, long long id) {
    json_t *o = json_pack("{s:s, s:I, s:s}", "t", "s", "run", (json_int_t)id, "node", spg_node(st));
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

store_status store_pg_run_transition(store *st, long long id, const char *const *from, const char *to,
                                     const char *error) {
    int n_from = 0;
    while (from[n_from] && n_from < 16) n_from++;
    if (n_from == 0) return spg_fail_msg("change run status: no status to move from");
    char *arr = spg_array(from, (size_t)n_from);
    char *payload = status_payload(st, id);
    long long token = spg_held_token(st, id);
    if (!arr || !payload) {
        free(arr);
        free(payload);
        return spg_fail_msg("change run status: out of memory");
    }
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, to);
    pg_p_text(&p, error);
    pg_p_double(&p, spg_now());
    pg_p_text(&p, store_run_status_ended(to) ? "true" : "false");
    pg_p_int(&p, id);
    pg_p_text(&p, arr);
    pg_p_text(&p, payload);
    pg_p_int(&p, token);
    /* A run this node holds changes only while its lease is still this node's. Leaving for the queue
     * clears the lease and any cancel request (a resumed run starts afresh). One statement: the
     * change and its notifications commit together. */
    char sql[1600];
    snprintf(
        sql, sizeof sql,
        "WITH u AS (UPDATE runs SET status = $1::text, error = $2::text, "
        "started_at = CASE WHEN $1::text = 'running' THEN $3::float8 ELSE started_at END, "
        "finished_at = CASE WHEN $4::boolean THEN $3::float8 WHEN $1::text IN ('queued','running') THEN NULL "
        "ELSE finished_at END, "
        "lease_token = CASE WHEN $1::text = 'queued' THEN NULL ELSE lease_token END, "
        "lease_until = CASE WHEN $1::text = 'running' THEN lease_until ELSE NULL END, "
        "cancel_requested = CASE WHEN $1::text = 'queued' THEN 0 ELSE cancel_requested END "
        "WHERE id = $5 AND status = ANY($6::text[]) AND ($8::bigint = 0 OR lease_token = $8::bigint) RETURNING id) "
        "SELECT u.id, pg_notify('attnlab_events', $7)%s FROM u",
        !strcmp(to, "queued") ? ", pg_notify('attnlab_jobs', u.id::text)" : "");
    pg_conn *c = spg_get(st);
    store_status s = STORE_ERROR;
    if (c) {
        pg_res *r = NULL;
        s = pg_exec(c, "change run status", sql, &p, &r);
        if (s == STORE_OK && pg_nrows(r) == 0) {
            s = run_exists(c, id);
            if (s == STORE_OK) s = STORE_CONFLICT;
        }
        pg_clear(r);
        s = spg_fail(c, s);
        spg_put(st, c);
    }
    free(arr);
    free(payload);
    return s;
}

store_status store_pg_run_set_provenance(store *st, long long id, const char *provenance_json) {
    return spg_update_by_id(st, "UPDATE runs SET provenance = $1 WHERE id = $2", provenance_json, id, "run provenance");
}

store_status store_pg_run_progress(store *st, long long id, int step, int checkpoint_step) {
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, step);
    pg_p_int(&p, checkpoint_step);
    pg_p_int(&p, id);
    pg_p_int(&p, spg_held_token(st, id));
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    long long n = 0;
    store_status s = pg_cmd(c, "run progress",
                            "UPDATE runs SET step = $1, checkpoint_step = greatest(checkpoint_step, $2) "
                            "WHERE id = $3 AND ($4::bigint = 0 OR lease_token = $4::bigint)",
                            &p, &n);
    if (s == STORE_OK && n == 0 && p.v[3] && strcmp(p.v[3], "0") != 0) s = STORE_CONFLICT; /* the lease is gone */
    s = spg_fail(c, s);
    spg_put(st, c);
    return s;
}

store_status store_pg_run_update(store *st, long long id, const char *name, const char *note, const json_t *tags) {
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    store_status s = spg_fail(c, pg_begin(c));
    if (s == STORE_OK) {
        pg_params p;
        pg_params_init(&p);
        pg_p_text(&p, name);
        pg_p_text(&p, note);
        pg_p_int(&p, id);
        long long n = 0;
        s = spg_fail(c, pg_cmd(c, "update run",
                               "UPDATE runs SET name = coalesce($1::text, name), note = coalesce($2::text, note) "
                               "WHERE id = $3",
                               &p, &n));
        if (s == STORE_OK && n == 0) s = STORE_NOT_FOUND;
        if (s == STORE_OK && tags) s = put_tags(c, id, tags);
    }
    s = spg_fail(c, pg_finish(c, s));
    spg_put(st, c);
    return s;
}

store_status store_pg_run_delete(store *st, long long id) {
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, id);
    long long n = 0;
    store_status s =
        pg_cmd(c, "delete run", "DELETE FROM runs WHERE id = $1 AND status NOT IN ('queued', 'running')", &p, &n);
    if (s == STORE_OK && n == 0) {
        s = run_exists(c, id);
        if (s == STORE_OK) s = STORE_CONFLICT;
    }
    s = spg_fail(c, s);
    spg_put(st, c);
    return s;
}

int store_pg_runs_interrupt_running(store *st) {
    /* Start-up of a node: its own runs of its previous life (this node id, still running) and any
     * running without a lease are interrupted. Other nodes' runs are theirs while they renew
     * their leases; a lease that ran out is taken over by a claim. */
    pg_conn *c = spg_get(st);
    if (!c) return -1;
    pg_params p;
    pg_params_init(&p);
    pg_p_double(&p, spg_now());
    pg_p_text(&p, spg_node(st));
    char *payload = NULL;
    long long n = 0;
    pg_res *r = NULL;
    store_status s =
        pg_exec(c, "interrupt runs",
                "WITH u AS (UPDATE runs SET status = 'interrupted', finished_at = $1, lease_token = NULL, "
                "lease_until = NULL, error = 'the service stopped while the run was training' "
                "WHERE status = 'running' AND source = 'attnlab' AND (lease_until IS NULL OR node_id = $2) "
                "RETURNING id) "
                "SELECT u.id, pg_notify('attnlab_events', json_build_object('t', 's', 'run', u.id, "
                "'node', $2::text)::text) FROM u",
                &p, &r);
    if (s == STORE_OK) n = pg_nrows(r);
    pg_clear(r);
    free(payload);
    s = spg_fail(c, s);
    spg_put(st, c);
    return s == STORE_OK ? (int)n : -1;
}

store_status store_pg_runs_queued(store *st, long long **ids, int *n) {
    *ids = NULL;
    *n = 0;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_res *r = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "queued runs", "SELECT id FROM runs WHERE status = 'queued' ORDER BY id", NULL, &r));
    store_ids got = {0};
    for (int i = 0; s == STORE_OK && i < pg_nrows(r); i++)
        if (store_ids_push(&got, pg_get_i64(r, i, 0), "queued runs") < 0) s = STORE_ERROR;
    pg_clear(r);
    spg_put(st, c);
    return store_ids_done(s, &got, ids, n);
}

store_status store_pg_run_counts(store *st, json_t **out) {
    *out = NULL;
    json_t *counts = store_run_counts_zero();
    store_status s = counts ? STORE_OK : spg_fail_msg("run counts: out of memory");
    pg_conn *c = s == STORE_OK ? spg_get(st) : NULL;
    if (s == STORE_OK && !c) s = STORE_ERROR;
    pg_res *r = NULL;
    if (s == STORE_OK)
        s = spg_fail(c, pg_exec(c, "run counts", "SELECT status, count(*) FROM runs GROUP BY status", NULL, &r));
    for (int i = 0; s == STORE_OK && i < pg_nrows(r); i++)
        if (json_object_set_new(counts, pg_get_text(r, i, 0), json_integer(pg_get_i64(r, i, 1))) < 0)
            s = spg_fail_msg("run counts: out of memory");
    pg_clear(r);
    spg_put(st, c);
    return store_list_done(s, counts, 0, out, NULL);
}
