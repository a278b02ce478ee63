/* Several attnlabd nodes on one PostgreSQL database (a throw-away cluster), as real processes:
 * queued runs spread over the nodes; a node SIGKILLed mid-run loses its lease and another node
 * finishes the run with the losses of an uninterrupted twin; a viewer on one node sees the metrics
 * of a run trained on another; nodes racing for one run never both run it; cancel reaches the node
 * that trains; GET /api/nodes lists them; and the database failing at start or while running. */
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../support/api.h"
#include "../support/pg.h"
#include "../support/test.h"
#include "store/postgres/pg.h"

#define LEASE "2"
/* Runs that must be caught mid-run are longer than any test waits (LONG_RUN steps) and are stopped
 * at a step the test has seen, so nothing depends on how fast the machine trains; the *_AT figures
 * are how far a test lets them go. Sanitizer builds train about ten times slower: they go less far
 * (the same cases, fewer steps). */
#define LONG_RUN 1000000
static int sanitized;
static int LONG_STEPS = 120, LONG_KILL_AT = 40, WATCH_STEPS = 60, RACE_STEPS = 10, OUTAGE_STEPS = 200;
static char LONG_CFG[160], SPREAD_CFG[96], WATCH_CFG[96], RACE_CFG[96], OUTAGE_CFG[128];

