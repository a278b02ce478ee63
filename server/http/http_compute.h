/* The compute pool (http_compute.c): where heavy routes (http_route_heavy) run, so that no
 * request does unbounded work on an HTTP thread.
 *
 * An HTTP thread parses a heavy request, authorises it and admits it here: past the per-client
 * limit (requests of one address queued or running) it is answered 429, past the queue bound 503,
 * both JSON with Retry-After; otherwise its connection is suspended and the request waits its turn
 * for one of the pool's workers, which runs the route's handler. The handler answers as any other
 * (http_reply_*); the answer is handed back to libmicrohttpd by resuming the connection, and an
 * HTTP thread sends it.
 *
 * A client that goes away (its connection's read side closes) while its request waits is dropped
 * without running it; while it runs, http_request_cancelled() says so, and long computations poll
 * it (http_request_cancel_flag) to stop early. Workers run at a lower scheduling priority than the
 * HTTP threads (nice +5), so answering requests comes first. */
#ifndef ATTNLAB_HTTP_COMPUTE_H
#define ATTNLAB_HTTP_COMPUTE_H

#include <pthread.h>

#include "http/http.h"

typedef struct {
    unsigned workers, max_queued, per_client;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    pthread_t *threads;
    unsigned n_threads;
    http_request *head, *tail; /* waiting, FIFO */
    unsigned queued;
    http_request **running; /* one slot per worker: the request it runs */
    /* per worker: the client address its work counts against, and whether it is busy (running a
     * request, or the continuation of one that has answered, http_request_continue) */
    unsigned char (*slot_ip)[16];
    int *slot_busy;
    atomic_int stop; /* the server stops: continuations end */
    unsigned long long admitted, refused_busy, refused_client, dropped_gone, cancelled_running;
    int stopping;
    pthread_t watcher;
    int watcher_started;
    int wake_pipe[2];
} http_compute;

/* Limits from cfg (0: the defaults of http.h); starts nothing. -1 when out of memory. */
int http_compute_init(http_server *s, const http_config *cfg);
/* Starts the workers and the watcher of waiting clients. -1 on failure. */
int http_compute_start(http_server *s);
/* Ends the pool before libmicrohttpd stops: waiting requests are answered 503, running ones are
 * told to stop (cancelled) and awaited; every suspended connection is resumed. */
void http_compute_stop(http_server *s);
void http_compute_destroy(http_server *s);

/* Admits a complete heavy request (called on an HTTP thread from the dispatch): 0 when it was
 * queued (its connection is suspended), -1 when it was answered (429, 503). */
int http_compute_admit(http_server *s, http_request *req);

/* What the pool has done, for /metrics. */
void http_compute_counts(http_server *s, unsigned *running, unsigned *queued, unsigned long long *admitted,
                         unsigned long long *refused, unsigned long long *cancelled);

#endif
