/* Helpers for tests that drive attnlabd's REST API (on top of harness.h). */
#ifndef ATTNLAB_TEST_API_H
#define ATTNLAB_TEST_API_H

#include <jansson.h>

#include "harness.h"

/* A config that trains in well under a second on the built-in "small" corpus. */
#define TINY_CONFIG                                                                                                    \
    "\"corpus\":\"small\",\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"seq_len\":16,\"batch\":2,\"eval_every\":5,"      \
    "\"eval_batches\":2,\"threads\":1"

/* method + path (+ JSON body or NULL) -> parsed JSON (NULL if none); *status gets the HTTP status. */
json_t *api_call(harness_server *s, const char *method, const char *path, const char *body, long *status);
/* POST /api/runs with {"config":{TINY_CONFIG, extra}} (extra: more members, may be ""); returns the id or -1. */
long long api_start_tiny_run(harness_server *s, const char *extra, const char *name);
/* Polls GET /api/runs/{id} until its status is `status` (or a final one); returns the status seen
 * (caller frees) or NULL on timeout. */
char *api_wait_status(harness_server *s, long long id, const char *status, int timeout_ms);
/* Polls until the run reports step >= step; returns 0, or -1 on timeout or a final status. */
int api_wait_step(harness_server *s, long long id, int step, int timeout_ms);
/* POST /api/runs/{id}/cancel, then waits for "cancelled"; returns the step the run stopped at, or
 * -1 when the cancel was refused or the run ended otherwise. With api_wait_step this is how a test
 * stops a long run at a step it has seen, whatever the machine's speed: tests never assume a run is
 * still going (or already done) after some wall-clock time. */
int api_cancel_run(harness_server *s, long long id, int timeout_ms);
/* Whether runs a (on sa) and b (on sb) logged bit-identical "loss" values at steps 1..n, each step
 * once; 0 with the first difference in why otherwise. */
int api_same_losses(harness_server *sa, long long a, harness_server *sb, long long b, int n, char *why, size_t len);
/* The full "loss" series of a run as a new array of numbers (NULL on error). */
json_t *api_series(harness_server *s, long long id, const char *key);
/* The error object's field of a JSON error body (or ""). */
const char *api_error_field(json_t *body);

/* method + path (+ body): the answer's JSON (an empty object when it has none) when the status is
 * `want`; else NULL, the status and answer printed as a "# " line. */
json_t *api_expect(harness_server *s, const char *method, const char *path, const char *body, long want);
/* method + path (+ body): only the HTTP status (-1 when no answer came). */
long api_status(harness_server *s, const char *method, const char *path, const char *body);
/* POST /api/experiments with body: the new experiment's id (-1 when it was not created, the answer
 * printed), and its runs array into *runs when runs is not NULL (the caller owns it; NULL on -1). */
long long api_create_experiment(harness_server *s, const char *body, json_t **runs);
/* Waits (api_wait_status) for every run of an array of run objects to be `status`: how many ended
 * otherwise or timed out, each printed as a "# " line. */
int api_wait_runs(harness_server *s, const json_t *runs, const char *status, int timeout_ms);
/* The body of a test program against one attnlabd: starts s (harness_start with extra_args, may be
 * NULL), runs cases (a function of RUN lines), prints the server's log when a case failed, stops it
 * and returns the exit status. tests/run.sh runs a program using it again on PostgreSQL. */
int api_suite_main(harness_server *s, const char *const *extra_args, void (*cases)(void));

#endif
