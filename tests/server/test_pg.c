/* The libpq layer (server/pg.c) against a real, throw-away PostgreSQL server: connecting (and
 * failing to, with a reason and without the password), parameters and typed getters that
 * round-trip exactly, SQLSTATE -> store_status, transactions, a connection the server kills
 * and gets back, and LISTEN/NOTIFY. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../support/pg.h"
#include "../support/test.h"
#include "store/postgres/pg.h"

static char db_url[1024];

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static pg_conn *connect_test_db(void) {
    char err[512];
    pg_conn *c = pg_connect(db_url, 5, "test_pg", err, sizeof err);
    if (!c) printf("# %s\n", err);
    return c;
}

TEST(mask_url_hides_the_password) {
    char buf[256];
    pg_mask_url("postgresql://ann:s3cr@t@db.example:5432/attn?sslmode=disable", buf, sizeof buf);
    CHECK_MSG(!strcmp(buf, "postgresql://ann:***@db.example:5432/attn?sslmode=disable"), "%s", buf);
    pg_mask_url("postgresql://ann@db/attn", buf, sizeof buf);
    CHECK(!strcmp(buf, "postgresql://ann@db/attn"));
    pg_mask_url("postgresql:///attn?host=/tmp", buf, sizeof buf);
    CHECK(!strcmp(buf, "postgresql:///attn?host=/tmp"));
}

TEST(sqlstates_map_to_store_statuses) {
    CHECK(pg_status_of_sqlstate("23505") == STORE_CONFLICT); /* unique */
    CHECK(pg_status_of_sqlstate("23503") == STORE_CONFLICT); /* foreign key */
    CHECK(pg_status_of_sqlstate("40001") == STORE_CONFLICT); /* serialization */
    CHECK(pg_status_of_sqlstate("42601") == STORE_ERROR);    /* syntax */
    CHECK(pg_status_of_sqlstate(NULL) == STORE_ERROR);
    CHECK(pg_sqlstate_is_lost("08006") && pg_sqlstate_is_lost("57P01") && !pg_sqlstate_is_lost("23505"));
}

TEST(refused_connection_says_why_without_the_password) {
    char err[512];
    double t0 = now_s();
    pg_conn *c = pg_connect("postgresql://ann:hunter2@127.0.0.1:1/attn", 2, NULL, err, sizeof err);
    CHECK(c == NULL);
    CHECK_MSG(strstr(err, "cannot connect to postgresql://ann:***@127.0.0.1:1/attn") != NULL, "%s", err);
    CHECK_MSG(strstr(err, "hunter2") == NULL, "%s", err);
    CHECK(strchr(err, '\n') == NULL);
    CHECK(now_s() - t0 < 5);
}

TEST(wrong_password_is_refused_with_the_server_reason) {
    /* The test server's URL with another password. */
    char url[1024], err[512];
    const char *server = pgtest_server_url();
    CHECK(server);
    const char *at = strrchr(server, '@');
    CHECK(at);
    snprintf(url, sizeof url, "postgresql://attnlab:wrong%s", at);
    pg_conn *c = pg_connect(url, 5, NULL, err, sizeof err);
    CHECK(c == NULL);
    CHECK_MSG(strstr(err, "password authentication failed") != NULL, "%s", err);
    CHECK(strstr(err, "wrong") == NULL);
}

TEST(unknown_database_is_refused) {
    char url[1024], err[512];
    snprintf(url, sizeof url, "%s", pgtest_server_url());
    char *slash = strrchr(url, '/');
    CHECK(slash);
    snprintf(slash, sizeof url - (size_t)(slash - url), "/no_such_database_here");
    pg_conn *c = pg_connect(url, 5, NULL, err, sizeof err);
    CHECK(c == NULL);
    CHECK_MSG(strstr(err, "does not exist") != NULL, "%s", err);
}

