/* Security regressions over real HTTP against a server started with --token --private:
 * malformed route parameters must not crash it (they once closed fd 0 and then live sockets), and
 * no alias of a private path (doubled or trailing slashes) may be read without the token. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/harness.h"
#include "../support/test.h"

static harness_server srv;
static const char *const right[] = {"Authorization: Bearer s3cret", NULL};

static long get_status(const char *path, const char *const *headers) {
    harness_response r;
    if (harness_request(&srv, "GET", path, NULL, 0, headers, &r) != 0) return -1;
    long st = r.status;
    harness_response_free(&r);
    return st;
}

TEST(malformed_route_parameters_do_not_crash_the_server) {
    const char *bad[] = {"/api/runs/%zz",      "/api/runs/%00",  "/api/runs/%2F",   "/api/runs/%2f/metrics",
                         "/api/experiments/%", "/api/probes/%4", "/api/corpora/%zz"};
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            harness_response r;
            CHECK_MSG(harness_request(&srv, "GET", bad[i], NULL, 0, right, &r) == 0, "no answer to %s (round %d)",
                      bad[i], round);
            CHECK_MSG(r.status == 404 || r.status == 400, "%s answered %ld", bad[i], r.status);
            json_t *j = harness_json(&r);
            CHECK_MSG(j && json_object_get(j, "error"), "%s: not a JSON error", bad[i]);
            json_decref(j);
            harness_response_free(&r);
        }
        CHECK_EQ_INT(get_status("/api/health", NULL), 200);
    }
    /* Still serving real requests on fresh connections afterwards. */
    CHECK_EQ_INT(get_status("/api/runs", right), 200);
}

TEST(no_alias_of_a_private_path_is_readable_without_the_token) {
    const char *aliases[] = {"//api/runs",     "//api/runs/1/weights", "//api/events", "//metrics",
                             "/metrics/",      "/api/runs/",           "/api//runs",   "/api/./runs",
                             "/api/x/../runs", "///api/runs",          "/api/runs//",  "//api/health/../runs"};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        harness_response r;
        CHECK_MSG(harness_request(&srv, "GET", aliases[i], NULL, 0, NULL, &r) == 0, "no answer to %s", aliases[i]);
        CHECK_MSG(r.status == 401 || r.status == 404 || r.status == 400, "%s answered %ld without the token",
                  aliases[i], r.status);
        CHECK_MSG(!r.body || !strstr(r.body, "\"runs\""), "%s leaked the run list", aliases[i]);
        CHECK_MSG(!r.body || !strstr(r.body, "attnlab_"), "%s leaked metrics", aliases[i]);
        harness_response_free(&r);
    }
    /* The canonical paths need the token, and work with it. */
    CHECK_EQ_INT(get_status("/api/runs", NULL), 401);
    CHECK_EQ_INT(get_status("/metrics", NULL), 401);
    CHECK_EQ_INT(get_status("/api/runs", right), 200);
    CHECK_EQ_INT(get_status("/metrics", right), 200);
    CHECK_EQ_INT(get_status("/api/health", NULL), 200);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *args[] = {"--token", "s3cret", "--private", NULL};
    if (harness_start(&srv, NULL, args) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        return 1;
    }
    RUN(malformed_route_parameters_do_not_crash_the_server);
    RUN(no_alias_of_a_private_path_is_readable_without_the_token);
    int rc = harness_stop(&srv);
    if (rc != 0) {
        printf("FAIL shutdown: attnlabd exited with %d\n", rc);
        test_fail_count++;
    }
    if (test_fail_count) harness_dump_log(&srv);
    curl_global_cleanup();
    return test_summary();
}
