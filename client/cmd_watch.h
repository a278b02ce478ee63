/* `attnlab watch ID`: follows one run's event stream until the run ends.
 *
 * On a terminal the progress line is redrawn in place; otherwise one plain line per update (at
 * most one per --every seconds) goes out; with --json every event is printed as one JSON line.
 * A dropped connection is resumed with Last-Event-ID; a "resync" event, and every reconnect,
 * refetch the run. Returns the run's final status as an exit code (0 succeeded, 1 failed,
 * 6 cancelled, 7 interrupted), or 3/4/5 when the server cannot be reached or refuses. */
#ifndef ATTNLAB_CMD_WATCH_H
#define ATTNLAB_CMD_WATCH_H

#include "cli.h"

int cmd_watch(const cli_ctx *ctx, int argc, char **argv);
/* The exit code for a final run status (unknown statuses map to CLI_EXIT_RUN_FAILED). */
int cmd_watch_exit_for(const char *status);
/* Follows run id with the given options; used by `runs start --watch` too. every_s < 0: default. */
int cmd_watch_run(const cli_ctx *ctx, long long id, double every_s, int force_plain);
extern const char cmd_watch_help[];

#endif
