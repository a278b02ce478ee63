/* Helpers shared by the client tests (header-only: the Makefile links one .c per test program).
 *
 * client_run() runs the attnlab binary under test ($ATTNLAB) with arguments, stdout and stderr
 * captured separately through pipes (so stdout is not a terminal); client_run_pty() runs it on a
 * pseudo-terminal of a given width. Both kill the child after timeout_s and return its exit status
 * in r->code (-1 when killed or not run).
 *
 * fake_server: a scripted HTTP server in a child process, for what a real attnlabd cannot be made
 * to do on demand (drop a stream mid-way, ask for a resync, end a run "interrupted", hang, answer
 * garbage). Rules are matched in order by method and path prefix, each usable `times` times
 * (0: always); the raw response is written as given and the connection closed after hold_ms. Every
 * request's method, path and Last-Event-ID/Authorization headers are appended to a log file. */
#ifndef ATTNLAB_TEST_CLIENT_RUN_H
#define ATTNLAB_TEST_CLIENT_RUN_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Each test program uses some of these helpers; the rest must not warn. */
#define TEST_HELPER static __attribute__((unused))

typedef struct {
    int code;
    char out[1 << 17];
    char err[1 << 13];
    size_t out_len, err_len;
} client_result;

/* Set to 1 around a client_run that tests ATTNLAB_SERVER / ATTNLAB_TOKEN. */
static int client_keep_env __attribute__((unused));

TEST_HELPER const char *client_binary(void) {
    const char *p = getenv("ATTNLAB");
    return p ? p : "build/release/attnlab";
}

TEST_HELPER double client_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

TEST_HELPER int client_wait(pid_t pid, double deadline) {
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (r < 0) return -1;
        if (client_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

TEST_HELPER void client_exec(const char *const *args) {
    const char *argv[64];
    int n = 0;
    argv[n++] = client_binary();
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    /* The environment must not steer the client unless a test means it to. */
    if (!client_keep_env) {
        unsetenv("ATTNLAB_SERVER");
        unsetenv("ATTNLAB_TOKEN");
    }
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

/* Runs attnlab args... with stdin from /dev/null; returns r->code. */
TEST_HELPER int client_run(client_result *r, double timeout_s, const char *const *args) {
    memset(r, 0, sizeof *r);
    r->code = -1;
    int po[2], pe[2];
    if (pipe(po) < 0) return -1;
    if (pipe(pe) < 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        dup2(nul, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]), close(pe[0]), close(po[1]), close(pe[1]);
        client_exec(args);
    }
    close(po[1]);
    close(pe[1]);
    double deadline = client_now() + timeout_s;
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0 && client_now() < deadline) {
        if (poll(fds, 2, 50) <= 0) continue;
        for (int k = 0; k < 2; k++) {
            if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char *buf = k ? r->err : r->out;
            size_t cap = k ? sizeof r->err : sizeof r->out, *len = k ? &r->err_len : &r->out_len;
            char sink[4096];
            ssize_t got =
                *len + 1 < cap ? read(fds[k].fd, buf + *len, cap - 1 - *len) : read(fds[k].fd, sink, sizeof sink);
            if (got <= 0) {
                close(fds[k].fd);
                fds[k].fd = -1;
                open_fds--;
            } else if (*len + 1 < cap) {
                *len += (size_t)got;
            }
        }
    }
    for (int k = 0; k < 2; k++)
        if (fds[k].fd >= 0) close(fds[k].fd);
    r->out[r->out_len] = 0;
    r->err[r->err_len] = 0;
    r->code = client_wait(pid, deadline + 1);
    return r->code;
}

/* Runs attnlab on a pseudo-terminal cols wide; stdout and stderr both land in r->out. */
TEST_HELPER int client_run_pty(client_result *r, double timeout_s, int cols, const char *const *args) {
    memset(r, 0, sizeof *r);
    r->code = -1;
    int master;
    struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)cols};
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    if (pid < 0) return -1;
    if (pid == 0) client_exec(args);
    double deadline = client_now() + timeout_s;
    for (;;) {
        struct pollfd p = {master, POLLIN, 0};
        if (client_now() > deadline) break;
        if (poll(&p, 1, 50) <= 0) continue;
        char sink[4096];
        ssize_t got = r->out_len + 1 < sizeof r->out ? read(master, r->out + r->out_len, sizeof r->out - 1 - r->out_len)
                                                     : read(master, sink, sizeof sink);
        if (got <= 0) break; /* EIO once the child is gone */
        if (r->out_len + 1 < sizeof r->out) r->out_len += (size_t)got;
    }
    close(master);
    r->out[r->out_len] = 0;
    r->code = client_wait(pid, deadline + 1);
    return r->code;
}

TEST_HELPER int count_substr(const char *hay, const char *needle) {
    int n = 0;
    size_t k = strlen(needle);
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += k) n++;
    return n;
}

TEST_HELPER int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* ---- the scripted server --------------------------------------------------------------- */

