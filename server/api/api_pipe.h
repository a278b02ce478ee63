/* A long answer produced on the compute worker of a heavy request and sent while the client reads
 * it: the worker goes on producing after the handler returns (http_request_continue), writing each
 * piece into a pipe, while an HTTP thread sends what the pipe holds as the client takes it
 * (http_reply_stream). So the store is never read on an HTTP thread, the work stays counted against
 * the compute pool's and the client's limits, and memory holds one piece and the pipe however slow
 * the client; a client that takes less than API_PIPE_MIN_BYTES in API_PIPE_STALL_S seconds is cut
 * (the answer ends incomplete), so that it cannot hold a compute worker. Bundles (api_bundle.c) and
 * a run's metrics.csv (api_runs.c) are answered this way. */
#ifndef ATTNLAB_API_PIPE_H
#define ATTNLAB_API_PIPE_H

#include <stddef.h>

#include "http/http.h"

#define API_PIPE_BYTES (1 << 20)
#define API_PIPE_STALL_S 30.0
#define API_PIPE_MIN_BYTES (64 * 1024)

typedef struct {
    /* The next piece of the answer: 1 with *text (malloc'd, taken) of *len bytes, 0 at the end, -1
     * when it fails (the answer is cut). Runs on the compute worker, and should make a bounded piece. */
    int (*next)(void *ctx, char **text, size_t *len);
    void (*free)(void *ctx); /* exactly once, when the answer is over for any reason */
    void *ctx;
    char what[96]; /* what the answer is, for the log ("the bundle of experiment 3") */
} api_pipe_source;

/* Answers 200 with content_type (and the headers set before) from src, which is freed (src->free)
 * whatever happens; a 500 when the pipe cannot be made. Outside a heavy handler the whole answer is
 * produced on the calling thread. */
void api_pipe_reply(http_request *req, const char *content_type, const api_pipe_source *src);

#endif
