/* The store's contract on PostgreSQL (store.h, store_nodes.h), against a throw-away server: each
 * resource gives back what SQLite gives, the schema is refused when it is not attnlab's or newer,
 * claims hand one run to one claimer, fencing keeps a node that lost its lease from writing, and a
 * database that goes away answers STORE_ERROR marked unavailable, then comes back. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../support/pg.h"
#include "../support/metric_batches.h"
#include "../support/test.h"
#include "store/postgres/pg.h"
#include "store/store.h"
#include "store/store_nodes.h"

static store *open_fresh(char *url, size_t len) {
    if (pgtest_new_db(url, len) < 0) return NULL;
    store *st = NULL;
    char err[512];
    if (store_open(&st, url, err, sizeof err) != STORE_OK) {
        printf("# store_open: %s\n", err);
        return NULL;
    }
    return st;
}

/* Runs SQL on a connection of its own (the way another process would). */
static int raw(const char *url, const char *sql) {
    char err[512];
    pg_conn *c = pg_connect(url, 5, "test", err, sizeof err);
    if (!c) {
        printf("# %s\n", err);
        return -1;
    }
    store_status s = pg_exec_script(c, "raw", sql);
    if (s != STORE_OK) printf("# %s: %s\n", sql, pg_error(c));
    pg_close(c);
    return s == STORE_OK ? 0 : -1;
}

static long long new_run(store *st, const char *name) {
    json_t *tags = json_pack("[s,s]", "b", "a");
    store_new_run nr = {.name = name,
                        .config_json = "{\"steps\":5}",
                        .seed = 7,
                        .total_steps = 5,
                        .corpus = "small",
                        .variant = "rope",
                        .tags = tags};
    long long id = 0;
    store_status s = store_run_create(st, &nr, &id);
    json_decref(tags);
    return s == STORE_OK ? id : -1;
}

TEST(runs_round_trip_like_sqlite) {
    char url[1024];
    store *st = open_fresh(url, sizeof url);
    CHECK(st);
    CHECK_EQ_INT(store_schema_version(st), store_schema_version_supported());
    CHECK(store_ping(st) == STORE_OK);
    long long a = new_run(st, "alpha"), b = new_run(st, "beta");
    CHECK(a == 1 && b == 2);
    json_t *run = NULL;
    CHECK(store_run_get(st, a, &run) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "queued"));
    CHECK(!strcmp(json_string_value(json_object_get(run, "name")), "alpha"));
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(run, "config"), "steps")), 5);
    CHECK_EQ_INT(json_array_size(json_object_get(run, "tags")), 2);
    CHECK(!strcmp(json_string_value(json_array_get(json_object_get(run, "tags"), 0)), "a")); /* sorted */
    CHECK(json_is_null(json_object_get(run, "started_at")));
    json_decref(run);
    run = (json_t *)1;
    CHECK(store_run_get(st, 99, &run) == STORE_NOT_FOUND);
    CHECK(run == NULL);

    static const char *const from_queued[] = {"queued", NULL}, *const from_running[] = {"running", NULL};
    CHECK(store_run_transition(st, a, from_queued, "running", NULL) == STORE_OK);
    CHECK(store_run_transition(st, a, from_queued, "running", NULL) == STORE_CONFLICT);
    CHECK(store_run_transition(st, 99, from_queued, "running", NULL) == STORE_NOT_FOUND);
    CHECK(store_run_progress(st, a, 3, 2) == STORE_OK);
    CHECK(store_run_progress(st, a, 4, 1) == STORE_OK); /* the checkpoint step never goes back */
    CHECK(store_run_delete(st, a) == STORE_CONFLICT);
    CHECK(store_run_transition(st, a, from_running, "failed", "boom") == STORE_OK);
    CHECK(store_run_get(st, a, &run) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "failed"));
    CHECK(!strcmp(json_string_value(json_object_get(run, "error")), "boom"));
    CHECK_EQ_INT(json_integer_value(json_object_get(run, "step")), 4);
    CHECK_EQ_INT(json_integer_value(json_object_get(run, "checkpoint_step")), 2);
    CHECK(json_is_number(json_object_get(run, "finished_at")));
    json_decref(run);

    json_t *tags = json_pack("[s]", "z");
    CHECK(store_run_update(st, b, "renamed", NULL, tags) == STORE_OK);
    CHECK(store_run_update(st, 99, "x", NULL, NULL) == STORE_NOT_FOUND);
    json_decref(tags);
    store_run_filter f = {.sort = "name", .limit = 10};
    json_t *list = NULL;
    long long total = 0;
    CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
    CHECK_EQ_INT(total, 2);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(list, 0), "name")), "alpha"));
    json_decref(list);
    f = (store_run_filter){.tag = "z", .limit = 10};
    CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
    CHECK_EQ_INT(total, 1);
    CHECK_EQ_INT(json_array_size(list), 1);
    json_decref(list);
    f = (store_run_filter){.status = "queued", .limit = 10, .offset = 5}; /* a page past the end keeps the count */
    CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
    CHECK_EQ_INT(total, 1);
    CHECK_EQ_INT(json_array_size(list), 0);
    json_decref(list);
    json_t *counts = NULL;
    CHECK(store_run_counts(st, &counts) == STORE_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(counts, "failed")), 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(counts, "queued")), 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(counts, "interrupted")), 0);
    json_decref(counts);
    long long *ids = NULL;
    int n = 0;
    CHECK(store_runs_queued(st, &ids, &n) == STORE_OK);
    CHECK(n == 1 && ids[0] == b);
    free(ids);
    CHECK(store_run_delete(st, a) == STORE_OK);
    CHECK(store_run_delete(st, a) == STORE_NOT_FOUND);
    CHECK(new_run(st, "gamma") == 3); /* ids are never reused */
    store_close(st);
}

