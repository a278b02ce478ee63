/* Probe results and their tables on PostgreSQL: every SQL statement about probes and probe_tables
 * (store_probes.c's twin). */
#include <stdio.h>
#include <stdlib.h>

#include "store/postgres/store_pg.h"

/* One table of a probe (store_probe_tables_insert; ctx: the connection), inside its transaction. */
static store_status insert_table(void *ctx, long long id, long long i, const char *name, const char *columns,
                                 const char *rows) {
    pg_conn *c = ctx;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, id);
    pg_p_int(&p, i);
    pg_p_text(&p, name);
    pg_p_text(&p, columns);
    pg_p_text(&p, rows);
    return spg_fail(c, pg_cmd(c, "insert probe table",
                              "INSERT INTO probe_tables (probe_id, idx, name, columns, rows) VALUES ($1,$2,$3,$4,$5)",
                              &p, NULL));
}

store_status store_pg_probe_insert(store *st, const store_new_probe *pr, long long *id_out) {
    *id_out = 0;
    /* The result without its tables goes into the probe row; the tables into their own rows. */
    char *rest_text;
    json_t *tables;
    if (store_probe_split(pr->result, &rest_text, &tables) < 0) return spg_fail_msg("insert probe: out of memory");
    pg_conn *c = spg_get(st);
    store_status s = c ? spg_fail(c, pg_begin(c)) : STORE_ERROR;
    long long id = -1;
    if (s == STORE_OK) {
        id = spg_next_id(c, "probes");
        if (id < 0) s = STORE_ERROR;
    }
    if (s == STORE_OK) {
        double now = spg_now();
        pg_params p;
        pg_params_init(&p);
        pg_p_text(&p, pr->kind);
        pg_p_text(&p, pr->params_json);
        pg_p_int(&p, pr->seed);
        pg_p_text(&p, pr->status);
        pg_p_text(&p, rest_text);
        pg_p_text(&p, pr->error);
        pg_p_double(&p, now);
        pg_p_double(&p, now);
        if (pr->run_id)
            pg_p_int(&p, pr->run_id);
        else
            pg_p_null(&p);
        pg_p_text(&p, pr->cache_key);
        pg_p_double(&p, pr->duration_ms);
        pg_p_int(&p, id);
        s = pg_cmd(c, "insert probe",
                   "INSERT INTO probes (kind, params, seed, status, result, error, created_at, finished_at, run_id, "
                   "cache_key, duration_ms, id) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)",
                   &p, NULL);
        if (s == STORE_CONFLICT && !pr->run_id) s = STORE_ERROR;
        s = spg_fail(c, s);
    }
    if (s == STORE_OK) s = store_probe_tables_insert(id, tables, insert_table, c);
    if (c) {
        s = spg_fail(c, pg_finish(c, s));
        spg_put(st, c);
    }
    free(rest_text);
    json_decref(tables);
    if (s == STORE_OK) *id_out = id;
    return s;
}

store_status store_pg_probe_find(store *st, const char *kind, const char *cache_key, long long *id_out) {
    *id_out = 0;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, kind);
    pg_p_text(&p, cache_key);
    pg_res *r = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "find probe",
                            "SELECT id FROM probes WHERE kind = $1 AND cache_key = $2 AND status = 'succeeded' "
                            "ORDER BY id DESC LIMIT 1",
                            &p, &r));
    spg_put(st, c);
    if (s == STORE_OK && pg_nrows(r) == 0) s = STORE_NOT_FOUND;
    if (s == STORE_OK) *id_out = pg_get_i64(r, 0, 0);
    pg_clear(r);
    return s;
}

static json_t *table_with_rows(const store_row *r) { return store_probe_table_from_row(r, 1); }
static json_t *table_shape(const store_row *r) { return store_probe_table_from_row(r, 0); }

