#include "cmd_probes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "httpc.h"
#include "table.h"

const char cmd_probe_help[] =
    "usage: attnlab probe KIND [--param NAME=VALUE ...] [--run ID] [--format table|csv|json]\n"
    "                          [--table NAME]\n"
    "\n"
    "Runs a probe on the server (or gets the stored result of the same kind and parameters) and\n"
    "prints its summary and tables: aligned columns by default, CSV with --format csv (one table\n"
    "with --table NAME, else every table after a '# NAME' line), the whole result as JSON with\n"
    "--format json or --json. List values are comma-separated: --param offsets=0,16,256.\n"
    "The probes that read a trained model take --run ID: attention_map, topk_prediction and\n"
    "sparse_attention (recall@k, attention mass and the loss with each sparse predictor next to\n"
    "dense; --param window=N reads the run's validation window N, --param ids=1,5,9 token ids, and a\n"
    "run on a task corpus, which has no text tokenizer, reads validation window 0 by default).\n"
    "'attnlab probes kinds' lists the kinds; 'attnlab probes kinds KIND' their parameters.\n"
    "\n"
    "Exit status: 0 ok, 2 usage, 3 server unreachable or timeout, 4 refused (e.g. a parameter out\n"
    "of bounds: the message names it), 5 server error.\n";

const char cmd_probes_help[] =
    "usage: attnlab probes list [--kind K] [--limit N] [--offset N]\n"
    "       attnlab probes show ID [--format table|csv|json] [--table NAME]\n"
    "       attnlab probes kinds [KIND]\n"
    "\n"
    "list     stored probe results, newest first\n"
    "show     one stored result, printed as by 'attnlab probe'\n"
    "kinds    the probe kinds; with KIND, its parameters with defaults and bounds\n"
    "\n"
    "Exit status: 0 ok, 2 usage, 3 server unreachable or timeout, 4 refused, 5 server error.\n";

/* {"probe":{"id",...,"result":{tables...}}} down to the result; older shapes without the wrapper
 * or with the result at the top level work too. */
static const json_t *unwrap(const json_t *r) {
    const json_t *p = cli_unwrap((json_t *)r, "probe");
    const json_t *inner = json_object_get(p, "result");
    return json_is_object(inner) ? inner : p;
}

static void cell_text(const json_t *v, char *buf, size_t len) {
    if (json_is_real(v))
        snprintf(buf, len, "%.6g", json_real_value(v));
    else
        cli_cell(v, buf, len);
}

static table *build_table(const json_t *tj) {
    const json_t *cols = json_object_get(tj, "columns"), *rows = json_object_get(tj, "rows");
    size_t nc = json_array_size(cols);
    if (!nc) return NULL;
    const char **head = calloc(nc, sizeof *head);
    const char **cells = calloc(nc, sizeof *cells);
    char *buf = malloc(nc * 64);
    table *t = NULL;
    if (head && cells && buf) {
        for (size_t c = 0; c < nc; c++) {
            const json_t *h = json_array_get(cols, c);
            head[c] = json_is_string(h) ? json_string_value(h) : json_string_value(json_object_get(h, "name"));
        }
        t = table_new((int)nc, head);
        size_t r;
        json_t *row;
        json_array_foreach(rows, r, row) {
            if (!t) break;
            for (size_t c = 0; c < nc; c++) {
                cell_text(json_array_get(row, c), buf + c * 64, 64);
                cells[c] = buf + c * 64;
            }
            if (table_add_row(t, cells) < 0) {
                table_free(t);
                t = NULL;
            }
        }
    }
    free(head);
    free(cells);
    free(buf);
    return t;
}

