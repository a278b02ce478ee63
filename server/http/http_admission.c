/* Admission and limits (contract: http_admission.h): the front door that owns the listening
 * socket, the connection table, the connection limits and the request-head deadline. */
#include "http/http_admission.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/http_impl.h"
#include "http/http_text.h"
#include "util/log.h"

/* Connections answered with an error and drained before close, beyond the connection limits. */
#define REFUSAL_SLOTS 64
/* A refused connection is read (and the bytes dropped) this long before close, so that the
 * client reads the answer instead of a reset. */
#define LINGER_S 2.0

static const char *reason_phrase(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default: return "Error";
    }
}

/* The complete HTTP answer for an error decided outside libmicrohttpd, in buf. Returns its length
 * (0 if it does not fit). */
static size_t format_refusal(char *buf, size_t cap, int status, const char *code, const char *message, int head_only) {
    char body[512];
    int bl = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, message);
    if (bl < 0 || (size_t)bl >= sizeof body) return 0;
    int n = snprintf(buf, cap,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     "X-Content-Type-Options: nosniff\r\nConnection: close\r\n%s\r\n%s",
                     status, reason_phrase(status), bl, status == 429 || status == 503 ? "Retry-After: 1\r\n" : "",
                     head_only ? "" : body);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

static void ip_key(const struct sockaddr_storage *ss, unsigned char key[16]) {
    memset(key, 0, 16);
    if (ss->ss_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    }
}

static const char *addr_text(const http_conn *c, char *buf, size_t len) {
    if (c->addr.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&c->addr)->sin6_addr, buf, (socklen_t)len);
    else
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&c->addr)->sin_addr, buf, (socklen_t)len);
    return buf;
}

static void conn_enter(http_conn *c, conn_state st, double now) {
    c->state = st;
    c->since = now;
}

/* Counts against the connection limits: everything but streams, refusals and connections the
 * front door has already shut down. Called with conns_lock held. */
static int conn_counts(const http_conn *c) {
    return (c->state == CONN_PENDING || c->state == CONN_HANDOFF || c->state == CONN_IDLE || c->state == CONN_BUSY) &&
           !c->killed;
}

/* Ends a connection that is waiting for a request. One of the front door's own is closed; one of
 * libmicrohttpd's is shut down, which libmicrohttpd sees as the client leaving (the slot is freed
 * in on_connection, before libmicrohttpd closes the descriptor, so the descriptor named here is
 * still that connection's). With `answer` a JSON 408 goes first. Called with conns_lock held. */
static void conn_end_waiting(http_server *s, http_conn *c, int answer) {
    if (answer) {
        char msg[1024];
        size_t n =
            format_refusal(msg, sizeof msg, 408, "request_timeout", "the request head did not arrive in time", 0);
        if (n && send(c->fd, msg, n, MSG_DONTWAIT | MSG_NOSIGNAL) > 0) atomic_fetch_add(&s->status_counts[408], 1);
    }
    if (c->state == CONN_PENDING) {
        if (answer) {
            shutdown(c->fd, SHUT_WR);
            conn_enter(c, CONN_CLOSING, http_mono_now());
            c->deadline = c->since + LINGER_S;
        } else {
            close(c->fd);
            c->state = CONN_FREE;
        }
    } else {
        shutdown(c->fd, SHUT_RDWR);
        c->killed = 1;
    }
}

/* A connection waiting for a request that may be closed to make room: one in the front door, or a
 * kept-alive one between requests. The oldest goes first. Called with conns_lock held. */
static int conn_evict_oldest(http_server *s, const unsigned char *ip) {
    http_conn *best = NULL;
    for (unsigned i = 0; i < s->adm.n_slots; i++) {
        http_conn *c = &s->adm.conns[i];
        int waiting = c->state == CONN_PENDING || (c->state == CONN_IDLE && !c->killed && (c->served || c->partial));
        if (!waiting || (ip && memcmp(c->ip, ip, 16) != 0)) continue;
        if (!best || c->since < best->since) best = c;
    }
    if (!best) return 0;
    char a[INET6_ADDRSTRLEN];
    log_debug("closing an idle connection from %s to make room", addr_text(best, a, sizeof a));
    conn_end_waiting(s, best, 0);
    return 1;
}

