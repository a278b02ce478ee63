/* Experiments on PostgreSQL: every SQL statement about the experiments table (store_experiments.c's
 * twin). */
#include <stdio.h>
#include <stdlib.h>

#include "store/postgres/store_pg.h"

/* The name experiment e takes (store_new_experiment.rename_if_taken) into name; STORE_CONFLICT when
 * it is in use and may not change. Inside the transaction (a name another node takes meanwhile is
 * caught by the unique index when the row goes in). */
static store_status free_name(pg_conn *c, const store_new_experiment *e, char *name, size_t len) {
    for (int k = 1; k <= (e->rename_if_taken ? 10000 : 1); k++) {
        store_experiment_name_nth(e->name ? e->name : "", k, name, len);
        pg_params p;
        pg_params_init(&p);
        pg_p_text(&p, name);
        pg_res *r = NULL;
        store_status s =
            spg_fail(c, pg_exec(c, "name experiment", "SELECT 1 FROM experiments WHERE name = $1", &p, &r));
        int taken = s == STORE_OK && pg_nrows(r) > 0;
        pg_clear(r);
        if (s != STORE_OK) return s;
        if (!taken) return STORE_OK;
    }
    return STORE_CONFLICT;
}

/* store_runs_insert's backend: a run inserted on the connection of the transaction. */
typedef struct {
    store *st;
    pg_conn *c;
} pg_run_inserter;

static store_status insert_run(void *backend, const store_new_run *run, long long experiment_id, long long *id) {
    pg_run_inserter *ins = backend;
    return store_pg_run_insert(ins->st, ins->c, run, experiment_id, id);
}

store_status store_pg_experiment_create(store *st, const store_new_experiment *e, const store_new_run *runs, size_t n,
                                        long long *exp_id, long long *run_ids) {
    *exp_id = 0;
    for (size_t i = 0; i < n; i++) run_ids[i] = 0;
    long long *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids) return spg_fail_msg("create experiment: out of memory");
    pg_conn *c = spg_get(st);
    if (!c) {
        free(ids);
        return STORE_ERROR;
    }
    store_status s = spg_fail(c, pg_begin(c));
    long long id = -1;
    char name[STORE_EXPERIMENT_NAME_MAX + 16];
    if (s == STORE_OK) s = free_name(c, e, name, sizeof name);
    if (s == STORE_OK) {
        id = spg_next_id(c, "experiments");
        if (id < 0) s = STORE_ERROR;
    }
    if (s == STORE_OK) {
        pg_params p;
        pg_params_init(&p);
        pg_p_text(&p, name);
        pg_p_text(&p, e->preset);
        pg_p_text(&p, e->base_json);
        pg_p_text(&p, e->variants_json);
        pg_p_double(&p, spg_now());
        pg_p_int(&p, id);
        pg_p_int(&p, e->replicates > 1 ? e->replicates : 1);
        s = pg_cmd(c, "insert experiment",
                   "INSERT INTO experiments (name, preset, base_config, variants, created_at, id, replicates) "
                   "VALUES ($1, $2, $3, $4, $5, $6, $7)",
                   &p, NULL);
        s = spg_fail(c, s); /* STORE_CONFLICT: the name was taken meanwhile */
    }
    pg_run_inserter ins = {st, c};
    if (s == STORE_OK) s = store_runs_insert(runs, n, e->name, name, id, insert_run, &ins, ids);
    if (s == STORE_OK && e->idempotency) s = spg_idempotency_put(c, e->idempotency, 0, id);
    s = spg_fail(c, pg_finish(c, s));
    spg_put(st, c);
    return store_runs_created(s, id, exp_id, ids, run_ids, n);
}

store_status store_pg_experiment_add_runs(store *st, long long id, const char *variants_json, int replicates,
                                          const store_new_run *runs, size_t n, long long *run_ids) {
    for (size_t i = 0; i < n; i++) run_ids[i] = 0;
    long long *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids) return spg_fail_msg("add runs to experiment: out of memory");
    pg_conn *c = spg_get(st);
    if (!c) {
        free(ids);
        return STORE_ERROR;
    }
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, variants_json);
    pg_p_int(&p, replicates);
    pg_p_int(&p, id);
    long long changed = 0;
    store_status s = spg_fail(c, pg_begin(c));
    if (s == STORE_OK)
        s = spg_fail(c, pg_cmd(c, "add runs to experiment",
                               "UPDATE experiments SET variants = $1, replicates = $2 WHERE id = $3", &p, &changed));
    if (s == STORE_OK && changed == 0) s = STORE_NOT_FOUND;
    pg_run_inserter ins = {st, c};
    if (s == STORE_OK) s = store_runs_insert(runs, n, NULL, NULL, id, insert_run, &ins, ids);
    s = spg_fail(c, pg_finish(c, s));
    spg_put(st, c);
    return store_runs_created(s, id, NULL, ids, run_ids, n);
}

store_status store_pg_experiment_rename(store *st, long long id, const char *name) {
    return spg_update_by_id(st, "UPDATE experiments SET name = $1 WHERE id = $2", name, id, "rename experiment");
}

