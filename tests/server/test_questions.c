/* Issue 15 through the service: task corpora (kinds, generation, conflicts), runs on them logging
 * accuracy at every evaluation, the per-step head metrics, the experiment summaries (head spread
 * and accuracy, JSON and CSV, every figure recomputed from the runs' own series), the presets, and
 * the sparse_attention probe on a task run (validation window, loss per predictor). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/test.h"
#include "services/stats.h"

static harness_server srv;

#define TASK_RUN                                                                                                       \
    "\"corpus\":\"q-copy\",\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"seq_len\":32,\"batch\":4,\"steps\":12,"         \
    "\"eval_every\":4,\"eval_batches\":2,\"val_fraction\":0.1,\"threads\":1,\"lr\":0.003"

static json_t *get(const char *path, long *code) { return api_call(&srv, "GET", path, NULL, code); }

TEST(task_kinds_and_task_corpora) {
    long code;
    json_t *k = get("/api/task-kinds", &code);
    CHECK_EQ_INT(code, 200);
    CHECK_EQ_INT(json_array_size(json_object_get(k, "kinds")), 4);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(json_object_get(k, "kinds"), 0), "name")),
                  "copy_offset"));
    CHECK_EQ_INT(json_array_size(json_object_get(k, "fields")), 4);
    json_decref(k);
    const char *spec = "{\"name\":\"q-copy\",\"kind\":\"copy_offset\",\"vocab\":64,\"seq_len\":32,\"windows\":300,"
                       "\"params\":{\"len_min\":6,\"len_max\":10},\"offsets\":[1,2,4]}";
    json_t *c = api_call(&srv, "POST", "/api/task-corpora", spec, &code);
    CHECK_EQ_INT(code, 201);
    json_t *row = json_object_get(c, "corpus");
    CHECK(!strcmp(json_string_value(json_object_get(row, "tokenizer")), "task"));
    CHECK(!strcmp(json_string_value(json_object_get(row, "status")), "ready"));
    CHECK_EQ_INT(json_integer_value(json_object_get(row, "tokens")), 300 * 32 + 1);
    json_t *task = json_object_get(row, "task");
    CHECK_EQ_INT(json_integer_value(json_object_get(task, "vocab")), 64);
    CHECK_EQ_INT(json_array_size(json_object_get(task, "offsets")), 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(task, "params"), "len_min")), 6);
    json_decref(c);
    /* the same config again: nothing to do; another under the name: refused */
    c = api_call(&srv, "POST", "/api/task-corpora", spec, &code);
    CHECK_EQ_INT(code, 200);
    json_decref(c);
    c = api_call(&srv, "POST", "/api/task-corpora",
                 "{\"name\":\"q-copy\",\"kind\":\"induction\",\"seq_len\":32,\"params\":{\"len_max\":8}}", &code);
    CHECK_EQ_INT(code, 409);
    json_decref(c);
    static const struct {
        const char *body, *field;
        long code;
    } bad[] = {
        {"{\"name\":\"q-x\",\"kind\":\"nope\"}", "kind", 422},
        {"{\"name\":\"q-x\",\"kind\":\"induction\",\"params\":{\"len_min\":0}}", "params.len_min", 422},
        {"{\"name\":\"q-x\",\"kind\":\"induction\",\"params\":{\"pairs_min\":2}}", "params.pairs_min", 422},
        {"{\"name\":\"q-x\",\"kind\":\"induction\",\"vocab\":2000}", "vocab", 422},
        {"{\"name\":\"q-x\",\"kind\":\"induction\",\"windows\":1000000,\"seq_len\":4096}", "windows", 422},
        {"{\"name\":\"q-x\",\"kind\":\"induction\",\"offsets\":[1]}", "offsets", 422},
        {"{\"name\":\"q-x\",\"kind\":\"induction\",\"colour\":1}", "colour", 422},
        {"{\"name\":\"Bad Name\",\"kind\":\"induction\"}", "name", 422},
        {"{\"name\":\"small\",\"kind\":\"induction\"}", "name", 409},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = api_call(&srv, "POST", "/api/task-corpora", bad[i].body, &code);
        CHECK_MSG(code == bad[i].code, "%s: %ld", bad[i].body, code);
        CHECK_MSG(!strcmp(api_error_field(c), bad[i].field), "%s: field %s", bad[i].body, api_error_field(c));
        json_decref(c);
    }
    c = get("/api/corpora/q-copy", &code);
    CHECK_EQ_INT(code, 200);
    json_decref(c);
}