/* Answers a connection the front door owns with an error and starts draining it. */
static void conn_refuse(http_server *s, http_conn *c, int status, const char *code, const char *message,
                        int head_only) {
    char msg[1024];
    size_t n = format_refusal(msg, sizeof msg, status, code, message, head_only);
    if (n) send(c->fd, msg, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    atomic_fetch_add(&s->status_counts[status], 1);
    char a[INET6_ADDRSTRLEN];
    log_info("refused %d %s from %s", status, code, addr_text(c, a, sizeof a));
    shutdown(c->fd, SHUT_WR);
    pthread_mutex_lock(&s->adm.lock);
    conn_enter(c, CONN_CLOSING, http_mono_now());
    c->deadline = c->since + LINGER_S;
    pthread_mutex_unlock(&s->adm.lock);
}

static void front_readable(http_server *s, http_conn *c, short revents, char *buf);

/* Accepts what is waiting; returns -1 when out of descriptors (the caller pauses accepting). A
 * request that came with its connection is looked at at once (buf: HTTP_MAX_HEAD + 1 bytes). */
static int front_accept(http_server *s, char *buf) {
    for (int round = 0; round < 64; round++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE) {
                log_warn("cannot accept a connection: %s", strerror(errno));
                return -1;
            }
            return 0;
        }
        unsigned char ip[16];
        ip_key(&ss, ip);
        double now = http_mono_now();
        pthread_mutex_lock(&s->adm.lock);
        http_conn *slot = NULL;
        unsigned total = 0, from_ip = 0;
        for (unsigned i = 0; i < s->adm.n_slots; i++) {
            http_conn *c = &s->adm.conns[i];
            /* A descriptor number that comes back from accept() was closed: a handoff still
             * waiting under that number was refused inside libmicrohttpd. */
            if (c->state == CONN_HANDOFF && c->fd == fd) c->state = CONN_FREE;
            if (c->state == CONN_FREE) {
                if (!slot) slot = c;
                continue;
            }
            if (!conn_counts(c)) continue;
            total++;
            from_ip += !memcmp(c->ip, ip, 16);
        }
        if (!slot) {
            pthread_mutex_unlock(&s->adm.lock);
            close(fd);
            log_warn("connection table full: a connection was closed unanswered");
            continue;
        }
        int refuse = 0;
        if (from_ip >= s->adm.max_per_ip) {
            if (!conn_evict_oldest(s, ip)) refuse = 429;
        } else if (total >= s->adm.max_conn) {
            if (!conn_evict_oldest(s, NULL)) refuse = 503;
        }
        memset(slot, 0, sizeof *slot);
        slot->fd = fd;
        memcpy(&slot->addr, &ss, sl);
        slot->addrlen = sl;
        memcpy(slot->ip, ip, 16);
        slot->accepted = now;
        conn_enter(slot, CONN_PENDING, now);
        slot->deadline = now + s->adm.header_timeout_s;
        pthread_mutex_unlock(&s->adm.lock);
        if (refuse == 429)
            conn_refuse(s, slot, 429, "too_many_connections", "too many connections from this address", 0);
        else if (refuse == 503)
            conn_refuse(s, slot, 503, "too_many_connections", "the server has too many connections", 0);
        else
            front_readable(s, slot, 0, buf);
    }
    return 0;
}

/* New bytes (or the end) on a connection whose head is not complete. The bytes are only peeked, so
 * that libmicrohttpd reads the same ones; SO_RCVLOWAT keeps poll() quiet until more arrive. */
static void front_readable(http_server *s, http_conn *c, short revents, char *buf) {
    ssize_t r = recv(c->fd, buf, HTTP_MAX_HEAD + 1, MSG_PEEK);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        pthread_mutex_lock(&s->adm.lock);
        close(c->fd);
        c->state = CONN_FREE;
        pthread_mutex_unlock(&s->adm.lock);
        return;
    }
    int eof = (revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
    http_head_check_result res;
    int k = http_head_check(buf, (size_t)r, eof, &res);
    if (k < 0) {
        conn_refuse(s, c, res.status, res.code, res.message, res.is_head);
        return;
    }
    if (k == 0) {
        if (eof) {
            pthread_mutex_lock(&s->adm.lock);
            close(c->fd);
            c->state = CONN_FREE;
            pthread_mutex_unlock(&s->adm.lock);
            return;
        }
        int lowat = (int)r + 1;
        setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
        return;
    }
    int one = 1;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    int fd = c->fd;
    struct sockaddr_storage ss = c->addr;
    socklen_t sl = c->addrlen;
    pthread_mutex_lock(&s->adm.lock);
    conn_enter(c, CONN_HANDOFF, http_mono_now());
    c->deadline = c->since + 10.0;
    pthread_mutex_unlock(&s->adm.lock);
    if (MHD_add_connection(s->daemon, fd, (struct sockaddr *)&ss, sl) != MHD_YES) {
        log_warn("libmicrohttpd refused a connection: %s", strerror(errno));
        pthread_mutex_lock(&s->adm.lock);
        if (c->state == CONN_HANDOFF && c->fd == fd) c->state = CONN_FREE; /* it closed fd */
        pthread_mutex_unlock(&s->adm.lock);
    }
}

