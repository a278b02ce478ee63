/* Start-up cannot hurt a running server: a second attnlabd on the same data directory exits 2
 * before it touches anything (it once marked the first one's live runs interrupted and deleted
 * its uploads, then failed to bind), and a server whose port is taken changes nothing either. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../support/harness.h"
#include "../support/test.h"

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

TEST(second_server_on_the_same_data_dir_exits_2_and_touches_nothing) {
    harness_server a;
    CHECK(harness_start(&a, NULL, NULL) == 0);
    /* What the first server has in flight: a partial upload. */
    char upload[400];
    snprintf(upload, sizeof upload, "%s/tmp/upload-inflight", a.data_dir);
    FILE *f = fopen(upload, "w");
    CHECK(f);
    fputs("half an upload", f);
    fclose(f);

    char err[1024];
    const char *args[] = {"--data-dir", a.data_dir, "--port", "0", NULL};
    int rc = harness_run_attnlabd(args, err, sizeof err);
    int kept = file_exists(upload);
    harness_response r;
    int healthy = harness_get(&a, "/api/health", &r) == 0 && r.status == 200;
    if (healthy) harness_response_free(&r);
    CHECK_EQ_INT(harness_stop(&a), 0);
    CHECK_MSG(rc == 2, "second server exited %d: %s", rc, err);
    CHECK_MSG(strstr(err, "in use by another attnlabd"), "stderr: %s", err);
    CHECK_MSG(kept, "the first server's upload was deleted");
    CHECK(healthy);
}

TEST(port_in_use_changes_nothing_in_the_data_dir) {
    harness_server a;
    CHECK(harness_start(&a, NULL, NULL) == 0);
    char dir[256], marker[400], port[16];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    snprintf(marker, sizeof marker, "%s/tmp", dir);
    mkdir(marker, 0755);
    snprintf(marker, sizeof marker, "%s/tmp/upload-old", dir);
    FILE *f = fopen(marker, "w");
    CHECK(f);
    fclose(f);
    snprintf(port, sizeof port, "%d", a.port);
    char err[1024];
    const char *args[] = {"--data-dir", dir, "--port", port, NULL};
    int rc = harness_run_attnlabd(args, err, sizeof err);
    CHECK_EQ_INT(harness_stop(&a), 0);
    CHECK_MSG(rc == 2, "exited %d: %s", rc, err);
    CHECK_MSG(file_exists(marker), "recovery ran although the port was taken");
    char db[400];
    snprintf(db, sizeof db, "%s/attnlab.db", dir);
    CHECK_MSG(!file_exists(db), "the database was created although the port was taken");
}

TEST(lock_is_released_when_the_server_stops) {
    harness_server a, b;
    CHECK(harness_start(&a, NULL, NULL) == 0);
    CHECK_EQ_INT(harness_stop(&a), 0);
    CHECK(harness_start(&b, a.data_dir, NULL) == 0);
    harness_kill(&b); /* the kernel drops a killed process's lock too */
    CHECK(harness_start(&a, b.data_dir, NULL) == 0);
    CHECK_EQ_INT(harness_stop(&a), 0);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(second_server_on_the_same_data_dir_exits_2_and_touches_nothing);
    RUN(port_in_use_changes_nothing_in_the_data_dir);
    RUN(lock_is_released_when_the_server_stops);
    curl_global_cleanup();
    return test_summary();
}
