/* The state the services share (services/svc_*.h take it as their first argument). Built by
 * cmd_serve.c at start-up: the pointers are set once before the HTTP server starts and then only
 * read; each module behind them is safe to call from any thread. Handlers do not see it whole: the
 * API layer hands them an api_ctx (api/api.h), which passes it on to the services they call. */
#ifndef ATTNLAB_APP_H
#define ATTNLAB_APP_H

#include <stddef.h>

#include "core/corpora.h"
#include "core/events.h"
#include "jobs/jobs.h"
#include "store/store.h"
#include "services/svc.h"
#include "services/svc_idempotency.h"

typedef struct app {
    store *store;
    events *events;
    corpora *corpora;
    jobs *jobs;
    const char *data_dir;   /* checkpoints, weights, corpora: the data or the shared artefact directory */
    size_t max_model_bytes; /* larger estimated models are refused before queueing */
} app;

double app_now(void); /* wall-clock Unix seconds */

#endif
