#include "cmd_watch.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "httpc.h"
#include "progress.h"
#include "sse.h"
#include "util/json_text.h"

const char cmd_watch_help[] =
    "usage: attnlab watch ID [--every SECONDS] [--plain] [--reconnect-for SECONDS]\n"
    "\n"
    "Follows run ID live until it ends: step/total, ETA, tokens/s, the latest loss and the range of\n"
    "the learned temperatures tau over all heads. On a terminal one line is redrawn in place; when\n"
    "stdout is a pipe or a file (or with --plain) plain lines are printed, at most one per --every\n"
    "seconds (default 1; 0 prints every update). With --json each event is printed as a JSON line.\n"
    "A dropped connection is resumed where it stopped; after --reconnect-for seconds (default 60)\n"
    "without the server, watch gives up with exit status 3.\n"
    "\n"
    "Exit status: 0 the run succeeded, 1 it failed, 6 it was cancelled, 7 it was interrupted;\n"
    "2 usage, 3 server unreachable, 4 refused (no such run), 5 server error.\n";

int cmd_watch_exit_for(const char *status) {
    if (!strcmp(status, "succeeded")) return CLI_EXIT_OK;
    if (!strcmp(status, "cancelled")) return CLI_EXIT_RUN_CANCELLED;
    if (!strcmp(status, "interrupted")) return CLI_EXIT_RUN_INTERRUPTED;
    return CLI_EXIT_RUN_FAILED;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void sleep_s(double s) {
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

typedef struct {
    const cli_ctx *ctx;
    long long id;
    progress_state st;
    sse_parser parser;
    int tty, json;
    double every_s, last_draw;
    int drawn; /* a bar is on screen (tty) */
    int final; /* a final status was seen */
    int fatal; /* an exit code that ends the watch early (resync fetch refused) */
    char path[64];
    char last_line[1024]; /* the last plain line printed */
    int synced;           /* the run was refetched after this connection's first bytes */
} watch;

static int term_width(const cli_ctx *ctx) {
    struct winsize ws;
    if (ioctl(fileno(ctx->out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    return c && atoi(c) > 0 ? atoi(c) : 80;
}

static void draw(watch *w, int force) {
    if (w->json) return;
    double t = now_s();
    double min_gap = w->tty ? 0.1 : w->every_s;
    if (!force && w->last_draw > 0 && t - w->last_draw < min_gap) return;
    w->last_draw = t;
    char line[1024];
    if (w->tty) {
        progress_bar_line(&w->st, term_width(w->ctx) - 1, line, sizeof line);
        fprintf(w->ctx->out, "\r%s\033[K", line);
        w->drawn = 1;
    } else {
        /* A log gains nothing from the same line twice (a status event that changes no figure). */
        progress_plain_line(&w->st, line, sizeof line);
        if (!strcmp(line, w->last_line)) return;
        snprintf(w->last_line, sizeof w->last_line, "%s", line);
        fprintf(w->ctx->out, "%s\n", line);
    }
    fflush(w->ctx->out);
}

static void print_event_json(watch *w, const char *event, const char *id, const json_t *data) {
    json_t *o = json_pack("{s:s, s:s, s:O}", "event", event, "id", id ? id : "", "data", data ? data : json_null());
    if (!o) return;
    char *text = json_text_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text)
        fputs(text, w->ctx->out);
    else
        json_dumpf(o, w->ctx->out, JSON_COMPACT | JSON_PRESERVE_ORDER);
    free(text);
    fputc('\n', w->ctx->out);
    fflush(w->ctx->out);
    json_decref(o);
}

/* Refetches the run (after resync or a reconnect). Returns 0 or an exit code. */
static int refetch(watch *w) {
    cli_ctx quiet = *w->ctx;
    json_t *run = NULL;
    char msg[1024];
    httpc_response r;
    int code = httpc_request(&quiet, "GET", w->path, NULL, &r, msg, sizeof msg);
    if (code != CLI_EXIT_OK) return code; /* unreachable: the caller decides whether to retry */
    code = httpc_status_exit(r.status);
    if (code != CLI_EXIT_OK) {
        httpc_error_line(r.status, r.body, msg, sizeof msg);
        httpc_response_free(&r);
        if (w->drawn) fputc('\n', w->ctx->out), w->drawn = 0;
        w->fatal = cli_fail(w->ctx, code, "GET %s: %s", w->path, msg);
        return w->fatal;
    }
    run = r.body ? json_loads(r.body, 0, NULL) : NULL;
    httpc_response_free(&r);
    if (!run || progress_apply_status(&w->st, cli_unwrap(run, "run")) < 0) {
        json_decref(run);
        w->fatal = cli_fail(w->ctx, CLI_EXIT_SERVER, "GET %s: not a run object", w->path);
        return w->fatal;
    }
    if (w->json) print_event_json(w, "run", NULL, cli_unwrap(run, "run"));
    json_decref(run);
    if (progress_is_final(w->st.status)) w->final = 1;
    return CLI_EXIT_OK;
}

static int on_event(const sse_event *ev, void *user) {
    watch *w = user;
    json_t *data = json_loads(ev->data, JSON_DECODE_ANY, NULL);
    /* Events for other runs can share a stream (the all-runs stream); skip them. */
    json_t *rid = json_object_get(data, "run_id");
    if (json_is_integer(rid) && json_integer_value(rid) != w->id) {
        json_decref(data);
        return 0;
    }
    if (w->json && strcmp(ev->event, "resync") != 0) print_event_json(w, ev->event, ev->id, data);
    if (!strcmp(ev->event, "metrics")) {
        if (progress_apply_metrics(&w->st, data) == 0) draw(w, 0);
    } else if (!strcmp(ev->event, "status")) {
        if (progress_apply_status(&w->st, data) == 0 && progress_is_final(w->st.status)) {
            w->final = 1;
            /* The stream may have begun after the run's last points (a short run), or after its
             * last evaluation: then the run as stored, complete once its end is told, gives the
             * final line its loss and val_loss. */
            if (!w->json && (!isfinite(w->st.loss) || !isfinite(w->st.val_loss))) {
                progress_state told = w->st;
                if (refetch(w) != CLI_EXIT_OK || !progress_is_final(w->st.status)) w->st = told, w->fatal = 0;
                w->final = 1;
            }
        } else {
            draw(w, 1);
        }
    } else if (!strcmp(ev->event, "resync")) {
        if (w->json) print_event_json(w, ev->event, ev->id, data);
        if (refetch(w) == CLI_EXIT_OK && !w->final) draw(w, 1);
    }
    json_decref(data);
    return w->final || w->fatal ? 1 : 0;
}

static int on_data(const char *data, size_t len, void *user) {
    watch *w = user;
    int rc = sse_feed(&w->parser, data, len, on_event, w);
    if (rc > 0) return 1;
    /* The first bytes of a stream mean the subscription is in place. Whatever happened between
     * the last fetch of the run and this moment reached no stream, so the run is fetched once
     * more: a run that ended in that gap would otherwise be watched forever. */
    if (!w->synced) {
        w->synced = 1;
        if (refetch(w) == CLI_EXIT_OK && !w->final) draw(w, 0);
    }
    return w->final || w->fatal ? 1 : 0;
}

static int finish(watch *w) {
    if (!w->json) {
        char line[1024];
        progress_final_line(&w->st, line, sizeof line);
        if (w->tty && w->drawn) fputs("\r\033[K", w->ctx->out);
        fprintf(w->ctx->out, "%s\n", line);
        fflush(w->ctx->out);
    }
    return cmd_watch_exit_for(w->st.status);
}

static int watch_loop(watch *w, double reconnect_for) {
    char events_path[96];
    snprintf(events_path, sizeof events_path, "%s/events", w->path);
    double down_since = -1, backoff = 0.25;
    for (;;) {
        char hdr[200];
        const char *headers[2] = {NULL, NULL};
        if (w->parser.id[0]) {
            snprintf(hdr, sizeof hdr, "Last-Event-ID: %s", w->parser.id);
            headers[0] = hdr;
        }
        long status = 0;
        char msg[1024] = "";
        w->synced = 0;
        int code = httpc_stream(w->ctx, events_path, headers, 45, on_data, w, &status, msg, sizeof msg);
        if (w->fatal) return w->fatal;
        if (w->final) return finish(w);
        sse_reset_partial(&w->parser);
        if (code == CLI_EXIT_OK && status && (status < 200 || status >= 300)) {
            if (w->drawn) fputc('\n', w->ctx->out), w->drawn = 0;
            return cli_fail(w->ctx, httpc_status_exit(status), "GET %s: %s", events_path, msg);
        }
        /* The stream ended or broke: the run may have ended while we were not listening. */
        int rc = refetch(w);
        if (w->fatal) return w->fatal;
        if (w->final) return finish(w);
        if (rc == CLI_EXIT_OK && code == CLI_EXIT_OK) {
            down_since = -1;
            backoff = 0.25;
        } else {
            double t = now_s();
            if (down_since < 0) down_since = t;
            if (t - down_since >= reconnect_for) {
                if (w->drawn) fputc('\n', w->ctx->out), w->drawn = 0;
                return cli_fail(w->ctx, CLI_EXIT_UNREACHABLE, "%s (gave up after %.0fs)",
                                msg[0] ? msg : "lost the server", reconnect_for);
            }
        }
        sleep_s(backoff);
        if (backoff < 4) backoff *= 2;
    }
}

/* Ctrl-C while the bar is on screen: end the line so that the shell prompt starts clean. Only
 * async-signal-safe calls here. */
static void on_interrupt(int sig) {
    static const char nl[] = "\n";
    (void)!write(STDOUT_FILENO, nl, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int watch_run(const cli_ctx *ctx, long long id, double every_s, int force_plain, double reconnect_for) {
    watch *w = calloc(1, sizeof *w);
    if (!w) return cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
    w->ctx = ctx;
    w->id = id;
    w->json = ctx->json;
    w->tty = !ctx->json && !force_plain && isatty(fileno(ctx->out));
    if (w->tty && ctx->out == stdout) signal(SIGINT, on_interrupt);
    w->every_s = every_s < 0 ? 1.0 : every_s;
    progress_init(&w->st, id);
    sse_init(&w->parser);
    snprintf(w->path, sizeof w->path, "/api/runs/%lld", id);
    /* First the run itself: a wrong id fails here with the server's 404, and a finished run
     * answers at once without opening a stream. */
    json_t *run = NULL;
    int code = httpc_json(ctx, "GET", w->path, NULL, &run);
    if (code == CLI_EXIT_OK) {
        if (progress_apply_status(&w->st, cli_unwrap(run, "run")) < 0) {
            code = cli_fail(ctx, CLI_EXIT_SERVER, "GET %s: not a run object", w->path);
        } else {
            if (w->json) print_event_json(w, "run", NULL, cli_unwrap(run, "run"));
            if (progress_is_final(w->st.status)) {
                code = finish(w);
            } else {
                draw(w, 1);
                code = watch_loop(w, reconnect_for);
            }
        }
    }
    json_decref(run);
    sse_free(&w->parser);
    free(w);
    return code;
}

int cmd_watch_run(const cli_ctx *ctx, long long id, double every_s, int force_plain) {
    return watch_run(ctx, id, every_s, force_plain, 60);
}

int cmd_watch(const cli_ctx *ctx, int argc, char **argv) {
    const char *id_s = NULL, *v;
    double every = -1, reconnect_for = 60;
    int plain = 0;
    for (int i = 0; i < argc; i++) {
        int r;
        if (cli_is_help(argv[i])) {
            fputs(cmd_watch_help, ctx->out);
            return CLI_EXIT_OK;
        } else if (!strcmp(argv[i], "--plain")) {
            plain = 1;
        } else if ((r = cli_opt_value(argc, argv, &i, "--every", &v)) != 0) {
            char *end;
            if (r < 0 || (every = strtod(v, &end), *end) || !(every >= 0))
                return cli_usage(ctx, "watch ", "--every wants a number of seconds >= 0");
        } else if ((r = cli_opt_value(argc, argv, &i, "--reconnect-for", &v)) != 0) {
            char *end;
            if (r < 0 || (reconnect_for = strtod(v, &end), *end) || !(reconnect_for >= 0))
                return cli_usage(ctx, "watch ", "--reconnect-for wants a number of seconds >= 0");
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage(ctx, "watch ", "unknown option '%s'", argv[i]);
        } else if (!id_s) {
            id_s = argv[i];
        } else {
            return cli_usage(ctx, "watch ", "one run id, please ('%s' is extra)", argv[i]);
        }
    }
    long long id;
    if (!id_s) return cli_usage(ctx, "watch ", "which run? give its id");
    if (cli_parse_id(id_s, &id) < 0) return cli_usage(ctx, "watch ", "'%s' is not a run id", id_s);
    return watch_run(ctx, id, every, plain, reconnect_for);
}
