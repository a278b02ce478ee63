#include "jobs/metrics_writer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"

#define MAX_PROGRESS 64

typedef struct {
    long long run_id;
    int step, checkpoint_step;
} progress_entry;

/* The keys of queued points, each kept once for the writer's life: a queued point's key points
 * here (the producer's string is gone once push returns). The keys of trained runs are a bounded
 * set (names with layer and head numbers). Open addressing, a power-of-two table. */
typedef struct {
    char **slot;
    size_t cap, n;
} key_set;

static uint64_t key_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* key's copy in the set (added when new), or NULL when out of memory. */
static const char *key_intern(key_set *k, const char *key) {
    if ((k->n + 1) * 2 > k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 256;
        char **slot = calloc(cap, sizeof *slot);
        if (!slot) return NULL;
        for (size_t i = 0; i < k->cap; i++) {
            if (!k->slot[i]) continue;
            size_t j = key_hash(k->slot[i]) & (cap - 1);
            while (slot[j]) j = (j + 1) & (cap - 1);
            slot[j] = k->slot[i];
        }
        free(k->slot);
        k->slot = slot;
        k->cap = cap;
    }
    size_t j = key_hash(key) & (k->cap - 1);
    for (; k->slot[j]; j = (j + 1) & (k->cap - 1))
        if (!strcmp(k->slot[j], key)) return k->slot[j];
    if (!(k->slot[j] = strdup(key))) return NULL;
    k->n++;
    return k->slot[j];
}

static void key_set_free(key_set *k) {
    for (size_t i = 0; i < k->cap; i++) free(k->slot[i]);
    free(k->slot);
}

struct metrics_writer {
    store *st;
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    pthread_t thread;
    int interval_ms;
    size_t batch_points, max_points;
    store_metric *queue; /* oldest first; the writer removes a prefix once it is stored */
    size_t n, cap;
    key_set keys; /* the queued points' keys */
    progress_entry progress[MAX_PROGRESS];
    int n_progress;
    uint64_t flush_gen, written_gen; /* flush() asks for a write and waits for written_gen to reach it */
    uint64_t ok_gen;                 /* the last generation whose write succeeded */
    uint64_t dropped, failures;
    double failing_since; /* monotonic seconds of the first failure of the current streak; 0: none */
    char error[256];
    int stopping;
};

static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Stores n points and the progress entries; 0, or -1 with the reason in err. */
static int write_batch(metrics_writer *w, const store_metric *batch, size_t n, const progress_entry *prog, int n_prog,
                       char *err, size_t errlen) {
    if (n && store_metrics_insert(w->st, batch, n) != STORE_OK) {
        snprintf(err, errlen, "%s", store_last_error());
        return -1;
    }
    for (int i = 0; i < n_prog; i++)
        if (store_run_progress(w->st, prog[i].run_id, prog[i].step, prog[i].checkpoint_step) != STORE_OK) {
            snprintf(err, errlen, "%s", store_last_error());
            return -1;
        }
    return 0;
}

/* After a successful write: drops the stored prefix of the queue and the progress entries that
 * did not change meanwhile. Call with the lock held. */
static void forget_written(metrics_writer *w, size_t n, const progress_entry *prog, int n_prog) {
    if (w->n > n) memmove(w->queue, w->queue + n, (w->n - n) * sizeof *w->queue);
    w->n -= n;
    for (int i = 0; i < n_prog; i++)
        for (int k = 0; k < w->n_progress; k++) {
            progress_entry *e = &w->progress[k];
            if (e->run_id != prog[i].run_id) continue;
            if (e->step == prog[i].step && e->checkpoint_step == prog[i].checkpoint_step)
                *e = w->progress[--w->n_progress];
            break;
        }
}

static void *writer_loop(void *arg) {
    metrics_writer *w = arg;
    store_metric *batch = NULL;
    size_t batch_cap = 0;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        int failing = w->failing_since > 0;
        if (!w->stopping && (failing || w->n < w->batch_points) && w->written_gen >= w->flush_gen) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += (long)w->interval_ms * 1000000L;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&w->wake, &w->lock, &until);
        }
        /* Copy the queued points out so producers keep appending while we write; they leave
         * the queue only once stored. */
        size_t queued = w->n, n = queued;
        if (n > batch_cap) {
            store_metric *g = realloc(batch, n * sizeof *g);
            if (g) {
                batch = g;
                batch_cap = n;
            } else {
                n = batch_cap; /* out of memory: write what fits, the rest next time */
            }
        }
        if (n) memcpy(batch, w->queue, n * sizeof *batch);
        progress_entry prog[MAX_PROGRESS];
        int n_prog = w->n_progress;
        memcpy(prog, w->progress, (size_t)n_prog * sizeof *prog);
        uint64_t gen = w->flush_gen;
        int stopping = w->stopping;
        pthread_mutex_unlock(&w->lock);
        char err[256] = "";
        int rc = (n || n_prog) ? write_batch(w, batch, n, prog, n_prog, err, sizeof err) : 0;
        pthread_mutex_lock(&w->lock);
        if (rc == 0) {
            forget_written(w, n, prog, n_prog);
            if (w->failing_since > 0) log_info("metrics writer: the store takes writes again");
            w->failing_since = 0;
            w->error[0] = 0;
            if (n == queued) w->ok_gen = gen; /* everything queued when gen was asked for is stored */
        } else {
            w->failures++;
            if (w->failing_since == 0) {
                w->failing_since = mono_s();
                log_error("metrics writer: %zu points not stored yet (kept, trying again): %s", n, err);
            }
            snprintf(w->error, sizeof w->error, "%s", err);
        }
        w->written_gen = gen;
        pthread_cond_broadcast(&w->done);
        if (stopping) {
            if (w->n || w->n_progress)
                log_error("metrics writer: stopping with %zu metric points that could not be stored: %s", w->n,
                          w->error[0] ? w->error : "out of memory");
            break;
        }
    }
    pthread_mutex_unlock(&w->lock);
    free(batch);
    return NULL;
}