int cmd_probes_print_result(const cli_ctx *ctx, const json_t *result, const char *format, const char *only) {
    const json_t *res = unwrap(result);
    const json_t *tables = json_object_get(res, "tables");
    if (!json_is_array(tables)) return cli_fail(ctx, CLI_EXIT_SERVER, "the probe result has no tables");
    int csv = !strcmp(format, "csv");
    if (only) {
        int found = 0;
        size_t i;
        json_t *tj;
        json_array_foreach(tables, i, tj) {
            const char *n = json_string_value(json_object_get(tj, "name"));
            if (n && !strcmp(n, only)) found = 1;
        }
        if (!found) return cli_usage(ctx, "probe ", "the result has no table '%s'", only);
    }
    if (!csv && !only) {
        const char *kind = json_string_value(json_object_get(res, "kind"));
        char id[32];
        cli_cell(json_object_get(cli_unwrap((json_t *)result, "probe"), "id"), id, sizeof id);
        char sk[128];
        if (kind)
            fprintf(ctx->out, "probe %s%s%s%s\n", table_safe(kind, sk, sizeof sk), *id ? " (result " : "", id,
                    *id ? ")" : "");
        const json_t *summary = json_object_get(res, "summary");
        if (json_is_object(summary) && json_object_size(summary)) {
            static const char *const head[] = {"summary", ""};
            table *t = table_new(2, head);
            const char *k;
            json_t *v;
            json_object_foreach((json_t *)summary, k, v) {
                char b[256];
                cell_text(v, b, sizeof b);
                const char *cells[2] = {k, b};
                if (t) table_add_row(t, cells);
            }
            if (t) {
                fputc('\n', ctx->out);
                table_print(t, ctx->out);
            }
            table_free(t);
        }
    }
    size_t i, shown = 0;
    json_t *tj;
    json_array_foreach(tables, i, tj) {
        const char *raw_name = json_string_value(json_object_get(tj, "name"));
        if (only && (!raw_name || strcmp(raw_name, only))) continue;
        char safe_name[256];
        const char *name = raw_name ? table_safe(raw_name, safe_name, sizeof safe_name) : NULL;
        table *t = build_table(tj);
        if (!t) continue;
        if (csv) {
            if (!only && json_array_size(tables) > 1)
                fprintf(ctx->out, "%s# %s\n", shown ? "\n" : "", name ? name : "");
            table_print_csv(t, ctx->out);
        } else {
            if (!only || shown) fputc('\n', ctx->out);
            if (!only) fprintf(ctx->out, "== %s ==\n", name ? name : "table");
            table_print(t, ctx->out);
        }
        shown++;
        table_free(t);
    }
    return CLI_EXIT_OK;
}

static int is_list_type(const char *t) { return t && (strstr(t, "list") || strstr(t, "array") || strstr(t, "vector")); }

json_t *cmd_probes_param_value(const json_t *schema, const char *text, char *msg, size_t msglen) {
    const char *type = json_string_value(json_object_get(schema, "type"));
    if (type && (!strcmp(type, "text") || !strcmp(type, "choice") || !strcmp(type, "string"))) return json_string(text);
    if (*text == '[' || !strcmp(text, "null")) {
        json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
        if (j) return j;
    }
    if (is_list_type(type) || (!type && strchr(text, ','))) {
        json_t *a = json_array();
        const char *p = text;
        while (a && *p) {
            size_t n = strcspn(p, ",");
            char item[64];
            if (n == 0 || n >= sizeof item) {
                snprintf(msg, msglen, "bad list '%s'", text);
                json_decref(a);
                return NULL;
            }
            memcpy(item, p, n);
            item[n] = 0;
            json_t *v = cli_value_guess(item);
            if (!json_is_number(v)) {
                if (!type) {
                    /* Not a list of numbers after all: send it as text and let the server judge. */
                    json_decref(v);
                    json_decref(a);
                    return json_string(text);
                }
                snprintf(msg, msglen, "'%s' is not a number", item);
                json_decref(v);
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, v);
            p += n;
            if (*p == ',') p++;
        }
        return a;
    }
    json_t *v = cli_value_guess(text);
    if (type && (!strcmp(type, "int") || !strcmp(type, "integer") || !strcmp(type, "number")) && !json_is_number(v)) {
        snprintf(msg, msglen, "'%s' is not a number", text);
        json_decref(v);
        return NULL;
    }
    return v;
}

