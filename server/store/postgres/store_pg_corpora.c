/* The corpus catalogue on PostgreSQL: every SQL statement about the corpora table
 * (store_corpora.c's twin). */
#include <stdio.h>
#include <stdlib.h>

#include "store/postgres/store_pg.h"

static store_status corpus_write(store *st, const store_corpus *c, int replace) {
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, c->name);
    pg_p_text(&p, c->source ? c->source : "");
    pg_p_text(&p, c->tokenizer);
    pg_p_int(&p, c->documents);
    pg_p_int(&p, c->bytes);
    pg_p_int(&p, c->tokens);
    pg_p_text(&p, c->status);
    pg_p_text(&p, c->error);
    pg_p_int(&p, c->builtin);
    pg_p_double(&p, spg_now());
    pg_p_text(&p, c->task_json);
    char sql[1000];
    snprintf(
        sql, sizeof sql,
        "INSERT INTO corpora (name, source, tokenizer, documents, bytes, tokens, status, error, builtin, created_at, "
        "task) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)%s",
        replace ? " ON CONFLICT (name) DO UPDATE SET source = EXCLUDED.source, tokenizer = EXCLUDED.tokenizer, "
                  "documents = EXCLUDED.documents, bytes = EXCLUDED.bytes, tokens = EXCLUDED.tokens, "
                  "status = EXCLUDED.status, error = EXCLUDED.error, builtin = EXCLUDED.builtin, "
                  "created_at = EXCLUDED.created_at, task = EXCLUDED.task"
                : "");
    pg_conn *k = spg_get(st);
    if (!k) return STORE_ERROR;
    store_status s = spg_fail(k, pg_cmd(k, "write corpus", sql, &p, NULL));
    spg_put(st, k);
    return s;
}

store_status store_pg_corpus_put(store *st, const store_corpus *c) { return corpus_write(st, c, 1); }
store_status store_pg_corpus_create(store *st, const store_corpus *c) { return corpus_write(st, c, 0); }

store_status store_pg_corpus_get(store *st, const char *name, json_t **out) {
    *out = NULL;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, name);
    pg_res *r = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "get corpus", "SELECT " STORE_CORPUS_COLUMNS " FROM corpora c WHERE name = $1", &p, &r));
    spg_put(st, c);
    if (s == STORE_OK) s = spg_one(r, store_corpus_from_row, out, "get corpus");
    pg_clear(r);
    return s;
}

store_status store_pg_corpus_list(store *st, json_t **out) {
    *out = NULL;
    json_t *list = json_array();
    if (!list) return spg_fail_msg("list corpora: out of memory");
    pg_conn *c = spg_get(st);
    if (!c) {
        json_decref(list);
        return STORE_ERROR;
    }
    pg_res *r = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "list corpora",
                            "SELECT " STORE_CORPUS_COLUMNS " FROM corpora c ORDER BY builtin DESC, name COLLATE \"C\"",
                            NULL, &r));
    spg_put(st, c);
    if (s == STORE_OK) s = spg_rows(r, store_corpus_from_row, list, "list corpora");
    pg_clear(r);
    return store_list_done(s, list, 0, out, NULL);
}

store_status store_pg_corpus_delete(store *st, const char *name) {
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, name);
    long long n = 0;
    store_status s = spg_fail(c, pg_cmd(c, "delete corpus",
                                        "DELETE FROM corpora WHERE name = $1 AND builtin = 0 "
                                        "AND NOT EXISTS (SELECT 1 FROM runs WHERE corpus = $1)",
                                        &p, &n));
    if (s == STORE_OK && n == 0) {
        pg_res *r = NULL;
        s = spg_fail(c, pg_exec(c, "find corpus", "SELECT 1 FROM corpora WHERE name = $1", &p, &r));
        if (s == STORE_OK) s = pg_nrows(r) ? STORE_CONFLICT : STORE_NOT_FOUND; /* built in or in use */
        pg_clear(r);
    }
    spg_put(st, c);
    return s;
}

store_status store_pg_corpora_fail_tokenizing(store *st, const char *error, int *n) {
    *n = 0;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, error);
    pg_p_text(&p, spg_node(st));
    long long changed = 0;
    /* With several nodes, an upload still tokenizing may be another node's work in progress:
     * only those of nodes that are not alive any more are failed. */
    store_status s = spg_fail(c, pg_cmd(c, "recover corpora",
                                        "UPDATE corpora SET status = 'failed', error = $1 WHERE status = 'tokenizing' "
                                        "AND NOT EXISTS (SELECT 1 FROM nodes WHERE stopped_at IS NULL AND "
                                        "heartbeat_at > extract(epoch FROM clock_timestamp()) - 30 AND id <> $2)",
                                        &p, &changed));
    spg_put(st, c);
    if (s == STORE_OK) *n = (int)changed;
    return s;
}