TEST(metrics_are_stored_exactly_and_summarised) {
    char url[1024];
    store *st = open_fresh(url, sizeof url);
    CHECK(st);
    long long id = new_run(st, "m");
    static const double values[] = {5, 1, 3, 9, 2};
    store_metric pts[8];
    for (int i = 0; i < 5; i++) {
        pts[i] = (store_metric){.run_id = id, .step = i + 1, .value = values[i] + 0.1, .wall_time = 100.25 + i};
        snprintf(pts[i].key, sizeof pts[i].key, "loss");
    }
    pts[5] = (store_metric){.run_id = id, .step = 5, .value = 0.5, .wall_time = 1};
    snprintf(pts[5].key, sizeof pts[5].key, "tau.0.0");
    pts[6] = (store_metric){.run_id = id, .step = 5, .value = 0.75, .wall_time = 1};
    snprintf(pts[6].key, sizeof pts[6].key, "tau.0.1");
    pts[7] = (store_metric){.run_id = 999, .step = 1, .value = 1, .wall_time = 1}; /* no such run: skipped */
    snprintf(pts[7].key, sizeof pts[7].key, "loss");
    CHECK(store_metrics_insert(st, pts, 8) == STORE_OK);
    /* A resumed run writes the same steps again: replaced, also twice in one batch (the last wins). */
    store_metric again[2] = {pts[4], pts[4]};
    again[0].value = 7;
    again[1].value = 2.1;
    CHECK(store_metrics_insert(st, again, 2) == STORE_OK);
    store_metric *got = NULL;
    size_t n = 0;
    CHECK(store_metrics_points(st, id, "loss", 0, &got, &n) == STORE_OK);
    CHECK_EQ_INT(n, 5);
    for (size_t i = 0; i < n; i++) CHECK(got[i].value == values[i] + 0.1 && got[i].wall_time == 100.25 + (double)i);
    free(got);
    CHECK(store_metrics_points(st, id, "tau.*", 0, &got, &n) == STORE_OK);
    CHECK(n == 2 && !strcmp(got[0].key, "tau.0.0") && !strcmp(got[1].key, "tau.0.1"));
    free(got);
    got = (store_metric *)1;
    CHECK(store_metrics_points(st, id, "nothing", 0, &got, &n) == STORE_OK);
    CHECK(got == NULL && n == 0);
    json_t *sum = NULL;
    CHECK(store_metrics_summary(st, id, &sum) == STORE_OK);
    json_t *loss = json_object_get(sum, "loss");
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "step_of_min")), 2);
    CHECK_NEAR(json_number_value(json_object_get(loss, "min")), 1.1, 0);
    CHECK_NEAR(json_number_value(json_object_get(loss, "max")), 9.1, 0);
    CHECK_NEAR(json_number_value(json_object_get(loss, "last")), 2.1, 0);
    CHECK_NEAR(json_number_value(json_object_get(loss, "mean")), 4.1, 1e-12);
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "count")), 5);
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "last_step")), 5);
    json_decref(sum);
    json_t *brief = NULL;
    CHECK(store_run_brief(st, id, &brief) == STORE_OK);
    CHECK_NEAR(json_number_value(json_object_get(json_object_get(brief, "loss"), "last")), 2.1, 0);
    CHECK_NEAR(json_number_value(json_object_get(json_object_get(brief, "tau"), "max")), 0.75, 0);
    CHECK(json_object_get(brief, "val_loss") == NULL);
    json_decref(brief);
    store_close(st);
}

