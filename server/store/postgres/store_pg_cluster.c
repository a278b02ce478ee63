/* Nodes, run leases and artefact records on PostgreSQL (store_nodes.h, and store.h's artefacts):
 * every SQL statement about the nodes and artifacts tables and the lease columns of runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/store_pg.h"

/* The database's clock in Unix seconds: leases and heartbeats never trust a node's clock. */
#define DB_NOW "extract(epoch FROM clock_timestamp())"

store_status store_pg_node_register(store *st, const store_node *n) {
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, n->id);
    pg_p_text(&p, n->host ? n->host : "");
    pg_p_text(&p, n->url ? n->url : "");
    pg_p_text(&p, n->role);
    pg_p_int(&p, n->capacity);
    pg_p_int(&p, n->pid);
    pg_p_text(&p, n->version ? n->version : "");
    store_status s = spg_fail(
        c,
        pg_cmd(c, "register node",
               "INSERT INTO nodes (id, host, url, role, capacity, pid, version, started_at, heartbeat_at, stopped_at) "
               "VALUES ($1, $2, $3, $4, $5, $6, $7, " DB_NOW ", " DB_NOW ", NULL) "
               "ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, url = EXCLUDED.url, role = EXCLUDED.role, "
               "capacity = EXCLUDED.capacity, pid = EXCLUDED.pid, version = EXCLUDED.version, "
               "started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at, stopped_at = NULL",
               &p, NULL));
    spg_put(st, c);
    return s;
}

static store_status node_touch(store *st, const char *id, const char *what, const char *sql) {
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, id);
    long long n = 0;
    store_status s = spg_fail(c, pg_cmd(c, what, sql, &p, &n));
    spg_put(st, c);
    if (s == STORE_OK && n == 0) s = STORE_NOT_FOUND;
    return s;
}

store_status store_pg_node_heartbeat(store *st, const char *node_id) {
    return node_touch(st, node_id, "node heartbeat", "UPDATE nodes SET heartbeat_at = " DB_NOW " WHERE id = $1");
}

store_status store_pg_node_stopped(store *st, const char *node_id) {
    return node_touch(st, node_id, "node stopped",
                      "UPDATE nodes SET stopped_at = " DB_NOW ", heartbeat_at = " DB_NOW " WHERE id = $1");
}

store_status store_pg_node_list(store *st, double stale_s, json_t **out) {
    *out = NULL;
    json_t *list = json_array();
    if (!list) return spg_fail_msg("list nodes: out of memory");
    pg_conn *c = spg_get(st);
    if (!c) {
        json_decref(list);
        return STORE_ERROR;
    }
    pg_params p;
    pg_params_init(&p);
    pg_p_double(&p, stale_s);
    pg_res *r = NULL;
    store_status s = spg_fail(
        c, pg_exec(
               c, "list nodes",
               "SELECT n.id, n.host, n.url, n.role, n.capacity, n.pid, n.version, n.started_at, n.heartbeat_at, " DB_NOW
               " - n.heartbeat_at, n.stopped_at IS NULL AND " DB_NOW " - n.heartbeat_at <= $1::float8, "
               "n.stopped_at, coalesce((SELECT json_agg(r.id ORDER BY r.id) FROM runs r WHERE r.node_id = n.id "
               "AND r.status = 'running')::text, '[]') FROM nodes n ORDER BY n.heartbeat_at DESC, n.id COLLATE \"C\"",
               &p, &r));
    spg_put(st, c);
    if (s == STORE_OK) s = spg_rows(r, store_node_from_row, list, "list nodes");
    pg_clear(r);
    return store_list_done(s, list, 0, out, NULL);
}

store_status store_pg_run_claim(store *st, const char *node_id, double lease_s, store_lease *out) {
    memset(out, 0, sizeof *out);
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, node_id);
    pg_p_double(&p, lease_s);
    pg_p_double(&p, spg_now());
    pg_res *r = NULL;
    /* The oldest claimable run, skipping rows another node is claiming right now. A queued run
     * becomes running here; one whose lease ran out stays running and moves here. One statement:
     * the claim and the status notification commit together. */
    store_status s = spg_fail(
        c,
        pg_exec(c, "claim run",
                "WITH c AS (SELECT id, status FROM runs WHERE status = 'queued' OR (status = 'running' AND "
                "lease_until IS NOT NULL AND lease_until < " DB_NOW ") ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1), "
                "u AS (UPDATE runs r SET status = 'running', node_id = $1, lease_token = nextval('lease_tokens'), "
                "lease_until = " DB_NOW " + $2::float8, attempts = r.attempts + 1, error = NULL, finished_at = NULL, "
                "started_at = CASE WHEN c.status = 'queued' THEN $3::float8 ELSE r.started_at END "
                "FROM c WHERE r.id = c.id RETURNING r.id, r.lease_token, r.attempts, c.status) "
                "SELECT u.id, u.lease_token, u.attempts, u.status = 'running', "
                "pg_notify('attnlab_events', json_build_object('t', 's', 'run', u.id, 'node', $1::text)::text) "
                "FROM u",
                &p, &r));
    spg_put(st, c);
    if (s == STORE_OK && pg_nrows(r) == 0) s = STORE_NOT_FOUND;
    if (s == STORE_OK) {
        out->run_id = pg_get_i64(r, 0, 0);
        out->token = pg_get_i64(r, 0, 1);
        out->attempt = pg_get_int(r, 0, 2);
        out->takeover = pg_get_bool(r, 0, 3);
    }
    pg_clear(r);
    return s;
}

