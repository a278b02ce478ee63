/* Idempotency keys over real HTTP: a creation whose answer was lost (the server killed right after
 * the commit) is retried with the same Idempotency-Key and gets the first answer, not a duplicate;
 * the key with another request is refused; requests racing with one key create one thing. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/test.h"

static const char *const ARGS[] = {"--max-model-mb", "256", "--train-workers", "1", "--compute-threads", "1", NULL};

/* A run that stays queued or trains long: the test never needs it to end. */
#define RUN_BODY "{\"name\":\"idem\",\"config\":{" TINY_CONFIG ",\"steps\":1000000}}"
#define EXPERIMENT_BODY                                                                                                \
    "{\"name\":\"idem-exp\",\"base\":{" TINY_CONFIG ",\"steps\":1000000},\"variants\":[{\"name\":\"a\",\"config\":"    \
    "{\"attention\":\"rope\"}},{\"name\":\"b\",\"config\":{\"attention\":\"cosine_rope\"}}]}"

/* POST path body with the Idempotency-Key key (NULL: none); the answer's JSON, *code and whether it
 * said it was a retry's. */
static json_t *post_keyed(harness_server *s, const char *path, const char *body, const char *key, long *code,
                          int *replayed) {
    char header[512];
    if (key && !*key)
        snprintf(header, sizeof header, "Idempotency-Key;"); /* curl's way of sending an empty value */
    else
        snprintf(header, sizeof header, "Idempotency-Key: %s", key ? key : "");
    const char *headers[] = {"Content-Type: application/json", key ? header : NULL, NULL};
    harness_response r;
    *code = 0;
    if (replayed) *replayed = 0;
    if (harness_request(s, "POST", path, body, strlen(body), headers, &r) != 0) return NULL;
    *code = r.status;
    char v[32];
    if (replayed) *replayed = harness_header(&r, "Idempotent-Replayed", v, sizeof v) && !strcmp(v, "true");
    json_t *j = harness_json(&r);
    harness_response_free(&r);
    return j;
}

static long long total_of(harness_server *s, const char *path) {
    long code;
    json_t *j = api_call(s, "GET", path, NULL, &code);
    long long n = code == 200 ? (long long)json_integer_value(json_object_get(j, "total")) : -1;
    json_decref(j);
    return n;
}

static long long id_at(json_t *j, const char *member) {
    return (long long)json_integer_value(json_object_get(json_object_get(j, member), "id"));
}

TEST(a_retry_after_a_kill_gets_the_first_answer_not_a_duplicate) {
    harness_server s, s2;
    CHECK(harness_start(&s, NULL, ARGS) == 0);
    long code;
    int replayed;
    json_t *run = post_keyed(&s, "/api/runs", RUN_BODY, "run-key-1", &code, &replayed);
    CHECK_EQ_INT(code, 201);
    CHECK(!replayed);
    long long run_id = id_at(run, "run");
    json_decref(run);
    json_t *exp = post_keyed(&s, "/api/experiments", EXPERIMENT_BODY, "exp-key-1", &code, &replayed);
    CHECK_EQ_INT(code, 201);
    long long exp_id = id_at(exp, "experiment");
    json_t *runs = json_object_get(exp, "runs");
    CHECK_EQ_INT(json_array_size(runs), 2);
    long long first_runs[2] = {(long long)json_integer_value(json_object_get(json_array_get(runs, 0), "id")),
                               (long long)json_integer_value(json_object_get(json_array_get(runs, 1), "id"))};
    json_decref(exp);
    /* The answers are lost: the server dies right after committing (SIGKILL), the client retries. */
    harness_kill(&s);
    CHECK(harness_start(&s2, s.data_dir, ARGS) == 0);
    run = post_keyed(&s2, "/api/runs", RUN_BODY, "run-key-1", &code, &replayed);
    CHECK_EQ_INT(code, 201);
    CHECK_MSG(replayed, "the retry was not marked Idempotent-Replayed");
    CHECK_EQ_INT(id_at(run, "run"), run_id);
    json_decref(run);
    exp = post_keyed(&s2, "/api/experiments", EXPERIMENT_BODY, "exp-key-1", &code, &replayed);
    CHECK_EQ_INT(code, 201);
    CHECK(replayed);
    CHECK_EQ_INT(id_at(exp, "experiment"), exp_id);
    runs = json_object_get(exp, "runs");
    CHECK_EQ_INT(json_array_size(runs), 2);
    for (int i = 0; i < 2; i++)
        CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(runs, (size_t)i), "id")), first_runs[i]);
    json_decref(exp);
    /* One run and one experiment of two runs: nothing duplicated. */
    CHECK_EQ_INT(total_of(&s2, "/api/experiments"), 1);
    CHECK_EQ_INT(total_of(&s2, "/api/runs"), 3);
    /* Without a key, or with a new one, the same request creates again. */
    run = post_keyed(&s2, "/api/runs", RUN_BODY, "run-key-2", &code, &replayed);
    CHECK_EQ_INT(code, 201);
    CHECK(!replayed && id_at(run, "run") != run_id);
    json_decref(run);
    CHECK_EQ_INT(total_of(&s2, "/api/runs"), 4);
    harness_stop(&s2);
}

