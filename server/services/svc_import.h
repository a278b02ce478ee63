/* Importing a bundle: an experiment exported by GET /api/experiments/{id}/bundle (here or on another
 * server) stored again as it was — the experiment, every run with its config, variant, replicate,
 * seed, final status, provenance and metric points — without training anything. The runs are
 * marked external (no job ever trains them) and their provenance gains "imported_from" (the
 * exporting run's id and the bundle's experiment id), so statistics, figures, bundles and the
 * dashboard answer for them exactly as for the exported runs. results/ uses it to regenerate every
 * figure the README quotes from the bundles kept in the tree (scripts/results.py). */
#ifndef ATTNLAB_SVC_IMPORT_H
#define ATTNLAB_SVC_IMPORT_H

#include <jansson.h>
#include <stddef.h>

#include "services/svc.h"

struct app;

#define SVC_IMPORT_MAX_BYTES (64u << 20) /* the bundle's JSON text */
#define SVC_IMPORT_MAX_RUNS 1024
#define SVC_IMPORT_MAX_POINTS 2000000 /* as many as one bundle may hold (api_bundle.c) */

/* Reads the bundle's JSON text from file `path` and stores it: on SVC_OK *out is
 * {"experiment":{…},"runs":[{"id","variant","replicate","imported_from"}…],"points":n}. The name is
 * `name` when non-NULL (SVC_CONFLICT, field "name", when another experiment has it), else the
 * bundle's (or, when that is in use, the first free "name (2)", "name (3)", …). Everything is checked before anything
 * is stored (a bundle that is not one, a run without an ended status, a bad key, step or value: SVC_INVALID naming the
 * first bad member as "runs[i].series.<key>"); a store failure midway removes what was stored.
 * SVC_FAILED when the file cannot be read, memory runs out or the store fails. */
svc_status svc_import_bundle(struct app *a, const char *path, const char *name, json_t **out, svc_error *err);

#endif