TEST(experiments_corpora_probes_and_artefacts) {
    char url[1024];
    store *st = open_fresh(url, sizeof url);
    CHECK(st);
    store_new_run runs[2] = {{.name = "r0", .config_json = "{}", .seed = 1, .total_steps = 3, .replicate = 0},
                             {.name = "r1", .config_json = "{}", .seed = 1, .total_steps = 3, .replicate = 1}};
    store_new_experiment e = {.name = "exp", .base_json = "{\"a\":1}", .variants_json = "[]", .replicates = 2};
    long long eid = 0, rids[2] = {0};
    CHECK(store_experiment_create(st, &e, runs, 2, &eid, rids) == STORE_OK);
    CHECK(eid == 1 && rids[0] == 1 && rids[1] == 2);
    json_t *o = NULL;
    CHECK(store_experiment_get(st, eid, &o) == STORE_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "run_count")), 2);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "replicates")), 2);
    json_decref(o);
    long long total = 0;
    CHECK(store_experiment_list(st, 10, 0, &o, &total) == STORE_OK);
    CHECK(total == 1 && json_array_size(o) == 1);
    json_decref(o);
    CHECK(store_experiment_discard(st, eid) == STORE_OK);
    CHECK(store_experiment_get(st, eid, &o) == STORE_NOT_FOUND);
    CHECK(store_run_get(st, rids[0], &o) == STORE_NOT_FOUND);

    store_corpus c = {.name = "mine", .tokenizer = "bytes", .status = "tokenizing", .bytes = 10};
    CHECK(store_corpus_create(st, &c) == STORE_OK);
    CHECK(store_corpus_create(st, &c) == STORE_CONFLICT);
    c.status = "ready";
    c.tokens = 10;
    CHECK(store_corpus_put(st, &c) == STORE_OK);
    CHECK(store_corpus_get(st, "mine", &o) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(o, "status")), "ready"));
    CHECK(json_is_false(json_object_get(o, "builtin")));
    json_decref(o);
    CHECK(store_corpus_list(st, &o) == STORE_OK);
    CHECK_EQ_INT(json_array_size(o), 1);
    json_decref(o);
    CHECK(store_corpus_delete(st, "mine") == STORE_OK);
    CHECK(store_corpus_delete(st, "mine") == STORE_NOT_FOUND);
    store_corpus task = {
        .name = "copy", .tokenizer = "task", .status = "ready", .task_json = "{\"kind\":\"copy_offset\"}"};
    CHECK(store_corpus_create(st, &task) == STORE_OK);
    CHECK(store_corpus_get(st, "copy", &o) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(o, "task"), "kind")), "copy_offset"));
    json_decref(o);

    json_t *result = json_pack("{s:s, s:[{s:s, s:[s,s], s:[[i,i],[i,i]]}]}", "summary", "ok", "tables", "name", "t",
                               "columns", "a", "b", "rows", 1, 2, 3, 4);
    store_new_probe p = {.kind = "k",
                         .params_json = "{}",
                         .cache_key = "ck",
                         .status = "succeeded",
                         .seed = 1,
                         .duration_ms = 1.5,
                         .result = result};
    long long pid = 0, found = 0;
    CHECK(store_probe_insert(st, &p, &pid) == STORE_OK);
    json_decref(result);
    CHECK(store_probe_find(st, "k", "ck", &found) == STORE_OK && found == pid);
    CHECK(store_probe_find(st, "k", "other", &found) == STORE_NOT_FOUND);
    CHECK(store_probe_get(st, pid, &o) == STORE_OK);
    json_t *rows = json_object_get(json_array_get(json_object_get(json_object_get(o, "result"), "tables"), 0), "rows");
    CHECK_EQ_INT(json_array_size(rows), 2);
    json_decref(o);
    CHECK(store_probe_list(st, NULL, 10, 0, &o, &total) == STORE_OK);
    CHECK(total == 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(
                     json_array_get(json_object_get(json_object_get(json_array_get(o, 0), "result"), "tables"), 0),
                     "row_count")),
                 2);
    json_decref(o);
    CHECK(store_probe_table(st, pid, "t", &o) == STORE_OK);
    json_decref(o);
    CHECK(store_probe_table(st, pid, "nope", &o) == STORE_NOT_FOUND);

    long long rid = new_run(st, "with checkpoint");
    store_artifact a = {.path = "runs/x/checkpoint.safetensors",
                        .kind = "checkpoint",
                        .run_id = rid,
                        .step = 4,
                        .bytes = 10,
                        .sha256 = "ab"};
    CHECK(store_artifact_put(st, &a) == STORE_OK);
    a.step = 8;
    CHECK(store_artifact_put(st, &a) == STORE_OK);
    CHECK(store_artifact_get(st, a.path, &o) == STORE_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "step")), 8);
    json_decref(o);
    CHECK(store_artifact_get(st, "elsewhere", &o) == STORE_NOT_FOUND);
    store_close(st);
}

TEST(a_foreign_or_newer_database_is_refused) {
    char url[1024], err[512];
    CHECK(pgtest_new_db(url, sizeof url) == 0);
    CHECK(raw(url, "CREATE TABLE customers (id int)") == 0);
    store *st = (store *)1;
    CHECK(store_open(&st, url, err, sizeof err) == STORE_ERROR);
    CHECK(st == NULL);
    CHECK_MSG(strstr(err, "not an attnlab database"), "%s", err);
    CHECK(strstr(err, "***") != NULL); /* the URL is named, its password masked */

    CHECK(pgtest_new_db(url, sizeof url) == 0);
    CHECK(store_open(&st, url, err, sizeof err) == STORE_OK);
    store_close(st);
    CHECK(raw(url, "INSERT INTO attnlab_schema VALUES (99, 'future', 0)") == 0);
    CHECK(store_open(&st, url, err, sizeof err) == STORE_TOO_NEW);
    CHECK_MSG(strstr(err, "schema version 99"), "%s", err);
}

TEST(migrations_apply_once_when_nodes_start_together) {
    char url[1024];
    CHECK(pgtest_new_db(url, sizeof url) == 0);
    enum { N = 4 };
    store *st[N] = {0};
    pid_t kids[N];
    for (int i = 0; i < N; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            char err[512];
            store *s = NULL;
            _exit(store_open(&s, url, err, sizeof err) == STORE_OK ? 0 : 1);
        }
    }
    int ok = 0;
    for (int i = 0; i < N; i++) {
        int status;
        waitpid(kids[i], &status, 0);
        ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    CHECK_EQ_INT(ok, N);
    char err[512];
    CHECK(store_open(&st[0], url, err, sizeof err) == STORE_OK);
    CHECK_EQ_INT(store_schema_version(st[0]), store_schema_version_supported());
    store_close(st[0]);
}

typedef struct {
    store *st;
    char node[16];
    long long got[16];
    int n;
} claimer;

static void *claim_all(void *arg) {
    claimer *c = arg;
    store_lease l;
    store_status s;
    while ((s = store_run_claim(c->st, c->node, 30, &l)) == STORE_OK && c->n < 16) c->got[c->n++] = l.run_id;
    return NULL;
}

