/* A run's status event (run_status.h). */
#include "core/run_status.h"

#include <stdlib.h>

#include "util/json_text.h"

char *run_status_event(const json_t *run) {
    json_t *ev = json_pack("{s:O, s:O, s:O, s:O, s:O}", "run_id", json_object_get(run, "id"), "status",
                           json_object_get(run, "status"), "step", json_object_get(run, "step"), "total_steps",
                           json_object_get(run, "total_steps"), "error", json_object_get(run, "error"));
    char *text = ev ? json_text_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    return text;
}

void run_status_publish(events *ev, store *st, long long run_id) {
    json_t *run = NULL;
    if (store_run_get(st, run_id, &run) != STORE_OK) return;
    char *text = run_status_event(run);
    if (text && store_run_status_ended(json_string_value(json_object_get(run, "status"))))
        events_publish_last(ev, run_id, "status", text);
    else if (text)
        events_publish(ev, run_id, "status", text);
    free(text);
    json_decref(run);
}