TEST(a_key_for_another_request_or_a_bad_key_is_refused) {
    harness_server s;
    CHECK(harness_start(&s, NULL, ARGS) == 0);
    long code;
    json_t *j = post_keyed(&s, "/api/runs", RUN_BODY, "k", &code, NULL);
    CHECK_EQ_INT(code, 201);
    json_decref(j);
    /* The same key, another body (or the same body to create another kind of thing): 422. */
    const char *other = "{\"name\":\"another\",\"config\":{" TINY_CONFIG ",\"steps\":1000000}}";
    j = post_keyed(&s, "/api/runs", other, "k", &code, NULL);
    CHECK_EQ_INT(code, 422);
    CHECK(!strcmp(api_error_field(j), "Idempotency-Key"));
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "idempotency_key_reused"));
    json_decref(j);
    j = post_keyed(&s, "/api/experiments", EXPERIMENT_BODY, "k", &code, NULL);
    CHECK_EQ_INT(code, 422);
    CHECK(!strcmp(api_error_field(j), "Idempotency-Key"));
    json_decref(j);
    /* Members in another order are the same request. */
    const char *reordered = "{\"config\":{" TINY_CONFIG ",\"steps\":1000000},\"name\":\"idem\"}";
    int replayed;
    j = post_keyed(&s, "/api/runs", reordered, "k", &code, &replayed);
    CHECK_EQ_INT(code, 201);
    CHECK(replayed);
    json_decref(j);
    char longkey[300];
    memset(longkey, 'x', 256);
    longkey[256] = 0;
    const char *bad[] = {"", longkey, NULL};
    for (int i = 0; bad[i]; i++) {
        j = post_keyed(&s, "/api/runs", RUN_BODY, bad[i], &code, NULL);
        CHECK_MSG(code == 422 && !strcmp(api_error_field(j), "Idempotency-Key"), "key %d: %ld", i, code);
        json_decref(j);
    }
    CHECK_EQ_INT(total_of(&s, "/api/runs"), 1);
    CHECK_EQ_INT(total_of(&s, "/api/experiments"), 0);
    harness_stop(&s);
}

typedef struct {
    harness_server *s;
    const char *path, *body;
    long code;
    long long id;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    json_t *j = post_keyed(r->s, r->path, r->body, "raced", &r->code, NULL);
    r->id = id_at(j, strstr(r->path, "experiments") ? "experiment" : "run");
    json_decref(j);
    return NULL;
}

TEST(requests_racing_with_one_key_create_one_thing) {
    harness_server s;
    CHECK(harness_start(&s, NULL, ARGS) == 0);
    racer r[8];
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
        r[i] = (racer){.s = &s, .path = "/api/runs", .body = RUN_BODY};
        CHECK(pthread_create(&t[i], NULL, race, &r[i]) == 0);
    }
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 8; i++) {
        CHECK_MSG(r[i].code == 201, "racer %d: %ld", i, r[i].code);
        CHECK_EQ_INT(r[i].id, r[0].id);
    }
    CHECK_EQ_INT(total_of(&s, "/api/runs"), 1);
    /* The key is the run's now: an experiment with it is another request. */
    long code;
    json_t *j = post_keyed(&s, "/api/experiments", EXPERIMENT_BODY, "raced", &code, NULL);
    CHECK_EQ_INT(code, 422);
    json_decref(j);
    harness_stop(&s);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(a_retry_after_a_kill_gets_the_first_answer_not_a_duplicate);
    RUN(a_key_for_another_request_or_a_bad_key_is_refused);
    RUN(requests_racing_with_one_key_create_one_thing);
    curl_global_cleanup();
    return test_summary();
}
