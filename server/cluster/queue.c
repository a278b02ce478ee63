/* The shared training queue: see queue.h. */
#include "cluster/queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"

#define MAX_HELD 64

typedef struct {
    long long run_id, token;
    int lost, cancel;
    double renewed_at; /* monotonic seconds of the last renewal the database took */
} held_run;

struct queue {
    store *st;
    char node[128];
    double lease_s;
    int poll_ms;
    pthread_mutex_t lock;
    pthread_cond_t wake_cv, beat_cv;
    unsigned long long wakes; /* counts queue_wake calls, so a wake between two claims is not lost */
    held_run held[MAX_HELD];
    int n_held;
    int stopping;
    unsigned long long claims;
    pthread_t beat;
};

static double mono_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void deadline_in(struct timespec *ts, long ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Renews every held lease; a renewal that finds the lease gone or a cancel request flags the run
 * for its worker. A database that cannot be reached changes nothing: the run trains on, and its
 * lease either survives (renewed once the database is back) or was taken over (then the next
 * renewal finds it lost). */
static void renew_all(queue *q) {
    held_run copy[MAX_HELD];
    pthread_mutex_lock(&q->lock);
    int n = q->n_held;
    memcpy(copy, q->held, (size_t)n * sizeof *copy);
    pthread_mutex_unlock(&q->lock);
    for (int i = 0; i < n; i++) {
        int cancel = 0;
        store_status s = store_run_renew(q->st, copy[i].run_id, copy[i].token, q->lease_s, &cancel);
        pthread_mutex_lock(&q->lock);
        for (int k = 0; k < q->n_held; k++)
            if (q->held[k].run_id == copy[i].run_id && q->held[k].token == copy[i].token) {
                if (s == STORE_OK) q->held[k].renewed_at = mono_now();
                if (s == STORE_CONFLICT && !q->held[k].lost) {
                    q->held[k].lost = 1;
                    log_warn("run %lld: this node lost its lease (another node continues the run): stopping it",
                             copy[i].run_id);
                }
                if (s == STORE_OK && cancel) q->held[k].cancel = 1;
            }
        pthread_mutex_unlock(&q->lock);
        if (s == STORE_ERROR) log_warn("run %lld: lease not renewed: %s", copy[i].run_id, store_last_error());
    }
}

static void *beat_loop(void *arg) {
    queue *q = arg;
    long every_ms = (long)(q->lease_s * 1000 / 4); /* two tries before the self-fence at 2/3 */
    if (every_ms < 50) every_ms = 50;
    pthread_mutex_lock(&q->lock);
    while (!q->stopping) {
        struct timespec ts;
        deadline_in(&ts, every_ms);
        while (!q->stopping && pthread_cond_timedwait(&q->beat_cv, &q->lock, &ts) != ETIMEDOUT) {}
        if (q->stopping) break;
        pthread_mutex_unlock(&q->lock);
        renew_all(q);
        pthread_mutex_lock(&q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

queue *queue_start(store *st, const char *node_id, double lease_s, int poll_ms) {
    queue *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->st = st;
    strncpy(q->node, node_id, sizeof q->node - 1);
    q->lease_s = lease_s > 0.1 ? lease_s : 0.1;
    q->poll_ms = poll_ms > 10 ? poll_ms : 10;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->wake_cv, NULL);
    pthread_cond_init(&q->beat_cv, NULL);
    if (pthread_create(&q->beat, NULL, beat_loop, q) != 0) {
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->wake_cv);
        pthread_cond_destroy(&q->beat_cv);
        free(q);
        return NULL;
    }
    return q;
}

void queue_stop(queue *q) {
    if (!q) return;
    pthread_mutex_lock(&q->lock);
    q->stopping = 1;
    pthread_cond_broadcast(&q->beat_cv);
    pthread_cond_broadcast(&q->wake_cv);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->beat, NULL);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->wake_cv);
    pthread_cond_destroy(&q->beat_cv);
    free(q);
}