/* The probe-kinds answer as a list of kind objects. */
static json_t *kinds_list(json_t *answer) {
    static const char *const keys[] = {"kinds", "probe_kinds", "items", NULL};
    json_t *l = cli_list_items(answer, keys);
    if (l) return l;
    return NULL;
}

static json_t *find_kind(json_t *list, const char *name) {
    size_t i;
    json_t *k;
    json_array_foreach(list, i, k) {
        const char *n = json_string_value(json_object_get(k, "name"));
        if (!n) n = json_string_value(json_object_get(k, "kind"));
        if (n && !strcmp(n, name)) return k;
    }
    return NULL;
}

static json_t *find_param(json_t *kind, const char *name) {
    json_t *params = json_object_get(kind, "params");
    if (!params) params = json_object_get(kind, "parameters");
    if (json_is_object(params)) return json_object_get(params, name);
    size_t i;
    json_t *p;
    json_array_foreach(params, i, p) {
        const char *n = json_string_value(json_object_get(p, "name"));
        if (n && !strcmp(n, name)) return p;
    }
    return NULL;
}

static int parse_format(const cli_ctx *ctx, const char *cmd, const char *v, const char **format) {
    if (strcmp(v, "table") && strcmp(v, "csv") && strcmp(v, "json"))
        return cli_usage(ctx, cmd, "--format is table, csv or json");
    *format = v;
    return CLI_EXIT_OK;
}

int cmd_probe(const cli_ctx *ctx, int argc, char **argv) {
    const char *kind = NULL, *format = "table", *only = NULL, *v;
    long long run_id = 0;
    json_t *params = json_object(), *kinds_answer = NULL, *kinds = NULL;
    int code = CLI_EXIT_OK;
    if (!params) return cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
    for (int i = 0; i < argc; i++)
        if (cli_is_help(argv[i])) {
            fputs(cmd_probe_help, ctx->out);
            json_decref(params);
            return CLI_EXIT_OK;
        }
    for (int i = 0; i < argc && !code; i++) {
        int r;
        if ((r = cli_opt_value(argc, argv, &i, "--param", &v)) != 0 ||
            (r = cli_opt_value(argc, argv, &i, "-p", &v)) != 0) {
            char key[64], msg[256];
            const char *val;
            if (r < 0 || cli_split_kv(v, key, sizeof key, &val) < 0) {
                code = cli_usage(ctx, "probe ", "--param wants NAME=VALUE");
                break;
            }
            if (!kind) {
                code = cli_usage(ctx, "probe ", "give the probe KIND before its parameters");
                break;
            }
            /* The kinds' schemas type the values; without them (an older server) we guess. */
            if (!kinds_answer) {
                cli_ctx quiet = *ctx;
                httpc_response resp;
                char m[256];
                if (httpc_request(&quiet, "GET", "/api/probe-kinds", NULL, &resp, m, sizeof m) == CLI_EXIT_OK) {
                    if (resp.status == 200 && resp.body) kinds_answer = json_loads(resp.body, 0, NULL);
                    httpc_response_free(&resp);
                }
                if (!kinds_answer) kinds_answer = json_null();
                kinds = kinds_list(kinds_answer);
            }
            json_t *schema = find_param(find_kind(kinds, kind), key);
            json_t *jv = cmd_probes_param_value(schema, val, msg, sizeof msg);
            if (!jv)
                code = cli_usage(ctx, "probe ", "--param %s: %s", key, msg);
            else
                json_object_set_new(params, key, jv);
        } else if ((r = cli_opt_value(argc, argv, &i, "--format", &v)) != 0) {
            code = r < 0 ? cli_usage(ctx, "probe ", "--format wants a value") : parse_format(ctx, "probe ", v, &format);
        } else if ((r = cli_opt_value(argc, argv, &i, "--table", &v)) != 0) {
            if (r < 0) code = cli_usage(ctx, "probe ", "--table wants a name");
            only = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--run", &v)) != 0) {
            if (r < 0 || cli_parse_id(v, &run_id) < 0) code = cli_usage(ctx, "probe ", "--run wants a run id");
        } else if (argv[i][0] == '-' && argv[i][1]) {
            code = cli_usage(ctx, "probe ", "unknown option '%s'", argv[i]);
        } else if (!kind) {
            kind = argv[i];
        } else {
            code = cli_usage(ctx, "probe ", "one probe kind, please ('%s' is extra)", argv[i]);
        }
    }
    if (!code && !kind) code = cli_usage(ctx, "probe ", "which probe? 'attnlab probes kinds' lists them");
    if (!code) {
        json_t *body = json_pack("{s:s, s:O}", "kind", kind, "params", params), *result = NULL;
        if (body && run_id) json_object_set_new(body, "run_id", json_integer(run_id));
        if (!body)
            code = cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
        else if ((code = httpc_json(ctx, "POST", "/api/probes", body, &result)) == CLI_EXIT_OK) {
            if (ctx->json || !strcmp(format, "json"))
                cli_print_json(ctx, result);
            else
                code = cmd_probes_print_result(ctx, result, format, only);
        }
        json_decref(body);
        json_decref(result);
    }
    json_decref(params);
    json_decref(kinds_answer);
    return code;
}

