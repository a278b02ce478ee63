/* The runs service: which runs this service takes (admission), creating them, and the changes of
 * state a client asks for (cancel, resume, delete). Handlers parse and reply; this holds the rules. */
#ifndef ATTNLAB_SVC_RUNS_H
#define ATTNLAB_SVC_RUNS_H

#include <jansson.h>

#include "store/store.h"
#include "services/svc.h"
#include "services/svc_idempotency.h"

struct app;

/* Checks that a normalised config can run on this service: its corpus exists and is ready, the
 * engine accepts the config, it asks for no more threads than the service computes with, and its
 * estimated memory (at its thread count) is within the service's limit. Fills "threads" with the
 * service's share when it is 0 (jobs_threads_per_run for `together` runs submitted at once: 1 for a
 * run, the experiment's count for an experiment's). Errors name fields with
 * `prefix` ("config." for a run, "variants[2].config." in an experiment): SVC_INVALID with code
 * "invalid_field" or "too_large". */
svc_status svc_runs_admit(struct app *a, json_t *config, const char *prefix, int together, svc_error *err);

/* A run to create from an admitted config. */
typedef struct {
    const char *name, *note;
    const char *variant; /* NULL: the config's attention */
    const json_t *tags;  /* may be NULL */
    const json_t *config;
    svc_idem *idem; /* NULL, or its idempotency key (svc_idempotency_begin's, not a retry) */
} svc_new_run;

/* The store row of a new run: row's strings point into r and into *config_text, which the caller
 * frees. -1 when out of memory (nothing to free). */
int svc_runs_store_row(const svc_new_run *r, store_new_run *row, char **config_text);
/* Creates a queued run and hands it to the training queue; *id gets its id. SVC_BUSY, with no
 * run left behind, when the queue is full. With r->idem, a request with the same key that committed
 * meanwhile makes this a retry: SVC_OK with r->idem->replay (= *id) and nothing created. */
svc_status svc_runs_create(struct app *a, const svc_new_run *r, long long *id, svc_error *err);
/* Cancels a queued run, or asks a running one to stop (it keeps a checkpoint). SVC_NOT_FOUND,
 * SVC_CONFLICT when the run is neither queued nor running. */
svc_status svc_runs_cancel(struct app *a, long long id, svc_error *err);
/* Queues an interrupted or cancelled run again; it continues from its checkpoint. */
svc_status svc_runs_resume(struct app *a, long long id, svc_error *err);
/* Deletes a run that is neither queued nor running, with its metrics and its files. */
svc_status svc_runs_delete(struct app *a, long long id, svc_error *err);

#endif
