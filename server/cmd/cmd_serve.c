/* `attnlabd serve`: flags, then the start-up as a table of steps (start_steps: the data directory,
 * signals, the port, the database, recovery, the workers, serving), the wait for a stop signal, and
 * one shutdown that undoes whatever the start reached. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "cmd/args.h"
#include "cmd/commands.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "cluster/nodes.h"
#include "cluster/queue.h"
#include "engine/kernel_path.h"
#include "core/run_config.h"
#include "store/store_nodes.h"

typedef struct {
    const char *bind;
    int port;
    const char *data_dir;
    const char *static_dir;
    const char *log_level;
    unsigned http_threads;
    unsigned max_connections, max_per_ip, max_streams, header_timeout_s; /* 0: the HTTP layer's default */
    unsigned heavy_workers, max_heavy_queued, max_heavy_per_ip;
    unsigned event_ring; /* events kept for live streams (0: 8192) */ /* 0: the HTTP layer's default */
    const char *token;
    int private_reads, insecure;
    const char *allowed_hosts[33]; /* --allowed-host, NULL-terminated */
    int n_allowed_hosts;
    int train_workers, probe_workers, compute_threads, max_queued;
    long max_model_mb, max_upload_mb;
    const char *db;        /* NULL: <data-dir>/attnlab.db */
    const char *artifacts; /* NULL: the data directory */
    const char *role, *node_id, *node_url;
    double lease_s;
} serve_flags;

/* ---- the flags, as one table ----------------------------------------------------------------- */

typedef enum {
    FLAG_TEXT,    /* a string (with `valid`, one it accepts) */
    FLAG_SWITCH,  /* no value: sets an int to 1 */
    FLAG_INT,     /* an integer in lo..hi, into an int, */
    FLAG_UINT,    /* an unsigned */
    FLAG_LONG,    /* or a long */
    FLAG_SECONDS, /* a number in lo..hi, into a double */
    FLAG_HOST,    /* one more of allowed_hosts (repeatable) */
} flag_kind;

typedef struct {
    const char *name;
    flag_kind kind;
    size_t at;                     /* the field of serve_flags it sets (offsetof) */
    double lo, hi;                 /* numbers: the bounds */
    int nonempty;                  /* text: "" is refused as a missing value */
    int (*valid)(const char *val); /* text: 1 for a value it takes; NULL takes any */
    const char *must;              /* what a refused value is told; NULL: "must be an integer in lo..hi" */
    const char *help;              /* its --help text after the name */
} serve_flag;

static int valid_node_id(const char *v) {
    return strlen(v) <= 100 &&
           strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == strlen(v);
}
static int valid_log_level(const char *v) { return log_level_parse(v) >= 0; }
static int valid_host(const char *v) { return v[0] && strlen(v) <= 253 && !strpbrk(v, " \t/@?#"); }

