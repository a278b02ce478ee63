/* attnlab: the command-line client of attnlabd. Global options may come anywhere before a lone
 * "--"; the first remaining word names the command, which gets the rest. */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_experiments.h"
#include "cmd_metrics.h"
#include "cmd_probes.h"
#include "cmd_runs.h"
#include "cmd_system.h"
#include "cmd_watch.h"

static const char usage_text[] =
    "usage: attnlab [--server URL] [--token T] [--json] [--timeout S] COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  health                         is the server up?\n"
    "  runs list|show|start|cancel|resume|delete|tag|note\n"
    "                                 training runs\n"
    "  experiments start|list|show    A/B experiments: one run per variant, same seed and data\n"
    "  watch ID                       follow a run live; exits with its final status\n"
    "  metrics ID                     a run's curves as a table, CSV or JSON\n"
    "  probe KIND [--param k=v ...]   run a probe and print its tables\n"
    "  probes list|show|kinds         stored probe results and the kinds of probe\n"
    "  corpora list                   training corpora\n"
    "  help COMMAND                   that command's options (or: COMMAND --help)\n"
    "\n"
    "global options:\n"
    "  --server URL    the attnlabd to talk to (env ATTNLAB_SERVER, default " CLI_DEFAULT_SERVER ")\n"
    "  --token T       sent as 'Authorization: Bearer T' (env ATTNLAB_TOKEN)\n"
    "  --json          machine-readable output: the server's JSON (watch: one JSON line per event)\n"
    "  --timeout S     seconds to wait for each answer (default 30)\n"
    "  --version       print the client's version\n"
    "\n"
    "exit status:\n"
    "  0  success (watch: the run succeeded)\n"
    "  1  watch: the run failed\n"
    "  2  usage: bad command line, or an unreadable local file\n"
    "  3  the server cannot be reached, or did not answer in time\n"
    "  4  the server refused the request (4xx); its message and the offending field are printed\n"
    "  5  the server failed (5xx) or answered something that is not the attnlab API\n"
    "  6  watch: the run was cancelled\n"
    "  7  watch: the run was interrupted (resume it with 'attnlab runs resume ID')\n"
    "Errors are one line on stderr, starting with 'attnlab: '.\n";

typedef struct {
    const char *name;
    int (*fn)(const cli_ctx *, int, char **);
    const char *help;
} command;

static const command commands[] = {
    {"health", cmd_health, cmd_health_help},
    {"runs", cmd_runs, cmd_runs_help},
    {"experiments", cmd_experiments, cmd_experiments_help},
    {"watch", cmd_watch, cmd_watch_help},
    {"metrics", cmd_metrics, cmd_metrics_help},
    {"probe", cmd_probe, cmd_probe_help},
    {"probes", cmd_probes, cmd_probes_help},
    {"corpora", cmd_corpora, cmd_corpora_help},
};

static const command *find_command(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

int main(int argc, char **argv) {
    cli_ctx ctx = {.server = getenv("ATTNLAB_SERVER"),
                   .token = getenv("ATTNLAB_TOKEN"),
                   .timeout_s = 30,
                   .out = stdout,
                   .err = stderr};
    if (!ctx.server || !*ctx.server) ctx.server = CLI_DEFAULT_SERVER;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest) return cli_fail(&ctx, CLI_EXIT_USAGE, "out of memory");
    int n = 0, code;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r;
        if (!strcmp(argv[i], "--")) {
            while (++i < argc) rest[n++] = argv[i];
            break;
        } else if ((r = cli_opt_value(argc, argv, &i, "--server", &v)) != 0) {
            if (r < 0) {
                code = cli_usage(&ctx, "", "--server wants a URL");
                goto out;
            }
            ctx.server = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--token", &v)) != 0) {
            if (r < 0) {
                code = cli_usage(&ctx, "", "--token wants a value");
                goto out;
            }
            ctx.token = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--timeout", &v)) != 0) {
            char *end;
            if (r < 0 || (ctx.timeout_s = strtod(v, &end), *end) || !(ctx.timeout_s > 0)) {
                code = cli_usage(&ctx, "", "--timeout wants a number of seconds > 0");
                goto out;
            }
        } else if (!strcmp(argv[i], "--json")) {
            ctx.json = 1;
        } else if (!strcmp(argv[i], "--version")) {
            printf("attnlab %s\n", ATTNLAB_VERSION);
            code = CLI_EXIT_OK;
            goto out;
        } else {
            rest[n++] = argv[i];
        }
    }
    if (strncmp(ctx.server, "http://", 7) && strncmp(ctx.server, "https://", 8)) {
        code = cli_usage(&ctx, "", "--server wants an http:// or https:// URL, not '%s'", ctx.server);
        goto out;
    }
    /* Paths are appended to the base: one trailing slash would double up. */
    char server[1024];
    snprintf(server, sizeof server, "%s", ctx.server);
    for (size_t len = strlen(server); len > 0 && server[len - 1] == '/'; len--) server[len - 1] = 0;
    ctx.server = server;
    if (n == 0 || cli_is_help(rest[0])) {
        fputs(usage_text, n == 0 ? stderr : stdout);
        code = n == 0 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
        goto out;
    }
    if (!strcmp(rest[0], "help")) {
        const command *c = n > 1 ? find_command(rest[1]) : NULL;
        if (n > 1 && !c) {
            code = cli_usage(&ctx, "", "no command '%s'", rest[1]);
            goto out;
        }
        fputs(c ? c->help : usage_text, stdout);
        code = CLI_EXIT_OK;
        goto out;
    }
    const command *c = find_command(rest[0]);
    if (!c) {
        code = cli_usage(&ctx, "", "no command '%s'", rest[0]);
        goto out;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        code = cli_fail(&ctx, CLI_EXIT_UNREACHABLE, "libcurl failed to start");
        goto out;
    }
    code = c->fn(&ctx, n - 1, rest + 1);
    fflush(stdout);
    curl_global_cleanup();
out:
    free(rest);
    return code;
}
