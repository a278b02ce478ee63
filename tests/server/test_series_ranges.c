/* Streamed series answers read the store a range at a time: a server whose ranges hold at most
 * RANGE points (ATTNLAB_TEST_RANGE_POINTS) answers GET /api/runs/{id}/metrics (every point, and
 * downsampled), metrics.csv and a bundle of a run many ranges long with exactly the points stored,
 * and GET /metrics' attnlab_series_range_points_max shows that no read held more than RANGE points
 * (a whole-run read held the run's 3000). Checked while the run is running (answers streamed) and
 * once it has ended (answers made whole and kept). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"

#define RANGE 50
#define STEPS 3000

static harness_server srv;
static long long run_id;

static double loss_at(int s) { return 5.0 - s * 1e-3 + ((s * 7919) % 101) * 1e-4; }
static double wall_at(int s) { return 1000.0 + s * 0.25; }

TEST(an_external_run_of_many_ranges_is_logged) {
    json_t *r = api_expect(&srv, "POST", "/api/runs", "{\"source\":\"external\",\"name\":\"ranges\"}", 201);
    CHECK(r);
    run_id = json_integer_value(json_object_get(json_object_get(r, "run"), "id"));
    json_decref(r);
    CHECK(run_id > 0);
    char path[96];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics", run_id);
    for (int s0 = 0; s0 < STEPS; s0 += 400) { /* at most 1000 points a batch: loss, lr, val_loss every 10 */
        json_t *pts = json_array();
        for (int s = s0; s < s0 + 400 && s < STEPS; s++) {
            json_array_append_new(pts, json_pack("{s:i, s:s, s:f, s:f}", "step", s, "key", "loss", "value", loss_at(s),
                                                 "wall_time", wall_at(s)));
            json_array_append_new(pts, json_pack("{s:i, s:s, s:f, s:f}", "step", s, "key", "lr", "value", s % 3 * 0.5,
                                                 "wall_time", wall_at(s)));
            if (s % 10 == 0)
                json_array_append_new(pts, json_pack("{s:i, s:s, s:f, s:f}", "step", s, "key", "val_loss", "value",
                                                     loss_at(s) - 1, "wall_time", wall_at(s) + 0.1));
        }
        json_t *body = json_pack("{s:o}", "points", pts);
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        json_t *ok = api_expect(&srv, "POST", path, text, 200);
        free(text);
        CHECK(ok);
        json_decref(ok);
    }
}

/* The "loss" series of the answer is every stored point, in order. */
static void check_full_loss(const json_t *loss) {
    const json_t *steps = json_object_get(loss, "steps"), *values = json_object_get(loss, "values"),
                 *walls = json_object_get(loss, "wall_times");
    CHECK_EQ_INT(json_array_size(steps), STEPS);
    CHECK_EQ_INT(json_array_size(values), STEPS);
    CHECK_EQ_INT(json_array_size(walls), STEPS);
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "count")), STEPS);
    for (int s = 0; s < STEPS; s++) {
        CHECK_MSG(json_integer_value(json_array_get(steps, (size_t)s)) == s, "step %d", s);
        CHECK_MSG(json_real_value(json_array_get(values, (size_t)s)) == loss_at(s), "value at step %d", s);
        CHECK_MSG(json_real_value(json_array_get(walls, (size_t)s)) == wall_at(s), "wall time at step %d", s);
    }
}

/* The downsampled "loss": each of max_points/2 buckets' first lowest and first highest point, in step
 * order (computed here from the points logged). */
static void check_downsampled_loss(const json_t *loss, int max_points) {
    const json_t *steps = json_object_get(loss, "steps");
    size_t buckets = (size_t)max_points / 2, at = 0;
    for (size_t k = 0; k < buckets; k++) {
        int lo = (int)(k * STEPS / buckets), hi = (int)((k + 1) * STEPS / buckets), imin = lo, imax = lo;
        for (int s = lo; s < hi; s++) {
            if (loss_at(s) < loss_at(imin)) imin = s;
            if (loss_at(s) > loss_at(imax)) imax = s;
        }
        int a = imin < imax ? imin : imax, b = imin < imax ? imax : imin;
        CHECK_MSG(json_integer_value(json_array_get(steps, at++)) == a, "bucket %zu's first pick", k);
        if (a != b) CHECK_MSG(json_integer_value(json_array_get(steps, at++)) == b, "bucket %zu's second pick", k);
    }
    CHECK_EQ_INT(json_array_size(steps), at);
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "count")), STEPS);
}

