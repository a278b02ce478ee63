/* `attnlabd train`: one training job in the foreground. Prints one JSON object per line on
 * stdout: {"type":"step",...} after every step, {"type":"eval",...} after each validation,
 * {"type":"checkpoint",...} when one is written and a final {"type":"done",...}. Errors go to
 * stderr. Exit status: 0 done, 1 failed at run time (or interrupted: SIGINT/SIGTERM stop the
 * run after the current step, writing the checkpoint if --checkpoint is set), 2 bad usage.
 *
 * Its run-config flags are not a list of their own: every property of the RunConfig schema in
 * server/api/openapi.json is a flag (`n_layer` -> `--n-layer`), with the schema's bounds, enums and
 * defaults, checked by the same run_config_normalize() the REST API uses. Only the flags about
 * files and this machine (--data, --data-dir, --vocab, --init, --save, --checkpoint, --resume)
 * are this command's own. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/args.h"
#include "cmd/commands.h"
#include "core/checkpoints.h"
#include "core/corpora.h"
#include "store/store.h"
#include "engine/corpus.h"
#include "engine/kernel_path.h"
#include "engine/train.h"
#include "core/run_config.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* The flags that are not run-config fields: name, value placeholder, help. */
static const struct {
    const char *flag, *value, *help;
} own_flags[] = {
    {"--data", "FILE.u16", "train on this token file instead of --corpus"},
    {"--data-dir", "DIR", "where --corpus NAME is found: DIR/corpora/NAME/tokens.u16 (var)"},
    {"--vocab", "N",
     "vocabulary size of a --data token file (default 50257, GPT-2; 256 for bytes); with --corpus, the catalogue's"},
    {"--init", "FILE", "start from these weights (safetensors) instead of a random init"},
    {"--save", "FILE", "write the final weights (safetensors)"},
    {"--checkpoint", "FILE", "keep a checkpoint here (every --checkpoint-every steps and at the end)"},
    {"--resume", "FILE", "continue from this checkpoint"},
};
#define N_OWN_FLAGS (sizeof own_flags / sizeof own_flags[0])

static const json_t *schema_props(void) {
    return json_object_get(
        json_object_get(json_object_get(json_object_get(run_config_openapi(), "components"), "schemas"), "RunConfig"),
        "properties");
}

/* "n_layer" -> "--n-layer" */
static void flag_of(const char *key, char *out, size_t len) {
    size_t o = 0;
    if (len < 3) return;
    out[o++] = '-';
    out[o++] = '-';
    for (const char *p = key; *p && o + 1 < len; p++) out[o++] = *p == '_' ? '-' : *p;
    out[o] = 0;
}

/* "--n-layer" -> the schema key "n_layer" (NULL when it is not a run-config flag). */
static const char *key_of(const char *flag, char *buf, size_t len) {
    if (strncmp(flag, "--", 2) != 0 || strlen(flag + 2) + 1 > len) return NULL;
    size_t i = 0;
    for (const char *p = flag + 2; *p; p++) buf[i++] = *p == '-' ? '_' : *p;
    buf[i] = 0;
    return json_object_get(schema_props(), buf) ? buf : NULL;
}

