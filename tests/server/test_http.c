/* The server shell over real HTTP: health, static files, traversal attempts, error statuses,
 * flags and exit codes, migrations of an empty or too-new database, clean shutdown. */
#include <curl/curl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../support/harness.h"
#include "../support/test.h"

static harness_server srv;
static char static_dir[256], outside_dir[256];
static const char secret[] = "TOP-SECRET-OUTSIDE-THE-TREE";

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A static tree of our own, with a secret beside it and a symlink that points out. */
static int make_static_tree(void) {
    char p[600];
    if (harness_tempdir(static_dir, sizeof static_dir) < 0 || harness_tempdir(outside_dir, sizeof outside_dir) < 0)
        return -1;
    snprintf(p, sizeof p, "%s/index.html", static_dir);
    write_file(p, "<!doctype html><title>attnlab</title><h1>attnlab shell</h1>");
    snprintf(p, sizeof p, "%s/app.js", static_dir);
    write_file(p, "export const x = 1;\n");
    snprintf(p, sizeof p, "%s/vendor", static_dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/vendor/lib.js", static_dir);
    write_file(p, "/* vendored */\n");
    snprintf(p, sizeof p, "%s/secret.txt", outside_dir);
    write_file(p, secret);
    char link[600];
    snprintf(link, sizeof link, "%s/escape.txt", static_dir);
    if (symlink(p, link) < 0) return -1;
    snprintf(link, sizeof link, "%s/escape-dir", static_dir);
    if (symlink(outside_dir, link) < 0) return -1;
    return 0;
}

TEST(health_reports_ok) {
    harness_response r;
    CHECK(harness_get(&srv, "/api/health", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    json_t *j = harness_json(&r);
    harness_response_free(&r);
    CHECK(j);
    CHECK(!strcmp(json_string_value(json_object_get(j, "status")), "ok"));
    CHECK(!strcmp(json_string_value(json_object_get(j, "db")), "ok"));
    CHECK(json_is_string(json_object_get(j, "version")));
    CHECK(json_is_number(json_object_get(j, "uptime_s")));
    CHECK(json_number_value(json_object_get(j, "uptime_s")) >= 0);
    CHECK(!strcmp(json_string_value(json_object_get(j, "writes")), "ok"));
    CHECK(!strcmp(json_string_value(json_object_get(j, "disk")), "ok"));
    /* the free space of the data directory's file system, as statvfs tells it here (other work on
     * the machine may write in between: within 5% or 256 MiB) */
    struct statvfs v;
    CHECK(statvfs(srv.data_dir, &v) == 0);
    double here = (double)v.f_bavail * v.f_frsize, said = json_number_value(json_object_get(j, "disk_free_bytes"));
    CHECK_MSG(fabs(said - here) <= fmax(0.05 * here, 256.0 * 1024 * 1024), "disk_free_bytes %.0f, statvfs %.0f", said,
              here);
    json_decref(j);
}

/* 1 when /proc/cpuinfo's flags list `flag` (a whole word), 0 when not, -1 when it cannot be read. */
static int cpuinfo_has(const char *flag) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    char line[8192];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5)) continue;
        found = 0;
        for (char *t = strtok(strchr(line, ':') ? strchr(line, ':') + 1 : line, " \n"); t; t = strtok(NULL, " \n"))
            if (!strcmp(t, flag)) found = 1;
        break;
    }
    fclose(f);
    return found;
}

/* health names the kernel path this process computes with, one of the paths it lists as supported;
 * which bf16 paths it calls supported agrees with the CPU's flags as /proc/cpuinfo lists them (an
 * independent reading of cpuid), and a path forced through ATTNLAB_KERNEL_PATH that is unknown, or
 * that this CPU cannot run, stops the start with exit 2 and the reason. */
