#include "jobs/jobs.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include "core/checkpoints.h"
#include "engine/train.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "core/run_config.h"
#include "core/provenance.h"
#include "core/run_status.h"
#include "store/store_nodes.h"
#include "util/json_text.h"

#define MAX_TRAIN_WORKERS 16
#define MAX_PROBE_QUEUE 256
/* per head: tau, entropy, entropy_frac, distance; per layer and overall: tau_std, tau_ratio; overall:
 * entropy_frac_std, distance_std */
#define MAX_POINTS_PER_STEP (8 + 4 * 64 * 24 + 2 * 24 + 4)
/* How long metrics may fail to be stored (kept and retried meanwhile) before a run stops. */
#define METRICS_GRACE_S 10.0

/* A training in progress: what the API shows live and what cancel flips. */
typedef struct {
    long long run_id; /* 0: idle slot */
    atomic_int cancel;
    long total_steps;
    long step;
    double tokens_per_s, step_ms_avg, eta_s;
    double wall_start;
    long long lease; /* the lease token of a run claimed from the shared queue; 0 for a local one */
} live_run;

typedef struct probe_task {
    void (*fn)(void *);
    void *ctx;
    int *done; /* for jobs_probe_call; guarded by the jobs lock */
    struct probe_task *next;
} probe_task;

struct jobs {
    jobs_config cfg;
    char data_dir[PATH_MAX];
    pthread_mutex_t lock;
    pthread_cond_t train_cv, probe_cv, probe_done_cv;
    long long *queue; /* run ids, FIFO ring */
    int q_head, q_len, q_cap;
    live_run live[MAX_TRAIN_WORKERS];
    probe_task *probe_head, *probe_tail;
    int probe_len;
    int stopping;
    pthread_t train_threads[MAX_TRAIN_WORKERS];
    pthread_t *probe_threads;
    int n_train, n_probe;
};

static double wall_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

void jobs_run_dir(const jobs *j, long long run_id, char *buf, size_t len) {
    snprintf(buf, len, "%s/runs/%lld", j->data_dir, run_id);
}

void jobs_run_checkpoint(const jobs *j, long long run_id, char *buf, size_t len) {
    snprintf(buf, len, "%s/runs/%lld/checkpoint.safetensors", j->data_dir, run_id);
}

int jobs_compute_threads(const jobs *j) { return j->cfg.compute_threads; }

int jobs_threads_per_run(jobs *j, int together) {
    int workers = j->cfg.train_workers > 0 ? j->cfg.train_workers : 1, at_once = workers;
    if (together < workers) { /* a lone run takes what the runs already there leave it */
        int queued, running;
        double tps;
        jobs_stats(j, &queued, &running, &tps);
        at_once = together + queued + running;
        if (at_once > workers) at_once = workers;
        if (at_once < 1) at_once = 1;
    }
    int t = j->cfg.compute_threads / at_once;
    return t > 0 ? t : 1;
}

/* ---- the training callbacks --------------------------------------------------------------- */

typedef struct {
    jobs *j;
    live_run *live;
    long long run_id;
    int learned_scale;                                 /* the variant learns its score scale: tau.L.H is recorded */
    char staging[PATH_MAX + 48], final[PATH_MAX + 48]; /* its checkpoint (checkpoints.h) */
    char failure[512]; /* set when what it reports cannot be kept: the run stops and fails */
    store_metric points[MAX_POINTS_PER_STEP];
    char keys[MAX_POINTS_PER_STEP][32]; /* points[i].key: the keys a trained run records are short */
} train_ctx;

/* Stops the run (at its next should_stop) with this reason, unless one is set already. Called from
 * the training thread only. */
