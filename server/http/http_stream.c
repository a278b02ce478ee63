/* Streaming replies (contract: http.h's http_reply_stream and http_stream_wake; the server's list
 * of live streams: http_stream.h). */
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "http/http_impl.h"

struct http_stream {
    pthread_mutex_t lock;
    struct MHD_Connection *connection;
    http_server *server;
    http_stream_read_fn read;
    http_stream_close_fn close;
    void *ctx;
    int suspended;            /* the connection sleeps until a wake */
    int pending_wake;         /* a wake arrived while the reader was running */
    http_stream *next, *prev; /* the server's list of live streams */
};

void http_streams_init(http_streams *l) {
    pthread_mutex_init(&l->lock, NULL);
    l->head = NULL;
}

void http_streams_destroy(http_streams *l) { pthread_mutex_destroy(&l->lock); }

void http_streams_wake_all(http_streams *l) {
    pthread_mutex_lock(&l->lock);
    for (http_stream *st = l->head; st; st = st->next) http_stream_wake(st);
    pthread_mutex_unlock(&l->lock);
}

/* The reader runs without the stream lock (read() takes its producer's locks, and producers call
 * http_stream_wake() under those same locks); only the suspend decision is made under it. A wake
 * that lands between read() returning 0 and that decision is remembered in pending_wake. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    http_stream *st = cls;
    if (atomic_load(&st->server->stopping)) return MHD_CONTENT_READER_END_OF_STREAM;
    ssize_t n = st->read(st->ctx, buf, max);
    if (n == -2) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (n < 0) return MHD_CONTENT_READER_END_OF_STREAM;
    if (n == 0) {
        pthread_mutex_lock(&st->lock);
        if (st->pending_wake) {
            st->pending_wake = 0;
        } else {
            st->suspended = 1;
            MHD_suspend_connection(st->connection);
        }
        pthread_mutex_unlock(&st->lock);
    }
    return n;
}

static void stream_free(void *cls) {
    http_stream *st = cls;
    http_server *s = st->server;
    pthread_mutex_lock(&s->streams.lock);
    if (st->prev)
        st->prev->next = st->next;
    else
        s->streams.head = st->next;
    if (st->next) st->next->prev = st->prev;
    pthread_mutex_unlock(&s->streams.lock);
    /* close() must guarantee no further http_stream_wake() on st once it returns. */
    st->close(st->ctx);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

http_stream *http_reply_stream(http_request *req, const char *content_type, http_stream_read_fn read,
                               http_stream_close_fn close, void *ctx) {
    http_server *s = req->server;
    /* Streams have their own limit, so that open viewers never take the API's connections. */
    if (http_admission_enter_stream(s, req->conn) < 0) {
        close(ctx);
        http_reply_header(req, "Retry-After", "1");
        http_reply_error(req, 503, "too_many_streams", NULL, "the server has too many live streams open (%u)",
                         http_admission_max_streams(s));
        return NULL;
    }
    http_stream *st = calloc(1, sizeof *st);
    if (!st) {
        close(ctx);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&st->lock, NULL);
    st->connection = req->connection;
    st->server = req->server;
    st->read = read;
    st->close = close;
    st->ctx = ctx;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, st, stream_free);
    if (!resp) {
        pthread_mutex_destroy(&st->lock);
        free(st);
        close(ctx);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&s->streams.lock);
    st->next = s->streams.head;
    if (st->next) st->next->prev = st;
    s->streams.head = st;
    pthread_mutex_unlock(&s->streams.lock);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    http_reply_queue(req, 200, resp, content_type);
    return st;
}

void http_stream_wake(http_stream *st) {
    pthread_mutex_lock(&st->lock);
    if (st->suspended) {
        st->suspended = 0;
        MHD_resume_connection(st->connection);
    } else {
        st->pending_wake = 1;
    }
    pthread_mutex_unlock(&st->lock);
}

void http_stream_send_buffer(http_stream *st, int bytes) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(st->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci && ci->connect_fd >= 0) (void)setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

void http_stream_abort(http_stream *st) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(st->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci && ci->connect_fd >= 0) shutdown(ci->connect_fd, SHUT_RDWR);
    http_stream_wake(st); /* a sleeping stream wakes to find its connection gone */
}
