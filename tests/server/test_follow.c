/* Presenter mode: POST /api/follow gives a join code and a token, PUT /api/follow/{code} with
 * that token sets what the presenter shows (checked and bounded), GET /api/follow/{code} reads
 * it; against a real attnlabd. The limits that need a clock (expiry, the most live codes) are
 * checked on the service itself with made-up times. The `follow` event and a follower's page are
 * checked in the browser (tests/browser/test_follow.mjs). */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/test.h"
#include "services/svc_follow.h"

static harness_server srv;

static json_t *put(const char *code, const char *token, const char *body, long *status) {
    char path[96], hdr[128];
    snprintf(path, sizeof path, "/api/follow/%s", code);
    snprintf(hdr, sizeof hdr, "X-Follow-Token: %s", token);
    const char *headers[] = {hdr, "Content-Type: application/json", NULL};
    harness_response r;
    json_t *j = NULL;
    *status = 0;
    if (harness_request(&srv, "PUT", path, body, strlen(body), token ? headers : headers + 1, &r) == 0) {
        *status = r.status;
        j = harness_json(&r);
        harness_response_free(&r);
    }
    return j;
}

static const char *field_of(json_t *j) { return api_error_field(j) ? api_error_field(j) : ""; }

TEST(a_code_is_made_set_by_its_presenter_and_read_by_anyone) {
    long code;
    json_t *j = api_call(&srv, "POST", "/api/follow", NULL, &code);
    CHECK_EQ_INT(code, 201);
    json_t *f = json_object_get(j, "follow");
    const char *c = json_string_value(json_object_get(f, "code")),
               *token = json_string_value(json_object_get(f, "token"));
    CHECK(c && strlen(c) == SVC_FOLLOW_CODE_LEN && strspn(c, "ABCDEFGHJKLMNPQRSTUVWXYZ23456789") == strlen(c));
    CHECK(token && strlen(token) == 32);
    CHECK_EQ_INT(json_integer_value(json_object_get(f, "seq")), 0);
    CHECK(json_is_null(json_object_get(f, "hash")));
    char cc[16], tok[64], path[64];
    snprintf(cc, sizeof cc, "%s", c ? c : "");
    snprintf(tok, sizeof tok, "%s", token ? token : "");
    json_decref(j);
    /* the presenter shows a run */
    j = put(cc, tok, "{\"hash\":\"#/run/12?tab=tau\",\"run\":12,\"probe\":null}", &code);
    CHECK_EQ_INT(code, 200);
    f = json_object_get(j, "follow");
    CHECK_EQ_INT(json_integer_value(json_object_get(f, "seq")), 1);
    CHECK(!strcmp(json_string_value(json_object_get(f, "hash")), "#/run/12?tab=tau"));
    CHECK(!json_object_get(f, "token")); /* the token is said once, to the presenter */
    json_decref(j);
    /* a late joiner reads it, the code in any case */
    for (char *p = cc; *p; p++) *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    snprintf(path, sizeof path, "/api/follow/%s", cc);
    j = api_call(&srv, "GET", path, NULL, &code);
    CHECK_EQ_INT(code, 200);
    f = json_object_get(j, "follow");
    CHECK_EQ_INT(json_integer_value(json_object_get(f, "run")), 12);
    CHECK(json_is_null(json_object_get(f, "probe")));
    CHECK(json_number_value(json_object_get(f, "expires_at")) > json_number_value(json_object_get(f, "updated_at")));
    json_decref(j);
    j = put(cc, tok, "{\"hash\":\"#/probes/pair_turns\",\"probe\":\"pair_turns\"}", &code);
    CHECK_EQ_INT(code, 200);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(j, "follow"), "probe")), "pair_turns"));
    json_decref(j);
    /* no token, or another one: 403; the state stays */
    j = put(cc, NULL, "{\"hash\":\"#/runs\"}", &code);
    CHECK_EQ_INT(code, 403);
    CHECK(!strcmp(field_of(j), "token"));
    json_decref(j);
    j = put(cc, "00000000000000000000000000000000", "{\"hash\":\"#/runs\"}", &code);
    CHECK_EQ_INT(code, 403);
    json_decref(j);
    j = api_call(&srv, "GET", path, NULL, &code);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(j, "follow"), "seq")), 2);
    json_decref(j);
    /* bodies are checked, field by field */
    static const struct {
        const char *body, *field;
    } bad[] = {
        {"{}", "hash"},
        {"{\"hash\":\"runs\"}", "hash"},
        {"{\"hash\":\"#/run/1 <script>\"}", "hash"},
        {"{\"hash\":\"#/follow/ABCDEF\"}", "hash"},
        {"{\"hash\":7}", "hash"},
        {"{\"hash\":\"#/runs\",\"run\":0}", "run"},
        {"{\"hash\":\"#/runs\",\"run\":\"12\"}", "run"},
        {"{\"hash\":\"#/runs\",\"probe\":\"Pair-Turns\"}", "probe"},
        {"{\"hash\":\"#/runs\",\"theme\":\"dark\"}", "theme"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = put(cc, tok, bad[i].body, &code);
        CHECK_MSG(code == 422 && !strcmp(field_of(j), bad[i].field), "%s: %ld %s", bad[i].body, code, field_of(j));
        json_decref(j);
    }
    char big[700] = "{\"hash\":\"#/";
    memset(big + strlen(big), 'a', 600);
    strcpy(big + 11 + 600, "\"}");
    j = put(cc, tok, big, &code);
    CHECK_EQ_INT(code, 422);
    json_decref(j);
    /* unknown codes */
    j = api_call(&srv, "GET", "/api/follow/ZZZZZZ", NULL, &code);
    CHECK_EQ_INT(code, 404);
    json_decref(j);
    j = put("ZZZZZZ", tok, "{\"hash\":\"#/runs\"}", &code);
    CHECK_EQ_INT(code, 404);
    json_decref(j);
    j = api_call(&srv, "GET", "/api/follow/much-too-long-a-code", NULL, &code);
    CHECK_EQ_INT(code, 404);
    json_decref(j);
}

