/* What a client is shown of a run (svc_run_view.h). */
#include "services/svc_run_view.h"

#include <stdio.h>
#include <stdlib.h>

#include "services/app.h"

/* Sets member key of row to live's (none when live has none); -1 when out of memory. */
static int copy_member(json_t *row, const json_t *live, const char *key) {
    json_t *v = json_object_get(live, key);
    return v ? json_object_set(row, key, v) : 0;
}

/* Merges into row (not taken) the live counters and the brief (`brief` stolen; NULL: it is read).
 * -1 when out of memory. */
static int merge(struct app *a, json_t *row, json_t *brief) {
    long long id = json_integer_value(json_object_get(row, "id"));
    json_t *live = jobs_run_live(a->jobs, id);
    int bad = 0;
    if (live) {
        /* A run resuming has step 0 until its checkpoint is loaded: it shows the checkpoint's step
         * meanwhile. */
        json_int_t step = json_integer_value(json_object_get(live, "step")),
                   ckpt = json_integer_value(json_object_get(row, "checkpoint_step"));
        bad |= json_object_set_new(row, "step", json_integer(step > ckpt ? step : ckpt)) < 0;
        bad |= copy_member(row, live, "eta_s") < 0;
        bad |= copy_member(row, live, "tokens_per_s") < 0;
        bad |= copy_member(row, live, "cancel_requested") < 0;
        json_decref(live);
    } else {
        bad |= json_object_set_new(row, "eta_s", json_null()) < 0;
        bad |= json_object_set_new(row, "tokens_per_s", json_null()) < 0;
    }
    if (brief || store_run_brief(a->store, id, &brief) == STORE_OK) bad |= json_object_set_new(row, "last", brief) < 0;
    return bad ? -1 : 0;
}

json_t *svc_run_view(struct app *a, json_t *row) {
    if (row && merge(a, row, NULL) == 0) return row;
    json_decref(row);
    return NULL;
}

int svc_run_views(struct app *a, json_t *runs) {
    size_t n = json_array_size(runs), i;
    long long *ids = malloc((n ? n : 1) * sizeof *ids);
    json_t *briefs = NULL, *r;
    if (ids) {
        json_array_foreach(runs, i, r) ids[i] = json_integer_value(json_object_get(r, "id"));
        if (store_run_briefs(a->store, ids, n, &briefs) != STORE_OK || json_array_size(briefs) != n) {
            json_decref(briefs);
            briefs = NULL;
        }
    }
    free(ids);
    int bad = 0;
    json_array_foreach(runs, i, r) bad |= merge(a, r, json_incref(json_array_get(briefs, i)));
    json_decref(briefs);
    return bad ? -1 : 0;
}

void svc_run_cache_key(const json_t *row, const char *what, char *key, size_t cap) {
    const char *status = json_string_value(json_object_get(row, "status"));
    int n = snprintf(key, cap, "%lld|%s|%lld|%.17g|%.17g|%s", (long long)json_integer_value(json_object_get(row, "id")),
                     status ? status : "", (long long)json_integer_value(json_object_get(row, "step")),
                     json_number_value(json_object_get(row, "created_at")),
                     json_number_value(json_object_get(row, "finished_at")), what);
    if (!store_run_status_ended(status) || n < 0 || (size_t)n >= cap) key[0] = 0;
}
