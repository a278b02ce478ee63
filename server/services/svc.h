/* What the services (svc_runs, svc_experiments, svc_probes) share: how they say no.
 *
 * A service holds the domain rules between the HTTP handlers and the store, the job queues and the
 * engine. It never answers a request itself: it returns SVC_OK, or a status with an svc_error that
 * the handler turns into the API's error reply (api_reply_svc_error in api/api.h). */
#ifndef ATTNLAB_SVC_H
#define ATTNLAB_SVC_H

typedef enum {
    SVC_OK = 0,
    SVC_INVALID,   /* the request cannot be done as asked (422) */
    SVC_NOT_FOUND, /* 404 */
    SVC_CONFLICT,  /* the state forbids it (409) */
    SVC_BUSY,      /* a queue is full: try again after retry_after seconds (429) */
    SVC_FAILED,    /* the service failed: the store, the system (500) */
} svc_status;

typedef struct {
    svc_status status;
    const char *code; /* the API's error code: "invalid_field", "too_large", "queue_full", ... */
    char field[96];   /* the field at fault, "" for none */
    char message[512];
    int retry_after; /* seconds, for SVC_BUSY */
} svc_error;

/* Fills err (code, field may be NULL) and returns status. */
svc_status svc_fail(svc_error *err, svc_status status, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* SVC_FAILED for a store failure, with the store's message. */
svc_status svc_store_failed(svc_error *err);

#endif
