/* Recorded answers: a fixed script of API requests against a real attnlabd, and a fixed script of
 * store calls against both backends, each answer compared byte for byte with the one recorded in
 * tests/server/recorded/. A refactor that means to change no behaviour must leave them equal; a
 * change of behaviour that is meant shows here as a diff, and is recorded again on purpose:
 *
 *   ATTNLAB_RECORD=1 build/release/tests/server/test_recorded
 *
 * What cannot repeat is left out before comparing: clock readings (created_at, started_at,
 * finished_at, wall_time, duration_ms, uptime_s), the node a run ran on, the default precision
 * (measured when the process starts) and the figures training computes (they depend on the CPU's
 * kernels: the runs' briefs, last values and final temperatures). Everything
 * else — statuses, ids, configs as stored, error codes, messages and fields, orders, counts — is
 * compared, each answer written as the service writes JSON (json_text_dumps: reals in their
 * shortest round-trip form). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/metric_batches.h"
#include "../support/pg.h"
#include "../support/test.h"
#include "store/store.h"
#include "util/json_text.h"

#define RECORDED_DIR "tests/server/recorded"

/* Members whose values do not repeat from one run of the script to the next. */
static const char *const volatile_keys[] = {
    "created_at", "started_at", "finished_at", "wall_time", "wall_times", "duration_ms", "uptime_s", "last_heartbeat",
    "heartbeat_age_s", "disk_free_bytes", "version", "node",
    /* the CPU's: the default precision is measured at start; figures of training */
    "precision", "brief", "summary", "last", "final", "tokens_per_s", "step_ms",
    /* where a run was trained: the commit, the machine, its kernel path (test_provenance checks it) */
    "provenance", NULL};

/* The store's answers: only the clock readings (the figures are the test's own). */
static const char *const clock_keys[] = {"created_at", "started_at", "finished_at", "wall_time", NULL};

/* Drops the members named in keys (NULL-terminated) at any depth. */
static void drop_keys(json_t *v, const char *const *keys) {
    if (json_is_object(v)) {
        for (int i = 0; keys[i]; i++) json_object_del(v, keys[i]);
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) drop_keys(x, keys);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) drop_keys(x, keys);
    }
}

/* What a request that starts work answers depends on how far the work got meanwhile (a run may be
 * queued or already running, an upload tokenizing or already ready): those members are left out of
 * its answer (the answers after the wait show where the work ended). */
static const char *const racy_keys[] = {"status", "eta_s", "cancel_requested", "documents", "tokens", NULL};

/* The recorded lines, or the lines to record. */
typedef struct {
    int record;
    FILE *out;
    char **want;
    size_t n_want, at;
    int differ;
    const char *const *drop; /* members left out of every answer */
} recording;

