/* The experiments service: an experiment is one base config run once per variant (same seed and
 * data order unless a variant changes them). It is planned first (every variant merged, checked
 * and admitted), then committed whole: the experiment and all its runs in one store transaction,
 * then all runs queued at once, or none of it. */
#ifndef ATTNLAB_SVC_EXPERIMENTS_H
#define ATTNLAB_SVC_EXPERIMENTS_H

#include <jansson.h>
#include <stddef.h>

#include "svc.h"

struct app;

/* The presets, each {"name","description","base":{…},"variants":[…]}: a new array. */
json_t *svc_experiments_presets(void);

/* A POST /api/experiments body as the handler parsed it (borrowed pointers; any may be NULL). */
typedef struct {
    const char *name, *preset;
    const json_t *base, *overrides, *variants, *tags;
} svc_experiment_request;

/* What a commit creates. Owned by the plan; free with svc_experiments_plan_free. */
typedef struct {
    const char *name;   /* the request's, the preset's, or NULL */
    const char *preset; /* NULL: none */
    json_t *base;       /* the merged base config, as stored */
    json_t *variants;   /* [{"name","config"?}] as given */
    json_t *configs;    /* one normalised, admitted config per variant */
    const json_t *tags; /* given to every run; may be NULL */
} svc_experiment_plan;

/* Checks a request and plans its runs: the preset or base, overrides, every variant merged,
 * normalised and admitted, and room in the training queue for all of them. On failure the plan
 * holds nothing. */
svc_status svc_experiments_plan(struct app *a, const svc_experiment_request *r, svc_experiment_plan *plan,
                                svc_error *err);
/* Creates the planned experiment and its runs in one transaction and queues every run, or
 * nothing (SVC_BUSY when the queue filled up meanwhile). *exp_id gets the experiment's id and
 * run_ids (json_array_size(plan->configs) of them) the runs', in variant order. */
svc_status svc_experiments_commit(struct app *a, const svc_experiment_plan *plan, long long *exp_id, long long *run_ids,
                                  svc_error *err);
void svc_experiments_plan_free(svc_experiment_plan *plan);

#endif
