/* Text and time helpers of the HTTP layer (http_text.c): percent-decoding, log-safe copies of
 * request bytes, monotonic clocks. Pure functions, safe from any thread. The public ones
 * (http_utf8_clean, http_parse_event_id) are declared in http.h. */
#ifndef ATTNLAB_HTTP_TEXT_H
#define ATTNLAB_HTTP_TEXT_H

#include <stddef.h>
#include <time.h>

/* A malloc'd copy of s; NULL when out of memory. */
char *http_strdup(const char *s);
/* Percent-decodes src[0..len) into dst (at least len+1 bytes); '+' becomes ' ' when plus_is_space.
 * Returns the decoded length, or -1 on a malformed escape or a decoded NUL byte. */
long http_url_decode(const char *src, size_t len, char *dst, int plus_is_space);
/* A request path fit for a log line: printable ASCII, every other byte as \xHH, cut to fit. */
const char *http_log_safe(const char *src, char *dst, size_t cap);
/* Monotonic seconds, and milliseconds since t0 (CLOCK_MONOTONIC). */
double http_mono_now(void);
double http_elapsed_ms(const struct timespec *t0);

#endif
