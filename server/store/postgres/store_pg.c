/* The PostgreSQL backend of the store: the connection pool, the migrations (db/migrations/pg), the
 * helpers the resource files share (store_pg.h) and the thread that hears other nodes. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/postgres/store_pg.h"
#include "store/store_migrations.h"
#include "util/log.h"

/* Generated from db/migrations/pg by scripts/embed_migrations.sh. */
extern const store_migration store_pg_migrations[];
extern const int store_pg_migration_count;

#define POOL_MAX 16
#define MAX_HELD 64
#define CONNECT_TIMEOUT_S 5
/* After the database could not be reached, requests fail at once for this long instead of each
 * waiting for a connection attempt of its own. */
#define DOWN_BACKOFF_S 1.0
/* Serialises migrations when several nodes start at once (pg_advisory_lock key). */
#define MIGRATION_LOCK_KEY 7746116108979

typedef struct {
    store base; /* first: a store * is a store_pg * */
    char url[2048];
    char masked[2048];
    pthread_mutex_t lock;
    pthread_cond_t free_cv;
    pg_conn *conns[POOL_MAX];
    int busy[POOL_MAX];
    int n, max;
    double down_until;
    /* The health check's own connection (outside the pool, so that it answers while every pooled
     * connection is busy), used under ping_lock. */
    pg_conn *pinger;
    pthread_mutex_t ping_lock;
    char node[128];
    pthread_mutex_t held_lock;
    struct {
        long long run_id, token;
    } held[MAX_HELD];
    int n_held;
    /* the listener */
    pthread_t listener;
    int listening;
    atomic_int stop;
    store_notify_fn notify_fn;
    void *notify_ctx;
} store_pg;

static const store_ops pg_ops;

static store_pg *pgs(store *st) { return (store_pg *)st; }

double spg_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static double mono_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

store_status spg_fail(pg_conn *c, store_status s) {
    if (s == STORE_OK || s == STORE_NOT_FOUND || s == STORE_CONFLICT) return s;
    int lost = pg_lost(c);
    return store_fail_as(lost, "%s%s", pg_error(c), lost ? " (the database is unreachable)" : "");
}

/* ---- the pool -------------------------------------------------------------------------------- */

/* *c made usable: left as it is when alive, else connected (a NULL *c: a new connection) or
 * reconnected, unless the database was found unreachable less than DOWN_BACKOFF_S ago (down_until).
 * 0: it was alive; 1: it is now; -1: it is not, with the reason in err (*c may have changed). */
static int conn_ready(store_pg *p, pg_conn **c, double down_until, char *err, size_t errlen) {
    if (*c && pg_alive(*c)) return 0;
    if (mono_now() < down_until) {
        snprintf(err, errlen, "the database %s is unreachable", p->masked);
    } else if (!*c) {
        *c = pg_connect(p->url, CONNECT_TIMEOUT_S, "attnlabd", err, errlen);
    } else if (pg_reconnect(*c, 0) != STORE_OK) {
        snprintf(err, errlen, "the database %s is unreachable: %s", p->masked, pg_error(*c));
    } else {
        log_info("store: reconnected to %s", p->masked);
    }
    return *c && pg_alive(*c) ? 1 : -1;
}

/* After conn_ready: the database reached (its back-off cleared) or not (the back-off started). */
static void mark_reached(store_pg *p, int reached) {
    pthread_mutex_lock(&p->lock);
    if (reached)
        p->down_until = 0;
    else if (mono_now() >= p->down_until)
        p->down_until = mono_now() + DOWN_BACKOFF_S;
    pthread_mutex_unlock(&p->lock);
}

pg_conn *spg_get(store *st) {
    store_pg *p = pgs(st);
    pthread_mutex_lock(&p->lock);
    int slot = -1;
    for (;;) {
        for (int i = 0; i < p->n; i++)
            if (!p->busy[i]) {
                slot = i;
                break;
            }
        if (slot >= 0 || p->n < p->max) break;
        pthread_cond_wait(&p->free_cv, &p->lock);
    }
    if (slot < 0) { /* grow: the new slot is reserved while it connects */
        slot = p->n++;
        p->conns[slot] = NULL;
    }
    p->busy[slot] = 1;
    double down_until = p->down_until;
    pthread_mutex_unlock(&p->lock);

    pg_conn *c = p->conns[slot];
    char err[600];
    int ready = conn_ready(p, &c, down_until, err, sizeof err);
    if (ready != 0) {
        pthread_mutex_lock(&p->lock);
        p->conns[slot] = c;
        if (ready < 0) {
            p->busy[slot] = 0;
            pthread_cond_signal(&p->free_cv);
        }
        pthread_mutex_unlock(&p->lock);
        mark_reached(p, ready > 0);
    }
    if (ready < 0) {
        store_fail_as(1, "%s", err);
        return NULL;
    }
    return c;
}

