#include "cmd_questions.h"

#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "httpc.h"
#include "table.h"

/* "mean [lo, hi]" of a summary; the mean alone without an interval. */
static const char *summary_text(const json_t *s, char *buf, size_t len) {
    buf[0] = 0;
    const json_t *m = json_object_get(s, "mean"), *ci = json_object_get(s, "ci");
    const json_t *lo = json_array_get(ci, 0), *hi = json_array_get(ci, 1);
    if (!json_is_number(m)) return buf;
    if (json_is_number(lo) && json_is_number(hi))
        snprintf(buf, len, "%.4g [%.4g, %.4g]", json_number_value(m), json_number_value(lo), json_number_value(hi));
    else
        snprintf(buf, len, "%.4g", json_number_value(m));
    return buf;
}

/* ID [--at STEP] [--csv] */
static int parse_id_opts(const cli_ctx *ctx, const char *cmd, int argc, char **argv, int allow_at, long long *id,
                         const char **at, int *csv) {
    const char *ids = NULL;
    *at = NULL;
    *csv = 0;
    for (int i = 0; i < argc; i++) {
        const char *v;
        int r;
        if (allow_at && (r = cli_opt_value(argc, argv, &i, "--at", &v)) != 0) {
            if (r < 0 || !*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 8)
                return cli_usage(ctx, "experiments ", "--at wants a step number");
            *at = v;
        } else if (!strcmp(argv[i], "--csv")) {
            *csv = 1;
        } else if (!ids && argv[i][0] != '-') {
            ids = argv[i];
        } else {
            return cli_usage(ctx, "experiments ", "experiments %s: unexpected '%s'", cmd, argv[i]);
        }
    }
    if (!ids || cli_parse_id(ids, id) < 0)
        return cli_usage(ctx, "experiments ", "experiments %s takes an experiment id", cmd);
    return 0;
}

int cmd_questions_head_spread(const cli_ctx *ctx, int argc, char **argv) {
    long long id;
    const char *at;
    int csv, rc = parse_id_opts(ctx, "head-spread", argc, argv, 1, &id, &at, &csv);
    if (rc) return rc;
    char path[128];
    snprintf(path, sizeof path, "/api/experiments/%lld/head-spread%s%s%s", id, csv ? ".csv" : "", at ? "?at=" : "",
             at ? at : "");
    if (csv) return fetch_raw(ctx, path);
    json_t *ans;
    int code = httpc_json(ctx, "GET", path, NULL, &ans);
    if (code) return code;
    json_t *hs = cli_unwrap(ans, "head_spread");
    if (ctx->json) {
        cli_print_json(ctx, ans);
        json_decref(ans);
        return CLI_EXIT_OK;
    }
    long long at_step = json_integer_value(json_object_get(hs, "at_step"));
    fprintf(ctx->out,
            "experiment %lld: spread across heads at step %lld and at the end, mean [95%% bootstrap interval] over "
            "replicates\n",
            id, at_step);
    static const char *const head[] = {"VARIANT", "METRIC", "N", "AT STEP", "END", "CHANGE", "P"};
    table *t = table_new(7, head);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(hs, "variants"), i, v) {
        const char *mk;
        json_t *m;
        json_object_foreach(json_object_get(v, "metrics"), mk, m) {
            char n[16], a[80], e[80], c[80], p[32];
            const json_t *pv = json_object_get(json_object_get(m, "change"), "p");
            p[0] = 0;
            if (json_is_number(pv)) snprintf(p, sizeof p, "%.3g", json_number_value(pv));
            const char *cells[7] = {json_string_value(json_object_get(v, "name")),
                                    mk,
                                    cli_cell(json_object_get(json_object_get(m, "end"), "n"), n, sizeof n),
                                    summary_text(json_object_get(m, "at"), a, sizeof a),
                                    summary_text(json_object_get(m, "end"), e, sizeof e),
                                    summary_text(json_object_get(m, "change"), c, sizeof c),
                                    p};
            if (t) table_add_row(t, cells);
        }
    }
    if (t) table_print(t, ctx->out);
    table_free(t);
    fputc('\n', ctx->out);
    json_array_foreach(json_object_get(hs, "answer"), i, v) {
        char *line = table_safe_dup(json_string_value(v));
        fprintf(ctx->out, "%s\n", line ? line : "");
        free(line);
    }
    json_decref(ans);
    return CLI_EXIT_OK;
}

