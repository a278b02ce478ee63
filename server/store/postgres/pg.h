/* A small layer over libpq for the PostgreSQL store backend (server/store/postgres/), the only code
 * besides the tests that includes it: connecting with a time limit, parameterised statements,
 * typed getters, SQLSTATE -> store_status, reconnecting, and LISTEN/NOTIFY.
 *
 * A pg_conn is one connection and is used by one thread at a time (the store's pool hands them
 * out). Every function that can fail records the reason on the connection (pg_error) and says in
 * pg_lost whether the failure was the connection itself (the server unreachable, shut down, the
 * link broken): such a connection is reset by pg_reconnect before its next use. Messages never
 * carry the password of the URL. */
#ifndef ATTNLAB_PG_H
#define ATTNLAB_PG_H

#include <stddef.h>

#include "store/store.h"

typedef struct pg_conn pg_conn;
typedef struct pg_res pg_res; /* a statement's result: rows, or the count of rows a command changed */

/* Connects to url (postgresql://user:password@host:port/db?...). timeout_s bounds the connection
 * attempt; keep-alives and a TCP user timeout of the same order make a dead server show as a
 * failed statement rather than a hang. application_name may be NULL. NULL on failure, with a
 * one-line reason (password masked) in err. */
pg_conn *pg_connect(const char *url, int timeout_s, const char *application_name, char *err, size_t errlen);
/* Closes the connection; c may be NULL. */
void pg_close(pg_conn *c);

/* 1 while the connection is up (as far as libpq knows), 0 after it broke. */
int pg_alive(pg_conn *c);
/* Re-establishes a broken connection (or any, with force): STORE_OK, or STORE_ERROR with pg_lost
 * set when the server cannot be reached. Session settings made since pg_connect are gone. */
store_status pg_reconnect(pg_conn *c, int force);

/* The message and SQLSTATE ("" when none) of the connection's last failure, and whether it was
 * the connection itself that failed. */
const char *pg_error(const pg_conn *c);
const char *pg_sqlstate(const pg_conn *c);
int pg_lost(const pg_conn *c);
/* The server process serving this connection (for NOTIFY senders and tests); 0 when unknown. */
int pg_backend_pid(pg_conn *c);

/* The store_status of a failure with this SQLSTATE: STORE_CONFLICT for unique, exclusion and
 * foreign-key violations and serialization failures (the row exists or is in the way),
 * STORE_ERROR for everything else. */
store_status pg_status_of_sqlstate(const char *sqlstate);
/* 1 when the SQLSTATE means the connection or the server went away (class 08, 57P01..57P03). */
int pg_sqlstate_is_lost(const char *sqlstate);

/* ---- parameters ----------------------------------------------------------------------------
 * Up to PG_MAX_PARAMS text parameters ($1, $2, ...), each a string, a number formatted here, or
 * NULL. Strings are not copied: they must outlive the statement. */
#define PG_MAX_PARAMS 24
typedef struct {
    const char *v[PG_MAX_PARAMS];
    char num[PG_MAX_PARAMS][32];
    int n;
    int overflow; /* more than PG_MAX_PARAMS were added: pg_exec refuses the statement */
} pg_params;

void pg_params_init(pg_params *p);
void pg_p_text(pg_params *p, const char *s); /* NULL: SQL NULL */
void pg_p_int(pg_params *p, long long v);
void pg_p_double(pg_params *p, double v); /* round-trips exactly; NaN and infinities as PostgreSQL spells them */
void pg_p_null(pg_params *p);

/* ---- statements ----------------------------------------------------------------------------
 * Runs one statement with params (may be NULL). On STORE_OK *out (when out is not NULL) holds the
 * result, to be freed with pg_clear; with out NULL the result is dropped. On failure *out is NULL
 * and the status is pg_status_of_sqlstate of the error (or STORE_ERROR); `what` names the
 * statement in the message. */
store_status pg_exec(pg_conn *c, const char *what, const char *sql, const pg_params *params, pg_res **out);
/* The same for a command: *affected (may be NULL) gets the number of rows it changed. */
store_status pg_cmd(pg_conn *c, const char *what, const char *sql, const pg_params *params, long long *affected);
/* Runs a script of several statements without parameters (a migration): STORE_OK or the first
 * failure's status. */
store_status pg_exec_script(pg_conn *c, const char *what, const char *sql);
/* BEGIN / COMMIT / ROLLBACK. pg_finish commits when s is STORE_OK and rolls back otherwise,
 * returning the outcome (a failed commit is STORE_ERROR). */
store_status pg_begin(pg_conn *c);
store_status pg_finish(pg_conn *c, store_status s);
/* 1 when the connection is inside a transaction block (also a failed one). */
int pg_in_transaction(pg_conn *c);
void pg_clear(pg_res *r);

/* ---- results ---------------------------------------------------------------------------------
 * Row and column indexes are 0-based; out of range reads as NULL. */
int pg_nrows(const pg_res *r);
int pg_get_isnull(const pg_res *r, int row, int col);
const char *pg_get_text(const pg_res *r, int row, int col); /* NULL for SQL NULL */
long long pg_get_i64(const pg_res *r, int row, int col);    /* 0 for NULL or not a number */
int pg_get_int(const pg_res *r, int row, int col);
double pg_get_double(const pg_res *r, int row, int col); /* 0 for NULL */
int pg_get_bool(const pg_res *r, int row, int col);      /* 't' or a non-zero number: 1 */

/* ---- LISTEN / NOTIFY -------------------------------------------------------------------------- */
typedef void (*pg_notify_fn)(void *ctx, const char *channel, const char *payload, int sender_pid);
/* Reads what the server sent and calls fn for each notification that arrived, in order. Returns
 * how many were delivered, or -1 when the connection broke. Never blocks. */
int pg_notifications(pg_conn *c, pg_notify_fn fn, void *ctx);
/* Waits up to timeout_ms for the connection's socket to be readable: 1 readable, 0 timeout,
 * -1 when the connection is down. */
int pg_wait_readable(pg_conn *c, int timeout_ms);

/* Copies url into buf with the password replaced by "***" (for messages and logs). */
void pg_mask_url(const char *url, char *buf, size_t len);

#endif