static int probes_list(const cli_ctx *ctx, int argc, char **argv) {
    static const char *const opts[] = {"--kind", "--limit", "--offset", NULL};
    static const char *const keys[] = {"probes", "results", "items", NULL};
    json_t *answer, *list;
    int code = fetch_list(ctx, "probes list", argc, argv, opts, "/api/probes", keys, &answer, &list);
    if (!code && list) {
        static const char *const head[] = {"ID", "KIND", "PARAMS", "CREATED"};
        table *t = table_new(4, head);
        size_t i;
        json_t *p;
        json_array_foreach(list, i, p) {
            char id[32], params[512] = "", created[32];
            json_t *pj = json_object_get(p, "params");
            const char *k;
            json_t *v;
            size_t o = 0;
            json_object_foreach(pj, k, v) {
                char b[200];
                cli_cell(v, b, sizeof b);
                if (o < sizeof params)
                    o += (size_t)snprintf(params + o, sizeof params - o, "%s%s=%s", o ? " " : "", k, b);
            }
            const char *cells[4] = {cli_cell(json_object_get(p, "id"), id, sizeof id),
                                    json_string_value(json_object_get(p, "kind")), params,
                                    cli_time(json_object_get(p, "created_at"), created, sizeof created)};
            if (t) table_add_row(t, cells);
        }
        if (t) table_print(t, ctx->out);
        table_free(t);
    }
    json_decref(answer);
    return code;
}

static int probes_show(const cli_ctx *ctx, int argc, char **argv) {
    const char *id_s = NULL, *format = "table", *only = NULL, *v;
    for (int i = 0; i < argc; i++) {
        int r, code;
        if ((r = cli_opt_value(argc, argv, &i, "--format", &v)) != 0) {
            if (r < 0) return cli_usage(ctx, "probes ", "--format wants a value");
            if ((code = parse_format(ctx, "probes ", v, &format))) return code;
        } else if ((r = cli_opt_value(argc, argv, &i, "--table", &v)) != 0) {
            if (r < 0) return cli_usage(ctx, "probes ", "--table wants a name");
            only = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage(ctx, "probes ", "unknown option '%s'", argv[i]);
        } else if (!id_s) {
            id_s = argv[i];
        } else {
            return cli_usage(ctx, "probes ", "probes show takes one id");
        }
    }
    long long id;
    if (!id_s || cli_parse_id(id_s, &id) < 0) return cli_usage(ctx, "probes ", "probes show needs a result id");
    char path[64];
    snprintf(path, sizeof path, "/api/probes/%lld", id);
    json_t *result;
    int code = httpc_json(ctx, "GET", path, NULL, &result);
    if (code) return code;
    if (ctx->json || !strcmp(format, "json"))
        cli_print_json(ctx, result);
    else
        code = cmd_probes_print_result(ctx, result, format, only);
    json_decref(result);
    return code;
}