#define AT(field) offsetof(serve_flags, field)
/* In the order --help lists them. */
static const serve_flag serve_flag_table[] = {
    {"--bind", FLAG_TEXT, AT(bind), .help = " ADDR        address to listen on (default 127.0.0.1)\n"},
    {"--port", FLAG_INT, AT(port), 0, 65535, .help = " N           TCP port, 0 picks a free one (default 8080)\n"},
    {"--data-dir", FLAG_TEXT, AT(data_dir), .help = " DIR     database, checkpoints and corpora (default ./var)\n"},
    {"--db", FLAG_TEXT, AT(db), .nonempty = 1,
     .help = " URL           the database: postgresql://user:password@host:port/db shares it among\n"
             "                     several nodes, a file path is SQLite (default DATA-DIR/attnlab.db; or env "
             "ATTNLAB_DB)\n"},
    {"--artifacts", FLAG_TEXT, AT(artifacts), .nonempty = 1,
     .help = " DIR    checkpoints, weights and corpora, in a directory all nodes mount\n"
             "                     (default: the data directory)\n"},
    {"--role", FLAG_TEXT, AT(role), .valid = nodes_role_valid, .must = "must be api, worker or all",
     .help = " ROLE        api (serve the API, train nothing), worker (train; serve health, metrics\n"
             "                     and nodes only) or all (default); api and worker need a PostgreSQL --db\n"},
    {"--node-id", FLAG_TEXT, AT(node_id), .nonempty = 1, .valid = valid_node_id,
     .must = "must be 1..100 letters, digits, '-', '_' or '.'",
     .help = " ID       this node's name (default: kept in DATA-DIR/node-id)\n"},
    {"--node-url", FLAG_TEXT, AT(node_url), .nonempty = 1,
     .help = " URL     how other nodes and GET /api/nodes reach this one (default: from --bind/--port)\n"},
    {"--lease-timeout", FLAG_SECONDS, AT(lease_s), 0.5, 3600, .must = "must be a number of seconds in 0.5..3600",
     .help = " S  seconds before another node takes over a run whose node stopped renewing\n"
             "                     its lease (PostgreSQL; default 15)\n"},
    {"--static-dir", FLAG_TEXT, AT(static_dir),
     .help = " DIR   dashboard files (default ./static, or the one beside the binary)\n"},
    {"--log-level", FLAG_TEXT, AT(log_level), .valid = valid_log_level, .must = "must be debug, info, warn or error",
     .help = " LEVEL  debug, info, warn or error (default info)\n"},
    {"--http-threads", FLAG_UINT, AT(http_threads), 1, 64, .must = "must be in 1..64",
     .help = " N   HTTP worker threads (default 4)\n"},
    {"--max-connections", FLAG_UINT, AT(max_connections), 1, 65536,
     .help = " N  API connections at once, all clients (default 256; past it: 503)\n"},
    {"--max-connections-per-ip", FLAG_UINT, AT(max_per_ip), 1, 65536,
     .help = " N  API connections from one address (default 128; past it: 429)\n"},
    {"--max-streams", FLAG_UINT, AT(max_streams), 1, 65536,
     .help = " N    live event streams at once, counted apart from the API (default 256)\n"},
    {"--event-ring", FLAG_UINT, AT(event_ring), 16, 1 << 20,
     .help = " N     live events kept for late readers; a stream that falls this far behind\n"
             "                     (its client reads nothing) is told to resync and dropped (default 8192)\n"},
    {"--header-timeout", FLAG_UINT, AT(header_timeout_s), 1, 3600,
     .help = " S  seconds a client has to send a request head (default 10)\n"},
    {"--heavy-workers", FLAG_UINT, AT(heavy_workers), 1, 64,
     .help = " N  threads of the compute pool that runs heavy requests (statistics,\n"
             "                     exports, probes) apart from the HTTP threads (default 2)\n"},
    {"--max-heavy-queued", FLAG_UINT, AT(max_heavy_queued), 1, 4096,
     .help = " N  heavy requests waiting for a worker (default 64; past it: 503)\n"},
    {"--max-heavy-per-ip", FLAG_UINT, AT(max_heavy_per_ip), 1, 4096,
     .help = " N  heavy requests of one address waiting or running (default 24; past it: 429)\n"},
    {"--token", FLAG_TEXT, AT(token),
     .help = " SECRET     require 'Authorization: Bearer SECRET' for changes (or env ATTNLAB_TOKEN)\n"},
    {"--private", FLAG_SWITCH, AT(private_reads),
     .help = "          with a token, require it for reads too (except /api/health)\n"},
    {"--allowed-host", FLAG_HOST, AT(allowed_hosts), .valid = valid_host, .must = "needs a host name",
     .help = " NAME  also answer requests for this host name (the Host header; the loopback\n"
             "                     names and the --bind address always are), and take changes from pages\n"
             "                     served under it; repeatable, at most 32; '*' answers any name\n"},
    {"--insecure", FLAG_SWITCH, AT(insecure), .help = "         allow a non-loopback --bind without a token\n"},
    {"--train-workers", FLAG_INT, AT(train_workers), 1, 256,
     .help = " N  trainings that run at once (default 2 on two cores or more, else 1)\n"},
    {"--probe-workers", FLAG_INT, AT(probe_workers), 1, 256, .help = " N  probe workers (default 1)\n"},
    {"--compute-threads", FLAG_INT, AT(compute_threads), 1, 256,
     .help = " N  threads shared by running trainings (default: all cores)\n"},
    {"--max-queued", FLAG_INT, AT(max_queued), 1, 100000, .help = " N     queued trainings before 429 (default 512)\n"},
    {"--max-model-mb", FLAG_LONG, AT(max_model_mb), 1, 1 << 20,
     .help = " N   refuse runs estimated above this memory (default 4096)\n"},
    {"--max-upload-mb", FLAG_LONG, AT(max_upload_mb), 1, 1 << 20, .help = " N  corpus upload size cap (default 64)\n"},
};
#undef AT
#define N_SERVE_FLAGS (sizeof serve_flag_table / sizeof serve_flag_table[0])

