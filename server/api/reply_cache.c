/* Finished answers kept in a doubly linked list in recency order (head: most recent). The bounds
 * keep the list short (hundreds of entries at most), so a lookup is a linear scan. */
#include "api/reply_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    struct entry *prev, *next;
    char *key;
    char *body;
    size_t len;
} entry;

struct reply_cache {
    pthread_mutex_t lock;
    entry *head, *tail;
    size_t bytes, max_bytes;
    int entries, max_entries;
    unsigned long long hits, misses;
};

reply_cache *reply_cache_new(size_t max_bytes, int max_entries) {
    reply_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return NULL;
    }
    c->max_bytes = max_bytes;
    c->max_entries = max_entries > 0 ? max_entries : 1;
    return c;
}

static void entry_free(entry *e) {
    free(e->key);
    free(e->body);
    free(e);
}

/* Unlinks e from the list (the lock held); its bytes leave the count. */
static void unlink_entry(reply_cache *c, entry *e) {
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
    c->bytes -= e->len;
    c->entries--;
}

/* Links e at the head (the lock held). */
static void push_front(reply_cache *c, entry *e) {
    e->prev = NULL;
    e->next = c->head;
    if (c->head) c->head->prev = e;
    c->head = e;
    if (!c->tail) c->tail = e;
    c->bytes += e->len;
    c->entries++;
}

void reply_cache_free(reply_cache *c) {
    if (!c) return;
    for (entry *e = c->head, *n; e; e = n) {
        n = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static entry *find(reply_cache *c, const char *key) {
    for (entry *e = c->head; e; e = e->next)
        if (!strcmp(e->key, key)) return e;
    return NULL;
}

int reply_cache_get(reply_cache *c, const char *key, char **body, size_t *len) {
    *body = NULL;
    *len = 0;
    if (!c || !key) return 0;
    pthread_mutex_lock(&c->lock);
    entry *e = find(c, key);
    int hit = 0;
    if (e && (*body = malloc(e->len ? e->len : 1))) {
        memcpy(*body, e->body, e->len);
        *len = e->len;
        unlink_entry(c, e);
        push_front(c, e);
        hit = 1;
    }
    if (hit)
        c->hits++;
    else
        c->misses++;
    pthread_mutex_unlock(&c->lock);
    return hit;
}

void reply_cache_put(reply_cache *c, const char *key, const char *body, size_t len) {
    if (!c || !key || len > c->max_bytes / 4) return;
    entry *e = calloc(1, sizeof *e);
    if (!e) return;
    e->key = strdup(key);
    e->body = malloc(len ? len : 1);
    if (!e->key || !e->body) {
        entry_free(e);
        return;
    }
    memcpy(e->body, body, len);
    e->len = len;
    pthread_mutex_lock(&c->lock);
    entry *old = find(c, key);
    if (old) {
        unlink_entry(c, old);
        entry_free(old);
    }
    while (c->tail && (c->bytes + len > c->max_bytes || c->entries + 1 > c->max_entries)) {
        entry *victim = c->tail;
        unlink_entry(c, victim);
        entry_free(victim);
    }
    push_front(c, e);
    pthread_mutex_unlock(&c->lock);
}

void reply_cache_stats(reply_cache *c, unsigned long long *hits, unsigned long long *misses, int *entries,
                       size_t *bytes) {
    unsigned long long h = 0, m = 0;
    int n = 0;
    size_t b = 0;
    if (c) {
        pthread_mutex_lock(&c->lock);
        h = c->hits;
        m = c->misses;
        n = c->entries;
        b = c->bytes;
        pthread_mutex_unlock(&c->lock);
    }
    if (hits) *hits = h;
    if (misses) *misses = m;
    if (entries) *entries = n;
    if (bytes) *bytes = b;
}
