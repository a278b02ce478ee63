#include "api.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"

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

int api_cancel_run(harness_server *s, long long id, int timeout_ms) {
    char path[96];
    long code;
    snprintf(path, sizeof path, "/api/runs/%lld/cancel", id);
    json_decref(api_call(s, "POST", path, NULL, &code));
    if (code != 202) return -1;
    char *st = api_wait_status(s, id, "cancelled", timeout_ms);
    int ok = st && !strcmp(st, "cancelled");
    free(st);
    if (!ok) return -1;
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_t *j = api_call(s, "GET", path, NULL, NULL);
    int step = (int)json_integer_value(json_object_get(json_object_get(j, "run"), "step"));
    json_decref(j);
    return step;
}

/* The loss series of a run: its steps and values (both owned by the caller), or -1. */
static int loss_points(harness_server *s, long long id, json_t **steps, json_t **values) {
    char path[128];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=loss", id);
    json_t *j = api_call(s, "GET", path, NULL, NULL);
    json_t *series = json_object_get(json_object_get(j, "series"), "loss");
    *steps = json_incref(json_object_get(series, "steps"));
    *values = json_incref(json_object_get(series, "values"));
    json_decref(j);
    return *steps && *values ? 0 : -1;
}

int api_same_losses(harness_server *sa, long long a, harness_server *sb, long long b, int n, char *why, size_t len) {
    json_t *st[2] = {NULL, NULL}, *v[2] = {NULL, NULL};
    int ok = loss_points(sa, a, &st[0], &v[0]) == 0 && loss_points(sb, b, &st[1], &v[1]) == 0;
    if (!ok) snprintf(why, len, "a loss series could not be read");
    for (int k = 0; ok && k < 2; k++) {
        if (json_array_size(v[k]) < (size_t)n || json_array_size(st[k]) != json_array_size(v[k])) {
            snprintf(why, len, "run %lld has %zu loss points, fewer than %d", k ? b : a, json_array_size(v[k]), n);
            ok = 0;
        }
        for (int i = 0; ok && i < n; i++)
            if (json_integer_value(json_array_get(st[k], (size_t)i)) != i + 1) {
                snprintf(why, len, "run %lld: loss point %d is step %lld", k ? b : a, i + 1,
                         (long long)json_integer_value(json_array_get(st[k], (size_t)i)));
                ok = 0;
            }
    }
    for (int i = 0; ok && i < n; i++) {
        double x = json_number_value(json_array_get(v[0], (size_t)i)),
               y = json_number_value(json_array_get(v[1], (size_t)i));
        if (memcmp(&x, &y, sizeof x) != 0) {
            snprintf(why, len, "step %d: %.17g (run %lld) vs %.17g (run %lld)", i + 1, x, a, y, b);
            ok = 0;
        }
    }
    for (int k = 0; k < 2; k++) {
        json_decref(st[k]);
        json_decref(v[k]);
    }
    return ok;
}

json_t *api_series(harness_server *s, long long id, const char *key) {
    char path[600];
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

json_t *api_expect(harness_server *s, const char *method, const char *path, const char *body, long want) {
    long status;
    json_t *j = api_call(s, method, path, body, &status);
    if (status != want) {
        char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
        printf("# %s %s: HTTP %ld (wanted %ld) %s\n", method, path, status, want, t ? t : "");
        free(t);
        json_decref(j);
        return NULL;
    }
    return j ? j : json_object();
}

long api_status(harness_server *s, const char *method, const char *path, const char *body) {
    long status;
    json_decref(api_call(s, method, path, body, &status));
    return status;
}

long long api_create_experiment(harness_server *s, const char *body, json_t **runs) {
    if (runs) *runs = NULL;
    json_t *e = api_expect(s, "POST", "/api/experiments", body, 201);
    long long id = json_integer_value(json_object_get(json_object_get(e, "experiment"), "id"));
    if (!e || id <= 0) id = -1;
    if (runs && id > 0) *runs = json_incref(json_object_get(e, "runs"));
    json_decref(e);
    return id;
}

int api_wait_runs(harness_server *s, const json_t *runs, const char *status, int timeout_ms) {
    int missed = 0;
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
        long long id = json_integer_value(json_object_get(r, "id"));
        char *st = api_wait_status(s, id, status, timeout_ms);
        if (!st || strcmp(st, status)) {
            printf("# run %lld: %s, not %s\n", id, st ? st : "(timed out)", status);
            missed++;
        }
        free(st);
    }
    return missed;
}

int api_suite_main(harness_server *s, const char *const *extra_args, void (*cases)(void)) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (harness_start(s, NULL, extra_args) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(s);
        curl_global_cleanup();
        return 1;
    }
    cases();
    int rc = test_summary();
    if (rc) harness_dump_log(s);
    harness_stop(s);
    curl_global_cleanup();
    return rc;
}