static void serve_usage(FILE *out) {
    fputs("usage: attnlabd [serve] [flags]\n", out);
    for (size_t i = 0; i < N_SERVE_FLAGS; i++)
        fprintf(out, "  %s%s", serve_flag_table[i].name, serve_flag_table[i].help);
    fputs("  --help             this text\n", out);
}

/* Sets what flag r says from val (NULL for a switch). 0, or -1 after printing why it is refused. */
static int serve_flag_set(const serve_flag *r, const char *val, serve_flags *f) {
    void *at = (char *)f + r->at;
    long n = 0;
    if (r->kind == FLAG_SWITCH) {
        *(int *)at = 1;
        return 0;
    }
    if (r->nonempty && !val[0]) {
        fprintf(stderr, "attnlabd: %s needs a value\n", r->name);
        return -1;
    }
    int ok;
    double v = 0;
    if (r->kind == FLAG_TEXT || r->kind == FLAG_HOST) {
        ok = !r->valid || r->valid(val);
    } else if (r->kind == FLAG_SECONDS) {
        char *end = NULL;
        v = strtod(val, &end);
        ok = end && !*end && v >= r->lo && v <= r->hi;
    } else {
        ok = args_long(val, (long)r->lo, (long)r->hi, &n) == 0;
    }
    if (!ok && r->must)
        fprintf(stderr, "attnlabd: %s %s, not '%s'\n", r->name, r->must, val);
    else if (!ok)
        fprintf(stderr, "attnlabd: %s must be an integer in %ld..%ld, not '%s'\n", r->name, (long)r->lo, (long)r->hi,
                val);
    if (!ok) return -1;
    switch (r->kind) {
    case FLAG_TEXT: *(const char **)at = val; break;
    case FLAG_INT: *(int *)at = (int)n; break;
    case FLAG_UINT: *(unsigned *)at = (unsigned)n; break;
    case FLAG_LONG: *(long *)at = n; break;
    case FLAG_SECONDS: *(double *)at = v; break;
    case FLAG_HOST:
        if (f->n_allowed_hosts == 32) {
            fprintf(stderr, "attnlabd: at most 32 --allowed-host names\n");
            return -1;
        }
        f->allowed_hosts[f->n_allowed_hosts++] = val;
        break;
    case FLAG_SWITCH: break;
    }
    return 0;
}

/* Returns 0 and fills flags, 1 after --help, 2 on a bad flag (message already printed). */
static int parse_flags(int argc, char **argv, serve_flags *f) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            serve_usage(stdout);
            return 1;
        }
        const serve_flag *r = NULL;
        for (size_t k = 0; k < N_SERVE_FLAGS && !r; k++)
            if (!strcmp(a, serve_flag_table[k].name)) r = &serve_flag_table[k];
        if (!r) {
            fprintf(stderr, "attnlabd: unknown flag '%s' (see attnlabd --help)\n", a);
            return 2;
        }
        if (r->kind != FLAG_SWITCH && i + 1 >= argc) {
            fprintf(stderr, "attnlabd: %s needs a value\n", a);
            return 2;
        }
        if (serve_flag_set(r, r->kind == FLAG_SWITCH ? NULL : argv[++i], f) < 0) return 2;
    }
    return 0;
}

