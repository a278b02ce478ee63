/* `attnlab watch` against a scripted server: resuming a dropped stream with Last-Event-ID,
 * refetching on resync, the exit status for each final run status, giving up on a vanished
 * server, events of other runs, JSON lines, and the in-place bar on a pseudo-terminal next to
 * the plain lines of a pipe. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../client/table.h"
#include "../support/test.h"
#include "client_run.h"

#define SSE_HEAD                                                                                                       \
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"

static char bufs[32][2048];
static int nbuf;

/* A complete JSON response with its Content-Length (kept in a static slot). */
static const char *json_resp(int status, const char *body) {
    char *b = bufs[nbuf++ % 32];
    snprintf(b, sizeof bufs[0],
             "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             status, strlen(body), body);
    return b;
}

static const char *run_json(const char *status, int step) {
    static char b[8][512];
    static int k;
    char *o = b[k++ % 8];
    snprintf(o, sizeof b[0],
             "{\"id\":7,\"name\":\"r\",\"status\":\"%s\",\"step\":%d,\"total_steps\":4,\"config\":{\"attention\":"
             "\"cosine_rope\"},"
             "\"last\":{\"loss\":5.5,\"tau.0.0\":5.6,\"tau.0.1\":5.2},\"error\":%s}",
             status, step, strcmp(status, "failed") ? "null" : "\"NaN loss at step 3\"");
    return o;
}

#define METRICS(id, step)                                                                                              \
    "id: " #id "\nevent: metrics\ndata: {\"run_id\":7,\"step\":" #step                                                 \
    ",\"total_steps\":4,\"eta_s\":3,\"values\":{\"loss\":"                                                             \
    "6.5"                                                                                                              \
    ",\"tokens_per_s\":1234,\"tau.0.0\":5.62,\"tau.0.1\":4.8}}\n\n"

TEST(resumes_a_dropped_stream_with_last_event_id) {
    fake_rule rules[] = {
        {"GET", "/api/runs/7/events", SSE_HEAD ": ping\n\n" METRICS(1, 1) METRICS(2, 2), 1, 0},
        {"GET", "/api/runs/7/events",
         SSE_HEAD METRICS(3,
                          3) "id: 4\nevent: status\ndata: "
                             "{\"run_id\":7,\"status\":\"succeeded\",\"step\":4,\"total_steps\":4,\"error\":null}\n\n",
         1, 0},
        {"GET", "/api/runs/7", json_resp(200, run_json("running", 0)), 0, 0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 3) == 0);
    client_result r;
    const char *args[] = {"--server", fs.url, "watch", "7", "--every", "0", NULL};
    client_run(&r, 20, args);
    char *log = fake_stop(&fs);
    CHECK_MSG(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
    CHECK_MSG(strstr(r.out, "run 7 step 1/4") && strstr(r.out, "run 7 step 3/4"), "stdout: %s", r.out);
    CHECK_MSG(strstr(r.out, "run 7 succeeded at step 4/4"), "stdout: %s", r.out);
    CHECK(strstr(r.out, "tau 4.8000..5.6200"));
    CHECK(strstr(r.out, "tokens/s 1234"));
    /* The first stream starts fresh; the second resumes after the last id received. */
    CHECK_EQ_INT(count_substr(log, "GET /api/runs/7/events"), 2);
    CHECK_EQ_INT(count_substr(log, "Last-Event-ID: 2"), 1);
    CHECK_EQ_INT(count_substr(log, "Last-Event-ID:"), 1);
    CHECK(!strchr(r.out, '\r') && !strstr(r.out, "\033["));
    CHECK_EQ_INT(r.err_len, 0);
    free(log);
}

/* A short run whose points all came before the stream: the end arrives with no loss seen, and the
 * final line takes it from the run as stored. */
TEST(a_run_that_ended_before_its_points_were_seen_gets_its_stored_loss) {
    static const char bare[] = "{\"id\":7,\"name\":\"r\",\"status\":\"running\",\"step\":0,\"total_steps\":4,"
                               "\"config\":{\"attention\":\"rope\"},\"error\":null}";
    fake_rule rules[] = {
        {"GET", "/api/runs/7/events",
         SSE_HEAD ": ping\n\nid: 1\nevent: status\ndata: "
                  "{\"run_id\":7,\"status\":\"succeeded\",\"step\":4,\"total_steps\":4,\"error\":null}\n\n",
         1, 0},
        {"GET", "/api/runs/7", json_resp(200, bare), 1, 0}, /* before the stream */
        {"GET", "/api/runs/7", json_resp(200, run_json("succeeded", 4)), 0, 0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 3) == 0);
    client_result r;
    const char *args[] = {"--server", fs.url, "watch", "7", "--every", "0", NULL};
    client_run(&r, 20, args);
    free(fake_stop(&fs));
    CHECK_MSG(r.code == 0, "exit %d, stderr: %s, stdout: %s", r.code, r.err, r.out);
    CHECK_MSG(strstr(r.out, "run 7 succeeded at step 4/4, loss 5.5000"), "stdout: %s", r.out);
}

static void final_status_case(const char *status, int want_code, const char *want_text) {
    char ev[512];
    snprintf(ev, sizeof ev,
             SSE_HEAD METRICS(1, 2) "id: 2\nevent: status\ndata: "
                                    "{\"run_id\":7,\"status\":\"%s\",\"step\":2,\"total_steps\":4,\"error\":%s}\n\n",
             status, strcmp(status, "failed") ? "null" : "\"NaN loss at step 2\"");
    fake_rule rules[] = {
        {"GET", "/api/runs/7/events", ev, 1, 0},
        {"GET", "/api/runs/7", json_resp(200, run_json("running", 0)), 0, 0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 2) == 0);
    client_result r;
    const char *args[] = {"--server", fs.url, "watch", "7", NULL};
    client_run(&r, 20, args);
    free(fake_stop(&fs));
    CHECK_MSG(r.code == want_code, "%s: exit %d (want %d), stderr: %s", status, r.code, want_code, r.err);
    CHECK_MSG(strstr(r.out, want_text), "%s: stdout: %s", status, r.out);
}

TEST(exit_status_follows_the_final_run_status) {
    final_status_case("failed", 1, "run 7 failed at step 2/4, loss 6.5000, tau 4.8000..5.6200: NaN loss at step 2");
    if (test_failed_now) return;
    final_status_case("cancelled", 6, "run 7 cancelled at step 2/4");
    if (test_failed_now) return;
    final_status_case("interrupted", 7, "run 7 interrupted at step 2/4");
}

TEST(resync_refetches_the_run) {
    fake_rule rules[] = {
        {"GET", "/api/runs/7/events",
         SSE_HEAD METRICS(1, 1) "id: 9\nevent: resync\ndata: {\"reason\":\"too far behind\"}\n\n", 1, 2000},
        {"GET", "/api/runs/7", json_resp(200, run_json("running", 0)), 1, 0},
        {"GET", "/api/runs/7", json_resp(200, run_json("succeeded", 4)), 0, 0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 3) == 0);
    client_result r;
    const char *args[] = {"--server", fs.url, "watch", "7", NULL};
    double t0 = client_now();
    client_run(&r, 20, args);
    double took = client_now() - t0;
    char *log = fake_stop(&fs);
    CHECK_MSG(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
    CHECK_MSG(strstr(r.out, "run 7 succeeded at step 4/4"), "stdout: %s", r.out);
    CHECK_EQ_INT(count_substr(log, "GET /api/runs/7\n"), 2);
    /* It acted on the resync at once, not when the server closed the stream 2 s later. */
    CHECK_MSG(took < 1.8, "took %.2fs", took);
    free(log);
}

TEST(a_finished_run_answers_without_a_stream) {
    fake_rule rules[] = {{"GET", "/api/runs/7", json_resp(200, run_json("cancelled", 2)), 0, 0}};
    fake_server fs;
    CHECK(fake_start(&fs, rules, 1) == 0);
    client_result r;
    const char *args[] = {"--server", fs.url, "watch", "7", NULL};
    client_run(&r, 20, args);
    char *log = fake_stop(&fs);
    CHECK_EQ_INT(r.code, 6);
    CHECK(strstr(r.out, "run 7 cancelled at step 2/4, loss 5.5000, tau 5.2000..5.6000"));
    CHECK(!strstr(log, "/events"));
    free(log);
}

TEST(unknown_run_is_refused_with_the_servers_message) {
    fake_rule rules[] = {
        {"GET", "/api/runs/9",
         json_resp(404, "{\"error\":{\"code\":\"not_found\",\"message\":\"run 9 does not exist\",\"field\":\"id\"}}"),
         0, 0}};
    fake_server fs;
    CHECK(fake_start(&fs, rules, 1) == 0);
    client_result r;
    const char *args[] = {"--server", fs.url, "watch", "9", NULL};
    client_run(&r, 20, args);
    free(fake_stop(&fs));
    CHECK_EQ_INT(r.code, 4);
    CHECK_EQ_INT(count_lines(r.err), 1);
    CHECK_MSG(strstr(r.err, "attnlab: ") == r.err &&
                  strstr(r.err, "HTTP 404 not_found: run 9 does not exist (field: id)"),
              "stderr: %s", r.err);
    CHECK_EQ_INT(r.out_len, 0);
}

TEST(gives_up_when_the_stream_keeps_failing) {
    fake_rule rules[] = {
        {"GET", "/api/runs/7/events", "", 0, 0}, /* accept, say nothing, close */
        {"GET", "/api/runs/7", json_resp(200, run_json("running", 1)), 0, 0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 2) == 0);
    client_result r;
    const char *args[] = {"--server", fs.url, "watch", "7", "--reconnect-for", "1", NULL};
    client_run(&r, 20, args);
    char *log = fake_stop(&fs);
    CHECK_MSG(r.code == 3, "exit %d, stderr: %s", r.code, r.err);
    CHECK_EQ_INT(count_lines(r.err), 1);
    CHECK(strstr(r.err, "gave up after 1s"));
    CHECK_MSG(count_substr(log, "GET /api/runs/7/events") >= 2, "it should have retried: %s", log);
    free(log);
}

TEST(events_of_other_runs_are_ignored_and_json_lines_parse) {
    fake_rule rules[] = {
        {"GET", "/api/runs/7/events",
         SSE_HEAD
         "id: 1\nevent: metrics\ndata: {\"run_id\":8,\"step\":99,\"total_steps\":100,\"values\":{}}\n\n" METRICS(
             2, 2) "id: 3\nevent: status\ndata: "
                   "{\"run_id\":7,\"status\":\"succeeded\",\"step\":4,\"total_steps\":4,\"error\":null}\n\n",
         1, 0},
        {"GET", "/api/runs/7", json_resp(200, run_json("running", 0)), 0, 0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 2) == 0);
    client_result r;
    const char *args[] = {"--server", fs.url, "--json", "watch", "7", NULL};
    client_run(&r, 20, args);
    free(fake_stop(&fs));
    CHECK_MSG(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
    CHECK_MSG(!strstr(r.out, "\"step\":99"), "out: %s", r.out);
    /* One line per event (plus the run as first fetched), each a JSON object with its type. */
    int lines = 0, metrics = 0, status = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *j = json_loads(line, 0, NULL);
        CHECK_MSG(j, "not JSON: %s", line);
        const char *ev = json_string_value(json_object_get(j, "event"));
        CHECK(ev);
        metrics += !strcmp(ev, "metrics");
        status += !strcmp(ev, "status");
        lines++;
        json_decref(j);
    }
    CHECK_EQ_INT(lines, 3);
    CHECK_EQ_INT(metrics, 1);
    CHECK_EQ_INT(status, 1);
}

/* The visible width of the widest redraw: the text between a carriage return and the
 * erase-to-end-of-line that closes it. */
static size_t widest_redraw(const char *out) {
    size_t widest = 0;
    char seg[4096];
    size_t n = 0;
    for (const char *p = out; *p; p++) {
        if (*p == '\r' || *p == '\n') {
            n = 0;
        } else if (*p == '\033') {
            seg[n] = 0;
            size_t w = table_display_width(seg);
            if (w > widest) widest = w;
            n = 0;
            while (*p && *p != 'K') p++;
            if (!*p) break;
        } else if (n + 1 < sizeof seg) {
            seg[n++] = *p;
        }
    }
    return widest;
}

TEST(terminal_bar_redraws_in_place_within_the_width) {
    /* Events spread over time so that the throttled bar is drawn more than once. */
    static char stream[4096];
    snprintf(stream, sizeof stream, "%s%s", SSE_HEAD, METRICS(1, 1));
    fake_rule rules[] = {
        {"GET", "/api/runs/7/events", stream, 1, 300},
        {"GET", "/api/runs/7/events", SSE_HEAD METRICS(2, 2), 1, 300},
        {"GET", "/api/runs/7/events",
         SSE_HEAD METRICS(3,
                          3) "id: 4\nevent: status\ndata: "
                             "{\"run_id\":7,\"status\":\"succeeded\",\"step\":4,\"total_steps\":4,\"error\":null}\n\n",
         1, 0},
        {"GET", "/api/runs/7", json_resp(200, run_json("running", 0)), 0, 0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 4) == 0);
    client_result r;
    const char *args[] = {"--server", fs.url, "watch", "7", NULL};
    client_run_pty(&r, 20, 80, args);
    free(fake_stop(&fs));
    CHECK_MSG(r.code == 0, "exit %d, out: %s", r.code, r.out);
    CHECK_MSG(count_substr(r.out, "\r\033[K") + count_substr(r.out, "\033[K") >= 3, "out: %s", r.out);
    CHECK_MSG(strstr(r.out, "run 7 [") && strstr(r.out, "█") && strstr(r.out, "τ 4.8000–5.6200"), "out: %s", r.out);
    CHECK(strstr(r.out, "2/4  50%"));
    CHECK(strstr(r.out, "run 7 succeeded at step 4/4"));
    /* Nothing wider than the terminal (the bar keeps one column spare). */
    size_t w = widest_redraw(r.out);
    CHECK_MSG(w <= 80 && w >= 60, "widest line %zu columns: %s", w, r.out);
}

TEST(narrow_terminal_drops_fields_not_width) {
    fake_rule rules[] = {
        {"GET", "/api/runs/7/events",
         SSE_HEAD METRICS(1,
                          3) "id: 4\nevent: status\ndata: "
                             "{\"run_id\":7,\"status\":\"succeeded\",\"step\":4,\"total_steps\":4,\"error\":null}\n\n",
         1, 0},
        {"GET", "/api/runs/7", json_resp(200, run_json("running", 2)), 0, 0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 2) == 0);
    client_result r;
    const char *args[] = {"--server", fs.url, "watch", "7", NULL};
    client_run_pty(&r, 20, 40, args);
    free(fake_stop(&fs));
    CHECK_EQ_INT(r.code, 0);
    size_t w = widest_redraw(r.out);
    CHECK_MSG(w > 0 && w <= 40, "widest line %zu columns: %s", w, r.out);
    CHECK(strstr(r.out, "2/4  50%"));
}

TEST(bad_arguments_are_usage_errors) {
    client_result r;
    const char *a1[] = {"--server", "http://127.0.0.1:9", "watch", NULL};
    client_run(&r, 10, a1);
    CHECK_EQ_INT(r.code, 2);
    CHECK_EQ_INT(count_lines(r.err), 1);
    const char *a2[] = {"--server", "http://127.0.0.1:9", "watch", "seven", NULL};
    client_run(&r, 10, a2);
    CHECK_EQ_INT(r.code, 2);
    const char *a3[] = {"--server", "http://127.0.0.1:9", "watch", "--help", NULL};
    client_run(&r, 10, a3);
    CHECK_EQ_INT(r.code, 0);
    CHECK(strstr(r.out, "7 it was interrupted"));
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    RUN(resumes_a_dropped_stream_with_last_event_id);
    RUN(exit_status_follows_the_final_run_status);
    RUN(a_run_that_ended_before_its_points_were_seen_gets_its_stored_loss);
    RUN(resync_refetches_the_run);
    RUN(a_finished_run_answers_without_a_stream);
    RUN(unknown_run_is_refused_with_the_servers_message);
    RUN(gives_up_when_the_stream_keeps_failing);
    RUN(events_of_other_runs_are_ignored_and_json_lines_parse);
    RUN(terminal_bar_redraws_in_place_within_the_width);
    RUN(narrow_terminal_drops_fields_not_width);
    RUN(bad_arguments_are_usage_errors);
    return test_summary();
}
