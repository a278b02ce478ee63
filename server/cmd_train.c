/* `attnlabd train`: one training job in the foreground. Prints one JSON object per line on
 * stdout: {"type":"step",...} after every step, {"type":"eval",...} after each validation,
 * {"type":"checkpoint",...} when one is written and a final {"type":"done",...}. Errors go to
 * stderr. Exit status: 0 done, 1 failed at run time (or interrupted: SIGINT/SIGTERM stop the
 * run after the current step, writing the checkpoint if --checkpoint is set), 2 bad usage. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "engine/corpus.h"
#include "engine/train.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: attnlabd train [flags]\n"
            "model:\n"
            "  --attention dot|rope|cosine_rope   (dot)\n"
            "  --layers N (3)  --heads N (4)  --d-model N (128)  --seq-len N (128)  --vocab N (50257)\n"
            "  --rope-base X (10000)  --tau-init X (sqrt(d))  --tau-param linear|log (linear)\n"
            "  --tau-weight-decay on|off (on)\n"
            "optimiser and schedule:\n"
            "  --steps N (2000)  --batch N (32)  --lr X (3e-4)  --beta1 X (0.9)  --beta2 X (0.999)\n"
            "  --eps X (1e-8)  --weight-decay X (0.01)  --grad-clip X (0 = off)\n"
            "  --schedule constant|cosine (constant)  --warmup N (0)  --min-lr-ratio X (0.1)\n"
            "data:\n"
            "  --data FILE.u16 | --corpus NAME (<data-dir>/corpora/NAME/tokens.u16)  --data-dir DIR (var)\n"
            "  --order sequential|shuffled (sequential)  --seed N (1337)  --val-fraction X (0.05)\n"
            "  --eval-every N (100)  --eval-batches N (4)\n"
            "files and machine:\n"
            "  --init FILE.safetensors   start from these weights instead of a random init\n"
            "  --save FILE.safetensors   write the final weights\n"
            "  --checkpoint FILE  --checkpoint-every N (0)  --resume CHECKPOINT\n"
            "  --threads N (all cores)\n");
}

static int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

static void emit(json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(s);
    }
    json_decref(o);
}

static json_t *per_head(const float *v, int L, int H) {
    json_t *a = json_array();
    for (int l = 0; l < L; l++) {
        json_t *row = json_array();
        for (int h = 0; h < H; h++) json_array_append_new(row, json_real(v[l * H + h]));
        json_array_append_new(a, row);
    }
    return a;
}

static void cb_step(void *ctx, const train_step_metrics *m) {
    (void)ctx;
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("step"));
    json_object_set_new(o, "step", json_integer(m->step));
    json_object_set_new(o, "loss", json_real(m->loss));
    json_object_set_new(o, "lr", json_real(m->lr));
    json_object_set_new(o, "grad_norm", json_real(m->grad_norm));
    json_object_set_new(o, "tokens_per_s", json_real(m->tokens_per_s));
    json_object_set_new(o, "step_ms", json_real(m->step_ms));
    json_object_set_new(o, "tau", per_head(m->tau, m->n_layer, m->n_head));
    json_object_set_new(o, "entropy", per_head(m->entropy, m->n_layer, m->n_head));
    emit(o);
}

static void cb_eval(void *ctx, long step, double val) {
    (void)ctx;
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("eval"));
    json_object_set_new(o, "step", json_integer(step));
    json_object_set_new(o, "val_loss", json_real(val));
    emit(o);
}

static void cb_checkpoint(void *ctx, long step, const char *path) {
    (void)ctx;
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("checkpoint"));
    json_object_set_new(o, "step", json_integer(step));
    json_object_set_new(o, "path", json_string(path));
    emit(o);
}

static int cb_stop(void *ctx) {
    (void)ctx;
    return stop_requested != 0;
}

#define BAD(...)                                                                                                   \
    do {                                                                                                           \
        fprintf(stderr, "attnlabd train: " __VA_ARGS__);                                                           \
        fputc('\n', stderr);                                                                                       \
        return 2;                                                                                                  \
    } while (0)

int cmd_train(int argc, char **argv) {
    train_config c;
    train_config_defaults(&c);
    const char *data = NULL, *corpus_name = NULL, *data_dir = "var", *resume = NULL;
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return 0;
        }
        if (strncmp(f, "--", 2) != 0) BAD("unexpected argument '%s' (see --help)", f);
        if (i + 1 >= argc) BAD("%s needs a value", f);
        const char *v = argv[++i];
        long n;
        double x;
#define LONG_FLAG(name, lo, hi, dst)                                                                               \
    else if (!strcmp(f, name)) {                                                                                   \
        if (parse_long(v, lo, hi, &n)) BAD("%s wants an integer in %ld..%ld, not '%s'", f, (long)(lo), (long)(hi), v); \
        dst = n;                                                                                                   \
    }
#define DOUBLE_FLAG(name, dst)                                                                                     \
    else if (!strcmp(f, name)) {                                                                                   \
        if (parse_double(v, &x)) BAD("%s wants a number, not '%s'", f, v);                                         \
        dst = x;                                                                                                   \
    }
        if (!strcmp(f, "--attention")) {
            if (attention_kind_parse(v, &c.model.attention)) BAD("--attention is dot, rope or cosine_rope, not '%s'", v);
        }
        LONG_FLAG("--layers", 1, 24, c.model.n_layer)
        LONG_FLAG("--heads", 1, 1024, c.model.n_head)
        LONG_FLAG("--d-model", 2, 1024, c.model.d_model)
        LONG_FLAG("--seq-len", 1, 4096, c.model.seq_len)
        LONG_FLAG("--vocab", 2, 1 << 20, c.model.vocab)
        DOUBLE_FLAG("--rope-base", c.model.rope_base)
        DOUBLE_FLAG("--tau-init", c.model.tau_init)
        else if (!strcmp(f, "--tau-param")) {
            if (tau_param_parse(v, &c.model.tau_param)) BAD("--tau-param is linear or log, not '%s'", v);
        }
        else if (!strcmp(f, "--tau-weight-decay")) {
            if (!strcmp(v, "on")) c.tau_weight_decay = 1;
            else if (!strcmp(v, "off")) c.tau_weight_decay = 0;
            else BAD("--tau-weight-decay is on or off, not '%s'", v);
        }
        LONG_FLAG("--steps", 1, 10000000, c.steps)
        LONG_FLAG("--batch", 1, 512, c.batch)
        DOUBLE_FLAG("--lr", c.lr)
        DOUBLE_FLAG("--beta1", c.beta1)
        DOUBLE_FLAG("--beta2", c.beta2)
        DOUBLE_FLAG("--eps", c.eps)
        DOUBLE_FLAG("--weight-decay", c.weight_decay)
        DOUBLE_FLAG("--grad-clip", c.grad_clip)
        else if (!strcmp(f, "--schedule")) {
            if (!strcmp(v, "constant")) c.schedule = LR_SCHEDULE_CONSTANT;
            else if (!strcmp(v, "cosine")) c.schedule = LR_SCHEDULE_COSINE;
            else BAD("--schedule is constant or cosine, not '%s'", v);
        }
        LONG_FLAG("--warmup", 0, 10000000, c.warmup_steps)
        DOUBLE_FLAG("--min-lr-ratio", c.min_lr_ratio)
        else if (!strcmp(f, "--data")) data = v;
        else if (!strcmp(f, "--corpus")) corpus_name = v;
        else if (!strcmp(f, "--data-dir")) data_dir = v;
        else if (!strcmp(f, "--order")) {
            if (!strcmp(v, "sequential")) c.order = CORPUS_ORDER_SEQUENTIAL;
            else if (!strcmp(v, "shuffled")) c.order = CORPUS_ORDER_SHUFFLED;
            else BAD("--order is sequential or shuffled, not '%s'", v);
        }
        else if (!strcmp(f, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-') BAD("--seed wants a non-negative integer, not '%s'", v);
            c.seed = s;
        }
        DOUBLE_FLAG("--val-fraction", c.val_fraction)
        LONG_FLAG("--eval-every", 0, 10000000, c.eval_every)
        LONG_FLAG("--eval-batches", 1, 1000, c.eval_batches)
        else if (!strcmp(f, "--init")) c.init_weights = v;
        else if (!strcmp(f, "--save")) c.save_path = v;
        else if (!strcmp(f, "--checkpoint")) c.checkpoint_path = v;
        LONG_FLAG("--checkpoint-every", 0, 10000000, c.checkpoint_every)
        else if (!strcmp(f, "--resume")) resume = v;
        LONG_FLAG("--threads", 1, 256, threads)
        else BAD("unknown flag '%s' (see --help)", f);
#undef LONG_FLAG
#undef DOUBLE_FLAG
    }
    if (!!data == !!corpus_name) BAD("give exactly one of --data FILE.u16 or --corpus NAME");
    engine_error err;
    if (train_config_validate(&c, &err)) BAD("%s", err.message);

    char path[4096];
    if (corpus_name) {
        if (strchr(corpus_name, '/') || !strcmp(corpus_name, "..") || !strcmp(corpus_name, "."))
            BAD("--corpus takes a name, not a path: '%s'", corpus_name);
        snprintf(path, sizeof path, "%s/corpora/%s/tokens.u16", data_dir, corpus_name);
        data = path;
    }
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

    train_callbacks cb = {.on_step = cb_step, .on_eval = cb_eval, .should_stop = cb_stop, .on_checkpoint = cb_checkpoint};
    engine_status rc = train_run(&c, cp, (int)threads, resume, &cb, &err);
    corpus_free(cp);
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("done"));
    json_object_set_new(o, "status", json_string(engine_status_name(rc)));
    if (rc) json_object_set_new(o, "error", json_string(err.message));
    emit(o);
    if (rc) {
        fprintf(stderr, "attnlabd train: %s\n", err.message);
        return 1;
    }
    return 0;
}
