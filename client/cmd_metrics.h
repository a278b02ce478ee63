/* `attnlab metrics ID`: a run's metric series as an aligned table, CSV or JSON, one row per step
 * and one column per key. Returns a CLI_EXIT_* code (cli.h). */
#ifndef ATTNLAB_CMD_METRICS_H
#define ATTNLAB_CMD_METRICS_H

#include <jansson.h>

#include "cli.h"
#include "table.h"

int cmd_metrics(const cli_ctx *ctx, int argc, char **argv);
extern const char cmd_metrics_help[];

/* Builds the step × key table from a GET /api/runs/{id}/metrics answer. Accepted series shapes,
 * under "series" (or the top level): {"steps":[...],"values":[...]}, [[step,value],...] or
 * [{"step":..,"value":..},...], keyed by name or listed as [{"key":..., ...}]. Keys keep the
 * server's order. NULL with msg when the answer has no series. */
table *cmd_metrics_table(const json_t *answer, char *msg, size_t msglen);

#endif
