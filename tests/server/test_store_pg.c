/* The PostgreSQL backend's own (store_nodes.h's shared store), against a throw-away server: the
 * schema is refused when it is not attnlab's or newer, nodes starting together migrate once,
 * claims hand one run to one claimer, fencing keeps a node that lost its lease from writing, other
 * nodes hear what changed, and a database that goes away answers STORE_ERROR marked unavailable,
 * then comes back. The contract both backends keep is test_store.c's. */
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
#include "../support/test.h"
#include "store/postgres/pg.h"
#include "store/postgres/store_pg.h"
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
    m.key = "loss";
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
    m.key = "loss";
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

typedef struct {
    store *st;
    store_status s;
} ping_job;

static void ping_alone(void *arg) {
    ping_job *j = arg;
    j->s = store_ping(j->st);
}

TEST(health_answers_while_every_pooled_connection_is_busy) {
    char url[1024];
    setenv("ATTNLAB_DB_POOL", "2", 1);
    store *st = open_fresh(url, sizeof url);
    unsetenv("ATTNLAB_DB_POOL");
    CHECK(st);
    /* The whole pool taken, as long reads (bundles of large runs) would take it. */
    pg_conn *held[2] = {spg_get(st), spg_get(st)};
    CHECK(held[0] && held[1]);
    ping_job j = {.st = st, .s = STORE_ERROR};
    test_thread *t = test_thread_start(ping_alone, &j);
    int done = test_thread_done_within(t, 60); /* the ping need not wait for the pool at all */
    spg_put(st, held[0]);
    spg_put(st, held[1]);
    test_thread_join(t);
    CHECK(t != NULL);
    CHECK_MSG(done, "the health check waited for a pooled connection");
    CHECK(j.s == STORE_OK);
    store_close(st);
}

int main(void) {
    if (!pgtest_server_url()) {
        printf("FAIL test_store_pg: no PostgreSQL server for the tests\n");
        return 1;
    }
    RUN(a_foreign_or_newer_database_is_refused);
    RUN(migrations_apply_once_when_nodes_start_together);
    RUN(claims_hand_each_run_to_one_node);
    RUN(an_expired_lease_is_taken_over_and_the_old_holder_is_fenced);
    RUN(nodes_are_listed_with_their_runs);
    RUN(other_nodes_hear_queued_runs_metrics_and_status);
    RUN(a_lost_database_is_an_unavailable_error_until_it_returns);
    RUN(health_answers_while_every_pooled_connection_is_busy);
    RUN(two_node_processes_drain_a_queue_each_run_once);
    return test_summary();
}