void spg_put(store *st, pg_conn *c) {
    if (!c) return;
    store_pg *p = pgs(st);
    if (pg_in_transaction(c)) pg_cmd(c, "rollback", "ROLLBACK", NULL, NULL);
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n; i++)
        if (p->conns[i] == c) {
            p->busy[i] = 0;
            break;
        }
    pthread_cond_signal(&p->free_cv);
    pthread_mutex_unlock(&p->lock);
}

/* ---- helpers ------------------------------------------------------------------------------------ */

const char *spg_node(store *st) { return pgs(st)->node; }

void store_pg_set_node(store *st, const char *node_id) {
    snprintf(pgs(st)->node, sizeof pgs(st)->node, "%s", node_id ? node_id : "");
}

long long spg_held_token(store *st, long long run_id) {
    store_pg *p = pgs(st);
    long long t = 0;
    pthread_mutex_lock(&p->held_lock);
    for (int i = 0; i < p->n_held; i++)
        if (p->held[i].run_id == run_id) t = p->held[i].token;
    pthread_mutex_unlock(&p->held_lock);
    return t;
}

void store_pg_lease_hold(store *st, long long run_id, long long token) {
    store_pg *p = pgs(st);
    pthread_mutex_lock(&p->held_lock);
    int i = 0;
    while (i < p->n_held && p->held[i].run_id != run_id) i++;
    if (i == p->n_held && p->n_held < MAX_HELD) p->n_held++;
    if (i < p->n_held) {
        p->held[i].run_id = run_id;
        p->held[i].token = token;
    } else {
        log_error("store: more than %d leases held at once; run %lld is not fenced", MAX_HELD, run_id);
    }
    pthread_mutex_unlock(&p->held_lock);
}

void store_pg_lease_drop(store *st, long long run_id) {
    store_pg *p = pgs(st);
    pthread_mutex_lock(&p->held_lock);
    for (int i = 0; i < p->n_held; i++)
        if (p->held[i].run_id == run_id) {
            p->held[i] = p->held[--p->n_held];
            break;
        }
    pthread_mutex_unlock(&p->held_lock);
}

store_status spg_notify(pg_conn *c, const char *channel, const char *payload) {
    pg_params q;
    pg_params_init(&q);
    pg_p_text(&q, channel);
    pg_p_text(&q, payload);
    return pg_cmd(c, "notify", "SELECT pg_notify($1, $2)", &q, NULL);
}

/* ---- rows (store_rows.h) ----------------------------------------------------------------------- */

static const pg_res *res_of(const store_row *r) { return r->res; }
static int row_is_null(const store_row *r, int col) { return pg_get_isnull(res_of(r), r->row, col); }
static const char *row_text(const store_row *r, int col) { return pg_get_text(res_of(r), r->row, col); }
static long long row_i64(const store_row *r, int col) { return pg_get_i64(res_of(r), r->row, col); }
static double row_real(const store_row *r, int col) { return pg_get_double(res_of(r), r->row, col); }
static int row_boolean(const store_row *r, int col) { return pg_get_bool(res_of(r), r->row, col); }

static const store_row_ops row_ops = {row_is_null, row_text, row_i64, row_real, row_boolean};

store_status spg_update_by_id(store *st, const char *sql, const char *value, long long id, const char *what) {
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, value);
    pg_p_int(&p, id);
    pg_conn *c = spg_get(st);
    if (!c) return STORE_ERROR;
    long long n = 0;
    store_status s = pg_cmd(c, what, sql, &p, &n);
    if (s == STORE_OK && n == 0) s = STORE_NOT_FOUND;
    s = spg_fail(c, s);
    spg_put(st, c);
    return s;
}

store_row spg_row(const pg_res *r, int i) { return (store_row){.ops = &row_ops, .res = r, .row = i}; }

store_status spg_rows(const pg_res *r, json_t *(*make)(const store_row *), json_t *list, const char *what) {
    for (int i = 0; i < pg_nrows(r); i++) {
        store_row row = spg_row(r, i);
        if (json_array_append_new(list, make(&row)) < 0) return store_fail("%s: out of memory", what);
    }
    return STORE_OK;
}

store_status spg_one(const pg_res *r, json_t *(*make)(const store_row *), json_t **out, const char *what) {
    if (pg_nrows(r) == 0) return STORE_NOT_FOUND;
    store_row row = spg_row(r, 0);
    *out = make(&row);
    return *out ? STORE_OK : store_fail("%s: out of memory", what);
}

