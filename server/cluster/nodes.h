/* This process as one node of several sharing a database: its row in the store's nodes table
 * (kept fresh by a heartbeat), and what it hears from the other nodes (store_listen):
 *  - a run became queued elsewhere: this node's idle workers are woken (queue_wake);
 *  - someone asked to cancel a run this node trains: its worker stops it (queue_cancel_heard);
 *  - another node stored metric points or changed a run's status: the rows are read from the store
 *    and published on this node's event bus, so a viewer connected here sees runs trained there
 *    (with this node's event ids, so Last-Event-ID resumes here as for local runs).
 * With SQLite there is one node: it is recorded the same way and hears nothing. */
#ifndef ATTNLAB_NODES_H
#define ATTNLAB_NODES_H

#include <stdio.h>

#include "core/events.h"
#include "cluster/queue.h"
#include "store/store.h"

typedef struct nodes nodes;

typedef struct {
    store *store;
    events *events;
    queue *queue; /* NULL: this node trains nothing from the shared queue */
    const char *id, *host, *url, *role, *version;
    int capacity;       /* trainings at once (0 for an api node) */
    double heartbeat_s; /* how often the node's row is refreshed */
    double stale_s;     /* a node not heard from for this long is shown as not alive */
} nodes_config;

/* Registers the node and starts its heartbeat and (shared stores) its listener. NULL with a
 * one-line reason in err. */
nodes *nodes_start(const nodes_config *cfg, char *err, size_t errlen);
/* Marks the node stopped and ends its heartbeat; n may be NULL. */
void nodes_stop(nodes *n);
/* Frees the node, after store_close (the store's listener calls into it until then). */
void nodes_free(nodes *n);

const char *nodes_id(const nodes *n);
/* Seconds after which a silent node is shown as not alive. */
double nodes_stale_seconds(const nodes *n);
/* This node's lines for /metrics (Prometheus text). */
void nodes_prometheus(nodes *n, FILE *out);

/* The id of the node whose data directory is data_dir: the one in <data_dir>/node-id, or a new
 * one (host name and a random suffix) written there. 0, or -1 with errno set. */
int nodes_default_id(const char *data_dir, char *buf, size_t len);
/* 1 for "api", "worker" and "all". */
int nodes_role_valid(const char *role);

#endif