static void fail_run(train_ctx *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_run(train_ctx *t, const char *fmt, ...) {
    if (t->failure[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->failure, sizeof t->failure, fmt, ap);
    va_end(ap);
    log_error("run %lld: %s", t->run_id, t->failure);
}

static void add_point(train_ctx *t, int *n, long step, double wall, const char *key, double v) {
    if (*n >= MAX_POINTS_PER_STEP) return;
    char *copy = t->keys[*n];
    store_metric *p = &t->points[(*n)++];
    p->run_id = t->run_id;
    p->step = (int)step;
    snprintf(copy, sizeof t->keys[0], "%s", key);
    p->key = copy;
    p->value = v;
    p->wall_time = wall;
}

/* Sends the step's points to the writer (batched to SQLite) and the bus (live viewers). */
static void publish_points(train_ctx *t, int n, long step) {
    jobs *j = t->j;
    size_t refused = metrics_writer_push(j->cfg.writer, t->points, (size_t)n);
    if (refused)
        fail_run(t, "%zu metric points of step %ld could not be queued: the store is not keeping up", refused, step);
    /* Out of memory, the live stream misses this step (the points are queued to the store). */
    json_t *values = json_object();
    for (int i = 0; values && i < n; i++)
        if (json_object_set_new(values, t->points[i].key, json_real(t->points[i].value)) < 0) {
            json_decref(values);
            values = NULL;
        }
    pthread_mutex_lock(&j->lock);
    double eta = t->live->eta_s, tps = t->live->tokens_per_s;
    long total = t->live->total_steps;
    pthread_mutex_unlock(&j->lock);
    json_t *ev =
        json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:o}", "run_id", (json_int_t)t->run_id, "step", (json_int_t)step,
                  "total_steps", (json_int_t)total, "wall_time", n ? t->points[0].wall_time : wall_now(), "eta_s", eta,
                  "tokens_per_s", tps, "values", values);
    char *text = ev ? json_text_dumps(ev, JSON_COMPACT) : NULL;
    if (text) events_publish(j->cfg.events, t->run_id, "metrics", text);
    free(text);
    json_decref(ev);
}

static void on_step(void *ctx, const train_step_metrics *m) {
    train_ctx *t = ctx;
    jobs *j = t->j;
    double wall = wall_now();
    pthread_mutex_lock(&j->lock);
    live_run *l = t->live;
    l->step = m->step;
    l->tokens_per_s = m->tokens_per_s;
    /* The first steps include warm-up costs; an average over the recent ones predicts better. */
    l->step_ms_avg = l->step_ms_avg > 0 ? 0.9 * l->step_ms_avg + 0.1 * m->step_ms : m->step_ms;
    l->eta_s = (double)(l->total_steps - m->step) * l->step_ms_avg / 1000.0;
    pthread_mutex_unlock(&j->lock);

    int n = 0;
    char key[32];
    add_point(t, &n, m->step, wall, "loss", m->loss);
    add_point(t, &n, m->step, wall, "lr", m->lr);
    add_point(t, &n, m->step, wall, "grad_norm", m->grad_norm);
    add_point(t, &n, m->step, wall, "tokens_per_s", m->tokens_per_s);
    for (int l2 = 0; l2 < m->n_layer; l2++)
        for (int h = 0; h < m->n_head; h++) {
            int i = l2 * m->n_head + h;
            if (t->learned_scale) {
                snprintf(key, sizeof key, "tau.%d.%d", l2, h);
                add_point(t, &n, m->step, wall, key, m->tau[i]);
            }
            snprintf(key, sizeof key, "entropy.%d.%d", l2, h);
            add_point(t, &n, m->step, wall, key, m->entropy[i]);
            if (m->entropy_frac) {
                snprintf(key, sizeof key, "entropy_frac.%d.%d", l2, h);
                add_point(t, &n, m->step, wall, key, m->entropy_frac[i]);
            }
            if (m->distance) {
                snprintf(key, sizeof key, "distance.%d.%d", l2, h);
                add_point(t, &n, m->step, wall, key, m->distance[i]);
            }
        }
    /* how differently the heads attend: the spread of entropy_frac and distance over every head */
    if (m->entropy_frac && m->distance && m->n_layer * m->n_head > 0) {
        double sd, ratio;
        train_head_spread(m->entropy_frac, m->n_layer * m->n_head, &sd, &ratio);
        add_point(t, &n, m->step, wall, "entropy_frac_std", sd);
        train_head_spread(m->distance, m->n_layer * m->n_head, &sd, &ratio);
        add_point(t, &n, m->step, wall, "distance_std", sd);
    }
    /* how far the heads' temperatures have spread apart (the blog's first open question) */
    if (t->learned_scale && m->tau_std && m->tau_ratio) {
        for (int l2 = 0; l2 < m->n_layer; l2++) {
            snprintf(key, sizeof key, "tau_std.%d", l2);
            add_point(t, &n, m->step, wall, key, m->tau_std[l2]);
            snprintf(key, sizeof key, "tau_ratio.%d", l2);
            add_point(t, &n, m->step, wall, key, m->tau_ratio[l2]);
        }
        add_point(t, &n, m->step, wall, "tau_std", m->tau_std_all);
        add_point(t, &n, m->step, wall, "tau_ratio", m->tau_ratio_all);
    }
    publish_points(t, n, m->step);
    metrics_writer_progress(j->cfg.writer, t->run_id, (int)m->step, 0);
    /* Points that cannot be stored stay queued and are retried; a run does not go on for long
     * producing curves nobody can keep. */
    double failing_s;
    char why[256];
    if (metrics_writer_failing(j->cfg.writer, &failing_s, why, sizeof why) && failing_s > METRICS_GRACE_S)
        fail_run(t, "its metrics could not be stored for %.0f s: %s", failing_s, why);
}