/* Appends s quoted as an array element to buf (grown); -1 when out of memory. */
static int append_element(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t need = *len + 2 * strlen(s) + 4;
    if (need > *cap) {
        size_t grown = *cap ? *cap : 64;
        while (grown < need) grown *= 2;
        char *b = realloc(*buf, grown);
        if (!b) return -1;
        *buf = b;
        *cap = grown;
    }
    char *o = *buf + *len;
    if (*len > 1) *o++ = ',';
    *o++ = '"';
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\') *o++ = '\\';
        *o++ = *p;
    }
    *o++ = '"';
    *o = 0;
    *len = (size_t)(o - *buf);
    return 0;
}

static char *array_close(char *buf, size_t len) {
    char *b = realloc(buf, len + 2);
    if (!b) {
        free(buf);
        return NULL;
    }
    b[len] = '}';
    b[len + 1] = 0;
    return b;
}

char *spg_array(const char *const *items, size_t n) {
    size_t len = 1, cap = 64;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    buf[0] = '{';
    buf[1] = 0;
    for (size_t i = 0; i < n; i++)
        if (append_element(&buf, &len, &cap, items[i] ? items[i] : "") < 0) {
            free(buf);
            return NULL;
        }
    return array_close(buf, len);
}

char *spg_array_json(const json_t *strings) {
    size_t len = 1, cap = 64;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    buf[0] = '{';
    buf[1] = 0;
    size_t i;
    json_t *v;
    json_array_foreach(strings, i, v) {
        if (json_is_string(v) && append_element(&buf, &len, &cap, json_string_value(v)) < 0) {
            free(buf);
            return NULL;
        }
    }
    return array_close(buf, len);
}

long long spg_next_id(pg_conn *c, const char *table) {
    pg_params q;
    pg_params_init(&q);
    pg_p_text(&q, table);
    pg_res *r = NULL;
    store_status s =
        pg_exec(c, "next id", "UPDATE id_counters SET last = last + 1 WHERE name = $1 RETURNING last", &q, &r);
    long long id = -1;
    if (s != STORE_OK)
        spg_fail(c, s == STORE_CONFLICT ? STORE_ERROR : s);
    else if (pg_nrows(r) != 1)
        spg_fail_msg("next id: no id counter for this table");
    else
        id = pg_get_i64(r, 0, 0);
    pg_clear(r);
    return id;
}

/* ---- opening and migrations ---------------------------------------------------------------------- */

/* The version the database is at: 0 for an empty database, -1 after an error (err set). */
static int read_version(pg_conn *c, char *err, size_t errlen) {
    pg_res *r = NULL;
    if (pg_exec(c, "schema",
                "SELECT to_regclass('attnlab_schema') IS NOT NULL, "
                "(SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema())",
                NULL, &r) != STORE_OK) {
        snprintf(err, errlen, "%s", pg_error(c));
        return -1;
    }
    int has = pg_get_bool(r, 0, 0);
    long long tables = pg_get_i64(r, 0, 1);
    pg_clear(r);
    if (!has) {
        if (tables > 0) {
            snprintf(err, errlen,
                     "the database holds %lld table(s) but no attnlab schema: it is not an attnlab database "
                     "(give an empty database or one attnlabd made)",
                     tables);
            return -1;
        }
        return 0;
    }
    if (pg_exec(c, "schema version", "SELECT coalesce(max(version), 0) FROM attnlab_schema", NULL, &r) != STORE_OK) {
        snprintf(err, errlen, "%s", pg_error(c));
        return -1;
    }
    int v = pg_get_int(r, 0, 0);
    pg_clear(r);
    return v;
}

/* Each migration and its row in attnlab_schema commit together; nodes starting together take
 * turns (an advisory lock), and each reads the version again once it has the lock. */