TEST(claims_hand_each_run_to_one_node) {
    char url[1024], err[512];
    store *st = open_fresh(url, sizeof url);
    CHECK(st);
    CHECK(store_shared(st));
    enum { RUNS = 12, NODES = 3 };
    for (int i = 0; i < RUNS; i++) CHECK(new_run(st, "q") > 0);
    claimer c[NODES];
    pthread_t t[NODES];
    for (int i = 0; i < NODES; i++) {
        memset(&c[i], 0, sizeof c[i]);
        CHECK(store_open(&c[i].st, url, err, sizeof err) == STORE_OK);
        snprintf(c[i].node, sizeof c[i].node, "n%d", i);
        store_set_node(c[i].st, c[i].node);
    }
    for (int i = 0; i < NODES; i++) pthread_create(&t[i], NULL, claim_all, &c[i]);
    for (int i = 0; i < NODES; i++) pthread_join(t[i], NULL);
    int seen[RUNS + 1] = {0}, total = 0;
    for (int i = 0; i < NODES; i++)
        for (int k = 0; k < c[i].n; k++) {
            CHECK(c[i].got[k] >= 1 && c[i].got[k] <= RUNS);
            seen[c[i].got[k]]++;
            total++;
        }
    CHECK_EQ_INT(total, RUNS);
    for (int i = 1; i <= RUNS; i++) CHECK_EQ_INT(seen[i], 1);
    json_t *run = NULL;
    CHECK(store_run_get(st, 1, &run) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "running"));
    CHECK(json_is_string(json_object_get(run, "node")));
    json_decref(run);
    for (int i = 0; i < NODES; i++) store_close(c[i].st);
    store_close(st);
}

TEST(an_expired_lease_is_taken_over_and_the_old_holder_is_fenced) {
    char url[1024], err[512];
    store *a = open_fresh(url, sizeof url), *b = NULL;
    CHECK(a);
    CHECK(store_open(&b, url, err, sizeof err) == STORE_OK);
    store_set_node(a, "A");
    store_set_node(b, "B");
    long long id = new_run(a, "fenced");
    store_lease la, lb;
    CHECK(store_run_claim(a, "A", 0.3, &la) == STORE_OK);
    CHECK(la.run_id == id && la.attempt == 1 && !la.takeover);
    store_lease_hold(a, id, la.token);
    CHECK(store_run_claim(b, "B", 5, &lb) == STORE_NOT_FOUND); /* A's lease holds */
    int cancel = -1;
    CHECK(store_run_renew(a, id, la.token, 0.3, &cancel) == STORE_OK && cancel == 0);
    store_metric m = {.run_id = id, .step = 1, .value = 1.5, .wall_time = 1};
    snprintf(m.key, sizeof m.key, "loss");
    CHECK(store_metrics_insert(a, &m, 1) == STORE_OK);
    usleep(500 * 1000); /* A stops renewing: its lease runs out */
    CHECK(store_run_claim(b, "B", 5, &lb) == STORE_OK);
    CHECK(lb.run_id == id && lb.takeover && lb.attempt == 2 && lb.token != la.token);
    store_lease_hold(b, id, lb.token);
    /* A, cut off, goes on: none of its writes lands. */
    CHECK(store_run_renew(a, id, la.token, 5, NULL) == STORE_CONFLICT);
    m.step = 2;
    m.value = 666;
    CHECK(store_metrics_insert(a, &m, 1) == STORE_OK); /* skipped, like a deleted run's points */
    CHECK(store_run_progress(a, id, 2, 2) == STORE_CONFLICT);
    static const char *const from_running[] = {"running", NULL};
    CHECK(store_run_transition(a, id, from_running, "succeeded", NULL) == STORE_CONFLICT);
    store_artifact art = {.path = "runs/1/checkpoint.safetensors",
                          .kind = "checkpoint",
                          .run_id = id,
                          .step = 2,
                          .bytes = 1,
                          .sha256 = "00"};
    CHECK(store_artifact_put(a, &art) == STORE_CONFLICT);
    CHECK(store_run_release(a, id, la.token, "queued", NULL) == STORE_CONFLICT);
    store_lease_drop(a, id); /* A has learned it lost the run */
    /* B's writes land. */
    m.value = 2.5;
    CHECK(store_metrics_insert(b, &m, 1) == STORE_OK);
    CHECK(store_run_progress(b, id, 2, 2) == STORE_OK);
    CHECK(store_artifact_put(b, &art) == STORE_OK);
    store_metric *pts = NULL;
    size_t n = 0;
    CHECK(store_metrics_points(b, id, "loss", 0, &pts, &n) == STORE_OK);
    CHECK(n == 2 && pts[0].value == 1.5 && pts[1].value == 2.5);
    free(pts);
    /* Cancel from anywhere reaches the holder at its next renewal. */
    CHECK(store_run_request_cancel(a, id) == STORE_OK);
    CHECK(store_run_renew(b, id, lb.token, 5, &cancel) == STORE_OK && cancel == 1);
    CHECK(store_run_transition(b, id, from_running, "cancelled", NULL) == STORE_OK);
    CHECK(store_run_request_cancel(a, id) == STORE_CONFLICT);
    CHECK(store_run_request_cancel(a, 999) == STORE_NOT_FOUND);
    /* Resumed, it is queued with a clean slate and goes to whoever claims it. */
    static const char *const resumable[] = {"cancelled", NULL};
    CHECK(store_run_transition(a, id, resumable, "queued", NULL) == STORE_OK);
    store_lease_drop(b, id);
    CHECK(store_run_claim(a, "A", 5, &la) == STORE_OK);
    CHECK(store_run_renew(a, id, la.token, 5, &cancel) == STORE_OK && cancel == 0);
    CHECK(store_run_release(a, id, la.token, "queued", NULL) == STORE_OK);
    json_t *run = NULL;
    CHECK(store_run_get(a, id, &run) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "queued"));
    json_decref(run);
    store_close(a);
    store_close(b);
}

