/* Streams (http_stream.c): streaming replies (Server-Sent Events), whose public side is
 * http_reply_stream and http_stream_wake in http.h. The server keeps the live ones in a list so
 * that stopping can end them. */
#ifndef ATTNLAB_HTTP_STREAM_H
#define ATTNLAB_HTTP_STREAM_H

#include <pthread.h>

#include "http/http.h"

typedef struct {
    pthread_mutex_t lock;
    http_stream *head;
} http_streams;

void http_streams_init(http_streams *l);
void http_streams_destroy(http_streams *l);
/* Wakes every live stream; each then sees the server stopping and ends. */
void http_streams_wake_all(http_streams *l);

#endif
