#include "cmd_runs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_watch.h"
#include "fetch.h"
#include "httpc.h"
#include "table.h"

const char cmd_runs_help[] =
    "usage: attnlab runs list [--status S] [--tag T] [--experiment E] [--variant V] [--sort KEY]\n"
    "                         [--where KEY=VALUE ...] [--limit N] [--offset N]\n"
    "       attnlab runs show ID\n"
    "       attnlab runs start [--config FILE.json] [--set KEY=VALUE ...] [--KEY VALUE ...]\n"
    "                          [--name NAME] [--tag T ...] [--note TEXT] [--watch] [-q]\n"
    "       attnlab runs cancel|resume|delete ID\n"
    "       attnlab runs tag ID TAG...\n"
    "       attnlab runs note ID TEXT...\n"
    "\n"
    "list     runs, newest first; S is queued|running|succeeded|failed|cancelled|interrupted.\n"
    "         --sort id|created_at|name|status|loss|val_loss|min_loss|min_val_loss, '-' first for\n"
    "         descending (loss: the final value, min_loss: the lowest; runs without one last);\n"
    "         --where tau_param=log keeps the runs whose config has that value (repeatable, all\n"
    "         must hold)\n"
    "show     one run: status, progress, config, latest values and per-key summaries\n"
    "start    queues a training run. The config is FILE.json (a RunConfig object) with the flags\n"
    "         on top; any RunConfig key works as --KEY VALUE or --set KEY=VALUE, e.g.\n"
    "         --attention cosine_rope --steps 20 --d-model 32 --n-head 2 --seq-len 16 --batch 4.\n"
    "         -q prints only the new run's id; --watch follows it (exit status as for watch)\n"
    "cancel   stops a queued or running run (a checkpoint is kept); resume continues it\n"
    "delete   removes a finished run with its metrics and files\n"
    "tag      adds tags to the run's tags; note replaces the run's note\n"
    "\n"
    "Exit status: 0 ok, 2 usage, 3 server unreachable or timeout, 4 refused (message and field\n"
    "printed), 5 server error.\n";

static int get_id(const cli_ctx *ctx, const char *sub, int argc, char **argv, long long *id) {
    if (argc < 1) return cli_usage(ctx, "runs ", "runs %s needs a run id", sub);
    if (cli_parse_id(argv[0], id) < 0) return cli_usage(ctx, "runs ", "'%s' is not a run id", argv[0]);
    return CLI_EXIT_OK;
}

static const char *num(const json_t *v, const char *fmt, char *buf, size_t len) {
    buf[0] = 0;
    if (json_is_number(v)) snprintf(buf, len, fmt, json_number_value(v));
    return buf;
}

void cmd_runs_print_table(const cli_ctx *ctx, json_t *runs) {
    static const char *const head[] = {"ID",  "NAME",    "STATUS", "STEP", "ATTENTION", "LOSS",
                                       "EXP", "VARIANT", "REP",    "TAGS", "CREATED"};
    table *t = table_new(11, head);
    if (!t) return;
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
        char id[32], step[48], loss[32], exp[32], rep[24] = "", tags[256], created[32], st[24], tot[24];
        json_t *cfg = json_object_get(r, "config");
        cli_cell(json_object_get(r, "step"), st, sizeof st);
        cli_cell(json_object_get(r, "total_steps"), tot, sizeof tot);
        if (!*tot) cli_cell(json_object_get(cfg, "steps"), tot, sizeof tot);
        snprintf(step, sizeof step, "%s/%s", *st ? st : "0", *tot ? tot : "?");
        /* The replicate only means something inside an experiment. */
        if (json_is_integer(json_object_get(r, "experiment_id")))
            cli_cell(json_object_get(r, "replicate"), rep, sizeof rep);
        const char *cells[11] = {
            cli_cell(json_object_get(r, "id"), id, sizeof id),
            json_string_value(json_object_get(r, "name")),
            json_string_value(json_object_get(r, "status")),
            step,
            json_string_value(json_object_get(cfg, "attention")),
            num(cli_last_value(json_object_get(json_object_get(r, "last"), "loss")), "%.4f", loss, sizeof loss),
            cli_cell(json_object_get(r, "experiment_id"), exp, sizeof exp),
            json_string_value(json_object_get(r, "variant")),
            rep,
            cli_cell(json_object_get(r, "tags"), tags, sizeof tags),
            cli_time(json_object_get(r, "created_at"), created, sizeof created),
        };
        table_add_row(t, cells);
    }
    table_print(t, ctx->out);
    table_free(t);
}

/* Most --where filters one list sends (the server takes 8 and answers 422 past them). */
#define MAX_WHERE 16