static void front_drain(http_server *s, http_conn *c, char *buf) {
    ssize_t r = recv(c->fd, buf, HTTP_MAX_HEAD, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        pthread_mutex_lock(&s->adm.lock);
        close(c->fd);
        c->state = CONN_FREE;
        pthread_mutex_unlock(&s->adm.lock);
    }
}

/* Deadlines: heads that did not arrive in time (in the front door or, for a next request on a
 * kept-alive connection, in libmicrohttpd), drains that lasted long enough, handoffs that
 * libmicrohttpd never took up. */
static void front_expire(http_server *s) {
    double now = http_mono_now();
    pthread_mutex_lock(&s->adm.lock);
    for (unsigned i = 0; i < s->adm.n_slots; i++) {
        http_conn *c = &s->adm.conns[i];
        if (c->state == CONN_FREE || c->deadline > now) continue;
        if (c->state == CONN_PENDING || (c->state == CONN_IDLE && !c->killed)) {
            int ll = 0;
            if (c->state == CONN_PENDING) {
                char b[1];
                ll = recv(c->fd, b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
            } else {
                ll = c->partial;
            }
            char a[INET6_ADDRSTRLEN];
            if (ll)
                log_info("closing a connection from %s: its request head did not arrive within %.1f s",
                         addr_text(c, a, sizeof a), s->adm.header_timeout_s);
            conn_end_waiting(s, c, ll);
        } else if (c->state == CONN_CLOSING) {
            close(c->fd);
            c->state = CONN_FREE;
        } else if (c->state == CONN_HANDOFF) {
            c->state = CONN_FREE;
        }
    }
    pthread_mutex_unlock(&s->adm.lock);
}

static void *front_main(void *arg) {
    http_server *s = arg;
    struct pollfd *pfd = malloc((s->adm.n_slots + 2) * sizeof *pfd);
    unsigned *slot_of = malloc(s->adm.n_slots * sizeof *slot_of);
    char *buf = malloc(HTTP_MAX_HEAD + 1);
    if (!pfd || !slot_of || !buf) {
        log_error("out of memory in the connection acceptor: no new connections");
        free(pfd);
        free(slot_of);
        free(buf);
        return NULL;
    }
    double accept_paused_until = 0;
    while (!atomic_load(&s->stopping)) {
        nfds_t n = 0;
        double now = http_mono_now(), next = now + 0.25, due = now + 3600;
        pfd[n++] = (struct pollfd){.fd = s->adm.wake_pipe[0], .events = POLLIN};
        /* Out of descriptors, the listening socket would stay readable: leave it a moment. */
        pfd[n++] = (struct pollfd){.fd = now < accept_paused_until ? -1 : s->listen_fd, .events = POLLIN};
        pthread_mutex_lock(&s->adm.lock);
        for (unsigned i = 0; i < s->adm.n_slots; i++) {
            http_conn *c = &s->adm.conns[i];
            if (c->state == CONN_FREE) continue;
            /* Only waiting states have a deadline (a busy or streaming slot keeps a stale one). */
            int timed = c->state == CONN_PENDING || c->state == CONN_CLOSING || c->state == CONN_HANDOFF ||
                        (c->state == CONN_IDLE && !c->killed);
            if (timed && c->deadline < due) due = c->deadline;
            if (c->state != CONN_PENDING && c->state != CONN_CLOSING) continue;
            slot_of[n - 2] = i;
            pfd[n++] = (struct pollfd){.fd = c->fd, .events = POLLIN | POLLRDHUP};
        }
        pthread_mutex_unlock(&s->adm.lock);
        if (due < next) next = due;
        double wait_ms = (next - now) * 1e3 + 1;
        int rc = poll(pfd, n, wait_ms < 0 ? 0 : wait_ms > 250 ? 250 : (int)wait_ms);
        if (rc < 0 && errno != EINTR) {
            log_error("poll: %s", strerror(errno));
            break;
        }
        if (pfd[0].revents) {
            char drain[64];
            while (read(s->adm.wake_pipe[0], drain, sizeof drain) > 0) {}
        }
        if (atomic_load(&s->stopping)) break;
        for (nfds_t k = 2; rc > 0 && k < n; k++) {
            if (!pfd[k].revents) continue;
            http_conn *c = &s->adm.conns[slot_of[k - 2]];
            if (c->state == CONN_PENDING)
                front_readable(s, c, pfd[k].revents, buf);
            else if (c->state == CONN_CLOSING)
                front_drain(s, c, buf);
        }
        if ((pfd[1].revents & POLLIN) && front_accept(s, buf) < 0) accept_paused_until = http_mono_now() + 0.1;
        if (http_mono_now() >= due) front_expire(s);
    }
    free(pfd);
    free(slot_of);
    free(buf);
    return NULL;
}

/* libmicrohttpd took up (or let go of) a connection the front door handed it. */
void http_admission_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                                  enum MHD_ConnectionNotificationCode toe) {
    http_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = ci ? ci->connect_fd : -1;
        *socket_context = NULL;
        pthread_mutex_lock(&s->adm.lock);
        for (unsigned i = 0; i < s->adm.n_slots; i++) {
            http_conn *c = &s->adm.conns[i];
            if (c->state != CONN_HANDOFF || c->fd != fd) continue;
            conn_enter(c, CONN_IDLE, http_mono_now());
            c->deadline = c->since + s->adm.header_timeout_s;
            *socket_context = c;
            break;
        }
        pthread_mutex_unlock(&s->adm.lock);
        if (!*socket_context) log_warn("libmicrohttpd started an untracked connection (fd %d)", fd);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        http_conn *c = *socket_context;
        if (!c) return;
        pthread_mutex_lock(&s->adm.lock);
        c->state = CONN_FREE;
        pthread_mutex_unlock(&s->adm.lock);
        *socket_context = NULL;
    }
}

