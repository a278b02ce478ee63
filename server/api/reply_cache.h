/* A bounded, thread-safe cache of finished answers: answer bodies that cannot change any more
 * (the metric series of a run that has ended), kept by a key that names everything the answer
 * depends on, so that a request asked again is a copy instead of a scan of the store.
 *
 * The caller builds the key; an entry is never invalidated, only evicted (least recently used
 * first) when the cache would exceed its byte or entry bound. So a key must change whenever the
 * answer could: for a run's series it holds the run's id, status, step, creation and end times
 * and the query, and only runs in a final status are cached. */
#ifndef ATTNLAB_REPLY_CACHE_H
#define ATTNLAB_REPLY_CACHE_H

#include <stddef.h>

typedef struct reply_cache reply_cache;

/* A cache holding at most max_bytes of bodies and max_entries answers; NULL when out of memory. */
reply_cache *reply_cache_new(size_t max_bytes, int max_entries);
void reply_cache_free(reply_cache *c);

/* On a hit, *body is a new malloc'd copy of the body (the caller frees it), *len its size, and the
 * entry becomes the most recently used: returns 1. Returns 0 on a miss, on allocation failure or
 * when c is NULL (nothing cached). */
int reply_cache_get(reply_cache *c, const char *key, char **body, size_t *len);

/* Stores a copy of body under key (replacing an entry with the same key), evicting the least
 * recently used entries to stay within the bounds. A body larger than a quarter of max_bytes is
 * not stored. Allocation failure stores nothing; c NULL is a no-op. */
void reply_cache_put(reply_cache *c, const char *key, const char *body, size_t len);

/* Hits, misses, entries and bytes held, for /metrics and tests (any pointer may be NULL). */
void reply_cache_stats(reply_cache *c, unsigned long long *hits, unsigned long long *misses, int *entries,
                       size_t *bytes);

#endif
