/* A long answer produced on the compute worker and sent through a pipe (api_pipe.h). */
#include "api/api_pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

typedef struct {
    pthread_mutex_t lock;
    int refs;        /* the stream's and the producer's */
    int failed;      /* the producer gave up: the answer is cut */
    http_stream *st; /* NULL once the layer has closed the stream */
    int rd, wr;
    api_pipe_source src;
} answer_pipe;

static void pipe_unref(answer_pipe *p) {
    pthread_mutex_lock(&p->lock);
    int last = --p->refs == 0;
    pthread_mutex_unlock(&p->lock);
    if (!last) return;
    if (p->rd >= 0) close(p->rd);
    if (p->wr >= 0) close(p->wr);
    p->src.free(p->src.ctx);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static ssize_t pipe_read(void *ctx, char *buf, size_t max) {
    answer_pipe *p = ctx;
    ssize_t n = read(p->rd, buf, max);
    if (n > 0) return n;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0; /* nothing yet: the producer wakes us */
    pthread_mutex_lock(&p->lock);
    int failed = p->failed;
    pthread_mutex_unlock(&p->lock);
    return n == 0 && !failed ? -1 : -2;
}

static void pipe_close(void *ctx) {
    answer_pipe *p = ctx;
    pthread_mutex_lock(&p->lock);
    p->st = NULL; /* no wake after this */
    close(p->rd);
    p->rd = -1;
    pthread_mutex_unlock(&p->lock);
    pipe_unref(p);
}

static void pipe_wake(answer_pipe *p) {
    pthread_mutex_lock(&p->lock);
    if (p->st) http_stream_wake(p->st);
    pthread_mutex_unlock(&p->lock);
}

static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Writes buf[0..len) into the pipe, waiting while it is full. -1 when the client has gone (the
 * stream is closed), takes too little (see api_pipe.h) or the server stops. */
static int pipe_put(answer_pipe *p, const char *buf, size_t len, const atomic_int *stop, double *since, size_t *taken) {
    while (len) {
        ssize_t w = write(p->wr, buf, len);
        if (w > 0) {
            buf += w;
            len -= (size_t)w;
            *taken += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR) return -1; /* EPIPE: nobody reads any more */
        pipe_wake(p);
        struct pollfd pf = {.fd = p->wr, .events = POLLOUT};
        poll(&pf, 1, 500);
        pthread_mutex_lock(&p->lock);
        int closed = !p->st;
        pthread_mutex_unlock(&p->lock);
        if (closed || atomic_load(stop)) return -1;
        double now = mono_s();
        if (now - *since >= API_PIPE_STALL_S) {
            if (*taken < API_PIPE_MIN_BYTES) {
                log_info("%s: its client took %zu bytes in %.0f s: cut", p->src.what, *taken, now - *since);
                return -1;
            }
            *since = now;
            *taken = 0;
        }
    }
    return 0;
}

/* The continuation: the whole answer, piece by piece, into the pipe. */
static void produce_all(void *ctx, const atomic_int *stop) {
    answer_pipe *p = ctx;
    double since = mono_s();
    size_t taken = 0;
    int failed = 0;
    for (;;) {
        char *text = NULL;
        size_t len = 0;
        int got = p->src.next(p->src.ctx, &text, &len);
        if (got <= 0) {
            failed = got < 0;
            break;
        }
        failed = pipe_put(p, text, len, stop, &since, &taken) < 0;
        free(text);
        if (failed) break;
        pipe_wake(p);
    }
    pthread_mutex_lock(&p->lock);
    p->failed = failed;
    close(p->wr);
    p->wr = -1;
    pthread_mutex_unlock(&p->lock);
    pipe_wake(p); /* the reader sees the end */
    pipe_unref(p);
}

void api_pipe_reply(http_request *req, const char *content_type, const api_pipe_source *src) {
    answer_pipe *p = calloc(1, sizeof *p);
    int fds[2] = {-1, -1};
    const char *why = !p ? "out of memory" : pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0 ? strerror(errno) : NULL;
    if (why) {
        free(p);
        src->free(src->ctx);
        http_reply_error(req, 500, "internal", NULL, "cannot make the answer's pipe: %s", why);
        return;
    }
    fcntl(fds[1], F_SETPIPE_SZ, API_PIPE_BYTES); /* a larger buffer if the system lets us */
    pthread_mutex_init(&p->lock, NULL);
    p->refs = 2;
    p->rd = fds[0];
    p->wr = fds[1];
    p->src = *src;
    http_stream *st = http_reply_stream(req, content_type, pipe_read, pipe_close, p);
    if (!st) { /* answered; the layer closed the stream's side */
        pthread_mutex_lock(&p->lock);
        p->failed = 1;
        pthread_mutex_unlock(&p->lock);
        pipe_unref(p);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->st = st;
    pthread_mutex_unlock(&p->lock);
    if (http_request_continue(req, produce_all, p) < 0) { /* not on the compute pool: produce here */
        atomic_int no_stop = 0;
        produce_all(p, &no_stop);
    }
}
