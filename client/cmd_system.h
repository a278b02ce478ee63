/* `attnlab health` and `attnlab corpora list`. Return a CLI_EXIT_* code (cli.h). */
#ifndef ATTNLAB_CMD_SYSTEM_H
#define ATTNLAB_CMD_SYSTEM_H

#include "cli.h"

int cmd_health(const cli_ctx *ctx, int argc, char **argv);
int cmd_corpora(const cli_ctx *ctx, int argc, char **argv);
extern const char cmd_health_help[];
extern const char cmd_corpora_help[];

#endif
