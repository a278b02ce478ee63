/* Data integrity over real restarts: a kill right after a checkpoint leaves no hole in the
 * curves; a run never resumes from a checkpoint that is not its own; built-in corpus names stay
 * built in; health notices a database that can no longer be written; metric points that cannot be
 * stored fail the run or are retried, never dropped; a corpus cut off while tokenizing is
 * recovered at start-up; a run cannot ask for more threads than the service has. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../support/api.h"
#include "../support/test.h"
#include "store/store.h"

static const char *const ARGS[] = {"--train-workers", "1", "--compute-threads", "1", NULL};

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits for a server to die on its own; returns its wait status, or -1 after timeout_ms. */
static int wait_dead(harness_server *s, int timeout_ms) {
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return status;
        }
        sleep_ms(20);
    }
    return -1;
}

static int raw_exec(const char *data_dir, const char *sql) {
    char path[512];
    snprintf(path, sizeof path, "%s/attnlab.db", data_dir);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) printf("# %s: %s\n", sql, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : -1;
}

static json_t *get_run(harness_server *s, long long id) {
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_t *j = api_call(s, "GET", path, NULL, NULL);
    json_t *run = json_incref(json_object_get(j, "run"));
    json_decref(j);
    return run;
}

/* The steps of a run's loss series, checked to be exactly 1..n. */
static int loss_steps_are_whole(harness_server *s, long long id, int n) {
    char path[128];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=loss", id);
    json_t *j = api_call(s, "GET", path, NULL, NULL);
    json_t *steps = json_object_get(json_object_get(json_object_get(j, "series"), "loss"), "steps");
    int ok = (int)json_array_size(steps) == n;
    if (!ok) printf("# %zu loss points, wanted %d\n", json_array_size(steps), n);
    for (int i = 0; ok && i < n; i++)
        if (json_integer_value(json_array_get(steps, (size_t)i)) != i + 1) {
            printf("# point %d is step %lld\n", i, (long long)json_integer_value(json_array_get(steps, (size_t)i)));
            ok = 0;
        }
    json_decref(j);
    return ok;
}

static int resume(harness_server *s, long long id) {
    char path[64];
    long code;
    snprintf(path, sizeof path, "/api/runs/%lld/resume", id);
    json_decref(api_call(s, "POST", path, NULL, &code));
    return code == 202 ? 0 : -1;
}

TEST(a_kill_right_after_a_checkpoint_leaves_no_hole) {
    harness_server s;
    setenv("ATTNLAB_TEST_KILL_AT_CHECKPOINT", "200", 1);
    int started = harness_start(&s, NULL, ARGS);
    unsetenv("ATTNLAB_TEST_KILL_AT_CHECKPOINT");
    CHECK(started == 0);
    long long id = api_start_tiny_run(&s, "\"steps\":300,\"checkpoint_every\":100", "killed-at-checkpoint");
    CHECK(id > 0);
    int status = wait_dead(&s, 300000);
    CHECK_MSG(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the server was not killed (%d)",
              status);
    harness_server s2;
    CHECK(harness_start(&s2, s.data_dir, ARGS) == 0);
    json_t *run = get_run(&s2, id);
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "interrupted"));
    json_decref(run);
    CHECK(resume(&s2, id) == 0);
    char *st = api_wait_status(&s2, id, "succeeded", 300000);
    CHECK_MSG(st && !strcmp(st, "succeeded"), "the resumed run ended %s", st ? st : "(timeout)");
    free(st);
    CHECK_MSG(loss_steps_are_whole(&s2, id, 300), "the loss curve has a hole");
    CHECK_EQ_INT(harness_stop(&s2), 0);
}

static void remove_db(const char *dir) {
    static const char *const suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/attnlab.db%s", dir, suffix[i]);
        unlink(p);
    }
}

TEST(a_new_run_never_resumes_a_strangers_checkpoint) {
    SKIP_IF(!harness_sqlite(), "it opens the SQLite file itself");
    harness_server a;
    CHECK(harness_start(&a, NULL, ARGS) == 0);
    long long old = api_start_tiny_run(&a, "\"steps\":50", "stranger");
    CHECK(old > 0);
    char *st = api_wait_status(&a, old, "succeeded", 180000);
    CHECK(st && !strcmp(st, "succeeded"));
    free(st);
    CHECK_EQ_INT(harness_stop(&a), 0);
    /* The database goes; the runs folder stays, and ids start again. */
    remove_db(a.data_dir);
    harness_server b;
    CHECK(harness_start(&b, a.data_dir, ARGS) == 0);
    long long id = api_start_tiny_run(&b, "\"steps\":60", "newcomer");
    CHECK_EQ_INT(id, old);
    st = api_wait_status(&b, id, "succeeded", 180000);
    CHECK_MSG(st && !strcmp(st, "succeeded"), "the new run ended %s", st ? st : "(timeout)");
    free(st);
    CHECK_MSG(loss_steps_are_whole(&b, id, 60), "the new run did not train all its steps itself");
    CHECK_EQ_INT(harness_stop(&b), 0);
}