static int runs_list(const cli_ctx *ctx, int argc, char **argv) {
    static const char *const fixed[] = {"--status", "--tag",   "--experiment", "--variant",
                                        "--sort",   "--limit", "--offset"};
    enum { N_FIXED = sizeof fixed / sizeof fixed[0] };
    static const char *const keys[] = {"runs", "items", "data", NULL};
    /* --where KEY=VALUE becomes --config.KEY VALUE, an option of its own, so it is sent as
     * config.KEY=VALUE with the others. */
    const char *opts[N_FIXED + MAX_WHERE + 1];
    char names[MAX_WHERE][80];
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) return cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
    int n_opts = 0, n_args = 0, n_where = 0, code = CLI_EXIT_OK;
    for (; n_opts < N_FIXED; n_opts++) opts[n_opts] = fixed[n_opts];
    for (int i = 0; i < argc && !code; i++) {
        const char *v;
        int r = cli_opt_value(argc, argv, &i, "--where", &v);
        if (r == 0) {
            args[n_args++] = argv[i];
            continue;
        }
        char key[64];
        const char *val;
        if (r < 0 || cli_split_kv(v, key, sizeof key, &val) < 0) {
            code = cli_usage(ctx, "runs ", "--where wants KEY=VALUE (a config key), e.g. --where tau_param=log");
            break;
        }
        for (char *k = key; *k; k++)
            if (*k == '-') *k = '_';
        if (n_where == MAX_WHERE) {
            code = cli_usage(ctx, "runs ", "at most %d --where filters", MAX_WHERE);
            break;
        }
        snprintf(names[n_where], sizeof names[n_where], "--config.%s", key);
        opts[n_opts++] = names[n_where++];
        args[n_args++] = names[n_where - 1];
        args[n_args++] = (char *)val;
    }
    opts[n_opts] = NULL;
    json_t *body = NULL, *runs = NULL;
    if (!code) code = fetch_list(ctx, "runs list", n_args, args, opts, "/api/runs", keys, &body, &runs);
    if (!code && runs) cmd_runs_print_table(ctx, runs);
    json_decref(body);
    free(args);
    return code;
}

static void kv_row(table *t, const char *k, const char *v) {
    if (!v || !*v) return;
    const char *cells[2] = {k, v};
    table_add_row(t, cells);
}

/* Per-key summaries, whether the server gives them as {key:{last,min,...}} or [{key,...}]. */
static void print_summary(const cli_ctx *ctx, json_t *summary) {
    static const char *const head[] = {"KEY", "LAST", "MIN", "MAX", "MEAN", "MIN AT STEP", "COUNT"};
    static const char *const fields[] = {"last", "min", "max", "mean", "step_of_min", "count"};
    table *t = table_new(7, head);
    if (!t) return;
    const char *key;
    json_t *s;
    size_t i;
    json_t *list = json_is_array(summary) ? summary : NULL;
    if (!list) {
        json_object_foreach(summary, key, s) {
            if (!json_is_object(s)) continue;
            char b[6][40];
            const char *cells[7] = {key};
            for (int f = 0; f < 6; f++) {
                json_t *v = json_object_get(s, fields[f]);
                if (!v && f == 4) v = json_object_get(s, "min_step");
                cells[f + 1] = json_is_real(v) ? num(v, "%.5g", b[f], sizeof b[f]) : cli_cell(v, b[f], sizeof b[f]);
            }
            table_add_row(t, cells);
        }
    } else {
        json_array_foreach(list, i, s) {
            char b[6][40];
            const char *cells[7] = {json_string_value(json_object_get(s, "key"))};
            for (int f = 0; f < 6; f++) {
                json_t *v = json_object_get(s, fields[f]);
                cells[f + 1] = json_is_real(v) ? num(v, "%.5g", b[f], sizeof b[f]) : cli_cell(v, b[f], sizeof b[f]);
            }
            table_add_row(t, cells);
        }
    }
    if (table_rows(t)) {
        fputs("\nsummary\n", ctx->out);
        table_print(t, ctx->out);
    }
    table_free(t);
}

