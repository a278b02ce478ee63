/* PostgreSQL for the tests: a throw-away server (tests/support/pg.sh) and fresh databases on it.
 * tests/run.sh starts one cluster for the whole suite and passes its URL in $ATTNLAB_TEST_PG; a
 * test program run on its own starts its own cluster (removed when the program exits). */
#ifndef ATTNLAB_TEST_PG_H
#define ATTNLAB_TEST_PG_H

#include <stddef.h>

/* The URL of the test server's maintenance database: $ATTNLAB_TEST_PG, or a cluster started now
 * with tests/support/pg.sh (stopped at exit). NULL when none can be had (the reason printed). */
const char *pgtest_server_url(void);
/* Creates a fresh, empty database on the test server and puts its URL into buf. 0, or -1. */
int pgtest_new_db(char *buf, size_t len);
/* Creates (if missing) the database named name (letters, digits, _) and puts its URL into buf. */
int pgtest_named_db(const char *name, char *buf, size_t len);
/* With $ATTNLAB_TEST_DB set (the URL of a PostgreSQL server: tests/run.sh's second pass over the
 * API tests), the database for a server whose data directory is data_dir (created if missing,
 * named after the directory): 0 with its URL in buf. -1 when the variable is unset or empty (the
 * server keeps SQLite) or the database cannot be made (the reason printed). */
int pgtest_db_for_dir(const char *data_dir, char *buf, size_t len);

#endif
