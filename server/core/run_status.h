/* A run's status as the live streams carry it: the one "status" event that the jobs that train a
 * run, the cluster's relay of other nodes' runs, runs trained elsewhere and a stream that opens on
 * an ended run all send, built and published the same way. */
#ifndef ATTNLAB_RUN_STATUS_H
#define ATTNLAB_RUN_STATUS_H

#include <jansson.h>

#include "core/events.h"
#include "store/store.h"

/* The data of run's status event, one line of JSON: {"run_id","status","step","total_steps","error"}
 * from the run object (store_run_get's). Malloc'd; NULL when out of memory. */
char *run_status_event(const json_t *run);

/* Reads run run_id from st and publishes its status event on ev: as the run's last event when its
 * status has ended (a reader of that run alone then ends its stream). Nothing when the run cannot
 * be read or memory runs out (a stream then learns the status from its next read of the run). */
void run_status_publish(events *ev, store *st, long long run_id);

#endif