/* The last value of a run's series `key` and its step (-1: none). */
static double last_of(long long id, const char *key, int *step) {
    char path[128];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=%s", id, key);
    json_t *j = get(path, NULL);
    json_t *s = json_object_get(json_object_get(j, "series"), key);
    size_t n = json_array_size(json_object_get(s, "values"));
    double v = n ? json_number_value(json_array_get(json_object_get(s, "values"), n - 1)) : NAN;
    if (step) *step = n ? (int)json_integer_value(json_array_get(json_object_get(s, "steps"), n - 1)) : -1;
    json_decref(j);
    return v;
}

TEST(a_task_run_logs_accuracy_and_head_metrics) {
    long code;
    json_t *r = api_call(&srv, "POST", "/api/runs",
                         "{\"name\":\"acc\",\"config\":{" TASK_RUN ",\"attention\":\"cosine_rope\"}}", &code);
    CHECK_EQ_INT(code, 201);
    long long id = json_integer_value(json_object_get(json_object_get(r, "run"), "id"));
    json_decref(r);
    char *st = api_wait_status(&srv, id, "succeeded", 60000);
    CHECK_MSG(st && !strcmp(st, "succeeded"), "run ended %s", st ? st : "(timeout)");
    free(st);
    char path[128];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=acc,acc.*", id);
    json_t *m = get(path, &code);
    json_t *series = json_object_get(m, "series");
    json_t *acc = json_object_get(series, "acc");
    CHECK_EQ_INT(json_array_size(json_object_get(acc, "steps")), 3); /* steps 4, 8, 12 */
    CHECK(json_object_get(series, "acc.k1") && json_object_get(series, "acc.k2") && json_object_get(series, "acc.k4"));
    double a = json_number_value(json_array_get(json_object_get(acc, "values"), 2));
    CHECK(a >= 0 && a <= 1);
    json_decref(m);
    /* per head and per layer, every step */
    int step;
    double f = last_of(id, "entropy_frac.0.1", &step);
    CHECK(step == 12 && f > 0 && f <= 1.0001);
    double d = last_of(id, "distance.0.0", &step);
    CHECK(step == 12 && d >= 0 && d <= 31);
    double t0 = last_of(id, "tau.0.0", NULL), t1 = last_of(id, "tau.0.1", NULL);
    double ratio = last_of(id, "tau_ratio", &step);
    CHECK(step == 12);
    CHECK_NEAR(ratio, fmax(t0, t1) / fmin(t0, t1), 1e-6);
    CHECK_NEAR(last_of(id, "tau_ratio.0", NULL), ratio, 1e-9);
    CHECK_NEAR(last_of(id, "tau_std", NULL), fabs(t0 - t1) / 2, 1e-6);
    CHECK(isfinite(last_of(id, "entropy_frac_std", NULL)) && isfinite(last_of(id, "distance_std", NULL)));
    /* in the CSV too */
    harness_response csv;
    snprintf(path, sizeof path, "/api/runs/%lld/metrics.csv", id);
    CHECK(harness_get(&srv, path, &csv) == 0 && csv.status == 200);
    CHECK(strstr(csv.body, "acc.k4") && strstr(csv.body, "tau_ratio") && strstr(csv.body, "distance.0.1"));
    harness_response_free(&csv);

    /* the sparse_attention probe on it: no text tokenizer, so validation window 0, and the loss */
    char body[256];
    snprintf(body, sizeof body,
             "{\"kind\":\"sparse_attention\",\"run_id\":%lld,\"params\":{\"ks\":[1,4,32],"
             "\"max_tokens\":33}}",
             id);
    json_t *p = api_call(&srv, "POST", "/api/probes", body, &code);
    CHECK_MSG(code == 201, "probe answered %ld", code);
    json_t *res = json_object_get(json_object_get(p, "probe"), "result");
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(res, "summary"), "input")), "validation window 0"));
    json_t *loss = NULL;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(res, "tables"), i,
                       t) if (!strcmp(json_string_value(json_object_get(t, "name")), "loss")) loss = t;
    CHECK(loss != NULL);
    json_t *rows = json_object_get(loss, "rows");
    CHECK_EQ_INT(json_array_size(rows), 3);
    /* k = 32 keeps every key of the 32 scored positions: every predictor is dense */
    json_t *last = json_array_get(rows, 2);
    double dense = json_number_value(json_array_get(last, 1));
    for (size_t c = 2; c < json_array_size(last); c++) CHECK(json_number_value(json_array_get(last, c)) == dense);
    long long pid = json_integer_value(json_object_get(json_object_get(p, "probe"), "id"));
    json_decref(p);
    snprintf(path, sizeof path, "/api/probes/%lld/csv?table=loss", pid);
    CHECK(harness_get(&srv, path, &csv) == 0 && csv.status == 200);
    CHECK(!strncmp(csv.body, "k,dense,topk,lsh,hamming,unrotated,window", 41));
    harness_response_free(&csv);
    /* text cannot be read on a task run */
    snprintf(body, sizeof body, "{\"kind\":\"attention_map\",\"run_id\":%lld,\"params\":{\"text\":\"abc\"}}", id);
    p = api_call(&srv, "POST", "/api/probes", body, &code);
    CHECK_EQ_INT(code, 422);
    CHECK(!strcmp(api_error_field(p), "params.text"));
    json_decref(p);
}

