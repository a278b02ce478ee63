/* attnlab: the seed blog's open questions over an experiment (experiments head-spread, experiments
 * accuracy) and task corpora (corpora task-kinds, corpora create-task). */
#ifndef ATTNLAB_CMD_QUESTIONS_H
#define ATTNLAB_CMD_QUESTIONS_H

#include "cli.h"

/* experiments head-spread ID [--at STEP] [--csv]: GET /api/experiments/{id}/head-spread. */
int cmd_questions_head_spread(const cli_ctx *ctx, int argc, char **argv);
/* experiments accuracy ID [--csv]: GET /api/experiments/{id}/accuracy. */
int cmd_questions_accuracy(const cli_ctx *ctx, int argc, char **argv);
/* corpora task-kinds | corpora create-task NAME --kind K [--set KEY=VALUE ...] [--offsets 1,2,4]. */
int cmd_questions_corpora(const cli_ctx *ctx, const char *sub, int argc, char **argv);

#endif
