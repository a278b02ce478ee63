#include "cmd_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "httpc.h"

const char cmd_metrics_help[] =
    "usage: attnlab metrics ID [--keys loss,tau.*,...] [--format table|csv|json] [--max-points N]\n"
    "                          [--since-step S]\n"
    "\n"
    "Prints run ID's metric series, one row per step and one column per key. --keys takes names or\n"
    "prefixes ending in '*' (default: all); --max-points N asks the server to downsample to about N\n"
    "points per series (each bucket keeps its min and max). --format csv is for spreadsheets and\n"
    "plotting; json (or --json) is the server's answer unchanged. Keys: loss, val_loss, lr,\n"
    "grad_norm, tokens_per_s, tau.L.H and entropy.L.H (layer L, head H).\n"
    "\n"
    "Exit status: 0 ok, 2 usage, 3 server unreachable or timeout, 4 refused, 5 server error.\n";

typedef struct {
    const char *key;
    double *steps, *values;
    size_t n;
} series;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int point_of(const json_t *p, double *step, double *value) {
    json_t *s = NULL, *v = NULL;
    if (json_is_array(p) && json_array_size(p) >= 2)
        s = json_array_get(p, 0), v = json_array_get(p, 1);
    else if (json_is_object(p)) {
        s = json_object_get(p, "step");
        v = json_object_get(p, "value");
        if (!v) v = json_object_get(p, "v");
    }
    if (!json_is_number(s)) return -1;
    *step = json_number_value(s);
    *value = json_is_number(v) ? json_number_value(v) : NAN;
    return 0;
}

/* Fills one series from any accepted shape; -1 when it is none of them or out of memory. */
static int read_series(const char *key, const json_t *j, series *out) {
    memset(out, 0, sizeof *out);
    out->key = key;
    const json_t *steps = NULL, *values = NULL;
    if (json_is_object(j)) {
        steps = json_object_get(j, "steps");
        if (!steps) steps = json_object_get(j, "step");
        values = json_object_get(j, "values");
        if (!values) values = json_object_get(j, "value");
        if (!json_is_array(steps) || !json_is_array(values)) {
            const json_t *pts = json_object_get(j, "points");
            if (!json_is_array(pts)) return -1;
            j = pts;
            steps = values = NULL;
        }
    } else if (!json_is_array(j)) {
        return -1;
    }
    size_t n = steps ? json_array_size(steps) : json_array_size(j);
    if (values && json_array_size(values) < n) n = json_array_size(values);
    out->steps = malloc((n ? n : 1) * sizeof *out->steps);
    out->values = malloc((n ? n : 1) * sizeof *out->values);
    if (!out->steps || !out->values) return -1;
    for (size_t i = 0; i < n; i++) {
        double s, v;
        if (steps) {
            json_t *sj = json_array_get(steps, i), *vj = json_array_get(values, i);
            if (!json_is_number(sj)) continue;
            s = json_number_value(sj);
            v = json_is_number(vj) ? json_number_value(vj) : NAN;
        } else if (point_of(json_array_get(j, i), &s, &v) < 0) {
            continue;
        }
        out->steps[out->n] = s;
        out->values[out->n++] = v;
    }
    return 0;
}

static void free_series(series *s, size_t n) {
    for (size_t i = 0; i < n; i++) free(s[i].steps), free(s[i].values);
    free(s);
}

