/* The route table of attnlabd: one line per route. GET also answers HEAD. */
#include "app.h"

#include <time.h>

double app_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

int routes_register(http_server *s) {
    int rc = 0;
    rc |= http_route(s, "GET", "/api/health", api_health);
    return rc;
}