store_status store_pg_run_renew(store *st, long long run_id, long long token, double lease_s, int *cancel) {
    if (cancel) *cancel = 0;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, run_id);
    pg_p_int(&p, token);
    pg_p_double(&p, lease_s);
    pg_res *r = NULL;
    store_status s = spg_fail(c, pg_exec(c, "renew lease",
                                         "UPDATE runs SET lease_until = " DB_NOW " + $3::float8 WHERE id = $1 AND "
                                         "lease_token = $2 AND status = 'running' RETURNING cancel_requested",
                                         &p, &r));
    spg_put(st, c);
    if (s == STORE_OK && pg_nrows(r) == 0) s = STORE_CONFLICT;
    if (s == STORE_OK && cancel) *cancel = pg_get_int(r, 0, 0) != 0;
    pg_clear(r);
    return s;
}

store_status store_pg_run_release(store *st, long long run_id, long long token, const char *to, const char *error) {
    if (strcmp(to, "queued") != 0 && strcmp(to, "interrupted") != 0) return spg_fail_msg("release run: bad status");
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, run_id);
    pg_p_int(&p, token);
    pg_p_text(&p, to);
    pg_p_text(&p, error);
    pg_p_double(&p, spg_now());
    pg_p_text(&p, spg_node(st));
    pg_res *r = NULL;
    char sql[1200];
    snprintf(
        sql, sizeof sql,
        "WITH u AS (UPDATE runs SET status = $3::text, error = $4::text, lease_token = NULL, lease_until = NULL, "
        "finished_at = CASE WHEN $3::text = 'queued' THEN NULL ELSE $5::float8 END WHERE id = $1 AND "
        "lease_token = $2 AND status = 'running' RETURNING id) "
        "SELECT u.id, pg_notify('attnlab_events', json_build_object('t', 's', 'run', u.id, 'node', $6::text)::text)"
        "%s FROM u",
        !strcmp(to, "queued") ? ", pg_notify('attnlab_jobs', u.id::text)" : "");
    store_status s = spg_fail(c, pg_exec(c, "release run", sql, &p, &r));
    spg_put(st, c);
    if (s == STORE_OK && pg_nrows(r) == 0) s = STORE_CONFLICT;
    pg_clear(r);
    return s;
}

store_status store_pg_run_request_cancel(store *st, long long run_id) {
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, run_id);
    pg_p_text(&p, spg_node(st));
    pg_res *r = NULL;
    store_status s = spg_fail(
        c, pg_exec(c, "request cancel",
                   "WITH u AS (UPDATE runs SET cancel_requested = 1 WHERE id = $1 AND status = 'running' RETURNING id, "
                   "node_id) SELECT u.id, pg_notify('attnlab_cancel', json_build_object('run', u.id, 'node', "
                   "u.node_id, 'from', $2::text)::text) FROM u",
                   &p, &r));
    if (s == STORE_OK && pg_nrows(r) == 0) {
        pg_clear(r);
        r = NULL;
        p.n = 1;
        s = spg_fail(c, pg_exec(c, "find run", "SELECT 1 FROM runs WHERE id = $1", &p, &r));
        if (s == STORE_OK) s = pg_nrows(r) ? STORE_CONFLICT : STORE_NOT_FOUND;
    }
    pg_clear(r);
    spg_put(st, c);
    return s;
}

/* ---- artefacts -------------------------------------------------------------------------------- */

store_status store_pg_artifact_put(store *st, const store_artifact *a) {
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    long long token = a->run_id ? spg_held_token(st, a->run_id) : 0;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, a->path);
    pg_p_text(&p, a->kind);
    if (a->run_id)
        pg_p_int(&p, a->run_id);
    else
        pg_p_null(&p);
    pg_p_int(&p, a->step);
    pg_p_int(&p, a->bytes);
    pg_p_text(&p, a->sha256);
    pg_p_double(&p, spg_now());
    pg_p_text(&p, spg_node(st));
    pg_p_int(&p, token);
    /* A checkpoint of a run this node holds is recorded only while the lease is still its own
     * (the run's row is locked meanwhile, so the lease cannot move before the commit). */
    long long n = 0;
    store_status s =
        spg_fail(c, pg_cmd(c, "record artefact",
                           "INSERT INTO artifacts (path, kind, run_id, step, bytes, sha256, created_at, node_id) "
                           "SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE $9::bigint = 0 OR EXISTS (SELECT 1 FROM runs "
                           "WHERE id = $3 AND lease_token = $9::bigint FOR SHARE) "
                           "ON CONFLICT (path) DO UPDATE SET kind = EXCLUDED.kind, run_id = EXCLUDED.run_id, "
                           "step = EXCLUDED.step, bytes = EXCLUDED.bytes, sha256 = EXCLUDED.sha256, "
                           "created_at = EXCLUDED.created_at, node_id = EXCLUDED.node_id",
                           &p, &n));
    spg_put(st, c);
    if (s == STORE_OK && n == 0) {
        s = STORE_CONFLICT;
        store_fail("record artefact: this node no longer holds the run's lease");
    }
    return s;
}

/* An artefact with the node that recorded it (the column after STORE_ARTIFACT_COLUMNS). */
static json_t *artifact_from_row(const store_row *r) {
    json_t *o = store_artifact_from_row(r);
    if (o && json_object_set_new(o, "node", store_col_text(r, 7)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

store_status store_pg_artifact_get(store *st, const char *path, json_t **out) {
    *out = NULL;
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, path);
    pg_res *r = NULL;
    store_status s =
        spg_fail(c, pg_exec(c, "get artefact",
                            "SELECT " STORE_ARTIFACT_COLUMNS ", node_id FROM artifacts WHERE path = $1", &p, &r));
    spg_put(st, c);
    if (s == STORE_OK) s = spg_one(r, artifact_from_row, out, "get artefact");
    pg_clear(r);
    return s;
}