static int runs_show(const cli_ctx *ctx, int argc, char **argv) {
    long long id;
    int code = get_id(ctx, "show", argc, argv, &id);
    if (code) return code;
    if (argc > 1) return cli_usage(ctx, "runs ", "runs show takes one id");
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_t *answer;
    if ((code = httpc_json(ctx, "GET", path, NULL, &answer))) return code;
    if (ctx->json) {
        cli_print_json(ctx, answer);
        json_decref(answer);
        return CLI_EXIT_OK;
    }
    json_t *run = cli_unwrap(answer, "run");
    static const char *const head[] = {"", ""};
    table *t = table_new(2, head);
    if (!t) {
        json_decref(answer);
        return cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
    }
    char b[12][256];
    json_t *cfg = json_object_get(run, "config");
    kv_row(t, "id", cli_cell(json_object_get(run, "id"), b[0], sizeof b[0]));
    kv_row(t, "name", json_string_value(json_object_get(run, "name")));
    kv_row(t, "status", json_string_value(json_object_get(run, "status")));
    char step[40], tot[40];
    cli_cell(json_object_get(run, "step"), step, sizeof step);
    cli_cell(json_object_get(run, "total_steps"), tot, sizeof tot);
    snprintf(b[1], sizeof b[1], "%s/%s", *step ? step : "0", *tot ? tot : "?");
    kv_row(t, "step", b[1]);
    kv_row(t, "experiment", cli_cell(json_object_get(run, "experiment_id"), b[2], sizeof b[2]));
    kv_row(t, "variant", json_string_value(json_object_get(run, "variant")));
    if (json_is_integer(json_object_get(run, "experiment_id")))
        kv_row(t, "replicate", cli_cell(json_object_get(run, "replicate"), b[10], sizeof b[10]));
    kv_row(t, "seed", cli_cell(json_object_get(run, "seed"), b[3], sizeof b[3]));
    kv_row(t, "tags", cli_cell(json_object_get(run, "tags"), b[4], sizeof b[4]));
    kv_row(t, "note", json_string_value(json_object_get(run, "note")));
    kv_row(t, "created", cli_time(json_object_get(run, "created_at"), b[5], sizeof b[5]));
    kv_row(t, "started", cli_time(json_object_get(run, "started_at"), b[6], sizeof b[6]));
    kv_row(t, "finished", cli_time(json_object_get(run, "finished_at"), b[7], sizeof b[7]));
    kv_row(t, "tokens/s", num(json_object_get(run, "tokens_per_s"), "%.0f", b[8], sizeof b[8]));
    kv_row(t, "eta (s)", num(json_object_get(run, "eta_s"), "%.0f", b[9], sizeof b[9]));
    kv_row(t, "error", json_string_value(json_object_get(run, "error")));
    table_print(t, ctx->out);
    table_free(t);
    if (json_is_object(cfg) && json_object_size(cfg)) {
        fputs("\nconfig\n", ctx->out);
        t = table_new(2, head);
        const char *k;
        json_t *v;
        json_object_foreach(cfg, k, v) kv_row(t, k, cli_cell(v, b[10], sizeof b[10]));
        if (t) table_print(t, ctx->out);
        table_free(t);
    }
    json_t *last = json_object_get(run, "last");
    if (json_is_object(last) && json_object_size(last)) {
        fputs("\nlatest values\n", ctx->out);
        t = table_new(2, head);
        const char *k;
        json_t *v;
        json_object_foreach(last, k, v) {
            if (json_is_object(v)) {
                /* {"last":..,"min":..} or {"min":..,"max":..}: "last 4.12, min 4.05" */
                size_t o = 0;
                const char *sk;
                json_t *sv;
                b[11][0] = 0;
                json_object_foreach(v, sk, sv) {
                    char one[48];
                    if (o < sizeof b[11])
                        o += (size_t)snprintf(b[11] + o, sizeof b[11] - o, "%s%s %s", o ? ", " : "", sk,
                                              json_is_real(sv) ? num(sv, "%.6g", one, sizeof one)
                                                               : cli_cell(sv, one, sizeof one));
                }
                kv_row(t, k, b[11]);
            } else {
                kv_row(t, k, json_is_real(v) ? num(v, "%.6g", b[11], sizeof b[11]) : cli_cell(v, b[11], sizeof b[11]));
            }
        }
        if (t) table_print(t, ctx->out);
        table_free(t);
    }
    json_t *summary = json_object_get(run, "summary");
    if (summary) {
        print_summary(ctx, summary);
    } else {
        /* Older answers carry no summaries: ask for them, and show the run anyway if that fails. */
        char spath[96], msg[256];
        snprintf(spath, sizeof spath, "/api/runs/%lld/summary", id);
        httpc_response r;
        if (httpc_request(ctx, "GET", spath, NULL, &r, msg, sizeof msg) == CLI_EXIT_OK) {
            json_t *sj = r.status == 200 && r.body ? json_loads(r.body, 0, NULL) : NULL;
            if (sj) print_summary(ctx, cli_unwrap(sj, "summary"));
            json_decref(sj);
            httpc_response_free(&r);
        }
    }
    json_decref(answer);
    return CLI_EXIT_OK;
}

