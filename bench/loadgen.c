/* An open-loop HTTP load generator for `make loadtest` (scripts/loadtest.sh).
 *
 * It sends exactly RATE requests a second for SECONDS seconds, cycling over the given paths,
 * whatever the answers' latency: request k is due at start + k / RATE, and its latency is measured
 * from that moment (so a server that stalls is charged for the requests that waited to be sent,
 * which a closed loop like wrk's would leave out). Each request goes on an idle kept-alive
 * connection, or a new one when none is idle (at most --max-conns; past them a request counts as
 * an error). Bodies are read and discarded (Content-Length or chunked). At the end it prints one
 * line
 *   RESULT sent=… done=… rps=… p50_ms=… p90_ms=… p99_ms=… max_ms=… errors=… non2xx=… codes=200:…,429:…
 *          cpu_s=… wall_s=… cpu_share=…
 * where cpu_s is the generator's own CPU time (user + system) and cpu_share that time over the
 * wall time and the machine's cores: how much of the machine the generator itself took, to tell the
 * server's share of a slowdown from the generator's.
 *
 * SIGINT or SIGTERM ends the run early (what was sent by then is waited for and reported), so a
 * sampler can run "for as long as" something else does.
 * usage: loadgen --url http://HOST:PORT --rate R --seconds S [--max-conns N] [--timeout-ms T]
 *                PATH [PATH ...]
 * Plain sockets and poll(); no library beyond libc. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef enum { C_FREE, C_IDLE, C_CONNECTING, C_BUSY } conn_state;
typedef enum { R_HEAD, R_LENGTH, R_CHUNK_SIZE, R_CHUNK_DATA, R_CHUNK_END, R_TRAILER, R_UNTIL_CLOSE } read_state;

typedef struct {
    int fd;
    conn_state state;
    read_state rs;
    double due;      /* the request's scheduled time */
    const char *req; /* the request's bytes */
    size_t req_len, sent;
    char head[8192];
    size_t head_len;
    long long left; /* body bytes (or chunk bytes) still to read */
    int status, keep_alive;
    char line[64];
    size_t line_len;
} conn;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static struct sockaddr_in server;
static double *lat;
static size_t n_lat, n_err, n_non2xx;
static size_t codes[600];
static double timeout_s = 10.0;
static volatile sig_atomic_t interrupted; /* SIGINT/SIGTERM: stop sending, report what was measured */

static void on_signal(int sig) {
    (void)sig;
    interrupted = 1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void conn_close(conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->state = C_FREE;
}

static void finish(conn *c, int ok) {
    if (ok) {
        lat[n_lat++] = now_s() - c->due;
        if (c->status >= 100 && c->status < 600) codes[c->status]++;
        if (c->status < 200 || c->status >= 300) n_non2xx++;
    } else {
        n_err++;
    }
    if (ok && c->keep_alive && c->rs != R_UNTIL_CLOSE) {
        c->state = C_IDLE;
    } else {
        conn_close(c);
    }
}

static int start_request(conn *c, const char *req, size_t len, double due) {
    if (c->state == C_FREE) {
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0) return -1;
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(c->fd, (struct sockaddr *)&server, sizeof server) < 0 && errno != EINPROGRESS) {
            conn_close(c);
            return -1;
        }
    }
    c->state = C_BUSY;
    c->req = req;
    c->req_len = len;
    c->sent = 0;
    c->due = due;
    c->rs = R_HEAD;
    c->head_len = 0;
    c->status = 0;
    c->keep_alive = 1;
    return 0;
}

/* Parses a complete head; sets the body state. */
static void parse_head(conn *c) {
    c->head[c->head_len] = 0;
    c->status = atoi(c->head + 9);
    const char *cl = strcasestr(c->head, "\r\nContent-Length:");
    const char *te = strcasestr(c->head, "\r\nTransfer-Encoding:");
    const char *cn = strcasestr(c->head, "\r\nConnection:");
    if (cn && !strncasecmp(cn + 13 + strspn(cn + 13, " "), "close", 5)) c->keep_alive = 0;
    if (te && strcasestr(te, "chunked")) {
        c->rs = R_CHUNK_SIZE;
        c->line_len = 0;
    } else if (cl) {
        c->rs = R_LENGTH;
        c->left = atoll(cl + 17);
    } else {
        c->rs = R_UNTIL_CLOSE;
    }
}

