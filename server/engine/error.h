/* Engine error reporting. The engine never exits or aborts: every fallible function returns
 * an engine_status and, when given a non-NULL engine_error, a one-line human message that the
 * caller (a job, a command, a test) can pass on unchanged. */
#ifndef ENGINE_ERROR_H
#define ENGINE_ERROR_H

#include <stddef.h>

typedef enum {
    ENGINE_OK = 0,
    ENGINE_ERR_NOMEM,     /* an allocation failed */
    ENGINE_ERR_INVALID,   /* a bad argument or configuration value */
    ENGINE_ERR_IO,        /* a file could not be opened, read or written */
    ENGINE_ERR_FORMAT,    /* a file is corrupt or does not match what was asked for */
    ENGINE_ERR_CANCELLED, /* the caller asked the work to stop */
} engine_status;

typedef struct {
    engine_status status;
    char message[256];
} engine_error;

/* Records status and a printf-style message in err (if non-NULL); returns status, so that
 * `return engine_fail(err, ENGINE_ERR_INVALID, "n_head %d does not divide %d", h, c);` reads well. */
engine_status engine_fail(engine_error *err, engine_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *engine_status_name(engine_status status);

#endif
