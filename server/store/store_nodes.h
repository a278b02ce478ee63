/* The store's contract for several attnlabd nodes on one database: the nodes themselves, leases on
 * the runs they train, and what one node tells the others. It follows store.h's rule for outputs
 * (set only on STORE_OK; a STORE_ERROR is logged once, its message in store_last_error()).
 *
 * Both backends implement it. With PostgreSQL the database is shared (store_shared): the queue of
 * runs is the runs table itself — a node with room claims the oldest queued run, or a running one
 * whose lease ran out (its node stopped renewing: killed, cut off), with FOR UPDATE SKIP LOCKED,
 * and gets a fresh lease token; it renews the lease by a heartbeat; and every write it makes about
 * the run while it holds it (metrics, progress, checkpoint records, the final status) is fenced by
 * that token, so a node that lost its lease changes nothing. Lease times are the database's clock.
 * With the embedded SQLite file there is one node: it records itself (GET /api/nodes) and keeps
 * its queue in the process (jobs.c); the lease functions answer STORE_CONFLICT. */
#ifndef ATTNLAB_STORE_NODES_H
#define ATTNLAB_STORE_NODES_H

#include <jansson.h>

#include "store/store.h"

/* 1 when other processes may share this database (PostgreSQL): runs are then claimed from the
 * store rather than queued in the process. */
int store_shared(store *st);
/* Names the node this process is, for the rows it writes and the notifications it sends. Call
 * once, before the workers start. */
void store_set_node(store *st, const char *node_id);

/* ---- nodes ---------------------------------------------------------------------------------- */
typedef struct {
    const char *id, *host, *url, *role, *version; /* role: "api", "worker" or "all" */
    int capacity;                                 /* trainings it runs at once (0 for an api node) */
    long pid;
} store_node;

/* Records the node as started now (replacing an earlier row with its id). */
store_status store_node_register(store *st, const store_node *n);
/* The node is alive now (the database's clock); STORE_NOT_FOUND when it has no row. */
store_status store_node_heartbeat(store *st, const char *node_id);
/* The node stopped cleanly. */
store_status store_node_stopped(store *st, const char *node_id);
/* Every node, the most recently heard first: [{"id","host","url","role","capacity","pid","version",
 * "started_at","last_heartbeat","heartbeat_age_s","alive","stopped_at","running":[run ids]}] where
 * alive means not stopped and heard within stale_s seconds. */
store_status store_node_list(store *st, double stale_s, json_t **out);

/* ---- leases (shared stores) ---------------------------------------------------------------- */
typedef struct {
    long long run_id;
    long long token; /* names every fenced write */
    int attempt;     /* 1 the first time the run is claimed */
    int takeover;    /* 1 when the run was running on a node whose lease ran out */
} store_lease;

/* Claims a run for node_id for lease_s seconds: the oldest queued one (it becomes running), or one
 * whose lease ran out (it stays running, now here). STORE_NOT_FOUND when there is none. */
store_status store_run_claim(store *st, const char *node_id, double lease_s, store_lease *out);
/* Renews a held lease for lease_s seconds from now; *cancel (may be NULL) gets whether someone
 * asked for the run to stop. STORE_CONFLICT when the lease is no longer this one's (taken over,
 * or the run left `running`). */
store_status store_run_renew(store *st, long long run_id, long long token, double lease_s, int *cancel);
/* Gives a held run up: running -> to ("queued": another node continues it; "interrupted"), with
 * error (may be NULL). STORE_CONFLICT when the lease is no longer held. */
store_status store_run_release(store *st, long long run_id, long long token, const char *to, const char *error);
/* From now on, this process's writes about run_id are fenced by token (see above); drop ends it. */
void store_lease_hold(store *st, long long run_id, long long token);
void store_lease_drop(store *st, long long run_id);
/* Asks the node running run_id to stop it (it hears at once, or at its next heartbeat):
 * STORE_CONFLICT when the run is not running, STORE_NOT_FOUND when there is no such run. */
store_status store_run_request_cancel(store *st, long long run_id);

/* ---- what the other nodes say ------------------------------------------------------------------
 * fn(ctx, channel, payload) is called on a thread of the store for each notification another node
 * sent: "attnlab_jobs" (payload: a run id that became queued), "attnlab_events" ({"t":"m","run",
 * "from","to"}: metric points stored; {"t":"s","run"}: a status changed), "attnlab_cancel"
 * ({"run"}), and "reconnected" (payload "": the listener's connection came back after a loss, so
 * notifications may have been missed). On SQLite there is nobody else: nothing is called. */
typedef void (*store_notify_fn)(void *ctx, const char *channel, const char *payload);
/* Starts listening (once per store); the thread ends with store_close. */
store_status store_listen(store *st, store_notify_fn fn, void *ctx);

#endif