int queue_claim(queue *q, store_lease *lease, int (*stop)(void *), void *ctx) {
    memset(lease, 0, sizeof *lease);
    for (;;) {
        if (stop && stop(ctx)) return 0;
        pthread_mutex_lock(&q->lock);
        unsigned long long seen = q->wakes;
        int room = q->n_held < MAX_HELD;
        pthread_mutex_unlock(&q->lock);
        store_status s = room ? store_run_claim(q->st, q->node, q->lease_s, lease) : STORE_NOT_FOUND;
        if (s == STORE_OK) {
            store_lease_hold(q->st, lease->run_id, lease->token);
            pthread_mutex_lock(&q->lock);
            q->held[q->n_held++] = (held_run){.run_id = lease->run_id, .token = lease->token, .renewed_at = mono_now()};
            q->claims++;
            pthread_mutex_unlock(&q->lock);
            /* Stopped meanwhile: the run goes straight back for another node. */
            if (stop && stop(ctx)) {
                if (store_run_release(q->st, lease->run_id, lease->token, "queued", NULL) != STORE_OK)
                    log_warn("run %lld: could not give back a run claimed while stopping", lease->run_id);
                queue_done(q, lease->run_id);
                return 0;
            }
            log_info("run %lld: claimed%s (attempt %d)", lease->run_id,
                     lease->takeover ? " from a node that stopped renewing its lease" : "", lease->attempt);
            return 1;
        }
        if (s == STORE_ERROR) log_warn("claiming a run: %s", store_last_error());
        pthread_mutex_lock(&q->lock);
        struct timespec ts;
        deadline_in(&ts, q->poll_ms);
        while (!q->stopping && q->wakes == seen && pthread_cond_timedwait(&q->wake_cv, &q->lock, &ts) != ETIMEDOUT) {}
        pthread_mutex_unlock(&q->lock);
    }
}

void queue_wake(queue *q) {
    pthread_mutex_lock(&q->lock);
    q->wakes++;
    pthread_cond_broadcast(&q->wake_cv);
    pthread_mutex_unlock(&q->lock);
}

int queue_check(queue *q, long long run_id, int *lost, int *cancel) {
    int l = 0, c = 0;
    pthread_mutex_lock(&q->lock);
    for (int i = 0; i < q->n_held; i++)
        if (q->held[i].run_id == run_id) {
            /* Cut off from the database for two thirds of the lease, this node can no longer be sure
             * the lease is its own: it stops before another node may take the run over. */
            if (!q->held[i].lost && mono_now() - q->held[i].renewed_at > q->lease_s * 2 / 3) {
                q->held[i].lost = 1;
                log_warn("run %lld: the lease could not be renewed for %.1f s (the database is unreachable): "
                         "stopping; its last checkpoint is kept and the run resumes once a node can claim it",
                         run_id, mono_now() - q->held[i].renewed_at);
            }
            l = q->held[i].lost;
            c = q->held[i].cancel;
        }
    pthread_mutex_unlock(&q->lock);
    if (lost) *lost = l;
    if (cancel) *cancel = c;
    return l || c;
}

void queue_done(queue *q, long long run_id) {
    store_lease_drop(q->st, run_id);
    pthread_mutex_lock(&q->lock);
    for (int i = 0; i < q->n_held; i++)
        if (q->held[i].run_id == run_id) {
            q->held[i] = q->held[--q->n_held];
            break;
        }
    pthread_cond_broadcast(&q->wake_cv); /* a slot is free */
    pthread_mutex_unlock(&q->lock);
}

void queue_cancel_heard(queue *q, long long run_id) {
    pthread_mutex_lock(&q->lock);
    for (int i = 0; i < q->n_held; i++)
        if (q->held[i].run_id == run_id) q->held[i].cancel = 1;
    pthread_mutex_unlock(&q->lock);
}

int queue_held(queue *q) {
    pthread_mutex_lock(&q->lock);
    int n = q->n_held;
    pthread_mutex_unlock(&q->lock);
    return n;
}

unsigned long long queue_claims(queue *q) {
    pthread_mutex_lock(&q->lock);
    unsigned long long n = q->claims;
    pthread_mutex_unlock(&q->lock);
    return n;
}
