/* The libpq layer of the PostgreSQL backend: see pg.h. */
#include "store/postgres/pg.h"

#include <errno.h>
#include <libpq-fe.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pg_conn {
    PGconn *conn;
    char err[512];
    char sqlstate[6];
    int lost;
};

struct pg_res {
    PGresult *r;
};

/* ---- messages ----------------------------------------------------------------------------- */

void pg_mask_url(const char *url, char *buf, size_t len) {
    if (!len) return;
    snprintf(buf, len, "%s", url ? url : "");
    /* scheme://user:password@host: the password runs from the ':' after the user to the last '@'
     * before the path. */
    char *scheme = strstr(buf, "://");
    if (!scheme) return;
    char *auth = scheme + 3;
    char *path = strchr(auth, '/');
    char *at = NULL;
    for (char *p = auth; *p && (!path || p < path); p++)
        if (*p == '@') at = p;
    if (!at) return;
    char *colon = memchr(auth, ':', (size_t)(at - auth));
    if (!colon) return;
    char rest[1024];
    snprintf(rest, sizeof rest, "%s", at);
    size_t keep = (size_t)(colon + 1 - buf);
    if (keep < len) snprintf(buf + keep, len - keep, "***%s", rest);
}

/* libpq messages end in a newline and may carry DETAIL/HINT lines: keep the first line. */
static void first_line(char *s) {
    s[strcspn(s, "\n")] = 0;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\r')) s[--n] = 0;
}

static void set_error(pg_conn *c, const char *what, const char *msg, const char *state) {
    snprintf(c->err, sizeof c->err, "%s: %s", what, msg && *msg ? msg : "unknown error");
    first_line(c->err);
    snprintf(c->sqlstate, sizeof c->sqlstate, "%s", state ? state : "");
    c->lost = (state && pg_sqlstate_is_lost(state)) || !c->conn || PQstatus(c->conn) != CONNECTION_OK;
}

const char *pg_error(const pg_conn *c) { return c ? c->err : "no connection"; }
const char *pg_sqlstate(const pg_conn *c) { return c ? c->sqlstate : ""; }
int pg_lost(const pg_conn *c) { return !c || c->lost; }

int pg_sqlstate_is_lost(const char *s) {
    if (!s) return 0;
    return !strncmp(s, "08", 2) || !strcmp(s, "57P01") || !strcmp(s, "57P02") || !strcmp(s, "57P03");
}

store_status pg_status_of_sqlstate(const char *s) {
    if (!s) return STORE_ERROR;
    if (!strcmp(s, "23505") || !strcmp(s, "23P01") || !strcmp(s, "23503") || !strcmp(s, "40001") || !strcmp(s, "40P01"))
        return STORE_CONFLICT;
    return STORE_ERROR;
}

/* ---- connecting ---------------------------------------------------------------------------- */