static void size_runs(void) {
    const char *mode = getenv("ATTNLAB_TEST_MODE");
    sanitized = mode && (!strcmp(mode, "asan") || !strcmp(mode, "tsan"));
    if (sanitized) {
        LONG_STEPS = 40;
        LONG_KILL_AT = 12;
        WATCH_STEPS = 20;
        RACE_STEPS = 3;
        OUTAGE_STEPS = 60;
    }
    snprintf(LONG_CFG, sizeof LONG_CFG, "\"steps\":%d,\"checkpoint_every\":%d,\"seed\":5,\"attention\":\"cosine_rope\"",
             LONG_RUN, LONG_STEPS / 4); /* a checkpoint writes and hashes ~19 MB (the GPT-2 vocabulary) */
    snprintf(SPREAD_CFG, sizeof SPREAD_CFG, "\"steps\":%d,\"seed\":3", LONG_RUN);
    snprintf(WATCH_CFG, sizeof WATCH_CFG, "\"steps\":%d,\"seed\":9", LONG_RUN);
    snprintf(RACE_CFG, sizeof RACE_CFG, "\"steps\":%d", RACE_STEPS);
    snprintf(OUTAGE_CFG, sizeof OUTAGE_CFG, "\"steps\":%d,\"checkpoint_every\":100,\"seed\":2", LONG_RUN);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct {
    char db[1024];
    char artifacts[300];
} cluster;

static int cluster_new(cluster *c) {
    if (pgtest_new_db(c->db, sizeof c->db) < 0) return -1;
    return harness_tempdir(c->artifacts, sizeof c->artifacts);
}

/* Starts a node of the cluster; role NULL: all. */
static int node_start(harness_server *s, const cluster *c, const char *id, const char *role, const char *workers) {
    const char *args[] = {"--db",
                          c->db,
                          "--artifacts",
                          c->artifacts,
                          "--node-id",
                          id,
                          "--role",
                          role ? role : "all",
                          "--lease-timeout",
                          LEASE,
                          "--train-workers",
                          workers ? workers : "1",
                          "--compute-threads",
                          "1",
                          NULL};
    int rc = harness_start(s, NULL, args);
    if (rc != 0) printf("# node %s did not start\n", id);
    return rc;
}

static json_t *get_run(harness_server *s, long long id) {
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_t *j = api_call(s, "GET", path, NULL, NULL);
    json_t *run = json_incref(json_object_get(j, "run"));
    json_decref(j);
    return run;
}

/* The node a run is (or was last) trained on, into buf ("" when none). */
static void run_node(harness_server *s, long long id, char *buf, size_t len) {
    json_t *run = get_run(s, id);
    const char *n = json_string_value(json_object_get(run, "node"));
    snprintf(buf, len, "%s", n ? n : "");
    json_decref(run);
}

static long long start_run(harness_server *s, const char *cfg, const char *name) {
    return api_start_tiny_run(s, cfg, name);
}

/* Waits until every listed node is alive in GET /api/nodes of s. */
static int wait_nodes_alive(harness_server *s, int want, int timeout_ms) {
    for (int waited = 0; waited < timeout_ms; waited += 100) {
        json_t *j = api_call(s, "GET", "/api/nodes", NULL, NULL);
        int alive = 0;
        size_t i;
        json_t *n;
        json_array_foreach(json_object_get(j, "nodes"), i, n) alive += json_is_true(json_object_get(n, "alive"));
        json_decref(j);
        if (alive >= want) return 0;
        sleep_ms(100);
    }
    return -1;
}

static double metric_value(harness_server *s, const char *name) {
    harness_response r;
    if (harness_get(s, "/metrics", &r) != 0) return -1;
    double v = -1;
    char needle[128];
    snprintf(needle, sizeof needle, "\n%s ", name); /* the sample line, not its HELP or TYPE */
    char *p = r.body ? strstr(r.body, needle) : NULL;
    if (p) v = strtod(p + strlen(needle), NULL);
    harness_response_free(&r);
    return v;
}

TEST(nodes_are_listed_with_their_roles) {
    cluster c;
    CHECK(cluster_new(&c) == 0);
    harness_server a, b;
    CHECK(node_start(&a, &c, "node-a", "all", "2") == 0);
    CHECK(node_start(&b, &c, "node-b", "api", NULL) == 0);
    CHECK(wait_nodes_alive(&b, 2, 10000) == 0);
    json_t *j = api_call(&b, "GET", "/api/nodes", NULL, NULL);
    CHECK(json_is_true(json_object_get(j, "shared")));
    CHECK(!strcmp(json_string_value(json_object_get(j, "self")), "node-b"));
    size_t i;
    json_t *n;
    int seen = 0;
    json_array_foreach(json_object_get(j, "nodes"), i, n) {
        const char *id = json_string_value(json_object_get(n, "id"));
        if (!strcmp(id, "node-a")) {
            CHECK(!strcmp(json_string_value(json_object_get(n, "role")), "all"));
            CHECK_EQ_INT(json_integer_value(json_object_get(n, "capacity")), 2);
            seen++;
        } else if (!strcmp(id, "node-b")) {
            CHECK(!strcmp(json_string_value(json_object_get(n, "role")), "api"));
            CHECK_EQ_INT(json_integer_value(json_object_get(n, "capacity")), 0);
            seen++;
        }
        CHECK(json_is_number(json_object_get(n, "last_heartbeat")));
        CHECK(json_is_string(json_object_get(n, "host")));
        CHECK(json_is_array(json_object_get(n, "running")));
    }
    json_decref(j);
    CHECK_EQ_INT(seen, 2);
    /* /metrics is per node */
    CHECK(metric_value(&a, "attnlab_node_capacity") == 2);
    CHECK(metric_value(&b, "attnlab_node_capacity") == 0);
    harness_response r;
    CHECK(harness_get(&b, "/metrics", &r) == 0);
    CHECK(strstr(r.body, "attnlab_node_info{node=\"node-b\",role=\"api\",shared=\"true\"} 1"));
    harness_response_free(&r);
    /* A worker node trains and answers health, metrics and nodes only. */
    harness_server w;
    CHECK(node_start(&w, &c, "node-w", "worker", NULL) == 0);
    long code;
    json_t *k = api_call(&w, "GET", "/api/runs", NULL, &code);
    json_decref(k);
    CHECK_MSG(code == 404, "a worker answered GET /api/runs with %ld", code);
    k = api_call(&w, "GET", "/api/nodes", NULL, &code);
    CHECK_EQ_INT(code, 200);
    CHECK(!strcmp(json_string_value(json_object_get(k, "self")), "node-w"));
    json_decref(k);
    CHECK_EQ_INT(harness_stop(&w), 0);
    /* A stopped node shows as not alive. */
    CHECK_EQ_INT(harness_stop(&a), 0);
    j = api_call(&b, "GET", "/api/nodes", NULL, NULL);
    json_array_foreach(json_object_get(j, "nodes"), i,
                       n) if (!strcmp(json_string_value(json_object_get(n, "id")), "node-a"))
        CHECK(json_is_false(json_object_get(n, "alive")));
    json_decref(j);
    CHECK_EQ_INT(harness_stop(&b), 0); /* a clean exit: no leak, no sanitizer report */
}

TEST(six_queued_runs_spread_over_two_nodes) {
    cluster c;
    CHECK(cluster_new(&c) == 0);
    harness_server a, b;
    CHECK(node_start(&a, &c, "node-a", NULL, NULL) == 0);
    CHECK(node_start(&b, &c, "node-b", NULL, NULL) == 0);
    CHECK(wait_nodes_alive(&a, 2, 10000) == 0);
    long long ids[6];
    for (int i = 0; i < 6; i++) {
        ids[i] = start_run(i % 2 ? &b : &a, SPREAD_CFG, "spread");
        CHECK(ids[i] > 0);
    }
    /* Each run is longer than the test waits: it is stopped once it has trained a step, which frees
     * its node for the next. While one node holds a run, only the other can take the next one, so
     * both train some whatever the machine's speed. */
    int stopped = 0, done[6] = {0};
    for (int waited = 0; waited < 300000 && stopped < 6; waited += 20) {
        for (int i = 0; i < 6; i++) {
            if (done[i]) continue;
            json_t *run = get_run(&a, ids[i]);
            int step = (int)json_integer_value(json_object_get(run, "step"));
            json_decref(run);
            if (step < 1) continue;
            CHECK_MSG(api_cancel_run(&a, ids[i], 60000) >= 1, "run %lld could not be stopped", ids[i]);
            done[i] = 1;
            stopped++;
        }
        if (stopped < 6) sleep_ms(20);
    }
    CHECK_MSG(stopped == 6, "only %d of the 6 runs ever trained", stopped);
    int on_a = 0, on_b = 0;
    for (int i = 0; i < 6; i++) {
        char node[64];
        run_node(&a, ids[i], node, sizeof node);
        on_a += !strcmp(node, "node-a");
        on_b += !strcmp(node, "node-b");
    }
    printf("# node-a trained %d runs, node-b %d\n", on_a, on_b);
    CHECK_EQ_INT(on_a + on_b, 6);
    CHECK_MSG(on_a >= 1 && on_b >= 1, "one node trained them all (a %d, b %d)", on_a, on_b);
    CHECK_EQ_INT(metric_value(&a, "attnlab_node_claims_total") + metric_value(&b, "attnlab_node_claims_total"), 6);
    CHECK_EQ_INT(harness_stop(&a), 0); /* a clean exit: no leak, no sanitizer report */
    CHECK_EQ_INT(harness_stop(&b), 0); /* a clean exit: no leak, no sanitizer report */
}

TEST(a_killed_node_s_run_is_finished_elsewhere_with_identical_losses) {
    cluster c;
    CHECK(cluster_new(&c) == 0);
    harness_server a, b;
    CHECK(node_start(&a, &c, "node-a", NULL, NULL) == 0);
    CHECK(node_start(&b, &c, "node-b", NULL, NULL) == 0);
    CHECK(wait_nodes_alive(&a, 2, 10000) == 0);
    long long id = start_run(&a, LONG_CFG, "killed");
    CHECK(id > 0);
    CHECK_MSG(api_wait_step(&a, id, LONG_KILL_AT, 300000) == 0, "never reached step %d", LONG_KILL_AT);
    /* ... with a checkpoint stored, so the takeover resumes from it rather than from the start */
    int ckpt = 0;
    for (int waited = 0; waited < 300000 && ckpt <= 0; waited += 20) {
        json_t *r0 = get_run(&a, id);
        ckpt = (int)json_integer_value(json_object_get(r0, "checkpoint_step"));
        json_decref(r0);
        if (ckpt <= 0) sleep_ms(20);
    }
    CHECK_MSG(ckpt > 0, "no checkpoint was ever recorded");
    char first[64];
    run_node(&a, id, first, sizeof first);
    CHECK(first[0]);
    harness_server *victim = !strcmp(first, "node-a") ? &a : &b, *survivor = victim == &a ? &b : &a;
    json_t *run = get_run(survivor, id);
    int step_at_kill = (int)json_integer_value(json_object_get(run, "step"));
    int ckpt_at_kill = (int)json_integer_value(json_object_get(run, "checkpoint_step"));
    json_decref(run);
    CHECK_MSG(step_at_kill < LONG_RUN, "the run finished before the kill");
    double t_kill = now_s();
    harness_kill(victim);
    /* The survivor takes the run over once the lease (2 s) has run out. */
    double t_resumed = 0;
    for (int waited = 0; waited < 30000 && !t_resumed; waited += 20) {
        char node[64];
        run_node(survivor, id, node, sizeof node);
        if (node[0] && strcmp(node, first) != 0)
            t_resumed = now_s();
        else
            sleep_ms(20);
    }
    CHECK_MSG(t_resumed > 0, "no node took the run over");
    printf("# %s killed at step %d (checkpoint %d); the run resumed on the other node %.2f s later "
           "(lease %s s)\n",
           first, step_at_kill, ckpt_at_kill, t_resumed - t_kill, LEASE);
    /* never before the lease ran out (it was last renewed at most a quarter of it before the kill) */
    CHECK(t_resumed - t_kill >= atof(LEASE) * 0.7);
    /* Past the kill and LONG_STEPS, then stopped there: the takeover must have trained every step as
     * its twin, never interrupted, does. */
    int upto = (step_at_kill > LONG_STEPS ? step_at_kill : LONG_STEPS) + 10;
    CHECK_MSG(api_wait_step(survivor, id, upto, 300000) == 0, "the run never reached step %d after the takeover", upto);
    CHECK_MSG(api_cancel_run(survivor, id, 60000) >= upto, "the run could not be stopped after step %d", upto);
    /* the survivor resumed it from the checkpoint (its log says so) */
    char want[96], line[1024];
    snprintf(want, sizeof want, "run %lld: training", id);
    int resumed = 0;
    FILE *lf = fopen(survivor->log_path, "r");
    CHECK(lf);
    while (fgets(line, sizeof line, lf))
        if (strstr(line, want) && strstr(line, "resuming from its checkpoint")) resumed = 1;
    fclose(lf);
    CHECK_MSG(resumed, "the survivor trained run %lld from the start", id);
    /* Its twin, never interrupted, on the survivor. */
    long long twin = start_run(survivor, LONG_CFG, "twin");
    CHECK(twin > 0);
    CHECK_MSG(api_wait_step(survivor, twin, upto, 300000) == 0, "the twin never reached step %d", upto);
    CHECK(api_cancel_run(survivor, twin, 60000) >= upto);
    char why[256] = "";
    CHECK_MSG(api_same_losses(survivor, id, survivor, twin, upto, why, sizeof why), "after the takeover: %s", why);
    CHECK_EQ_INT(harness_stop(survivor), 0); /* a clean exit: no leak, no sanitizer report */
}

/* ---- a small live-stream reader ---------------------------------------------------------------- */

typedef struct {
    long long run;
    char buf[65536];
    size_t len;
    int metrics, last_step, out_of_order, done;
    char final[16];
    unsigned long long last_id, tenth_id; /* the last event's id, and the 10th metrics event's */
} stream;

static void on_block(stream *r, char *block) {
    char type[16] = "", *data = NULL;
    unsigned long long id = 0;
    for (char *line = strtok(block, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "id: ", 4)) id = strtoull(line + 4, NULL, 10);
        if (!strncmp(line, "event: ", 7)) snprintf(type, sizeof type, "%s", line + 7);
        if (!strncmp(line, "data: ", 6)) data = line + 6;
    }
    if (!data) return;
    if (id) r->last_id = id;
    json_t *j = json_loads(data, 0, NULL);
    if (json_integer_value(json_object_get(j, "run_id")) == r->run) {
        if (!strcmp(type, "metrics") && json_object_get(json_object_get(j, "values"), "loss")) {
            int step = (int)json_integer_value(json_object_get(j, "step"));
            if (step <= r->last_step) r->out_of_order++;
            r->last_step = step;
            if (__atomic_add_fetch(&r->metrics, 1, __ATOMIC_RELEASE) == 10) r->tenth_id = id;
        } else if (!strcmp(type, "status")) {
            const char *st = json_string_value(json_object_get(j, "status"));
            if (st && (!strcmp(st, "succeeded") || !strcmp(st, "failed") || !strcmp(st, "cancelled"))) {
                snprintf(r->final, sizeof r->final, "%s", st);
                r->done = 1;
            }
        }
    }
    json_decref(j);
}