TEST(parameters_and_getters_round_trip) {
    pg_conn *c = connect_test_db();
    CHECK(c);
    CHECK(pg_cmd(c, "create", "CREATE TABLE rt (id BIGINT PRIMARY KEY, t TEXT, d DOUBLE PRECISION, b BOOLEAN)", NULL,
                 NULL) == STORE_OK);
    static const double ds[] = {0.1, -0.0, 1e-300, 6.02214076e23, 3.0000000000000004, -123456.789012345678};
    for (int i = 0; i < 6; i++) {
        pg_params p;
        pg_params_init(&p);
        pg_p_int(&p, 9007199254740993LL + i); /* beyond a double's integers */
        pg_p_text(&p, i == 2 ? NULL : "it's \"quoted\" \\ and ünïcode");
        pg_p_double(&p, ds[i]);
        pg_p_text(&p, i % 2 ? "true" : "false");
        long long n = 0;
        CHECK(pg_cmd(c, "insert", "INSERT INTO rt VALUES ($1, $2, $3, $4)", &p, &n) == STORE_OK);
        CHECK_EQ_INT(n, 1);
    }
    pg_res *r = NULL;
    CHECK(pg_exec(c, "select", "SELECT id, t, d, b FROM rt ORDER BY id", NULL, &r) == STORE_OK);
    CHECK_EQ_INT(pg_nrows(r), 6);
    for (int i = 0; i < 6; i++) {
        CHECK_EQ_INT(pg_get_i64(r, i, 0), 9007199254740993LL + i);
        if (i == 2) {
            CHECK(pg_get_isnull(r, i, 1) && pg_get_text(r, i, 1) == NULL);
        } else {
            CHECK(!strcmp(pg_get_text(r, i, 1), "it's \"quoted\" \\ and ünïcode"));
        }
        double d = pg_get_double(r, i, 2);
        CHECK_MSG(memcmp(&d, &ds[i], sizeof d) == 0, "row %d: %.17g vs %.17g", i, d, ds[i]);
        CHECK_EQ_INT(pg_get_bool(r, i, 3), i % 2);
    }
    CHECK(pg_get_text(r, 99, 0) == NULL && pg_get_text(r, 0, 99) == NULL); /* out of range: NULL */
    pg_clear(r);
    pg_close(c);
}

TEST(errors_map_and_leave_no_result) {
    pg_conn *c = connect_test_db();
    CHECK(c);
    CHECK(pg_cmd(c, "create", "CREATE TABLE uq (k TEXT PRIMARY KEY)", NULL, NULL) == STORE_OK);
    CHECK(pg_cmd(c, "create", "CREATE TABLE fk (k TEXT REFERENCES uq (k))", NULL, NULL) == STORE_OK);
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, "a");
    CHECK(pg_cmd(c, "insert", "INSERT INTO uq VALUES ($1)", &p, NULL) == STORE_OK);
    pg_res *r = (pg_res *)1;
    CHECK(pg_exec(c, "insert again", "INSERT INTO uq VALUES ($1)", &p, &r) == STORE_CONFLICT);
    CHECK(r == NULL);
    CHECK(!strcmp(pg_sqlstate(c), "23505"));
    CHECK_MSG(strstr(pg_error(c), "insert again: duplicate key") != NULL, "%s", pg_error(c));
    CHECK(!pg_lost(c));
    pg_params_init(&p);
    pg_p_text(&p, "zzz");
    CHECK(pg_cmd(c, "orphan", "INSERT INTO fk VALUES ($1)", &p, NULL) == STORE_CONFLICT);
    CHECK(pg_cmd(c, "syntax", "SELEKT 1", NULL, NULL) == STORE_ERROR);
    CHECK(!strcmp(pg_sqlstate(c), "42601"));
    CHECK(!pg_lost(c));
    CHECK(strchr(pg_error(c), '\n') == NULL);
    /* Too many parameters are refused before anything is sent. */
    pg_params_init(&p);
    for (int i = 0; i < PG_MAX_PARAMS + 1; i++) pg_p_int(&p, i);
    CHECK(p.overflow);
    CHECK(pg_exec(c, "many", "SELECT 1", &p, NULL) == STORE_ERROR);
    pg_close(c);
}

TEST(finish_commits_or_rolls_back_whole) {
    pg_conn *c = connect_test_db();
    CHECK(c);
    CHECK(pg_cmd(c, "create", "CREATE TABLE tx (v INT PRIMARY KEY)", NULL, NULL) == STORE_OK);
    CHECK(pg_begin(c) == STORE_OK);
    CHECK(pg_in_transaction(c));
    CHECK(pg_cmd(c, "insert", "INSERT INTO tx VALUES (1)", NULL, NULL) == STORE_OK);
    store_status s = pg_cmd(c, "insert dup", "INSERT INTO tx VALUES (1)", NULL, NULL);
    CHECK(s == STORE_CONFLICT);
    CHECK(pg_finish(c, s) == STORE_CONFLICT);
    CHECK(strstr(pg_error(c), "insert dup") != NULL); /* the first failure's message is kept */
    CHECK(!pg_in_transaction(c));
    pg_res *r = NULL;
    CHECK(pg_exec(c, "count", "SELECT count(*) FROM tx", NULL, &r) == STORE_OK);
    CHECK_EQ_INT(pg_get_i64(r, 0, 0), 0);
    pg_clear(r);
    CHECK(pg_begin(c) == STORE_OK);
    CHECK(pg_cmd(c, "insert", "INSERT INTO tx VALUES (2)", NULL, NULL) == STORE_OK);
    CHECK(pg_finish(c, STORE_OK) == STORE_OK);
    CHECK(pg_exec(c, "count", "SELECT count(*) FROM tx", NULL, &r) == STORE_OK);
    CHECK_EQ_INT(pg_get_i64(r, 0, 0), 1);
    pg_clear(r);
    pg_close(c);
}