/* Creates dir (and parents) and proves it writable by creating and removing a file in it. */
static int ensure_writable_dir(const char *dir, char *err, size_t errlen) {
    if (fs_mkdirs(dir) < 0) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
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

/* Takes an exclusive flock on <dir>/attnlab.lock (and writes our pid into it for the message a
 * second server prints). Returns the descriptor, or -1 with a reason in err. */
static int lock_data_dir(const char *dir, char *err, size_t errlen) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/attnlab.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open the lock file in the data directory: %s", strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        if (e == EWOULDBLOCK)
            snprintf(err, errlen, "the data directory %s is in use by another attnlabd%s%s", dir,
                     pid[0] ? " (pid " : "", pid[0] ? pid : "");
        else
            snprintf(err, errlen, "cannot lock the data directory: %s", strerror(e));
        if (e == EWOULDBLOCK && pid[0]) strncat(err, ")", errlen - strlen(err) - 1);
        close(fd);
        return -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
        log_warn("could not write the pid into the lock file");
    return fd;
}

static int stop_pipe[2] = {-1, -1};

static void on_stop_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (write(stop_pipe[1], &b, 1) < 0) { /* the pipe is full: a stop is already pending */
    }
    errno = saved;
}

/* ---- the start-up, as a table of steps ------------------------------------------------------- */

/* What the steps build, each on what the ones before it made. */
typedef struct {
    serve_flags f;
    char err[512];
    char static_buf[PATH_MAX];
    const char *static_dir; /* NULL: no dashboard */
    const char *artifacts;  /* checkpoints, weights, corpora: the data or the shared directory */
    char node_id[128];
    char db_path[PATH_MAX], upload_dir[PATH_MAX];
    int shared, trains;
    app a;        /* what the services share */
    api_ctx api;  /* what the handlers are given (api->svc is &a) */
    queue *queue; /* the shared training queue (PostgreSQL, a training node); NULL otherwise */
} serve;

/* Each step returns 0, or the exit status after printing one line saying why. */
typedef int (*serve_step)(serve *s);

/* The flags that depend on each other: a role needs a shared database, a public address a token. */
static int check_flags(serve *s) {
    serve_flags *f = &s->f;
    if (f->token && !f->token[0]) f->token = NULL;
    if (f->db && !f->db[0]) f->db = NULL;
    int pg_url = f->db && (!strncmp(f->db, "postgres://", 11) || !strncmp(f->db, "postgresql://", 13));
    if (strcmp(f->role, "all") != 0 && !pg_url) {
        fprintf(stderr, "attnlabd: --role %s needs a database that several nodes share (--db postgresql://...)\n",
                f->role);
        return 2;
    }
    int loopback = !strncmp(f->bind, "127.", 4) || !strcmp(f->bind, "::1");
    if (!loopback && !f->token && !f->insecure) {
        fprintf(stderr,
                "attnlabd: refusing to listen on %s without a token: anyone who can reach it could start jobs. "
                "Set --token SECRET (or ATTNLAB_TOKEN), or pass --insecure if the network is trusted.\n",
                f->bind);
        return 2;
    }
    if (f->private_reads && !f->token) {
        fprintf(stderr, "attnlabd: --private needs --token\n");
        return 2;
    }
    log_set_level((log_level)log_level_parse(f->log_level));
    s->trains = strcmp(f->role, "api") != 0;
    return 0;
}

/* The dashboard's files: --static-dir, or the first found beside the binary or here. */
static int find_static_dir(serve *s) {
    s->static_dir = s->f.static_dir ? s->f.static_dir : default_static_dir(s->static_buf, sizeof s->static_buf);
    if (s->f.static_dir) {
        struct stat st;
        if (stat(s->f.static_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "attnlabd: --static-dir %s is not a directory\n", s->f.static_dir);
            return 2;
        }
    } else if (!s->static_dir) {
        log_warn("no static directory found; the dashboard will not be served (use --static-dir)");
    }
    return 0;
}

/* The data directory: writable, and ours alone before anything touches it (a second attnlabd on it
 * would mark the first one's live runs interrupted and delete its uploads). The lock lasts as long
 * as the process: the descriptor is never closed, and the kernel drops it on exit or kill. Then
 * the artefact directory and this node's id. */