table *cmd_metrics_table(const json_t *answer, char *msg, size_t msglen) {
    const json_t *c = json_object_get(answer, "series");
    if (!c) c = json_object_get(answer, "metrics");
    if (!c) c = answer;
    size_t cap = json_is_array(c) ? json_array_size(c) : json_object_size(c);
    series *ss = calloc(cap ? cap : 1, sizeof *ss);
    if (!ss) {
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    size_t ns = 0, total = 0;
    if (json_is_array(c)) {
        size_t i;
        json_t *e;
        json_array_foreach(c, i, e) {
            const char *k = json_string_value(json_object_get(e, "key"));
            if (!k) k = json_string_value(json_object_get(e, "name"));
            if (k && read_series(k, e, &ss[ns]) == 0)
                total += ss[ns++].n;
            else if (k)
                free(ss[ns].steps), free(ss[ns].values);
        }
    } else if (json_is_object(c)) {
        const char *k;
        json_t *e;
        json_object_foreach((json_t *)c, k, e) {
            if (read_series(k, e, &ss[ns]) == 0)
                total += ss[ns++].n;
            else
                free(ss[ns].steps), free(ss[ns].values);
        }
    }
    if (!ns) {
        free_series(ss, ns);
        snprintf(msg, msglen, "the answer holds no metric series");
        return NULL;
    }
    double *steps = malloc((total ? total : 1) * sizeof *steps);
    const char **head = calloc(ns + 1, sizeof *head);
    const char **cells = calloc(ns + 1, sizeof *cells);
    char *buf = malloc((ns + 1) * 32);
    table *t = NULL;
    if (!steps || !head || !cells || !buf) {
        snprintf(msg, msglen, "out of memory");
        goto out;
    }
    size_t m = 0;
    for (size_t i = 0; i < ns; i++)
        for (size_t k = 0; k < ss[i].n; k++) steps[m++] = ss[i].steps[k];
    qsort(steps, m, sizeof *steps, cmp_double);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (!u || steps[i] != steps[u - 1]) steps[u++] = steps[i];
    head[0] = "step";
    for (size_t i = 0; i < ns; i++) head[i + 1] = ss[i].key;
    if (!(t = table_new((int)ns + 1, head))) {
        snprintf(msg, msglen, "out of memory");
        goto out;
    }
    /* A cursor per series: each is sorted by step as the server sends it, so one pass suffices;
     * when it is not, the bsearch-free fallback below still finds the value. */
    size_t *cur = calloc(ns, sizeof *cur);
    if (!cur) {
        table_free(t);
        t = NULL;
        snprintf(msg, msglen, "out of memory");
        goto out;
    }
    for (size_t r = 0; r < u; r++) {
        snprintf(buf, 32, "%.0f", steps[r]);
        cells[0] = buf;
        for (size_t i = 0; i < ns; i++) {
            char *cell = buf + (i + 1) * 32;
            cell[0] = 0;
            series *s = &ss[i];
            double v = NAN;
            int found = 0;
            while (cur[i] < s->n && s->steps[cur[i]] < steps[r]) cur[i]++;
            /* Downsampled buckets may repeat a step: the last sample at a step wins. */
            while (cur[i] < s->n && s->steps[cur[i]] == steps[r]) v = s->values[cur[i]++], found = 1;
            if (!found)
                for (size_t k = 0; k < s->n; k++)
                    if (s->steps[k] == steps[r]) v = s->values[k], found = 1;
            if (found && isfinite(v))
                snprintf(cell, 32, "%.6g", v);
            else if (found)
                snprintf(cell, 32, "%s", isnan(v) ? "" : v > 0 ? "inf" : "-inf");
            cells[i + 1] = cell;
        }
        if (table_add_row(t, cells) < 0) {
            table_free(t);
            t = NULL;
            snprintf(msg, msglen, "out of memory");
            break;
        }
    }
    free(cur);
out:
    free(steps);
    free(head);
    free(cells);
    free(buf);
    free_series(ss, ns);
    return t;
}

int cmd_metrics(const cli_ctx *ctx, int argc, char **argv) {
    const char *id_s = NULL, *keys = NULL, *format = "table", *max_points = NULL, *since = NULL, *v;
    for (int i = 0; i < argc; i++) {
        int r;
        if (cli_is_help(argv[i])) {
            fputs(cmd_metrics_help, ctx->out);
            return CLI_EXIT_OK;
        } else if ((r = cli_opt_value(argc, argv, &i, "--keys", &v)) != 0) {
            if (r < 0) return cli_usage(ctx, "metrics ", "--keys wants a list");
            keys = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--format", &v)) != 0) {
            if (r < 0 || (strcmp(v, "table") && strcmp(v, "csv") && strcmp(v, "json")))
                return cli_usage(ctx, "metrics ", "--format is table, csv or json");
            format = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--max-points", &v)) != 0) {
            long long n;
            if (r < 0 || cli_parse_id(v, &n) < 0)
                return cli_usage(ctx, "metrics ", "--max-points wants a positive integer");
            max_points = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--since-step", &v)) != 0) {
            long long n;
            if (r < 0 || (strcmp(v, "0") && cli_parse_id(v, &n) < 0))
                return cli_usage(ctx, "metrics ", "--since-step wants a step number");
            since = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage(ctx, "metrics ", "unknown option '%s'", argv[i]);
        } else if (!id_s) {
            id_s = argv[i];
        } else {
            return cli_usage(ctx, "metrics ", "one run id, please ('%s' is extra)", argv[i]);
        }
    }
    long long id;
    if (!id_s) return cli_usage(ctx, "metrics ", "which run? give its id");
    if (cli_parse_id(id_s, &id) < 0) return cli_usage(ctx, "metrics ", "'%s' is not a run id", id_s);
    char path[1200];
    int n = snprintf(path, sizeof path, "/api/runs/%lld/metrics", id);
    char sep = '?';
    if (keys) {
        char *e = httpc_escape(keys);
        if (!e) return cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
        n += snprintf(path + n, sizeof path - (size_t)n, "%ckeys=%.1000s", sep, e);
        free(e);
        sep = '&';
    }
    if (max_points && n < (int)sizeof path)
        n += snprintf(path + n, sizeof path - (size_t)n, "%cmax_points=%s", sep, max_points), sep = '&';
    if (since && n < (int)sizeof path) n += snprintf(path + n, sizeof path - (size_t)n, "%csince_step=%s", sep, since);
    json_t *answer;
    int code = httpc_json(ctx, "GET", path, NULL, &answer);
    if (code) return code;
    if (ctx->json || !strcmp(format, "json")) {
        cli_print_json(ctx, answer);
    } else {
        char msg[256];
        table *t = cmd_metrics_table(answer, msg, sizeof msg);
        if (!t)
            code = cli_fail(ctx, CLI_EXIT_SERVER, "GET %s: %s", path, msg);
        else if (!strcmp(format, "csv"))
            table_print_csv(t, ctx->out);
        else
            table_print(t, ctx->out);
        table_free(t);
    }
    json_decref(answer);
    return code;
}
