/* The experiments service: an experiment is one base config run once per variant and replicate.
 * Replicate i (0-based) of every variant runs with seed base_seed + i, so replicate i of every
 * variant shares its seed and data order (a paired design; a variant that sets its own seed keeps
 * it, plus i). It is planned first (every variant merged, checked and admitted), then committed
 * whole: the experiment and all its runs in one store transaction, then all runs queued at once,
 * or none of it. */
#ifndef ATTNLAB_SVC_EXPERIMENTS_H
#define ATTNLAB_SVC_EXPERIMENTS_H

#include <jansson.h>
#include <stddef.h>

#include "services/svc.h"
#include "services/svc_idempotency.h"

struct app;

/* Most replicates an experiment may ask for. */
#define SVC_EXPERIMENTS_MAX_REPLICATES 32
/* Most runs one experiment makes (variants x replicates), and so most variants. */
#define SVC_EXPERIMENTS_MAX_RUNS 256
/* Most config keys one grid varies, and most values per key. */
#define SVC_EXPERIMENTS_MAX_GRID_KEYS 8
#define SVC_EXPERIMENTS_MAX_GRID_VALUES 32
/* Longest variant name (a grid's are "key=value,key=value"). */
#define SVC_EXPERIMENTS_MAX_VARIANT_NAME 100
/* 1 for a variant name: 1..SVC_EXPERIMENTS_MAX_VARIANT_NAME letters, digits and _ . - = , + */
int svc_experiments_variant_name_ok(const char *s);

/* The presets, each {"name","description","base":{…},"variants":[…],"replicates":n,
 * "tiny":{overrides for a classroom-sized run}}, seed-blog first: a new array (NULL when out of
 * memory). */
json_t *svc_experiments_presets(void);

/* A POST /api/experiments body as the handler parsed it (borrowed pointers; any may be NULL). */
typedef struct {
    const char *name, *preset;
    int name_given; /* name is the request's own: 409 when in use (else a free "name (2)" is taken) */
    const json_t *base, *overrides, *variants, *tags;
    /* A sweep instead of variants: {"key": [values], ...}, one variant per combination (the first key
     * varying slowest), named "key=value,key=value" in the grid's key order. */
    const json_t *grid;
    const json_t *replicates; /* NULL: the preset's count, or 1; else an integer 1..32 */
    int first_replicate;      /* runs are made for replicates first_replicate..replicates-1 (0: all) */
} svc_experiment_request;

/* What a commit creates. Owned by the plan; free with svc_experiments_plan_free. */
typedef struct {
    const char *name;     /* the request's, the preset's, or NULL */
    int name_given;       /* the request's own name: STORE_CONFLICT is a 409, not a rename */
    const char *preset;   /* NULL: none */
    json_t *base;         /* the merged base config, as stored */
    json_t *variants;     /* [{"name","config"?}] as given */
    json_t *configs;      /* one normalised, admitted config per variant (replicate 0's seed) */
    const json_t *tags;   /* given to every run; may be NULL */
    int replicates;       /* runs per variant, 1..SVC_EXPERIMENTS_MAX_REPLICATES */
    int first_replicate;  /* the first replicate it makes runs of (0 for a new experiment) */
    size_t n_runs;        /* variants x (replicates - first_replicate) */
    long long into;       /* 0: a new experiment; else the existing experiment the runs join */
    json_t *all_variants; /* into an experiment: its variants once the plan's are in (else NULL) */
    svc_idem *idem;       /* NULL, or the request's idempotency key (set by the caller after planning; a
                             new experiment's only) */
} svc_experiment_plan;

/* Checks a request and plans its runs: the preset or base, overrides, the variants (given, or
 * the product of a grid: SVC_INVALID on field "grid" for grid and variants together, a grid that
 * is not an object of 1..8 RunConfig keys each with 1..32 distinct values, or on "grid.KEY" for a
 * value the key does not take), every variant merged, normalised and admitted, the replicate count
 * (SVC_INVALID on field "replicates" outside 1..32, or when the last replicate's seed would pass
 * the largest seed), at most SVC_EXPERIMENTS_MAX_RUNS runs in all (SVC_INVALID on "grid" or
 * "variants", naming the bound), and room in the training queue for all n_runs of them. On
 * failure the plan holds nothing. */
svc_status svc_experiments_plan(struct app *a, const svc_experiment_request *r, svc_experiment_plan *plan,
                                svc_error *err);
/* Creates the planned experiment (or adds the runs to plan->into) and its runs in one transaction
 * and queues every run, or nothing (SVC_BUSY when the queue filled up meanwhile; runs added to an
 * existing experiment that the queue refuses end failed, saying so). Experiment names are unique: a name the
 * request gave that is in use is SVC_CONFLICT (field "name"); a default name (the preset's, a
 * bundle's, "experiment") becomes the first free of "name (2)", "name (3)", … *exp_id gets the experiment's id and
 * run_ids (plan->n_runs of them) the runs', replicate by replicate and in variant order within
 * one (so the queue trains whole pairs first): run k is variant k % n_variants, replicate
 * k / n_variants. */
svc_status svc_experiments_commit(struct app *a, const svc_experiment_plan *plan, long long *exp_id, long long *run_ids,
                                  svc_error *err);
void svc_experiments_plan_free(svc_experiment_plan *plan);

/* Adds runs to experiment id (svc_experiment_manage.c), planned and committed as a new experiment's
 * are: `replicates` (an integer: that many more replicates of each of its variants, the
 * experiment's replicates at most SVC_EXPERIMENTS_MAX_REPLICATES in all; a new replicate runs its
 * variant's replicate-0 config exactly, with the seed of its index) or `variants` (new variants as
 * in a create, run for every replicate the experiment has, with the same seeds, so they pair with
 * the others), exactly one of them (SVC_INVALID on the field otherwise, or for a variant name the
 * experiment has). *exp_id gets id, run_ids (malloc'd, *n of them) the new runs'. SVC_NOT_FOUND
 * (field "id"). */
svc_status svc_experiments_add_runs(struct app *a, long long id, const json_t *variants, const json_t *replicates,
                                    long long **run_ids, size_t *n, svc_error *err);

/* What a bundle (GET /api/experiments/{id}/bundle) asks to run again, as a request: its
 * experiment's base, variants and replicates (its preset already merged into the base), named
 * `name` or the bundle's. Refused (SVC_INVALID, field "from_bundle") for a bundle without them, and
 * (SVC_CONFLICT, field "from_bundle") when a corpus its runs recorded has other tokens here now (the
 * SHA-256 of the token file in their provenance differs from this data directory's). The request
 * borrows from bundle. */
svc_status svc_experiments_from_bundle(struct app *a, const json_t *bundle, const char *name, svc_experiment_request *r,
                                       svc_error *err);
/* Renames experiment id (svc_experiment_manage.c). SVC_NOT_FOUND (field "id"), SVC_CONFLICT (field
 * "name") when another experiment has the name; the caller checks the name. */
svc_status svc_experiments_rename(struct app *a, long long id, const char *name, svc_error *err);
/* Deletes experiment id. with_runs: its runs go too, each with its metrics and files (as DELETE
 * /api/runs/{id}), refused whole (SVC_CONFLICT, field "runs") while any of them is queued or
 * running; else its runs stay, as runs of no experiment. SVC_NOT_FOUND (field "id"). */
svc_status svc_experiments_delete(struct app *a, long long id, int with_runs, svc_error *err);

#endif