static size_t on_bytes(char *ptr, size_t size, size_t nmemb, void *ud) {
    stream *r = ud;
    size_t n = size * nmemb;
    if (r->len + n >= sizeof r->buf) return 0;
    memcpy(r->buf + r->len, ptr, n);
    r->len += n;
    r->buf[r->len] = 0;
    char *end;
    while ((end = strstr(r->buf, "\n\n"))) {
        *end = 0;
        char block[8192];
        snprintf(block, sizeof block, "%s", r->buf);
        size_t used = (size_t)(end + 2 - r->buf);
        memmove(r->buf, end + 2, r->len - used + 1);
        r->len -= used;
        on_block(r, block);
    }
    return r->done ? 0 : n;
}

typedef struct {
    harness_server *s;
    stream *r;
    const char *last_event_id;
} stream_job;

static void *read_stream(void *arg) {
    stream_job *job = arg;
    CURL *c = curl_easy_init();
    char url[256], hdr[96];
    snprintf(url, sizeof url, "%s/api/runs/%lld/events", job->s->base_url, job->r->run);
    struct curl_slist *hl = NULL;
    if (job->last_event_id) {
        snprintf(hdr, sizeof hdr, "Last-Event-ID: %s", job->last_event_id);
        hl = curl_slist_append(hl, hdr);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_bytes);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, job->r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_perform(c);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    return NULL;
}