store_status store_pg_experiment_delete(store *st, long long id) {
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, id);
    long long n = 0;
    store_status s = spg_fail(c, pg_begin(c));
    if (s == STORE_OK)
        s = spg_fail(c, pg_cmd(c, "detach experiment's runs",
                               "UPDATE runs SET experiment_id = NULL WHERE experiment_id = $1", &p, NULL));
    if (s == STORE_OK) s = spg_fail(c, pg_cmd(c, "delete experiment", "DELETE FROM experiments WHERE id = $1", &p, &n));
    if (s == STORE_OK && n == 0) s = STORE_NOT_FOUND;
    s = spg_fail(c, pg_finish(c, s));
    spg_put(st, c);
    return s;
}

store_status store_pg_experiment_discard(store *st, long long id) {
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, id);
    store_status s = spg_fail(c, pg_begin(c));
    /* The experiment's row is locked first, so no run of it can be claimed meanwhile... */
    pg_res *r = NULL;
    if (s == STORE_OK)
        s = spg_fail(c,
                     pg_exec(c, "discard experiment", "SELECT id FROM experiments WHERE id = $1 FOR UPDATE", &p, &r));
    if (s == STORE_OK && pg_nrows(r) == 0) s = STORE_NOT_FOUND;
    pg_clear(r);
    r = NULL;
    /* ...and its runs are locked too: a claim skips them (SKIP LOCKED) until we are done. */
    if (s == STORE_OK)
        s = spg_fail(c, pg_exec(c, "discard experiment",
                                "SELECT count(*) FILTER (WHERE status <> 'queued') FROM "
                                "(SELECT status FROM runs WHERE experiment_id = $1 FOR UPDATE) x",
                                &p, &r));
    if (s == STORE_OK && pg_get_i64(r, 0, 0) > 0) s = STORE_CONFLICT;
    pg_clear(r);
    if (s == STORE_OK)
        s = spg_fail(c, pg_cmd(c, "discard experiment's runs", "DELETE FROM runs WHERE experiment_id = $1", &p, NULL));
    if (s == STORE_OK)
        s = spg_fail(c, pg_cmd(c, "discard experiment", "DELETE FROM experiments WHERE id = $1", &p, NULL));
    s = spg_fail(c, pg_finish(c, s)); /* commits only a whole discard */
    spg_put(st, c);
    return s;
}

store_status store_pg_experiment_get(store *st, long long id, json_t **out) {
    *out = NULL;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, id);
    pg_res *r = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "get experiment",
                            "SELECT " STORE_EXPERIMENT_COLUMNS " FROM experiments e WHERE e.id = $1", &p, &r));
    spg_put(st, c);
    if (s == STORE_OK) s = spg_one(r, store_experiment_from_row, out, "get experiment");
    pg_clear(r);
    return s;
}

/* The experiments a search keeps: $3 a tsquery (NULL: every experiment). */
#define EXPERIMENT_SEARCH                                                                                              \
    " WHERE $3::text IS NULL OR " STORE_PG_WORDS("e.name") " @@ to_tsquery('simple', $3::text) OR e.id IN (SELECT "    \
                                                           "r.experiment_id FROM runs r WHERE " STORE_PG_RUN_WORDS     \
                                                           " @@ to_tsquery('simple', $3::text))"

store_status store_pg_experiment_list(store *st, int limit, int offset, const char *search, json_t **out,
                                      long long *total) {
    *out = NULL;
    *total = 0;
    char match[STORE_SEARCH_SPELL_MAX];
    if (search && store_search_spell(search, "'", "':*", " & ", match, sizeof match) < 0)
        return spg_fail_msg("list experiments: not a search");
    json_t *list = json_array();
    if (!list) return spg_fail_msg("list experiments: out of memory");
    pg_conn *c = spg_get(st);
    if (!c) {
        json_decref(list);
        return STORE_ERROR;
    }
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, limit);
    pg_p_int(&p, offset);
    pg_p_text(&p, search ? match : NULL);
    pg_res *r = NULL;
    store_status s = spg_fail(c, pg_exec(c, "list experiments",
                                         "SELECT " STORE_EXPERIMENT_COLUMNS ", count(*) OVER () "
                                         "FROM experiments e" EXPERIMENT_SEARCH
                                         " ORDER BY e.id DESC LIMIT $1::bigint OFFSET $2::bigint",
                                         &p, &r));
    long long count = 0;
    if (s == STORE_OK) s = spg_rows(r, store_experiment_from_row, list, "list experiments");
    if (s == STORE_OK && pg_nrows(r) > 0) count = pg_get_i64(r, 0, STORE_EXPERIMENT_COLUMN_COUNT);
    pg_clear(r);
    r = NULL;
    if (s == STORE_OK && json_array_size(list) == 0 && offset > 0) {
        s = spg_fail(c,
                     pg_exec(c, "count experiments",
                             "SELECT count(*), $1::bigint, $2::bigint FROM experiments e" EXPERIMENT_SEARCH, &p, &r));
        if (s == STORE_OK) count = pg_get_i64(r, 0, 0);
        pg_clear(r);
    }
    spg_put(st, c);
    return store_list_done(s, list, count, out, total);
}
