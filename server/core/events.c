#include "core/events.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    uint64_t id; /* 0: empty slot */
    long long run_id;
    char type[16];
    char *data;
    int last; /* the run's last event: a reader of that run ends after it */
} event;

struct events_sub {
    events *ev;
    long long run_id;
    uint64_t cursor; /* the last id handed to this reader */
    void (*wake)(void *);
    void *ctx;
    int ping_due, hello_sent, resync_due, drop_after_resync, dropped;
    int ended;      /* the run's last event has been read: the stream ends */
    char *epilogue; /* events_sub_end: the text to end with once caught up */
    char *pending;  /* an event that did not fit the last buffer */
    size_t pending_len, pending_off;
    events_sub *next, *prev;
};

struct events {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    event *ring;
    size_t capacity;
    uint64_t next_id;  /* id of the next event */
    uint64_t first_id; /* the first id ever published in this process */
    events_sub *subs;
    size_t n_subs;
    int closing;
    int ping_seconds;
    pthread_t pinger;
    int pinger_started;
};

static void *ping_loop(void *arg) {
    events *ev = arg;
    pthread_mutex_lock(&ev->lock);
    while (!ev->closing) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += ev->ping_seconds;
        int rc = 0;
        while (!ev->closing && rc == 0) rc = pthread_cond_timedwait(&ev->cond, &ev->lock, &until);
        if (ev->closing) break;
        for (events_sub *s = ev->subs; s; s = s->next) {
            s->ping_due = 1;
            s->wake(s->ctx);
        }
    }
    pthread_mutex_unlock(&ev->lock);
    return NULL;
}

events *events_new(size_t capacity, int ping_seconds) {
    events *ev = calloc(1, sizeof *ev);
    if (!ev) return NULL;
    ev->ring = calloc(capacity, sizeof *ev->ring);
    if (!ev->ring) {
        free(ev);
        return NULL;
    }
    ev->capacity = capacity;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ev->first_id = ev->next_id = (uint64_t)now.tv_sec * 1000000ull + (uint64_t)now.tv_nsec / 1000ull;
    ev->ping_seconds = ping_seconds > 0 ? ping_seconds : 15;
    pthread_mutex_init(&ev->lock, NULL);
    pthread_cond_init(&ev->cond, NULL);
    if (pthread_create(&ev->pinger, NULL, ping_loop, ev) == 0) ev->pinger_started = 1;
    return ev;
}

void events_close_all(events *ev) {
    pthread_mutex_lock(&ev->lock);
    ev->closing = 1;
    pthread_cond_broadcast(&ev->cond);
    for (events_sub *s = ev->subs; s; s = s->next) s->wake(s->ctx);
    pthread_mutex_unlock(&ev->lock);
}

void events_free(events *ev) {
    if (!ev) return;
    events_close_all(ev);
    if (ev->pinger_started) pthread_join(ev->pinger, NULL);
    for (size_t i = 0; i < ev->capacity; i++) free(ev->ring[i].data);
    free(ev->ring);
    pthread_cond_destroy(&ev->cond);
    pthread_mutex_destroy(&ev->lock);
    free(ev);
}

/* The oldest id still in the ring. */
static uint64_t oldest_kept(const events *ev) {
    uint64_t published = ev->next_id - ev->first_id;
    return published > ev->capacity ? ev->next_id - ev->capacity : ev->first_id;
}

static uint64_t publish(events *ev, long long run_id, const char *type, const char *data, int last) {
    char *copy = strdup(data);
    if (!copy) return 0;
    pthread_mutex_lock(&ev->lock);
    uint64_t id = ev->next_id++;
    event *slot = &ev->ring[id % ev->capacity];
    free(slot->data);
    slot->id = id;
    slot->run_id = run_id;
    snprintf(slot->type, sizeof slot->type, "%s", type);
    slot->data = copy;
    slot->last = last;
    for (events_sub *s = ev->subs; s; s = s->next)
        if (s->run_id == 0 || s->run_id == run_id) s->wake(s->ctx);
    pthread_mutex_unlock(&ev->lock);
    return id;
}

uint64_t events_publish(events *ev, long long run_id, const char *type, const char *data) {
    return publish(ev, run_id, type, data, 0);
}

uint64_t events_publish_last(events *ev, long long run_id, const char *type, const char *data) {
    return publish(ev, run_id, type, data, 1);
}

events_sub *events_subscribe(events *ev, long long run_id, uint64_t last_event_id, void (*wake)(void *), void *ctx) {
    events_sub *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->ev = ev;
    s->run_id = run_id;
    s->wake = wake;
    s->ctx = ctx;
    pthread_mutex_lock(&ev->lock);
    if (last_event_id == 0 || last_event_id >= ev->next_id) {
        s->cursor = ev->next_id - 1;
    } else if (last_event_id + 1 < oldest_kept(ev)) {
        s->resync_due = 1; /* too old to replay: say so, then carry on from now */
        s->cursor = ev->next_id - 1;
    } else {
        s->cursor = last_event_id;
    }
    s->next = ev->subs;
    if (s->next) s->next->prev = s;
    ev->subs = s;
    ev->n_subs++;
    pthread_mutex_unlock(&ev->lock);
    return s;
}