TEST(codes_expire_and_are_bounded_in_number) {
    svc_follow_reset();
    svc_error err;
    json_t *o, *made[SVC_FOLLOW_MAX_CODES];
    double t0 = 1e9;
    for (int i = 0; i < SVC_FOLLOW_MAX_CODES; i++) {
        CHECK(svc_follow_create(t0 + i, &made[i], &err) == SVC_OK);
        for (int k = 0; k < i && made[i]; k++)
            CHECK(strcmp(json_string_value(json_object_get(made[i], "code")),
                         json_string_value(json_object_get(made[k], "code"))));
    }
    /* full: refused, with when the oldest expires */
    CHECK(svc_follow_create(t0 + 100, &o, &err) == SVC_BUSY);
    CHECK_EQ_INT(err.retry_after, SVC_FOLLOW_TTL_S - 100 + 1);
    const char *first = json_string_value(json_object_get(made[0], "code"));
    const char *tok = json_string_value(json_object_get(made[0], "token"));
    /* a change keeps a code alive: the first one, changed at t0 + 1000, outlives the second */
    json_t *body = json_pack("{s:s}", "hash", "#/runs");
    char *ev;
    CHECK(svc_follow_update(first, tok, body, t0 + 1000, &o, &ev, &err) == SVC_OK);
    CHECK(ev && strstr(ev, "\"hash\":\"#/runs\"") && strstr(ev, "\"seq\":1"));
    free(ev);
    json_decref(o);
    double later = t0 + 1 + SVC_FOLLOW_TTL_S;
    CHECK(svc_follow_get(json_string_value(json_object_get(made[1], "code")), later, &o, &err) == SVC_NOT_FOUND);
    CHECK(svc_follow_get(first, later, &o, &err) == SVC_OK);
    json_decref(o);
    CHECK(svc_follow_update(json_string_value(json_object_get(made[1], "code")),
                            json_string_value(json_object_get(made[1], "token")), body, later, &o, &ev,
                            &err) == SVC_NOT_FOUND);
    /* the expired ones make room */
    CHECK(svc_follow_create(later, &o, &err) == SVC_OK);
    json_decref(o);
    CHECK(svc_follow_get(first, t0 + 1000 + SVC_FOLLOW_TTL_S, &o, &err) == SVC_NOT_FOUND);
    json_decref(body);
    for (int i = 0; i < SVC_FOLLOW_MAX_CODES; i++) json_decref(made[i]);
    svc_follow_reset();
}

TEST(the_server_refuses_a_code_past_the_most) {
    long code = 0;
    int made = 1; /* the first test's */
    json_t *j = NULL;
    for (; made < SVC_FOLLOW_MAX_CODES + 1; made++) {
        j = api_call(&srv, "POST", "/api/follow", NULL, &code);
        json_decref(j);
        if (code != 201) break;
    }
    CHECK_EQ_INT(made, SVC_FOLLOW_MAX_CODES);
    CHECK_EQ_INT(code, 429);
    harness_response r;
    CHECK(harness_request(&srv, "POST", "/api/follow", NULL, 0, NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 429);
    char buf[32];
    CHECK(harness_header(&r, "Retry-After", buf, sizeof buf) != NULL);
    harness_response_free(&r);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (harness_start(&srv, NULL, NULL) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        return 1;
    }
    RUN(a_code_is_made_set_by_its_presenter_and_read_by_anyone);
    RUN(codes_expire_and_are_bounded_in_number);
    RUN(the_server_refuses_a_code_past_the_most);
    int rc = harness_stop(&srv);
    if (rc != 0) {
        printf("FAIL shutdown: attnlabd exited with %d\n", rc);
        test_fail_count++;
    }
    if (test_fail_count) harness_dump_log(&srv);
    curl_global_cleanup();
    return test_summary();
}
