/* Live streams: Server-Sent Events for one run or all, resumable with Last-Event-ID. */
#include <stdatomic.h>
#include <stdlib.h>

#include "api/api.h"
#include "core/run_status.h"

typedef struct {
    events_sub *sub;
    _Atomic(http_stream *) stream;
    /* Events published for this reader since the layer last asked it for bytes: past the ring's
     * capacity, the ring has passed a client that reads nothing (its socket full, so the layer never
     * asks), and it is dropped then, as the README says, rather than at a connection timeout. */
    atomic_size_t unread;
    size_t capacity;
    atomic_int aborted;
} sse_ctx;

static void sse_wake(void *ctx) {
    sse_ctx *c = ctx;
    http_stream *st = atomic_load(&c->stream);
    if (!st) return;
    if (atomic_fetch_add(&c->unread, 1) + 1 > c->capacity && !atomic_exchange(&c->aborted, 1))
        http_stream_abort(st);
    else
        http_stream_wake(st);
}

static ssize_t sse_read(void *ctx, char *buf, size_t max) {
    sse_ctx *c = ctx;
    atomic_store(&c->unread, 0);
    return c->sub ? events_sub_read(c->sub, buf, max) : -1;
}

static void sse_close(void *ctx) {
    sse_ctx *c = ctx;
    events_unsubscribe(c->sub); /* no wake reaches c after this */
    free(c);
}

/* A run that has already ended publishes nothing more: its stream ends after what is due, with
 * its status. Read after subscribing, so a run ending meanwhile is either seen ended here or its
 * last event reaches the subscription. */
static void end_if_finished(const api_ctx *api, events_sub *sub, long long run_id) {
    json_t *run = NULL;
    if (store_run_get(api->svc->store, run_id, &run) != STORE_OK) return;
    if (store_run_status_ended(json_string_value(json_object_get(run, "status")))) {
        char *text = run_status_event(run);
        if (text) events_sub_end(sub, "status", text);
        free(text);
    }
    json_decref(run);
}

static void serve_stream(http_request *req, const api_ctx *api, long long run_id) {
    /* EventSource resends the id it last saw as a header; a query argument serves first connects. */
    const char *last = http_request_header(req, "Last-Event-ID");
    if (!last) last = http_request_query(req, "last_event_id");
    unsigned long long last_id = last ? strtoull(last, NULL, 10) : 0;
    sse_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    c->capacity = events_capacity(api->svc->events);
    http_stream *st = http_reply_stream(req, "text/event-stream", sse_read, sse_close, c);
    if (!st) return; /* c was closed by the layer */
    /* A viewer that reads nothing is noticed after some 64 KB, whatever the kernel would buffer. */
    http_stream_send_buffer(st, 32 * 1024);
    atomic_store(&c->stream, st);
    /* The layer reads only after this handler returns, so the subscription is in place by then. */
    c->sub = events_subscribe(api->svc->events, run_id, last_id, sse_wake, c);
    if (c->sub && run_id > 0) end_if_finished(api, c->sub, run_id);
}

void api_events_all(http_request *req, const api_ctx *api) { serve_stream(req, api, 0); }

void api_events_run(http_request *req, const api_ctx *api) {
    long long id;
    if (api_path_id(req, &id) < 0) return;
    json_t *row = NULL;
    store_status s = store_run_get(api->svc->store, id, &row);
    json_decref(row);
    if (s == STORE_NOT_FOUND) {
        http_reply_error(req, 404, "not_found", "id", "no run %lld", id);
        return;
    }
    serve_stream(req, api, id);
}