static int probes_kinds(const cli_ctx *ctx, int argc, char **argv) {
    if (argc > 1) return cli_usage(ctx, "probes ", "probes kinds takes at most one kind");
    json_t *answer;
    int code = httpc_json(ctx, "GET", "/api/probe-kinds", NULL, &answer);
    if (code) return code;
    json_t *list = kinds_list(answer);
    if (ctx->json) {
        cli_print_json(ctx, argc ? find_kind(list, argv[0]) ? find_kind(list, argv[0]) : answer : answer);
    } else if (!list) {
        code = cli_fail(ctx, CLI_EXIT_SERVER, "GET /api/probe-kinds: no list in the answer");
    } else if (argc == 0) {
        static const char *const head[] = {"KIND", "MODEL", "DESCRIPTION"};
        table *t = table_new(3, head);
        size_t i;
        json_t *k;
        json_array_foreach(list, i, k) {
            const char *n = json_string_value(json_object_get(k, "name"));
            json_t *nm = json_object_get(k, "needs_model");
            const char *cells[3] = {n ? n : json_string_value(json_object_get(k, "kind")),
                                    json_is_true(nm) || (json_is_integer(nm) && json_integer_value(nm)) ? "yes" : "",
                                    json_string_value(json_object_get(k, "description"))};
            if (t) table_add_row(t, cells);
        }
        if (t) table_print(t, ctx->out);
        table_free(t);
    } else {
        json_t *k = find_kind(list, argv[0]);
        if (!k) {
            code = cli_fail(ctx, CLI_EXIT_REFUSED, "no probe kind '%s' ('attnlab probes kinds' lists them)", argv[0]);
        } else {
            const char *d = json_string_value(json_object_get(k, "description"));
            char *sd = table_safe_dup(d);
            fprintf(ctx->out, "%s%s%s\n\n", argv[0], d ? ": " : "", d && sd ? sd : "");
            free(sd);
            static const char *const head[] = {"PARAM", "TYPE", "DEFAULT", "MIN", "MAX/CHOICES", "HELP"};
            table *t = table_new(6, head);
            json_t *params = json_object_get(k, "params");
            if (!params) params = json_object_get(k, "parameters");
            size_t i;
            json_t *p;
            const char *pname;
            if (json_is_object(params)) {
                json_object_foreach(params, pname, p) {
                    char b[4][256];
                    const char *cells[6] = {pname,
                                            json_string_value(json_object_get(p, "type")),
                                            cli_cell(json_object_get(p, "default"), b[0], sizeof b[0]),
                                            cli_cell(json_object_get(p, "min"), b[1], sizeof b[1]),
                                            cli_cell(json_object_get(p, "max"), b[2], sizeof b[2]),
                                            json_string_value(json_object_get(p, "help"))};
                    if (t) table_add_row(t, cells);
                }
            } else {
                json_array_foreach(params, i, p) {
                    char b[4][256];
                    json_t *ch = json_object_get(p, "choices");
                    const char *cells[6] = {json_string_value(json_object_get(p, "name")),
                                            json_string_value(json_object_get(p, "type")),
                                            cli_cell(json_object_get(p, "default"), b[0], sizeof b[0]),
                                            cli_cell(json_object_get(p, "min"), b[1], sizeof b[1]),
                                            ch ? cli_cell(ch, b[2], sizeof b[2])
                                               : cli_cell(json_object_get(p, "max"), b[2], sizeof b[2]),
                                            json_string_value(json_object_get(p, "help"))};
                    if (t) table_add_row(t, cells);
                }
            }
            if (t) table_print(t, ctx->out);
            table_free(t);
        }
    }
    json_decref(answer);
    return code;
}

int cmd_probes(const cli_ctx *ctx, int argc, char **argv) {
    if (argc < 1 || cli_is_help(argv[0])) {
        fputs(cmd_probes_help, argc < 1 ? ctx->err : ctx->out);
        return argc < 1 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            fputs(cmd_probes_help, ctx->out);
            return CLI_EXIT_OK;
        }
    const char *sub = argv[0];
    if (!strcmp(sub, "list")) return probes_list(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "show")) return probes_show(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "kinds")) return probes_kinds(ctx, argc - 1, argv + 1);
    return cli_usage(ctx, "probes ", "unknown probes command '%s'", sub);
}