static store_status migrate(pg_conn *c, char *err, size_t errlen) {
    if (store_pg_migration_count != store_migration_count) {
        snprintf(err, errlen, "this attnlabd was built with %d PostgreSQL migrations but %d SQLite ones",
                 store_pg_migration_count, store_migration_count);
        return STORE_ERROR;
    }
    pg_params q;
    pg_params_init(&q);
    pg_p_int(&q, MIGRATION_LOCK_KEY);
    if (pg_cmd(c, "lock", "SELECT pg_advisory_lock($1::bigint)", &q, NULL) != STORE_OK) {
        snprintf(err, errlen, "%s", pg_error(c));
        return STORE_ERROR;
    }
    store_status s = STORE_OK;
    int version = read_version(c, err, errlen);
    if (version < 0) {
        s = STORE_ERROR;
    } else if (version > store_pg_migration_count) {
        snprintf(err, errlen,
                 "the database is at schema version %d but this attnlabd knows only up to %d; "
                 "use a newer attnlabd or another database",
                 version, store_pg_migration_count);
        s = STORE_TOO_NEW;
    }
    for (int v = version; s == STORE_OK && v < store_pg_migration_count; v++) {
        pg_params b;
        pg_params_init(&b);
        pg_p_int(&b, v + 1);
        pg_p_text(&b, store_pg_migrations[v].name);
        pg_p_double(&b, spg_now());
        s = pg_begin(c);
        if (s == STORE_OK && v == 0)
            s = pg_exec_script(c, "schema table",
                               "CREATE TABLE attnlab_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                               "applied_at DOUBLE PRECISION NOT NULL)");
        if (s == STORE_OK) s = pg_exec_script(c, store_pg_migrations[v].name, store_pg_migrations[v].sql);
        if (s == STORE_OK)
            s = pg_cmd(c, "schema version",
                       "INSERT INTO attnlab_schema (version, name, applied_at) VALUES ($1, $2, $3)", &b, NULL);
        s = pg_finish(c, s);
        if (s != STORE_OK) {
            snprintf(err, errlen, "migration %s failed: %s", store_pg_migrations[v].name, pg_error(c));
            s = STORE_ERROR;
        } else {
            log_info("store: applied migration pg/%s", store_pg_migrations[v].name);
        }
    }
    if (pg_cmd(c, "unlock", "SELECT pg_advisory_unlock($1::bigint)", &q, NULL) != STORE_OK && s == STORE_OK) {
        snprintf(err, errlen, "%s", pg_error(c));
        s = STORE_ERROR;
    }
    return s;
}

store_status store_pg_open(store **out, const char *url, char *err, size_t errlen) {
    *out = NULL;
    if (strlen(url) >= sizeof((store_pg *)0)->url) {
        snprintf(err, errlen, "the database URL is too long");
        return STORE_ERROR;
    }
    char masked[2048];
    pg_mask_url(url, masked, sizeof masked);
    pg_conn *c = pg_connect(url, CONNECT_TIMEOUT_S, "attnlabd", err, errlen);
    if (!c) return STORE_ERROR;
    pg_res *r = NULL;
    if (pg_exec(c, "read-only check", "SELECT current_setting('transaction_read_only') = 'on'", NULL, &r) != STORE_OK) {
        snprintf(err, errlen, "%s: %s", masked, pg_error(c));
        pg_close(c);
        return STORE_ERROR;
    }
    int read_only = pg_get_bool(r, 0, 0);
    pg_clear(r);
    if (read_only) {
        snprintf(err, errlen, "%s is read-only (a standby?): attnlabd must be able to write its database", masked);
        pg_close(c);
        return STORE_ERROR;
    }
    char why[1024];
    store_status s = migrate(c, why, sizeof why);
    if (s != STORE_OK) {
        snprintf(err, errlen, "%s: %s", masked, why);
        pg_close(c);
        return s;
    }
    store_pg *p = calloc(1, sizeof *p);
    if (!p || pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        pg_close(c);
        snprintf(err, errlen, "out of memory");
        return STORE_ERROR;
    }
    pthread_cond_init(&p->free_cv, NULL);
    pthread_mutex_init(&p->held_lock, NULL);
    pthread_mutex_init(&p->ping_lock, NULL);
    snprintf(p->url, sizeof p->url, "%s", url);
    snprintf(p->masked, sizeof p->masked, "%s", masked);
    const char *pool = getenv("ATTNLAB_DB_POOL");
    p->max = pool && atoi(pool) > 0 ? atoi(pool) : 8;
    if (p->max > POOL_MAX) p->max = POOL_MAX;
    p->conns[0] = c;
    p->n = 1;
    atomic_init(&p->stop, 0);
    p->base.ops = &pg_ops;
    *out = &p->base;
    return STORE_OK;
}

static void pg_store_close(store *st) {
    store_pg *p = pgs(st);
    if (p->listening) {
        atomic_store(&p->stop, 1);
        pthread_join(p->listener, NULL);
    }
    for (int i = 0; i < p->n; i++) pg_close(p->conns[i]);
    if (p->pinger) pg_close(p->pinger);
    pthread_mutex_destroy(&p->ping_lock);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->free_cv);
    pthread_mutex_destroy(&p->held_lock);
    free(p);
}

int store_pg_schema_version(store *st) {
    pg_conn *c = spg_get(st);
    if (!c) return -1;
    char err[256];
    int v = read_version(c, err, sizeof err);
    spg_put(st, c);
    return v;
}

