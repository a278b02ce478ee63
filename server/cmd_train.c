/* Placeholder until the train command lands (being written now); exits 1 with a clear message. */
#include <stdio.h>

#include "commands.h"

int cmd_train(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "attnlabd: the train command is not built yet\n");
    return 1;
}