TEST(a_viewer_on_one_node_sees_the_metrics_of_a_run_trained_on_another) {
    cluster c;
    CHECK(cluster_new(&c) == 0);
    harness_server a, b;
    CHECK(node_start(&a, &c, "trainer", NULL, NULL) == 0);
    CHECK(node_start(&b, &c, "viewer", "api", NULL) == 0); /* trains nothing */
    CHECK(wait_nodes_alive(&b, 2, 10000) == 0);
    /* The run is made on the api node; only the trainer can train it. */
    long long id = start_run(&b, WATCH_CFG, "watched");
    CHECK(id > 0);
    stream *r = calloc(1, sizeof *r);
    r->run = id;
    stream_job job = {&b, r, NULL};
    pthread_t t;
    pthread_create(&t, NULL, read_stream, &job);
    /* Once the viewer has seen WATCH_STEPS / 2 steps, the run is stopped (it is longer than the test
     * waits): its final status must reach the viewer too. */
    int seen = 0;
    for (int waited = 0; waited < 300000 && seen < WATCH_STEPS / 2; waited += 20) {
        seen = __atomic_load_n(&r->metrics, __ATOMIC_ACQUIRE);
        if (seen < WATCH_STEPS / 2) sleep_ms(20);
    }
    int stopped_at = api_cancel_run(&b, id, 60000);
    pthread_join(t, NULL);
    CHECK_MSG(seen >= WATCH_STEPS / 2, "the viewer saw only %d metrics events", seen);
    CHECK_MSG(stopped_at > 0, "the run could not be cancelled from the api node");
    CHECK_MSG(r->done, "no final status reached the viewer (%d metrics events)", r->metrics);
    CHECK(!strcmp(r->final, "cancelled"));
    char node[64];
    run_node(&b, id, node, sizeof node);
    CHECK(!strcmp(node, "trainer"));
    printf("# the viewer on the api node got %d metrics events of a run trained on the other node\n", r->metrics);
    /* Steps that were stored before the viewer subscribed are in the REST API; the stream has
     * every later step, in order, up to the one the run stopped at. */
    CHECK_EQ_INT(r->out_of_order, 0);
    CHECK_EQ_INT(r->last_step, stopped_at);
    /* Last-Event-ID resumes on the viewer's node as it does for local runs: after the 10th metrics
     * event, every later one and the final status, nothing twice. */
    char last[32];
    snprintf(last, sizeof last, "%llu", r->tenth_id);
    stream *again = calloc(1, sizeof *again);
    again->run = id;
    stream_job job2 = {&b, again, last};
    read_stream(&job2);
    CHECK_MSG(again->done, "the resumed stream did not reach the final status");
    CHECK_EQ_INT(again->metrics, r->metrics - 10);
    CHECK_EQ_INT(again->out_of_order, 0);
    free(again);
    free(r);
    CHECK_EQ_INT(harness_stop(&a), 0); /* a clean exit: no leak, no sanitizer report */
    CHECK_EQ_INT(harness_stop(&b), 0); /* a clean exit: no leak, no sanitizer report */
}

