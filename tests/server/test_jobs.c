/* The job system's moving parts under concurrency (also built with ThreadSanitizer by `make test`):
 * producers pushing metrics and events while readers drain them, the writer flushing to SQLite,
 * probe calls from many threads, training submissions and cancels. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/harness.h"
#include "../support/test.h"
#include "core/corpora.h"
#include "core/events.h"
#include "jobs/jobs.h"
#include "jobs/metrics_writer.h"
#include "store/store.h"

static store *st;
static events *ev;
static metrics_writer *mw;
static long long run_id;

#define PRODUCERS 4
#define STEPS 500

static void *producer(void *arg) {
    int k = (int)(long)arg;
    store_metric pts[3];
    char keys[3][16];
    for (int s = 1; s <= STEPS; s++) {
        for (int i = 0; i < 3; i++) {
            pts[i].run_id = run_id;
            pts[i].step = s;
            snprintf(keys[i], sizeof keys[i], "p%d.%d", k, i);
            pts[i].key = keys[i]; /* the writer keeps its own copy */
            pts[i].value = s * 0.5 + i;
            pts[i].wall_time = s;
        }
        metrics_writer_push(mw, pts, 3);
        metrics_writer_progress(mw, run_id, s, 0);
        events_publish(ev, run_id, "metrics", "{\"x\":1}");
    }
    return NULL;
}

static atomic_int stop_readers;
static void noop_wake(void *ctx) { (void)ctx; }
static void *reader(void *arg) {
    (void)arg;
    events_sub *s = events_subscribe(ev, run_id, 0, noop_wake, NULL);
    char buf[4096];
    long got = 0;
    while (!atomic_load(&stop_readers)) {
        ssize_t n = events_sub_read(s, buf, sizeof buf);
        if (n < 0) break; /* dropped for lagging: allowed */
        got += n;
    }
    events_unsubscribe(s);
    return (void *)got;
}

TEST(writer_and_bus_under_concurrent_producers) {
    pthread_t p[PRODUCERS], r[2];
    atomic_store(&stop_readers, 0);
    for (int i = 0; i < 2; i++) pthread_create(&r[i], NULL, reader, NULL);
    for (long i = 0; i < PRODUCERS; i++) pthread_create(&p[i], NULL, producer, (void *)i);
    for (int i = 0; i < PRODUCERS; i++) pthread_join(p[i], NULL);
    metrics_writer_flush(mw);
    atomic_store(&stop_readers, 1);
    for (int i = 0; i < 2; i++) pthread_join(r[i], NULL);
    json_t *sum = NULL;
    CHECK(store_metrics_summary(st, run_id, &sum) == STORE_OK);
    CHECK_EQ_INT(json_object_size(sum), PRODUCERS * 3);
    const char *key;
    json_t *v;
    json_object_foreach(sum, key, v) CHECK_EQ_INT(json_integer_value(json_object_get(v, "count")), STEPS);
    json_decref(sum);
    CHECK_EQ_INT(metrics_writer_dropped(mw), 0);
    json_t *run = NULL;
    CHECK(store_run_get(st, run_id, &run) == STORE_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(run, "step")), STEPS);
    json_decref(run);
}

static atomic_int probe_calls;
static void probe_fn(void *ctx) {
    atomic_fetch_add(&probe_calls, 1);
    *(int *)ctx = 42;
}

typedef struct {
    jobs *j;
    int ok;
} caller_arg;

static void *caller(void *arg) {
    caller_arg *c = arg;
    for (int i = 0; i < 20; i++) {
        int out = 0;
        if (jobs_probe_call(c->j, probe_fn, &out) == 0 && out == 42) c->ok++;
    }
    return NULL;
}