TEST(a_checkpoint_swapped_for_another_runs_is_refused_on_resume) {
    harness_server s;
    CHECK(harness_start(&s, NULL, ARGS) == 0);
    long long victim = api_start_tiny_run(&s, "\"steps\":100000", "victim");
    CHECK(victim > 0);
    CHECK(api_wait_step(&s, victim, 5, 180000) == 0);
    char path[128];
    long code;
    snprintf(path, sizeof path, "/api/runs/%lld/cancel", victim);
    json_decref(api_call(&s, "POST", path, NULL, &code));
    CHECK_EQ_INT(code, 202);
    char *st = api_wait_status(&s, victim, "cancelled", 180000);
    CHECK(st && !strcmp(st, "cancelled"));
    free(st);
    long long other = api_start_tiny_run(&s, "\"steps\":30", "other");
    st = api_wait_status(&s, other, "succeeded", 180000);
    CHECK(st && !strcmp(st, "succeeded"));
    free(st);
    char from[512], to[512], cmd[1200];
    snprintf(from, sizeof from, "%s/runs/%lld/checkpoint.safetensors", s.data_dir, other);
    snprintf(to, sizeof to, "%s/runs/%lld/checkpoint.safetensors", s.data_dir, victim);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    CHECK(system(cmd) == 0);
    CHECK(resume(&s, victim) == 0);
    st = api_wait_status(&s, victim, "failed", 180000);
    CHECK_MSG(st && !strcmp(st, "failed"), "resuming from another run's checkpoint ended %s", st ? st : "(timeout)");
    free(st);
    json_t *run = get_run(&s, victim);
    const char *err = json_string_value(json_object_get(run, "error"));
    CHECK_MSG(err && strstr(err, "checkpoint"), "error: %s", err ? err : "(none)");
    json_decref(run);
    CHECK_EQ_INT(harness_stop(&s), 0);
}

/* The weights served are the bytes the run wrote: a checkpoint changed on disk since (one byte of a
 * tensor flipped) is refused with the reason, in both forms of the download. */
/* attnlab_checkpoint_hashes_total from /metrics, or -1. */
static long long hashes_computed(harness_server *s) {
    harness_response r;
    if (harness_get(s, "/metrics", &r) != 0) return -1;
    const char *p = r.body ? strstr(r.body, "\nattnlab_checkpoint_hashes_total ") : NULL;
    long long v = p ? atoll(p + strlen("\nattnlab_checkpoint_hashes_total ")) : -1;
    harness_response_free(&r);
    return v;
}

/* Open descriptors of pid on deleted files whose name holds `part`. */
static int deleted_open(pid_t pid, const char *part) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char link[320], target[512];
        snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = 0;
        n += strstr(target, part) && strstr(target, "(deleted)");
    }
    closedir(d);
    return n;
}

