/* Idempotency keys: a client that creates a run or an experiment may send an Idempotency-Key
 * header, so that a retry whose first answer was lost (a kill right after the commit, a dropped
 * connection) gets that first answer instead of creating a duplicate. The key is recorded in the
 * creating transaction (store.h: store_idempotency) with a hash of the request: the same key with
 * the same request is a retry, answered with what the first one created; the same key with another
 * request (or to create another kind of thing) is refused. */
#ifndef ATTNLAB_SVC_IDEMPOTENCY_H
#define ATTNLAB_SVC_IDEMPOTENCY_H

#include <jansson.h>

#include "services/svc.h"
#include "store/store.h"

struct app;

/* Longest key taken, in bytes (printable ASCII). */
#define SVC_IDEMPOTENCY_KEY_MAX 255

typedef struct {
    char key[SVC_IDEMPOTENCY_KEY_MAX + 1];
    char request_hash[65];
    const char *kind;         /* "run" or "experiment" */
    long long replay;         /* > 0: a retry; the id the first request with the key created */
    store_idempotency record; /* what the creation records (points into this struct) */
} svc_idem;

/* Prepares the key of a creation of `kind` from the request body (any JSON value; its members'
 * order does not matter): SVC_INVALID ("invalid_field" on the field Idempotency-Key) for a key that
 * is empty, too long or not printable ASCII; SVC_INVALID ("idempotency_key_reused") when the key
 * was recorded for another request; otherwise SVC_OK, with out->replay set when it is a retry of a
 * creation that committed (answer with that), 0 when the creation is to be done (pass
 * &out->record to it). */
svc_status svc_idempotency_begin(struct app *a, const char *kind, const char *key, const json_t *request, svc_idem *out,
                                 svc_error *err);

/* After a creation with the key answered STORE_CONFLICT: SVC_OK with idem->replay set when another
 * request with the key committed alongside it (a retry), SVC_NOT_FOUND when the key is not recorded
 * (the conflict was something else: the caller says what), or the error (the key used for another
 * request, the store failing). */
svc_status svc_idempotency_settle(struct app *a, svc_idem *idem, svc_error *err);

#endif