TEST(nodes_are_listed_with_their_runs) {
    char url[1024];
    store *st = open_fresh(url, sizeof url);
    CHECK(st);
    store_set_node(st, "alpha");
    store_node n = {
        .id = "alpha", .host = "h1", .url = "http://h1:8080/", .role = "all", .capacity = 2, .pid = 42, .version = "x"};
    CHECK(store_node_register(st, &n) == STORE_OK);
    n.id = "beta";
    n.role = "api";
    n.capacity = 0;
    CHECK(store_node_register(st, &n) == STORE_OK);
    CHECK(store_node_heartbeat(st, "alpha") == STORE_OK);
    CHECK(store_node_heartbeat(st, "gamma") == STORE_NOT_FOUND);
    CHECK(store_node_stopped(st, "beta") == STORE_OK);
    long long id = new_run(st, "r");
    store_lease l;
    CHECK(store_run_claim(st, "alpha", 30, &l) == STORE_OK);
    json_t *list = NULL;
    CHECK(store_node_list(st, 10, &list) == STORE_OK);
    CHECK_EQ_INT(json_array_size(list), 2);
    json_t *first = json_array_get(list, 0), *second = json_array_get(list, 1);
    CHECK(!strcmp(json_string_value(json_object_get(first, "id")), "beta")); /* the latest heard first */
    CHECK(json_is_false(json_object_get(first, "alive")));
    CHECK(json_is_true(json_object_get(second, "alive")));
    CHECK_EQ_INT(json_integer_value(json_object_get(second, "capacity")), 2);
    CHECK_EQ_INT(json_array_size(json_object_get(second, "running")), 1);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(second, "running"), 0)), id);
    CHECK(json_number_value(json_object_get(second, "heartbeat_age_s")) < 5);
    json_decref(list);
    store_close(st);
}

typedef struct {
    pthread_mutex_t lock;
    char seen[16][160];
    int n;
} heard;

static void on_heard(void *ctx, const char *channel, const char *payload) {
    heard *h = ctx;
    pthread_mutex_lock(&h->lock);
    if (h->n < 16) snprintf(h->seen[h->n++], sizeof h->seen[0], "%s %s", channel, payload);
    pthread_mutex_unlock(&h->lock);
}

static int heard_has(heard *h, const char *needle) {
    pthread_mutex_lock(&h->lock);
    int found = 0;
    for (int i = 0; i < h->n; i++)
        if (strstr(h->seen[i], needle)) found = 1;
    pthread_mutex_unlock(&h->lock);
    return found;
}

TEST(other_nodes_hear_queued_runs_metrics_and_status) {
    char url[1024], err[512];
    store *a = open_fresh(url, sizeof url), *b = NULL;
    CHECK(a);
    CHECK(store_open(&b, url, err, sizeof err) == STORE_OK);
    store_set_node(a, "A");
    store_set_node(b, "B");
    heard h = {.n = 0};
    pthread_mutex_init(&h.lock, NULL);
    CHECK(store_listen(b, on_heard, &h) == STORE_OK);
    usleep(300 * 1000); /* the listener connects */
    long long id = new_run(a, "heard");
    store_metric m = {.run_id = id, .step = 3, .value = 1, .wall_time = 1};
    snprintf(m.key, sizeof m.key, "loss");
    CHECK(store_metrics_insert(a, &m, 1) == STORE_OK);
    static const char *const from_queued[] = {"queued", NULL};
    CHECK(store_run_transition(a, id, from_queued, "cancelled", NULL) == STORE_OK);
    /* B's own events (payloads naming node B) are not delivered to B. Its metric is committed before
     * A's step 4, and notifications arrive in commit order: once step 4 is heard, B's would have been. */
    long long own = new_run(b, "own");
    CHECK(own > 0);
    m.run_id = own;
    CHECK(store_metrics_insert(b, &m, 1) == STORE_OK);
    m.run_id = id;
    m.step = 4;
    CHECK(store_metrics_insert(a, &m, 1) == STORE_OK);
    for (int i = 0; i < 100 && !heard_has(&h, "\"from\":4,\"to\":4"); i++) usleep(100 * 1000);
    char want[64];
    snprintf(want, sizeof want, "attnlab_jobs %lld", id);
    CHECK(heard_has(&h, want));
    CHECK(heard_has(&h, "\"t\":\"m\",\"run\":1,\"from\":3,\"to\":3"));
    CHECK(heard_has(&h, "\"t\":\"s\""));
    CHECK(heard_has(&h, "\"t\":\"m\",\"run\":1,\"from\":4,\"to\":4"));
    snprintf(want, sizeof want, "\"run\":%lld,", own);
    CHECK_MSG(!heard_has(&h, want), "B heard its own metrics of run %lld", own);
    store_close(b);
    store_close(a);
    pthread_mutex_destroy(&h.lock);
}

TEST(a_lost_database_is_an_unavailable_error_until_it_returns) {
    char url[1024];
    store *st = open_fresh(url, sizeof url);
    CHECK(st);
    long long id = new_run(st, "x");
    /* Every connection to this database is cut, and new ones are refused for a while. */
    char dbname[128];
    snprintf(dbname, sizeof dbname, "%s", strrchr(url, '/') + 1);
    char sql[512];
    snprintf(sql, sizeof sql,
             "ALTER DATABASE %s ALLOW_CONNECTIONS false; SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
             "WHERE datname = '%s' AND pid <> pg_backend_pid()",
             dbname, dbname);
    char admin[1024];
    snprintf(admin, sizeof admin, "%s", pgtest_server_url());
    CHECK(raw(admin, sql) == 0);
    json_t *run = (json_t *)1;
    store_status s = store_run_get(st, id, &run);
    CHECK(s == STORE_ERROR);
    CHECK(run == NULL);
    CHECK_MSG(store_unavailable(), "%s", store_last_error());
    CHECK(strstr(store_last_error(), "unreachable") || strstr(store_last_error(), "connection"));
    CHECK(store_ping(st) == STORE_ERROR);
    snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS true", dbname);
    CHECK(raw(admin, sql) == 0);
    usleep(1200 * 1000); /* past the back-off */
    CHECK(store_run_get(st, id, &run) == STORE_OK);
    json_decref(run);
    CHECK(store_ping(st) == STORE_OK);
    store_close(st);
}

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Two node processes drain a queue of RUNS runs, each claim followed by the run's final status (a
 * job that takes no time): every run ends once, claimed once; the rate is printed as a figure. */
