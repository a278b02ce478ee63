#include "cmd_experiments.h"

#include <stdlib.h>
#include <string.h>

#include "cmd_questions.h"
#include "cmd_runs.h"
#include "fetch.h"
#include "httpc.h"
#include "table.h"

const char cmd_experiments_help[] =
    "usage: attnlab experiments start --preset NAME [--tiny] [--replicates N] [--set KEY=VALUE ...]\n"
    "                                 [--KEY VALUE ...] [--vary KEY=V1,V2,... ...] [--name NAME] [--tag T ...] [-q]\n"
    "       attnlab experiments start --base FILE.json --vary KEY=V1,V2,... [--vary ...] [--replicates N] [--set ...]\n"
    "       attnlab experiments add ID --replicates N | --vary KEY=V1,V2,... [-q]\n"
    "       attnlab experiments list\n"
    "       attnlab experiments show ID [--k K] [--csv]\n"
    "       attnlab experiments head-spread ID [--at STEP] [--csv]\n"
    "       attnlab experiments accuracy ID [--csv]\n"
    "       attnlab experiments bundle ID [--csv] [--max-points N] [--keys K1,K2] > FILE\n"
    "\n"
    "start    creates an experiment: one run per variant and replicate, with the same data order and\n"
    "         hyper-parameters. --replicates N (1-32) runs every variant N times with seeds seed,\n"
    "         seed+1, ...; replicate i of every variant shares its seed (a paired design).\n"
    "         --preset seed-blog is the Cosine-RoPE blog post's comparison (rope vs cosine_rope,\n"
    "         3 layers, 4 heads, d_model 128, 2000 steps); seed-blog-replicated is the same with 5\n"
    "         replicates; attention-scale adds cosine_rope without weight decay on tau and the cosine\n"
    "         times a learned log-scale from 10 clamped at 100 (the server's /api/presets has them\n"
    "         in full). --tiny applies the preset's classroom-sized overrides (built-in corpus, small\n"
    "         model); config flags override the preset, e.g. --set steps=20 --set d_model=32.\n"
    "         --vary attention=rope,cosine_rope makes one variant per value; two or more --vary make\n"
    "         a sweep: --vary lr=1e-3,3e-4 --vary tau_param=linear,log runs every combination (4\n"
    "         variants named lr=0.001,tau_param=linear, ...; at most 256 runs with replicates).\n"
    "         -q prints only the run ids, one per line\n"
    "add      adds runs to experiment ID: --replicates N runs N more replicates of each of its\n"
    "         variants (seeds continuing where its replicates end); --vary KEY=V1,V2 new variants,\n"
    "         one per value, run for every replicate it has with the same seeds. They pair with\n"
    "         the others in show, bundle and the statistics. -q prints only the new run ids\n"
    "list     experiments with their runs\n"
    "show     one experiment: its runs, the comparison of its variants (final and best loss,\n"
    "         validation loss, tau from its initial value to the final range over heads), each\n"
    "         run's final tau per layer and head, and with replicates the statistics: per variant\n"
    "         and metric n, mean, std and 95% interval (t, or bootstrap for spreads); per pair of\n"
    "         variants the paired mean difference, its t interval, the paired t-test's p (and\n"
    "         Holm's adjustment) and a bootstrap interval. --k K: the final training loss\n"
    "         averages the last K steps (default 10); --csv prints the statistics as CSV instead\n"
    "head-spread  the blog's question 1 (preset tau-long): per variant the spread of tau across heads\n"
    "         (max/min, std) and of attention entropy and distance, at step STEP (default 2000) and at\n"
    "         the end, mean and 95% bootstrap interval over replicates, the paired change and its p\n"
    "accuracy the blog's question 2 (preset positional-precision): per variant exact-match accuracy\n"
    "         on the task answers, overall (acc) and per offset or distance bucket (acc.k4, acc.d8)\n"
    "bundle   the whole experiment as one download on stdout: JSON (the experiment, the config keys\n"
    "         that differ, every run with config, summary and series) or --csv (a row per point);\n"
    "         --max-points downsamples each series (0: every point), --keys picks metric keys\n"
    "\n"
    "Exit status: 0 ok, 2 usage, 3 server unreachable or timeout, 4 refused (message and field\n"
    "printed), 5 server error.\n";