typedef struct {
    const char *method, *path; /* path matches as a prefix of the request path (query included) */
    const char *response;      /* raw HTTP response; NULL: accept and never answer */
    int times;                 /* 0: unlimited */
    int hold_ms;               /* keep the connection open this long after writing */
} fake_rule;

typedef struct {
    pid_t pid;
    int port;
    char url[64];
    char log_path[256];
} fake_server;

TEST_HELPER int fake_read_request(int fd, char *buf, size_t cap) {
    size_t got = 0;
    double deadline = client_now() + 5;
    while (got + 1 < cap && client_now() < deadline) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        buf[got] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (end) {
            /* Drain a body announced by Content-Length, so that the client sees a clean reply. */
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            size_t want = cl ? (size_t)atol(cl + 17) : 0;
            size_t have = got - (size_t)(end + 4 - buf);
            while (have < want && got + 1 < cap) {
                r = read(fd, buf + got, cap - 1 - got);
                if (r <= 0) break;
                got += (size_t)r, have += (size_t)r;
            }
            buf[got] = 0;
            return (int)got;
        }
    }
    buf[got] = 0;
    return (int)got;
}

TEST_HELPER void fake_log_header(FILE *log, const char *req, const char *name) {
    char pat[64];
    snprintf(pat, sizeof pat, "\r\n%s:", name);
    const char *h = strcasestr(req, pat);
    if (!h) return;
    h += strlen(pat);
    while (*h == ' ') h++;
    fprintf(log, "%s: %.*s\n", name, (int)strcspn(h, "\r\n"), h);
}

TEST_HELPER void fake_serve(int lfd, fake_rule *rules, int nrules, const char *log_path) {
    int *used = calloc((size_t)nrules, sizeof *used);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR) continue;
            _exit(0);
        }
        char req[16384];
        fake_read_request(fd, req, sizeof req);
        char method[16] = "", path[1024] = "";
        sscanf(req, "%15s %1023s", method, path);
        FILE *log = fopen(log_path, "a");
        if (log) {
            fprintf(log, "%s %s\n", method, path);
            fake_log_header(log, req, "Last-Event-ID");
            fake_log_header(log, req, "Authorization");
            const char *body = strstr(req, "\r\n\r\n");
            if (body && body[4]) fprintf(log, "body: %s\n", body + 4);
            fclose(log);
        }
        int matched = -1;
        for (int i = 0; i < nrules; i++) {
            if (strcmp(rules[i].method, method) || strncmp(rules[i].path, path, strlen(rules[i].path))) continue;
            if (rules[i].times && used[i] >= rules[i].times) continue;
            matched = i;
            break;
        }
        if (matched < 0) {
            static const char nf[] =
                "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 65\r\n"
                "Connection: close\r\n\r\n{\"error\":{\"code\":\"not_found\",\"message\":\"no such route here\"}}";
            (void)!write(fd, nf, sizeof nf - 1);
        } else {
            used[matched]++;
            /* Answer from a child so that a held connection does not block the next one. */
            pid_t kid = fork();
            if (kid != 0) {
                close(fd);
                while (waitpid(-1, NULL, WNOHANG) > 0) {}
                continue;
            }
            close(lfd);
            if (!rules[matched].response) {
                struct timespec ts = {30, 0};
                nanosleep(&ts, NULL);
            } else {
                const char *resp = rules[matched].response;
                (void)!write(fd, resp, strlen(resp));
                if (rules[matched].hold_ms) {
                    struct timespec ts = {rules[matched].hold_ms / 1000, (rules[matched].hold_ms % 1000) * 1000000L};
                    nanosleep(&ts, NULL);
                }
            }
            shutdown(fd, SHUT_RDWR);
            close(fd);
            _exit(0);
        }
        shutdown(fd, SHUT_RDWR);
        close(fd);
    }
}

TEST_HELPER int fake_start(fake_server *s, fake_rule *rules, int nrules) {
    memset(s, 0, sizeof *s);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) return -1;
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 16) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) < 0) {
        close(lfd);
        return -1;
    }
    s->port = ntohs(a.sin_port);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    const char *tmp = getenv("TMPDIR");
    snprintf(s->log_path, sizeof s->log_path, "%s/attnlab-fake-XXXXXX", tmp ? tmp : "/tmp");
    int lf = mkstemp(s->log_path);
    if (lf < 0) {
        close(lfd);
        return -1;
    }
    close(lf);
    pid_t pid = fork();
    if (pid < 0) {
        close(lfd);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0); /* its answering children go with it on fake_stop */
        fake_serve(lfd, rules, nrules, s->log_path);
    }
    setpgid(pid, pid);
    close(lfd);
    s->pid = pid;
    return 0;
}

/* Stops the server and returns its request log (caller frees), removing the file. */
TEST_HELPER char *fake_stop(fake_server *s) {
    if (s->pid > 0) {
        kill(-s->pid, SIGKILL);
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    FILE *f = fopen(s->log_path, "r");
    char *text = calloc(1, 1 << 16);
    if (f && text) {
        size_t n = fread(text, 1, (1 << 16) - 1, f);
        text[n] = 0;
    }
    if (f) fclose(f);
    unlink(s->log_path);
    return text;
}

#endif
