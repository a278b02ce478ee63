/* The cache of answers about ended runs' metrics: its bounds and recency order as a unit, and
 * through a real attnlabd that a cached answer is the answer (the same bytes as computed), that
 * only ended runs are cached (an interrupted one too), and that a run resumed after a cancel is
 * answered afresh with the points it gained (its key changes with its status and step). */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"
#include "api/reply_cache.h"

static harness_server srv;

static int get_is(reply_cache *c, const char *key, const char *want) {
    char *body;
    size_t len;
    if (!reply_cache_get(c, key, &body, &len)) return want == NULL;
    int ok = want && len == strlen(want) && !memcmp(body, want, len);
    free(body);
    return ok;
}

TEST(least_recently_used_answers_go_first) {
    reply_cache *c = reply_cache_new(1000, 3);
    CHECK(c);
    reply_cache_put(c, "a", "alpha", 5);
    reply_cache_put(c, "b", "beta", 4);
    reply_cache_put(c, "c", "gamma", 5);
    CHECK(get_is(c, "a", "alpha")); /* a is now the most recent: b is the oldest */
    reply_cache_put(c, "d", "delta", 5);
    CHECK(get_is(c, "b", NULL));
    CHECK(get_is(c, "a", "alpha"));
    CHECK(get_is(c, "c", "gamma"));
    CHECK(get_is(c, "d", "delta"));
    reply_cache_put(c, "a", "ALPHA!", 6); /* the same key replaces its answer */
    CHECK(get_is(c, "a", "ALPHA!"));
    int n;
    size_t bytes;
    unsigned long long hits, misses;
    reply_cache_stats(c, &hits, &misses, &n, &bytes);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(bytes, 6 + 5 + 5);
    CHECK_EQ_INT(hits, 5);
    CHECK_EQ_INT(misses, 1);
    reply_cache_free(c);
}

TEST(the_byte_bound_holds_and_large_answers_are_not_kept) {
    reply_cache *c = reply_cache_new(100, 100);
    CHECK(c);
    char body[26];
    memset(body, 'x', sizeof body);
    reply_cache_put(c, "big", body, 26); /* over a quarter of the bound */
    CHECK(get_is(c, "big", NULL));
    for (int i = 0; i < 10; i++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", i);
        reply_cache_put(c, key, body, 25);
        size_t bytes;
        reply_cache_stats(c, NULL, NULL, NULL, &bytes);
        CHECK_MSG(bytes <= 100, "%zu bytes held after %d answers", bytes, i + 1);
    }
    CHECK(get_is(c, "k9", "xxxxxxxxxxxxxxxxxxxxxxxxx"));
    CHECK(get_is(c, "k5", NULL));
    reply_cache_free(c);
    /* No cache: nothing is kept, nothing breaks. */
    reply_cache_put(NULL, "a", "b", 1);
    CHECK(get_is(NULL, "a", NULL));
}

typedef struct {
    reply_cache *c;
    int id;
} worker;

static void *hammer(void *arg) {
    worker *w = arg;
    char key[16], body[64];
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof key, "k%d", (i * 7 + w->id) % 40);
        snprintf(body, sizeof body, "answer for %s", key);
        if (i % 3 == 0) reply_cache_put(w->c, key, body, strlen(body));
        char *got;
        size_t len;
        if (reply_cache_get(w->c, key, &got, &len)) {
            if (len != strlen(body) || memcmp(got, body, len)) w->id = -1000; /* a torn or foreign answer */
            free(got);
        }
    }
    return NULL;
}

TEST(threads_share_one_cache) {
    reply_cache *c = reply_cache_new(2000, 16);
    CHECK(c);
    pthread_t t[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){c, i};
        CHECK(pthread_create(&t[i], NULL, hammer, &w[i]) == 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) CHECK_MSG(w[i].id == i, "thread %d read an answer that was not its key's", i);
    int n;
    size_t bytes;
    reply_cache_stats(c, NULL, NULL, &n, &bytes);
    CHECK(n <= 16 && bytes <= 2000);
    reply_cache_free(c);
}

/* The server's hit counter from /metrics. */
static long long cache_hits(void) {
    harness_response r;
    if (harness_get(&srv, "/metrics", &r) != 0) return -1;
    const char *p = r.body ? strstr(r.body, "attnlab_reply_cache_requests_total{result=\"hit\"} ") : NULL;
    long long v = p ? atoll(p + strlen("attnlab_reply_cache_requests_total{result=\"hit\"} ")) : -1;
    harness_response_free(&r);
    return v;
}

/* The body of GET path (caller frees), or NULL unless 200. */
static char *body_of(const char *path) {
    harness_response r;
    if (harness_get(&srv, path, &r) != 0) return NULL;
    char *b = r.status == 200 && r.body ? strdup(r.body) : NULL;
    harness_response_free(&r);
    return b;
}