static int recording_open(recording *r, const char *name, const char *const *drop) {
    memset(r, 0, sizeof *r);
    r->drop = drop;
    char path[256];
    snprintf(path, sizeof path, RECORDED_DIR "/%s", name);
    const char *rec = getenv("ATTNLAB_RECORD");
    r->record = rec && *rec && strcmp(rec, "0") != 0;
    if (r->record) {
        r->out = fopen(path, "w");
        if (!r->out) printf("# cannot write %s\n", path);
        return r->out ? 0 : -1;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("# cannot read %s (record it with ATTNLAB_RECORD=1)\n", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') line[len - 1] = 0;
        char **grown = realloc(r->want, (r->n_want + 1) * sizeof *grown);
        if (!grown) break;
        r->want = grown;
        r->want[r->n_want++] = strdup(line);
    }
    free(line);
    fclose(f);
    return 0;
}

/* Records or compares one answer: `what` names it, v is its JSON (stolen; NULL: none). */
static void recording_add(recording *r, const char *what, long status, json_t *v) {
    drop_keys(v, r->drop);
    json_t *line = json_pack("{s:s, s:I, s:o*}", "what", what, "status", (json_int_t)status, "answer", v);
    /* written as the service writes JSON (reals in their shortest round-trip form) */
    char *text = line ? json_text_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(line);
    if (!text) {
        r->differ++;
        return;
    }
    if (r->record) {
        if (r->out) fprintf(r->out, "%s\n", text);
    } else if (r->at >= r->n_want) {
        if (r->differ++ < 5) printf("# answer %zu is new: %s\n", r->at + 1, text);
    } else if (strcmp(r->want[r->at], text) != 0) {
        if (r->differ++ < 5)
            printf("# answer %zu differs:\n#   recorded: %s\n#   now:      %s\n", r->at + 1, r->want[r->at], text);
    }
    r->at++;
    free(text);
}

/* 0 when every recorded answer came again, and no other. */
static int recording_close(recording *r) {
    if (!r->record && r->at != r->n_want && r->differ++ < 5)
        printf("# %zu answers recorded, %zu given\n", r->n_want, r->at);
    if (r->out) fclose(r->out);
    for (size_t i = 0; i < r->n_want; i++) free(r->want[i]);
    free(r->want);
    return r->differ ? -1 : 0;
}

/* ---- the API script ----------------------------------------------------------------------------- */

#define TINY "{" TINY_CONFIG ",\"steps\":6}"

typedef struct {
    const char *method, *path, *body;
    long long wait_run;       /* then wait until this run has ended */
    const char *wait_corpus;  /* then wait until this corpus is no longer tokenizing */
    const char *content_type; /* NULL: application/json */
} step;

static const step script[] = {
    {.method = "GET", .path = "/api/corpora/small", .wait_corpus = "small"},
    {.method = "GET", .path = "/api/presets"},
    {.method = "GET", .path = "/api/probe-kinds"},
    {.method = "GET", .path = "/api/task-kinds"},
    {.method = "GET", .path = "/api/corpora"},
    {.method = "GET", .path = "/api/runs"},
    {.method = "GET", .path = "/api/experiments"},
    {.method = "GET", .path = "/api/probes"},
    {.method = "POST", .path = "/api/runs", .body = "{bad"},
    {.method = "POST", .path = "/api/runs", .body = "[]"},
    {.method = "POST", .path = "/api/runs", .body = "{\"cfg\":{}}"},
    {.method = "POST", .path = "/api/runs", .body = "{\"config\":{\"lr\":5}}"},
    {.method = "POST", .path = "/api/runs", .body = "{\"config\":{\"attention\":\"nope\"}}"},
    {.method = "POST", .path = "/api/runs", .body = "{\"config\":{\"corpus\":\"nope\"}}"},
    {.method = "POST", .path = "/api/runs", .body = "{\"config\":{\"n_layer\":1.5}}"},
    {.method = "POST", .path = "/api/runs", .body = "{\"config\":{\"loss_on\":\"answers\"}}"},
    {.method = "POST", .path = "/api/runs", .body = "{\"name\":7,\"config\":{}}"},
    {.method = "POST", .path = "/api/runs", .body = "{\"tags\":[1],\"config\":{}}"},
    {.method = "GET", .path = "/api/runs?sort=bogus"},
    {.method = "GET", .path = "/api/runs?config.nope=1"},
    {.method = "GET", .path = "/api/runs?config.lr=abc"},
    {.method = "GET", .path = "/api/runs?limit=-1"},
    {.method = "GET", .path = "/api/runs?status=nope"},
    {.method = "POST", .path = "/api/experiments", .body = "{\"preset\":\"nope\"}"},
    {.method = "POST", .path = "/api/experiments", .body = "{\"base\":{},\"variants\":[]}"},
    {.method = "POST", .path = "/api/experiments", .body = "{\"base\":{},\"grid\":{\"lr\":[1,2]}}"},
    {.method = "POST", .path = "/api/experiments", .body = "{\"base\":{},\"grid\":{\"nope\":[1,2]}}"},
    {.method = "POST", .path = "/api/experiments", .body = "{\"preset\":\"seed-blog\",\"replicates\":33}"},
    {.method = "POST", .path = "/api/task-corpora", .body = "{\"name\":\"Bad Name\",\"kind\":\"copy_offset\"}"},
    {.method = "POST", .path = "/api/task-corpora", .body = "{\"name\":\"t1\",\"kind\":\"nope\"}"},
    {.method = "POST", .path = "/api/task-corpora", .body = "{\"name\":\"t1\",\"kind\":\"copy_offset\",\"seq_len\":8}"},
    {.method = "POST",
     .path = "/api/task-corpora",
     .body = "{\"name\":\"t1\",\"kind\":\"copy_offset\",\"vocab\":5000}"},
    {.method = "POST", .path = "/api/task-corpora", .body = "{\"name\":\"t1\",\"kind\":\"induction\",\"windows\":0}"},
    {.method = "POST",
     .path = "/api/task-corpora",
     .body = "{\"name\":\"t1\",\"kind\":\"copy_offset\",\"params\":{\"len_min\":0}}"},
    {.method = "POST",
     .path = "/api/task-corpora",
     .body = "{\"name\":\"copy4\",\"kind\":\"copy_offset\",\"seq_len\":64,\"windows\":64,\"params\":{\"len_min\":8,"
             "\"len_max\":16},\"offsets\":[1,2,4]}"},
    {.method = "POST",
     .path = "/api/task-corpora",
     .body = "{\"name\":\"copy4\",\"kind\":\"copy_offset\",\"seq_len\":64,\"windows\":8}"},
    {.method = "GET", .path = "/api/corpora/copy4"},
    {.method = "POST",
     .path = "/api/corpora?name=Bad!&encoding=bytes",
     .body = "some text",
     .content_type = "text/plain"},
    {.method = "POST",
     .path = "/api/corpora?name=small&encoding=bytes",
     .body = "some text",
     .content_type = "text/plain"},
    {.method = "POST",
     .path = "/api/corpora?name=mine&encoding=nope",
     .body = "some text",
     .content_type = "text/plain"},
    {.method = "POST",
     .path = "/api/corpora?name=mine&encoding=bytes",
     .body =
         "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, and "
         "nothing particular to interest me on shore, I thought I would sail about a little and see the watery part of "
         "the world.",
     .wait_corpus = "mine",
     .content_type = "text/plain"},
    {.method = "GET", .path = "/api/corpora/mine"},
    {.method = "GET", .path = "/api/corpora/nope"},
    {.method = "POST",
     .path = "/api/runs",
     .body = "{\"name\":\"one\",\"tags\":[\"b\",\"a\"],\"note\":\"n\",\"config\":" TINY "}",
     .wait_run = 1},
    {.method = "GET", .path = "/api/runs/1"},
    {.method = "POST", .path = "/api/runs/1/resume"},
    {.method = "POST", .path = "/api/runs/1/cancel"},
    {.method = "PATCH", .path = "/api/runs/1", .body = "{\"name\":\"renamed\",\"tags\":[\"z\"],\"note\":\"m\"}"},
    {.method = "PATCH", .path = "/api/runs/1", .body = "{\"colour\":\"red\"}"},
    {.method = "GET", .path = "/api/runs?tag=z"},
    {.method = "GET", .path = "/api/runs?status=succeeded&sort=-name"},
    {.method = "GET", .path = "/api/runs/1/metrics?keys=nothing"},
    {.method = "GET", .path = "/api/runs/1/metrics?keys=lr&max_points=0"}, /* every point; lr: the same on any CPU */
    {.method = "GET", .path = "/api/runs/1/weights?optimizer=2"},
    {.method = "DELETE", .path = "/api/corpora/small"},
    {.method = "DELETE", .path = "/api/corpora/mine"},
    {.method = "DELETE", .path = "/api/corpora/mine"},
    {.method = "POST",
     .path = "/api/experiments",
     .body = "{\"name\":\"ab\",\"base\":" TINY ",\"variants\":[{\"name\":\"dot\",\"config\":{\"attention\":\"dot\"}},"
             "{\"name\":\"cos\",\"config\":{\"attention\":\"cosine_rope\"}}]}",
     .wait_run = 3},
    {.method = "GET", .path = "/api/experiments/1"},
    {.method = "GET", .path = "/api/experiments"},
    {.method = "GET", .path = "/api/runs?experiment=1&sort=name"},
    {.method = "GET", .path = "/api/runs?variant=cos"},
    {.method = "GET", .path = "/api/runs?config.attention=dot"},
    {.method = "GET", .path = "/api/experiments/9"},
    {.method = "DELETE", .path = "/api/runs/1"},
    {.method = "GET", .path = "/api/runs/1"},
    {.method = "DELETE", .path = "/api/runs/1"},
    {.method = "GET", .path = "/api/nope"},
    {.method = "PUT", .path = "/api/runs"},
};

/* Waits until GET path's object (under key) has a status other than `busy`. */
static void wait_not(harness_server *s, const char *path, const char *key, const char *busy1, const char *busy2) {
    for (int i = 0; i < 1500; i++) {
        json_t *j = api_call(s, "GET", path, NULL, NULL);
        const char *st = json_string_value(json_object_get(key ? json_object_get(j, key) : j, "status"));
        int done = st && strcmp(st, busy1) != 0 && (!busy2 || strcmp(st, busy2) != 0);
        json_decref(j);
        if (done) return;
        usleep(20 * 1000);
    }
}

TEST(api_answers_equal_the_recorded_ones) {
    recording rec;
    CHECK(recording_open(&rec, "api.jsonl", volatile_keys) == 0);
    harness_server s;
    const char *const args[] = {"--train-workers", "1", NULL};
    CHECK(harness_start(&s, NULL, args) == 0);
    for (size_t i = 0; i < sizeof script / sizeof script[0]; i++) {
        const step *t = &script[i];
        char ct[96];
        snprintf(ct, sizeof ct, "Content-Type: %s", t->content_type ? t->content_type : "application/json");
        const char *hdr[] = {ct, NULL};
        harness_response r;
        CHECK(harness_request(&s, t->method, t->path, t->body, t->body ? strlen(t->body) : 0, hdr, &r) == 0);
        json_t *j = harness_json(&r);
        if (!j && r.body) j = json_string(r.body);
        char what[600];
        snprintf(what, sizeof what, "%s %s%s%s", t->method, t->path, t->body ? " " : "", t->body ? t->body : "");
        long status = r.status;
        harness_response_free(&r);
        if (t->wait_corpus && !strcmp(t->wait_corpus, "small")) { /* the start: tokenized then */
            json_decref(j);
            wait_not(&s, t->path, "corpus", "tokenizing", NULL);
            j = api_call(&s, "GET", t->path, NULL, &status);
        }
        if (t->wait_run || t->wait_corpus) drop_keys(j, racy_keys);
        if (t->wait_run) {
            for (long long id = 1; id <= t->wait_run; id++) {
                char path[64];
                snprintf(path, sizeof path, "/api/runs/%lld", id);
                wait_not(&s, path, "run", "queued", "running");
            }
        }
        if (t->wait_corpus) {
            char path[128];
            snprintf(path, sizeof path, "/api/corpora/%s", t->wait_corpus);
            wait_not(&s, path, "corpus", "tokenizing", NULL);
        }
        recording_add(&rec, what, status, j);
    }
    int differ = recording_close(&rec);
    if (differ) harness_dump_log(&s);
    harness_stop(&s);
    CHECK_MSG(differ == 0, "the API's answers are not the recorded ones");
}

/* ---- the store script ----------------------------------------------------------------------------- */

static json_t *points_json(const store_metric *p, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_pack("{s:I, s:s, s:i, s:f}", "run", (json_int_t)p[i].run_id, "key", p[i].key,
                                           "step", p[i].step, "value", p[i].value));
    return a;
}

