/* The probes service: runs a probe (or finds the same request answered before in the store), on
 * the probe queue, and stores the result.
 *
 * Model kinds read a run's latest checkpoint through the tokenizer of the run's corpus. Their cache
 * key holds the checkpoint's content hash (SHA-256 of the file's bytes, computed once per file and
 * kept by path, device, inode, size and modification time), so a request is answered from the
 * store exactly when the weights are the same bytes, whatever their timestamps say. */
#ifndef ATTNLAB_SVC_PROBES_H
#define ATTNLAB_SVC_PROBES_H

#include <jansson.h>
#include <stdatomic.h>

#include "engine/probes/probe.h"
#include "services/svc.h"

struct app;

/* Runs `kind` with `params` (NULL or an object, not yet resolved) on run_id's weights (0: none;
 * ignored for kinds that need no model). *id gets the stored probe; *cached is 1 when it was found
 * in the store rather than computed. Errors: SVC_INVALID naming "params.<name>", "params" or
 * "run_id" (and for parameters whose work is over the kind's bound, before the request waits for a
 * probe worker); SVC_BUSY when the probe queue is full; SVC_FAILED (code "probe_failed") when the
 * probe itself failed, or (code "cancelled") when cancel (NULL: never) was set while it waited or
 * ran: nobody waits for the answer, and the probe stopped at its next safe point. */
svc_status svc_probes_run(struct app *a, const probe_kind *kind, const json_t *params, long long run_id,
                          const atomic_int *cancel, long long *id, int *cached, svc_error *err);

#endif
