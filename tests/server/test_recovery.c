/* Crash recovery: SIGKILL attnlabd during training, check the database and what survived,
 * restart it, resume the interrupted run and compare its losses with an uninterrupted twin. */
#include <curl/curl.h>
#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../support/api.h"
#include "../support/test.h"

static const char *const ARGS[] = {"--train-workers", "1", "--compute-threads", "1", NULL};
/* Longer than any test waits: the test stops it at a step it has seen (cancel or kill), so nothing
 * depends on how fast the machine trains. */
#define CFG "\"steps\":1000000,\"checkpoint_every\":20,\"seed\":11,\"attention\":\"cosine_rope\""

static int db_max_step(const char *dir, long long run, char *integrity, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/attnlab.db", dir);
    sqlite3 *db;
    int max = -1;
    if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        snprintf(integrity, len, "%s", (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    if (sqlite3_prepare_v2(db, "SELECT max(step) FROM metrics WHERE run_id = ? AND key = 'loss'", -1, &q, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_int64(q, 1, run);
        if (sqlite3_step(q) == SQLITE_ROW) max = sqlite3_column_int(q, 0);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return max;
}

static int run_step(harness_server *s, long long id) {
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_t *j = api_call(s, "GET", path, NULL, NULL);
    int step = (int)json_integer_value(json_object_get(json_object_get(j, "run"), "step"));
    json_decref(j);
    return step;
}

TEST(sigkill_during_training_then_restart_and_resume) {
    SKIP_IF(!harness_sqlite(), "it opens the SQLite file itself");
    harness_server s;
    CHECK(harness_start(&s, NULL, ARGS) == 0);
    long long id = api_start_tiny_run(&s, CFG, "killed");
    CHECK(id > 0);
    CHECK_MSG(api_wait_step(&s, id, 40, 60000) == 0, "never reached step 40");
    /* Points of step s0 were made more than a second before the kill: they must survive it. */
    int s0 = run_step(&s, id);
    struct timespec pause = {1, 300000000};
    nanosleep(&pause, NULL);
    int s1 = run_step(&s, id);
    harness_kill(&s);
    CHECK_MSG(s1 >= s0 && s1 < 1000000, "the run was at step %d at the kill", s1);

    char integrity[64] = "";
    int kept = db_max_step(s.data_dir, id, integrity, sizeof integrity);
    CHECK_MSG(!strcmp(integrity, "ok"), "integrity_check said: %s", integrity);
    CHECK_MSG(kept >= s0, "only steps up to %d were stored; step %d was older than a second at the kill", kept, s0);
    printf("# killed at about step %d; metrics stored up to step %d (%d seen a second earlier)\n", s1, kept, s0);

    harness_server s2;
    CHECK(harness_start(&s2, s.data_dir, ARGS) == 0);
    char *st = api_wait_status(&s2, id, "interrupted", 1000);
    CHECK_MSG(st && !strcmp(st, "interrupted"), "after restart the run is %s", st ? st : "?");
    free(st);
    char path[64];
    long code;
    snprintf(path, sizeof path, "/api/runs/%lld/resume", id);
    json_decref(api_call(&s2, "POST", path, NULL, &code));
    CHECK_EQ_INT(code, 202);
    /* Resumed from its last checkpoint, it trains again the steps after it and goes past the kill;
     * stopped there, it must have the losses of a twin never interrupted, step for step. */
    int upto = (s1 > kept ? s1 : kept) + 20;
    CHECK_MSG(api_wait_step(&s2, id, upto, 120000) == 0, "the resumed run never reached step %d", upto);
    CHECK_MSG(api_cancel_run(&s2, id, 60000) >= upto, "the resumed run could not be stopped");

    long long ref = api_start_tiny_run(&s2, CFG, "uninterrupted");
    CHECK(ref > 0);
    CHECK_MSG(api_wait_step(&s2, ref, upto, 120000) == 0, "the twin never reached step %d", upto);
    CHECK(api_cancel_run(&s2, ref, 60000) >= upto);
    char why[256] = "";
    CHECK_MSG(api_same_losses(&s2, id, &s2, ref, upto, why, sizeof why), "%s", why);

    /* Deleting leaves no orphan: the runs folder holds exactly the runs that exist. */
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_decref(api_call(&s2, "DELETE", path, NULL, &code));
    CHECK_EQ_INT(code, 204);
    char runs_dir[512];
    snprintf(runs_dir, sizeof runs_dir, "%s/runs", s2.data_dir);
    DIR *d = opendir(runs_dir);
    CHECK(d);
    int entries = 0, ref_seen = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        entries++;
        ref_seen |= atoll(e->d_name) == ref;
    }
    closedir(d);
    CHECK_EQ_INT(entries, 1);
    CHECK(ref_seen);
    CHECK_EQ_INT(harness_stop(&s2), 0);
    db_max_step(s2.data_dir, id, integrity, sizeof integrity);
    CHECK(!strcmp(integrity, "ok"));
}

TEST(sigterm_during_training_interrupts_with_a_checkpoint) {
    harness_server s;
    CHECK(harness_start(&s, NULL, ARGS) == 0);
    long long id = api_start_tiny_run(&s, "\"steps\":100000,\"checkpoint_every\":0", "stopped");
    CHECK(id > 0);
    CHECK(api_wait_step(&s, id, 5, 60000) == 0);
    CHECK_EQ_INT(harness_stop(&s), 0);
    harness_server s2;
    CHECK(harness_start(&s2, s.data_dir, ARGS) == 0);
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_t *j = api_call(&s2, "GET", path, NULL, NULL);
    json_t *run = json_object_get(j, "run");
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "interrupted"));
    /* A clean stop saves a checkpoint at the step it stopped on, even with checkpoint_every 0. */
    CHECK(json_integer_value(json_object_get(run, "checkpoint_step")) >= 5);
    json_decref(j);
    CHECK_EQ_INT(harness_stop(&s2), 0);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(sigkill_during_training_then_restart_and_resume);
    RUN(sigterm_during_training_interrupts_with_a_checkpoint);
    curl_global_cleanup();
    return test_summary();
}