json_t *cmd_experiments_vary(const char *spec, char *msg, size_t msglen) {
    char key[64];
    const char *vals;
    if (cli_split_kv(spec, key, sizeof key, &vals) < 0 || !*vals) {
        snprintf(msg, msglen, "--vary wants KEY=V1,V2,..., not '%s'", spec);
        return NULL;
    }
    json_t *variants = json_array();
    if (!variants) {
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    const char *p = vals;
    for (;;) {
        size_t n = strcspn(p, ",");
        char val[256];
        if (n == 0 || n >= sizeof val) {
            snprintf(msg, msglen, "--vary %s: empty or too long value", key);
            json_decref(variants);
            return NULL;
        }
        memcpy(val, p, n);
        val[n] = 0;
        json_t *cfg = json_object();
        if (!cfg || cli_config_set(cfg, key, val, msg, msglen) < 0) {
            json_decref(cfg);
            json_decref(variants);
            return NULL;
        }
        json_t *v = json_pack("{s:s, s:o}", "name", val, "config", cfg);
        if (!v || json_array_append_new(variants, v) < 0) {
            snprintf(msg, msglen, "out of memory");
            json_decref(variants);
            return NULL;
        }
        if (!p[n]) break;
        p += n + 1;
    }
    return variants;
}

int cmd_experiments_grid_add(json_t *grid, const char *spec, char *msg, size_t msglen) {
    json_t *variants = cmd_experiments_vary(spec, msg, msglen);
    if (!variants) return -1;
    json_t *values = json_array();
    const char *key = NULL;
    size_t i;
    json_t *v;
    json_array_foreach(variants, i, v) {
        json_t *cfg = json_object_get(v, "config");
        void *it = json_object_iter(cfg);
        key = json_object_iter_key(it);
        if (!values || json_array_append(values, json_object_iter_value(it)) < 0) {
            snprintf(msg, msglen, "out of memory");
            json_decref(values);
            json_decref(variants);
            return -1;
        }
    }
    int rc = 0;
    if (json_object_get(grid, key)) {
        snprintf(msg, msglen, "--vary %s is given twice", key);
        rc = -1;
    } else if (json_object_set(grid, key, values) < 0) {
        snprintf(msg, msglen, "out of memory");
        rc = -1;
    }
    json_decref(values);
    json_decref(variants);
    return rc;
}

/* The runs of an experiment answer, as an array (embedded objects or bare ids). */
static json_t *exp_runs(json_t *e) {
    json_t *r = json_object_get(e, "runs");
    if (json_is_array(r)) return r;
    r = json_object_get(e, "run_ids");
    return json_is_array(r) ? r : NULL;
}

/* Adds the named preset's classroom-sized overrides ("tiny" in /api/presets) to overrides, under
 * what the command line already set. Returns CLI_EXIT_OK or the failure's exit code. */
static int preset_tiny(const cli_ctx *ctx, const char *preset, json_t *overrides) {
    json_t *list;
    int code = httpc_json(ctx, "GET", "/api/presets", NULL, &list);
    if (code) return code;
    json_t *tiny = NULL, *p;
    size_t i;
    json_array_foreach(json_object_get(list, "presets"), i, p) {
        if (json_is_string(json_object_get(p, "name")) &&
            !strcmp(json_string_value(json_object_get(p, "name")), preset))
            tiny = json_object_get(p, "tiny");
    }
    if (!json_is_object(tiny)) {
        json_decref(list);
        return cli_fail(ctx, CLI_EXIT_USAGE, "the server has no classroom-sized version of preset '%s'", preset);
    }
    json_object_update_missing(overrides, tiny);
    json_decref(list);
    return CLI_EXIT_OK;
}

/* POSTs body to path (a create, or runs added to an experiment) and prints the answer: the new
 * run ids one per line (quiet), the JSON (--json), or "experiment ID <done> (NAME): run ID (variant),
 * ...". */
static int post_runs(const cli_ctx *ctx, const char *path, json_t *body, int quiet, const char *done) {
    json_t *e;
    int code = httpc_json(ctx, "POST", path, body, &e);
    if (code) return code;
    json_t *runs = exp_runs(e);
    size_t i;
    json_t *r;
    if (quiet) {
        json_array_foreach(runs, i, r) {
            json_t *id = json_is_object(r) ? json_object_get(r, "id") : r;
            if (json_is_integer(id)) fprintf(ctx->out, "%lld\n", (long long)json_integer_value(id));
        }
    } else if (ctx->json) {
        cli_print_json(ctx, e);
    } else {
        char id[32];
        json_t *exp = cli_unwrap(e, "experiment");
        fprintf(ctx->out, "experiment %s %s", cli_cell(json_object_get(exp, "id"), id, sizeof id), done);
        const char *en = json_string_value(json_object_get(exp, "name"));
        char safe[512];
        if (en) fprintf(ctx->out, " (%s)", table_safe(en, safe, sizeof safe));
        fputs(":", ctx->out);
        json_array_foreach(runs, i, r) {
            char rid[32];
            const char *var = json_is_object(r) ? json_string_value(json_object_get(r, "variant")) : NULL;
            cli_cell(json_is_object(r) ? json_object_get(r, "id") : r, rid, sizeof rid);
            fprintf(ctx->out, "%s run %s%s%s%s", i ? "," : "", rid, var ? " (" : "",
                    var ? table_safe(var, safe, sizeof safe) : "", var ? ")" : "");
        }
        fputc('\n', ctx->out);
    }
    json_decref(e);
    return CLI_EXIT_OK;
}

/* attnlab experiments add ID --replicates N | --vary KEY=V1,V2,... [-q] */
static int exp_add(const cli_ctx *ctx, int argc, char **argv) {
    const char *ids = NULL, *replicates = NULL;
    json_t *variants = NULL, *body = json_object();
    int quiet = 0, code = body ? CLI_EXIT_OK : cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
    char msg[512];
    for (int i = 0; i < argc && !code; i++) {
        const char *v;
        int r;
        if ((r = cli_opt_value(argc, argv, &i, "--replicates", &v)) != 0) {
            if (r < 0) code = cli_usage(ctx, "experiments ", "--replicates wants a number");
            replicates = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--vary", &v)) != 0) {
            if (r < 0 || variants)
                code = cli_usage(ctx, "experiments ", "experiments add takes one --vary KEY=V1,V2,...");
            else if (!(variants = cmd_experiments_vary(v, msg, sizeof msg)))
                code = cli_usage(ctx, "experiments ", "%s", msg);
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else if (argv[i][0] != '-' && !ids) {
            ids = argv[i];
        } else {
            code = cli_usage(ctx, "experiments ", "experiments add: unexpected '%s'", argv[i]);
        }
    }
    long long id = 0;
    if (!code && (!ids || cli_parse_id(ids, &id) < 0))
        code = cli_usage(ctx, "experiments ", "experiments add takes an experiment id");
    if (!code && !replicates == !variants)
        code = cli_usage(ctx, "experiments ", "experiments add: give --replicates N or --vary KEY=V1,V2,...");
    if (!code && replicates) {
        char *end;
        long n = strtol(replicates, &end, 10);
        if (end == replicates || *end)
            code = cli_usage(ctx, "experiments ", "--replicates wants a whole number, not '%s'", replicates);
        else
            json_object_set_new(body, "replicates", json_integer(n)); /* the server checks the range */
    }
    if (!code && variants) json_object_set(body, "variants", variants);
    if (!code) {
        char path[64];
        snprintf(path, sizeof path, "/api/experiments/%lld/runs", id);
        code = post_runs(ctx, path, body, quiet, "grew");
    }
    json_decref(variants);
    json_decref(body);
    return code;
}

static int exp_start(const cli_ctx *ctx, int argc, char **argv) {
    json_t *body = json_object(), *overrides = json_object(), *tags = json_array(), *variants = NULL, *base = NULL,
           *grid = NULL;
    const char *preset = NULL, *base_file = NULL, *name = NULL, *replicates = NULL;
    int quiet = 0, tiny = 0, code = CLI_EXIT_OK;
    char msg[512];
    if (!body || !overrides || !tags) {
        code = cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
        goto out;
    }
    for (int i = 0; i < argc && !code; i++) {
        const char *v;
        int r;
        if ((r = cli_opt_value(argc, argv, &i, "--replicates", &v)) != 0) {
            if (r < 0) code = cli_usage(ctx, "experiments ", "--replicates wants a number (1-32)");
            replicates = v;
        } else if (!strcmp(argv[i], "--tiny")) {
            tiny = 1;
        } else if ((r = cli_config_flag(overrides, argc, argv, &i, msg, sizeof msg)) != 0) {
            if (r < 0) code = cli_usage(ctx, "experiments ", "%s", msg);
        } else if ((r = cli_opt_value(argc, argv, &i, "--preset", &v)) != 0) {
            if (r < 0) code = cli_usage(ctx, "experiments ", "--preset wants a name");
            preset = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--base", &v)) != 0) {
            if (r < 0) code = cli_usage(ctx, "experiments ", "--base wants a file");
            base_file = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--vary", &v)) != 0) {
            /* One --vary: a variant per value, named by it; two or more: their grid (every
             * combination, named key=value,key=value by the server). */
            if (r < 0)
                code = cli_usage(ctx, "experiments ", "--vary wants KEY=V1,V2,...");
            else if (!variants && !(variants = cmd_experiments_vary(v, msg, sizeof msg)))
                code = cli_usage(ctx, "experiments ", "%s", msg);
            else if (!grid && !(grid = json_object()))
                code = cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
            else if (cmd_experiments_grid_add(grid, v, msg, sizeof msg) < 0)
                code = cli_usage(ctx, "experiments ", "%s", msg);
        } else if ((r = cli_opt_value(argc, argv, &i, "--name", &v)) != 0) {
            if (r < 0) code = cli_usage(ctx, "experiments ", "--name wants a value");
            name = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--tag", &v)) != 0) {
            if (r < 0)
                code = cli_usage(ctx, "experiments ", "--tag wants a value");
            else
                json_array_append_new(tags, json_string(v));
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else {
            code = cli_usage(ctx, "experiments ", "experiments start: unknown argument '%s'", argv[i]);
        }
    }
    if (code) goto out;
    if (!preset == !base_file) {
        code = cli_usage(ctx, "experiments ", "give either --preset NAME or --base FILE.json");
        goto out;
    }
    if (base_file && !variants) {
        code = cli_usage(ctx, "experiments ", "--base needs --vary KEY=V1,V2,... to say what differs");
        goto out;
    }
    if (tiny && !preset) {
        code = cli_usage(ctx, "experiments ", "--tiny shrinks a preset: give --preset NAME");
        goto out;
    }
    if (replicates) {
        char *end;
        long n = strtol(replicates, &end, 10);
        if (end == replicates || *end) {
            code = cli_usage(ctx, "experiments ", "--replicates wants a whole number, not '%s'", replicates);
            goto out;
        }
        json_object_set_new(body, "replicates", json_integer(n)); /* the server checks the range */
    }
    if (tiny && (code = preset_tiny(ctx, preset, overrides))) goto out;
    if (preset) {
        json_object_set_new(body, "preset", json_string(preset));
        if (json_object_size(overrides)) json_object_set(body, "overrides", overrides);
    } else {
        if (!(base = cli_read_json_file(base_file, msg, sizeof msg))) {
            code = cli_fail(ctx, CLI_EXIT_USAGE, "%s", msg);
            goto out;
        }
        json_object_update(base, overrides);
        json_object_set(body, "base", base);
    }
    if (json_object_size(grid) > 1)
        json_object_set(body, "grid", grid);
    else if (variants)
        json_object_set(body, "variants", variants);
    if (name) json_object_set_new(body, "name", json_string(name));
    if (json_array_size(tags)) json_object_set(body, "tags", tags);
    code = post_runs(ctx, "/api/experiments", body, quiet, "created");
out:
    json_decref(body);
    json_decref(overrides);
    json_decref(tags);
    json_decref(variants);
    json_decref(grid);
    json_decref(base);
    return code;
}

static int exp_list(const cli_ctx *ctx, int argc, char **argv) {
    static const char *const opts[] = {NULL};
    static const char *const keys[] = {"experiments", "items", "data", NULL};
    json_t *body, *list;
    int code = fetch_list(ctx, "experiments list", argc, argv, opts, "/api/experiments", keys, &body, &list);
    if (!code && list) {
        static const char *const head[] = {"ID", "NAME", "PRESET", "VARIANTS", "RUNS", "CREATED"};
        table *t = table_new(6, head);
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            char id[32], runs[256] = "", created[32], variants[256] = "";
            /* Variant names and the run count; an answer that lists the runs gives their ids. */
            size_t k, o = 0, vo = 0;
            json_t *r, *var;
            json_array_foreach(exp_runs(e), k, r) {
                char rid[32];
                cli_cell(json_is_object(r) ? json_object_get(r, "id") : r, rid, sizeof rid);
                if (o < sizeof runs) o += (size_t)snprintf(runs + o, sizeof runs - o, "%s%s", k ? "," : "", rid);
            }
            json_array_foreach(json_object_get(e, "variants"), k, var) {
                const char *vn = json_string_value(json_object_get(var, "name"));
                if (vn && vo < sizeof variants)
                    vo += (size_t)snprintf(variants + vo, sizeof variants - vo, "%s%s", vo ? "," : "", vn);
            }
            if (!*runs) cli_cell(json_object_get(e, "run_count"), runs, sizeof runs);
            const char *cells[6] = {cli_cell(json_object_get(e, "id"), id, sizeof id),
                                    json_string_value(json_object_get(e, "name")),
                                    json_string_value(json_object_get(e, "preset")),
                                    variants,
                                    runs,
                                    cli_time(json_object_get(e, "created_at"), created, sizeof created)};
            if (t) table_add_row(t, cells);
        }
        if (t) table_print(t, ctx->out);
        table_free(t);
    }
    json_decref(body);
    return code;
}

static const char *fmt_num(const json_t *v, char *buf, size_t len) {
    buf[0] = 0;
    if (json_is_number(v)) snprintf(buf, len, "%.4f", json_number_value(v));
    return buf;
}

/* The blog's comparison: per run the final and best loss, the validation loss, and τ from its
 * initial value to the final range over heads; then (per_run_tau) each run's final τ per layer
 * and head. */
static void print_comparison(const cli_ctx *ctx, json_t *runs, int per_run_tau) {
    static const char *const head[] = {"VARIANT", "ATTENTION", "LOSS", "MIN LOSS", "VAL_LOSS", "τ INIT", "τ FINAL"};
    table *t = table_new(7, head);
    if (!t) return;
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
        json_t *sum = json_object_get(r, "summary"), *tau = json_object_get(r, "tau");
        char b[5][64];
        b[4][0] = 0;
        double lo = 1e300, hi = -1e300;
        size_t l, h;
        json_t *row, *v;
        json_array_foreach(json_object_get(tau, "final"), l, row) json_array_foreach(row, h, v) {
            if (!json_is_number(v)) continue;
            if (json_number_value(v) < lo) lo = json_number_value(v);
            if (json_number_value(v) > hi) hi = json_number_value(v);
        }
        if (lo <= hi) snprintf(b[4], sizeof b[4], "%.4f–%.4f", lo, hi);
        const char *cells[7] = {json_string_value(json_object_get(r, "variant")),
                                json_string_value(json_object_get(json_object_get(r, "config"), "attention")),
                                fmt_num(json_object_get(json_object_get(sum, "loss"), "last"), b[0], sizeof b[0]),
                                fmt_num(json_object_get(json_object_get(sum, "loss"), "min"), b[1], sizeof b[1]),
                                fmt_num(json_object_get(json_object_get(sum, "val_loss"), "last"), b[2], sizeof b[2]),
                                lo <= hi ? fmt_num(json_object_get(tau, "initial"), b[3], sizeof b[3]) : "",
                                b[4]};
        table_add_row(t, cells);
    }
    fputs("\ncomparison\n", ctx->out);
    table_print(t, ctx->out);
    table_free(t);
    if (!per_run_tau) return; /* with replicates the statistics summarise tau instead */
    json_array_foreach(runs, i, r) {
        json_t *final = json_object_get(json_object_get(r, "tau"), "final");
        size_t nh = json_array_size(json_array_get(final, 0));
        if (!json_array_size(final) || !nh || nh > 64) continue;
        const char *heads[65] = {"layer"};
        char names[64][16];
        for (size_t h = 0; h < nh; h++) {
            snprintf(names[h], sizeof names[h], "head %zu", h);
            heads[h + 1] = names[h];
        }
        table *tt = table_new((int)nh + 1, heads);
        if (!tt) continue;
        size_t l;
        json_t *row;
        json_array_foreach(final, l, row) {
            const char *cells[65];
            char vals[65][32];
            snprintf(vals[0], sizeof vals[0], "%zu", l);
            cells[0] = vals[0];
            for (size_t h = 0; h < nh; h++)
                cells[h + 1] = fmt_num(json_array_get(row, h), vals[h + 1], sizeof vals[h + 1]);
            table_add_row(tt, cells);
        }
        char init[32];
        const char *var = json_string_value(json_object_get(r, "variant"));
        fprintf(ctx->out, "\nfinal τ of run %lld (%s), initial %s\n",
                (long long)json_integer_value(json_object_get(r, "id")), var ? var : "?",
                fmt_num(json_object_get(json_object_get(r, "tau"), "initial"), init, sizeof init));
        table_print(tt, ctx->out);
        table_free(tt);
    }
}

/* A figure for the statistics tables: 5 significant digits, "" when null. */
static const char *fig(const json_t *v, char *buf, size_t len) {
    buf[0] = 0;
    if (json_is_number(v)) snprintf(buf, len, "%.5g", json_number_value(v));
    return buf;
}

/* "lo – hi" of an interval, "" when it has none. */
static const char *interval_text(const json_t *ci, char *buf, size_t len) {
    buf[0] = 0;
    const json_t *lo = json_array_get(ci, 0), *hi = json_array_get(ci, 1);
    if (json_is_number(lo) && json_is_number(hi))
        snprintf(buf, len, "%.5g – %.5g", json_number_value(lo), json_number_value(hi));
    return buf;
}

static const char *p_text(const json_t *v, char *buf, size_t len) {
    buf[0] = 0;
    if (json_is_number(v)) snprintf(buf, len, json_number_value(v) < 1e-4 ? "%.2e" : "%.4f", json_number_value(v));
    return buf;
}

/* The statistics of GET /api/experiments/{id}/stats: per variant and metric, then per pair. */
static void print_stats(const cli_ctx *ctx, const json_t *stats) {
    json_t *exp = json_object_get(stats, "experiment");
    fprintf(ctx->out,
            "\nstatistics over %lld replicates (succeeded runs; final train loss = mean of the last %lld steps; "
            "%.0f%% intervals)\n",
            (long long)json_integer_value(json_object_get(exp, "replicates")),
            (long long)json_integer_value(json_object_get(stats, "k")),
            100 * json_number_value(json_object_get(stats, "conf")));
    static const char *const head[] = {"VARIANT", "METRIC", "N", "MEAN", "STD", "95% CI (t)", "NOTE"};
    table *t = table_new(7, head);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(stats, "variants"), i, v) {
        const char *metric;
        json_t *m;
        json_object_foreach(json_object_get(v, "metrics"), metric, m) {
            char n[16], mean[32], sd[32], ci[80];
            const char *reason = json_string_value(json_object_get(m, "reason"));
            char note[160] = "";
            if (json_is_number(json_object_get(m, "p")))
                snprintf(note, sizeof note, "vs 0: p %s", p_text(json_object_get(m, "p"), ci, sizeof ci));
            if (reason) snprintf(note, sizeof note, "%s", reason);
            const char *cells[7] = {json_string_value(json_object_get(v, "name")),
                                    metric,
                                    cli_cell(json_object_get(m, "n"), n, sizeof n),
                                    fig(json_object_get(m, "mean"), mean, sizeof mean),
                                    fig(json_object_get(m, "std"), sd, sizeof sd),
                                    interval_text(json_object_get(m, "ci"), ci, sizeof ci),
                                    note};
            if (t) table_add_row(t, cells);
        }
    }
    if (t) table_print(t, ctx->out);
    table_free(t);
    json_t *comps = json_object_get(stats, "comparisons");
    if (!json_array_size(comps)) return;
    fputs("\npaired differences a − b (pairs share a replicate's seed and data order)\n", ctx->out);
    static const char *const chead[] = {
        "METRIC", "A", "B", "N", "MEAN DIFF", "95% CI (t)", "P", "P (HOLM)", "95% CI (BOOTSTRAP)", "NOTE"};
    table *c = table_new(10, chead);
    json_array_foreach(comps, i, v) {
        char n[16], d[32], ci[80], p[32], ph[32], bci[80];
        const char *cells[10] = {json_string_value(json_object_get(v, "metric")),
                                 json_string_value(json_object_get(v, "a")),
                                 json_string_value(json_object_get(v, "b")),
                                 cli_cell(json_object_get(v, "n"), n, sizeof n),
                                 fig(json_object_get(v, "mean_diff"), d, sizeof d),
                                 interval_text(json_object_get(v, "ci"), ci, sizeof ci),
                                 p_text(json_object_get(v, "p"), p, sizeof p),
                                 p_text(json_object_get(v, "p_holm"), ph, sizeof ph),
                                 interval_text(json_object_get(v, "bootstrap_ci"), bci, sizeof bci),
                                 json_string_value(json_object_get(v, "reason"))};
        if (c) table_add_row(c, cells);
    }
    if (c) table_print(c, ctx->out);
    table_free(c);
}

