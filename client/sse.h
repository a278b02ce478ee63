/* An incremental Server-Sent Events parser (the WHATWG event-stream format): bytes go in as they
 * arrive, split anywhere; complete events come out through a callback.
 *
 * Lines end with LF, CRLF or CR. "event:", "data:" (joined with '\n' when repeated) and "id:" are
 * kept; comment lines (':' first) and other fields are ignored; a blank line dispatches the event
 * when it has data. The last id seen survives across events (it is what Last-Event-ID resends). */
#ifndef ATTNLAB_SSE_H
#define ATTNLAB_SSE_H

#include <stddef.h>

#define SSE_MAX_LINE (1 << 20) /* a longer line is cut there (the rest of it is dropped) */

typedef struct {
    const char *event; /* "message" when the stream named none */
    const char *data;  /* NUL-terminated */
    size_t data_len;
    const char *id; /* the last event id so far ("" if none) */
} sse_event;

/* Returns 0 to go on, a positive value to stop: sse_feed then returns that value at once. */
typedef int (*sse_event_fn)(const sse_event *ev, void *user);

typedef struct {
    char *line;
    size_t line_len, line_cap;
    int line_cut;
    int after_cr; /* the previous byte was CR: an LF right after it ends nothing */
    char *data;
    size_t data_len, data_cap;
    int has_data;
    char event[64];
    char id[128];
    long comments; /* comment lines seen (keep-alive pings) */
} sse_parser;

void sse_init(sse_parser *p);
/* Feeds bytes. Returns 0, the callback's non-zero value when it asked to stop, or -1 when out of
 * memory (the parser stays usable; the event being built is lost). */
int sse_feed(sse_parser *p, const char *buf, size_t len, sse_event_fn fn, void *user);
/* Forgets a half-received event (after a dropped connection); keeps the last id. */
void sse_reset_partial(sse_parser *p);
void sse_free(sse_parser *p);

#endif