static void on_eval(void *ctx, long step, double val_loss) {
    train_ctx *t = ctx;
    int n = 0;
    add_point(t, &n, step, wall_now(), "val_loss", val_loss);
    publish_points(t, n, step);
}

/* A task corpus's exact-match accuracy at this evaluation: acc and acc.<bucket>, and acc_n, how
 * many answers acc counts (for a binomial interval of it). */
static void on_eval_metrics(void *ctx, const train_eval_metrics *m) {
    train_ctx *t = ctx;
    if (m->n_acc < 1) return;
    int n = 0;
    double wall = wall_now();
    for (int i = 0; i < m->n_acc; i++) add_point(t, &n, m->step, wall, m->acc_keys[i], m->acc[i]);
    if (m->acc_counts) add_point(t, &n, m->step, wall, "acc_n", (double)m->acc_counts->total);
    publish_points(t, n, m->step);
}

/* How long the metrics writer may have been failing before a checkpoint fails its run (seconds). */
#define CHECKPOINT_GRACE_S 10.0

/* What the engine says of a run besides its metrics (a resume on another kernel path than the
 * checkpoint's): into the log with the run's id. */
static void on_notice(void *ctx, const char *message) {
    train_ctx *t = ctx;
    log_warn("run %lld: %s", t->run_id, message);
}

/* A resumed run continues after its checkpoint, so the metrics up to the checkpoint must be in the
 * store before the checkpoint takes its name: the engine wrote it at the staging name, and it is
 * sealed (recorded, then renamed; checkpoints.h) only once everything before it is stored. A kill
 * at any moment leaves either the previous checkpoint or this one, never one ahead of its metrics.
 * This is the one place where training waits for the writer: once per checkpoint, not per step. */
static void on_checkpoint(void *ctx, long step, const char *path) {
    train_ctx *t = ctx;
    jobs *j = t->j;
    (void)path; /* t->staging */
    metrics_writer_progress(j->cfg.writer, t->run_id, (int)step, 0);
    if (metrics_writer_flush(j->cfg.writer) < 0) {
        char why[256];
        double failing_s = 0;
        metrics_writer_failing(j->cfg.writer, &failing_s, why, sizeof why);
        if (failing_s < CHECKPOINT_GRACE_S) {
            /* The store is away for a moment (a database restarting, a disk filling then freed): the
             * points stay queued and training goes on; this checkpoint is not sealed, the last one
             * stays, and the next one tries again. */
            log_warn("run %lld: checkpoint at step %ld not sealed: its metrics are not stored yet (%s); the last "
                     "checkpoint stays",
                     t->run_id, step, why);
            return;
        }
        fail_run(t, "the metrics before its checkpoint at step %ld could not be stored: %s", step, why);
        return;
    }
    char err[PATH_MAX * 2 + 128];
    if (checkpoint_seal(j->cfg.store, j->data_dir, t->run_id, step, t->staging, t->final, err, sizeof err) < 0) {
        fail_run(t, "%s", err);
        return;
    }
    metrics_writer_progress(j->cfg.writer, t->run_id, (int)step, (int)step);
    /* Tests stop the process here, right after the rename, to show nothing is missing then. */
    const char *kill_at = getenv("ATTNLAB_TEST_KILL_AT_CHECKPOINT");
    if (kill_at && atol(kill_at) == step) raise(SIGKILL);
}

static int should_stop(void *ctx) {
    train_ctx *t = ctx;
    if (t->failure[0] || atomic_load(&t->live->cancel)) return 1;
    /* A claimed run stops when its lease is gone (another node continues it) or when a cancel
     * request reached this node (from any node). */
    int lost = 0, cancel = 0;
    if (t->live->lease && queue_check(t->j->cfg.queue, t->run_id, &lost, &cancel)) {
        if (cancel && !lost) atomic_store(&t->live->cancel, 1);
        return 1;
    }
    pthread_mutex_lock(&t->j->lock);
    int stop = t->j->stopping;
    pthread_mutex_unlock(&t->j->lock);
    return stop;
}

static const char *const FROM_QUEUED[] = {"queued", NULL};
static const char *const FROM_RUNNING[] = {"running", NULL};

/* For queue_claim and the waits below: the service is stopping. */
static int jobs_stopping(void *ctx);

