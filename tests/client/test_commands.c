/* Every attnlab command against a real attnlabd started here on a free port with a fresh data
 * directory: output formats (aligned tables, CSV, JSON), the server's refusals with their field,
 * exit codes (including an unreachable server), a tiny training run and a tiny seed-blog
 * experiment followed to the end, cancel/resume, tags and notes, probes, and a token. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../support/harness.h"
#include "../support/test.h"
#include "client_run.h"

static harness_server srv;
static int server_ok;

/* A training small enough to finish in well under a second even under the sanitizers: a byte-level
 * corpus (256 tokens, uploaded at start) keeps the output layer small; the GPT-2 vocabulary of the
 * built-in corpus makes each step a few hundred times dearer. */
#define CORPUS "tinybytes"
#define TINY                                                                                                           \
    "--steps", "20", "--d-model", "32", "--n-head", "2", "--n-layer", "1", "--seq-len", "16", "--batch", "4",          \
        "--corpus", CORPUS, "--eval-every", "10", "--eval-batches", "1"

/* Runs attnlab against srv: attnlab --server URL args... */
static int cl(client_result *r, double timeout_s, const char *const *args) {
    const char *full[64] = {"--server", srv.base_url};
    int n = 2;
    for (int i = 0; args[i] && n < 63; i++) full[n++] = args[i];
    full[n] = NULL;
    return client_run(r, timeout_s, full);
}

#define CL(r, ...)                                                                                                     \
    do {                                                                                                               \
        const char *a_[] = {__VA_ARGS__, NULL};                                                                        \
        cl((r), 60, a_);                                                                                               \
    } while (0)

static long long first_id(const char *out) { return atoll(out); }

/* Uploads CORPUS (plain text, byte tokens) to s and waits until it has been tokenized. */
static int upload_corpus(harness_server *s, const char *auth_header) {
    static const char *const words[] = {"the ",    "whale ",      "rotates ",   "each ", "pair ",
                                        "of ",     "dimensions ", "by ",        "its ",  "position; ",
                                        "cosine ", "ignores ",    "magnitude. "};
    char text[12000];
    size_t n = 0;
    for (unsigned k = 0; n + 16 < sizeof text; k = k * 7 + 3) {
        const char *w = words[k % 13];
        memcpy(text + n, w, strlen(w));
        n += strlen(w);
    }
    const char *hdr[] = {"Content-Type: text/plain", auth_header, NULL};
    harness_response resp;
    if (harness_request(s, "POST", "/api/corpora?name=" CORPUS "&encoding=bytes", text, n, hdr, &resp) != 0) return -1;
    long st = resp.status;
    harness_response_free(&resp);
    if (st != 202 && st != 201 && st != 200) return -1;
    for (int i = 0; i < 400; i++) {
        if (harness_get(s, "/api/corpora/" CORPUS, &resp) == 0) {
            json_t *j = harness_json(&resp);
            harness_response_free(&resp);
            json_t *c = json_object_get(j, "corpus") ? json_object_get(j, "corpus") : j;
            const char *status = json_string_value(json_object_get(c, "status"));
            int ready = status && !strcmp(status, "ready"), failed = status && !strcmp(status, "failed");
            json_decref(j);
            if (ready) return 0;
            if (failed) return -1;
        }
        usleep(25000);
    }
    return -1;
}

