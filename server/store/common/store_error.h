/* The thread's last store error, shared by both backends: what store_last_error() and
 * store_unavailable() (store.h) report. A backend records a failure here once, where it happens,
 * and returns STORE_ERROR; the message is logged as it is recorded. */
#ifndef ATTNLAB_STORE_ERROR_H
#define ATTNLAB_STORE_ERROR_H

#include "store/store.h"

/* Records the message (printf-style) as this thread's last error, logs it, and returns STORE_ERROR;
 * unreachable says whether the failure was the database being out of reach (store_unavailable). */
store_status store_fail_as(int unreachable, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for a failure that is not the database being unreachable (out of memory, a bad value). */
#define store_fail(...) store_fail_as(0, __VA_ARGS__)

#endif
