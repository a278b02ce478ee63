/* The subcommands of attnlabd. Each parses its own flags from argv (argv[0] is the
 * subcommand's name) and returns the process exit status: 0 success, 1 failure at run time,
 * 2 bad usage (a bad flag, a port in use, an unwritable data directory). */
#ifndef ATTNLAB_COMMANDS_H
#define ATTNLAB_COMMANDS_H

int cmd_serve(int argc, char **argv);    /* server/cmd_serve.c: the HTTP service (default) */
int cmd_train(int argc, char **argv);    /* server/cmd_train.c: one training job in the foreground */
int cmd_tokenize(int argc, char **argv); /* server/cmd_tokenize.c: text <-> token ids on stdin/stdout */

#endif