TEST(scripts_run_every_statement_or_report_the_failure) {
    pg_conn *c = connect_test_db();
    CHECK(c);
    CHECK(pg_exec_script(c, "script",
                         "CREATE TABLE sc (v INT); INSERT INTO sc VALUES (1); INSERT INTO sc VALUES (2);") == STORE_OK);
    pg_res *r = NULL;
    CHECK(pg_exec(c, "count", "SELECT count(*) FROM sc", NULL, &r) == STORE_OK);
    CHECK_EQ_INT(pg_get_i64(r, 0, 0), 2);
    pg_clear(r);
    CHECK(pg_exec_script(c, "bad script", "INSERT INTO sc VALUES (3); INSERT INTO nowhere VALUES (1);") == STORE_ERROR);
    CHECK_MSG(strstr(pg_error(c), "bad script") && strstr(pg_error(c), "nowhere"), "%s", pg_error(c));
    pg_close(c);
}

TEST(killed_connection_is_lost_then_reconnects) {
    pg_conn *a = connect_test_db(), *b = connect_test_db();
    CHECK(a && b);
    int pid = pg_backend_pid(a);
    CHECK(pid > 0);
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, pid);
    pg_res *r = NULL;
    CHECK(pg_exec(b, "terminate", "SELECT pg_terminate_backend($1::int)", &p, &r) == STORE_OK);
    CHECK(pg_get_bool(r, 0, 0));
    pg_clear(r);
    store_status s = STORE_OK;
    /* The first statement after the kill may still find the socket open: at most two tries. */
    for (int i = 0; i < 2 && s == STORE_OK; i++) s = pg_cmd(a, "after kill", "SELECT 1", NULL, NULL);
    CHECK(s == STORE_ERROR);
    CHECK_MSG(pg_lost(a), "%s (%s)", pg_error(a), pg_sqlstate(a));
    CHECK(!pg_alive(a));
    CHECK(pg_reconnect(a, 0) == STORE_OK);
    CHECK(pg_alive(a) && !pg_lost(a));
    CHECK(pg_backend_pid(a) != pid);
    CHECK(pg_cmd(a, "after reconnect", "SELECT 1", NULL, NULL) == STORE_OK);
    pg_close(a);
    pg_close(b);
}

typedef struct {
    int n;
    char channel[64], payload[256];
    int pid;
} got_notes;

static void on_note(void *ctx, const char *channel, const char *payload, int pid) {
    got_notes *g = ctx;
    if (g->n++ == 0) {
        snprintf(g->channel, sizeof g->channel, "%s", channel);
        snprintf(g->payload, sizeof g->payload, "%s", payload);
        g->pid = pid;
    }
}

TEST(listen_receives_notifications_in_order) {
    pg_conn *a = connect_test_db(), *b = connect_test_db();
    CHECK(a && b);
    CHECK(pg_cmd(a, "listen", "LISTEN attnlab_test", NULL, NULL) == STORE_OK);
    got_notes g = {0};
    CHECK_EQ_INT(pg_notifications(a, on_note, &g), 0);
    CHECK_EQ_INT(pg_wait_readable(a, 50), 0);
    pg_params p;
    pg_params_init(&p);
    pg_p_text(&p, "{\"run_id\":3}");
    CHECK(pg_cmd(b, "notify", "SELECT pg_notify('attnlab_test', $1)", &p, NULL) == STORE_OK);
    CHECK(pg_cmd(b, "notify", "NOTIFY attnlab_test, 'second'", NULL, NULL) == STORE_OK);
    double t0 = now_s();
    while (g.n < 2 && now_s() - t0 < 5) {
        if (pg_wait_readable(a, 500) < 0) break;
        if (pg_notifications(a, on_note, &g) < 0) break;
    }
    CHECK_EQ_INT(g.n, 2);
    CHECK(!strcmp(g.channel, "attnlab_test"));
    CHECK(!strcmp(g.payload, "{\"run_id\":3}"));
    CHECK_EQ_INT(g.pid, pg_backend_pid(b));
    pg_close(a);
    pg_close(b);
}

int main(void) {
    RUN(mask_url_hides_the_password);
    RUN(sqlstates_map_to_store_statuses);
    RUN(refused_connection_says_why_without_the_password);
    if (pgtest_new_db(db_url, sizeof db_url) < 0) {
        printf("FAIL test_pg: no PostgreSQL server for the tests\n");
        return 1;
    }
    RUN(wrong_password_is_refused_with_the_server_reason);
    RUN(unknown_database_is_refused);
    RUN(parameters_and_getters_round_trip);
    RUN(errors_map_and_leave_no_result);
    RUN(finish_commits_or_rolls_back_whole);
    RUN(scripts_run_every_statement_or_report_the_failure);
    RUN(killed_connection_is_lost_then_reconnects);
    RUN(listen_receives_notifications_in_order);
    return test_summary();
}