static int take_data_dir(serve *s) {
    if (ensure_writable_dir(s->f.data_dir, s->err, sizeof s->err) < 0) {
        fprintf(stderr, "attnlabd: data directory: %s\n", s->err);
        return 2;
    }
    if (lock_data_dir(s->f.data_dir, s->err, sizeof s->err) < 0) {
        fprintf(stderr, "attnlabd: %s\n", s->err);
        return 2;
    }
    /* Checkpoints, weights and corpora: in the data directory, or in one all nodes mount. */
    s->artifacts = s->f.artifacts ? s->f.artifacts : s->f.data_dir;
    if (s->f.artifacts && ensure_writable_dir(s->f.artifacts, s->err, sizeof s->err) < 0) {
        fprintf(stderr, "attnlabd: artefact directory: %s\n", s->err);
        return 2;
    }
    if (s->f.node_id) {
        snprintf(s->node_id, sizeof s->node_id, "%s", s->f.node_id);
    } else if (nodes_default_id(s->f.data_dir, s->node_id, sizeof s->node_id) < 0) {
        fprintf(stderr, "attnlabd: cannot keep a node id in %s: %s\n", s->f.data_dir, strerror(errno));
        return 2;
    }
    return 0;
}

/* A stop signal only writes its number to a pipe that the main thread waits on. A handler (rather
 * than blocking the signals and sigwait) is needed because libraries start threads before main()
 * (OpenBLAS's pool), and a process-directed signal may land on any of them. The kernel path is
 * chosen once for the process first (measured, or ATTNLAB_KERNEL_PATH): a forced path this CPU
 * cannot run stops the start rather than every run later. */