TEST(probe_calls_and_training_submissions_from_many_threads) {
    char dir[256];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    corpora *co = corpora_start(st, dir, "/nonexistent");
    CHECK(co);
    jobs_config jc = {.store = st,
                      .events = ev,
                      .writer = mw,
                      .corpora = co,
                      .data_dir = dir,
                      .train_workers = 2,
                      .probe_workers = 2,
                      .compute_threads = 2,
                      .max_queued = 8};
    jobs *j = jobs_start(&jc);
    CHECK(j);
    atomic_store(&probe_calls, 0);
    pthread_t t[4];
    caller_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i].j = j;
        args[i].ok = 0;
        pthread_create(&t[i], NULL, caller, &args[i]);
    }
    /* Runs whose corpus does not exist fail fast: the workers take them, mark them, move on. */
    long long ids[6];
    for (int i = 0; i < 6; i++) {
        store_new_run nr = {.name = "x",
                            .config_json = "{\"corpus\":\"missing\",\"steps\":5}",
                            .seed = 1,
                            .total_steps = 5,
                            .corpus = "missing"};
        CHECK(store_run_create(st, &nr, &ids[i]) == STORE_OK);
        CHECK(jobs_submit_run(j, ids[i]) == 0);
        jobs_cancel_run(j, ids[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(args[i].ok, 20);
    CHECK_EQ_INT(atomic_load(&probe_calls), 80);
    for (int tries = 0; tries < 500; tries++) {
        int queued, running;
        double tps;
        jobs_stats(j, &queued, &running, &tps);
        if (!queued && !running) break;
        usleep(10000);
    }
    jobs_stop(j);
    for (int i = 0; i < 6; i++) {
        json_t *run = NULL;
        CHECK(store_run_get(st, ids[i], &run) == STORE_OK);
        CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "failed"));
        CHECK(strstr(json_string_value(json_object_get(run, "error")), "missing"));
        json_decref(run);
    }
    corpora_free(co);
}

/* A run the worker cannot read (the store fails) must not stay queued with nobody to train it. */
TEST(a_run_that_cannot_be_read_does_not_stay_queued) {
    char dir[256], path[320], err[256];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/broken.db", dir);
    store *bst;
    CHECK(store_open(&bst, path, err, sizeof err) == STORE_OK);
    store_new_run nr = {.name = "unreadable",
                        .config_json = "{\"corpus\":\"small\",\"steps\":5}",
                        .seed = 1,
                        .total_steps = 5,
                        .corpus = "small"};
    long long id;
    CHECK(store_run_create(bst, &nr, &id) == STORE_OK);
    /* Reading a run joins its tags: without their table every read of a run fails. */
    sqlite3 *db;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "DROP TABLE run_tags", NULL, NULL, NULL) == SQLITE_OK);
    json_t *row = NULL;
    CHECK(store_run_get(bst, id, &row) == STORE_ERROR);
    corpora *co = corpora_start(bst, dir, "/nonexistent");
    CHECK(co);
    jobs_config jc = {.store = bst,
                      .events = ev,
                      .writer = mw,
                      .corpora = co,
                      .data_dir = dir,
                      .train_workers = 1,
                      .probe_workers = 1,
                      .compute_threads = 1,
                      .max_queued = 4};
    jobs *j = jobs_start(&jc);
    CHECK(j);
    CHECK(jobs_submit_run(j, id) == 0);
    char status[32] = "";
    for (int tries = 0; tries < 300; tries++) {
        usleep(10000);
        int queued, running;
        double tps;
        jobs_stats(j, &queued, &running, &tps);
        if (queued || running) continue;
        sqlite3_stmt *q;
        CHECK(sqlite3_prepare_v2(db, "SELECT status FROM runs WHERE id = ?", -1, &q, NULL) == SQLITE_OK);
        sqlite3_bind_int64(q, 1, id);
        if (sqlite3_step(q) == SQLITE_ROW)
            snprintf(status, sizeof status, "%s", (const char *)sqlite3_column_text(q, 0));
        sqlite3_finalize(q);
        if (strcmp(status, "queued") != 0) break;
    }
    jobs_stop(j);
    corpora_free(co);
    store_close(bst);
    sqlite3_close(db);
    CHECK_MSG(!strcmp(status, "failed"), "the run is '%s' with no job left to run it", status);
}

int main(void) {
    char dir[256], path[320], err[256];
    if (harness_tempdir(dir, sizeof dir) < 0) return 1;
    snprintf(path, sizeof path, "%s/jobs.db", dir);
    if (store_open(&st, path, err, sizeof err) != STORE_OK) {
        printf("FAIL setup: %s\n", err);
        return 1;
    }
    store_new_run nr = {.name = "metrics", .config_json = "{}", .seed = 1, .total_steps = STEPS};
    store_run_create(st, &nr, &run_id);
    ev = events_new(256, 3600);
    mw = metrics_writer_start(st, 50, 100, 1u << 20);
    RUN(writer_and_bus_under_concurrent_producers);
    RUN(probe_calls_and_training_submissions_from_many_threads);
    RUN(a_run_that_cannot_be_read_does_not_stay_queued);
    metrics_writer_stop(mw);
    events_free(ev);
    store_close(st);
    return test_summary();
}