static void ignore_notice(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static PGconn *open_conn(const char *url, int timeout_s, const char *app_name) {
    char timeout[16], user_timeout[16];
    snprintf(timeout, sizeof timeout, "%d", timeout_s > 0 ? timeout_s : 5);
    snprintf(user_timeout, sizeof user_timeout, "%d", (timeout_s > 0 ? timeout_s : 5) * 2000);
    /* The URL comes first and is expanded (expand_dbname); the keywords after it override. */
    const char *keys[] = {"dbname",           "connect_timeout",  "application_name",
                          "keepalives",       "keepalives_idle",  "keepalives_interval",
                          "keepalives_count", "tcp_user_timeout", NULL};
    const char *vals[] = {url, timeout, app_name ? app_name : "attnlabd", "1", "5", "2", "3", user_timeout, NULL};
    return PQconnectdbParams(keys, vals, 1);
}

pg_conn *pg_connect(const char *url, int timeout_s, const char *application_name, char *err, size_t errlen) {
    char masked[512];
    pg_mask_url(url, masked, sizeof masked);
    pg_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->conn = open_conn(url, timeout_s, application_name);
    if (!c->conn) {
        snprintf(err, errlen, "cannot connect to %s: out of memory", masked);
        free(c);
        return NULL;
    }
    if (PQstatus(c->conn) != CONNECTION_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", PQerrorMessage(c->conn));
        first_line(msg);
        snprintf(err, errlen, "cannot connect to %s: %s", masked, msg[0] ? msg : "connection refused");
        PQfinish(c->conn);
        free(c);
        return NULL;
    }
    /* Notices (e.g. "relation already exists, skipping") are not errors: keep them off stderr. */
    PQsetNoticeProcessor(c->conn, ignore_notice, NULL);
    return c;
}

void pg_close(pg_conn *c) {
    if (!c) return;
    if (c->conn) PQfinish(c->conn);
    free(c);
}

int pg_alive(pg_conn *c) { return c && c->conn && PQstatus(c->conn) == CONNECTION_OK; }

store_status pg_reconnect(pg_conn *c, int force) {
    if (!c || !c->conn) return STORE_ERROR;
    if (!force && PQstatus(c->conn) == CONNECTION_OK) return STORE_OK;
    PQreset(c->conn);
    if (PQstatus(c->conn) != CONNECTION_OK) {
        set_error(c, "reconnect", PQerrorMessage(c->conn), "08006");
        return STORE_ERROR;
    }
    PQsetNoticeProcessor(c->conn, ignore_notice, NULL);
    c->lost = 0;
    c->err[0] = 0;
    c->sqlstate[0] = 0;
    return STORE_OK;
}

int pg_backend_pid(pg_conn *c) { return pg_alive(c) ? PQbackendPID(c->conn) : 0; }

/* ---- parameters ------------------------------------------------------------------------------ */

void pg_params_init(pg_params *p) { memset(p, 0, sizeof *p); }

void pg_p_text(pg_params *p, const char *s) {
    if (p->n >= PG_MAX_PARAMS) {
        p->overflow = 1;
        return;
    }
    p->v[p->n++] = s;
}

void pg_p_null(pg_params *p) { pg_p_text(p, NULL); }

void pg_p_int(pg_params *p, long long v) {
    if (p->n >= PG_MAX_PARAMS) {
        p->overflow = 1;
        return;
    }
    snprintf(p->num[p->n], sizeof p->num[p->n], "%lld", v);
    p->v[p->n] = p->num[p->n];
    p->n++;
}

void pg_p_double(pg_params *p, double v) {
    if (p->n >= PG_MAX_PARAMS) {
        p->overflow = 1;
        return;
    }
    if (isnan(v))
        snprintf(p->num[p->n], sizeof p->num[p->n], "NaN");
    else if (isinf(v))
        snprintf(p->num[p->n], sizeof p->num[p->n], "%sInfinity", v < 0 ? "-" : "");
    else
        snprintf(p->num[p->n], sizeof p->num[p->n], "%.17g", v);
    p->v[p->n] = p->num[p->n];
    p->n++;
}

/* ---- statements ------------------------------------------------------------------------------ */

store_status pg_exec(pg_conn *c, const char *what, const char *sql, const pg_params *params, pg_res **out) {
    if (out) *out = NULL;
    if (!c || !c->conn) return STORE_ERROR;
    if (params && params->overflow) {
        set_error(c, what, "too many parameters for one statement", NULL);
        c->lost = 0;
        return STORE_ERROR;
    }
    if (PQstatus(c->conn) != CONNECTION_OK) {
        set_error(c, what, "the connection to the database is broken", "08006");
        return STORE_ERROR;
    }
    PGresult *r = PQexecParams(c->conn, sql, params ? params->n : 0, NULL, params ? params->v : NULL, NULL, NULL, 0);
    if (!r) {
        set_error(c, what, PQerrorMessage(c->conn), PQstatus(c->conn) != CONNECTION_OK ? "08006" : NULL);
        return STORE_ERROR;
    }
    ExecStatusType es = PQresultStatus(r);
    if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK) {
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
        set_error(c, what, msg ? msg : PQresultErrorMessage(r),
                  state ? state : (PQstatus(c->conn) != CONNECTION_OK ? "08006" : NULL));
        store_status s = pg_status_of_sqlstate(state);
        PQclear(r);
        return c->lost ? STORE_ERROR : s;
    }
    if (!out) {
        PQclear(r);
        return STORE_OK;
    }
    pg_res *res = malloc(sizeof *res);
    if (!res) {
        PQclear(r);
        set_error(c, what, "out of memory", NULL);
        c->lost = 0;
        return STORE_ERROR;
    }
    res->r = r;
    *out = res;
    return STORE_OK;
}

/* Rows a command changed, 0 for a query. */
static long long pg_affected(const pg_res *r);

store_status pg_cmd(pg_conn *c, const char *what, const char *sql, const pg_params *params, long long *affected) {
    if (affected) *affected = 0;
    pg_res *r = NULL;
    store_status s = pg_exec(c, what, sql, params, &r);
    if (s == STORE_OK && affected) *affected = pg_affected(r);
    pg_clear(r);
    return s;
}