int events_sub_end(events_sub *s, const char *type, const char *data) {
    size_t len = strlen(type) + strlen(data) + 20;
    char *text = malloc(len);
    if (!text) return -1;
    snprintf(text, len, "event: %s\ndata: %s\n\n", type, data);
    pthread_mutex_lock(&s->ev->lock);
    free(s->epilogue);
    s->epilogue = text;
    s->wake(s->ctx);
    pthread_mutex_unlock(&s->ev->lock);
    return 0;
}

void events_unsubscribe(events_sub *s) {
    if (!s) return;
    events *ev = s->ev;
    pthread_mutex_lock(&ev->lock);
    if (s->prev)
        s->prev->next = s->next;
    else
        ev->subs = s->next;
    if (s->next) s->next->prev = s->prev;
    ev->n_subs--;
    pthread_mutex_unlock(&ev->lock);
    free(s->pending);
    free(s->epilogue);
    free(s);
}

size_t events_subscriber_count(events *ev) {
    pthread_mutex_lock(&ev->lock);
    size_t n = ev->n_subs;
    pthread_mutex_unlock(&ev->lock);
    return n;
}

/* Copies as much of the pending event as fits; returns bytes written. */
static size_t drain_pending(events_sub *s, char *buf, size_t max) {
    size_t left = s->pending_len - s->pending_off;
    size_t n = left < max ? left : max;
    memcpy(buf, s->pending + s->pending_off, n);
    s->pending_off += n;
    if (s->pending_off == s->pending_len) {
        free(s->pending);
        s->pending = NULL;
        s->pending_len = s->pending_off = 0;
    }
    return n;
}

/* Appends text to buf, or keeps what does not fit as pending when buf is still empty. Returns
 * the bytes written, or 0 when it did not fit and must wait for the next read. */
static size_t emit(events_sub *s, char *buf, size_t used, size_t max, const char *text, size_t len) {
    if (used + len <= max) {
        memcpy(buf + used, text, len);
        return len;
    }
    if (used > 0) return 0;
    s->pending = malloc(len);
    if (!s->pending) return 0;
    memcpy(s->pending, text, len);
    s->pending_len = len;
    s->pending_off = 0;
    return drain_pending(s, buf, max);
}

ssize_t events_sub_read(events_sub *s, char *buf, size_t max) {
    events *ev = s->ev;
    if (s->pending) return (ssize_t)drain_pending(s, buf, max);
    if (s->dropped || s->ended) return -1;
    pthread_mutex_lock(&ev->lock);
    size_t used = 0;
    if (!s->hello_sent) {
        static const char hello[] = "retry: 2000\n\n";
        used += emit(s, buf, used, max, hello, sizeof hello - 1);
        s->hello_sent = 1;
    }
    if (s->cursor + 1 < oldest_kept(ev)) {
        /* The ring moved past this reader: it lags, so it is told and dropped. */
        s->resync_due = 1;
        s->drop_after_resync = 1;
    }
    if (s->resync_due) {
        char line[160];
        int n = snprintf(line, sizeof line, "event: resync\ndata: {\"reason\":\"%s\"}\n\n",
                         s->drop_after_resync ? "reader fell behind" : "last event id too old");
        size_t w = emit(s, buf, used, max, line, (size_t)n);
        if (w == 0 && used) goto out;
        used += w;
        s->resync_due = 0;
        if (s->drop_after_resync) {
            s->dropped = 1;
            pthread_mutex_unlock(&ev->lock);
            return used ? (ssize_t)used : -1;
        }
    }
    if (ev->closing) {
        pthread_mutex_unlock(&ev->lock);
        return used ? (ssize_t)used : -1;
    }
    while (s->cursor + 1 < ev->next_id) {
        const event *e = &ev->ring[(s->cursor + 1) % ev->capacity];
        if (s->run_id && e->run_id != s->run_id) {
            s->cursor++;
            continue;
        }
        size_t len = strlen(e->data) + strlen(e->type) + 48;
        char small[2048];
        char *text = len <= sizeof small ? small : malloc(len);
        if (!text) break;
        int n = snprintf(text, len, "id: %llu\nevent: %s\ndata: %s\n\n", (unsigned long long)e->id, e->type, e->data);
        size_t w = emit(s, buf, used, max, text, (size_t)n);
        if (text != small) free(text);
        if (w == 0) break;
        used += w;
        s->cursor++;
        if (e->last && s->run_id) {
            s->ended = 1; /* its run's last event: nothing follows on this stream */
            break;
        }
        if (s->pending) break;
    }
    if (!s->ended && s->epilogue && s->cursor + 1 >= ev->next_id && !s->pending) {
        /* Caught up with a run that had already ended: its status, then the end. */
        size_t w = emit(s, buf, used, max, s->epilogue, strlen(s->epilogue));
        if (w > 0) {
            used += w;
            s->ended = 1;
        }
    }
    if (s->ping_due && used + 8 <= max) {
        memcpy(buf + used, ": ping\n\n", 8);
        used += 8;
        s->ping_due = 0;
    }
out:
    pthread_mutex_unlock(&ev->lock);
    return (ssize_t)used;
}

uint64_t events_last_id(events *ev) {
    pthread_mutex_lock(&ev->lock);
    uint64_t id = ev->next_id - 1;
    pthread_mutex_unlock(&ev->lock);
    return id;
}

size_t events_capacity(const events *ev) { return ev->capacity; }