metrics_writer *metrics_writer_start(store *st, int interval_ms, size_t batch_points, size_t max_points) {
    metrics_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->st = st;
    w->interval_ms = interval_ms > 0 ? interval_ms : 1000;
    w->batch_points = batch_points ? batch_points : 4096;
    w->max_points = max_points ? max_points : 1u << 20;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->done, NULL);
    if (pthread_create(&w->thread, NULL, writer_loop, w) != 0) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->wake);
        pthread_cond_destroy(&w->done);
        free(w);
        return NULL;
    }
    return w;
}

void metrics_writer_stop(metrics_writer *w) {
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    if (w->dropped)
        log_warn("metrics writer refused %llu points in all (its queue was full)", (unsigned long long)w->dropped);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->done);
    free(w->queue);
    key_set_free(&w->keys);
    free(w);
}

size_t metrics_writer_push(metrics_writer *w, const store_metric *points, size_t n) {
    pthread_mutex_lock(&w->lock);
    size_t room = w->max_points > w->n ? w->max_points - w->n : 0;
    size_t take = n < room ? n : room;
    if (w->n + take > w->cap) {
        size_t cap = w->cap ? w->cap : 1024;
        while (cap < w->n + take) cap *= 2;
        store_metric *g = realloc(w->queue, cap * sizeof *g);
        if (!g) {
            take = 0;
        } else {
            w->queue = g;
            w->cap = cap;
        }
    }
    for (size_t i = 0; i < take; i++) {
        const char *key = key_intern(&w->keys, points[i].key);
        if (!key) { /* out of memory: the rest is refused */
            take = i;
            break;
        }
        w->queue[w->n + i] = points[i];
        w->queue[w->n + i].key = key;
    }
    w->n += take;
    w->dropped += n - take;
    if (w->n >= w->batch_points && w->failing_since == 0) pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    return n - take;
}

void metrics_writer_progress(metrics_writer *w, long long run_id, int step, int checkpoint_step) {
    pthread_mutex_lock(&w->lock);
    int i = 0;
    while (i < w->n_progress && w->progress[i].run_id != run_id) i++;
    if (i < MAX_PROGRESS) {
        if (i == w->n_progress) {
            w->n_progress++;
            w->progress[i].checkpoint_step = 0;
        }
        w->progress[i].run_id = run_id;
        w->progress[i].step = step;
        if (checkpoint_step > w->progress[i].checkpoint_step) w->progress[i].checkpoint_step = checkpoint_step;
    }
    pthread_mutex_unlock(&w->lock);
}

int metrics_writer_flush(metrics_writer *w) {
    pthread_mutex_lock(&w->lock);
    uint64_t want = ++w->flush_gen;
    pthread_cond_signal(&w->wake);
    while (w->written_gen < want) pthread_cond_wait(&w->done, &w->lock);
    int ok = w->ok_gen >= want;
    pthread_mutex_unlock(&w->lock);
    return ok ? 0 : -1;
}

int metrics_writer_failing(metrics_writer *w, double *seconds, char *err, size_t errlen) {
    pthread_mutex_lock(&w->lock);
    int failing = w->failing_since > 0;
    if (seconds) *seconds = failing ? mono_s() - w->failing_since : 0;
    if (err && errlen) snprintf(err, errlen, "%s", failing ? w->error : "");
    pthread_mutex_unlock(&w->lock);
    return failing;
}

uint64_t metrics_writer_dropped(metrics_writer *w) {
    pthread_mutex_lock(&w->lock);
    uint64_t d = w->dropped;
    pthread_mutex_unlock(&w->lock);
    return d;
}

uint64_t metrics_writer_failures(metrics_writer *w) {
    pthread_mutex_lock(&w->lock);
    uint64_t f = w->failures;
    pthread_mutex_unlock(&w->lock);
    return f;
}
