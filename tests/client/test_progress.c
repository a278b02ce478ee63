/* The watch line: state from events and run objects, durations, the terminal bar fitted to its
 * width, the plain and final lines. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "../../client/cmd_watch.h"
#include "../../client/progress.h"
#include "../../client/table.h"
#include "../support/test.h"

static json_t *parse(const char *s) { return json_loads(s, 0, NULL); }

TEST(durations_read_like_a_clock) {
    char b[32];
    CHECK(!strcmp(progress_duration(0, b, sizeof b), "0s"));
    CHECK(!strcmp(progress_duration(42.4, b, sizeof b), "42s"));
    CHECK(!strcmp(progress_duration(310.2, b, sizeof b), "5m10s"));
    CHECK(!strcmp(progress_duration(3599.6, b, sizeof b), "1h00m"));
    CHECK(!strcmp(progress_duration(7380, b, sizeof b), "2h03m"));
    CHECK(!strcmp(progress_duration(-1, b, sizeof b), "?"));
    CHECK(!strcmp(progress_duration(NAN, b, sizeof b), "?"));
    CHECK(!strcmp(progress_duration(INFINITY, b, sizeof b), "?"));
}

TEST(metrics_events_fold_into_the_state) {
    progress_state s;
    progress_init(&s, 3);
    json_t *m = parse("{\"run_id\":3,\"step\":120,\"total_steps\":2000,\"eta_s\":310.2,"
                      "\"values\":{\"loss\":6.91,\"lr\":0.0003,\"tau.0.0\":5.62,\"tau.1.3\":4.81,\"tau.2.1\":5.2,"
                      "\"entropy.0.0\":9.5,\"tokens_per_s\":1520}}");
    CHECK(m);
    CHECK_EQ_INT(progress_apply_metrics(&s, m), 0);
    json_decref(m);
    CHECK_EQ_INT(s.step, 120);
    CHECK_EQ_INT(s.total, 2000);
    CHECK_NEAR(s.eta_s, 310.2, 1e-9);
    CHECK_NEAR(s.loss, 6.91, 1e-12);
    CHECK_NEAR(s.tau_min, 4.81, 1e-12); /* entropy keys are not temperatures */
    CHECK_NEAR(s.tau_max, 5.62, 1e-12);
    CHECK_NEAR(s.tokens_per_s, 1520, 1e-9);
    CHECK(!strcmp(s.status, "running"));
    char b[512];
    progress_plain_line(&s, b, sizeof b);
    CHECK_MSG(!strcmp(b, "run 3 step 120/2000 (6%) eta 5m10s tokens/s 1520 loss 6.9100 tau 4.8100..5.6200"), "got %s",
              b);
    /* A later event without τ keeps the last known range; an event that is not an object is refused. */
    m = parse("{\"run_id\":3,\"step\":121,\"values\":{\"loss\":6.5}}");
    CHECK_EQ_INT(progress_apply_metrics(&s, m), 0);
    json_decref(m);
    CHECK_EQ_INT(s.step, 121);
    CHECK_NEAR(s.tau_min, 4.81, 1e-12);
    m = parse("[1,2]");
    CHECK_EQ_INT(progress_apply_metrics(&s, m), -1);
    json_decref(m);
}

TEST(status_and_run_objects_fold_in) {
    progress_state s;
    progress_init(&s, 9);
    json_t *run = parse("{\"id\":9,\"status\":\"failed\",\"step\":7,\"total_steps\":20,\"error\":\"loss is NaN\","
                        "\"last\":{\"loss\":3.25,\"val_loss\":3.5,\"tau.0.0\":5.0,\"tau.0.1\":5.5}}");
    CHECK_EQ_INT(progress_apply_status(&s, run), 0);
    json_decref(run);
    CHECK(progress_is_final(s.status));
    CHECK_EQ_INT(cmd_watch_exit_for(s.status), 1);
    char b[512];
    progress_final_line(&s, b, sizeof b);
    CHECK_MSG(!strcmp(b, "run 9 failed at step 7/20, loss 3.2500, val_loss 3.5000, tau 5.0000..5.5000: loss is NaN"),
              "got %s", b);
    json_t *bad = parse("{\"step\":1}");
    CHECK_EQ_INT(progress_apply_status(&s, bad), -1);
    json_decref(bad);
    CHECK(!progress_is_final("running"));
    CHECK(!progress_is_final("queued"));
    CHECK_EQ_INT(cmd_watch_exit_for("succeeded"), 0);
    CHECK_EQ_INT(cmd_watch_exit_for("cancelled"), 6);
    CHECK_EQ_INT(cmd_watch_exit_for("interrupted"), 7);
    CHECK_EQ_INT(cmd_watch_exit_for("exploded"), 1);
}

TEST(bar_fits_every_width) {
    progress_state s;
    progress_init(&s, 12345);
    s.step = 1500, s.total = 2000, s.eta_s = 4000, s.tokens_per_s = 123456, s.loss = 4.5;
    s.tau_min = 4.8, s.tau_max = 5.2;
    char b[1024];
    for (int w = 20; w <= 200; w++) {
        progress_bar_line(&s, w, b, sizeof b);
        size_t dw = table_display_width(b);
        CHECK_MSG(dw <= (size_t)(w < 36 ? 36 : w), "width %d: %zu columns: %s", w, dw, b);
        CHECK_MSG(strstr(b, "1500/2000  75%"), "width %d: %s", w, b);
    }
    progress_bar_line(&s, 120, b, sizeof b);
    CHECK_MSG(strstr(b, "τ 4.8000–5.2000") && strstr(b, "123.5k tok/s") && strstr(b, "ETA 1h06m") &&
                  strstr(b, "loss 4.5000"),
              "got %s", b);
    /* 3/4 of the bar's cells are full (to the cell). */
    int full = 0, empty = 0;
    for (const char *p = b; (p = strstr(p, "█")); p += 3) full++;
    for (const char *p = b; (p = strstr(p, "·")); p += 2) empty++;
    CHECK_MSG(full + empty >= 10 && fabs(full - 0.75 * (full + empty)) < 1, "%d full, %d empty", full, empty);
    /* Narrow: the tail fields go before the step count does. */
    progress_bar_line(&s, 45, b, sizeof b);
    CHECK(!strstr(b, "tok/s"));
    CHECK(strstr(b, "1500/2000"));
}

TEST(unknown_total_and_values_show_as_such) {
    progress_state s;
    progress_init(&s, 1);
    char b[512];
    progress_bar_line(&s, 80, b, sizeof b);
    CHECK_MSG(strstr(b, "step 0") && strstr(b, "ETA ?") && !strstr(b, "loss") && !strstr(b, "τ"), "got %s", b);
    progress_plain_line(&s, b, sizeof b);
    CHECK_MSG(!strcmp(b, "run 1 step 0/0 eta ? tokens/s ?"), "got %s", b);
}

int main(void) {
    RUN(durations_read_like_a_clock);
    RUN(metrics_events_fold_into_the_state);
    RUN(status_and_run_objects_fold_in);
    RUN(bar_fits_every_width);
    RUN(unknown_total_and_values_show_as_such);
    return test_summary();
}