TEST(a_checkpoint_changed_on_disk_is_not_served) {
    harness_server s;
    CHECK(harness_start(&s, NULL, ARGS) == 0);
    long long id = api_start_tiny_run(&s, "\"steps\":4", "served");
    CHECK(id > 0);
    char *st = api_wait_status(&s, id, "succeeded", 180000);
    CHECK(st && !strcmp(st, "succeeded"));
    free(st);
    char url[2][96];
    snprintf(url[0], sizeof url[0], "/api/runs/%lld/weights", id);
    snprintf(url[1], sizeof url[1], "/api/runs/%lld/weights?optimizer=1", id);
    harness_response r;
    /* Served from the hash recorded when it was sealed: no download hashes the file again (issue
     * 23 item 5: each one hashed all 347 MB). */
    long long hashed = hashes_computed(&s);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++) {
            CHECK(harness_get(&s, url[i], &r) == 0);
            CHECK_MSG(r.status == 200, "%s answered %ld before the change", url[i], r.status);
            harness_response_free(&r);
        }
    CHECK_MSG(hashed >= 0 && hashes_computed(&s) == hashed, "downloads hashed the checkpoint: %lld, then %lld", hashed,
              hashes_computed(&s));
    /* A client that stalls holds no copy of the weights on disk (it was a deleted temporary file). */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    int rcvbuf = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof to) == 0);
    char req[160], head[512];
    int rl = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", url[0]);
    CHECK(send(fd, req, (size_t)rl, MSG_NOSIGNAL) == rl);
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    CHECK(poll(&pf, 1, 30000) == 1 && recv(fd, head, sizeof head, 0) > 12 && !strncmp(head, "HTTP/1.1 200", 12));
    int held = deleted_open(s.pid, "weights.");
    close(fd);
    CHECK_MSG(held == 0, "a stalled download holds %d deleted weights file(s) open", held);
    char path[512];
    snprintf(path, sizeof path, "%s/runs/%lld/checkpoint.safetensors", s.data_dir, id);
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    CHECK(fseek(f, -1, SEEK_END) == 0);
    int c = fgetc(f);
    CHECK(c != EOF && fseek(f, -1, SEEK_END) == 0 && fputc(c ^ 0x40, f) != EOF);
    CHECK(fclose(f) == 0);
    for (int i = 0; i < 2; i++) {
        CHECK(harness_get(&s, url[i], &r) == 0);
        json_t *j = harness_json(&r);
        const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
        CHECK_MSG(r.status == 500 && code && !strcmp(code, "checkpoint_mismatch"),
                  "%s answered %ld (%s) after the change", url[i], r.status, code ? code : "no JSON error");
        json_decref(j);
        harness_response_free(&r);
    }
    CHECK_EQ_INT(harness_stop(&s), 0);
}

TEST(built_in_corpus_names_cannot_be_uploaded) {
    harness_server s;
    CHECK(harness_start(&s, NULL, ARGS) == 0);
    const char *hdr[] = {"Content-Type: text/plain", NULL};
    static const char *const names[] = {"default", "small"};
    const char *text = "Call me Ishmael. Some years ago, never mind how long precisely.\n";
    for (int i = 0; i < 2; i++) {
        char path[96];
        snprintf(path, sizeof path, "/api/corpora?name=%s&encoding=bytes", names[i]);
        harness_response r;
        CHECK(harness_request(&s, "POST", path, text, strlen(text), hdr, &r) == 0);
        json_t *j = harness_json(&r);
        CHECK_MSG(r.status == 409, "uploading '%s' got HTTP %ld", names[i], r.status);
        CHECK(!strcmp(api_error_field(j), "name"));
        json_decref(j);
        harness_response_free(&r);
    }
    sleep_ms(300); /* had it been taken, its tokenization would be done by now */
    CHECK_EQ_INT(harness_stop(&s), 0);
    harness_server s2;
    CHECK(harness_start(&s2, s.data_dir, ARGS) == 0);
    long code;
    json_t *j = api_call(&s2, "GET", "/api/corpora/default", NULL, &code);
    CHECK_MSG(code == 404, "after a restart 'default' is %s", json_dumps(j, 0));
    json_decref(j);
    CHECK_EQ_INT(harness_stop(&s2), 0);
}

TEST(health_notices_a_database_that_cannot_be_written) {
    SKIP_IF(!harness_sqlite(), "it opens the SQLite file itself");
    harness_server s;
    CHECK(harness_start(&s, NULL, ARGS) == 0);
    remove_db(s.data_dir); /* writes would go to an unlinked file and vanish at the restart */
    long code;
    json_t *j = api_call(&s, "GET", "/api/health", NULL, &code);
    CHECK_MSG(code == 503, "health answered %ld for a deleted database", code);
    CHECK(!strcmp(json_string_value(json_object_get(j, "db")), "error"));
    json_decref(j);
    harness_kill(&s);
    /* A database only readable is refused when opened, not discovered at the first write. */
    char dir[256], path[320], uri[400], err[256];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/ro.db", dir);
    store *st;
    CHECK(store_open(&st, path, err, sizeof err) == STORE_OK);
    store_close(st);
    snprintf(uri, sizeof uri, "file:%s?mode=ro", path);
    st = NULL;
    store_status rs = store_open(&st, uri, err, sizeof err);
    CHECK_MSG(rs != STORE_OK, "a read-only database was opened for writing");
    CHECK(st == NULL);
    CHECK_MSG(strstr(err, "read-only") || strstr(err, "readonly"), "reason: %s", err);
}

/* A server s2 on a database that sql changed after a first start made it (a trigger standing in
 * for a full disk, what a kill leaves behind). 0, or -1. */