TEST(health_and_unreachable_server) {
    client_result r;
    CL(&r, "health");
    CHECK_MSG(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, ": ok, version ") && strstr(r.out, "db ok, writes ok, disk ok"));
    CHECK_MSG(strstr(r.out, "\n  kernel path ") && strstr(r.out, ", default precision "), "%s", r.out);
    CL(&r, "--json", "health");
    json_t *j = json_loads(r.out, 0, NULL);
    CHECK(j && !strcmp(json_string_value(json_object_get(j, "status")), "ok"));
    json_decref(j);
    /* A port nobody listens on: a free one we just had the kernel pick, then closed. */
    harness_server gone;
    CHECK(harness_start(&gone, NULL, NULL) == 0);
    char url[64];
    snprintf(url, sizeof url, "%s", gone.base_url);
    harness_stop(&gone);
    const char *a[] = {"--server", url, "runs", "list", NULL};
    client_run(&r, 30, a);
    CHECK_EQ_INT(r.code, 3);
    CHECK_EQ_INT(count_lines(r.err), 1);
    CHECK_MSG(strstr(r.err, "attnlab: cannot reach http://127.0.0.1:"), "%s", r.err);
    CHECK_EQ_INT(r.out_len, 0);
    /* The environment names the server too; --server wins over it. */
    const char *b[] = {"health", NULL};
    client_keep_env = 1;
    setenv("ATTNLAB_SERVER", srv.base_url, 1);
    client_run(&r, 30, b);
    int env_ok = r.code == 0 && !strncmp(r.out, srv.base_url, strlen(srv.base_url));
    setenv("ATTNLAB_SERVER", "ftp://example", 1);
    client_run(&r, 30, b);
    int env_bad = r.code;
    const char *c[] = {"--server", srv.base_url, "health", NULL};
    client_run(&r, 30, c);
    int flag_wins = r.code;
    unsetenv("ATTNLAB_SERVER");
    client_keep_env = 0;
    CHECK(env_ok);
    CHECK_EQ_INT(env_bad, 2);
    CHECK_EQ_INT(flag_wins, 0);
}

TEST(usage_errors_and_help) {
    client_result r;
    CL(&r, "runs", "frobnicate");
    CHECK_EQ_INT(r.code, 2);
    CHECK_EQ_INT(count_lines(r.err), 1);
    CL(&r, "runs", "show", "abc");
    CHECK_EQ_INT(r.code, 2);
    CL(&r, "metrics", "1", "--format", "xml");
    CHECK_EQ_INT(r.code, 2);
    CL(&r, "runs", "start", "--steps", "many");
    CHECK_EQ_INT(r.code, 2);
    CHECK(strstr(r.err, "steps wants an integer"));
    CL(&r, "runs", "start", "--config", "/nonexistent/file.json");
    CHECK_EQ_INT(r.code, 2);
    CL(&r, "experiments", "start");
    CHECK_EQ_INT(r.code, 2);
    const char *h[] = {"--help", NULL};
    client_run(&r, 10, h);
    CHECK_EQ_INT(r.code, 0);
    CHECK(strstr(r.out, "exit status:") && strstr(r.out, "3  the server cannot be reached"));
    static const char *const cmds[] = {"health",  "runs",  "experiments", "watch",
                                       "metrics", "probe", "probes",      "corpora"};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        const char *a[] = {cmds[k], "--help", NULL};
        client_run(&r, 10, a);
        CHECK_MSG(r.code == 0 && strstr(r.out, "usage: attnlab") && strstr(r.out, "Exit status"), "%s --help: %s",
                  cmds[k], r.out);
    }
}

