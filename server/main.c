/* attnlabd: dispatches to a subcommand; with none (or only flags) it serves HTTP. */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"

static void usage(FILE *out) {
    fprintf(out, "usage: attnlabd [serve] [--bind ADDR] [--port N] [--data-dir DIR] ...  run the service\n"
                 "       attnlabd train [flags]       train one model in the foreground (JSON per step)\n"
                 "       attnlabd tokenize [flags]    text on stdin -> token ids (or --decode)\n"
                 "       attnlabd COMMAND --help      the flags of one command\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        /* No subcommand: serve. --help shows the subcommands first, then serve's flags. */
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) usage(stdout);
        return cmd_serve(argc, argv);
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "attnlabd: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