static void print_value(FILE *out, const json_t *v) {
    if (json_is_string(v))
        fputs(json_string_value(v), out);
    else if (json_is_integer(v))
        fprintf(out, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        fprintf(out, "%g", json_real_value(v));
    else if (json_is_boolean(v))
        fputs(json_is_true(v) ? "true" : "false", out);
}

/* One line per schema property: flag, accepted values, default, description. */
static void usage(FILE *out) {
    fprintf(out, "usage: attnlabd train [flags]\n"
                 "run config (the REST API's RunConfig: same names, bounds and defaults):\n");
    const char *key;
    const json_t *prop;
    json_object_foreach((json_t *)schema_props(), key, prop) {
        char flag[72];
        flag_of(key, flag, sizeof flag);
        const char *type = json_string_value(json_object_get(prop, "type"));
        const json_t *en = json_object_get(prop, "enum");
        fprintf(out, "  %s ", flag);
        if (en) {
            size_t i;
            const json_t *opt;
            json_array_foreach(en, i, opt) {
                if (i) fputc('|', out);
                print_value(out, opt);
            }
        } else if (!strcmp(type, "boolean")) {
            fputs("true|false", out);
        } else if (!strcmp(type, "string")) {
            fputs("NAME", out);
        } else {
            fputs(!strcmp(type, "integer") ? "N" : "X", out);
            const json_t *mn = json_object_get(prop, "minimum"), *mx = json_object_get(prop, "maximum");
            if (mn && mx) {
                fputs(json_is_true(json_object_get(prop, "exclusiveMinimum")) ? " in (" : " in [", out);
                print_value(out, mn);
                fputs(", ", out);
                print_value(out, mx);
                fputc(']', out);
            }
        }
        const json_t *def = json_object_get(prop, "default");
        if (def) {
            fputs("  (default ", out);
            print_value(out, def);
            fputc(')', out);
        }
        const char *desc = json_string_value(json_object_get(prop, "description"));
        if (desc) fprintf(out, "  %s", desc);
        fputc('\n', out);
    }
    fprintf(out, "  (--corpus NAME reads <data-dir>/corpora/NAME/tokens.u16; --threads 0 uses every core)\n"
                 "files and machine (this command only):\n");
    for (size_t i = 0; i < N_OWN_FLAGS; i++)
        fprintf(out, "  %s %s  %s\n", own_flags[i].flag, own_flags[i].value, own_flags[i].help);
}

/* A flag's text as the JSON value its schema type asks for; NULL when it does not parse. */
static json_t *parse_value(const json_t *prop, const char *v) {
    const char *type = json_string_value(json_object_get(prop, "type"));
    char *end;
    errno = 0;
    if (!strcmp(type, "integer")) {
        long long n = strtoll(v, &end, 10);
        return errno || end == v || *end ? NULL : json_integer(n);
    }
    if (!strcmp(type, "number")) {
        double x = strtod(v, &end);
        return errno || end == v || *end ? NULL : json_real(x);
    }
    if (!strcmp(type, "boolean")) {
        if (!strcmp(v, "true")) return json_true();
        if (!strcmp(v, "false")) return json_false();
        return NULL;
    }
    return json_string(v);
}

/* Prints one line (o taken); a line that could not be built (o NULL: out of memory) is said on
 * stderr, so a reader of stdout sees a gap, never a half line. */
static void emit(json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(s);
    } else {
        fputs("attnlabd train: out of memory: a line of output was lost\n", stderr);
    }
    json_decref(o);
}