TEST(a_tiny_run_start_watch_show_list) {
    client_result r;
    CL(&r, "runs", "start", TINY, "--attention", "cosine_rope", "--name", "tiny", "--tag", "demo", "-q");
    CHECK_MSG(r.code == 0, "exit %d: %s", r.code, r.err);
    long long id = first_id(r.out);
    CHECK(id > 0);
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", id);
    CL(&r, "watch", ids, "--every", "0");
    CHECK_MSG(r.code == 0, "exit %d: %s / %s", r.code, r.err, r.out);
    char want[96];
    snprintf(want, sizeof want, "run %lld succeeded at step 20/20, loss ", id);
    CHECK_MSG(strstr(r.out, want), "%s", r.out);
    CHECK(strstr(r.out, "tau "));
    CHECK(!strstr(r.out, "\033["));
    /* Watching a finished run answers at once with the same verdict. */
    CL(&r, "watch", ids);
    CHECK_EQ_INT(r.code, 0);
    CHECK(strstr(r.out, want));

    CL(&r, "runs", "list");
    CHECK_EQ_INT(r.code, 0);
    CHECK_MSG(strstr(r.out, "ID  NAME") && strstr(r.out, "tiny") && strstr(r.out, "succeeded  20/20  cosine_rope"),
              "%s", r.out);
    CL(&r, "runs", "list", "--status", "succeeded", "--tag", "demo");
    CHECK(strstr(r.out, "tiny"));
    CL(&r, "runs", "list", "--status", "failed");
    CHECK_EQ_INT(r.code, 0);
    CHECK(!strstr(r.out, "tiny"));
    CL(&r, "runs", "list", "--status", "exploded");
    CHECK_EQ_INT(r.code, 4);
    CHECK_MSG(strstr(r.err, "field: status"), "%s", r.err);

    CL(&r, "runs", "show", ids);
    CHECK_EQ_INT(r.code, 0);
    CHECK_MSG(strstr(r.out, "status    succeeded") && strstr(r.out, "\nconfig\n") &&
                  strstr(r.out, "attention         cosine_rope") && strstr(r.out, "\nsummary\nKEY") &&
                  strstr(r.out, "tau.0.1"),
              "%s", r.out);
    CL(&r, "--json", "runs", "show", ids);
    json_t *j = json_loads(r.out, 0, NULL);
    CHECK(j);
    json_t *run = json_object_get(j, "run") ? json_object_get(j, "run") : j;
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "succeeded"));
    json_decref(j);

    /* Tags add up without duplicates; the note is replaced. */
    CL(&r, "runs", "tag", ids, "alpha", "demo");
    CHECK_EQ_INT(r.code, 0);
    CHECK_MSG(strstr(r.out, "tags: ") && strstr(r.out, "alpha") && strstr(r.out, "demo") &&
                  count_substr(r.out, ",") == 1,
              "%s", r.out);
    CL(&r, "runs", "tag", ids, "beta");
    CHECK_MSG(strstr(r.out, "alpha") && strstr(r.out, "beta") && strstr(r.out, "demo") && count_substr(r.out, ",") == 2,
              "%s", r.out);
    CL(&r, "runs", "note", ids, "first", "look:", "τ barely moves");
    CHECK_EQ_INT(r.code, 0);
    CHECK_MSG(strstr(r.out, "note: first look: τ barely moves"), "%s", r.out);
    CL(&r, "runs", "show", ids);
    CHECK(strstr(r.out, "note      first look: τ barely moves"));

    /* Metrics: aligned, CSV with one row per step, JSON, downsampled, filtered. */
    CL(&r, "metrics", ids, "--keys", "loss,tau.*", "--format", "csv");
    CHECK_EQ_INT(r.code, 0);
    CHECK_MSG(!strncmp(r.out, "step,loss,tau.0.0,tau.0.1\n1,", 28), "%s", r.out);
    CHECK_EQ_INT(count_lines(r.out), 21);
    CL(&r, "metrics", ids, "--keys", "loss", "--max-points", "4");
    CHECK_EQ_INT(r.code, 0);
    CHECK_MSG(count_lines(r.out) <= 6 && count_lines(r.out) >= 3 && strstr(r.out, "step     loss"), "%s", r.out);
    CL(&r, "metrics", ids, "--format", "json", "--keys", "val_loss");
    j = json_loads(r.out, 0, NULL);
    CHECK_MSG(j && json_object_get(json_object_get(j, "series"), "val_loss"), "%s", r.out);
    json_decref(j);

    /* Refusals: the server's message and field, exit 4. */
    CL(&r, "runs", "resume", ids);
    CHECK_EQ_INT(r.code, 4);
    CHECK_MSG(count_lines(r.err) == 1 && strstr(r.err, "HTTP 409"), "%s", r.err);
    CL(&r, "runs", "cancel", ids);
    CHECK_EQ_INT(r.code, 4);
    CHECK_MSG(count_lines(r.err) == 1 && strstr(r.err, "HTTP 409 conflict") && strstr(r.err, "(field: status)"), "%s",
              r.err);
    CL(&r, "runs", "show", "987654");
    CHECK_EQ_INT(r.code, 4);
    CHECK(strstr(r.err, "HTTP 404 not_found"));
    CL(&r, "runs", "start", TINY, "--n-head", "3");
    CHECK_EQ_INT(r.code, 4);
    CHECK_MSG(count_lines(r.err) == 1 && strstr(r.err, "HTTP 422") && strstr(r.err, "(field: config."), "%s", r.err);

    CL(&r, "runs", "delete", ids);
    CHECK_EQ_INT(r.code, 0);
    CHECK(strstr(r.out, "deleted"));
    CL(&r, "runs", "show", ids);
    CHECK_EQ_INT(r.code, 4);
}