/* The same calls on a fresh store of either backend. */
static void store_script(store *st, recording *rec) {
    json_t *o = NULL;
    long long total = 0, id = 0;
    store_status s;
#define ANSWER(what, status, v) recording_add(rec, what, (long)(status), v)
    json_t *tags = json_pack("[s,s]", "b", "a");
    for (int i = 0; i < 4; i++) {
        char name[16], cfg[64];
        snprintf(name, sizeof name, "run-%c", "dcba"[i]);
        snprintf(cfg, sizeof cfg, "{\"lr\":%s,\"steps\":%d}", i % 2 ? "0.0003" : "3e-4", 5 + i);
        store_new_run nr = {.name = name,
                            .variant = i % 2 ? "rope" : "dot",
                            .note = "n",
                            .corpus = "small",
                            .config_json = cfg,
                            .seed = 7 + i,
                            .total_steps = 5 + i,
                            .tags = i < 2 ? tags : NULL};
        s = store_run_create(st, &nr, &id);
        ANSWER("run_create", s, json_integer(id));
    }
    json_decref(tags);
    s = store_run_get(st, 1, &o);
    ANSWER("run_get 1", s, o);
    s = store_run_get(st, 99, &o);
    ANSWER("run_get 99", s, o);
    static const char *const from_queued[] = {"queued", NULL}, *const from_running[] = {"running", NULL};
    ANSWER("transition 1 running", store_run_transition(st, 1, from_queued, "running", NULL), NULL);
    ANSWER("transition 1 again", store_run_transition(st, 1, from_queued, "running", NULL), NULL);
    ANSWER("transition 99", store_run_transition(st, 99, from_queued, "running", NULL), NULL);
    ANSWER("progress 1", store_run_progress(st, 1, 3, 2), NULL);
    ANSWER("progress 1 back", store_run_progress(st, 1, 4, 1), NULL);
    ANSWER("delete running", store_run_delete(st, 1), NULL);
    ANSWER("transition 1 failed", store_run_transition(st, 1, from_running, "failed", "boom"), NULL);
    ANSWER("transition 2 running", store_run_transition(st, 2, from_queued, "running", NULL), NULL);
    json_t *z = json_pack("[s]", "z");
    ANSWER("update 3", store_run_update(st, 3, "renamed", NULL, z), NULL);
    ANSWER("update 99", store_run_update(st, 99, "x", NULL, NULL), NULL);
    json_decref(z);
    /* Metric points: two runs, the random batches of the store tests (with -0 and 0 on SQLite only:
     * the backends order equal values differently, as store_summary.h says). */
    static series_model m;
    memset(&m, 0, sizeof m);
    m.run[0] = 1;
    m.run[1] = 3;
    store_metric pts[96];
    for (int b = 0; b < 30; b++) {
        size_t n = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], 0);
        s = store_metrics_insert(st, pts, n);
        if (s != STORE_OK) ANSWER("metrics_insert", s, json_integer(b));
    }
    store_metric extra = {.run_id = 999, .step = 1, .value = 1};
    extra.key = "loss";
    ANSWER("metrics_insert unknown run", store_metrics_insert(st, &extra, 1), NULL);
    for (long long r = 1; r <= 4; r += 1) {
        char what[64];
        store_metric *p = NULL;
        size_t n = 0;
        snprintf(what, sizeof what, "points %lld", r);
        s = store_metrics_points(st, r, "loss,tau.*", 3, &p, &n);
        ANSWER(what, s, points_json(p, n));
        free(p);
        snprintf(what, sizeof what, "metrics_summary %lld", r);
        s = store_metrics_summary(st, r, &o);
        ANSWER(what, s, o);
        /* (a brief is what the API drops as a training figure; here the figures are the batches') */
        snprintf(what, sizeof what, "run_brief %lld", r);
        s = store_run_brief(st, r, &o);
        ANSWER(what, s, json_pack("{s:o*}", "b", o));
    }
    long long page[] = {3, 2, 1, 99, 3};
    s = store_run_briefs(st, page, 5, &o);
    ANSWER("run_briefs", s, json_pack("{s:o*}", "b", o));
    static const char *const sorts[] = {NULL,   "id",    "-id",      "name",      "-name",        "status",
                                        "loss", "-loss", "val_loss", "-min_loss", "min_val_loss", "-created_at"};
    for (size_t i = 0; i < sizeof sorts / sizeof sorts[0]; i++) {
        store_run_filter f = {.sort = sorts[i], .limit = 3, .offset = i % 2};
        s = store_run_list(st, &f, &o, &total);
        char what[64];
        snprintf(what, sizeof what, "run_list sort=%s", sorts[i] ? sorts[i] : "");
        ANSWER(what, s, json_pack("{s:o*, s:I}", "runs", o, "total", (json_int_t)total));
    }
    store_run_filter filters[] = {
        {.status = "queued", .limit = 10},
        {.tag = "a", .limit = 10},
        {.variant = "rope", .limit = 10},
        {.status = "queued", .limit = 10, .offset = 5},
        {.config = {{"lr", "0.0003"}}, .n_config = 1, .limit = 10},
        {.config = {{"lr", "3e-4"}, {"steps", "6"}}, .n_config = 2, .limit = 10},
        {.config = {{"nope", "1"}}, .n_config = 1, .limit = 10},
    };
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++) {
        s = store_run_list(st, &filters[i], &o, &total);
        char what[64];
        snprintf(what, sizeof what, "run_list filter %zu", i);
        ANSWER(what, s, json_pack("{s:o*, s:I}", "runs", o, "total", (json_int_t)total));
    }
    s = store_run_counts(st, &o);
    ANSWER("run_counts", s, o);
    long long *ids = NULL;
    int n_ids = 0;
    s = store_runs_queued(st, &ids, &n_ids);
    json_t *q = json_array();
    for (int i = 0; i < n_ids; i++) json_array_append_new(q, json_integer(ids[i]));
    free(ids);
    ANSWER("runs_queued", s, q);
    ANSWER("interrupt_running", STORE_OK, json_integer(store_runs_interrupt_running(st)));
    s = store_run_get(st, 2, &o);
    ANSWER("run_get 2", s, o);

    store_new_run er[2] = {{.name = "e/0", .config_json = "{}", .seed = 1, .total_steps = 3, .replicate = 0},
                           {.name = "e/1", .config_json = "{}", .seed = 1, .total_steps = 3, .replicate = 1}};
    store_new_experiment e = {
        .name = "exp", .preset = "p", .base_json = "{\"a\":1}", .variants_json = "[{}]", .replicates = 2};
    long long eid = 0, rids[2] = {0};
    s = store_experiment_create(st, &e, er, 2, &eid, rids);
    ANSWER("experiment_create", s, json_pack("[I,I,I]", (json_int_t)eid, (json_int_t)rids[0], (json_int_t)rids[1]));
    s = store_experiment_get(st, eid, &o);
    ANSWER("experiment_get", s, o);
    s = store_experiment_list(st, 10, 0, NULL, &o, &total);
    ANSWER("experiment_list", s, json_pack("{s:o*, s:I}", "list", o, "total", (json_int_t)total));
    s = store_experiment_list(st, 10, 4, NULL, &o, &total);
    ANSWER("experiment_list past", s, json_pack("{s:o*, s:I}", "list", o, "total", (json_int_t)total));
    ANSWER("experiment_discard", store_experiment_discard(st, eid), NULL);
    ANSWER("experiment_discard again", store_experiment_discard(st, eid), NULL);

    store_corpus c = {.name = "mine", .source = "upload", .tokenizer = "bytes", .status = "tokenizing", .bytes = 10};
    ANSWER("corpus_create", store_corpus_create(st, &c), NULL);
    ANSWER("corpus_create again", store_corpus_create(st, &c), NULL);
    c.status = "ready";
    c.tokens = 10;
    c.documents = 1;
    ANSWER("corpus_put", store_corpus_put(st, &c), NULL);
    store_corpus t = {.name = "copy", .tokenizer = "task", .status = "ready", .task_json = "{\"kind\":\"copy\"}"};
    ANSWER("corpus_create task", store_corpus_create(st, &t), NULL);
    store_corpus b = {.name = "small", .tokenizer = "gpt2", .status = "ready", .builtin = 1, .tokens = 5};
    ANSWER("corpus_put builtin", store_corpus_put(st, &b), NULL);
    s = store_corpus_get(st, "mine", &o);
    ANSWER("corpus_get", s, o);
    s = store_corpus_get(st, "nope", &o);
    ANSWER("corpus_get nope", s, o);
    s = store_corpus_list(st, &o);
    ANSWER("corpus_list", s, o);
    ANSWER("corpus_delete small", store_corpus_delete(st, "small"), NULL);
    ANSWER("corpus_delete mine", store_corpus_delete(st, "mine"), NULL);
    ANSWER("corpus_delete mine again", store_corpus_delete(st, "mine"), NULL);
    int changed = -1;
    c.name = "other";
    c.status = "tokenizing";
    store_corpus_create(st, &c);
    s = store_corpora_fail_tokenizing(st, "stopped", &changed);
    ANSWER("corpora_fail_tokenizing", s, json_integer(changed));

    json_t *result =
        json_pack("{s:s, s:[{s:s, s:[s,s], s:[[i,f],[i,f]]}, {s:s, s:[s], s:[]}]}", "summary", "ok", "tables", "name",
                  "t", "columns", "a", "b", "rows", 1, 0.5, 3, 0.25, "name", "u", "columns", "c", "rows");
    store_new_probe p = {.kind = "k",
                         .params_json = "{\"x\":1}",
                         .cache_key = "ck",
                         .status = "succeeded",
                         .seed = 1,
                         .duration_ms = 1.5,
                         .result = result};
    s = store_probe_insert(st, &p, &id);
    ANSWER("probe_insert", s, json_integer(id));
    p.cache_key = "ck2";
    p.run_id = 2;
    s = store_probe_insert(st, &p, &id);
    ANSWER("probe_insert 2", s, json_integer(id));
    json_decref(result);
    s = store_probe_find(st, "k", "ck", &id);
    ANSWER("probe_find", s, json_integer(id));
    s = store_probe_find(st, "k", "nope", &id);
    ANSWER("probe_find nope", s, json_integer(id));
    s = store_probe_get(st, 1, &o);
    ANSWER("probe_get", s, o);
    s = store_probe_list(st, NULL, 10, 0, &o, &total);
    ANSWER("probe_list", s, json_pack("{s:o*, s:I}", "list", o, "total", (json_int_t)total));
    s = store_probe_list(st, "nope", 10, 0, &o, &total);
    ANSWER("probe_list nope", s, json_pack("{s:o*, s:I}", "list", o, "total", (json_int_t)total));
    s = store_probe_table(st, 1, "u", &o);
    ANSWER("probe_table u", s, o);
    s = store_probe_table(st, 1, NULL, &o);
    ANSWER("probe_table first", s, o);
    s = store_probe_table(st, 1, "nope", &o);
    ANSWER("probe_table nope", s, o);

    store_artifact a = {.path = "runs/2/checkpoint.safetensors",
                        .kind = "checkpoint",
                        .run_id = 2,
                        .step = 4,
                        .bytes = 10,
                        .sha256 = "ab"};
    ANSWER("artifact_put", store_artifact_put(st, &a), NULL);
    a.step = 8;
    ANSWER("artifact_put again", store_artifact_put(st, &a), NULL);
    s = store_artifact_get(st, a.path, &o);
    ANSWER("artifact_get", s, o);
    s = store_artifact_get(st, "nope", &o);
    ANSWER("artifact_get nope", s, o);
    ANSWER("delete 3", store_run_delete(st, 3), NULL);
    ANSWER("delete 3 again", store_run_delete(st, 3), NULL);
    s = store_run_counts(st, &o);
    ANSWER("run_counts end", s, o);