TEST(nodes_racing_for_one_run_never_both_run_it) {
    cluster c;
    CHECK(cluster_new(&c) == 0);
    harness_server n[3];
    CHECK(node_start(&n[0], &c, "r0", NULL, NULL) == 0);
    CHECK(node_start(&n[1], &c, "r1", NULL, NULL) == 0);
    CHECK(node_start(&n[2], &c, "r2", NULL, NULL) == 0);
    CHECK(wait_nodes_alive(&n[0], 3, 10000) == 0);
    enum { ROUNDS = 5 };
    for (int round = 0; round < ROUNDS; round++) {
        /* Every node idle; one run appears; all of them hear of it at once. */
        long long id = start_run(&n[round % 3], RACE_CFG, "raced");
        CHECK(id > 0);
        char *st = api_wait_status(&n[0], id, "succeeded", 60000);
        CHECK_MSG(st && !strcmp(st, "succeeded"), "round %d: %s", round, st ? st : "?");
        free(st);
    }
    double claims = 0;
    for (int i = 0; i < 3; i++) claims += metric_value(&n[i], "attnlab_node_claims_total");
    CHECK_EQ_INT(claims, ROUNDS); /* each run claimed once, by one node */
    /* and each was trained once: one "training" line per run over all the nodes' logs */
    int trained = 0;
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(n[i].log_path, "r");
        CHECK(f);
        char line[1024];
        while (fgets(line, sizeof line, f))
            if (strstr(line, ": training ")) trained++;
        fclose(f);
    }
    CHECK_EQ_INT(trained, ROUNDS);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(harness_stop(&n[i]), 0);
}