store_status pg_exec_script(pg_conn *c, const char *what, const char *sql) {
    if (!c || !c->conn) return STORE_ERROR;
    if (PQstatus(c->conn) != CONNECTION_OK) {
        set_error(c, what, "the connection to the database is broken", "08006");
        return STORE_ERROR;
    }
    PGresult *r = PQexec(c->conn, sql);
    if (!r) {
        set_error(c, what, PQerrorMessage(c->conn), PQstatus(c->conn) != CONNECTION_OK ? "08006" : NULL);
        return STORE_ERROR;
    }
    ExecStatusType es = PQresultStatus(r);
    store_status s = STORE_OK;
    if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK && es != PGRES_EMPTY_QUERY) {
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
        set_error(c, what, msg ? msg : PQresultErrorMessage(r), state);
        s = c->lost ? STORE_ERROR : pg_status_of_sqlstate(state);
    }
    PQclear(r);
    return s;
}

store_status pg_begin(pg_conn *c) { return pg_cmd(c, "begin", "BEGIN", NULL, NULL); }

int pg_in_transaction(pg_conn *c) {
    if (!pg_alive(c)) return 0;
    PGTransactionStatusType t = PQtransactionStatus(c->conn);
    return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

store_status pg_finish(pg_conn *c, store_status s) {
    if (s == STORE_OK) {
        store_status k = pg_cmd(c, "commit", "COMMIT", NULL, NULL);
        if (k != STORE_OK) s = STORE_ERROR;
    }
    if (s != STORE_OK && pg_in_transaction(c)) {
        /* Keep the first failure's message: the rollback's own outcome only matters when it fails. */
        char saved[sizeof c->err], state[sizeof c->sqlstate];
        int lost = c->lost;
        memcpy(saved, c->err, sizeof saved);
        memcpy(state, c->sqlstate, sizeof state);
        pg_cmd(c, "rollback", "ROLLBACK", NULL, NULL);
        memcpy(c->err, saved, sizeof saved);
        memcpy(c->sqlstate, state, sizeof state);
        c->lost = lost || !pg_alive(c);
    }
    return s;
}

void pg_clear(pg_res *r) {
    if (!r) return;
    PQclear(r->r);
    free(r);
}

/* ---- results ---------------------------------------------------------------------------------- */

static int in_range(const pg_res *r, int row, int col) {
    return r && row >= 0 && col >= 0 && row < PQntuples(r->r) && col < PQnfields(r->r);
}

int pg_nrows(const pg_res *r) { return r ? PQntuples(r->r) : 0; }

static long long pg_affected(const pg_res *r) {
    if (!r) return 0;
    const char *t = PQcmdTuples(r->r);
    return t && *t ? strtoll(t, NULL, 10) : 0;
}

int pg_get_isnull(const pg_res *r, int row, int col) { return !in_range(r, row, col) || PQgetisnull(r->r, row, col); }

const char *pg_get_text(const pg_res *r, int row, int col) {
    return pg_get_isnull(r, row, col) ? NULL : PQgetvalue(r->r, row, col);
}

long long pg_get_i64(const pg_res *r, int row, int col) {
    const char *t = pg_get_text(r, row, col);
    return t ? strtoll(t, NULL, 10) : 0;
}

int pg_get_int(const pg_res *r, int row, int col) { return (int)pg_get_i64(r, row, col); }

double pg_get_double(const pg_res *r, int row, int col) {
    const char *t = pg_get_text(r, row, col);
    return t ? strtod(t, NULL) : 0; /* strtod reads "NaN", "Infinity" and "-Infinity" */
}

int pg_get_bool(const pg_res *r, int row, int col) {
    const char *t = pg_get_text(r, row, col);
    if (!t) return 0;
    if (t[0] == 't' || t[0] == 'T') return 1;
    return strtoll(t, NULL, 10) != 0;
}

/* ---- LISTEN / NOTIFY ---------------------------------------------------------------------------- */

static int pg_socket(pg_conn *c) { return pg_alive(c) ? PQsocket(c->conn) : -1; }

int pg_notifications(pg_conn *c, pg_notify_fn fn, void *ctx) {
    if (!pg_alive(c)) return -1;
    if (!PQconsumeInput(c->conn)) {
        set_error(c, "listen", PQerrorMessage(c->conn), "08006");
        return -1;
    }
    int n = 0;
    PGnotify *nt;
    while ((nt = PQnotifies(c->conn)) != NULL) {
        if (fn) fn(ctx, nt->relname, nt->extra ? nt->extra : "", nt->be_pid);
        PQfreemem(nt);
        n++;
    }
    return pg_alive(c) ? n : -1;
}

int pg_wait_readable(pg_conn *c, int timeout_ms) {
    int fd = pg_socket(c);
    if (fd < 0) return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r < 0) return -1;
    return r > 0 ? 1 : 0;
}
