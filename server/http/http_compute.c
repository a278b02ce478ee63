/* The compute pool of heavy routes (contract: http_compute.h). */
#include "http/http_compute.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "http/http_impl.h"
#include "util/log.h"

/* How much lower than the HTTP threads the workers run: nice steps above the thread that starts
 * them (setpriority(2) sets an absolute value: a server started at nice 10 would otherwise run its
 * workers at nice 5, above its own HTTP threads, which then wait behind every heavy request). */
#define COMPUTE_NICE 5

/* The calling worker below the HTTP threads: COMPUTE_NICE steps above the nice it inherited from the
 * thread that made it (the server's), and SCHED_BATCH, so that it never preempts a thread that wakes
 * (an HTTP thread with a request to answer) and the scheduler treats it as the CPU-bound work it is. */
static void compute_priority(void) {
    pid_t tid = (pid_t)syscall(SYS_gettid);
    errno = 0;
    int base = getpriority(PRIO_PROCESS, (id_t)tid);
    if (base == -1 && errno) base = 0;
    int nice_value = base + COMPUTE_NICE > 19 ? 19 : base + COMPUTE_NICE;
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp) != 0) log_debug("compute worker: SCHED_BATCH refused");
    if (setpriority(PRIO_PROCESS, (id_t)tid, nice_value) < 0)
        log_debug("compute worker: setpriority: %s", strerror(errno));
}

int http_compute_init(http_server *s, const http_config *cfg) {
    http_compute *c = &s->compute;
    memset(c, 0, sizeof *c);
    c->workers = cfg->compute_workers ? cfg->compute_workers : 2;
    c->max_queued = cfg->compute_queue ? cfg->compute_queue : 64;
    c->per_client =
        cfg->compute_per_client ? cfg->compute_per_client : 24; /* a dashboard page asks for a dozen at once */
    c->threads = calloc(c->workers, sizeof *c->threads);
    c->running = calloc(c->workers, sizeof *c->running);
    c->slot_ip = calloc(c->workers, sizeof *c->slot_ip);
    c->slot_busy = calloc(c->workers, sizeof *c->slot_busy);
    c->wake_pipe[0] = c->wake_pipe[1] = -1;
    if (!c->threads || !c->running || !c->slot_ip || !c->slot_busy || pipe2(c->wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        free(c->threads);
        free(c->running);
        free(c->slot_ip);
        free(c->slot_busy);
        c->threads = NULL;
        c->running = NULL;
        return -1;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cv, NULL);
    return 0;
}

static void wake_watcher(http_compute *c) {
    if (write(c->wake_pipe[1], "w", 1) < 0) { /* full: a wake is pending anyway */
    }
}

/* Hands a request's answer back to libmicrohttpd: resuming the connection makes an HTTP thread
 * call the access handler again, which queues req->pending. */
static void hand_back(http_request *req) { MHD_resume_connection(req->connection); }

/* Answers a request that never ran (its client left, or the server stops) and hands it back. */
static void answer_unrun(http_request *req, const char *why) {
    http_reply_header(req, MHD_HTTP_HEADER_CONNECTION, "close");
    http_reply_header(req, "Retry-After", "1");
    http_reply_error(req, 503, "unavailable", NULL, "%s", why);
    hand_back(req);
}

static const unsigned char *client_of(const http_request *r) {
    static const unsigned char none[16];
    return r->conn ? r->conn->ip : none;
}

static int same_client(const http_request *a, const http_request *b) { return !memcmp(client_of(a), client_of(b), 16); }

int http_compute_admit(http_server *s, http_request *req) {
    http_compute *c = &s->compute;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    pthread_mutex_lock(&c->lock);
    unsigned mine = 0, busy = 0;
    for (http_request *q = c->head; q; q = q->job_next) mine += same_client(q, req);
    for (unsigned i = 0; i < c->workers; i++)
        if (c->slot_busy[i]) { /* by the address kept: a continuing request may be over */
            busy++;
            mine += !memcmp(c->slot_ip[i], client_of(req), 16);
        }
    int refuse = c->stopping                                        ? 503
                 : mine >= c->per_client                            ? 429
                 : busy == c->workers && c->queued >= c->max_queued ? 503
                                                                    : 0;
    if (refuse) {
        if (refuse == 429)
            c->refused_client++;
        else
            c->refused_busy++;
        pthread_mutex_unlock(&c->lock);
        http_reply_header(req, "Retry-After", refuse == 429 ? "1" : "2");
        if (refuse == 429)
            http_reply_error(req, 429, "too_many_requests", NULL,
                             "this client has %u heavy requests waiting or running already; try again shortly",
                             c->per_client);
        else
            http_reply_error(req, 503, "busy", NULL, "the server's compute pool is full (%u running, %u waiting)%s",
                             c->workers, c->max_queued, c->stopping ? "; it is stopping" : "; try again shortly");
        return -1;
    }
    req->deferred = 1;
    req->fd = ci ? ci->connect_fd : -1;
    /* Suspended before anyone else can see it, so a worker never resumes a connection that is not
     * suspended yet. */
    MHD_suspend_connection(req->connection);
    req->job_next = NULL;
    if (c->tail)
        c->tail->job_next = req;
    else
        c->head = req;
    c->tail = req;
    c->queued++;
    c->admitted++;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->lock);
    wake_watcher(c);
    return 0;
}

