/* Helpers for the probe tests: run a kind and read its tables by name. */
#ifndef TEST_PROBE_UTIL_H
#define TEST_PROBE_UTIL_H

#include <jansson.h>
#include <string.h>
#include <time.h>

#include "probes/probe.h"

/* Runs kind with params given as JSON text (NULL: defaults); NULL result on any error. */
static inline json_t *tp_run(const char *kind, const char *params_json, probe_error *err) {
    json_t *params = params_json ? json_loads(params_json, 0, NULL) : NULL;
    json_t *res = NULL;
    probe_error e;
    if (!err) err = &e;
    if (params_json && !params) {
        snprintf(err->message, sizeof err->message, "test params are not JSON");
        return NULL;
    }
    engine_status st = probe_run(kind, params, NULL, &res, err);
    json_decref(params);
    return st == ENGINE_OK ? res : NULL;
}

static inline json_t *tp_table(const json_t *res, const char *name) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(res, "tables"), i, t) {
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0) return t;
    }
    return NULL;
}

static inline int tp_col(const json_t *table, const char *col) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(table, "columns"), i, c) {
        if (strcmp(json_string_value(c), col) == 0) return (int)i;
    }
    return -1;
}

static inline int tp_nrows(const json_t *table) { return (int)json_array_size(json_object_get(table, "rows")); }

/* Cell (row, col) as a number; NAN when absent or not a number. */
static inline double tp_cell(const json_t *table, int row, const char *col) {
    int c = tp_col(table, col);
    if (c < 0) return NAN;
    json_t *v = json_array_get(json_array_get(json_object_get(table, "rows"), (size_t)row), (size_t)c);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static inline double tp_sum(const json_t *res, const char *key) {
    json_t *v = json_object_get(json_object_get(res, "summary"), key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A yes/no summary figure: 1 for JSON true, 0 for false, -1 when it is not a JSON boolean (a 0/1
 * number included). */
static inline int tp_bool(const json_t *res, const char *key) {
    json_t *v = json_object_get(json_object_get(res, "summary"), key);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

/* CPU time of the whole process (every thread) in milliseconds: what a probe costs, which other
 * work on a shared machine does not inflate as it does the wall time. */
static inline double tp_cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#endif
