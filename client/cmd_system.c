#include "cmd_system.h"

#include <string.h>

#include "cmd_questions.h"
#include "httpc.h"
#include "progress.h"
#include "table.h"

const char cmd_health_help[] =
    "usage: attnlab health\n"
    "\n"
    "Asks the server how it is: status, version, database, uptime. Exit status 0 when it answers\n"
    "\"ok\", 5 when it answers degraded, 3 when it cannot be reached.\n";

const char cmd_corpora_help[] =
    "usage: attnlab corpora list\n"
    "       attnlab corpora task-kinds\n"
    "       attnlab corpora create-task NAME --kind KIND [--set KEY=VALUE ...] [--offsets 1,2,4,8]\n"
    "\n"
    "list         the training corpora on the server: name, status, tokenizer, documents, tokens, the\n"
    "             number of runs that use it, and where its text comes from\n"
    "task-kinds   the synthetic task kinds (copy_offset, induction, associative_recall,\n"
    "             relative_order) with their parameters, defaults and bounds\n"
    "create-task  generates a task corpus (milliseconds; the same config again is a no-op):\n"
    "             --set vocab=128 --set seq_len=64 --set windows=4096 --set seed=1 or a kind's\n"
    "             parameter (--set len_min=8); --offsets for copy_offset. Runs on it log exact-match\n"
    "             accuracy on the answers at every evaluation (acc, acc.k4, acc.d8 ...)\n"
    "Exit status: 0 ok, 3 server unreachable or timeout, 4 refused, 5 server error.\n";

int cmd_health(const cli_ctx *ctx, int argc, char **argv) {
    if (argc > 0 && cli_is_help(argv[0])) {
        fputs(cmd_health_help, ctx->out);
        return CLI_EXIT_OK;
    }
    if (argc > 0) return cli_usage(ctx, "health ", "health takes no arguments");
    /* A degraded server answers 503 with the same body: show it rather than only the status. */
    char msg[1024];
    httpc_response r;
    int code = httpc_request(ctx, "GET", "/api/health", NULL, &r, msg, sizeof msg);
    if (code) return cli_fail(ctx, code, "%s", msg);
    json_t *h = r.body ? json_loads(r.body, 0, NULL) : NULL;
    const char *status = json_string_value(json_object_get(h, "status"));
    if (!status) {
        httpc_error_line(r.status, r.body, msg, sizeof msg);
        code = cli_fail(ctx, r.status >= 200 && r.status < 300 ? CLI_EXIT_SERVER : httpc_status_exit(r.status),
                        "GET /api/health: %s", r.status >= 200 && r.status < 300 ? "not a health answer" : msg);
    } else {
        if (ctx->json) {
            cli_print_json(ctx, h);
        } else {
            char up[32], ver[64], db[64], wr[64], disk[64];
            json_t *u = json_object_get(h, "uptime_s");
            fprintf(ctx->out, "%s: %s, version %s, db %s, writes %s, disk %s, up %s\n", ctx->server, status,
                    cli_cell(json_object_get(h, "version"), ver, sizeof ver),
                    cli_cell(json_object_get(h, "db"), db, sizeof db),
                    cli_cell(json_object_get(h, "writes"), wr, sizeof wr),
                    cli_cell(json_object_get(h, "disk"), disk, sizeof disk),
                    progress_duration(json_is_number(u) ? json_number_value(u) : -1, up, sizeof up));
            /* what it computes with: the kernel path and the precision new runs default to */
            json_t *k = json_object_get(h, "kernel");
            if (json_is_string(json_object_get(k, "path")))
                fprintf(ctx->out, "  kernel path %s, default precision %s\n",
                        json_string_value(json_object_get(k, "path")),
                        json_is_string(json_object_get(k, "default_precision"))
                            ? json_string_value(json_object_get(k, "default_precision"))
                            : "?");
            /* what is wrong, in the server's words */
            const char *why[] = {"db_error", "writes_error"};
            for (int i = 0; i < 2; i++)
                if (json_is_string(json_object_get(h, why[i]))) {
                    char text[2048];
                    fprintf(ctx->out, "  %s: %s\n", why[i], cli_cell(json_object_get(h, why[i]), text, sizeof text));
                }
        }
        code = strcmp(status, "ok") ? CLI_EXIT_SERVER : CLI_EXIT_OK;
        if (code) cli_fail(ctx, code, "the server reports '%s'", status);
    }
    json_decref(h);
    httpc_response_free(&r);
    return code;
}

int cmd_corpora(const cli_ctx *ctx, int argc, char **argv) {
    if (argc < 1 || cli_is_help(argv[0])) {
        fputs(cmd_corpora_help, argc < 1 ? ctx->err : ctx->out);
        return argc < 1 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (!strcmp(argv[0], "task-kinds") || !strcmp(argv[0], "create-task"))
        return cmd_questions_corpora(ctx, argv[0], argc - 1, argv + 1);
    if (strcmp(argv[0], "list")) return cli_usage(ctx, "corpora ", "unknown corpora command '%s'", argv[0]);
    if (argc > 1) return cli_usage(ctx, "corpora ", "corpora list takes no arguments");
    json_t *answer;
    int code = httpc_json(ctx, "GET", "/api/corpora", NULL, &answer);
    if (code) return code;
    static const char *const keys[] = {"corpora", "items", "data", NULL};
    json_t *list = cli_list_items(answer, keys);
    if (ctx->json) {
        cli_print_json(ctx, answer);
    } else if (!list) {
        code = cli_fail(ctx, CLI_EXIT_SERVER, "GET /api/corpora: no list in the answer");
    } else {
        static const char *const head[] = {"NAME", "STATUS", "TOKENIZER", "DOCUMENTS", "TOKENS", "RUNS", "SOURCE"};
        table *t = table_new(7, head);
        size_t i;
        json_t *c;
        json_array_foreach(list, i, c) {
            char b[5][128];
            json_t *tok = json_object_get(c, "tokenizer");
            if (!tok) tok = json_object_get(c, "encoding");
            const char *cells[7] = {json_string_value(json_object_get(c, "name")),
                                    json_string_value(json_object_get(c, "status")),
                                    cli_cell(tok, b[0], sizeof b[0]),
                                    cli_cell(json_object_get(c, "documents"), b[1], sizeof b[1]),
                                    cli_cell(json_object_get(c, "tokens"), b[2], sizeof b[2]),
                                    cli_cell(json_object_get(c, "runs"), b[3], sizeof b[3]),
                                    cli_cell(json_object_get(c, "source"), b[4], sizeof b[4])};
            if (t) table_add_row(t, cells);
        }
        if (t) table_print(t, ctx->out);
        table_free(t);
    }
    json_decref(answer);
    return code;
}