TEST(cancel_on_one_node_stops_the_run_on_another) {
    cluster c;
    CHECK(cluster_new(&c) == 0);
    harness_server a, b;
    CHECK(node_start(&a, &c, "trainer", NULL, NULL) == 0);
    CHECK(node_start(&b, &c, "front", "api", NULL) == 0);
    CHECK(wait_nodes_alive(&b, 2, 10000) == 0);
    long long id = start_run(&b, LONG_CFG, "cancelled");
    CHECK(id > 0);
    CHECK(api_wait_step(&b, id, LONG_KILL_AT / 2, 300000) == 0);
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld/cancel", id);
    long code;
    json_t *j = api_call(&b, "POST", path, "{}", &code);
    json_decref(j);
    CHECK_MSG(code == 200 || code == 202, "cancel answered %ld", code);
    double t0 = now_s();
    char *st = api_wait_status(&b, id, "cancelled", 20000);
    CHECK_MSG(st && !strcmp(st, "cancelled"), "the run is %s", st ? st : "?");
    free(st);
    printf("# cancel on the api node stopped the run on the trainer in %.2f s\n", now_s() - t0);
    CHECK_EQ_INT(harness_stop(&a), 0); /* a clean exit: no leak, no sanitizer report */
    CHECK_EQ_INT(harness_stop(&b), 0); /* a clean exit: no leak, no sanitizer report */
}