static int runs_start(const cli_ctx *ctx, int argc, char **argv) {
    json_t *body = json_object(), *config = NULL, *tags = json_array();
    const char *file = NULL, *name = NULL, *note = NULL;
    int do_watch = 0, quiet = 0, code = CLI_EXIT_OK;
    json_t *flags = json_object(); /* flags win over the file, whatever their order */
    char msg[512];
    if (!body || !tags || !flags) {
        code = cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
        goto out;
    }
    for (int i = 0; i < argc && !code; i++) {
        const char *v;
        int r;
        if ((r = cli_config_flag(flags, argc, argv, &i, msg, sizeof msg)) != 0) {
            if (r < 0) code = cli_usage(ctx, "runs ", "%s", msg);
        } else if ((r = cli_opt_value(argc, argv, &i, "--config", &v)) != 0) {
            if (r < 0) code = cli_usage(ctx, "runs ", "--config wants a file");
            file = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--name", &v)) != 0) {
            if (r < 0) code = cli_usage(ctx, "runs ", "--name wants a value");
            name = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--note", &v)) != 0) {
            if (r < 0) code = cli_usage(ctx, "runs ", "--note wants a value");
            note = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--tag", &v)) != 0) {
            if (r < 0)
                code = cli_usage(ctx, "runs ", "--tag wants a value");
            else
                json_array_append_new(tags, json_string(v));
        } else if (!strcmp(argv[i], "--watch")) {
            do_watch = 1;
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else {
            code = cli_usage(ctx, "runs ", "runs start: unknown argument '%s'", argv[i]);
        }
    }
    if (code) goto out;
    if (file) {
        if (!(config = cli_read_json_file(file, msg, sizeof msg))) {
            code = cli_fail(ctx, CLI_EXIT_USAGE, "%s", msg);
            goto out;
        }
    } else if (!(config = json_object())) {
        code = cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
        goto out;
    }
    json_object_update(config, flags);
    json_object_set(body, "config", config);
    if (name) json_object_set_new(body, "name", json_string(name));
    if (note) json_object_set_new(body, "note", json_string(note));
    if (json_array_size(tags)) json_object_set(body, "tags", tags);
    json_t *answer;
    if ((code = httpc_json(ctx, "POST", "/api/runs", body, &answer))) goto out;
    json_t *run = cli_unwrap(answer, "run");
    json_t *idv = json_object_get(run, "id");
    long long id = json_is_integer(idv) ? json_integer_value(idv) : 0;
    if (quiet)
        fprintf(ctx->out, "%lld\n", id);
    else if (ctx->json && !do_watch)
        cli_print_json(ctx, answer);
    else if (!ctx->json) {
        char a[32];
        cli_cell(json_object_get(json_object_get(run, "config"), "attention"), a, sizeof a);
        char st[64];
        cli_cell(json_object_get(run, "status"), st, sizeof st);
        fprintf(ctx->out, "run %lld %s (attention %s)\n", id, *st ? st : "created", *a ? a : "?");
    }
    json_decref(answer);
    if (do_watch) {
        if (id <= 0)
            code = cli_fail(ctx, CLI_EXIT_SERVER, "POST /api/runs: the answer has no run id");
        else {
            fflush(ctx->out);
            code = cmd_watch_run(ctx, id, -1, 0);
        }
    }
out:
    json_decref(body);
    json_decref(config);
    json_decref(tags);
    json_decref(flags);
    return code;
}

static int runs_action(const cli_ctx *ctx, const char *sub, int argc, char **argv) {
    long long id;
    int code = get_id(ctx, sub, argc, argv, &id);
    if (code) return code;
    if (argc > 1) return cli_usage(ctx, "runs ", "runs %s takes one id", sub);
    char path[96];
    const char *method = "POST";
    if (!strcmp(sub, "delete")) {
        method = "DELETE";
        snprintf(path, sizeof path, "/api/runs/%lld", id);
    } else {
        snprintf(path, sizeof path, "/api/runs/%lld/%s", id, sub);
    }
    json_t *resp;
    if ((code = httpc_json(ctx, method, path, NULL, &resp))) return code;
    if (ctx->json) {
        if (json_is_null(resp)) {
            json_decref(resp);
            resp = json_pack("{s:I, s:b}", "id", (json_int_t)id, "deleted", 1);
        }
        cli_print_json(ctx, resp);
    } else {
        char sb[64];
        const char *st = json_object_get(cli_unwrap(resp, "run"), "status")
                             ? cli_cell(json_object_get(cli_unwrap(resp, "run"), "status"), sb, sizeof sb)
                             : NULL;
        if (!strcmp(sub, "delete"))
            fprintf(ctx->out, "run %lld deleted\n", id);
        else if (!strcmp(sub, "cancel"))
            fprintf(ctx->out, "run %lld: cancel requested%s%s\n", id, st ? ", now " : "", st ? st : "");
        else
            fprintf(ctx->out, "run %lld resumed%s%s\n", id, st ? ", now " : "", st ? st : "");
    }
    json_decref(resp);
    return CLI_EXIT_OK;
}

static int runs_patch(const cli_ctx *ctx, long long id, json_t *patch) {
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_t *answer;
    int code = httpc_json(ctx, "PATCH", path, patch, &answer);
    if (code) return code;
    json_t *run = cli_unwrap(answer, "run");
    if (ctx->json) {
        cli_print_json(ctx, answer);
    } else {
        char tags[1024];
        const char *note = json_string_value(json_object_get(run, "note"));
        fprintf(ctx->out, "run %lld tags: %s\n", id, cli_cell(json_object_get(run, "tags"), tags, sizeof tags));
        if (json_object_get(patch, "note")) {
            char *shown = table_safe_dup(note);
            fprintf(ctx->out, "run %lld note: %s\n", id, shown ? shown : "");
            free(shown);
        }
    }
    json_decref(answer);
    return CLI_EXIT_OK;
}

static int runs_tag(const cli_ctx *ctx, int argc, char **argv) {
    long long id;
    int code = get_id(ctx, "tag", argc, argv, &id);
    if (code) return code;
    if (argc < 2) return cli_usage(ctx, "runs ", "runs tag ID TAG... needs at least one tag");
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_t *run;
    /* PATCH replaces the list: read the current tags first so that tagging only adds. */
    if ((code = httpc_json(ctx, "GET", path, NULL, &run))) return code;
    json_t *tags = json_array();
    json_t *old = json_object_get(cli_unwrap(run, "run"), "tags");
    size_t i;
    json_t *t;
    json_array_foreach(old, i, t) json_array_append(tags, t);
    for (int a = 1; a < argc; a++) {
        int dup = 0;
        json_array_foreach(tags, i, t) if (json_is_string(t) && !strcmp(json_string_value(t), argv[a])) dup = 1;
        if (!dup) json_array_append_new(tags, json_string(argv[a]));
    }
    json_decref(run);
    json_t *patch = json_pack("{s:o}", "tags", tags);
    if (!patch) return cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
    code = runs_patch(ctx, id, patch);
    json_decref(patch);
    return code;
}

static int runs_note(const cli_ctx *ctx, int argc, char **argv) {
    long long id;
    int code = get_id(ctx, "note", argc, argv, &id);
    if (code) return code;
    if (argc < 2) return cli_usage(ctx, "runs ", "runs note ID TEXT needs the text");
    size_t n = 1;
    for (int a = 1; a < argc; a++) n += strlen(argv[a]) + 1;
    char *text = malloc(n);
    if (!text) return cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
    text[0] = 0;
    for (int a = 1; a < argc; a++) {
        if (a > 1) strcat(text, " ");
        strcat(text, argv[a]);
    }
    json_t *patch = json_pack("{s:s}", "note", text);
    free(text);
    if (!patch) return cli_fail(ctx, CLI_EXIT_USAGE, "the note is not valid UTF-8");
    code = runs_patch(ctx, id, patch);
    json_decref(patch);
    return code;
}

int cmd_runs(const cli_ctx *ctx, int argc, char **argv) {
    if (argc < 1 || cli_is_help(argv[0])) {
        fputs(cmd_runs_help, argc < 1 ? ctx->err : ctx->out);
        return argc < 1 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (cli_is_help(argv[i])) {
            fputs(cmd_runs_help, ctx->out);
            return CLI_EXIT_OK;
        }
    }
    const char *sub = argv[0];
    argc--, argv++;
    if (!strcmp(sub, "list")) return runs_list(ctx, argc, argv);
    if (!strcmp(sub, "show")) return runs_show(ctx, argc, argv);
    if (!strcmp(sub, "start")) return runs_start(ctx, argc, argv);
    if (!strcmp(sub, "cancel") || !strcmp(sub, "resume") || !strcmp(sub, "delete"))
        return runs_action(ctx, sub, argc, argv);
    if (!strcmp(sub, "tag")) return runs_tag(ctx, argc, argv);
    if (!strcmp(sub, "note")) return runs_note(ctx, argc, argv);
    return cli_usage(ctx, "runs ", "unknown runs command '%s'", sub);
}
