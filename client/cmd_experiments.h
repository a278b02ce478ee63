/* `attnlab experiments ...`: start (a preset with overrides, or a base config with variants),
 * list, show. Returns a CLI_EXIT_* code (cli.h). */
#ifndef ATTNLAB_CMD_EXPERIMENTS_H
#define ATTNLAB_CMD_EXPERIMENTS_H

#include "cli.h"

int cmd_experiments(const cli_ctx *ctx, int argc, char **argv);
extern const char cmd_experiments_help[];

/* "KEY=V1,V2,..." into a variants array [{"name":V1,"config":{KEY:V1}}, ...], values typed as
 * config values (cli_config_set). NULL with msg when malformed. */
json_t *cmd_experiments_vary(const char *spec, char *msg, size_t msglen);

#endif