TEST(a_bad_database_at_start_exits_2_with_one_line) {
    char err[1024];
    const char *unreachable[] = {"--port",     "0",
                                 "--data-dir", "/tmp/attnlab-nodes-never",
                                 "--db",       "postgresql://attnlab:sekrit@127.0.0.1:1/nothing",
                                 NULL};
    char dir[256];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    unreachable[3] = dir;
    int rc = harness_run_attnlabd(unreachable, err, sizeof err);
    CHECK_EQ_INT(rc, 2);
    CHECK_MSG(strstr(err, "attnlabd: database: cannot connect to postgresql://attnlab:***@127.0.0.1:1/nothing"), "%s",
              err);
    CHECK(!strstr(err, "sekrit"));
    CHECK_MSG(strchr(err, '\n') == err + strlen(err) - 1, "more than one line: %s", err);

    /* a database that is somebody else's */
    char url[1024];
    CHECK(pgtest_new_db(url, sizeof url) == 0);
    char e2[512];
    pg_conn *pc = pg_connect(url, 5, "test", e2, sizeof e2);
    CHECK(pc);
    CHECK(pg_exec_script(pc, "foreign", "CREATE TABLE invoices (id int)") == STORE_OK);
    pg_close(pc);
    const char *foreign[] = {"--port", "0", "--data-dir", dir, "--db", url, NULL};
    rc = harness_run_attnlabd(foreign, err, sizeof err);
    CHECK_EQ_INT(rc, 2);
    CHECK_MSG(strstr(err, "not an attnlab database"), "%s", err);
    CHECK_MSG(strchr(err, '\n') == err + strlen(err) - 1, "more than one line: %s", err);

    /* roles need a shared database */
    const char *role[] = {"--port", "0", "--data-dir", dir, "--role", "worker", NULL};
    rc = harness_run_attnlabd(role, err, sizeof err);
    CHECK_EQ_INT(rc, 2);
    CHECK_MSG(strstr(err, "needs a database that several nodes share"), "%s", err);
}

/* Cuts every connection to the cluster's database and refuses new ones, or lets them in again. */
static int database_gate(const cluster *c, int open) {
    char admin[1024], sql[600], err[512];
    snprintf(admin, sizeof admin, "%s", pgtest_server_url());
    const char *name = strrchr(c->db, '/') + 1;
    if (open)
        snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS true", name);
    else
        snprintf(sql, sizeof sql,
                 "ALTER DATABASE %s ALLOW_CONNECTIONS false; SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE datname = '%s'",
                 name, name);
    pg_conn *pc = pg_connect(admin, 5, "test", err, sizeof err);
    if (!pc) return -1;
    store_status s = pg_exec_script(pc, "gate", sql);
    pg_close(pc);
    return s == STORE_OK ? 0 : -1;
}

