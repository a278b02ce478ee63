/* The requests the commands share (fetch.h): filter options into a query, a list command's fetch,
 * a download printed as it came. */
#include "fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpc.h"

int fetch_query(const cli_ctx *ctx, const char *cmd, int argc, char **argv, const char *const *opts, char *query,
                size_t cap) {
    char group[32];
    snprintf(group, sizeof group, "%s", cmd);
    char *space = strchr(group, ' ');
    if (space) space[1] = 0; /* cli_usage wants "runs " for "runs list" */
    size_t q = 0;
    query[0] = 0;
    for (int i = 0; i < argc; i++) {
        int matched = 0;
        for (int k = 0; opts[k] && !matched; k++) {
            const char *v;
            int r = cli_opt_value(argc, argv, &i, opts[k], &v);
            if (r < 0) return cli_usage(ctx, group, "%s wants a value", opts[k]);
            if (r == 0) continue;
            matched = 1;
            char *e = httpc_escape(v);
            if (!e) return cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
            int w = snprintf(query + q, cap - q, "%c%s=%s", q ? '&' : '?', opts[k] + 2, e);
            free(e);
            if (w < 0 || (size_t)w >= cap - q) return cli_usage(ctx, group, "filters too long");
            q += (size_t)w;
        }
        if (!matched) return cli_usage(ctx, group, "%s: unknown argument '%s'", cmd, argv[i]);
    }
    return CLI_EXIT_OK;
}

int fetch_list(const cli_ctx *ctx, const char *cmd, int argc, char **argv, const char *const *opts, const char *base,
               const char *const *keys, json_t **answer, json_t **list) {
    *answer = NULL;
    *list = NULL;
    char query[2048], path[2200];
    int code = fetch_query(ctx, cmd, argc, argv, opts, query, sizeof query);
    if (code) return code;
    snprintf(path, sizeof path, "%s%s", base, query);
    json_t *body;
    code = httpc_json(ctx, "GET", path, NULL, &body);
    if (code) return code;
    if (ctx->json) {
        cli_print_json(ctx, body);
        *answer = body;
        return CLI_EXIT_OK;
    }
    json_t *items = cli_list_items(body, keys);
    if (!items) {
        json_decref(body);
        return cli_fail(ctx, CLI_EXIT_SERVER, "GET %s: no list in the answer", path);
    }
    *answer = body;
    *list = items;
    return CLI_EXIT_OK;
}

int fetch_raw(const cli_ctx *ctx, const char *path) {
    char msg[1024];
    httpc_response r;
    int code = httpc_request(ctx, "GET", path, NULL, &r, msg, sizeof msg);
    if (code) return cli_fail(ctx, code, "%s", msg);
    if ((code = httpc_status_exit(r.status)) != CLI_EXIT_OK) {
        httpc_error_line(r.status, r.body, msg, sizeof msg);
        code = cli_fail(ctx, code, "GET %s: %s", path, msg);
    } else if (r.len) {
        fwrite(r.body, 1, r.len, ctx->out);
    }
    httpc_response_free(&r);
    return code;
}