TEST(two_node_processes_drain_a_queue_each_run_once) {
    enum { RUNS = 1000, NODES = 2 };
    char url[1024];
    store *st = open_fresh(url, sizeof url);
    CHECK(st);
    char sql[600];
    snprintf(sql, sizeof sql,
             "INSERT INTO runs (id, config, seed, status, created_at) SELECT g, '{}', 1, 'queued', 0 FROM "
             "generate_series(1, %d) g; UPDATE id_counters SET last = %d WHERE name = 'runs'",
             RUNS, RUNS);
    CHECK(raw(url, sql) == 0);
    int pipes[NODES][2];
    pid_t kids[NODES];
    double t0 = mono();
    for (int i = 0; i < NODES; i++) {
        CHECK(pipe(pipes[i]) == 0);
        kids[i] = fork();
        if (kids[i] == 0) {
            char err[512], node[16];
            store *s = NULL;
            if (store_open(&s, url, err, sizeof err) != STORE_OK) _exit(1);
            snprintf(node, sizeof node, "n%d", i);
            store_set_node(s, node);
            int done = 0;
            store_lease l;
            static const char *const from_running[] = {"running", NULL};
            while (store_run_claim(s, node, 30, &l) == STORE_OK) {
                store_lease_hold(s, l.run_id, l.token);
                if (store_run_transition(s, l.run_id, from_running, "succeeded", NULL) == STORE_OK) done++;
                store_lease_drop(s, l.run_id);
            }
            store_close(s);
            if (write(pipes[i][1], &done, sizeof done) != (ssize_t)sizeof done) _exit(1);
            _exit(0);
        }
        close(pipes[i][1]);
    }
    int total = 0, per[NODES];
    for (int i = 0; i < NODES; i++) {
        per[i] = 0;
        CHECK(read(pipes[i][0], &per[i], sizeof per[i]) == (ssize_t)sizeof per[i]);
        close(pipes[i][0]);
        int status;
        waitpid(kids[i], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        total += per[i];
    }
    double dt = mono() - t0;
    CHECK_EQ_INT(total, RUNS);
    json_t *counts = NULL;
    CHECK(store_run_counts(st, &counts) == STORE_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(counts, "succeeded")), RUNS);
    json_decref(counts);
    printf("# figure: %d runs claimed and finished by %d node processes in %.2f s: %.0f claims/s (%d and %d)\n", RUNS,
           NODES, dt, RUNS / dt, per[0], per[1]);
    store_close(st);
}

/* ---- series summaries (migration 0008) against a recomputation from the rows ------------------ */

/* What the summary and the brief gave before the summaries: PostgreSQL's aggregates over the rows,
 * on a connection of its own (avg over the rows in step order: without an order of its own the
 * sum's order is the plan's). */
static json_t *summary_from_rows(const char *url, long long run_id) {
    char err[512];
    pg_conn *c = pg_connect(url, 5, "test", err, sizeof err);
    if (!c) return NULL;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, run_id);
    pg_res *r = NULL;
    json_t *sum = NULL;
    if (pg_exec(c, "summary",
                "SELECT m.key, min(m.value), max(m.value), avg(m.value ORDER BY m.step), count(*), max(m.step), "
                "  (SELECT l.value FROM metrics l WHERE l.run_id = m.run_id AND l.key = m.key "
                "   ORDER BY l.step DESC LIMIT 1), "
                "  (SELECT min(s.step) FROM metrics s WHERE s.run_id = m.run_id AND s.key = m.key "
                "   AND s.value = min(m.value)) "
                "FROM metrics m WHERE m.run_id = $1 GROUP BY m.run_id, m.key ORDER BY m.key COLLATE \"C\"",
                &p, &r) == STORE_OK) {
        sum = json_object();
        for (int i = 0; sum && i < pg_nrows(r); i++)
            json_object_set_new(sum, pg_get_text(r, i, 0),
                                json_pack("{s:f, s:f, s:f, s:f, s:i, s:I, s:i}", "last", pg_get_double(r, i, 6), "min",
                                          pg_get_double(r, i, 1), "max", pg_get_double(r, i, 2), "mean",
                                          pg_get_double(r, i, 3), "step_of_min", pg_get_int(r, i, 7), "count",
                                          (json_int_t)pg_get_i64(r, i, 4), "last_step", pg_get_int(r, i, 5)));
        pg_clear(r);
    }
    r = NULL;
    json_t *brief = NULL;
    if (sum &&
        pg_exec(c, "brief",
                "SELECT (SELECT count(*) FROM metrics WHERE run_id = $1 AND key = 'loss'), "
                "(SELECT min(value) FROM metrics WHERE run_id = $1 AND key = 'loss'), "
                "(SELECT value FROM metrics WHERE run_id = $1 AND key = 'loss' ORDER BY step DESC LIMIT 1), "
                "(SELECT count(*) FROM metrics WHERE run_id = $1 AND key = 'val_loss'), "
                "(SELECT min(value) FROM metrics WHERE run_id = $1 AND key = 'val_loss'), "
                "(SELECT value FROM metrics WHERE run_id = $1 AND key = 'val_loss' ORDER BY step DESC "
                "LIMIT 1), t.n, t.lo, t.hi FROM (SELECT count(*) AS n, min(value) AS lo, max(value) AS hi "
                "FROM metrics WHERE run_id = $1 AND starts_with(key, 'tau.') AND step = (SELECT max(step) "
                "FROM metrics WHERE run_id = $1 AND key = 'tau.0.0')) t",
                &p, &r) == STORE_OK &&
        pg_nrows(r) == 1) {
        brief = json_object();
        static const char *const keys[] = {"loss", "val_loss"};
        for (int k = 0; k < 2; k++)
            if (pg_get_i64(r, 0, 3 * k) > 0)
                json_object_set_new(brief, keys[k],
                                    json_pack("{s:f, s:f}", "last", pg_get_double(r, 0, 3 * k + 2), "min",
                                              pg_get_double(r, 0, 3 * k + 1)));
        if (pg_get_i64(r, 0, 6) > 0)
            json_object_set_new(brief, "tau",
                                json_pack("{s:f, s:f}", "min", pg_get_double(r, 0, 7), "max", pg_get_double(r, 0, 8)));
    }
    pg_clear(r);
    pg_close(c);
    json_t *both = sum && brief ? json_pack("{s:o, s:o}", "summary", sum, "brief", brief) : NULL;
    if (!both) {
        json_decref(sum);
        json_decref(brief);
    }
    return both;
}

