/* The event bus behind the live streams (Server-Sent Events).
 *
 * Publishers (training jobs) append to a fixed ring of recent events and never wait for readers:
 * a subscriber that falls further behind than the ring holds is told to resync and dropped.
 * Event ids increase across the process and start from the clock at start-up, so an id from
 * before a restart is older than anything kept and earns a resync rather than wrong data. */
#ifndef ATTNLAB_EVENTS_H
#define ATTNLAB_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct events events;
typedef struct events_sub events_sub;

/* capacity: events kept for late readers; ping_seconds: comment lines that keep idle streams alive
 * and reveal closed ones. NULL when out of memory. */
events *events_new(size_t capacity, int ping_seconds);
void events_free(events *ev);

/* Appends an event (data is one line of JSON, copied). Returns its id, or 0 when out of memory. */
uint64_t events_publish(events *ev, long long run_id, const char *type, const char *data);
/* The same for a run's last event (its final status): a reader of that run alone (run_id > 0)
 * ends its stream after reading it; readers of all runs go on. */
uint64_t events_publish_last(events *ev, long long run_id, const char *type, const char *data);

/* A reader of events for one run (run_id > 0) or all (0). With last_event_id > 0 it starts after
 * that id, else with what is published from now on. wake(ctx) is called (under the bus lock) when
 * there is something to read. */
events_sub *events_subscribe(events *ev, long long run_id, uint64_t last_event_id, void (*wake)(void *), void *ctx);
/* Writes Server-Sent Events text into buf: > 0 bytes, 0 when nothing is due, -1 when the reader
 * has been dropped (after its resync event), its run has ended (after its last event) or the bus
 * is closing. */
ssize_t events_sub_read(events_sub *sub, char *buf, size_t max);
/* For a reader of one run that has already ended: once it has read what is due now, its stream
 * ends, with this event (no id; data copied) first unless the run's last event was among what
 * was due. 0, or -1 when out of memory (the stream then goes on). */
int events_sub_end(events_sub *sub, const char *type, const char *data);
/* After this returns, wake is never called again for sub. */
void events_unsubscribe(events_sub *sub);
/* Tells every reader to finish (used at shutdown). */
void events_close_all(events *ev);
size_t events_subscriber_count(events *ev);
/* The id of the last event published (any run), or of none yet: it changes whenever anything is
 * published, so answers built from what events describe can be kept until it moves. */
uint64_t events_last_id(events *ev);
/* The events the ring keeps (events_new's capacity). */
size_t events_capacity(const events *ev);

#endif