static int start_with(harness_server *s2, const char *sql) {
    harness_server s;
    if (harness_start(&s, NULL, ARGS) != 0) return -1;
    if (harness_stop(&s) != 0 || raw_exec(s.data_dir, sql) != 0) return -1;
    return harness_start(s2, s.data_dir, ARGS);
}

static int log_has(const harness_server *s, const char *needle) {
    FILE *f = fopen(s->log_path, "r");
    if (!f) return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* A database file replaced under the running service: health says so, and writes are refused (a
 * JSON 5xx) instead of going to the old file, where they would vanish at the next start. */
TEST(writes_to_a_replaced_database_file_are_refused) {
    SKIP_IF(!harness_sqlite(), "it opens the SQLite file itself");
    harness_server s;
    CHECK(harness_start(&s, NULL, ARGS) == 0);
    long code;
    json_t *j =
        api_call(&s, "POST", "/api/runs", "{\"name\":\"before\",\"config\":{" TINY_CONFIG ",\"steps\":2}}", &code);
    CHECK_EQ_INT(code, 201);
    json_decref(j);
    char db[512], copy[512];
    snprintf(db, sizeof db, "%s/attnlab.db", s.data_dir);
    snprintf(copy, sizeof copy, "%s/attnlab.db.copy", s.data_dir);
    FILE *in = fopen(db, "rb"), *out = fopen(copy, "wb");
    CHECK(in && out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) CHECK(fwrite(buf, 1, n, out) == n);
    fclose(in);
    CHECK(fclose(out) == 0);
    CHECK(rename(copy, db) == 0); /* the path now names another file */
    j = api_call(&s, "GET", "/api/health", NULL, &code);
    CHECK_MSG(code == 503, "health answered %ld for a replaced database", code);
    CHECK(strstr(json_string_value(json_object_get(j, "db_error")), "replaced"));
    CHECK_MSG(!strstr(json_string_value(json_object_get(j, "db_error")), s.data_dir),
              "open health names the server's directory: %s", json_string_value(json_object_get(j, "db_error")));
    json_decref(j);
    j = api_call(&s, "POST", "/api/runs", "{\"name\":\"after\",\"config\":{" TINY_CONFIG ",\"steps\":2}}", &code);
    CHECK_MSG(code >= 500 && code < 600 && json_is_object(json_object_get(j, "error")),
              "a run was created into the replaced file: %ld", code);
    json_decref(j);
    j = api_call(&s, "PATCH", "/api/runs/1", "{\"note\":\"lost?\"}", &code);
    CHECK_MSG(code >= 500 && code < 600, "a change was accepted into the replaced file: %ld", code);
    json_decref(j);
    CHECK(log_has(&s, "writes are refused"));
    harness_kill(&s);
}

TEST(metric_points_that_cannot_be_stored_fail_the_run) {
    SKIP_IF(!harness_sqlite(), "it opens the SQLite file itself");
    /* From step 100 on every metrics insert fails, the way a full disk makes it fail. */
    harness_server s2;
    CHECK(start_with(&s2, "CREATE TRIGGER disk_full BEFORE INSERT ON metrics WHEN NEW.step > 100 "
                          "BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END") == 0);
    long long id = api_start_tiny_run(&s2, "\"steps\":100000", "disk-full");
    CHECK(id > 0);
    char *st = api_wait_status(&s2, id, "failed", 300000);
    CHECK_MSG(st && !strcmp(st, "failed"), "a run whose metrics could not be stored ended %s", st ? st : "(timeout)");
    free(st);
    json_t *run = get_run(&s2, id);
    const char *err = json_string_value(json_object_get(run, "error"));
    CHECK_MSG(err && strstr(err, "metrics"), "error: %s", err ? err : "(none)");
    json_decref(run);
    CHECK_EQ_INT(harness_stop(&s2), 0);
}

TEST(metric_points_that_fail_for_a_moment_are_retried) {
    SKIP_IF(!harness_sqlite(), "it opens the SQLite file itself");
    harness_server s2;
    CHECK(start_with(&s2, "CREATE TABLE test_full (on_ INTEGER); INSERT INTO test_full VALUES (1); "
                          "CREATE TRIGGER disk_full BEFORE INSERT ON metrics "
                          "WHEN NEW.step > 20 AND (SELECT on_ FROM test_full) = 1 "
                          "BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END") == 0);
    long long id = api_start_tiny_run(&s2, "\"steps\":1000000", "disk-full-for-a-moment");
    CHECK(id > 0);
    int failed = 0;
    for (int i = 0; i < 6000 && !failed; i++) {
        failed = log_has(&s2, "insert metric");
        if (!failed) sleep_ms(20);
    }
    CHECK_MSG(failed, "no metrics write failed");
    /* health says so while it lasts, with the reason */
    long code;
    json_t *h = api_call(&s2, "GET", "/api/health", NULL, &code);
    CHECK_MSG(code == 503, "health answered %ld while metric writes failed", code);
    CHECK(!strcmp(json_string_value(json_object_get(h, "writes")), "failing"));
    const char *why = json_string_value(json_object_get(h, "writes_error"));
    CHECK_MSG(why && strstr(why, "full"), "writes_error: %s", why ? why : "(none)");
    json_decref(h);
    CHECK(raw_exec(s2.data_dir, "UPDATE test_full SET on_ = 0") == 0); /* space again */
    json_t *run = get_run(&s2, id);
    long step = (long)json_integer_value(json_object_get(run, "step"));
    json_decref(run);
    CHECK(api_wait_step(&s2, id, (int)step + 50, 180000) == 0);
    /* the writer retries about once a second: health is ok again once a retry has landed */
    h = NULL;
    for (int i = 0; i < 200; i++) {
        json_decref(h);
        h = api_call(&s2, "GET", "/api/health", NULL, &code);
        if (code == 200) break;
        sleep_ms(50);
    }
    CHECK_MSG(code == 200, "health answered %ld 10 s after writes could be stored again", code);
    CHECK(!strcmp(json_string_value(json_object_get(h, "writes")), "ok"));
    json_decref(h);
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld/cancel", id);
    json_decref(api_call(&s2, "POST", path, NULL, &code));
    CHECK_EQ_INT(code, 202);
    char *st = api_wait_status(&s2, id, "cancelled", 180000);
    CHECK_MSG(st && !strcmp(st, "cancelled"), "the run ended %s", st ? st : "(timeout)");
    free(st);
    run = get_run(&s2, id);
    int last = (int)json_integer_value(json_object_get(run, "step"));
    json_decref(run);
    CHECK_MSG(loss_steps_are_whole(&s2, id, last), "points were dropped while the store failed (run at step %d)", last);
    CHECK_EQ_INT(harness_stop(&s2), 0);
}

/* A run whose final status cannot be written at first (the disk full when it ends) does not stay
 * "running" for ever: the status is retried and lands once the store takes writes again. */
TEST(a_final_status_that_cannot_be_stored_at_first_is_retried) {
    SKIP_IF(!harness_sqlite(), "it opens the SQLite file itself");
    harness_server s2;
    CHECK(start_with(&s2, "CREATE TABLE test_full (on_ INTEGER); INSERT INTO test_full VALUES (1); "
                          "CREATE TRIGGER status_full BEFORE UPDATE OF status ON runs "
                          "WHEN NEW.status IN ('succeeded', 'failed', 'cancelled') "
                          "AND (SELECT on_ FROM test_full) = 1 "
                          "BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END") == 0);
    long long id = api_start_tiny_run(&s2, "\"steps\":10", "final-status-later");
    CHECK(id > 0);
    int refused = 0;
    for (int i = 0; i < 3000 && !refused; i++) {
        refused = log_has(&s2, "cannot be stored yet");
        if (!refused) sleep_ms(20);
    }
    CHECK_MSG(refused, "the final status was never refused");
    json_t *run = get_run(&s2, id);
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "running"));
    json_decref(run);
    CHECK(raw_exec(s2.data_dir, "UPDATE test_full SET on_ = 0") == 0); /* space again */
    char *st = api_wait_status(&s2, id, "succeeded", 30000);
    CHECK_MSG(st && !strcmp(st, "succeeded"), "the run ended %s once the store took writes", st ? st : "(timeout)");
    free(st);
    CHECK_MSG(loss_steps_are_whole(&s2, id, 10), "the run's loss series is not whole");
    CHECK_EQ_INT(harness_stop(&s2), 0);
}