/* Consumes n bytes of a response; 1 when the response is complete. */
static int consume(conn *c, const char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        switch (c->rs) {
        case R_HEAD:
            if (c->head_len + 1 >= sizeof c->head) return -1;
            c->head[c->head_len++] = p[i++];
            if (c->head_len >= 4 && !memcmp(c->head + c->head_len - 4, "\r\n\r\n", 4)) {
                parse_head(c);
                if (c->rs == R_LENGTH && c->left == 0) return 1;
            }
            break;
        case R_LENGTH: {
            size_t take = (size_t)c->left < n - i ? (size_t)c->left : n - i;
            c->left -= (long long)take;
            i += take;
            if (c->left == 0) return 1;
            break;
        }
        case R_CHUNK_SIZE:
        case R_TRAILER:
            if (p[i] == '\n') {
                c->line[c->line_len < sizeof c->line ? c->line_len : sizeof c->line - 1] = 0;
                if (c->rs == R_TRAILER) {
                    if (c->line_len <= 1) return 1; /* the blank line after the last chunk */
                } else {
                    c->left = strtoll(c->line, NULL, 16);
                    c->rs = c->left ? R_CHUNK_DATA : R_TRAILER;
                }
                c->line_len = 0;
            } else if (c->line_len < sizeof c->line - 1) {
                c->line[c->line_len++] = p[i];
            }
            i++;
            break;
        case R_CHUNK_DATA: {
            size_t take = (size_t)c->left < n - i ? (size_t)c->left : n - i;
            c->left -= (long long)take;
            i += take;
            if (c->left == 0) {
                c->rs = R_CHUNK_END;
                c->line_len = 0;
            }
            break;
        }
        case R_CHUNK_END:
            if (p[i++] == '\n') c->rs = R_CHUNK_SIZE;
            break;
        case R_UNTIL_CLOSE: i = n; break;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *url = NULL;
    double rate = 0, seconds = 0;
    int max_conns = 64; /* below the server's per-address limit (128) */
    const char *paths[64];
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--url") && i + 1 < argc)
            url = argv[++i];
        else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
            rate = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-conns") && i + 1 < argc)
            max_conns = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc)
            timeout_s = atof(argv[++i]) / 1e3;
        else if (argv[i][0] == '/' && n_paths < 64)
            paths[n_paths++] = argv[i];
        else {
            fprintf(stderr, "usage: loadgen --url http://HOST:PORT --rate R --seconds S [--max-conns N] "
                            "[--timeout-ms T] PATH...\n");
            return 2;
        }
    }
    char host[64];
    int port = 0;
    if (!url || sscanf(url, "http://%63[0-9.]:%d", host, &port) != 2 || rate <= 0 || seconds <= 0 || !n_paths ||
        max_conns < 1) {
        fprintf(stderr, "loadgen: needs --url http://IPv4:PORT, --rate > 0, --seconds > 0 and a path\n");
        return 2;
    }
    server.sin_family = AF_INET;
    server.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, host, &server.sin_addr);
    char *reqs[64];
    size_t req_len[64];
    for (int i = 0; i < n_paths; i++) {
        reqs[i] = malloc(strlen(paths[i]) + 128);
        req_len[i] =
            (size_t)sprintf(reqs[i], "GET %s HTTP/1.1\r\nHost: %s:%d\r\nAccept: */*\r\n\r\n", paths[i], host, port);
    }
    size_t total = (size_t)llround(rate * seconds);
    lat = malloc((total + 1) * sizeof *lat);
    conn *conns = calloc((size_t)max_conns, sizeof *conns);
    struct pollfd *pfd = malloc((size_t)max_conns * sizeof *pfd);
    int *idx = malloc((size_t)max_conns * sizeof *idx);
    if (!lat || !conns || !pfd || !idx) return 1;
    for (int i = 0; i < max_conns; i++) conns[i].fd = -1;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now_s() + 0.05, end_wait = t0 + seconds + timeout_s;
    size_t next = 0;
    char buf[65536];
    for (;;) {
        double now = now_s();
        if (interrupted && next < total) {
            total = next;
            end_wait = now + timeout_s;
        }
        /* Every request that is due goes out now, on an idle connection or a new one. */
        while (next < total && t0 + (double)next / rate <= now) {
            conn *c = NULL;
            for (int i = 0; i < max_conns && !c; i++)
                if (conns[i].state == C_IDLE) c = &conns[i];
            for (int i = 0; i < max_conns && !c; i++)
                if (conns[i].state == C_FREE) c = &conns[i];
            int k = (int)(next % (size_t)n_paths);
            if (!c || start_request(c, reqs[k], req_len[k], t0 + (double)next / rate) < 0) n_err++;
            next++;
        }
        int busy = 0, n = 0;
        for (int i = 0; i < max_conns; i++) {
            conn *c = &conns[i];
            if (c->state != C_BUSY) continue;
            busy = 1;
            if (now - c->due > timeout_s) {
                finish(c, 0);
                continue;
            }
            pfd[n] = (struct pollfd){.fd = c->fd, .events = c->sent < c->req_len ? POLLOUT : POLLIN};
            idx[n++] = i;
        }
        if (next >= total && (!busy || now > end_wait)) break;
        double wait = next < total ? t0 + (double)next / rate - now : 0.05;
        /* rounded up: a request goes at most a millisecond late rather than the loop spinning */
        int ms = wait <= 0 ? 0 : wait > 0.05 ? 50 : (int)ceil(wait * 1e3);
        if (poll(pfd, (nfds_t)n, ms) < 0 && errno != EINTR) break;
        for (int k = 0; k < n; k++) {
            conn *c = &conns[idx[k]];
            if (!pfd[k].revents) continue;
            if (c->sent < c->req_len) {
                ssize_t w = send(c->fd, c->req + c->sent, c->req_len - c->sent, MSG_NOSIGNAL);
                if (w < 0 && (errno == EAGAIN || errno == EINPROGRESS)) continue;
                if (w <= 0) {
                    finish(c, 0);
                    continue;
                }
                c->sent += (size_t)w;
                continue;
            }
            ssize_t r = recv(c->fd, buf, sizeof buf, 0);
            if (r < 0 && errno == EAGAIN) continue;
            if (r <= 0) {
                /* closed: complete only for an answer that ends at the close */
                finish(c, c->rs == R_UNTIL_CLOSE && c->status > 0);
                continue;
            }
            int done = consume(c, buf, (size_t)r);
            if (done) finish(c, done > 0);
        }
    }
    double wall = now_s() - t0;
    getrusage(RUSAGE_SELF, &ru1);
    double cpu =
        (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) + (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6 +
        (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) + (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    qsort(lat, n_lat, sizeof *lat, cmp_double);
#define PCT(p) (n_lat ? 1e3 * lat[(size_t)((p) * (double)(n_lat - 1) + 0.5)] : 0.0)
    char codes_text[512] = "";
    size_t o = 0;
    for (int s = 100; s < 600; s++)
        if (codes[s] && o < sizeof codes_text - 16)
            o += (size_t)snprintf(codes_text + o, sizeof codes_text - o, "%s%d:%zu", o ? "," : "", s, codes[s]);
    printf("RESULT sent=%zu done=%zu rps=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f errors=%zu non2xx=%zu "
           "codes=%s cpu_s=%.3f wall_s=%.2f cpu_share=%.4f\n",
           next, n_lat, (double)n_lat / (wall > 0 ? wall : 1), PCT(0.50), PCT(0.90), PCT(0.99), PCT(1.0), n_err,
           n_non2xx, o ? codes_text : "-", cpu, wall, cpu / ((wall > 0 ? wall : 1) * (double)(cores > 0 ? cores : 1)));
    for (int i = 0; i < max_conns; i++) conn_close(&conns[i]);
    for (int i = 0; i < n_paths; i++) free(reqs[i]);
    free(lat);
    free(conns);
    free(pfd);
    free(idx);
    return 0;
}
