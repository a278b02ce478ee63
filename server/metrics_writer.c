#include "metrics_writer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define MAX_PROGRESS 64

typedef struct {
    long long run_id;
    int step, checkpoint_step;
} progress_entry;

struct metrics_writer {
    store *st;
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    pthread_t thread;
    int interval_ms;
    size_t batch_points, max_points;
    store_metric *queue; /* filled by producers */
    size_t n, cap;
    progress_entry progress[MAX_PROGRESS];
    int n_progress;
    uint64_t flush_gen, written_gen; /* flush() asks for a batch and waits for written_gen to reach it */
    uint64_t dropped;
    int stopping;
};

static void write_batch(metrics_writer *w, store_metric *batch, size_t n, progress_entry *prog, int n_prog) {
    if (n && store_metrics_insert(w->st, batch, n) != STORE_OK)
        log_error("metrics writer: %zu points lost: %s", n, store_last_error());
    for (int i = 0; i < n_prog; i++)
        store_run_progress(w->st, prog[i].run_id, prog[i].step, prog[i].checkpoint_step);
}

static void *writer_loop(void *arg) {
    metrics_writer *w = arg;
    store_metric *batch = NULL;
    size_t batch_cap = 0;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        if (!w->stopping && w->n < w->batch_points && w->written_gen >= w->flush_gen) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += (long)w->interval_ms * 1000000L;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&w->wake, &w->lock, &until);
        }
        /* Swap the queue out so producers keep appending while we write. */
        size_t n = w->n;
        if (n > batch_cap) {
            store_metric *g = realloc(batch, n * sizeof *g);
            if (g) {
                batch = g;
                batch_cap = n;
            } else {
                n = batch_cap;
            }
        }
        if (n) memcpy(batch, w->queue, n * sizeof *batch);
        if (w->n > n) memmove(w->queue, w->queue + n, (w->n - n) * sizeof *w->queue);
        w->n -= n;
        progress_entry prog[MAX_PROGRESS];
        int n_prog = w->n_progress;
        memcpy(prog, w->progress, (size_t)n_prog * sizeof *prog);
        w->n_progress = 0;
        uint64_t gen = w->flush_gen;
        int stop = w->stopping && w->n == 0;
        pthread_mutex_unlock(&w->lock);
        write_batch(w, batch, n, prog, n_prog);
        pthread_mutex_lock(&w->lock);
        w->written_gen = gen;
        pthread_cond_broadcast(&w->done);
        if (stop) break;
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
    if (w->dropped) log_warn("metrics writer dropped %llu points in all", (unsigned long long)w->dropped);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->done);
    free(w->queue);
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
    if (take) memcpy(w->queue + w->n, points, take * sizeof *points);
    w->n += take;
    w->dropped += n - take;
    if (w->n >= w->batch_points) pthread_cond_signal(&w->wake);
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

void metrics_writer_flush(metrics_writer *w) {
    pthread_mutex_lock(&w->lock);
    uint64_t want = ++w->flush_gen;
    pthread_cond_signal(&w->wake);
    while (w->written_gen < want) pthread_cond_wait(&w->done, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

uint64_t metrics_writer_dropped(metrics_writer *w) {
    pthread_mutex_lock(&w->lock);
    uint64_t d = w->dropped;
    pthread_mutex_unlock(&w->lock);
    return d;
}