int cmd_questions_accuracy(const cli_ctx *ctx, int argc, char **argv) {
    long long id;
    const char *at;
    int csv, rc = parse_id_opts(ctx, "accuracy", argc, argv, 0, &id, &at, &csv);
    if (rc) return rc;
    char path[128];
    snprintf(path, sizeof path, "/api/experiments/%lld/accuracy%s", id, csv ? ".csv" : "");
    if (csv) return fetch_raw(ctx, path);
    json_t *ans;
    int code = httpc_json(ctx, "GET", path, NULL, &ans);
    if (code) return code;
    json_t *acc = cli_unwrap(ans, "accuracy");
    if (ctx->json) {
        cli_print_json(ctx, ans);
        json_decref(ans);
        return CLI_EXIT_OK;
    }
    fprintf(ctx->out,
            "experiment %lld: exact-match accuracy on the answers at each run's last evaluation, mean [95%% "
            "bootstrap interval] over replicates\n",
            id);
    static const char *const head[] = {"VARIANT", "ATTENTION", "TASK", "KEY", "N", "ACCURACY"};
    table *t = table_new(6, head);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(acc, "variants"), i, v) {
        size_t k;
        json_t *key;
        json_array_foreach(json_object_get(v, "keys"), k, key) {
            const json_t *s = json_object_get(json_object_get(v, "acc"), json_string_value(key));
            char n[16], a[80];
            const char *cells[6] = {json_string_value(json_object_get(v, "name")),
                                    json_string_value(json_object_get(v, "attention")),
                                    json_string_value(json_object_get(json_object_get(v, "task"), "kind")),
                                    json_string_value(key),
                                    cli_cell(json_object_get(s, "n"), n, sizeof n),
                                    summary_text(s, a, sizeof a)};
            if (t) table_add_row(t, cells);
        }
    }
    if (t) table_print(t, ctx->out);
    table_free(t);
    json_decref(ans);
    return CLI_EXIT_OK;
}

static int task_kinds(const cli_ctx *ctx) {
    json_t *ans;
    int code = httpc_json(ctx, "GET", "/api/task-kinds", NULL, &ans);
    if (code) return code;
    if (ctx->json) {
        cli_print_json(ctx, ans);
        json_decref(ans);
        return CLI_EXIT_OK;
    }
    static const char *const head[] = {"KIND", "PARAMETER", "DEFAULT", "MIN", "MAX", "MEANING"};
    table *t = table_new(6, head);
    size_t i, j;
    json_t *k, *p;
    json_array_foreach(json_object_get(ans, "fields"), j, p) {
        char d[32], lo[32], hi[32];
        const char *cells[6] = {"(all)",
                                json_string_value(json_object_get(p, "name")),
                                cli_cell(json_object_get(p, "default"), d, sizeof d),
                                cli_cell(json_object_get(p, "min"), lo, sizeof lo),
                                cli_cell(json_object_get(p, "max"), hi, sizeof hi),
                                json_string_value(json_object_get(p, "help"))};
        if (t) table_add_row(t, cells);
    }
    json_array_foreach(json_object_get(ans, "kinds"), i, k) {
        const char *name = json_string_value(json_object_get(k, "name"));
        json_array_foreach(json_object_get(k, "params"), j, p) {
            char d[32], lo[32], hi[32];
            const char *cells[6] = {name,
                                    json_string_value(json_object_get(p, "name")),
                                    cli_cell(json_object_get(p, "default"), d, sizeof d),
                                    cli_cell(json_object_get(p, "min"), lo, sizeof lo),
                                    cli_cell(json_object_get(p, "max"), hi, sizeof hi),
                                    json_string_value(json_object_get(p, "help"))};
            if (t) table_add_row(t, cells);
        }
        if (json_is_true(json_object_get(k, "has_offsets"))) {
            char d[96] = "";
            size_t o;
            json_t *x;
            json_array_foreach(json_object_get(k, "default_offsets"), o, x)
                snprintf(d + strlen(d), sizeof d - strlen(d), "%s%lld", o ? "," : "", (long long)json_integer_value(x));
            const char *cells[6] = {name, "--offsets", d,
                                    "1",  "1024",      "the offsets k (1-16 distinct, each <= len_min)"};
            if (t) table_add_row(t, cells);
        }
    }
    if (t) table_print(t, ctx->out);
    table_free(t);
    json_decref(ans);
    return CLI_EXIT_OK;
}