static void check_answers(void) {
    char path[128];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics", run_id);
    json_t *all = api_expect(&srv, "GET", path, NULL, 200);
    CHECK(all);
    const json_t *series = json_object_get(all, "series");
    check_full_loss(json_object_get(series, "loss"));
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(series, "val_loss"), "count")), STEPS / 10);
    CHECK_EQ_INT(json_object_size(series), 3);
    json_decref(all);

    snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=loss&max_points=200", run_id);
    json_t *down = api_expect(&srv, "GET", path, NULL, 200);
    CHECK(down);
    check_downsampled_loss(json_object_get(json_object_get(down, "series"), "loss"), 200);
    json_decref(down);

    snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=val_loss&since_step=2500", run_id);
    json_t *tail = api_expect(&srv, "GET", path, NULL, 200);
    CHECK(tail);
    const json_t *vl = json_object_get(json_object_get(tail, "series"), "val_loss");
    CHECK_EQ_INT(json_integer_value(json_object_get(vl, "count")), 50);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(vl, "steps"), 0)), 2500);
    json_decref(tail);

    snprintf(path, sizeof path, "/api/runs/%lld/metrics.csv", run_id);
    harness_response csv;
    CHECK(harness_get(&srv, path, &csv) == 0);
    CHECK_EQ_INT(csv.status, 200);
    /* the header and a row per step; step 10's row has every column, step 11's no val_loss */
    size_t lines = 0;
    for (size_t i = 0; i < csv.len; i++) lines += csv.body[i] == '\n';
    CHECK_EQ_INT(lines, STEPS + 1);
    CHECK(!strncmp(csv.body, "step,wall_time,loss,lr,val_loss\n", 32));
    char row[128];
    snprintf(row, sizeof row, "\n10,%.3f,%.9g,0.5,%.9g\n11,", wall_at(10) + 0.1, loss_at(10), loss_at(10) - 1);
    CHECK_MSG(strstr(csv.body, row), "no row %s", row + 1);
    snprintf(row, sizeof row, "\n11,%.3f,%.9g,1,\n", wall_at(11), loss_at(11));
    CHECK_MSG(strstr(csv.body, row), "no row %s", row + 1);
    harness_response_free(&csv);
}

/* The most points one range read held, from GET /metrics. */
static long long range_peak(void) {
    harness_response m;
    if (harness_get(&srv, "/metrics", &m) != 0) return -1;
    const char *at = m.body ? strstr(m.body, "\nattnlab_series_range_points_max ") : NULL;
    long long v = at ? atoll(at + strlen("\nattnlab_series_range_points_max ")) : -1;
    harness_response_free(&m);
    return v;
}

TEST(a_running_runs_answers_are_every_point_read_a_range_at_a_time) {
    check_answers();
    long long peak = range_peak();
    CHECK_MSG(peak >= 1 && peak <= RANGE, "a read held %lld points (the bound: %d)", peak, RANGE);
}

TEST(an_ended_runs_answers_are_the_same_and_kept) {
    char path[96];
    snprintf(path, sizeof path, "/api/runs/%lld", run_id);
    json_decref(api_expect(&srv, "PATCH", path, "{\"status\":\"succeeded\"}", 200));
    check_answers();
    check_answers(); /* from the reply cache */
    long long peak = range_peak();
    CHECK_MSG(peak >= 1 && peak <= RANGE, "a read held %lld points (the bound: %d)", peak, RANGE);
}

static void cases(void) {
    RUN(an_external_run_of_many_ranges_is_logged);
    RUN(a_running_runs_answers_are_every_point_read_a_range_at_a_time);
    RUN(an_ended_runs_answers_are_the_same_and_kept);
}

int main(void) {
    char range[16];
    snprintf(range, sizeof range, "%d", RANGE);
    setenv("ATTNLAB_TEST_RANGE_POINTS", range, 1); /* the server inherits it */
    return api_suite_main(&srv, NULL, cases);
}