/* The count of the loss series in a metrics answer; -1 if unreadable. */
static long long loss_count(const char *body) {
    json_t *j = json_loads(body, 0, NULL);
    json_t *n = json_object_get(json_object_get(json_object_get(j, "series"), "loss"), "count");
    long long v = json_is_integer(n) ? json_integer_value(n) : -1;
    json_decref(j);
    return v;
}

TEST(an_ended_runs_answer_is_cached_and_a_resumed_run_answered_afresh) {
    /* Longer than the test waits: it is stopped at steps the test has seen (speed-independent). */
    long long id = api_start_tiny_run(&srv, "\"steps\":1000000,\"checkpoint_every\":10,\"seed\":3", "cached");
    CHECK(id > 0);
    char path[128], csv[128];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics?max_points=40&keys=loss", id);
    snprintf(csv, sizeof csv, "/api/runs/%lld/metrics.csv", id);
    CHECK_MSG(api_wait_step(&srv, id, 20, 60000) == 0, "the run never reached step 20");
    /* Running: never cached. */
    long long h0 = cache_hits();
    char *live1 = body_of(path), *live2 = body_of(path);
    CHECK(live1 && live2);
    CHECK_EQ_INT(cache_hits(), h0);
    free(live1);
    free(live2);

    char p2[96];
    long code;
    snprintf(p2, sizeof p2, "/api/runs/%lld/cancel", id);
    json_decref(api_call(&srv, "POST", p2, NULL, &code));
    CHECK_EQ_INT(code, 202);
    char *st = api_wait_status(&srv, id, "cancelled", 30000);
    CHECK_MSG(st && !strcmp(st, "cancelled"), "status %s", st ? st : "(timeout)");
    free(st);
    char *first = body_of(path), *again = body_of(path), *csv1 = body_of(csv), *csv2 = body_of(csv);
    CHECK(first && again && csv1 && csv2);
    CHECK_MSG(!strcmp(first, again), "a cached answer differs from the computed one");
    CHECK_MSG(!strcmp(csv1, csv2), "a cached CSV differs from the computed one");
    CHECK_EQ_INT(cache_hits(), h0 + 2);
    long long n_cancelled = loss_count(first);
    CHECK_MSG(n_cancelled >= 20, "%lld loss points at the cancel", n_cancelled);
    free(again);
    free(csv2);

    snprintf(p2, sizeof p2, "/api/runs/%lld/resume", id);
    json_decref(api_call(&srv, "POST", p2, NULL, &code));
    CHECK_EQ_INT(code, 202);
    CHECK_MSG(api_wait_step(&srv, id, (int)n_cancelled + 20, 180000) == 0,
              "the resumed run never got 20 steps further");
    int last = api_cancel_run(&srv, id, 30000);
    CHECK(last >= n_cancelled + 20);
    char *after = body_of(path), *csv3 = body_of(csv);
    CHECK(after && csv3);
    long long n_after = loss_count(after);
    CHECK_MSG(n_after == last, "the resumed run's answer has %lld loss points, not %d (a stale cached answer?)",
              n_after, last);
    CHECK_MSG(strlen(csv3) > strlen(csv1), "the resumed run's CSV did not grow");
    free(first);
    free(csv1);
    free(after);
    free(csv3);
}

TEST(an_interrupted_runs_answer_is_cached) {
    /* A run the service stopped under (killed mid-training) is interrupted at the next start: it has
     * ended (only a resume moves it again, and that changes its key), so its answers are kept. */
    harness_server own;
    CHECK(harness_start(&own, NULL, NULL) == 0);
    harness_server keep = srv;
    srv = own;
    long long id = api_start_tiny_run(&srv, "\"steps\":1000000,\"seed\":5", "interrupted");
    int reached = id > 0 && api_wait_step(&srv, id, 10, 60000) == 0;
    harness_kill(&srv);
    char dir[sizeof own.data_dir];
    snprintf(dir, sizeof dir, "%s", own.data_dir);
    int restarted = harness_start(&own, dir, NULL) == 0;
    srv = own;
    char *st = restarted ? api_wait_status(&srv, id, "interrupted", 30000) : NULL;
    char path[128];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=loss", id);
    long long h0 = cache_hits();
    char *first = body_of(path), *again = body_of(path);
    long long h1 = cache_hits();
    harness_stop(&srv);
    srv = keep;
    CHECK(reached && restarted);
    CHECK_MSG(st && !strcmp(st, "interrupted"), "status %s", st ? st : "(timeout)");
    free(st);
    CHECK(first && again && !strcmp(first, again));
    free(first);
    free(again);
    CHECK_MSG(h1 == h0 + 1, "an interrupted run's answer was not kept (%lld hits, then %lld)", h0, h1);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(least_recently_used_answers_go_first);
    RUN(the_byte_bound_holds_and_large_answers_are_not_kept);
    RUN(threads_share_one_cache);
    if (harness_start(&srv, NULL, NULL) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        return 1;
    }
    RUN(an_ended_runs_answer_is_cached_and_a_resumed_run_answered_afresh);
    RUN(an_interrupted_runs_answer_is_cached);
    harness_stop(&srv);
    curl_global_cleanup();
    return test_summary();
}