static int catch_signals(serve *s) {
    (void)s;
    if (pipe2(stop_pipe, O_CLOEXEC) < 0) {
        fprintf(stderr, "attnlabd: pipe: %s\n", strerror(errno));
        return 1;
    }
    engine_error kerr;
    if (kernel_path_init(&kerr) != ENGINE_OK) {
        fprintf(stderr, "attnlabd: %s\n", kerr.message);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* The port next, still before recovery: a server that cannot serve must not change anything.
 * Uploads are renamed into the corpus folder when complete: they are written beside it (one
 * folder per node, so a node cleaning up its own leaves the others' alone). */
static int open_port(serve *s) {
    serve_flags *f = &s->f;
    s->a = (app){.data_dir = s->artifacts, .max_model_bytes = (size_t)f->max_model_mb << 20};
    s->api = (api_ctx){.svc = &s->a,
                       .worker_only = !strcmp(f->role, "worker"),
                       .started_at = app_now(),
                       .max_upload_bytes = (size_t)f->max_upload_mb << 20};
    snprintf(s->db_path, sizeof s->db_path, "%s/attnlab.db", f->data_dir);
    if (f->artifacts)
        snprintf(s->upload_dir, sizeof s->upload_dir, "%s/tmp/%s", s->artifacts, s->node_id);
    else
        snprintf(s->upload_dir, sizeof s->upload_dir, "%s/tmp", f->data_dir);
    http_config hc = {.bind_addr = f->bind,
                      .port = f->port,
                      .static_dir = s->static_dir,
                      .max_body = 1 << 20,
                      .threads = f->http_threads,
                      .max_connections = f->max_connections,
                      .max_connections_per_ip = f->max_per_ip,
                      .max_streams = f->max_streams,
                      .header_timeout_ms = f->header_timeout_s * 1000,
                      .compute_workers = f->heavy_workers,
                      .compute_queue = f->max_heavy_queued,
                      .compute_per_client = f->max_heavy_per_ip,
                      .upload_dir = s->upload_dir,
                      .token = f->token,
                      .private_reads = f->private_reads,
                      .allowed_hosts = f->allowed_hosts,
                      .handler_ctx = &s->api};
    s->api.http = http_server_new(&hc);
    if (!s->api.http || routes_register(s->api.http, &s->api) < 0) {
        fprintf(stderr, "attnlabd: out of memory setting up routes\n");
        return 1;
    }
    if (http_server_listen(s->api.http, s->err, sizeof s->err) < 0) {
        fprintf(stderr, "attnlabd: %s\n", s->err);
        return 2;
    }
    return 0;
}

/* The database (migrated to this binary's schema) and the API's schema document. */
static int open_store(serve *s) {
    if (store_open(&s->a.store, s->f.db ? s->f.db : s->db_path, s->err, sizeof s->err) != STORE_OK) {
        fprintf(stderr, "attnlabd: database: %s\n", s->err);
        return 2;
    }
    if (run_config_init() < 0) {
        fprintf(stderr, "attnlabd: the built-in OpenAPI document is broken\n");
        return 1;
    }
    s->shared = store_shared(s->a.store);
    return 0;
}

/* What a previous life left: with a shared database only this node's own runs of its previous life
 * are interrupted; the others' belong to nodes that hold their leases (a run whose node died is
 * taken over by another node when its lease runs out). Partial uploads are removed. */
static int recover(serve *s) {
    store_set_node(s->a.store, s->node_id);
    int interrupted = store_runs_interrupt_running(s->a.store);
    if (interrupted > 0)
        log_warn("%d run(s) were running when the service last stopped: now interrupted (resume them)", interrupted);
    fs_remove_tree(s->upload_dir);
    fs_mkdirs(s->upload_dir);
    return 0;
}

/* The shared queue (a training node on a shared database), the event bus, the reply cache, the
 * metrics writer, the corpora and the workers; then the runs queued in a previous life (shared:
 * they are claimed from the store instead). */
static int start_workers(serve *s) {
    app *a = &s->a;
    if (s->shared && s->trains) {
        s->queue = queue_start(a->store, s->node_id, s->f.lease_s, 500);
        if (!s->queue) {
            fprintf(stderr, "attnlabd: out of memory starting the shared queue\n");
            return 1;
        }
    }
    a->events = events_new(s->f.event_ring ? s->f.event_ring : 8192, 15);
    /* Ended runs' metric answers: up to 64 MiB in 256 answers (one above 16 MiB is not kept). */
    s->api.replies = reply_cache_new(64u << 20, 256);
    s->api.writer = metrics_writer_start(a->store, 1000, 4096, 1u << 20);
    a->corpora = s->api.writer ? corpora_start(a->store, s->artifacts, NULL) : NULL;
    jobs_config jc = {.store = a->store,
                      .events = a->events,
                      .writer = s->api.writer,
                      .corpora = a->corpora,
                      .data_dir = s->artifacts,
                      .train_workers = s->trains ? s->f.train_workers : 0,
                      .probe_workers = s->f.probe_workers,
                      .compute_threads = s->f.compute_threads,
                      .max_queued = s->f.max_queued,
                      .queue = s->queue};
    a->jobs = a->events && s->api.replies && a->corpora ? jobs_start(&jc) : NULL;
    if (!a->jobs) {
        fprintf(stderr, "attnlabd: out of memory starting the workers\n");
        return 1;
    }
    long long *queued = NULL;
    int n_queued = 0;
    if (!s->shared && store_runs_queued(a->store, &queued, &n_queued) == STORE_OK)
        for (int i = 0; i < n_queued; i++) jobs_submit_run(a->jobs, queued[i]);
    free(queued);
    return 0;
}

/* Serving: the HTTP server answers, this process is a node others see, and the one line saying
 * where (tests and scripts read it). */
static int start_serving(serve *s) {
    serve_flags *f = &s->f;
    const char *shown = strchr(f->bind, ':') ? "[::1]" : (!strcmp(f->bind, "0.0.0.0") ? "127.0.0.1" : f->bind);
    char host[256] = "", node_url[512];
    if (gethostname(host, sizeof host) != 0) host[0] = 0;
    host[sizeof host - 1] = 0;
    if (f->node_url)
        snprintf(node_url, sizeof node_url, "%s", f->node_url);
    else
        snprintf(node_url, sizeof node_url, "http://%s:%d/", !strcmp(f->bind, "0.0.0.0") && host[0] ? host : shown,
                 http_server_port(s->api.http));
    nodes_config nc = {.store = s->a.store,
                       .events = s->a.events,
                       .queue = s->queue,
                       .id = s->node_id,
                       .host = host,
                       .url = node_url,
                       .role = f->role,
                       .version = ATTNLAB_VERSION,
                       .capacity = s->trains ? f->train_workers : 0,
                       .heartbeat_s = f->lease_s / 3,
                       .stale_s = f->lease_s};
    s->api.nodes = nodes_start(&nc, s->err, sizeof s->err);
    if (!s->api.nodes) {
        fprintf(stderr, "attnlabd: %s\n", s->err);
        return 2;
    }
    /* Only now do requests come in: every handler sees api_ctx complete (the node above included). */
    if (http_server_start(s->api.http, s->err, sizeof s->err) < 0) {
        fprintf(stderr, "attnlabd: %s\n", s->err);
        return 2;
    }
    /* Where it listens (the start line): every address is said so, with a warning. */
    int every = !strcmp(f->bind, "0.0.0.0") || !strcmp(f->bind, "::");
    char listen_url[128], here[200] = "";
    snprintf(listen_url, sizeof listen_url, strchr(f->bind, ':') ? "http://[%s]:%d/" : "http://%s:%d/", f->bind,
             http_server_port(s->api.http));
    if (every) {
        snprintf(here, sizeof here, " (every address of this machine; from it: http://%s:%d/)", shown,
                 http_server_port(s->api.http));
        log_warn("listening on every address (--bind %s): other machines can reach the API%s", f->bind,
                 f->token ? "; changes need the token" : " and, without a token, change anything");
    }
    printf("attnlabd %s listening on %s%s (data in %s)\n", ATTNLAB_VERSION, listen_url, here, f->data_dir);
    fflush(stdout);
    log_info("serving static files from %s", s->static_dir ? s->static_dir : "(none)");
    log_info("kernel path %s (new runs default to %s)", kernel_path_name(), precision_name(precision_default()));
    return 0;
}

/* The start-up, in order: nothing that changes the data directory or the database runs before the
 * flags are checked, the directory is ours, the port is open and the database is this binary's. */
static const serve_step start_steps[] = {
    check_flags, find_static_dir, take_data_dir, catch_signals, open_port,
    open_store,  recover,         start_workers, start_serving,
};

/* Undoes what the steps made, in the order a clean stop needs (whatever step the start reached:
 * each part is NULL until made). */
static void serve_stop(serve *s) {
    app *a = &s->a;
    if (a->events) events_close_all(a->events);
    http_server_free(s->api.http);
    jobs_stop(a->jobs); /* running trainings checkpoint and become interrupted */
    queue_stop(s->queue);
    metrics_writer_stop(s->api.writer);
    nodes_stop(s->api.nodes);
    events_free(a->events);
    reply_cache_free(s->api.replies);
    corpora_free(a->corpora);
    run_config_cleanup();
    store_close(a->store);
    nodes_free(s->api.nodes); /* after the store's listener has ended */
    if (stop_pipe[0] >= 0) close(stop_pipe[0]);
    if (stop_pipe[1] >= 0) close(stop_pipe[1]);
}

int cmd_serve(int argc, char **argv) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    static serve s; /* large (paths): not on the stack */
    memset(&s, 0, sizeof s);
    s.f = (serve_flags){.bind = "127.0.0.1",
                        .port = 8080,
                        .data_dir = "var",
                        .log_level = "info",
                        .http_threads = 4,
                        .token = getenv("ATTNLAB_TOKEN"),
                        .train_workers = cores >= 2 ? 2 : 1, /* an experiment's two variants race */
                        .probe_workers = 1,
                        .compute_threads = cores > 0 ? (int)cores : 1,
                        .max_queued = 512, /* twice the largest experiment (SVC_EXPERIMENTS_MAX_RUNS) */
                        .max_model_mb = 4096,
                        .max_upload_mb = 64,
                        .db = getenv("ATTNLAB_DB"),
                        .role = "all",
                        .lease_s = 15};
    int rc = parse_flags(argc, argv, &s.f);
    if (rc) return rc == 1 ? 0 : 2;
    for (size_t i = 0; !rc && i < sizeof start_steps / sizeof start_steps[0]; i++) rc = start_steps[i](&s);
    if (!rc) {
        unsigned char sig = 0;
        while (read(stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {}
        log_info("received %s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    serve_stop(&s);
    if (rc == 0) log_info("stopped cleanly");
    return rc;
}