/* Mean of a small array. */
static double mean(const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s / n;
}

static int str_is(const json_t *v, const char *want) {
    const char *s = json_string_value(v);
    return s && !strcmp(s, want);
}

TEST(experiment_summaries_recompute_from_the_runs) {
    long code;
    json_t *e = api_call(&srv, "POST", "/api/experiments",
                         "{\"name\":\"q\",\"replicates\":3,\"base\":{" TASK_RUN "},\"variants\":[{\"name\":\"rope\","
                         "\"config\":{\"attention\":\"rope\"}},{\"name\":\"cosine_rope\",\"config\":{\"attention\":"
                         "\"cosine_rope\"}}]}",
                         &code);
    CHECK_EQ_INT(code, 201);
    long long exp = json_integer_value(json_object_get(json_object_get(e, "experiment"), "id"));
    json_t *runs = json_object_get(e, "runs");
    CHECK_EQ_INT(json_array_size(runs), 6);
    long long ids[6];
    for (int i = 0; i < 6; i++) {
        ids[i] = json_integer_value(json_object_get(json_array_get(runs, (size_t)i), "id"));
        char *st = api_wait_status(&srv, ids[i], "succeeded", 120000);
        CHECK_MSG(st && !strcmp(st, "succeeded"), "run %lld ended %s", ids[i], st ? st : "(timeout)");
        free(st);
    }
    char path[128];
    snprintf(path, sizeof path, "/api/experiments/%lld/head-spread?at=4", exp);
    json_t *hs = get(path, &code);
    CHECK_EQ_INT(code, 200);
    json_t *a = json_object_get(hs, "head_spread");
    CHECK_EQ_INT(json_integer_value(json_object_get(a, "at_step")), 4);
    json_t *vs = json_object_get(a, "variants");
    CHECK_EQ_INT(json_array_size(vs), 2);
    json_t *rope = json_array_get(vs, 0), *cos = json_array_get(vs, 1);
    CHECK(!json_is_true(json_object_get(rope, "learned_scale")) && json_is_true(json_object_get(cos, "learned_scale")));
    CHECK(!json_object_get(json_object_get(rope, "metrics"), "tau_ratio")); /* rope has no tau */
    CHECK(json_object_get(json_object_get(rope, "metrics"), "entropy_frac_std"));
    /* the cosine_rope runs' tau_ratio at the end and at step 4, recomputed from their series */
    double end[3], at[3];
    json_t *cruns = json_object_get(cos, "runs");
    CHECK_EQ_INT(json_array_size(cruns), 3);
    for (int i = 0; i < 3; i++) {
        long long id = json_integer_value(json_object_get(json_array_get(cruns, (size_t)i), "id"));
        end[i] = last_of(id, "tau_ratio", NULL);
        snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=tau_ratio", id);
        json_t *m = get(path, NULL);
        json_t *s = json_object_get(json_object_get(m, "series"), "tau_ratio");
        at[i] = NAN;
        for (size_t k = 0; k < json_array_size(json_object_get(s, "steps")); k++)
            if (json_integer_value(json_array_get(json_object_get(s, "steps"), k)) == 4)
                at[i] = json_number_value(json_array_get(json_object_get(s, "values"), k));
        json_decref(m);
        CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(cruns, (size_t)i), "replicate")), i);
    }
    json_t *tr = json_object_get(json_object_get(cos, "metrics"), "tau_ratio");
    CHECK_NEAR(json_number_value(json_object_get(json_object_get(tr, "end"), "mean")), mean(end, 3), 1e-9);
    CHECK_NEAR(json_number_value(json_object_get(json_object_get(tr, "at"), "mean")), mean(at, 3), 1e-9);
    double diff[3] = {end[0] - at[0], end[1] - at[1], end[2] - at[2]};
    json_t *chg = json_object_get(tr, "change");
    CHECK_NEAR(json_number_value(json_object_get(chg, "mean")), mean(diff, 3), 1e-9);
    CHECK_EQ_INT(json_integer_value(json_object_get(chg, "n")), 3);
    /* a spread's interval is the percentile bootstrap's (seed 1, 10000 resamples): within [0, max] */
    double m = mean(end, 3), blo, bhi;
    CHECK(stats_bootstrap_mean_ci(end, 3, 0.95, STATS_BOOTSTRAP_DEFAULT, 1, &blo, &bhi, NULL) == STATS_OK);
    json_t *tend = json_object_get(tr, "end"), *ci = json_object_get(tend, "ci");
    CHECK(str_is(json_object_get(tend, "ci_method"), "bootstrap"));
    CHECK_NEAR(json_number_value(json_array_get(ci, 0)), blo, 1e-12);
    CHECK_NEAR(json_number_value(json_array_get(ci, 1)), bhi, 1e-12);
    CHECK(blo >= 0 && blo <= m && m <= bhi);
    /* every interval of a spread stays >= 0 (a t interval of 3 values need not); a change is signed
     * and keeps its t interval */
    size_t vi;
    json_t *vv;
    json_array_foreach(vs, vi, vv) {
        const char *mk;
        json_t *mv;
        json_object_foreach(json_object_get(vv, "metrics"), mk, mv) {
            for (int p = 0; p < 2; p++) {
                json_t *sm = json_object_get(mv, p ? "end" : "at");
                json_t *lo = json_array_get(json_object_get(sm, "ci"), 0);
                CHECK_MSG(json_is_null(lo) || json_number_value(lo) >= 0, "%s %s ci below 0", mk, p ? "end" : "at");
                CHECK(str_is(json_object_get(sm, "ci_method"), "bootstrap"));
            }
            CHECK(str_is(json_object_get(json_object_get(mv, "change"), "ci_method"), "t"));
        }
    }
    CHECK_EQ_INT(json_array_size(json_object_get(a, "answer")), 2);
    CHECK(strstr(json_string_value(json_array_get(json_object_get(a, "answer"), 1)), "tau_ratio") != NULL);
    json_decref(hs);
    /* CSV: variant,attention,metric,point,... with the same mean */
    harness_response csv;
    snprintf(path, sizeof path, "/api/experiments/%lld/head-spread.csv?at=4", exp);
    CHECK(harness_get(&srv, path, &csv) == 0 && csv.status == 200);
    CHECK(!strncmp(csv.body, "variant,attention,metric,point,n,mean,std,ci_lo,ci_hi,p,ci_method\n", 65));
    CHECK(strstr(csv.body, ",bootstrap\n") != NULL && strstr(csv.body, ",t\n") != NULL);
    char want[160];
    snprintf(want, sizeof want, "cosine_rope,cosine_rope,tau_ratio,end,3,%.10g,", mean(end, 3));
    CHECK_MSG(strstr(csv.body, want) != NULL, "no '%s' in\n%s", want, csv.body);
    harness_response_free(&csv);

    /* accuracy: each run's last evaluation, summarised per variant */
    snprintf(path, sizeof path, "/api/experiments/%lld/accuracy", exp);
    json_t *ac = get(path, &code);
    CHECK_EQ_INT(code, 200);
    json_t *v0 = json_array_get(json_object_get(json_object_get(ac, "accuracy"), "variants"), 0);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(v0, "task"), "kind")), "copy_offset"));
    CHECK(!strcmp(json_string_value(json_array_get(json_object_get(v0, "keys"), 0)), "acc"));
    double accs[3];
    long succ = 0, trials = 0;
    for (int i = 0; i < 3; i++) {
        json_t *run = json_array_get(json_object_get(v0, "runs"), (size_t)i);
        int step, nstep;
        long long rid = json_integer_value(json_object_get(run, "id"));
        accs[i] = last_of(rid, "acc", &step);
        CHECK_EQ_INT(json_integer_value(json_object_get(run, "eval_step")), step);
        /* acc_n: the answers acc counted, logged with it; acc * acc_n is a whole number */
        double n_ans = last_of(rid, "acc_n", &nstep);
        CHECK(nstep == step && n_ans >= 1 && n_ans == floor(n_ans));
        CHECK_EQ_INT(json_integer_value(json_object_get(run, "answers")), (long long)n_ans);
        CHECK_NEAR(accs[i] * n_ans, round(accs[i] * n_ans), 1e-6);
        succ += lround(accs[i] * n_ans);
        trials += (long)n_ans;
    }
    json_t *acc0 = json_object_get(json_object_get(v0, "acc"), "acc");
    CHECK_NEAR(json_number_value(json_object_get(acc0, "mean")), mean(accs, 3), 1e-12);
    /* an accuracy's interval is the percentile bootstrap's, inside [0, 1] */
    CHECK(str_is(json_object_get(acc0, "ci_method"), "bootstrap"));
    CHECK(stats_bootstrap_mean_ci(accs, 3, 0.95, STATS_BOOTSTRAP_DEFAULT, 1, &blo, &bhi, NULL) == STATS_OK);
    CHECK_NEAR(json_number_value(json_array_get(json_object_get(acc0, "ci"), 0)), blo, 1e-12);
    CHECK_NEAR(json_number_value(json_array_get(json_object_get(acc0, "ci"), 1)), bhi, 1e-12);
    CHECK(blo >= 0 && bhi <= 1);
    /* and the Wilson interval of the pooled answers */
    double wlo, whi;
    CHECK(stats_wilson(succ, trials, 0.95, &wlo, &whi) == STATS_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(acc0, "answers")), trials);
    CHECK_NEAR(json_number_value(json_array_get(json_object_get(acc0, "wilson_ci"), 0)), wlo, 1e-12);
    CHECK_NEAR(json_number_value(json_array_get(json_object_get(acc0, "wilson_ci"), 1)), whi, 1e-12);
    CHECK(wlo >= 0 && whi <= 1 && wlo <= (double)succ / trials && (double)succ / trials <= whi);
    json_decref(ac);
    snprintf(path, sizeof path, "/api/experiments/%lld/accuracy.csv", exp);
    CHECK(harness_get(&srv, path, &csv) == 0 && csv.status == 200);
    CHECK(!strncmp(csv.body,
                   "variant,attention,corpus,task,key,n,mean,std,ci_lo,ci_hi,ci_method,answers,wilson_lo,wilson_hi\n",
                   95));
    CHECK(strstr(csv.body, "rope,rope,q-copy,copy_offset,acc.k4,3,") != NULL);
    harness_response_free(&csv);
    json_decref(e);
    /* without at: step 2000, or a fifth of runs that stop short of it (12 steps: 2) */
    snprintf(path, sizeof path, "/api/experiments/%lld/head-spread", exp);
    hs = get(path, &code);
    CHECK_EQ_INT(code, 200);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(hs, "head_spread"), "at_step")), 2);
    json_decref(hs);
    /* unknown experiment, bad at */
    json_t *x = get("/api/experiments/999/head-spread", &code);
    CHECK_EQ_INT(code, 404);
    json_decref(x);
    snprintf(path, sizeof path, "/api/experiments/%lld/head-spread?at=0", exp);
    x = get(path, &code);
    CHECK_EQ_INT(code, 422);
    CHECK(!strcmp(api_error_field(x), "at"));
    json_decref(x);
}

