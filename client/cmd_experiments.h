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

/* Adds "KEY=V1,V2,..." to a grid object as KEY: [V1, V2, ...] (typed as cmd_experiments_vary
 * types them): 0, or -1 with msg when malformed or KEY is in the grid already. */
int cmd_experiments_grid_add(json_t *grid, const char *spec, char *msg, size_t msglen);

#endif