TEST(health_reports_the_kernel_path) {
    harness_response r;
    CHECK(harness_get(&srv, "/api/health", &r) == 0);
    json_t *j = harness_json(&r);
    harness_response_free(&r);
    json_t *k = json_object_get(j, "kernel");
    CHECK_MSG(json_is_object(k), "no kernel object in health");
    const char *path = json_string_value(json_object_get(k, "path"));
    CHECK(path);
    int chosen_supported = 0, n = 0;
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(k, "paths"), i, row) {
        const char *name = json_string_value(json_object_get(row, "name"));
        int sup = json_is_true(json_object_get(row, "supported"));
        n++;
        if (name && path && !strcmp(name, path)) chosen_supported = sup;
        if (name && !strcmp(name, "avx512_bf16") && cpuinfo_has("avx512_bf16") >= 0)
            CHECK_MSG(sup == cpuinfo_has("avx512_bf16"), "avx512_bf16 supported=%d, cpuinfo says %d", sup,
                      cpuinfo_has("avx512_bf16"));
        if (name && !strcmp(name, "amx") && cpuinfo_has("amx_bf16") == 0)
            CHECK_MSG(!sup, "amx called supported on a CPU without amx_bf16");
        if (!sup) CHECK_MSG(json_is_string(json_object_get(row, "reason")), "%s unsupported without a reason", name);
    }
    CHECK_MSG(n >= 3 && chosen_supported, "path %s among %d paths, supported %d", path, n, chosen_supported);
    json_decref(j);

    char err[1024], dir[256];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    const char *args[] = {"--port", "0", "--data-dir", dir, NULL};
    setenv("ATTNLAB_KERNEL_PATH", "sideways", 1);
    int rc = harness_run_attnlabd(args, err, sizeof err);
    const char *refused = cpuinfo_has("amx_bf16") == 0 ? "amx" : cpuinfo_has("avx512_bf16") == 0 ? "avx512_bf16" : NULL;
    int rc2 = 2;
    char err2[1024] = "";
    if (refused) {
        setenv("ATTNLAB_KERNEL_PATH", refused, 1);
        rc2 = harness_run_attnlabd(args, err2, sizeof err2);
    }
    unsetenv("ATTNLAB_KERNEL_PATH");
    CHECK_EQ_INT(rc, 2);
    CHECK_MSG(strstr(err, "sideways"), "stderr was: %s", err);
    CHECK_EQ_INT(rc2, 2);
    if (refused) CHECK_MSG(strstr(err2, "cannot run"), "forcing %s: stderr was: %s", refused, err2);
}