/* Removes every "<dir>/" from msg in place: a run's error names its files relative to the data
 * directory, never by the server's absolute paths. */
static void scrub_dir(char *msg, const char *dir) {
    size_t dl = strlen(dir);
    if (!dl) return;
    for (char *p = msg; (p = strstr(p, dir));) {
        if (p[dl] != '/') {
            p += dl;
            continue;
        }
        memmove(p, p + dl + 1, strlen(p + dl + 1) + 1);
    }
}

/* Takes the run off the queue: read, and moved to running (a run claimed from the shared queue is
 * running already: the claim moved it). 0 with *run set, or -1 when there is nothing to train
 * (deleted or cancelled while queued, or unreadable: then marked failed here). */
static int run_begin(jobs *j, const live_run *live, long long run_id, json_t **run) {
    store_status got = store_run_get(j->cfg.store, run_id, run);
    if (got == STORE_NOT_FOUND) return -1; /* deleted while queued */
    if (got != STORE_OK) {
        /* It has left the queue: it must not stay queued with nobody to train it. */
        char why[300];
        snprintf(why, sizeof why, "the run could not be read: %s", store_last_error());
        log_error("run %lld: %s", run_id, why);
        if (store_run_transition(j->cfg.store, run_id, live->lease ? FROM_RUNNING : FROM_QUEUED, "failed", why) ==
            STORE_OK)
            run_status_publish(j->cfg.events, j->cfg.store, run_id);
        else
            log_error("run %lld: could not be marked failed either: %s", run_id, store_last_error());
        return -1;
    }
    if (!live->lease && store_run_transition(j->cfg.store, run_id, FROM_QUEUED, "running", NULL) != STORE_OK) {
        json_decref(*run); /* cancelled or deleted while queued */
        *run = NULL;
        return -1;
    }
    run_status_publish(j->cfg.events, j->cfg.store, run_id);
    return 0;
}

/* What one run trains from: read from its row by run_open, the files closed by train_one. */
typedef struct {
    const json_t *cfg; /* the run's stored config */
    const char *corpus_name;
    int vocab, threads;
    const char *resume;  /* the checkpoint training continues from; NULL: from the start */
    corpus *data;        /* the corpus's tokens */
    tasks_corpus *tasks; /* a task corpus's answer labels, for accuracy at every evaluation; or NULL */
} run_inputs;

/* Fills `in` from the run's row and opens what training reads: the run's folder, the checkpoint to
 * resume from, the corpus and its task labels. t is NULL when it could not be allocated. */
static engine_status run_open(jobs *j, train_ctx *t, long long run_id, const json_t *run, run_inputs *in,
                              engine_error *err) {
    in->cfg = json_object_get(run, "config");
    in->corpus_name = json_string_value(json_object_get(in->cfg, "corpus"));
    in->threads = (int)json_integer_value(json_object_get(in->cfg, "threads"));
    if (in->threads <= 0) in->threads = jobs_threads_per_run(j, 1);
    /* Admission refuses more; a run made before a restart with fewer threads computes the same
     * with fewer (training does not depend on the thread count). */
    if (in->threads > j->cfg.compute_threads) in->threads = j->cfg.compute_threads;
    char dir[PATH_MAX];
    jobs_run_dir(j, run_id, dir, sizeof dir);
    in->vocab = corpora_vocab(j->cfg.corpora, in->corpus_name);
    engine_status s;
    if (!t)
        s = engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    else if (in->vocab < 0)
        s = engine_fail(err, ENGINE_ERR_INVALID, "corpus '%s' is not available", in->corpus_name);
    else if (fs_mkdirs(dir) < 0)
        s = engine_fail(err, ENGINE_ERR_IO, "cannot create %s", dir);
    else if (checkpoint_choose(j->cfg.store, j->data_dir, run_id,
                               (int)json_integer_value(json_object_get(run, "checkpoint_step")), t->staging, t->final,
                               &in->resume, err->message, sizeof err->message) < 0)
        s = ENGINE_ERR_INVALID;
    else
        s = corpora_open(j->cfg.corpora, in->corpus_name, &in->data, err);
    if (s == ENGINE_OK) s = corpora_open_tasks(j->cfg.corpora, in->corpus_name, &in->tasks, err);
    return s;
}

/* Where the run's numbers come from (corpus, kernel path, precision), recorded before its first
 * step and again at a resume; a failure to record it is logged, not fatal. */