TEST(cancel_watch_resume) {
    client_result r;
    CL(&r, "runs", "start", "--steps", "1000000", "--d-model", "32", "--n-head", "2", "--n-layer", "1", "--seq-len",
       "16", "--batch", "4", "--corpus", CORPUS, "--checkpoint-every", "5", "-q");
    CHECK_MSG(r.code == 0, "%s", r.err);
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", first_id(r.out));
    CL(&r, "runs", "cancel", ids);
    CHECK_MSG(r.code == 0 && strstr(r.out, "cancel requested"), "%d %s %s", r.code, r.out, r.err);
    CL(&r, "watch", ids);
    CHECK_MSG(r.code == 6, "exit %d: %s %s", r.code, r.out, r.err);
    CHECK(strstr(r.out, "cancelled at step"));
    CL(&r, "runs", "resume", ids);
    CHECK_MSG(r.code == 0 && strstr(r.out, "resumed"), "%d %s %s", r.code, r.out, r.err);
    CL(&r, "runs", "cancel", ids);
    CHECK_MSG(r.code == 0, "%s", r.err);
    CL(&r, "watch", ids);
    CHECK_EQ_INT(r.code, 6);
    CL(&r, "runs", "delete", ids);
    CHECK_EQ_INT(r.code, 0);
}