TEST(a_corpus_cut_off_while_tokenizing_is_recovered_at_start) {
    SKIP_IF(!harness_sqlite(), "it opens the SQLite file itself");
    /* What a kill in the middle of tokenizing an upload leaves behind. */
    harness_server s2;
    CHECK(start_with(&s2, "INSERT INTO corpora (name, source, tokenizer, status, created_at) "
                          "VALUES ('halfway', 'uploaded text', 'bytes', 'tokenizing', 0)") == 0);
    long code;
    json_t *j = api_call(&s2, "GET", "/api/corpora/halfway", NULL, &code);
    CHECK_EQ_INT(code, 200);
    json_t *c = json_object_get(j, "corpus");
    CHECK_MSG(!strcmp(json_string_value(json_object_get(c, "status")), "failed"), "the corpus is %s after a restart",
              json_string_value(json_object_get(c, "status")));
    CHECK(json_string_value(json_object_get(c, "error")));
    json_decref(j);
    j = api_call(&s2, "DELETE", "/api/corpora/halfway", NULL, &code);
    CHECK_EQ_INT(code, 204);
    json_decref(j);
    CHECK_EQ_INT(harness_stop(&s2), 0);
}

TEST(a_run_cannot_ask_for_more_threads_than_the_service_has) {
    harness_server s;
    CHECK(harness_start(&s, NULL, ARGS) == 0); /* --compute-threads 1 */
    long code;
    json_t *j = api_call(&s, "POST", "/api/runs",
                         "{\"config\":{\"corpus\":\"small\",\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"seq_len\":16,"
                         "\"batch\":2,\"steps\":3,\"threads\":128}}",
                         &code);
    CHECK_MSG(code == 422, "threads 128 on a one-thread service got HTTP %ld", code);
    CHECK(!strcmp(api_error_field(j), "config.threads"));
    json_decref(j);
    CHECK(api_start_tiny_run(&s, "\"steps\":3", "one-thread") > 0);
    CHECK_EQ_INT(harness_stop(&s), 0);
}

