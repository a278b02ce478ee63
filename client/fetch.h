/* The requests several commands share, over httpc.h: filter options turned into a query string, the
 * skeleton of the list commands, and a download (CSV, JSON) written as it came. Each answers for
 * itself on failure, with the one line and exit code of cli.h's contract. */
#ifndef ATTNLAB_FETCH_H
#define ATTNLAB_FETCH_H

#include <jansson.h>
#include <stddef.h>

#include "cli.h"

/* Turns filter options (each "--name VALUE" in opts, NULL-terminated) into "?name=value&..." in
 * query (URL-escaped). Returns CLI_EXIT_OK, or a usage error naming cmd ("runs list") for an unknown
 * argument, a missing value or a query longer than cap. */
int fetch_query(const cli_ctx *ctx, const char *cmd, int argc, char **argv, const char *const *opts, char *query,
                size_t cap);
/* The shared skeleton of the list commands: filter options (opts, as fetch_query; an empty
 * list refuses every argument) -> GET base?query -> the list inside the answer (cli_list_items with
 * keys). With --json the whole answer is printed and *list is NULL. On CLI_EXIT_OK the caller owns
 * *answer (and *list is borrowed from it); on any other code nothing is owned and *answer is NULL. */
int fetch_list(const cli_ctx *ctx, const char *cmd, int argc, char **argv, const char *const *opts, const char *base,
               const char *const *keys, json_t **answer, json_t **list);
/* GET path and write the body to ctx->out as it came (CSV, a JSON download); a refusal or failure
 * prints its one line and returns its exit code. */
int fetch_raw(const cli_ctx *ctx, const char *path);

#endif
