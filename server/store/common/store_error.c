/* The thread's last store error (store_error.h). */
#include "store/common/store_error.h"

#include <stdarg.h>
#include <stdio.h>

#include "util/log.h"

static _Thread_local char last_error[256];
static _Thread_local int unavailable;

const char *store_last_error(void) { return last_error; }
int store_unavailable(void) { return unavailable; }

store_status store_fail_as(int unreachable, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    log_error("store: %s", last_error);
    unavailable = unreachable;
    return STORE_ERROR;
}