/* 1 when the store's summary and brief are the recomputation's, byte for byte. */
static int store_matches_rows(store *st, const char *url, long long run_id) {
    json_t *sum = NULL, *brief = NULL;
    if (store_metrics_summary(st, run_id, &sum) != STORE_OK || store_run_brief(st, run_id, &brief) != STORE_OK) {
        json_decref(sum);
        return 0;
    }
    json_t *got = json_pack("{s:o, s:o}", "summary", sum, "brief", brief), *want = summary_from_rows(url, run_id);
    char *a = got ? json_dumps(got, JSON_COMPACT) : NULL, *b = want ? json_dumps(want, JSON_COMPACT) : NULL;
    int same = a && b && !strcmp(a, b);
    if (!same) printf("# run %lld:\n#   store: %s\n#   rows:  %s\n", run_id, a ? a : "-", b ? b : "-");
    free(a);
    free(b);
    json_decref(got);
    json_decref(want);
    return same;
}

TEST(summaries_equal_a_recomputation_from_the_rows) {
    char url[1024];
    store *st = open_fresh(url, sizeof url);
    CHECK(st);
    static series_model m;
    memset(&m, 0, sizeof m);
    m.run[0] = new_run(st, "sum-a");
    m.run[1] = new_run(st, "sum-b");
    CHECK(m.run[0] > 0 && m.run[1] > 0);
    store_metric pts[96];
    for (int b = 0; b < 60; b++) {
        size_t n = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], 0);
        CHECK(store_metrics_insert(st, pts, n) == STORE_OK);
        for (int r = 0; r < 2; r++) CHECK_MSG(store_matches_rows(st, url, m.run[r]), "after batch %d", b);
    }
    /* The loss orders of the runs list read the summaries. */
    static const char *const sorts[] = {"loss", "-loss", "min_val_loss", "-min_val_loss"};
    for (int i = 0; i < 4; i++) {
        json_t *list = NULL, *sum0 = NULL, *sum1 = NULL;
        long long total = 0;
        store_run_filter f = {.limit = 10, .sort = sorts[i]};
        CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
        CHECK(store_metrics_summary(st, m.run[0], &sum0) == STORE_OK);
        CHECK(store_metrics_summary(st, m.run[1], &sum1) == STORE_OK);
        const char *key = i < 2 ? "loss" : "val_loss", *field = i < 2 ? "last" : "min";
        double a = json_real_value(json_object_get(json_object_get(sum0, key), field));
        double b = json_real_value(json_object_get(json_object_get(sum1, key), field));
        int a_first =
            i % 2 == 0 ? (a < b || (a == b && m.run[0] < m.run[1])) : (a > b || (a == b && m.run[0] > m.run[1]));
        CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(list, 0), "id")), a_first ? m.run[0] : m.run[1]);
        json_decref(sum0);
        json_decref(sum1);
        json_decref(list);
    }
    /* A deleted run takes its summaries with it. */
    CHECK(store_run_transition(st, m.run[0], (const char *const[]){"queued", NULL}, "cancelled", NULL) == STORE_OK);
    CHECK(store_run_delete(st, m.run[0]) == STORE_OK);
    char sql[160];
    snprintf(sql, sizeof sql,
             "DO $$ BEGIN IF EXISTS (SELECT 1 FROM metric_summaries WHERE run_id = %lld) THEN "
             "RAISE EXCEPTION 'summaries left'; END IF; END $$",
             m.run[0]);
    CHECK(raw(url, sql) == 0);
    store_close(st);
}

/* The briefs of a page of runs (store_run_briefs, one statement on PostgreSQL) as JSON text; NULL
 * on failure or when they are not one per id. */
static char *briefs_text(store *st, const long long *ids, size_t n) {
    json_t *all = NULL;
    if (store_run_briefs(st, ids, n, &all) != STORE_OK || json_array_size(all) != n) {
        json_decref(all);
        return NULL;
    }
    char *text = json_dumps(all, JSON_COMPACT);
    json_decref(all);
    return text;
}

/* The same, one store_run_brief per id. */
static char *each_brief_text(store *st, const long long *ids, size_t n) {
    json_t *all = json_array();
    for (size_t i = 0; all && i < n; i++) {
        json_t *b = NULL;
        if (store_run_brief(st, ids[i], &b) != STORE_OK || json_array_append_new(all, b) < 0) {
            json_decref(all);
            all = NULL;
        }
    }
    char *text = all ? json_dumps(all, JSON_COMPACT) : NULL;
    json_decref(all);
    return text;
}

