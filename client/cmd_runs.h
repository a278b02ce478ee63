/* `attnlab runs ...`: list, show, start, cancel, resume, delete, tag, note.
 * Returns a CLI_EXIT_* code (cli.h). */
#ifndef ATTNLAB_CMD_RUNS_H
#define ATTNLAB_CMD_RUNS_H

#include "cli.h"

int cmd_runs(const cli_ctx *ctx, int argc, char **argv);
extern const char cmd_runs_help[];

/* Prints a list of runs (the array inside a GET /api/runs answer) as an aligned table. */
void cmd_runs_print_table(const cli_ctx *ctx, json_t *runs);

#endif