static void run_record_provenance(jobs *j, long long run_id, const char *corpus_name, const train_config *tc) {
    char tokens[4096];
    corpora_dir(j->cfg.corpora, corpus_name, tokens, sizeof tokens - 16);
    strcat(tokens, "/tokens.u16");
    json_t *origin = provenance_new(corpus_name, tokens, train_config_kernel_path(tc), precision_name(tc->precision));
    char *prov_text = origin ? json_dumps(origin, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!prov_text || store_run_set_provenance(j->cfg.store, run_id, prov_text) != STORE_OK)
        log_warn("run %lld: its provenance could not be recorded: %s", run_id,
                 prov_text ? store_last_error() : "out of memory");
    free(prov_text);
    json_decref(origin);
}

/* Trains the opened run until it ends, stops or fails, reporting through t's callbacks. */
static engine_status run_train(jobs *j, train_ctx *t, const run_inputs *in, engine_error *err) {
    train_config tc;
    run_config_to_train(in->cfg, in->vocab, &tc);
    tc.checkpoint_path = t->staging; /* sealed under its name by on_checkpoint */
    checkpoint_provenance prov;      /* the tokenizer and run in the checkpoint's metadata */
    checkpoint_provenance_fill(&prov, j->cfg.store, t->run_id, in->corpus_name);
    tc.meta_kv = prov.kv;
    tc.n_meta = prov.n;
    t->learned_scale = model_config_attention(&tc.model)->scale != ATTENTION_SCALE_FIXED;
    tc.tasks = in->tasks;
    pthread_mutex_lock(&j->lock);
    t->live->total_steps = tc.steps;
    t->live->wall_start = wall_now();
    pthread_mutex_unlock(&j->lock);
    train_callbacks cb = {.ctx = t,
                          .on_step = on_step,
                          .on_eval = on_eval,
                          .on_eval_metrics = on_eval_metrics,
                          .should_stop = should_stop,
                          .on_checkpoint = on_checkpoint,
                          .on_notice = on_notice};
    run_record_provenance(j, t->run_id, in->corpus_name, &tc);
    log_info("run %lld: training %s on '%s' with %d threads on kernel path %s%s", t->run_id,
             json_string_value(json_object_get(in->cfg, "attention")), in->corpus_name, in->threads,
             train_config_kernel_path(&tc), in->resume ? " (resuming from its checkpoint)" : "");
    return train_run(&tc, in->data, in->threads, in->resume, &cb, err);
}

/* Everything the run reported is stored before anyone is told it ended; what cannot be stored
 * fails the run (t->failure) rather than leaving a curve with a silent hole. A store away for a
 * moment at the end gets the same grace as at a checkpoint. */
static void run_flush(jobs *j, train_ctx *t) {
    int flushed = metrics_writer_flush(j->cfg.writer) == 0;
    for (double failing_s = 0; !flushed && !jobs_stopping(j);) {
        metrics_writer_failing(j->cfg.writer, &failing_s, NULL, 0);
        if (failing_s >= CHECKPOINT_GRACE_S) break;
        struct timespec half = {0, 500000000};
        nanosleep(&half, NULL);
        flushed = metrics_writer_flush(j->cfg.writer) == 0;
    }
    if (!flushed && t) {
        char why[256];
        metrics_writer_failing(j->cfg.writer, NULL, why, sizeof why);
        fail_run(t, "its metrics could not be stored: %s", why);
    }
}

/* The final status must reach the store, or the run would look alive for ever (a full disk, a
 * database away for a moment): retried every second until it is stored or the service stops.
 * A service that stops first leaves it "running", which the next start marks interrupted. */
static void run_store_final(jobs *j, long long run_id, const char *final, const char *error) {
    for (int attempt = 0;; attempt++) {
        store_status ts = store_run_transition(j->cfg.store, run_id, FROM_RUNNING, final, error);
        if (ts != STORE_ERROR) break; /* stored, or no longer running here (deleted, taken over) */
        if (attempt == 0)
            log_error("run %lld: its final status '%s' cannot be stored yet (retrying every second): %s", run_id, final,
                      store_last_error());
        if (jobs_stopping(j)) break;
        struct timespec one = {1, 0};
        nanosleep(&one, NULL);
        if (attempt > 0 && attempt % 60 == 0) log_warn("run %lld: still retrying its final status '%s'", run_id, final);
    }
}

/* The status a run ends with: a cancelled training was stopped by a cancel request, or by the
 * service stopping (interrupted: a resume continues it), or by what the engine saw (cancelled). */
static const char *final_status(engine_status s, int cancel_requested, int stopping) {
    if (s == ENGINE_OK) return "succeeded";
    if (s != ENGINE_ERR_CANCELLED) return "failed";
    return cancel_requested ? "cancelled" : stopping ? "interrupted" : "cancelled";
}

