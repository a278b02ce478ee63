/* Integration-test harness: starts the real attnlabd (path from $ATTNLABD, set by tests/run.sh)
 * on a free port with a fresh temporary data directory, and talks HTTP to it with libcurl. */
#ifndef ATTNLAB_HARNESS_H
#define ATTNLAB_HARNESS_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
    char data_dir[256];
    char log_path[300];
    char base_url[64];
} harness_server;

typedef struct {
    long status;
    char *body;
    size_t len;
    char *headers;
} harness_response;

/* 1 when the servers the harness starts keep their data in SQLite (the default), 0 when they use
 * PostgreSQL ($ATTNLAB_TEST_DB: tests/run.sh's second pass over the API tests). */
int harness_sqlite(void);
/* Path of the attnlabd under test. */
const char *harness_attnlabd(void);
/* Makes a fresh temporary directory (mkdtemp) in buf. */
int harness_tempdir(char *buf, size_t len);
/* Starts attnlabd with --port 0 and the given extra arguments (NULL-terminated, may be NULL); if
 * data_dir is NULL a fresh one is made. Waits until /api/health answers. Returns 0 on success. */
int harness_start(harness_server *s, const char *data_dir, const char *const *extra_args);
/* SIGTERM and wait; returns the exit status (or -1). */
int harness_stop(harness_server *s);
/* SIGKILL and wait. */
void harness_kill(harness_server *s);
/* Runs attnlabd with args to completion, capturing stderr into errbuf; returns the exit status. */
int harness_run_attnlabd(const char *const *args, char *errbuf, size_t errlen);

/* One request. path is sent exactly as given (no dot-segment normalisation). headers may be NULL
 * or a NULL-terminated list of "Name: value". Returns 0 when a response arrived. */
int harness_request(harness_server *s, const char *method, const char *path, const char *body, size_t body_len,
                    const char *const *headers, harness_response *out);
int harness_get(harness_server *s, const char *path, harness_response *out);
int harness_post_json(harness_server *s, const char *path, const char *json, harness_response *out);
void harness_response_free(harness_response *r);
/* Parses the body as JSON (NULL if it is not); caller owns the result. */
json_t *harness_json(const harness_response *r);
/* Value of a response header (case-insensitive), copied into buf; NULL when absent. */
const char *harness_header(const harness_response *r, const char *name, char *buf, size_t len);
/* Prints the server's log to stdout (on failure, for diagnosis). */
void harness_dump_log(const harness_server *s);

#endif
