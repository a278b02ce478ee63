#include "error.h"

#include <stdarg.h>
#include <stdio.h>

engine_status engine_fail(engine_error *err, engine_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

const char *engine_status_name(engine_status status) {
    switch (status) {
    case ENGINE_OK: return "ok";
    case ENGINE_ERR_NOMEM: return "out_of_memory";
    case ENGINE_ERR_INVALID: return "invalid";
    case ENGINE_ERR_IO: return "io";
    case ENGINE_ERR_FORMAT: return "format";
    case ENGINE_ERR_CANCELLED: return "cancelled";
    }
    return "unknown";
}
