/* `attnlab probe KIND [--param k=v ...]` and `attnlab probes list|show|kinds`: run the exact
 * measurements about RoPE and attention scores, and print their result tables (aligned, CSV or
 * JSON). Returns a CLI_EXIT_* code (cli.h). */
#ifndef ATTNLAB_CMD_PROBES_H
#define ATTNLAB_CMD_PROBES_H

#include <jansson.h>

#include "cli.h"

int cmd_probe(const cli_ctx *ctx, int argc, char **argv);
int cmd_probes(const cli_ctx *ctx, int argc, char **argv);
extern const char cmd_probe_help[];
extern const char cmd_probes_help[];

/* Prints a probe result ({"summary", "tables":[{"name","columns","rows"}], ...}, possibly wrapped
 * as {"result":{...}}) in format "table" or "csv"; only the table named `only` when not NULL.
 * Returns CLI_EXIT_OK, or CLI_EXIT_USAGE when `only` names no table, CLI_EXIT_SERVER when the
 * result has no tables. */
int cmd_probes_print_result(const cli_ctx *ctx, const json_t *result, const char *format, const char *only);

/* A --param value typed by the parameter's schema entry (may be NULL: guessed): lists split on
 * commas, text and choices stay strings, numbers parse. NULL with msg when it does not fit. */
json_t *cmd_probes_param_value(const json_t *schema, const char *text, char *msg, size_t msglen);

#endif