TEST(a_database_lost_for_a_moment_answers_503_and_loses_no_metric) {
    cluster c;
    CHECK(cluster_new(&c) == 0);
    harness_server a;
    const char *args[] = {
        "--db", c.db, "--artifacts", c.artifacts, "--node-id", "alone", "--lease-timeout", "12", "--compute-threads",
        "1",    NULL};
    CHECK(harness_start(&a, NULL, args) == 0);
    long long id = start_run(&a, OUTAGE_CFG, "through an outage");
    CHECK(id > 0);
    CHECK(api_wait_step(&a, id, 20, 60000) == 0);
    CHECK(database_gate(&c, 0) == 0);
    sleep_ms(300);
    long code = 0;
    json_t *j = api_call(&a, "GET", "/api/runs", NULL, &code);
    CHECK_MSG(code == 503, "GET /api/runs answered %ld with the database gone", code);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "unavailable"));
    json_decref(j);
    j = api_call(&a, "GET", "/api/health", NULL, &code);
    CHECK_EQ_INT(code, 503);
    json_decref(j);
    /* Training goes on meanwhile (its progress is live, from memory). */
    j = api_call(&a, "GET", "/metrics", NULL, &code);
    json_decref(j);
    sleep_ms(2500);
    CHECK(database_gate(&c, 1) == 0);
    /* The run trains on after the outage (it is longer than the test waits) and is stopped at a
     * step seen once the database is back: every step's metrics up to there were kept and written. */
    json_t *run = get_run(&a, id);
    int back_at = (int)json_integer_value(json_object_get(run, "step"));
    json_decref(run);
    int upto = (back_at > OUTAGE_STEPS ? back_at : OUTAGE_STEPS) + 20;
    int reached = api_wait_step(&a, id, upto, 300000) == 0;
    int last = reached ? api_cancel_run(&a, id, 60000) : -1;
    if (last < upto) {
        run = get_run(&a, id);
        printf("# the run is %s, its error: %s\n", json_string_value(json_object_get(run, "status")),
               json_string_value(json_object_get(run, "error")));
        json_decref(run);
        harness_dump_log(&a);
    }
    CHECK_MSG(reached && last >= upto, "the run did not train on to step %d after the outage", upto);
    char why[256] = "";
    /* (compared with itself: its loss points are steps 1..last, each once) */
    CHECK_MSG(api_same_losses(&a, id, &a, id, last, why, sizeof why), "%s", why);
    json_t *loss = api_series(&a, id, "loss");
    CHECK_EQ_INT(json_array_size(loss), last); /* every step's metrics were kept and written */
    json_decref(loss);
    CHECK_EQ_INT(harness_stop(&a), 0); /* a clean exit: no leak, no sanitizer report */
}

TEST(a_corpus_file_that_no_longer_matches_its_checksum_is_not_trained_on) {
    cluster c;
    CHECK(cluster_new(&c) == 0);
    harness_server a;
    CHECK(node_start(&a, &c, "alone", NULL, NULL) == 0);
    long long ok = start_run(&a, "\"steps\":5", "before");
    CHECK(ok > 0);
    char *st = api_wait_status(&a, ok, "succeeded", 60000);
    CHECK(st && !strcmp(st, "succeeded"));
    free(st);
    /* Another writer changes the shared token file behind the database's back. */
    char path[400];
    snprintf(path, sizeof path, "%s/corpora/small/tokens.u16", c.artifacts);
    FILE *f = fopen(path, "r+b");
    CHECK(f);
    unsigned char b[2];
    CHECK(fread(b, 1, 2, f) == 2);
    b[0] ^= 1;
    CHECK(fseek(f, 0, SEEK_SET) == 0 && fwrite(b, 1, 2, f) == 2);
    fclose(f);
    long long bad = start_run(&a, "\"steps\":5", "after");
    CHECK(bad > 0);
    st = api_wait_status(&a, bad, "failed", 60000);
    CHECK_MSG(st && !strcmp(st, "failed"), "the run on a changed corpus ended %s", st ? st : "?");
    free(st);
    json_t *run = get_run(&a, bad);
    const char *err = json_string_value(json_object_get(run, "error"));
    CHECK_MSG(err && strstr(err, "does not match its recorded checksum"), "error: %s", err ? err : "(none)");
    json_decref(run);
    CHECK_EQ_INT(harness_stop(&a), 0); /* a clean exit: no leak, no sanitizer report */
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    size_runs();
    if (!pgtest_server_url()) {
        printf("FAIL test_nodes: no PostgreSQL server for the tests\n");
        return 1;
    }
    RUN(a_bad_database_at_start_exits_2_with_one_line);
    RUN(nodes_are_listed_with_their_roles);
    RUN(six_queued_runs_spread_over_two_nodes);
    RUN(a_killed_node_s_run_is_finished_elsewhere_with_identical_losses);
    RUN(a_viewer_on_one_node_sees_the_metrics_of_a_run_trained_on_another);
    RUN(nodes_racing_for_one_run_never_both_run_it);
    RUN(cancel_on_one_node_stops_the_run_on_another);
    RUN(a_database_lost_for_a_moment_answers_503_and_loses_no_metric);
    RUN(a_corpus_file_that_no_longer_matches_its_checksum_is_not_trained_on);
    curl_global_cleanup();
    return test_summary();
}