TEST(root_serves_the_dashboard_shell) {
    harness_response r;
    char ct[128], cc[128];
    CHECK(harness_get(&srv, "/", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.body, "attnlab shell"));
    CHECK(harness_header(&r, "Content-Type", ct, sizeof ct) && !strncmp(ct, "text/html", 9));
    CHECK(harness_header(&r, "Cache-Control", cc, sizeof cc) && !strcmp(cc, "no-cache"));
    harness_response_free(&r);
    CHECK(harness_get(&srv, "/app.js", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(harness_header(&r, "Content-Type", ct, sizeof ct) && !strncmp(ct, "text/javascript", 15));
    harness_response_free(&r);
}

TEST(vendor_files_are_cacheable_and_etags_revalidate) {
    harness_response r;
    char cc[128], etag[128], hdr[200];
    CHECK(harness_get(&srv, "/vendor/lib.js", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(harness_header(&r, "Cache-Control", cc, sizeof cc) && strstr(cc, "max-age="));
    CHECK(harness_header(&r, "ETag", etag, sizeof etag));
    harness_response_free(&r);
    snprintf(hdr, sizeof hdr, "If-None-Match: %s", etag);
    const char *hl[] = {hdr, NULL};
    CHECK(harness_request(&srv, "GET", "/vendor/lib.js", NULL, 0, hl, &r) == 0);
    CHECK_EQ_INT(r.status, 304);
    CHECK_EQ_INT(r.len, 0);
    harness_response_free(&r);
}

TEST(traversal_attempts_get_404_and_nothing_from_outside) {
    const char *attempts[] = {
        "/../secret.txt",
        "/..%2fsecret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/vendor/../../secret.txt",
        "/vendor/%2e%2e/%2e%2e/etc/passwd",
        "/../../../../../../etc/passwd",
        "//etc/passwd",
        "/%2fetc%2fpasswd",
        "/vendor%2f..%2f..%2fsecret.txt",
        "/index.html%00.js",
        "/%00",
        "/escape.txt",
        "/escape-dir/secret.txt",
        "/..\\secret.txt",
        "/%5c..%5csecret.txt",
        "/vendor/./lib.js",
        "/%zz",
    };
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) {
        harness_response r;
        CHECK_MSG(harness_get(&srv, attempts[i], &r) == 0, "no answer to %s", attempts[i]);
        int leaked = r.body && (strstr(r.body, secret) || strstr(r.body, "root:"));
        long st = r.status;
        harness_response_free(&r);
        CHECK_MSG(!leaked, "%s leaked a file from outside the tree", attempts[i]);
        CHECK_MSG(st == 404, "%s answered %ld, not 404", attempts[i], st);
    }
}

TEST(unknown_api_route_is_json_404) {
    harness_response r;
    CHECK(harness_get(&srv, "/api/no-such-thing", &r) == 0);
    CHECK_EQ_INT(r.status, 404);
    json_t *j = harness_json(&r);
    harness_response_free(&r);
    CHECK(j);
    json_t *e = json_object_get(j, "error");
    CHECK(json_is_object(e));
    CHECK(!strcmp(json_string_value(json_object_get(e, "code")), "not_found"));
    CHECK(json_is_string(json_object_get(e, "message")));
    json_decref(j);
}

TEST(wrong_method_is_405_with_allow) {
    harness_response r;
    char allow[64];
    CHECK(harness_request(&srv, "DELETE", "/api/health", NULL, 0, NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 405);
    CHECK(harness_header(&r, "Allow", allow, sizeof allow) && strstr(allow, "GET"));
    json_t *j = harness_json(&r);
    harness_response_free(&r);
    CHECK(j && json_is_object(json_object_get(j, "error")));
    json_decref(j);
    CHECK(harness_request(&srv, "POST", "/index.html", "x", 1, NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 405);
    harness_response_free(&r);
}

TEST(oversized_body_is_413_and_server_survives) {
    size_t n = (1u << 20) + 10;
    char *big = malloc(n);
    CHECK(big);
    memset(big, 'a', n);
    harness_response r;
    int rc = harness_request(&srv, "POST", "/api/health", big, n, NULL, &r);
    free(big);
    CHECK(rc == 0);
    CHECK_EQ_INT(r.status, 413);
    json_t *j = harness_json(&r);
    harness_response_free(&r);
    CHECK(j && json_is_object(json_object_get(j, "error")));
    json_decref(j);
    CHECK(harness_get(&srv, "/api/health", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    harness_response_free(&r);
}

TEST(bad_flag_exits_2) {
    char err[1024];
    const char *args[] = {"--no-such-flag", NULL};
    CHECK_EQ_INT(harness_run_attnlabd(args, err, sizeof err), 2);
    CHECK(strstr(err, "--no-such-flag"));
    const char *args2[] = {"--port", "99999", NULL};
    CHECK_EQ_INT(harness_run_attnlabd(args2, err, sizeof err), 2);
    CHECK(strstr(err, "--port"));
}

TEST(port_in_use_exits_2) {
    char err[1024], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char dir[256];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    const char *args[] = {"--port", port, "--data-dir", dir, NULL};
    CHECK_EQ_INT(harness_run_attnlabd(args, err, sizeof err), 2);
    CHECK_MSG(strstr(err, "already in use"), "stderr was: %s", err);
}

TEST(unwritable_data_dir_exits_2) {
    char err[1024], dir[256], file[300], sub[400];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    snprintf(file, sizeof file, "%s/a-file", dir);
    write_file(file, "x");
    snprintf(sub, sizeof sub, "%s/data", file); /* a directory under a regular file cannot exist */
    const char *args[] = {"--port", "0", "--data-dir", sub, NULL};
    CHECK_EQ_INT(harness_run_attnlabd(args, err, sizeof err), 2);
    CHECK_MSG(strstr(err, "data directory"), "stderr was: %s", err);
}

static int db_user_version(const char *path) {
    sqlite3 *db;
    int v = -1;
    if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

TEST(empty_database_file_is_migrated) {
    SKIP_IF(!harness_sqlite(), "it opens the SQLite file itself");
    char dir[256], db[320];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    snprintf(db, sizeof db, "%s/attnlab.db", dir);
    write_file(db, "");
    harness_server s2;
    CHECK(harness_start(&s2, dir, NULL) == 0);
    CHECK_EQ_INT(harness_stop(&s2), 0);
    CHECK(db_user_version(db) >= 1);
    sqlite3 *h;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK);
    int tables = 0;
    sqlite3_stmt *q;
    sqlite3_prepare_v2(h,
                       "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN ('runs','metrics','probes')",
                       -1, &q, NULL);
    if (sqlite3_step(q) == SQLITE_ROW) tables = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(h);
    CHECK_EQ_INT(tables, 3);
}

TEST(too_new_database_is_refused) {
    char dir[256], db[320], err[1024];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    snprintf(db, sizeof db, "%s/attnlab.db", dir);
    sqlite3 *h;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK);
    CHECK(sqlite3_exec(h, "PRAGMA user_version = 9999", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(h);
    const char *args[] = {"--port", "0", "--data-dir", dir, NULL};
    CHECK_EQ_INT(harness_run_attnlabd(args, err, sizeof err), 2);
    CHECK_MSG(strstr(err, "9999") && strstr(err, "newer"), "stderr was: %s", err);
    CHECK_EQ_INT(db_user_version(db), 9999);
}

TEST(sigterm_stops_cleanly_and_database_is_intact) {
    harness_server s2;
    CHECK(harness_start(&s2, NULL, NULL) == 0);
    CHECK_EQ_INT(harness_stop(&s2), 0);
    char db[320];
    snprintf(db, sizeof db, "%s/attnlab.db", s2.data_dir);
    sqlite3 *h;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK);
    sqlite3_stmt *q;
    const char *res = NULL;
    char ok[16] = "";
    sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &q, NULL);
    if (sqlite3_step(q) == SQLITE_ROW) res = (const char *)sqlite3_column_text(q, 0);
    if (res) snprintf(ok, sizeof ok, "%s", res);
    sqlite3_finalize(q);
    sqlite3_close(h);
    CHECK(!strcmp(ok, "ok"));
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (make_static_tree() < 0) {
        printf("FAIL setup: could not build the static tree\n");
        return 1;
    }
    const char *args[] = {"--static-dir", static_dir, NULL};
    if (harness_start(&srv, NULL, args) < 0) {
        printf("FAIL setup: attnlabd (%s) did not start\n", harness_attnlabd());
        harness_dump_log(&srv);
        return 1;
    }
    RUN(health_reports_ok);
    RUN(health_reports_the_kernel_path);
    RUN(root_serves_the_dashboard_shell);
    RUN(vendor_files_are_cacheable_and_etags_revalidate);
    RUN(traversal_attempts_get_404_and_nothing_from_outside);
    RUN(unknown_api_route_is_json_404);
    RUN(wrong_method_is_405_with_allow);
    RUN(oversized_body_is_413_and_server_survives);
    RUN(bad_flag_exits_2);
    RUN(port_in_use_exits_2);
    RUN(unwritable_data_dir_exits_2);
    RUN(empty_database_file_is_migrated);
    RUN(too_new_database_is_refused);
    RUN(sigterm_stops_cleanly_and_database_is_intact);
    int rc = harness_stop(&srv);
    if (rc != 0) {
        printf("FAIL shutdown: attnlabd exited with %d\n", rc);
        harness_dump_log(&srv);
        return 1;
    }
    if (test_fail_count) harness_dump_log(&srv);
    curl_global_cleanup();
    return test_summary();
}
