/* `attnlabd serve`: flags, data directory, store, HTTP server, signals. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app.h"
#include "commands.h"
#include "log.h"

typedef struct {
    const char *bind;
    int port;
    const char *data_dir;
    const char *static_dir;
    const char *log_level;
    unsigned http_threads;
} serve_flags;

static void serve_usage(FILE *out) {
    fprintf(out,
            "usage: attnlabd [serve] [flags]\n"
            "  --bind ADDR        address to listen on (default 127.0.0.1)\n"
            "  --port N           TCP port, 0 picks a free one (default 8080)\n"
            "  --data-dir DIR     database, checkpoints and corpora (default ./var)\n"
            "  --static-dir DIR   dashboard files (default ./static, or the one beside the binary)\n"
            "  --log-level LEVEL  debug, info, warn or error (default info)\n"
            "  --http-threads N   HTTP worker threads (default 4)\n"
            "  --help             this text\n");
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* Returns 0 and fills flags, 1 after --help, 2 on a bad flag (message already printed). */
static int parse_flags(int argc, char **argv, serve_flags *f) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = (i + 1 < argc) ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            serve_usage(stdout);
            return 1;
        }
#define NEED_VALUE()                                                       \
    do {                                                                   \
        if (!val) {                                                        \
            fprintf(stderr, "attnlabd: %s needs a value\n", a);            \
            return 2;                                                      \
        }                                                                  \
        i++;                                                               \
    } while (0)
        if (!strcmp(a, "--bind")) {
            NEED_VALUE();
            f->bind = val;
        } else if (!strcmp(a, "--port")) {
            NEED_VALUE();
            if (parse_int(val, 0, 65535, &n) < 0) {
                fprintf(stderr, "attnlabd: --port must be an integer in 0..65535, not '%s'\n", val);
                return 2;
            }
            f->port = (int)n;
        } else if (!strcmp(a, "--data-dir")) {
            NEED_VALUE();
            f->data_dir = val;
        } else if (!strcmp(a, "--static-dir")) {
            NEED_VALUE();
            f->static_dir = val;
        } else if (!strcmp(a, "--log-level")) {
            NEED_VALUE();
            if (log_level_parse(val) < 0) {
                fprintf(stderr, "attnlabd: --log-level must be debug, info, warn or error, not '%s'\n", val);
                return 2;
            }
            f->log_level = val;
        } else if (!strcmp(a, "--http-threads")) {
            NEED_VALUE();
            if (parse_int(val, 1, 64, &n) < 0) {
                fprintf(stderr, "attnlabd: --http-threads must be in 1..64, not '%s'\n", val);
                return 2;
            }
            f->http_threads = (unsigned)n;
        } else {
            fprintf(stderr, "attnlabd: unknown flag '%s' (see attnlabd --help)\n", a);
            return 2;
        }
#undef NEED_VALUE
    }
    return 0;
}

/* Creates dir (and parents) and proves it writable by creating and removing a file in it. */
static int ensure_writable_dir(const char *dir, char *err, size_t errlen) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        snprintf(err, errlen, "path too long");
        return -1;
    }
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
            return -1;
        }
        *p = '/';
    }
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    char probe[PATH_MAX];
    snprintf(probe, sizeof probe, "%s/.write-test-%d", dir, (int)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "%s is not writable: %s", dir, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

/* The dashboard ships beside the binary in the source tree (build/MODE/attnlabd -> static/). */
static const char *default_static_dir(char *buf, size_t len) {
    struct stat st;
    if (stat("static/index.html", &st) == 0) return "static";
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        const char *dir = dirname(exe);
        const char *candidates[] = {"%s/../../static", "%s/../share/attnlab/static", "%s/static"};
        for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
            char idx[PATH_MAX + 32];
            snprintf(buf, len, candidates[i], dir);
            snprintf(idx, sizeof idx, "%s/index.html", buf);
            if (stat(idx, &st) == 0) return buf;
        }
    }
    return NULL;
}

int cmd_serve(int argc, char **argv) {
    serve_flags f = {.bind = "127.0.0.1", .port = 8080, .data_dir = "var", .log_level = "info", .http_threads = 4};
    int rc = parse_flags(argc, argv, &f);
    if (rc) return rc == 1 ? 0 : 2;
    log_set_level((log_level)log_level_parse(f.log_level));

    char err[512], static_buf[PATH_MAX];
    const char *static_dir = f.static_dir ? f.static_dir : default_static_dir(static_buf, sizeof static_buf);
    if (f.static_dir) {
        struct stat st;
        if (stat(f.static_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "attnlabd: --static-dir %s is not a directory\n", f.static_dir);
            return 2;
        }
    } else if (!static_dir) {
        log_warn("no static directory found; the dashboard will not be served (use --static-dir)");
    }
    if (ensure_writable_dir(f.data_dir, err, sizeof err) < 0) {
        fprintf(stderr, "attnlabd: data directory: %s\n", err);
        return 2;
    }

    /* Signals are taken synchronously by the main thread; every thread started below inherits
     * the blocked mask, so none of them is interrupted by SIGINT/SIGTERM. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    app a = {.data_dir = f.data_dir, .started_at = app_now()};
    char db_path[PATH_MAX];
    snprintf(db_path, sizeof db_path, "%s/attnlab.db", f.data_dir);
    store_status ss = store_open(&a.store, db_path, err, sizeof err);
    if (ss != STORE_OK) {
        fprintf(stderr, "attnlabd: database: %s\n", err);
        return 2;
    }

    http_config hc = {.bind_addr = f.bind,
                      .port = f.port,
                      .static_dir = static_dir,
                      .max_body = 1 << 20,
                      .threads = f.http_threads,
                      .max_connections = 256,
                      .app = &a};
    a.http = http_server_new(&hc);
    if (!a.http || routes_register(a.http) < 0) {
        fprintf(stderr, "attnlabd: out of memory setting up routes\n");
        http_server_free(a.http);
        store_close(a.store);
        return 1;
    }
    if (http_server_start(a.http, err, sizeof err) < 0) {
        fprintf(stderr, "attnlabd: %s\n", err);
        http_server_free(a.http);
        store_close(a.store);
        return 2;
    }
    const char *shown = strchr(f.bind, ':') ? "[::1]" : (!strcmp(f.bind, "0.0.0.0") ? "127.0.0.1" : f.bind);
    printf("attnlabd %s listening on http://%s:%d/ (data in %s)\n", ATTNLAB_VERSION, shown,
           http_server_port(a.http), f.data_dir);
    fflush(stdout);
    log_info("serving static files from %s", static_dir ? static_dir : "(none)");

    int sig = 0;
    sigwait(&stop_signals, &sig);
    log_info("received %s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    http_server_free(a.http);
    store_close(a.store);
    log_info("stopped cleanly");
    return 0;
}