/* [[v of layer 0's heads], …] (NULL when out of memory). */
static json_t *per_head(const float *v, int L, int H) {
    json_t *a = json_array();
    for (int l = 0; a && l < L; l++) {
        json_t *row = json_array();
        for (int h = 0; row && h < H; h++)
            if (json_array_append_new(row, json_real(v[l * H + h])) < 0) {
                json_decref(row);
                row = NULL;
            }
        if (!row || json_array_append_new(a, row) < 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

static void cb_step(void *ctx, const train_step_metrics *m) {
    (void)ctx;
    emit(json_pack("{s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:o, s:o}", "type", "step", "step", (json_int_t)m->step, "loss",
                   (double)m->loss, "lr", (double)m->lr, "grad_norm", (double)m->grad_norm, "tokens_per_s",
                   (double)m->tokens_per_s, "step_ms", (double)m->step_ms, "tau",
                   per_head(m->tau, m->n_layer, m->n_head), "entropy", per_head(m->entropy, m->n_layer, m->n_head)));
}

static void cb_eval(void *ctx, long step, double val) {
    (void)ctx;
    emit(json_pack("{s:s, s:I, s:f}", "type", "eval", "step", (json_int_t)step, "val_loss", val));
}

static void cb_checkpoint(void *ctx, long step, const char *path) {
    (void)ctx;
    emit(json_pack("{s:s, s:I, s:s}", "type", "checkpoint", "step", (json_int_t)step, "path", path));
}

static void cb_notice(void *ctx, const char *message) {
    (void)ctx;
    emit(json_pack("{s:s, s:s}", "type", "notice", "message", message));
}

static int cb_stop(void *ctx) {
    (void)ctx;
    return stop_requested != 0;
}

/* The vocabulary of corpus `name` as the catalogue in data_dir records it (the server's database,
 * opened only if it exists), or -1 with the reason in why: a byte corpus trains with 256, not GPT-2's
 * 50,257 whatever the flags' default. */
static long corpus_vocab_in_catalogue(const char *data_dir, const char *name, char *why, size_t why_len) {
    char db[4096], err[256];
    if (snprintf(db, sizeof db, "%s/attnlab.db", data_dir) >= (int)sizeof db) {
        snprintf(why, why_len, "--data-dir is too long");
        return -1;
    }
    if (access(db, R_OK) != 0) {
        snprintf(why, why_len,
                 "corpus '%s': %s has no catalogue (%s: %s); start attnlabd there once, or give --data FILE.u16 "
                 "--vocab N",
                 name, data_dir, db, strerror(errno));
        return -1;
    }
    store *st = NULL;
    if (store_open(&st, db, err, sizeof err) != STORE_OK) {
        snprintf(why, why_len, "corpus '%s': cannot read the catalogue %s: %s", name, db, err);
        return -1;
    }
    json_t *row = NULL;
    store_status ss = store_corpus_get(st, name, &row);
    long vocab = ss == STORE_OK ? corpora_vocab_of(row) : -1;
    if (ss == STORE_NOT_FOUND)
        snprintf(why, why_len, "corpus '%s' is not in the catalogue of %s", name, data_dir);
    else if (ss != STORE_OK)
        snprintf(why, why_len, "corpus '%s': the catalogue could not be read: %s", name, store_last_error());
    else if (vocab < 0)
        snprintf(why, why_len, "corpus '%s' is not ready (%s)", name,
                 json_string_value(json_object_get(row, "status")));
    json_decref(row);
    store_close(st);
    return vocab;
}

/* Says why the command cannot run (one line on stderr) and returns 2, its exit status. */
static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("attnlabd train: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* What the command line says: the run-config flags given (`given`, then normalised into `cfg`) and
 * this command's own. */
typedef struct {
    const char *data, *data_dir, *resume, *init, *save, *checkpoint;
    long vocab; /* 0: not given (the catalogue's with --corpus, else GPT-2's) */
    json_t *given, *cfg;
} train_args;

/* Reads the flags into a: 0, -1 after --help, 2 after saying what is wrong. */
static int train_parse(int argc, char **argv, train_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return -1;
        }
        if (strncmp(f, "--", 2) != 0) return bad("unexpected argument '%s' (see --help)", f);
        if (i + 1 >= argc) return bad("%s needs a value", f);
        const char *v = argv[++i];
        char keybuf[64];
        const char *key = key_of(f, keybuf, sizeof keybuf);
        if (key) {
            json_t *val = parse_value(json_object_get(schema_props(), key), v);
            if (!val) return bad("%s does not take '%s' (see --help)", f, v);
            if (json_object_set_new(a->given, key, val) < 0) return bad("out of memory");
        } else if (!strcmp(f, "--vocab")) {
            if (args_long(v, 2, 1L << 20, &a->vocab))
                return bad("--vocab wants an integer in 2..%ld, not '%s'", 1L << 20, v);
        } else {
            const char **dst = !strcmp(f, "--data")         ? &a->data
                               : !strcmp(f, "--data-dir")   ? &a->data_dir
                               : !strcmp(f, "--init")       ? &a->init
                               : !strcmp(f, "--save")       ? &a->save
                               : !strcmp(f, "--checkpoint") ? &a->checkpoint
                               : !strcmp(f, "--resume")     ? &a->resume
                                                            : NULL;
            if (!dst) return bad("unknown flag '%s' (see --help)", f);
            *dst = v;
        }
    }
    return 0;
}

/* The run config (a->cfg) from the flags given, checked as the REST API checks it, and the
 * vocabulary (a corpus's from the catalogue, else --vocab, else GPT-2's): 0, or 2 after saying why. */
static int train_resolve(train_args *a) {
    if (a->data && json_object_get(a->given, "corpus")) return bad("give --data FILE.u16 or --corpus NAME, not both");
    run_config_error cerr;
    if (run_config_normalize(a->given, "", &a->cfg, &cerr) < 0) {
        char flag[72];
        flag_of(cerr.field, flag, sizeof flag);
        size_t fl = strlen(cerr.field);
        return bad("%s%s", flag, strncmp(cerr.message, cerr.field, fl) ? cerr.message : cerr.message + fl);
    }
    if (!a->data) {
        char why[512];
        const char *corpus_name = json_string_value(json_object_get(a->cfg, "corpus"));
        long known = corpus_vocab_in_catalogue(a->data_dir, corpus_name, why, sizeof why);
        if (known < 0) return bad("%s", why);
        if (a->vocab && a->vocab != known)
            return bad("--vocab %ld disagrees with corpus '%s', whose tokenizer has %ld", a->vocab, corpus_name, known);
        a->vocab = known;
    }
    if (!a->vocab) a->vocab = 50257;
    return 0;
}

/* The engine's config and thread count for a, with the provenance its weights and checkpoints
 * carry (prov: c points into it): 0, or 2 after saying why the engine refuses it. */
static int train_configure(const train_args *a, train_config *c, long *threads, checkpoint_provenance *prov) {
    run_config_to_train(a->cfg, (int)a->vocab, c);
    c->init_weights = a->init;
    c->save_path = a->save;
    c->checkpoint_path = a->checkpoint;
    *threads = (long)json_integer_value(json_object_get(a->cfg, "threads"));
    if (*threads == 0) *threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (*threads < 1) *threads = 1;
    if (*threads > 64) *threads = 64;
    engine_error err;
    if (train_config_validate(c, &err)) return bad("%s", err.message);
    /* a token file carries no answer positions; the service knows a task corpus's (POST /api/runs) */
    if (c->loss_on == TRAIN_LOSS_ANSWERS)
        return bad("--loss-on answers needs a task corpus's answer positions, which a token file does not carry: run "
                   "it through the service (POST /api/runs)");
    /* where the tokens come from, in the weights and checkpoints: the vocabulary tells the tokenizer
     * apart for the two this service makes (a task corpus's file cannot be told from its size) */
    const char *from = a->data ? strrchr(a->data, '/') : NULL;
    checkpoint_provenance_set(
        prov, NULL, a->data ? (from ? from + 1 : a->data) : json_string_value(json_object_get(a->cfg, "corpus")),
        a->vocab == 50257 ? "gpt2"
        : a->vocab == 256 ? "bytes"
                          : NULL,
        NULL, "a token file given to attnlabd train with a vocabulary of neither GPT-2 nor bytes");
    c->meta_kv = prov->kv;
    c->n_meta = prov->n;
    return 0;
}

/* Trains on the token file (--data, or the corpus's in the data directory), printing a line per
 * event: 0 done, 1 failed or stopped, 2 when the file's path is too long. */
static int train_execute(const train_args *a, const train_config *c, long threads) {
    char path[4096];
    const char *data = a->data;
    if (!data) {
        const char *corpus_name = json_string_value(json_object_get(a->cfg, "corpus"));
        if (snprintf(path, sizeof path, "%s/corpora/%s/tokens.u16", a->data_dir, corpus_name) >= (int)sizeof path)
            return bad("--data-dir is too long");
        data = path;
    }
    engine_error err;
    corpus *cp;
    if (corpus_open_u16(&cp, data, &err)) {
        fprintf(stderr, "attnlabd train: %s\n", err.message);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* the first line: what this run computes with, before any step */
    emit(json_pack("{s:s, s:s, s:s, s:I, s:I}", "type", "start", "kernel_path", train_config_kernel_path(c),
                   "precision", precision_name(c->precision), "vocab", (json_int_t)a->vocab, "threads",
                   (json_int_t)threads));
    train_callbacks cb = {.on_step = cb_step,
                          .on_eval = cb_eval,
                          .should_stop = cb_stop,
                          .on_checkpoint = cb_checkpoint,
                          .on_notice = cb_notice};
    engine_status st = train_run(c, cp, (int)threads, a->resume, &cb, &err);
    corpus_free(cp);
    emit(st ? json_pack("{s:s, s:s, s:s}", "type", "done", "status", engine_status_name(st), "error", err.message)
            : json_pack("{s:s, s:s}", "type", "done", "status", engine_status_name(st)));
    if (!st) return 0;
    fprintf(stderr, "attnlabd train: %s\n", err.message);
    return 1;
}

int cmd_train(int argc, char **argv) {
    if (run_config_init() < 0) {
        fprintf(stderr, "attnlabd train: the embedded OpenAPI document is broken\n");
        return 1;
    }
    train_args a = {.data_dir = "var", .given = json_object()};
    if (!a.given) {
        fprintf(stderr, "attnlabd train: out of memory\n");
        return 1;
    }
    train_config c;
    checkpoint_provenance prov;
    long threads = 0;
    int rc = train_parse(argc, argv, &a);
    if (!rc) rc = train_resolve(&a);
    if (!rc) rc = train_configure(&a, &c, &threads, &prov);
    if (!rc) rc = train_execute(&a, &c, threads);
    json_decref(a.given);
    json_decref(a.cfg);
    run_config_cleanup();
    return rc < 0 ? 0 : rc; /* -1: after --help */
}