/* Puts the probe's tables (with rows, or just their shape) back into its result. */
static store_status attach_tables(pg_conn *c, json_t *probe, int with_rows) {
    json_t *result = json_object_get(probe, "result");
    if (!json_is_object(result)) return STORE_OK;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, json_integer_value(json_object_get(probe, "id")));
    pg_res *r = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "probe tables",
                            with_rows ? "SELECT name, columns, rows FROM probe_tables WHERE probe_id = $1 "
                                        "ORDER BY idx"
                                      : "SELECT name, columns, json_array_length(rows::json) FROM probe_tables "
                                        "WHERE probe_id = $1 ORDER BY idx",
                            &p, &r));
    json_t *tables = s == STORE_OK ? json_array() : NULL;
    if (s == STORE_OK && !tables) s = spg_fail_msg("probe tables: out of memory");
    if (s == STORE_OK) s = spg_rows(r, with_rows ? table_with_rows : table_shape, tables, "probe tables");
    pg_clear(r);
    return store_probe_attach_tables(result, tables, s);
}

store_status store_pg_probe_get(store *st, long long id, json_t **out) {
    *out = NULL;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, id);
    pg_res *r = NULL;
    json_t *pr = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "get probe", "SELECT " STORE_PROBE_COLUMNS " FROM probes WHERE id = $1", &p, &r));
    if (s == STORE_OK) s = spg_one(r, store_probe_from_row, &pr, "get probe");
    pg_clear(r);
    if (s == STORE_OK) s = attach_tables(c, pr, 1);
    spg_put(st, c);
    if (s != STORE_OK) {
        json_decref(pr);
        return s;
    }
    *out = pr;
    return STORE_OK;
}

store_status store_pg_probe_list(store *st, const char *kind, int limit, int offset, json_t **out, long long *total) {
    *out = NULL;
    *total = 0;
    json_t *list = json_array();
    if (!list) return spg_fail_msg("list probes: out of memory");
    pg_conn *c = spg_get(st);
    if (!c) {
        json_decref(list);
        return STORE_ERROR;
    }
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, kind);
    pg_p_int(&p, limit);
    pg_p_int(&p, offset);
    pg_res *r = NULL, *cr = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "list probes",
                            "SELECT " STORE_PROBE_COLUMNS " FROM probes WHERE ($1::text IS NULL OR kind = $1::text) "
                            "ORDER BY id DESC LIMIT $2::bigint OFFSET $3::bigint",
                            &p, &r));
    p.n = 1;
    if (s == STORE_OK)
        s = spg_fail(c, pg_exec(c, "count probes",
                                "SELECT count(*) FROM probes WHERE ($1::text IS NULL OR kind = $1::text)", &p, &cr));
    for (int i = 0; s == STORE_OK && i < pg_nrows(r); i++) {
        store_row row = spg_row(r, i);
        json_t *pr = store_probe_from_row(&row);
        if (!pr) {
            s = spg_fail_msg("list probes: out of memory");
            break;
        }
        s = attach_tables(c, pr, 0);
        if (json_array_append_new(list, pr) < 0 && s == STORE_OK) s = spg_fail_msg("list probes: out of memory");
    }
    long long count = s == STORE_OK ? pg_get_i64(cr, 0, 0) : 0;
    pg_clear(r);
    pg_clear(cr);
    spg_put(st, c);
    return store_list_done(s, list, count, out, total);
}

store_status store_pg_probe_table(store *st, long long id, const char *name, json_t **out) {
    *out = NULL;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, id);
    pg_p_text(&p, name);
    pg_res *r = NULL;
    store_status s = spg_fail(c, pg_exec(c, "probe table",
                                         "SELECT name, columns, rows FROM probe_tables WHERE probe_id = $1 "
                                         "AND ($2::text IS NULL OR name = $2::text) ORDER BY idx LIMIT 1",
                                         &p, &r));
    spg_put(st, c);
    if (s == STORE_OK) s = spg_one(r, table_with_rows, out, "probe table");
    pg_clear(r);
    return s;
}