/* Trains one run from its stored config; every outcome ends in a final status (unless another node
 * has taken the run over, which then writes it). */
static void train_one(jobs *j, live_run *live, long long run_id) {
    json_t *run = NULL;
    if (run_begin(j, live, run_id, &run) < 0) return;
    train_ctx *t = calloc(1, sizeof *t);
    if (t) {
        t->j = j;
        t->live = live;
        t->run_id = run_id;
        checkpoint_paths(j->data_dir, run_id, t->staging, sizeof t->staging, t->final, sizeof t->final);
    }
    engine_error err = {0};
    run_inputs in = {0};
    engine_status s = run_open(j, t, run_id, run, &in, &err);
    if (s == ENGINE_OK) s = run_train(j, t, &in, &err);
    corpus_free(in.data);
    tasks_corpus_free(in.tasks);
    run_flush(j, t);
    if (t && t->failure[0] && (s == ENGINE_OK || s == ENGINE_ERR_CANCELLED))
        s = engine_fail(&err, ENGINE_ERR_IO, "%s", t->failure);

    int stopping = jobs_stopping(j), lost = 0;
    if (live->lease) queue_check(j->cfg.queue, run_id, &lost, NULL);
    if (lost) {
        /* Another node continues from the last checkpoint (or will, once it can claim the run):
         * this one writes nothing more about it. */
        log_warn("run %lld: stopped here: its lease is no longer this node's", run_id);
    } else {
        int no_error = s == ENGINE_OK || s == ENGINE_ERR_CANCELLED;
        const char *final = final_status(s, atomic_load(&live->cancel), stopping);
        scrub_dir(err.message, j->data_dir);
        run_store_final(j, run_id, final, no_error ? NULL : err.message);
        log_info("run %lld: %s%s%s", run_id, final, no_error ? "" : ": ", no_error ? "" : err.message);
        run_status_publish(j->cfg.events, j->cfg.store, run_id);
    }
    free(t);
    json_decref(run);
}

typedef struct {
    jobs *j;
    int slot;
} worker_arg;

/* For queue_claim: the service is stopping. */
static int jobs_stopping(void *ctx) {
    jobs *j = ctx;
    pthread_mutex_lock(&j->lock);
    int stop = j->stopping;
    pthread_mutex_unlock(&j->lock);
    return stop;
}

/* Training and probes yield to the API: a worker lowers its own thread's priority (nice steps;
 * training also SCHED_BATCH, which never preempts a waking thread), and the compute threads a run or a
 * probe starts from it inherit both. The HTTP threads keep nice 0 and SCHED_OTHER; the compute pool
 * of heavy requests sits between (http_compute.c, nice 5). Raising nice needs no privilege. */
#define TRAIN_NICE 10
#define PROBE_NICE 5

static void lower_priority(const char *name, int batch, int nice_value) {
    pthread_setname_np(pthread_self(), name);
    struct sched_param sp = {0};
    if (batch && pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp) != 0)
        log_debug("%s worker: SCHED_BATCH refused", name);
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice_value) < 0)
        log_debug("%s worker: setpriority refused", name);
}