static int exp_show(const cli_ctx *ctx, int argc, char **argv) {
    long long id = 0;
    const char *k = NULL, *ids = NULL;
    int csv = 0;
    for (int i = 0; i < argc; i++) {
        const char *v;
        int r;
        if ((r = cli_opt_value(argc, argv, &i, "--k", &v)) != 0) {
            if (r < 0) return cli_usage(ctx, "experiments ", "--k wants a number of steps");
            k = v;
        } else if (!strcmp(argv[i], "--csv")) {
            csv = 1;
        } else if (!ids) {
            ids = argv[i];
        } else {
            return cli_usage(ctx, "experiments ", "experiments show takes one id");
        }
    }
    if (!ids) return cli_usage(ctx, "experiments ", "experiments show takes one id");
    if (cli_parse_id(ids, &id) < 0) return cli_usage(ctx, "experiments ", "'%s' is not an experiment id", ids);
    if (k && (strspn(k, "0123456789") != strlen(k) || strlen(k) > 6 || !*k))
        return cli_usage(ctx, "experiments ", "--k wants a whole number of steps, not '%s'", k);
    char path[64], spath[96];
    snprintf(path, sizeof path, "/api/experiments/%lld", id);
    snprintf(spath, sizeof spath, "/api/experiments/%lld/stats%s%s%s", id, csv ? ".csv" : "", k ? "?k=" : "",
             k ? k : "");
    if (csv) return fetch_raw(ctx, spath);
    json_t *e, *st = NULL;
    int code = httpc_json(ctx, "GET", path, NULL, &e);
    if (code) return code;
    json_t *exp = cli_unwrap(e, "experiment");
    long long reps = json_integer_value(json_object_get(exp, "replicates"));
    if (reps > 1 || k) {
        if ((code = httpc_json(ctx, "GET", spath, NULL, &st))) {
            json_decref(e);
            return code;
        }
    }
    if (ctx->json) {
        if (st) json_object_set(e, "stats", cli_unwrap(st, "stats"));
        cli_print_json(ctx, e);
    } else {
        char b[64];
        const char *name = json_string_value(json_object_get(exp, "name"));
        const char *preset = json_string_value(json_object_get(exp, "preset"));
        char sn[512], sp[128];
        fprintf(ctx->out, "experiment %lld%s%s%s%s\n", id, name ? "  " : "",
                name ? table_safe(name, sn, sizeof sn) : "", preset ? "  preset " : "",
                preset ? table_safe(preset, sp, sizeof sp) : "");
        const char *created = cli_time(json_object_get(exp, "created_at"), b, sizeof b);
        if (*created) fprintf(ctx->out, "created %s\n", created);
        if (reps > 1) fprintf(ctx->out, "%lld replicates per variant (seeds seed, seed+1, ...)\n", reps);
        json_t *runs = exp_runs(e);
        if (runs && json_array_size(runs) && json_is_object(json_array_get(runs, 0))) {
            fputc('\n', ctx->out);
            cmd_runs_print_table(ctx, runs);
            print_comparison(ctx, runs, reps <= 1);
        }
        if (st)
            print_stats(ctx, cli_unwrap(st, "stats"));
        else
            fputs("\none replicate per variant: no intervals (start it with --replicates N, N >= 3, for error bars)\n",
                  ctx->out);
    }
    json_decref(st);
    json_decref(e);
    return CLI_EXIT_OK;
}