http_conn *http_admission_conn_of(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

int http_admission_init(http_server *s, const http_config *cfg) {
    http_admission *a = &s->adm;
    a->max_conn = cfg->max_connections ? cfg->max_connections : 256;
    a->max_per_ip = cfg->max_connections_per_ip ? cfg->max_connections_per_ip : 128;
    a->max_streams = cfg->max_streams ? cfg->max_streams : 256;
    a->header_timeout_s = (cfg->header_timeout_ms ? cfg->header_timeout_ms : 10000) / 1e3;
    a->n_slots = a->max_conn + a->max_streams + REFUSAL_SLOTS;
    a->conns = calloc(a->n_slots, sizeof *a->conns);
    a->wake_pipe[0] = a->wake_pipe[1] = -1;
    if (!a->conns || pipe2(a->wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        free(a->conns);
        a->conns = NULL;
        return -1;
    }
    pthread_mutex_init(&a->lock, NULL);
    return 0;
}

int http_admission_start(http_server *s) {
    int flags = fcntl(s->listen_fd, F_GETFL);
    if (flags < 0 || fcntl(s->listen_fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        pthread_create(&s->adm.front, NULL, front_main, s) != 0)
        return -1;
    s->adm.front_started = 1;
    return 0;
}

void http_admission_stop(http_server *s) {
    if (!s->adm.front_started) return;
    if (write(s->adm.wake_pipe[1], "x", 1) < 0) { /* the pipe is full: a wake is pending anyway */
    }
    pthread_join(s->adm.front, NULL);
    s->adm.front_started = 0;
    pthread_mutex_lock(&s->adm.lock);
    for (unsigned i = 0; i < s->adm.n_slots; i++) {
        http_conn *c = &s->adm.conns[i];
        if (c->state == CONN_PENDING || c->state == CONN_CLOSING) {
            close(c->fd);
            c->state = CONN_FREE;
        }
    }
    pthread_mutex_unlock(&s->adm.lock);
}

void http_admission_destroy(http_server *s) {
    pthread_mutex_destroy(&s->adm.lock);
    free(s->adm.conns);
    close(s->adm.wake_pipe[0]);
    close(s->adm.wake_pipe[1]);
}

void http_admission_request_line(http_server *s, http_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&s->adm.lock);
    c->partial = 1;
    pthread_mutex_unlock(&s->adm.lock);
}

int http_admission_request_begins(http_server *s, http_conn *c) {
    if (!c) return 0;
    pthread_mutex_lock(&s->adm.lock);
    int killed = c->killed;
    if (!killed) {
        conn_enter(c, CONN_BUSY, http_mono_now());
        c->partial = 0;
    }
    pthread_mutex_unlock(&s->adm.lock);
    return killed ? -1 : 0;
}

void http_admission_request_ends(http_server *s, http_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&s->adm.lock);
    if (!c->killed && (c->state == CONN_BUSY || c->state == CONN_STREAM || c->state == CONN_IDLE)) {
        conn_enter(c, CONN_IDLE, http_mono_now());
        c->deadline = c->since + s->adm.header_timeout_s;
        c->partial = 0;
        c->served++;
    }
    pthread_mutex_unlock(&s->adm.lock);
}

int http_admission_enter_stream(http_server *s, http_conn *c) {
    if (!c) return 0;
    pthread_mutex_lock(&s->adm.lock);
    unsigned streams = 0;
    for (unsigned i = 0; i < s->adm.n_slots; i++) streams += s->adm.conns[i].state == CONN_STREAM;
    if (streams >= s->adm.max_streams) {
        pthread_mutex_unlock(&s->adm.lock);
        return -1;
    }
    conn_enter(c, CONN_STREAM, http_mono_now());
    pthread_mutex_unlock(&s->adm.lock);
    return 0;
}

unsigned http_admission_max_streams(const http_server *s) { return s->adm.max_streams; }