static void *train_loop(void *arg) {
    lower_priority("attnlab-train", 1, TRAIN_NICE);
    worker_arg *wa = arg;
    jobs *j = wa->j;
    live_run *live = &j->live[wa->slot];
    free(wa);
    pthread_mutex_lock(&j->lock);
    for (;;) {
        long long id, lease = 0;
        if (j->cfg.queue) {
            pthread_mutex_unlock(&j->lock);
            store_lease l;
            int got = queue_claim(j->cfg.queue, &l, jobs_stopping, j);
            pthread_mutex_lock(&j->lock);
            if (!got) break;
            id = l.run_id;
            lease = l.token;
        } else {
            while (!j->stopping && j->q_len == 0) pthread_cond_wait(&j->train_cv, &j->lock);
            if (j->stopping) break;
            id = j->queue[j->q_head];
            j->q_head = (j->q_head + 1) % j->q_cap;
            j->q_len--;
        }
        live->run_id = id;
        live->lease = lease;
        atomic_store(&live->cancel, 0);
        live->step = 0;
        live->tokens_per_s = live->step_ms_avg = live->eta_s = 0;
        pthread_mutex_unlock(&j->lock);
        train_one(j, live, id);
        if (lease) queue_done(j->cfg.queue, id);
        pthread_mutex_lock(&j->lock);
        live->run_id = 0;
        live->lease = 0;
    }
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

static void *probe_loop(void *arg) {
    lower_priority("attnlab-probe", 0, PROBE_NICE);
    jobs *j = arg;
    pthread_mutex_lock(&j->lock);
    for (;;) {
        while (!j->stopping && !j->probe_head) pthread_cond_wait(&j->probe_cv, &j->lock);
        if (!j->probe_head) break; /* stopping with nothing left */
        probe_task *t = j->probe_head;
        j->probe_head = t->next;
        if (!j->probe_head) j->probe_tail = NULL;
        j->probe_len--;
        pthread_mutex_unlock(&j->lock);
        t->fn(t->ctx);
        pthread_mutex_lock(&j->lock);
        if (t->done) {
            *t->done = 1;
            pthread_cond_broadcast(&j->probe_done_cv);
        }
        free(t);
    }
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

jobs *jobs_start(const jobs_config *cfg) {
    jobs *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->cfg = *cfg;
    snprintf(j->data_dir, sizeof j->data_dir, "%s", cfg->data_dir);
    j->cfg.data_dir = j->data_dir;
    if (j->cfg.train_workers < 1 && !(store_shared(j->cfg.store) && j->cfg.train_workers == 0))
        j->cfg.train_workers = 1;
    if (j->cfg.train_workers > MAX_TRAIN_WORKERS) j->cfg.train_workers = MAX_TRAIN_WORKERS;
    if (j->cfg.probe_workers < 1) j->cfg.probe_workers = 1;
    if (j->cfg.compute_threads < 1) j->cfg.compute_threads = 1;
    if (j->cfg.max_queued < 1) j->cfg.max_queued = 64;
    j->q_cap = j->cfg.max_queued;
    j->queue = calloc((size_t)j->q_cap, sizeof *j->queue);
    j->probe_threads = calloc((size_t)j->cfg.probe_workers, sizeof *j->probe_threads);
    if (!j->queue || !j->probe_threads) {
        free(j->queue);
        free(j->probe_threads);
        free(j);
        return NULL;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->train_cv, NULL);
    pthread_cond_init(&j->probe_cv, NULL);
    pthread_cond_init(&j->probe_done_cv, NULL);
    for (int i = 0; i < j->cfg.train_workers; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) break;
        wa->j = j;
        wa->slot = i;
        if (pthread_create(&j->train_threads[i], NULL, train_loop, wa) != 0) {
            free(wa);
            break;
        }
        j->n_train++;
    }
    for (int i = 0; i < j->cfg.probe_workers; i++) {
        if (pthread_create(&j->probe_threads[i], NULL, probe_loop, j) != 0) break;
        j->n_probe++;
    }
    return j;
}

void jobs_stop(jobs *j) {
    if (!j) return;
    pthread_mutex_lock(&j->lock);
    j->stopping = 1;
    pthread_cond_broadcast(&j->train_cv);
    pthread_cond_broadcast(&j->probe_cv);
    pthread_mutex_unlock(&j->lock);
    if (j->cfg.queue) queue_wake(j->cfg.queue); /* workers waiting for a claim */
    for (int i = 0; i < j->n_train; i++) pthread_join(j->train_threads[i], NULL);
    for (int i = 0; i < j->n_probe; i++) pthread_join(j->probe_threads[i], NULL);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->train_cv);
    pthread_cond_destroy(&j->probe_cv);
    pthread_cond_destroy(&j->probe_done_cv);
    free(j->queue);
    free(j->probe_threads);
    free(j);
}

/* Queued runs in a shared store (all nodes'), or -1 when they cannot be counted. */
static int shared_queued(jobs *j) {
    json_t *counts = NULL;
    if (store_run_counts(j->cfg.store, &counts) != STORE_OK) return -1;
    int n = (int)json_integer_value(json_object_get(counts, "queued"));
    json_decref(counts);
    return n;
}

int jobs_max_queued(const jobs *j) { return j->cfg.max_queued; }

int jobs_queue_room(jobs *j) {
    if (store_shared(j->cfg.store)) {
        int queued = shared_queued(j);
        int room = queued < 0 ? 0 : j->cfg.max_queued - queued;
        return room > 0 ? room : 0;
    }
    pthread_mutex_lock(&j->lock);
    int room = j->stopping ? 0 : j->q_cap - j->q_len;
    pthread_mutex_unlock(&j->lock);
    return room;
}

int jobs_submit_run(jobs *j, long long run_id) { return jobs_submit_runs(j, &run_id, 1); }

