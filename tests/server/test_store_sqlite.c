/* The SQLite backend's own, against a real file: pages that are corrupt under a running store make
 * every read an error, never a short list reported as complete; reads and the health check do not
 * wait for the writer (they take read connections of their own: this test holds the writer's lock
 * through the backend's header). The contract both backends keep is test_store.c's. */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/harness.h"
#include "../support/test.h"
#include "store/sqlite/store_sqlite.h"
#include "store/store.h"

static int fresh_store(store **st, char *path, size_t len) {
    char dir[256], err[256];
    if (harness_tempdir(dir, sizeof dir) < 0) return -1;
    snprintf(path, len, "%s/store.db", dir);
    if (store_open(st, path, err, sizeof err) != STORE_OK) {
        printf("# store_open: %s\n", err);
        return -1;
    }
    return 0;
}

static long long new_run(store *st, const char *name) {
    store_new_run nr = {.name = name, .config_json = "{\"steps\":5}", .seed = 1, .total_steps = 5, .corpus = "small"};
    long long id = 0;
    return store_run_create(st, &nr, &id) == STORE_OK ? id : -1;
}

/* Makes every b-tree leaf page of the named tables/indexes after the first unreadable. */
static int corrupt_later_leaves(const char *path, const char *const *names) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
    int pages[4096], n = 0;
    for (int k = 0; names[k]; k++) {
        sqlite3_stmt *q;
        if (sqlite3_prepare_v2(db, "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", -1,
                               &q, NULL) != SQLITE_OK)
            break;
        sqlite3_bind_text(q, 1, names[k], -1, SQLITE_STATIC);
        int first = 1;
        while (sqlite3_step(q) == SQLITE_ROW && n < 4096) {
            if (!first) pages[n++] = sqlite3_column_int(q, 0);
            first = 0;
        }
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    if (n == 0) return -1;
    int fd = open(path, O_WRONLY);
    if (fd < 0) return -1;
    unsigned char junk[16];
    memset(junk, 0xEE, sizeof junk);
    for (int i = 0; i < n; i++)
        if (pwrite(fd, junk, sizeof junk, (off_t)(pages[i] - 1) * 4096) != (ssize_t)sizeof junk) {
            close(fd);
            return -1;
        }
    close(fd);
    return n;
}

TEST(a_read_error_is_an_error_not_the_end_of_the_rows) {
    store *st;
    char path[320], err[256];
    CHECK(fresh_store(&st, path, sizeof path) == 0);
    /* Enough queued runs to fill several leaf pages. */
    for (int i = 0; i < 1500; i++) CHECK(new_run(st, "queued-run-with-a-longish-name-to-fill-pages") > 0);
    long long *ids = NULL;
    int n = 0;
    CHECK(store_runs_queued(st, &ids, &n) == STORE_OK);
    CHECK_EQ_INT(n, 1500);
    free(ids);
    store_close(st); /* the last connection folds the WAL into the file */
    static const char *const names[] = {"runs", "runs_status", NULL};
    int bad = corrupt_later_leaves(path, names);
    CHECK_MSG(bad > 0, "no pages to corrupt");
    CHECK(store_open(&st, path, err, sizeof err) == STORE_OK);
    ids = (long long *)0x1;
    n = 7;
    store_status s = store_runs_queued(st, &ids, &n);
    CHECK_MSG(s != STORE_OK, "a corrupt runs table gave %d queued runs and OK", n);
    CHECK(ids == NULL);
    CHECK_EQ_INT(n, 0);
    json_t *counts = (json_t *)0x1;
    s = store_run_counts(st, &counts);
    CHECK_MSG(s != STORE_OK, "a corrupt runs table gave counts and OK");
    CHECK(counts == NULL);
    json_t *list = (json_t *)0x1;
    long long total = 7;
    store_run_filter f = {.limit = 500};
    s = store_run_list(st, &f, &list, &total);
    CHECK(s != STORE_OK);
    CHECK(list == NULL);
    CHECK_EQ_INT(total, 0);
    store_close(st);
}

/* The reads a busy writer must not hold up, on a thread of their own. */
typedef struct {
    store *st;
    long long run;
    const char *failed; /* the first read that did not answer STORE_OK */
} reads_job;

static void reads_alone(void *arg) {
    reads_job *j = arg;
    json_t *o = NULL;
    long long total = 0;
    store_metric *pts = NULL;
    size_t n = 0;
    store_run_filter f = {.limit = 10};
    if (store_ping(j->st) != STORE_OK) j->failed = "ping";
    if (!j->failed && store_run_get(j->st, j->run, &o) != STORE_OK) j->failed = "run_get";
    json_decref(o);
    o = NULL;
    if (!j->failed && store_run_list(j->st, &f, &o, &total) != STORE_OK) j->failed = "run_list";
    json_decref(o);
    o = NULL;
    if (!j->failed && (store_metrics_points(j->st, j->run, NULL, 0, &pts, &n) != STORE_OK || n != 3))
        j->failed = "metrics_points";
    free(pts);
    if (!j->failed && store_metrics_summary(j->st, j->run, &o) != STORE_OK) j->failed = "metrics_summary";
    json_decref(o);
    o = NULL;
    if (!j->failed && store_run_briefs(j->st, &j->run, 1, &o) != STORE_OK) j->failed = "run_briefs";
    json_decref(o);
}

TEST(reads_and_health_answer_while_the_writer_is_held) {
    store *st;
    char path[320];
    CHECK(fresh_store(&st, path, sizeof path) == 0);
    reads_job j = {.st = st, .run = new_run(st, "read-me")};
    CHECK(j.run > 0);
    store_metric pts[3];
    for (int i = 0; i < 3; i++)
        pts[i] = (store_metric){.run_id = j.run, .step = i + 1, .key = "loss", .value = 3.0 - i};
    CHECK(store_metrics_insert(st, pts, 3) == STORE_OK);
    /* The writer busy for as long as it takes (a long write, a write stuck on a full disk). */
    db_lock(st);
    test_thread *t = test_thread_start(reads_alone, &j);
    int done = test_thread_done_within(t, 60); /* the reads need not wait for the writer at all */
    db_unlock(st);
    test_thread_join(t);
    CHECK(t != NULL);
    CHECK_MSG(done, "the reads waited for the writer's lock");
    CHECK_MSG(!j.failed, "%s failed while the writer was held", j.failed);
    /* What is written is read back at once: the readers see the last commit. */
    long long id = new_run(st, "just-written");
    json_t *o = NULL;
    CHECK(id > 0 && store_run_get(st, id, &o) == STORE_OK);
    json_decref(o);
    store_close(st);
}

int main(void) {
    RUN(a_read_error_is_an_error_not_the_end_of_the_rows);
    RUN(reads_and_health_answer_while_the_writer_is_held);
    return test_summary();
}
