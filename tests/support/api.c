#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

json_t *api_call(harness_server *s, const char *method, const char *path, const char *body, long *status) {
    harness_response r;
    const char *hdr[] = {"Content-Type: application/json", NULL};
    int rc = harness_request(s, method, path, body, body ? strlen(body) : 0, hdr, &r);
    if (status) *status = rc == 0 ? r.status : -1;
    json_t *j = rc == 0 ? harness_json(&r) : NULL;
    harness_response_free(&r);
    return j;
}

long long api_start_tiny_run(harness_server *s, const char *extra, const char *name) {
    char body[2048];
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"config\":{" TINY_CONFIG "%s%s}}", name ? name : "tiny",
             extra && *extra ? "," : "", extra ? extra : "");
    long st;
    json_t *j = api_call(s, "POST", "/api/runs", body, &st);
    long long id = st == 201 ? json_integer_value(json_object_get(json_object_get(j, "run"), "id")) : -1;
    if (st != 201) {
        char *t = j ? json_dumps(j, 0) : NULL;
        printf("# start run failed: %ld %s\n", st, t ? t : "");
        free(t);
    }
    json_decref(j);
    return id;
}

static int is_final(const char *st) {
    return !strcmp(st, "succeeded") || !strcmp(st, "failed") || !strcmp(st, "cancelled") || !strcmp(st, "interrupted");
}

char *api_wait_status(harness_server *s, long long id, const char *status, int timeout_ms) {
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        json_t *j = api_call(s, "GET", path, NULL, NULL);
        const char *st = json_string_value(json_object_get(json_object_get(j, "run"), "status"));
        char *copy = st ? strdup(st) : NULL;
        json_decref(j);
        if (copy && (!strcmp(copy, status) || is_final(copy))) return copy;
        free(copy);
        sleep_ms(20);
    }
    return NULL;
}

int api_wait_step(harness_server *s, long long id, int step, int timeout_ms) {
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        json_t *j = api_call(s, "GET", path, NULL, NULL);
        json_t *run = json_object_get(j, "run");
        int got = (int)json_integer_value(json_object_get(run, "step"));
        const char *st = json_string_value(json_object_get(run, "status"));
        int final = st && is_final(st);
        json_decref(j);
        if (got >= step) return 0;
        if (final) return -1;
        sleep_ms(10);
    }
    return -1;
}

json_t *api_series(harness_server *s, long long id, const char *key) {
    char path[128];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=%s", id, key);
    json_t *j = api_call(s, "GET", path, NULL, NULL);
    json_t *values = json_object_get(json_object_get(json_object_get(j, "series"), key), "values");
    json_t *out = values ? json_incref(values) : NULL;
    json_decref(j);
    return out;
}

const char *api_error_field(json_t *body) {
    const char *f = json_string_value(json_object_get(json_object_get(body, "error"), "field"));
    return f ? f : "";
}