/* The in-process queue's jobs_submit_run. */
static int submit_one_local(jobs *j, long long run_id) {
    pthread_mutex_lock(&j->lock);
    int ok = j->q_len < j->q_cap && !j->stopping;
    if (ok) {
        j->queue[(j->q_head + j->q_len) % j->q_cap] = run_id;
        j->q_len++;
        pthread_cond_signal(&j->train_cv);
    }
    pthread_mutex_unlock(&j->lock);
    return ok ? 0 : -1;
}

int jobs_submit_runs(jobs *j, const long long *run_ids, int n) {
    if (store_shared(j->cfg.store)) {
        /* The rows are queued in the shared store already (they are the queue): over the limit
         * they are refused (the caller takes them back); otherwise idle workers here are woken
         * (other nodes hear of them from the store). */
        int queued = shared_queued(j);
        if (n < 0 || queued < 0 || queued > j->cfg.max_queued || jobs_stopping(j)) return -1;
        if (j->cfg.queue) queue_wake(j->cfg.queue);
        return 0;
    }
    if (n == 1) return submit_one_local(j, run_ids[0]);
    pthread_mutex_lock(&j->lock);
    int ok = n >= 0 && j->q_len + n <= j->q_cap && !j->stopping;
    for (int i = 0; ok && i < n; i++) {
        j->queue[(j->q_head + j->q_len) % j->q_cap] = run_ids[i];
        j->q_len++;
    }
    if (ok && n > 0) pthread_cond_broadcast(&j->train_cv);
    pthread_mutex_unlock(&j->lock);
    return ok ? 0 : -1;
}

int jobs_cancel_run(jobs *j, long long run_id) {
    int found = 0;
    pthread_mutex_lock(&j->lock);
    for (int i = 0; i < j->n_train; i++)
        if (j->live[i].run_id == run_id) {
            atomic_store(&j->live[i].cancel, 1);
            found = 1;
        }
    pthread_mutex_unlock(&j->lock);
    /* Running on another node: the request goes through the store, and that node hears it. */
    if (!found && store_shared(j->cfg.store) && store_run_request_cancel(j->cfg.store, run_id) == STORE_OK) found = 1;
    return found;
}

json_t *jobs_run_live(jobs *j, long long run_id) {
    json_t *o = NULL;
    pthread_mutex_lock(&j->lock);
    for (int i = 0; i < j->n_train; i++) {
        live_run *l = &j->live[i];
        if (l->run_id != run_id) continue;
        o = json_pack("{s:I, s:I, s:f, s:f, s:b}", "step", (json_int_t)l->step, "total_steps",
                      (json_int_t)l->total_steps, "eta_s", l->eta_s, "tokens_per_s", l->tokens_per_s,
                      "cancel_requested", atomic_load(&l->cancel));
    }
    pthread_mutex_unlock(&j->lock);
    return o;
}

void jobs_stats(jobs *j, int *queued, int *running, double *tokens_per_s) {
    int shared = store_shared(j->cfg.store) ? shared_queued(j) : 0;
    pthread_mutex_lock(&j->lock);
    *queued = store_shared(j->cfg.store) ? (shared > 0 ? shared : 0) : j->q_len;
    *running = 0;
    *tokens_per_s = 0;
    for (int i = 0; i < j->n_train; i++)
        if (j->live[i].run_id) {
            (*running)++;
            *tokens_per_s += j->live[i].tokens_per_s;
        }
    pthread_mutex_unlock(&j->lock);
}

static int probe_enqueue(jobs *j, void (*fn)(void *), void *ctx, int *done) {
    probe_task *t = calloc(1, sizeof *t);
    if (!t) return -1;
    t->fn = fn;
    t->ctx = ctx;
    t->done = done;
    pthread_mutex_lock(&j->lock);
    if (j->probe_len >= MAX_PROBE_QUEUE || j->stopping) {
        pthread_mutex_unlock(&j->lock);
        free(t);
        return -1;
    }
    if (j->probe_tail)
        j->probe_tail->next = t;
    else
        j->probe_head = t;
    j->probe_tail = t;
    j->probe_len++;
    pthread_cond_signal(&j->probe_cv);
    pthread_mutex_unlock(&j->lock);
    return 0;
}

int jobs_probe_submit(jobs *j, void (*fn)(void *), void *ctx) { return probe_enqueue(j, fn, ctx, NULL); }

int jobs_probe_call(jobs *j, void (*fn)(void *), void *ctx) {
    int done = 0;
    if (probe_enqueue(j, fn, ctx, &done) < 0) return -1;
    pthread_mutex_lock(&j->lock);
    while (!done) pthread_cond_wait(&j->probe_done_cv, &j->lock);
    pthread_mutex_unlock(&j->lock);
    return 0;
}