static int create_task(const cli_ctx *ctx, int argc, char **argv) {
    const char *name = NULL;
    json_t *body = json_object(), *params = json_object();
    int code = body && params ? 0 : cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
    for (int i = 0; !code && i < argc; i++) {
        const char *v;
        int r;
        if ((r = cli_opt_value(argc, argv, &i, "--kind", &v)) != 0) {
            if (r < 0)
                code = cli_usage(ctx, "corpora ", "--kind wants a task kind ('attnlab corpora task-kinds')");
            else
                json_object_set_new(body, "kind", json_string(v));
        } else if ((r = cli_opt_value(argc, argv, &i, "--set", &v)) != 0) {
            char key[64];
            const char *val;
            if (r < 0 || cli_split_kv(v, key, sizeof key, &val) < 0 || !*val ||
                strspn(val, "0123456789") != strlen(val) || strlen(val) > 15) {
                code = cli_usage(ctx, "corpora ", "--set wants KEY=INTEGER, not '%s'", r < 0 ? "" : v);
            } else {
                /* the common fields at the top, the kind's own under params */
                int common =
                    !strcmp(key, "vocab") || !strcmp(key, "seq_len") || !strcmp(key, "windows") || !strcmp(key, "seed");
                json_object_set_new(common ? body : params, key, json_integer(atoll(val)));
            }
        } else if ((r = cli_opt_value(argc, argv, &i, "--offsets", &v)) != 0) {
            json_t *offs = json_array();
            const char *p = r < 0 ? "" : v;
            while (offs && *p) {
                char *end;
                long x = strtol(p, &end, 10);
                if (end == p) break;
                json_array_append_new(offs, json_integer(x));
                p = *end == ',' ? end + 1 : end;
                if (*end && *end != ',') break;
            }
            if (r < 0 || !offs || *p || !json_array_size(offs)) {
                json_decref(offs);
                code = cli_usage(ctx, "corpora ", "--offsets wants a list like 1,2,4,8");
            } else {
                json_object_set_new(body, "offsets", offs);
            }
        } else if (!name && argv[i][0] != '-') {
            name = argv[i];
        } else {
            code = cli_usage(ctx, "corpora ", "corpora create-task: unexpected '%s'", argv[i]);
        }
    }
    if (!code && !name) code = cli_usage(ctx, "corpora ", "corpora create-task takes a NAME");
    if (!code && !json_object_get(body, "kind")) code = cli_usage(ctx, "corpora ", "corpora create-task needs --kind");
    if (code) {
        json_decref(body);
        json_decref(params);
        return code;
    }
    json_object_set_new(body, "name", json_string(name));
    if (json_object_size(params)) json_object_set(body, "params", params);
    json_decref(params);
    json_t *ans;
    code = httpc_json(ctx, "POST", "/api/task-corpora", body, &ans);
    json_decref(body);
    if (code) return code;
    if (ctx->json) {
        cli_print_json(ctx, ans);
    } else {
        json_t *c = cli_unwrap(ans, "corpus");
        char sn[256], ss[512];
        fprintf(ctx->out, "corpus %s: %s (%lld tokens)\n",
                table_safe(json_string_value(json_object_get(c, "name")), sn, sizeof sn),
                table_safe(json_string_value(json_object_get(c, "source")), ss, sizeof ss),
                (long long)json_integer_value(json_object_get(c, "tokens")));
    }
    json_decref(ans);
    return CLI_EXIT_OK;
}

int cmd_questions_corpora(const cli_ctx *ctx, const char *sub, int argc, char **argv) {
    if (!strcmp(sub, "task-kinds")) {
        if (argc > 0) return cli_usage(ctx, "corpora ", "corpora task-kinds takes no arguments");
        return task_kinds(ctx);
    }
    return create_task(ctx, argc, argv);
}