TEST(seed_blog_experiment_tiny) {
    client_result r;
    CL(&r, "experiments", "start", "--preset", "seed-blog", "--set", "steps=20", "--set", "d_model=32", "--set",
       "n_head=2", "--set", "n_layer=1", "--set", "seq_len=16", "--set", "batch=4", "--corpus", CORPUS, "-q");
    CHECK_MSG(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK_EQ_INT(count_lines(r.out), 2);
    char a[32], b[32];
    CHECK(sscanf(r.out, "%31s %31s", a, b) == 2);
    CL(&r, "watch", a);
    CHECK_MSG(r.code == 0, "%s %s", r.out, r.err);
    CL(&r, "watch", b);
    CHECK_MSG(r.code == 0, "%s %s", r.out, r.err);
    CL(&r, "experiments", "list");
    CHECK_MSG(r.code == 0 && strstr(r.out, "seed-blog") && strstr(r.out, "rope,cosine_rope"), "%s", r.out);
    long long eid = atoll(strchr(r.out, '\n') + 1);
    CHECK(eid > 0);
    char es[32];
    snprintf(es, sizeof es, "%lld", eid);
    CL(&r, "experiments", "show", es);
    CHECK_MSG(r.code == 0 && strstr(r.out, "seed-blog/rope") && strstr(r.out, "seed-blog/cosine_rope") &&
                  count_substr(r.out, "succeeded  20/20") == 2,
              "%s", r.out);
    CHECK_MSG(strstr(r.out, "\ncomparison\nVARIANT") && strstr(r.out, "final τ of run ") &&
                  strstr(r.out, "(cosine_rope), initial "),
              "%s", r.out);
    CL(&r, "--json", "experiments", "show", es);
    json_t *j = json_loads(r.out, 0, NULL);
    CHECK(j && json_array_size(json_object_get(j, "runs")) == 2);
    json_decref(j);
    CL(&r, "runs", "list", "--experiment", es);
    CHECK_EQ_INT(count_lines(r.out), 3);

    /* A base config from a file, varied on one key. */
    char path[300];
    snprintf(path, sizeof path, "%s/base.json", srv.data_dir);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("{\"steps\":5,\"d_model\":32,\"n_head\":2,\"n_layer\":1,\"seq_len\":16,\"batch\":4,\"corpus\":\"" CORPUS
          "\"}",
          f);
    fclose(f);
    CL(&r, "experiments", "start", "--base", path, "--vary", "attention=dot,cosine_rope", "--name", "dot-vs-cos");
    CHECK_MSG(r.code == 0, "%s", r.err);
    CHECK_MSG(strstr(r.out, "(dot-vs-cos)") && strstr(r.out, "(dot)") && strstr(r.out, "(cosine_rope)"), "%s", r.out);
    CL(&r, "experiments", "start", "--base", path, "--vary", "attention=dot,sideways");
    CHECK_EQ_INT(r.code, 4);
    CHECK_MSG(strstr(r.err, "field: "), "%s", r.err);
    CL(&r, "experiments", "show", "999");
    CHECK_EQ_INT(r.code, 4);
}

TEST(probes_tables_csv_json) {
    client_result r;
    CL(&r, "probe", "rope_invariance");
    CHECK_MSG(r.code == 0, "%s", r.err);
    CHECK_MSG(strstr(r.out, "probe rope_invariance (result ") &&
                  strstr(r.out, "== gap_scores ==\nstart    rotary  additive\n"),
              "%s", r.out);
    CL(&r, "probe", "rope_invariance", "--format", "csv", "--table", "gap_scores");
    CHECK_MSG(!strncmp(r.out, "start,rotary,additive\n3,", 24) && count_lines(r.out) == 5, "%s", r.out);
    CL(&r, "probe", "pair_turns", "--param", "d=8", "--param", "gaps=1,16,256", "--json");
    json_t *j = json_loads(r.out, 0, NULL);
    CHECK_MSG(j, "%s %s", r.out, r.err);
    json_t *p = json_object_get(j, "probe") ? json_object_get(j, "probe") : j;
    json_t *gaps = json_object_get(json_object_get(p, "params"), "gaps");
    CHECK(json_array_size(gaps) == 3 && json_integer_value(json_array_get(gaps, 2)) == 256);
    long long pid = json_integer_value(json_object_get(p, "id"));
    json_decref(j);
    CL(&r, "probe", "pair_turns", "--param", "d=7");
    CHECK_EQ_INT(r.code, 4);
    CHECK_MSG(strstr(r.err, "(field: params.d)"), "%s", r.err);
    CL(&r, "probe", "no_such_probe");
    CHECK_EQ_INT(r.code, 4);
    CL(&r, "probes", "list");
    CHECK_MSG(strstr(r.out, "rope_invariance") && strstr(r.out, "pair_turns") && strstr(r.out, "gaps=1,16,256"), "%s",
              r.out);
    char ps[32];
    snprintf(ps, sizeof ps, "%lld", pid);
    CL(&r, "probes", "show", ps, "--format", "csv");
    CHECK_MSG(r.code == 0 && strstr(r.out, "# "), "%s", r.out);
    CL(&r, "probes", "kinds");
    CHECK(strstr(r.out, "KIND") && strstr(r.out, "dephasing") && strstr(r.out, "attention_map      yes"));
    CL(&r, "probes", "kinds", "dephasing");
    CHECK(strstr(r.out, "offsets") && strstr(r.out, "int_list"));
    CL(&r, "corpora", "list");
    CHECK_MSG(r.code == 0 && strstr(r.out, "small") && strstr(r.out, "ready") && strstr(r.out, "gpt2"), "%s", r.out);
}

TEST(watch_on_a_terminal) {
    client_result r;
    /* A run that would go on for minutes, cancelled from elsewhere while the bar is drawn: the
     * outcome does not depend on how fast this machine trains. */
    CL(&r, "runs", "start", TINY, "--steps", "1000000", "-q");
    CHECK(r.code == 0);
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", first_id(r.out));
    pid_t canceller = fork();
    CHECK(canceller >= 0);
    if (canceller == 0) {
        usleep(800000);
        client_result rc;
        const char *a[] = {"--server", srv.base_url, "runs", "cancel", ids, NULL};
        client_run(&rc, 30, a);
        _exit(rc.code == 0 ? 0 : 1);
    }
    const char *a[] = {"--server", srv.base_url, "watch", ids, NULL};
    client_run_pty(&r, 60, 100, a);
    int st = 0;
    waitpid(canceller, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_MSG(r.code == 6, "exit %d: %s", r.code, r.out);
    CHECK_MSG(strstr(r.out, "\r") && strstr(r.out, "\033[K") && strstr(r.out, "/1000000") && strstr(r.out, "tok/s"),
              "%s", r.out);
    CHECK_MSG(strstr(r.out, "cancelled at step"), "%s", r.out);
}

TEST(token_is_sent_as_bearer) {
    harness_server locked;
    const char *extra[] = {"--token", "s3cret", NULL};
    CHECK(harness_start(&locked, NULL, extra) == 0);
    if (upload_corpus(&locked, "Authorization: Bearer s3cret") < 0) {
        harness_stop(&locked);
        CHECK_MSG(0, "could not upload the corpus with the token");
    }
    client_result r;
    const char *no[] = {"--server", locked.base_url, "runs", "start", TINY, NULL};
    client_run(&r, 30, no);
    int code_without = r.code;
    char err_without[512];
    snprintf(err_without, sizeof err_without, "%s", r.err);
    const char *yes[] = {"--server", locked.base_url, "--token", "s3cret", "runs", "start", TINY, "-q", NULL};
    client_run(&r, 30, yes);
    int code_with = r.code;
    const char *wrong[] = {"--server", locked.base_url, "--token", "nope", "runs", "list", NULL};
    client_result r2;
    client_run(&r2, 30, wrong);
    client_result r3;
    const char *env_yes[] = {"--server", locked.base_url, "runs", "start", TINY, "-q", NULL};
    client_keep_env = 1;
    setenv("ATTNLAB_TOKEN", "s3cret", 1);
    client_run(&r3, 30, env_yes);
    unsetenv("ATTNLAB_TOKEN");
    client_keep_env = 0;
    harness_stop(&locked);
    CHECK_MSG(r3.code == 0, "token from the environment: %d %s", r3.code, r3.err);
    CHECK_MSG(code_without == 4 && strstr(err_without, "HTTP 401"), "%d %s", code_without, err_without);
    CHECK_MSG(code_with == 0, "%d %s", code_with, r.err);
    CHECK(r2.code == 0 || r2.code == 4); /* reads may be open; a wrong token must not crash anything */
}

/* Names and notes from the server cannot drive the terminal or reorder what it shows (issue 23 item
 * 7): the client shows their control and bidi characters escaped, in lists, details and messages. */
TEST(escape_sequences_in_names_and_notes_stay_inert) {
    client_result r;
    CL(&r, "runs", "start", TINY, "--name", "\x1b]0;owned\x07\x1b[2Jevil\xe2\x80\xaetxt.exe", "--note",
       "line\rover\x1b[31m", "-q");
    CHECK_MSG(r.code == 0, "%s", r.out);
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", first_id(r.out));
    const char *const views[][4] = {{"runs", "list", NULL}, {"runs", "show", ids, NULL}, {"runs", "note", ids, NULL}};
    for (int v = 0; v < 3; v++) {
        if (v == 2) {
            CL(&r, "runs", "note", ids, "\x1b[5mblink\xe2\x80\xae");
        } else if (v == 1) {
            CL(&r, "runs", "show", ids);
        } else {
            CL(&r, "runs", "list");
        }
        CHECK_MSG(r.code == 0, "%s %s: exit %d", views[v][0], views[v][1], r.code);
        CHECK_MSG(!strchr(r.out, '\x1b') && !strchr(r.out, '\a') && !strchr(r.out, '\r') &&
                      !strstr(r.out, "\xe2\x80\xae"),
                  "%s %s let a control or bidi character through: %s", views[v][0], views[v][1], r.out);
    }
    CHECK_MSG(strstr(r.out, "\\x1B[5mblink\\u202E"), "the note was not shown escaped: %s", r.out);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const char *extra[] = {"--compute-threads", "2", NULL};
    server_ok = harness_start(&srv, NULL, extra) == 0;
    if (!server_ok) {
        printf("FAIL start_attnlabd: could not start %s\n", harness_attnlabd());
        return 1;
    }
    if (upload_corpus(&srv, NULL) < 0) {
        printf("FAIL upload_corpus: the byte-level corpus did not become ready\n");
        harness_dump_log(&srv);
        harness_stop(&srv);
        return 1;
    }
    RUN(health_and_unreachable_server);
    RUN(usage_errors_and_help);
    RUN(a_tiny_run_start_watch_show_list);
    RUN(cancel_watch_resume);
    RUN(seed_blog_experiment_tiny);
    RUN(probes_tables_csv_json);
    RUN(watch_on_a_terminal);
    RUN(token_is_sent_as_bearer);
    RUN(escape_sequences_in_names_and_notes_stay_inert);
    if (test_fail_count) harness_dump_log(&srv);
    harness_stop(&srv);
    return test_summary();
}