/* An upload that meets a full disk is answered, as JSON 507, not cut off (scripts/faultdrill.sh
 * found the connection closed unanswered). Needs root to mount a small tmpfs as the data dir. */
TEST(an_upload_on_a_full_disk_is_answered_507) {
    SKIP_IF(geteuid() != 0, "needs root to mount a tmpfs");
    char dir[256], cmd[700];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=4m tmpfs '%s' 2>/dev/null", dir);
    SKIP_IF(system(cmd) != 0, "a tmpfs could not be mounted here");
    harness_server s;
    int started = harness_start(&s, dir, ARGS) == 0;
    long status = 0;
    const char *code = "";
    json_t *j = NULL;
    harness_response r = {0};
    size_t len = 1 << 20;
    char *text = malloc(len);
    if (started && text) {
        memset(text, 'a', len);
        snprintf(cmd, sizeof cmd, "dd if=/dev/zero of='%s/filler' bs=64k 2>/dev/null", dir);
        if (system(cmd) == -1) printf("# dd did not run\n");
        const char *hdr[] = {"Content-Type: text/plain", NULL};
        if (harness_request(&s, "POST", "/api/corpora?name=full&encoding=bytes", text, len, hdr, &r) == 0) {
            status = r.status;
            j = harness_json(&r);
            code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
        }
    }
    int stopped = started ? harness_stop(&s) : -1;
    snprintf(cmd, sizeof cmd, "umount '%s' || umount -l '%s'", dir, dir);
    int unmounted = system(cmd) == 0;
    free(text);
    CHECK(started);
    CHECK_MSG(status == 507, "the upload on a full disk got HTTP %ld", status);
    CHECK_MSG(code && !strcmp(code, "insufficient_storage"), "error code %s", code ? code : "(none)");
    json_decref(j);
    harness_response_free(&r);
    CHECK_EQ_INT(stopped, 0);
    CHECK(unmounted);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(a_kill_right_after_a_checkpoint_leaves_no_hole);
    RUN(a_new_run_never_resumes_a_strangers_checkpoint);
    RUN(a_checkpoint_swapped_for_another_runs_is_refused_on_resume);
    RUN(a_checkpoint_changed_on_disk_is_not_served);
    RUN(built_in_corpus_names_cannot_be_uploaded);
    RUN(health_notices_a_database_that_cannot_be_written);
    RUN(writes_to_a_replaced_database_file_are_refused);
    RUN(metric_points_that_cannot_be_stored_fail_the_run);
    RUN(metric_points_that_fail_for_a_moment_are_retried);
    RUN(a_final_status_that_cannot_be_stored_at_first_is_retried);
    RUN(a_corpus_cut_off_while_tokenizing_is_recovered_at_start);
    RUN(a_run_cannot_ask_for_more_threads_than_the_service_has);
    RUN(an_upload_on_a_full_disk_is_answered_507);
    curl_global_cleanup();
    return test_summary();
}
