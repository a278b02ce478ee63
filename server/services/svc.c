#include "services/svc.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "services/app.h"
#include "store/store.h"

double app_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

svc_status svc_fail(svc_error *err, svc_status status, const char *code, const char *field, const char *fmt, ...) {
    err->status = status;
    err->code = code;
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->retry_after = 0;
    return status;
}

svc_status svc_store_failed(svc_error *err) {
    if (store_unavailable())
        return svc_fail(err, SVC_FAILED, "unavailable", NULL, "the database cannot be reached: %s", store_last_error());
    return svc_fail(err, SVC_FAILED, "internal", NULL, "the database failed: %s", store_last_error());
}