/* Takes req out of the waiting list (lock held); 1 when it was there. */
static int unqueue(http_compute *c, http_request *req) {
    http_request **pp = &c->head, *prev = NULL;
    for (; *pp; prev = *pp, pp = &(*pp)->job_next)
        if (*pp == req) {
            *pp = req->job_next;
            if (c->tail == req) c->tail = prev;
            c->queued--;
            return 1;
        }
    return 0;
}

typedef struct {
    http_server *s;
    unsigned slot;
} worker_arg;

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    http_server *s = wa.s;
    http_compute *c = &s->compute;
    /* Below the HTTP threads: answering requests (health, lists, streams) comes before computing. */
    pthread_setname_np(pthread_self(), "attnlab-heavy");
    compute_priority();
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->stopping && !c->head) pthread_cond_wait(&c->cv, &c->lock);
        if (!c->head) break; /* stopping, nothing waiting */
        http_request *req = c->head;
        unqueue(c, req);
        c->running[wa.slot] = req;
        memcpy(c->slot_ip[wa.slot], client_of(req), 16);
        c->slot_busy[wa.slot] = 1;
        pthread_mutex_unlock(&c->lock);
        wake_watcher(c);
        if (!atomic_load(&req->cancelled)) {
            req->route->fn(req, s->cfg.handler_ctx);
            if (!req->replied) http_reply_error(req, 500, "internal", NULL, "the handler gave no answer");
        } else {
            http_reply_error(req, 503, "unavailable", NULL, "the client left before its request ran");
            req->cont_fn = NULL;
        }
        void (*cont)(void *, const atomic_int *) = req->cont_fn;
        void *cont_ctx = req->cont_ctx;
        pthread_mutex_lock(&c->lock);
        c->running[wa.slot] = NULL; /* no longer watched: libmicrohttpd has its connection again */
        if (atomic_load(&req->cancelled)) c->cancelled_running++;
        hand_back(req); /* req may be gone from here on */
        if (cont) {
            pthread_mutex_unlock(&c->lock);
            cont(cont_ctx, &c->stop); /* still counted: slot_busy and slot_ip stay */
            pthread_mutex_lock(&c->lock);
        }
        c->slot_busy[wa.slot] = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* Watches the sockets of waiting and running requests: one whose client has closed its side is
 * cancelled (dropped when still waiting). */