/* bundle ID [--csv] [--max-points N] [--keys K]: GET /api/experiments/{id}/bundle[.csv] to stdout. */
static int exp_bundle(const cli_ctx *ctx, int argc, char **argv) {
    const char *ids = NULL, *points = NULL, *keys = NULL;
    int csv = 0;
    for (int i = 0; i < argc; i++) {
        int r;
        const char *v;
        if ((r = cli_opt_value(argc, argv, &i, "--max-points", &v)) != 0) {
            if (r < 0 || !*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 6)
                return cli_usage(ctx, "experiments ", "--max-points wants 0 or a number of points");
            points = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--keys", &v)) != 0) {
            if (r < 0 || !*v || strlen(v) > 2000 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_.,*") != strlen(v))
                return cli_usage(ctx, "experiments ", "--keys wants metric keys separated by commas");
            keys = v;
        } else if (!strcmp(argv[i], "--csv")) {
            csv = 1;
        } else if (!ids && argv[i][0] != '-') {
            ids = argv[i];
        } else {
            return cli_usage(ctx, "experiments ", "experiments bundle: unexpected '%s'", argv[i]);
        }
    }
    long long id;
    if (!ids || cli_parse_id(ids, &id) < 0)
        return cli_usage(ctx, "experiments ", "experiments bundle takes an experiment id");
    char path[2200];
    snprintf(path, sizeof path, "/api/experiments/%lld/bundle%s%s%s%s%s%s", id, csv ? ".csv" : "",
             points || keys ? "?" : "", points ? "max_points=" : "", points ? points : "",
             points && keys ? "&keys="
             : keys         ? "keys="
                            : "",
             keys ? keys : "");
    return fetch_raw(ctx, path);
}

int cmd_experiments(const cli_ctx *ctx, int argc, char **argv) {
    if (argc < 1 || cli_is_help(argv[0])) {
        fputs(cmd_experiments_help, argc < 1 ? ctx->err : ctx->out);
        return argc < 1 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            fputs(cmd_experiments_help, ctx->out);
            return CLI_EXIT_OK;
        }
    const char *sub = argv[0];
    if (!strcmp(sub, "start")) return exp_start(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "add")) return exp_add(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "list")) return exp_list(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "show")) return exp_show(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "head-spread")) return cmd_questions_head_spread(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "accuracy")) return cmd_questions_accuracy(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "bundle")) return exp_bundle(ctx, argc - 1, argv + 1);
    return cli_usage(ctx, "experiments ", "unknown experiments command '%s'", sub);
}