/* 1 when both texts exist and are equal; says which differ otherwise. */
static int same_text(const char *what, const char *a, const char *b) {
    int same = a && b && !strcmp(a, b);
    if (!same) printf("# %s differ:\n#   %s\n#   %s\n", what, a ? a : "-", b ? b : "-");
    return same;
}

TEST(a_page_of_briefs_is_each_runs_brief_on_both_backends) {
    char url[1024], err[512], path[64];
    store *pg = open_fresh(url, sizeof url), *lite = NULL;
    CHECK(pg);
    snprintf(path, sizeof path, "/tmp/attnlab-briefs-%d.db", (int)getpid());
    CHECK(store_open(&lite, path, err, sizeof err) == STORE_OK);
    static series_model m;
    memset(&m, 0, sizeof m);
    /* The same runs on both (fresh stores: the same ids); the third never gets a point. */
    long long quiet = 0;
    for (int b = 0; b < 2; b++) {
        store *st = b ? lite : pg;
        m.run[0] = new_run(st, "brief-a");
        m.run[1] = new_run(st, "brief-b");
        quiet = new_run(st, "brief-quiet");
    }
    CHECK(m.run[0] > 0 && m.run[1] > 0 && quiet > 0);
    /* A page in any order, a run twice, one without series, one that does not exist. */
    const long long page[] = {m.run[1], quiet, m.run[0], 999999, m.run[1]};
    const size_t n = sizeof page / sizeof page[0];
    store_metric pts[96];
    for (int b = 0; b < 40; b++) {
        size_t np = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], 0);
        CHECK(store_metrics_insert(pg, pts, np) == STORE_OK);
        CHECK(store_metrics_insert(lite, pts, np) == STORE_OK);
        if (b % 4 != 3) continue;
        char *pg_page = briefs_text(pg, page, n), *pg_each = each_brief_text(pg, page, n),
             *lite_page = briefs_text(lite, page, n);
        CHECK_MSG(same_text("PostgreSQL's page and each brief", pg_page, pg_each), "after batch %d", b);
        CHECK_MSG(same_text("PostgreSQL's and SQLite's page", pg_page, lite_page), "after batch %d", b);
        free(pg_page);
        free(pg_each);
        free(lite_page);
    }
    json_t *none = NULL;
    CHECK(store_run_briefs(pg, NULL, 0, &none) == STORE_OK);
    CHECK(json_is_array(none) && json_array_size(none) == 0);
    json_decref(none);
    /* A run without a point has an empty brief. */
    json_t *one = NULL;
    CHECK(store_run_briefs(pg, &quiet, 1, &one) == STORE_OK);
    CHECK(json_object_size(json_array_get(one, 0)) == 0);
    json_decref(one);
    store_close(pg);
    store_close(lite);
    char side[80];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

TEST(an_old_database_gets_its_summaries_from_the_migration) {
    char url[1024], err[512];
    store *st = open_fresh(url, sizeof url);
    CHECK(st);
    static series_model m;
    memset(&m, 0, sizeof m);
    m.run[0] = new_run(st, "old-a");
    m.run[1] = new_run(st, "old-b");
    CHECK(m.run[0] > 0 && m.run[1] > 0);
    store_metric pts[96];
    for (int b = 0; b < 40; b++) {
        size_t n = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], 0);
        CHECK(store_metrics_insert(st, pts, n) == STORE_OK);
    }
    store_close(st);
    /* The database as schema version 7 left it: points, no summaries (and points no summary saw),
     * nor the later versions' columns. */
    CHECK(raw(url, "DROP TABLE metric_summaries; ALTER TABLE runs DROP COLUMN source, DROP COLUMN provenance; "
                   "DELETE FROM attnlab_schema WHERE version >= 8; "
                   "INSERT INTO metrics (run_id, key, step, value, wall_time) "
                   "SELECT run_id, key, step + 1000, value * 2, wall_time FROM metrics") == 0);
    CHECK(store_open(&st, url, err, sizeof err) == STORE_OK);
    CHECK_EQ_INT(store_schema_version(st), store_schema_version_supported());
    for (int r = 0; r < 2; r++) CHECK(store_matches_rows(st, url, m.run[r]));
    for (int b = 0; b < 20; b++) {
        size_t n = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], 0);
        CHECK(store_metrics_insert(st, pts, n) == STORE_OK);
        for (int r = 0; r < 2; r++) CHECK_MSG(store_matches_rows(st, url, m.run[r]), "after batch %d", b);
    }
    store_close(st);
}

int main(void) {
    if (!pgtest_server_url()) {
        printf("FAIL test_store_pg: no PostgreSQL server for the tests\n");
        return 1;
    }
    RUN(runs_round_trip_like_sqlite);
    RUN(metrics_are_stored_exactly_and_summarised);
    RUN(summaries_equal_a_recomputation_from_the_rows);
    RUN(a_page_of_briefs_is_each_runs_brief_on_both_backends);
    RUN(an_old_database_gets_its_summaries_from_the_migration);
    RUN(experiments_corpora_probes_and_artefacts);
    RUN(a_foreign_or_newer_database_is_refused);
    RUN(migrations_apply_once_when_nodes_start_together);
    RUN(claims_hand_each_run_to_one_node);
    RUN(an_expired_lease_is_taken_over_and_the_old_holder_is_fenced);
    RUN(nodes_are_listed_with_their_runs);
    RUN(other_nodes_hear_queued_runs_metrics_and_status);
    RUN(a_lost_database_is_an_unavailable_error_until_it_returns);
    RUN(two_node_processes_drain_a_queue_each_run_once);
    return test_summary();
}
