#include "harness.h"
#include "pg.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int harness_sqlite(void) {
    const char *db = getenv("ATTNLAB_TEST_DB");
    return !db || !*db;
}

const char *harness_attnlabd(void) {
    const char *p = getenv("ATTNLABD");
    return p ? p : "build/release/attnlabd";
}

int harness_tempdir(char *buf, size_t len) {
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, len, "%s/attnlab-test-XXXXXX", tmp ? tmp : "/tmp");
    return mkdtemp(buf) ? 0 : -1;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int harness_start(harness_server *s, const char *data_dir, const char *const *extra_args) {
    memset(s, 0, sizeof *s);
    if (data_dir)
        snprintf(s->data_dir, sizeof s->data_dir, "%s", data_dir);
    else if (harness_tempdir(s->data_dir, sizeof s->data_dir) < 0)
        return -1;
    snprintf(s->log_path, sizeof s->log_path, "%s.log", s->data_dir);
    int out[2];
    if (pipe(out) < 0) return -1;
    const char *argv[64];
    int n = 0;
    argv[n++] = harness_attnlabd();
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--data-dir";
    argv[n++] = s->data_dir;
    argv[n++] = "--log-level";
    argv[n++] = "debug";
    /* $ATTNLAB_TEST_DB (a PostgreSQL server): the server's database is one of its own there, named
     * after its data directory, so a restart on the same directory finds the same database. */
    char db_url[1024];
    if (pgtest_db_for_dir(s->data_dir, db_url, sizeof db_url) == 0) {
        argv[n++] = "--db";
        argv[n++] = db_url;
    }
    for (int i = 0; extra_args && extra_args[i] && n < 62; i++) argv[n++] = extra_args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* A test that dies must not leave a server training in the background. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int logfd = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(out[1], 1);
        if (logfd >= 0) dup2(logfd, 2);
        close(out[0]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    s->pid = pid;
    /* The first stdout line names the URL: "... listening on http://127.0.0.1:PORT/ ...". */
    char line[512];
    size_t got = 0;
    while (got < sizeof line - 1) {
        ssize_t r = read(out[0], line + got, 1);
        if (r <= 0) break;
        if (line[got] == '\n') break;
        got++;
    }
    line[got] = 0;
    close(out[0]);
    const char *p = strstr(line, "http://");
    const char *colon = p ? strchr(p + 7, ':') : NULL;
    if (!colon) {
        harness_kill(s);
        return -1;
    }
    s->port = atoi(colon + 1);
    snprintf(s->base_url, sizeof s->base_url, "http://127.0.0.1:%d", s->port);
    for (int i = 0; i < 200; i++) {
        harness_response r;
        if (harness_get(s, "/api/health", &r) == 0) {
            long st = r.status;
            harness_response_free(&r);
            if (st == 200) return 0;
        }
        sleep_ms(25);
    }
    harness_kill(s);
    return -1;
}

static int wait_exit(pid_t pid, int timeout_ms) {
    int status;
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

int harness_stop(harness_server *s) {
    if (s->pid <= 0) return -1;
    kill(s->pid, SIGTERM);
    int rc = wait_exit(s->pid, 15000);
    s->pid = 0;
    return rc;
}

void harness_kill(harness_server *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGKILL);
    int status;
    waitpid(s->pid, &status, 0);
    s->pid = 0;
}

int harness_run_attnlabd(const char *const *args, char *errbuf, size_t errlen) {
    int errp[2];
    if (pipe(errp) < 0) return -1;
    const char *argv[64];
    int n = 0;
    argv[n++] = harness_attnlabd();
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(errp[1], 2);
        close(errp[0]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(errp[1]);
    size_t got = 0;
    ssize_t r;
    char sink[256];
    while ((r = read(errp[0], got + 1 < errlen ? errbuf + got : sink,
                     got + 1 < errlen ? errlen - 1 - got : sizeof sink)) > 0)
        if (got + 1 < errlen) got += (size_t)r;
    if (errlen) errbuf[got < errlen ? got : errlen - 1] = 0;
    close(errp[0]);
    return wait_exit(pid, 20000);
}

typedef struct {
    char *data;
    size_t len;
} growbuf;

static size_t collect(char *ptr, size_t size, size_t nmemb, void *ud) {
    growbuf *b = ud;
    size_t n = size * nmemb;
    char *grown = realloc(b->data, b->len + n + 1);
    if (!grown) return 0;
    b->data = grown;
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = 0;
    return n;
}

int harness_request(harness_server *s, const char *method, const char *path, const char *body, size_t body_len,
                    const char *const *headers, harness_response *out) {
    memset(out, 0, sizeof *out);
    CURL *c = curl_easy_init();
    if (!c) return -1;
    char url[4096];
    snprintf(url, sizeof url, "%s%s", s->base_url, path);
    growbuf b = {0}, h = {0};
    struct curl_slist *hl = NULL;
    for (int i = 0; headers && headers[i]; i++) hl = curl_slist_append(hl, headers[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD")) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    out->body = b.data ? b.data : calloc(1, 1);
    out->len = b.len;
    out->headers = h.data ? h.data : calloc(1, 1);
    return rc == CURLE_OK ? 0 : -1;
}

int harness_get(harness_server *s, const char *path, harness_response *out) {
    return harness_request(s, "GET", path, NULL, 0, NULL, out);
}

int harness_post_json(harness_server *s, const char *path, const char *json, harness_response *out) {
    const char *hdr[] = {"Content-Type: application/json", NULL};
    return harness_request(s, "POST", path, json, strlen(json), hdr, out);
}

void harness_response_free(harness_response *r) {
    free(r->body);
    free(r->headers);
    r->body = r->headers = NULL;
}

json_t *harness_json(const harness_response *r) { return r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL; }

const char *harness_header(const harness_response *r, const char *name, char *buf, size_t len) {
    size_t nl = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *eol = strchr(line, '\n');
        if (!strncasecmp(line, name, nl) && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ') v++;
            size_t vl = eol ? (size_t)(eol - v) : strlen(v);
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n')) vl--;
            if (vl >= len) vl = len - 1;
            memcpy(buf, v, vl);
            buf[vl] = 0;
            return buf;
        }
        line = eol ? eol + 1 : NULL;
    }
    return NULL;
}

void harness_dump_log(const harness_server *s) {
    FILE *f = fopen(s->log_path, "r");
    if (!f) return;
    char line[1024];
    printf("---- %s\n", s->log_path);
    while (fgets(line, sizeof line, f)) printf("| %s", line);
    fclose(f);
}