#undef ANSWER
}

static void store_answers(const char *file, store *st) {
    recording rec;
    if (recording_open(&rec, file, clock_keys) != 0) {
        test_fail_at(__FILE__, __LINE__, "no recording %s", file);
        return;
    }
    store_script(st, &rec);
    int differ = recording_close(&rec);
    CHECK_MSG(differ == 0, "the store's answers are not the recorded ones (%s)", file);
}

TEST(sqlite_store_answers_equal_the_recorded_ones) {
    char dir[256], path[320], err[256];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/store.db", dir);
    store *st = NULL;
    CHECK(store_open(&st, path, err, sizeof err) == STORE_OK);
    store_answers("store_sqlite.jsonl", st);
    store_close(st);
}

TEST(postgresql_store_answers_equal_the_recorded_ones) {
    char url[1024], err[512];
    CHECK(pgtest_new_db(url, sizeof url) == 0);
    store *st = NULL;
    CHECK(store_open(&st, url, err, sizeof err) == STORE_OK);
    store_answers("store_pg.jsonl", st);
    store_close(st);
}

int main(void) {
    RUN(sqlite_store_answers_equal_the_recorded_ones);
    RUN(postgresql_store_answers_equal_the_recorded_ones);
    RUN(api_answers_equal_the_recorded_ones);
    return test_summary();
}