static void *watcher_main(void *arg) {
    http_server *s = arg;
    http_compute *c = &s->compute;
    unsigned cap = c->max_queued + c->workers + 1;
    struct pollfd *pfd = calloc(cap, sizeof *pfd);
    http_request **who = calloc(cap, sizeof *who);
    if (!pfd || !who) {
        log_error("out of memory in the compute pool's watcher: clients that leave are not noticed");
        free(pfd);
        free(who);
        return NULL;
    }
    for (;;) {
        nfds_t n = 0;
        pfd[n++] = (struct pollfd){.fd = c->wake_pipe[0], .events = POLLIN};
        pthread_mutex_lock(&c->lock);
        if (c->stopping) {
            pthread_mutex_unlock(&c->lock);
            break;
        }
        for (http_request *q = c->head; q && n < cap; q = q->job_next)
            if (q->fd >= 0 && !atomic_load(&q->cancelled)) {
                who[n] = q;
                pfd[n++] = (struct pollfd){.fd = q->fd, .events = POLLRDHUP};
            }
        for (unsigned i = 0; i < c->workers && n < cap; i++) {
            http_request *q = c->running[i];
            if (q && q->fd >= 0 && !atomic_load(&q->cancelled)) {
                who[n] = q;
                pfd[n++] = (struct pollfd){.fd = q->fd, .events = POLLRDHUP};
            }
        }
        pthread_mutex_unlock(&c->lock);
        int rc = poll(pfd, n, 1000);
        if (rc < 0 && errno != EINTR) {
            log_error("compute pool watcher: poll: %s", strerror(errno));
            break;
        }
        if (rc <= 0) continue;
        if (pfd[0].revents) {
            char drain[64];
            while (read(c->wake_pipe[0], drain, sizeof drain) > 0) {}
        }
        pthread_mutex_lock(&c->lock);
        for (nfds_t k = 1; k < n; k++) {
            if (!(pfd[k].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
            http_request *q = who[k];
            /* Still ours (waiting or running), so its descriptor is still its connection's. */
            int waiting = unqueue(c, q), running = 0;
            for (unsigned i = 0; i < c->workers; i++) running |= c->running[i] == q;
            if (!waiting && !running) continue;
            atomic_store(&q->cancelled, 1);
            log_info("%s %s: the client left %s", q->method, q->path, waiting ? "before it ran" : "while it ran");
            if (waiting) {
                c->dropped_gone++;
                answer_unrun(q, "the client left before its request ran");
            }
        }
        pthread_mutex_unlock(&c->lock);
    }
    free(pfd);
    free(who);
    return NULL;
}

int http_compute_start(http_server *s) {
    http_compute *c = &s->compute;
    for (unsigned i = 0; i < c->workers; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) return -1;
        *wa = (worker_arg){s, i};
        if (pthread_create(&c->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            return -1;
        }
        c->n_threads++;
    }
    if (pthread_create(&c->watcher, NULL, watcher_main, s) != 0) return -1;
    c->watcher_started = 1;
    return 0;
}

void http_compute_stop(http_server *s) {
    http_compute *c = &s->compute;
    if (!c->threads) return;
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    atomic_store(&c->stop, 1);
    while (c->head) {
        http_request *q = c->head;
        unqueue(c, q);
        atomic_store(&q->cancelled, 1);
        answer_unrun(q, "the server is stopping");
    }
    for (unsigned i = 0; i < c->workers; i++)
        if (c->running[i]) atomic_store(&c->running[i]->cancelled, 1);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->lock);
    wake_watcher(c);
    for (unsigned i = 0; i < c->n_threads; i++) pthread_join(c->threads[i], NULL);
    c->n_threads = 0;
    if (c->watcher_started) pthread_join(c->watcher, NULL);
    c->watcher_started = 0;
}

void http_compute_destroy(http_server *s) {
    http_compute *c = &s->compute;
    if (!c->threads) return;
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cv);
    free(c->threads);
    free(c->running);
    free(c->slot_ip);
    free(c->slot_busy);
    close(c->wake_pipe[0]);
    close(c->wake_pipe[1]);
    c->threads = NULL;
}

void http_compute_counts(http_server *s, unsigned *running, unsigned *queued, unsigned long long *admitted,
                         unsigned long long *refused, unsigned long long *cancelled) {
    http_compute *c = &s->compute;
    pthread_mutex_lock(&c->lock);
    unsigned r = 0;
    for (unsigned i = 0; i < c->workers; i++) r += c->slot_busy[i] != 0;
    if (running) *running = r;
    if (queued) *queued = c->queued;
    if (admitted) *admitted = c->admitted;
    if (refused) *refused = c->refused_busy + c->refused_client;
    if (cancelled) *cancelled = c->dropped_gone + c->cancelled_running;
    pthread_mutex_unlock(&c->lock);
}

void http_server_compute_counts(http_server *s, unsigned *running, unsigned *queued, unsigned long long *admitted,
                                unsigned long long *refused, unsigned long long *cancelled) {
    http_compute_counts(s, running, queued, admitted, refused, cancelled);
}

int http_request_continue(http_request *req, void (*fn)(void *ctx, const atomic_int *stop), void *ctx) {
    if (!req->deferred) return -1;
    req->cont_fn = fn;
    req->cont_ctx = ctx;
    return 0;
}
