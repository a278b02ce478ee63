/* See pg.h. Talks to PostgreSQL only through tests/support/pg.sh, so that the programs that link
 * the test support without libpq (the client's tests) need nothing more. */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char server_url[1024];
static char own_cluster[512];

/* The script's absolute path, found on the first call (tests change directory later). */
static const char *pg_sh(void) {
    static char path[4096];
    if (path[0]) return path;
    const char *p = getenv("ATTNLAB_PG_SH");
    if (!p || !*p) p = "tests/support/pg.sh";
    if (!realpath(p, path)) snprintf(path, sizeof path, "%s", p);
    return path;
}

static void stop_own_cluster(void) {
    if (!own_cluster[0]) return;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' stop '%s' >/dev/null 2>&1", pg_sh(), own_cluster);
    if (system(cmd) != 0) fprintf(stderr, "# could not stop the test cluster in %s\n", own_cluster);
    own_cluster[0] = 0;
}

/* Runs cmd and keeps the first line it prints; 0 when it exited 0 and printed one. */
static int first_line_of(const char *cmd, char *buf, size_t len) {
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    buf[0] = 0;
    if (!fgets(buf, (int)len, f)) buf[0] = 0;
    char sink[256];
    while (fgets(sink, sizeof sink, f)) {}
    int rc = pclose(f);
    buf[strcspn(buf, "\n")] = 0;
    return rc == 0 && buf[0] ? 0 : -1;
}

const char *pgtest_server_url(void) {
    if (server_url[0]) return server_url;
    const char *env = getenv("ATTNLAB_TEST_PG");
    if (env && *env) {
        snprintf(server_url, sizeof server_url, "%s", env);
        return server_url;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(own_cluster, sizeof own_cluster, "%s/attnlab-pg-%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' start '%s'", pg_sh(), own_cluster);
    if (first_line_of(cmd, server_url, sizeof server_url) < 0) {
        printf("# could not start a PostgreSQL cluster for the tests (%s)\n", cmd);
        server_url[0] = 0;
        stop_own_cluster();
        return NULL;
    }
    atexit(stop_own_cluster);
    return server_url;
}

int pgtest_named_db(const char *name, char *buf, size_t len) {
    const char *server = pgtest_server_url();
    if (!server) return -1;
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "'%s' createdb '%s' '%s'", pg_sh(), server, name);
    if (first_line_of(cmd, buf, len) < 0) {
        printf("# could not create the database %s\n", name);
        return -1;
    }
    return 0;
}

int pgtest_db_for_dir(const char *data_dir, char *buf, size_t len) {
    const char *server = getenv("ATTNLAB_TEST_DB");
    if (!server || !*server) return -1;
    /* The last path component, lowered to letters, digits and _ (mkdtemp's suffix is mixed case:
     * a hash of the whole path keeps two directories apart). */
    unsigned long long h = 1469598103934665603ULL;
    for (const char *p = data_dir; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    const char *base = strrchr(data_dir, '/');
    base = base ? base + 1 : data_dir;
    char name[64];
    size_t n = (size_t)snprintf(name, sizeof name, "h_");
    for (const char *p = base; *p && n < 40; p++) {
        char ch = *p;
        if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
        name[n++] = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ? ch : '_';
    }
    snprintf(name + n, sizeof name - n, "_%012llx", h & 0xffffffffffffULL);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "'%s' createdb '%s' '%s'", pg_sh(), server, name);
    if (first_line_of(cmd, buf, len) < 0) {
        /* Never quietly fall back to SQLite: a server pointed at nothing fails to start. */
        printf("# could not create the database %s on $ATTNLAB_TEST_DB\n", name);
        snprintf(buf, len, "postgresql://127.0.0.1:1/database_not_created");
    }
    return 0;
}

int pgtest_new_db(char *buf, size_t len) {
    unsigned char r[6] = {0};
    FILE *u = fopen("/dev/urandom", "rb");
    if (!u || fread(r, 1, sizeof r, u) != sizeof r) {
        if (u) fclose(u);
        return -1;
    }
    fclose(u);
    char name[32];
    snprintf(name, sizeof name, "t_%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5]);
    return pgtest_named_db(name, buf, len);
}