/* On the health check's own connection: health answers while every pooled connection is busy. */
store_status store_pg_ping(store *st) {
    store_pg *p = pgs(st);
    pthread_mutex_lock(&p->ping_lock);
    pthread_mutex_lock(&p->lock);
    double down_until = p->down_until;
    pthread_mutex_unlock(&p->lock);
    char err[600];
    int ready = conn_ready(p, &p->pinger, down_until, err, sizeof err);
    if (ready != 0) mark_reached(p, ready > 0);
    if (ready < 0) {
        pthread_mutex_unlock(&p->ping_lock);
        return store_fail_as(1, "%s", err);
    }
    pg_conn *c = p->pinger;
    pg_res *r = NULL;
    store_status s = pg_exec(c, "ping",
                             "SELECT (SELECT coalesce(max(version), 0) FROM attnlab_schema), "
                             "current_setting('transaction_read_only') = 'on'",
                             NULL, &r);
    if (s != STORE_OK)
        s = spg_fail(c, STORE_ERROR);
    else if (pg_get_int(r, 0, 0) != store_pg_migration_count)
        s = spg_fail_msg("the database is not at this attnlabd's schema version");
    else if (pg_get_bool(r, 0, 1))
        s = spg_fail_msg("the database is read-only");
    pg_clear(r);
    pthread_mutex_unlock(&p->ping_lock);
    return s;
}

/* ---- hearing other nodes ----------------------------------------------------------------------- */

typedef struct {
    store_pg *p;
} listen_ctx;

static void deliver(void *ctx, const char *channel, const char *payload, int sender_pid) {
    store_pg *p = ctx;
    (void)sender_pid;
    /* Our own notifications come back to us too: the payload names the node that sent them. */
    if (p->node[0] && payload[0] == '{') {
        json_t *o = json_loads(payload, 0, NULL);
        const char *from = json_string_value(json_object_get(o, "node"));
        int own = from && !strcmp(from, p->node) && strcmp(channel, "attnlab_cancel") != 0;
        json_decref(o);
        if (own) return;
    }
    p->notify_fn(p->notify_ctx, channel, payload);
}

static void *listen_loop(void *arg) {
    store_pg *p = arg;
    pg_conn *c = NULL;
    int had_connection = 0;
    while (!atomic_load(&p->stop)) {
        if (!c || !pg_alive(c)) {
            char err[600];
            if (!c)
                c = pg_connect(p->url, CONNECT_TIMEOUT_S, "attnlabd listener", err, sizeof err);
            else if (pg_reconnect(c, 0) != STORE_OK)
                snprintf(err, sizeof err, "%s", pg_error(c));
            if (!c || !pg_alive(c) ||
                pg_exec_script(c, "listen", "LISTEN attnlab_jobs; LISTEN attnlab_events; LISTEN attnlab_cancel") !=
                    STORE_OK) {
                if (c && pg_alive(c)) snprintf(err, sizeof err, "%s", pg_error(c));
                log_warn("store: cannot listen for other nodes (retrying): %s", err);
                for (int i = 0; i < 10 && !atomic_load(&p->stop); i++) usleep(100 * 1000);
                continue;
            }
            if (had_connection) {
                log_info("store: listening for other nodes again");
                p->notify_fn(p->notify_ctx, "reconnected", "");
            }
            had_connection = 1;
        }
        int r = pg_wait_readable(c, 200);
        if (r > 0 && pg_notifications(c, deliver, p) < 0)
            log_warn("store: the listening connection broke: %s", pg_error(c));
        if (r < 0) usleep(100 * 1000);
    }
    pg_close(c);
    return NULL;
}

store_status store_pg_listen(store *st, store_notify_fn fn, void *ctx) {
    store_pg *p = pgs(st);
    if (p->listening) return spg_fail_msg("listen: already listening");
    p->notify_fn = fn;
    p->notify_ctx = ctx;
    if (pthread_create(&p->listener, NULL, listen_loop, p) != 0) return spg_fail_msg("listen: cannot start a thread");
    p->listening = 1;
    return STORE_OK;
}

/* ---- the backend's table ------------------------------------------------------------------------ */

static const store_ops pg_ops = {
    .name = "postgresql",
    .set_node = store_pg_set_node,
    .lease_hold = store_pg_lease_hold,
    .lease_drop = store_pg_lease_drop,
    .close = pg_store_close,
    .shared = 1,
    /* clang-format off */
    STORE_CONTRACT(STORE_FILL, store_pg_)
    STORE_SHARED_CONTRACT(STORE_FILL, store_pg_)
    /* clang-format on */
};
