/* Shared plumbing of the attnlab client: the exit codes, the per-invocation context (server,
 * token, output mode), argument helpers and the one-line error reporting every command uses.
 *
 * Contract: a command function returns one of the CLI_EXIT_* codes and has already printed
 * exactly one line on stderr when that code is not CLI_EXIT_OK. */
#ifndef ATTNLAB_CLI_H
#define ATTNLAB_CLI_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/* Exit codes, documented in `attnlab --help` and the README. Scripts may rely on them. */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_RUN_FAILED = 1,      /* watch: the run ended "failed" */
    CLI_EXIT_USAGE = 2,           /* bad command line or unreadable local file */
    CLI_EXIT_UNREACHABLE = 3,     /* no connection, or a timeout */
    CLI_EXIT_REFUSED = 4,         /* the server answered 4xx (its message and field are printed) */
    CLI_EXIT_SERVER = 5,          /* the server answered 5xx, or something that is not the API */
    CLI_EXIT_RUN_CANCELLED = 6,   /* watch: the run ended "cancelled" */
    CLI_EXIT_RUN_INTERRUPTED = 7, /* watch: the run ended "interrupted" */
};

#define CLI_DEFAULT_SERVER "http://127.0.0.1:8080"

typedef struct {
    const char *server; /* base URL without a trailing '/' */
    const char *token;  /* bearer token or NULL */
    int json;           /* --json: machine-readable output */
    double timeout_s;   /* per request (watch streams use it for connecting only) */
    FILE *out, *err;
} cli_ctx;

/* Prints "attnlab: <message>" on ctx->err and returns code. */
int cli_fail(const cli_ctx *ctx, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A usage error: the message plus a hint to `attnlab <cmd> --help`; returns CLI_EXIT_USAGE. */
int cli_usage(const cli_ctx *ctx, const char *cmd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* 1 when argv[*i] is the option `name` (as "--name VALUE" or "--name=VALUE"): *value is set and *i
 * advanced past the value. 0 when it is another argument. -1 when the value is missing. */
int cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value);
/* 1 when argv[i] is "--help" or "-h". */
int cli_is_help(const char *arg);
/* Parses a positive decimal id (1..2^53); returns 0 and sets *id, or -1. */
int cli_parse_id(const char *s, long long *id);

/* A command-line value as JSON: integers, reals, true/false/null and [..]/{..} JSON text become
 * that JSON value; anything else is a string. Never NULL except when out of memory. */
json_t *cli_value_guess(const char *text);
/* KEY=VALUE into key (copied, at most keylen-1 bytes) and *value (points into text). -1 if no '='. */
int cli_split_kv(const char *text, char *key, size_t keylen, const char **value);
/* Sets one run-config key from text, typed by the RunConfig schema (strings stay strings even
 * when they look like numbers; unknown keys are guessed and left to the server to judge).
 * Dashes in the key become underscores. Returns 0, or -1 when the value does not fit the type
 * (msg says why). */
int cli_config_set(json_t *config, const char *key, const char *text, char *msg, size_t msglen);

/* Reads a whole JSON file (object expected); NULL with msg on failure. */
json_t *cli_read_json_file(const char *path, char *msg, size_t msglen);

/* A JSON scalar as table text: integers plain, reals with %.6g, strings as-is, null and absent
 * as "", booleans true/false, arrays of scalars joined by ','. Returns buf. */
const char *cli_cell(const json_t *v, char *buf, size_t len);
/* Prints a JSON value for --json (indented, keys in server order, newline). */
void cli_print_json(const cli_ctx *ctx, const json_t *v);
/* The list inside a list response: the value itself when it is an array, else the first array
 * among the members named in keys (NULL-terminated), else the first array member. NULL if none. */
json_t *cli_list_items(json_t *v, const char *const *keys);

/* A UNIX time (seconds, number or ISO string) as "YYYY-MM-DD HH:MM" UTC; "" when absent. */
const char *cli_time(const json_t *v, char *buf, size_t len);

#endif

/* Config flags shared by `runs start` and `experiments start`: "--set KEY=VALUE" and "--KEY VALUE"
 * for every RunConfig key (dashes or underscores). Returns 1 when argv[*i] was one (config updated,
 * *i advanced), 0 when it is not a config flag, -1 on a bad or missing value (msg says why). */
int cli_config_flag(json_t *config, int argc, char **argv, int *i, char *msg, size_t msglen);
/* The JSON type ("integer", "number", "string", "boolean") of a RunConfig key in the schema
 * compiled into the client (server/api/openapi.json); NULL when the key is not a RunConfig field. */
const char *cli_config_type(const char *key);

/* The API wraps single objects by kind ({"run":{...}}, {"probe":{...}}): returns v[key] when it
 * is an object, else v itself (so an unwrapped answer works too). */
json_t *cli_unwrap(json_t *v, const char *key);
/* A number that may come bare or as {"last": x} (the run brief's shape); NULL when neither. */
const json_t *cli_last_value(const json_t *v);
