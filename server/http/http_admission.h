/* Admission and limits (http_admission.c): the front door and the connection table.
 *
 * One thread (the front door) owns the listening socket. It accepts, applies the connection limits
 * (max_connections, max_connections_per_ip: a new connection past one first evicts the oldest idle
 * connection of the same address, or of any address for the total; with none idle it is answered
 * 429 or 503 as JSON and closed) and the request-head deadline, checks each connection's first
 * request head with http_head_check, and only then hands the connection to libmicrohttpd. From
 * there on the table follows the connection through libmicrohttpd's notifications and the request
 * life cycle below, so that the same limits hold for kept-alive connections and streams.
 *
 * Every function takes the server (http_impl.h) whose `adm` member it works on; all are safe from
 * any thread unless said otherwise. */
#ifndef ATTNLAB_HTTP_ADMISSION_H
#define ATTNLAB_HTTP_ADMISSION_H

#include <microhttpd.h>
#include <pthread.h>
#include <sys/socket.h>

#include "http/http.h"

/* Where a connection is. PENDING: accepted by the front door, its head not yet complete;
 * HANDOFF: given to libmicrohttpd, not yet seen there; IDLE: libmicrohttpd's, waiting for a
 * request; BUSY: a request is being handled; STREAM: carries a streaming reply; CLOSING: answered
 * with an error by the front door and being drained. */
typedef enum { CONN_FREE = 0, CONN_PENDING, CONN_HANDOFF, CONN_IDLE, CONN_BUSY, CONN_STREAM, CONN_CLOSING } conn_state;

typedef struct {
    conn_state state;
    int fd;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    unsigned char ip[16]; /* IPv4 as v4-mapped IPv6, so one address has one key */
    double since;         /* monotonic seconds when it entered its state */
    double deadline;      /* PENDING, IDLE: the head deadline; CLOSING: end of draining; HANDOFF: expiry */
    double accepted;
    int partial; /* IDLE: the request line of a next request has arrived */
    int served;  /* requests completed on this connection */
    int killed;  /* IDLE: shut down by the front door, libmicrohttpd closes it next */
} http_conn;

typedef struct {
    unsigned max_conn, max_per_ip, max_streams;
    double header_timeout_s;
    pthread_mutex_t lock; /* the table below; PENDING and CLOSING slots change only in the front door */
    http_conn *conns;
    unsigned n_slots;
    pthread_t front;
    int front_started;
    int wake_pipe[2];
} http_admission;

/* Sets the limits from cfg (0 picks the defaults of http.h) and allocates the table. -1 when out
 * of memory or descriptors (nothing to free then). */
int http_admission_init(http_server *s, const http_config *cfg);
/* Starts the front door on the server's listening socket (non-blocking) and daemon. -1 on failure. */
int http_admission_start(http_server *s);
/* Stops accepting: the front door ends, with the connections it still holds. */
void http_admission_stop(http_server *s);
void http_admission_destroy(http_server *s);

/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback (cls: the server). */
void http_admission_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                                  enum MHD_ConnectionNotificationCode toe);
/* The slot of a connection libmicrohttpd took up from the front door; NULL if untracked. */
http_conn *http_admission_conn_of(struct MHD_Connection *connection);

/* The request life cycle on a tracked connection (c may be NULL: then each does nothing).
 * A request line arrived (the connection is no longer idle for eviction purposes). */
void http_admission_request_line(http_server *s, http_conn *c);
/* The request is being handled: 0, or -1 when the front door has already shut the connection
 * down (the caller drops the request). */
int http_admission_request_begins(http_server *s, http_conn *c);
/* The request ended: the connection waits for the next head, header_timeout from now. */
void http_admission_request_ends(http_server *s, http_conn *c);
/* The connection now carries a streaming reply, counted against max_streams instead of the
 * connection limits: 0, or -1 when max_streams are open already (nothing changed). */
int http_admission_enter_stream(http_server *s, http_conn *c);
unsigned http_admission_max_streams(const http_server *s);

#endif