/* loss_on answers needs answer positions: on a corpus without them the run is refused up front,
 * naming the field. */
TEST(loss_on_answers_needs_a_task_corpus) {
    long code;
    json_t *x =
        api_call(&srv, "POST", "/api/runs", "{\"config\":{\"corpus\":\"small\",\"loss_on\":\"answers\"}}", &code);
    CHECK_EQ_INT(code, 422);
    CHECK_MSG(!strcmp(api_error_field(x), "config.loss_on"), "field %s", api_error_field(x));
    json_decref(x);
    x = api_call(&srv, "POST", "/api/runs", "{\"config\":{\"corpus\":\"small\",\"loss_on\":\"some\"}}", &code);
    CHECK_EQ_INT(code, 422);
    CHECK(!strcmp(api_error_field(x), "config.loss_on"));
    json_decref(x);
}

TEST(presets_for_the_open_questions) {
    long code;
    json_t *p = get("/api/presets", &code);
    CHECK_EQ_INT(code, 200);
    json_t *tl = NULL, *pp = NULL;
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(p, "presets"), i, x) {
        const char *n = json_string_value(json_object_get(x, "name"));
        if (!strcmp(n, "tau-long")) tl = x;
        if (!strcmp(n, "positional-precision")) pp = x;
    }
    CHECK(tl && pp);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(tl, "base"), "steps")), 10000);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(tl, "base"), "checkpoint_every")), 500);
    CHECK(json_integer_value(json_object_get(tl, "replicates")) >= 3);
    CHECK_EQ_INT(json_array_size(json_object_get(pp, "variants")), 16);
    /* the fourth arm of each task: the cosine with a learned log scale from 10 */
    json_t *arm = json_object_get(json_array_get(json_object_get(pp, "variants"), 3), "config");
    CHECK(!strcmp(json_string_value(json_object_get(arm, "attention")), "cosine_rope_scale"));
    CHECK(json_number_value(json_object_get(arm, "scale_init")) == 10);
    CHECK(!strcmp(json_string_value(json_object_get(arm, "scale_param")), "log"));
    CHECK(json_integer_value(json_object_get(pp, "replicates")) >= 2);
    /* the loss on the answers only (the runs below would fail if their corpora had none) */
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(pp, "base"), "loss_on")), "answers"));
    json_decref(p);
    /* positional-precision makes its corpora and queues one run per task, attention and replicate */
    json_t *e = api_call(&srv, "POST", "/api/experiments",
                         "{\"preset\":\"positional-precision\",\"replicates\":1,\"overrides\":{\"steps\":2,"
                         "\"eval_every\":2,\"n_layer\":1,\"d_model\":16,\"batch\":2,\"threads\":1}}",
                         &code);
    CHECK_MSG(code == 201, "preset answered %ld", code);
    CHECK_EQ_INT(json_array_size(json_object_get(e, "runs")), 16);
    static const char *const corpora[] = {"pp-copy_offset", "pp-induction", "pp-associative_recall",
                                          "pp-relative_order"};
    for (int c = 0; c < 4; c++) {
        char path[96];
        snprintf(path, sizeof path, "/api/corpora/%s", corpora[c]);
        json_t *row = get(path, &code);
        CHECK_MSG(code == 200, "%s: %ld", corpora[c], code);
        CHECK(!strcmp(json_string_value(json_object_get(json_object_get(row, "corpus"), "tokenizer")), "task"));
        json_decref(row);
    }
    long long last = json_integer_value(json_object_get(json_array_get(json_object_get(e, "runs"), 15), "id"));
    char *st = api_wait_status(&srv, last, "succeeded", 180000);
    CHECK_MSG(st && !strcmp(st, "succeeded"), "last run ended %s", st ? st : "(timeout)");
    free(st);
    /* a second time: the corpora exist with the same config, nothing is regenerated */
    json_t *e2 = api_call(&srv, "POST", "/api/experiments",
                          "{\"preset\":\"positional-precision\",\"replicates\":1,\"overrides\":{\"steps\":1,"
                          "\"n_layer\":1,\"d_model\":16,\"batch\":2,\"threads\":1}}",
                          &code);
    CHECK_EQ_INT(code, 201);
    json_decref(e2);
    json_decref(e);
}

int main(void) {
    const char *args[] = {"--compute-threads", "2", "--train-workers", "2", NULL};
    if (harness_start(&srv, NULL, args) != 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        return 1;
    }
    RUN(task_kinds_and_task_corpora);
    RUN(a_task_run_logs_accuracy_and_head_metrics);
    RUN(experiment_summaries_recompute_from_the_runs);
    RUN(loss_on_answers_needs_a_task_corpus);
    RUN(presets_for_the_open_questions);
    if (test_fail_count) harness_dump_log(&srv);
    harness_stop(&srv);
    return test_summary();
}
