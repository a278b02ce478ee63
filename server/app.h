/* The service's shared state, handed to every HTTP handler as its `app` argument. Built by
 * cmd_serve.c at start-up; the fields are set once before the HTTP server starts and then only
 * read, except through the modules' own thread-safe functions. */
#ifndef ATTNLAB_APP_H
#define ATTNLAB_APP_H

#include "http.h"
#include "store.h"

typedef struct app {
    store *store;
    http_server *http;
    const char *data_dir;
    double started_at; /* Unix seconds */
} app;

/* Registers every API route on the server (server/routes.c). Returns -1 if a route is refused. */
int routes_register(http_server *s);

/* Handlers, grouped by resource (server/api_*.c). */
void api_health(http_request *req, void *app);

double app_now(void); /* wall-clock Unix seconds */

#endif
