/* Runs trained elsewhere (a PyTorch loop, a notebook) logged into attnlab: created running without
 * a job, their points posted in batches by the client that trains them, ended by that client. They
 * join lists, experiments, statistics, bundles, streams and the dashboard like the service's own
 * runs, marked "source":"external" (store.h; migration 0009). */
#ifndef ATTNLAB_SVC_EXTERNAL_H
#define ATTNLAB_SVC_EXTERNAL_H

#include <jansson.h>

#include "services/svc.h"
#include "services/svc_idempotency.h"

struct app;

#define SVC_EXTERNAL_MAX_POINTS 1000        /* points in one batch (MLflow's log-batch bound) */
#define SVC_EXTERNAL_MAX_CONFIG_BYTES 65536 /* the config as compact JSON */
#define SVC_EXTERNAL_MAX_CONFIG_KEYS 256

/* A run to create; strings may be NULL. */
typedef struct {
    const char *name, *note, *variant;
    const json_t *tags;       /* array of strings (checked by the caller) or NULL */
    const json_t *config;     /* any JSON object, kept as given (NULL: {}) */
    long long experiment_id;  /* 0: none; else it joins that experiment */
    int replicate;            /* its replicate within the experiment (pairs with the others' of that index) */
    const json_t *provenance; /* where its numbers come from, as its client says (an object, or NULL) */
    svc_idem *idem;           /* NULL, or its idempotency key (as svc_new_run's) */
} svc_external_run;

/* Checks and creates an external run, running from now; *id gets its id. The variant defaults to
 * the config's "attention" when that is a variant-like name, else "external"; the seed, corpus and
 * total steps are the config's "seed", "corpus" and "steps" when it has them; a provenance object
 * (at most 16 KiB as JSON) is kept as the run's. SVC_INVALID names the field ("config", "variant",
 * "experiment_id", "replicate", "provenance"); SVC_FAILED when the store fails. With r->idem, a
 * retry as svc_runs_create says. */
svc_status svc_external_create(struct app *a, const svc_external_run *r, long long *id, svc_error *err);

/* Stores a batch of points {"step","key","value","wall_time"?} of running external run `id`, all or
 * none, after checking every one: 1..SVC_EXTERNAL_MAX_POINTS points, step an integer >= 0, key 1..31
 * bytes of letters, digits and _ . - : /, value a finite number, wall_time (default now) a finite
 * number >= 0. The run's step becomes the largest one stored, and each step's values go out on the
 * live streams. SVC_INVALID names the first bad point's field ("points[3].value"); SVC_NOT_FOUND;
 * SVC_CONFLICT when the run is not external or has ended. *stored gets the number of points. */
svc_status svc_external_log(struct app *a, long long id, const json_t *points, int *stored, svc_error *err);

/* Ends running external run `id` as "succeeded" or "failed" (with error, at most 1000 bytes kept).
 * SVC_INVALID (field "status"), SVC_NOT_FOUND, SVC_CONFLICT when it is not external or has ended. */
svc_status svc_external_finish(struct app *a, long long id, const char *status, const char *error, svc_error *err);

/* Takes the weights of external run `id` from the safetensors file at `upload` (moved, not copied):
 * they must be a model this engine can load (model_config_from_file's rules: the metadata that says
 * how to rebuild it, every tensor with its shape), then they become the run's checkpoint, recorded
 * with their SHA-256 like a trained run's, so that model probes and the weights download work on
 * it. On SVC_OK *info gets {"run_id","bytes","n_layer","n_head","d_model","seq_len","vocab",
 * "attention"}. SVC_INVALID (field "body") for a file the engine cannot load, SVC_NOT_FOUND,
 * SVC_CONFLICT for a run this service trains, SVC_FAILED when the disk or the store fails. The
 * upload is removed on any failure. */
svc_status svc_external_weights(struct app *a, long long id, const char *upload, json_t **info, svc_error *err);

/* 1 when run object `run` (store_run_get's) is an external run. */
int svc_external_is(const json_t *run);
/* 1 when k is a metric key a client may log: 1..STORE_METRIC_KEY_MAX (250) bytes of letters, digits and
 * _ . - : / (svc_external_log's rule, which bundles imported by svc_import.h follow too). */
int svc_external_key_ok(const char *k);

#endif
