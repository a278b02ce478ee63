/* Presenter mode's codes; the contract is in svc_follow.h. */
#include "services/svc_follow.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "util/json_text.h"

typedef struct {
    char code[SVC_FOLLOW_CODE_LEN + 1]; /* "" : free */
    char token[33];
    char hash[SVC_FOLLOW_HASH_MAX + 1];
    char probe[SVC_FOLLOW_PROBE_MAX + 1];
    long long run; /* 0: none */
    long long seq;
    double updated_at, expires_at;
} follow_slot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static follow_slot slots[SVC_FOLLOW_MAX_CODES];

static const char ALPHABET[] = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"; /* 32: no 0 O 1 I */

static int random_bytes(unsigned char *b, size_t n) {
    while (n > 0) {
        ssize_t got = getrandom(b, n, 0);
        if (got <= 0) return -1;
        b += got;
        n -= (size_t)got;
    }
    return 0;
}

/* The live slot of code, or NULL (an expired one is freed on the way). Under the lock. */
static follow_slot *find(const char *code, double now) {
    if (!code || strlen(code) != SVC_FOLLOW_CODE_LEN) return NULL;
    for (int i = 0; i < SVC_FOLLOW_MAX_CODES; i++) {
        follow_slot *s = &slots[i];
        if (!s->code[0] || strcasecmp(s->code, code)) continue;
        if (now >= s->expires_at) {
            memset(s, 0, sizeof *s);
            return NULL;
        }
        return s;
    }
    return NULL;
}

static json_t *state_json(const follow_slot *s) {
    return json_pack("{s:s, s:I, s:s?, s:o, s:s?, s:f, s:f}", "code", s->code, "seq", (json_int_t)s->seq, "hash",
                     s->hash[0] ? s->hash : NULL, "run", s->run ? json_integer(s->run) : json_null(), "probe",
                     s->probe[0] ? s->probe : NULL, "updated_at", s->updated_at, "expires_at", s->expires_at);
}

svc_status svc_follow_create(double now, json_t **out, svc_error *err) {
    *out = NULL;
    unsigned char rnd[SVC_FOLLOW_CODE_LEN + 16];
    if (random_bytes(rnd, sizeof rnd) < 0) return svc_fail(err, SVC_FAILED, "internal", NULL, "no random bytes");
    pthread_mutex_lock(&lock);
    follow_slot *free_slot = NULL;
    double soonest = 0;
    for (int i = 0; i < SVC_FOLLOW_MAX_CODES; i++) {
        follow_slot *s = &slots[i];
        if (s->code[0] && now >= s->expires_at) memset(s, 0, sizeof *s);
        if (!s->code[0]) {
            if (!free_slot) free_slot = s;
        } else if (!soonest || s->expires_at < soonest) {
            soonest = s->expires_at;
        }
    }
    if (!free_slot) {
        pthread_mutex_unlock(&lock);
        svc_status st = svc_fail(err, SVC_BUSY, "too_many_codes", NULL,
                                 "%d follow codes are live, the most at once; the oldest expires in %.0f s",
                                 SVC_FOLLOW_MAX_CODES, soonest - now);
        err->retry_after = (int)(soonest - now) + 1;
        return st;
    }
    char code[SVC_FOLLOW_CODE_LEN + 1];
    for (int tries = 0;; tries++) {
        for (int i = 0; i < SVC_FOLLOW_CODE_LEN; i++) code[i] = ALPHABET[rnd[i] % 32];
        code[SVC_FOLLOW_CODE_LEN] = 0;
        if (!find(code, now)) break;
        if (tries == 8 || random_bytes(rnd, SVC_FOLLOW_CODE_LEN) < 0) { /* 1 in 2^30 each time */
            pthread_mutex_unlock(&lock);
            return svc_fail(err, SVC_FAILED, "internal", NULL, "no free follow code");
        }
    }
    memset(free_slot, 0, sizeof *free_slot);
    memcpy(free_slot->code, code, sizeof code);
    for (int i = 0; i < 16; i++) snprintf(free_slot->token + 2 * i, 3, "%02x", rnd[SVC_FOLLOW_CODE_LEN + i]);
    free_slot->updated_at = now;
    free_slot->expires_at = now + SVC_FOLLOW_TTL_S;
    json_t *o = state_json(free_slot);
    if (o && json_object_set_new(o, "token", json_string(free_slot->token)) < 0) {
        json_decref(o);
        o = NULL;
    }
    if (!o) memset(free_slot, 0, sizeof *free_slot);
    pthread_mutex_unlock(&lock);
    if (!o) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    *out = o;
    return SVC_OK;
}

/* Compares in time that depends only on the lengths. */
static int same_token(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++) diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return diff == 0;
}

static int printable(const char *s) {
    for (; *s; s++)
        if (*s < 0x21 || *s > 0x7e) return 0;
    return 1;
}

svc_status svc_follow_update(const char *code, const char *token, const json_t *body, double now, json_t **out,
                             char **event, svc_error *err) {
    *out = NULL;
    *event = NULL;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v) {
        if (strcmp(key, "hash") && strcmp(key, "run") && strcmp(key, "probe"))
            return svc_fail(err, SVC_INVALID, "invalid_field", key, "%.60s is not a field (hash, run, probe)", key);
    }
    const json_t *jh = json_object_get(body, "hash"), *jr = json_object_get(body, "run"),
                 *jp = json_object_get(body, "probe");
    const char *hash = json_string_value(jh), *probe = json_string_value(jp);
    if (!hash || strlen(hash) < 2 || strlen(hash) > SVC_FOLLOW_HASH_MAX || strncmp(hash, "#/", 2) || !printable(hash) ||
        !strncmp(hash, "#/follow", 8))
        return svc_fail(err, SVC_INVALID, "invalid_field", "hash",
                        "hash must be the page's location hash: \"#/…\", at most %d printable ASCII bytes, not a "
                        "follow page",
                        SVC_FOLLOW_HASH_MAX);
    if (jr && !json_is_null(jr) && !(json_is_integer(jr) && json_integer_value(jr) >= 1))
        return svc_fail(err, SVC_INVALID, "invalid_field", "run", "run must be a run id (>= 1) or null");
    if (jp && !json_is_null(jp)) {
        size_t n = probe ? strlen(probe) : 0;
        int ok = n >= 1 && n <= SVC_FOLLOW_PROBE_MAX;
        for (size_t i = 0; ok && i < n; i++) ok = (probe[i] >= 'a' && probe[i] <= 'z') || probe[i] == '_';
        if (!ok)
            return svc_fail(err, SVC_INVALID, "invalid_field", "probe",
                            "probe must be a probe kind's name (a-z and _, at most %d) or null", SVC_FOLLOW_PROBE_MAX);
    }
    pthread_mutex_lock(&lock);
    follow_slot *s = find(code, now);
    if (!s) {
        pthread_mutex_unlock(&lock);
        return svc_fail(err, SVC_NOT_FOUND, "not_found", "code", "no follow code %.16s (or it has expired)",
                        code ? code : "");
    }
    if (!token || !same_token(token, s->token)) {
        pthread_mutex_unlock(&lock);
        return svc_fail(err, SVC_CONFLICT, "forbidden", "token",
                        "only the presenter that made this code can change it (X-Follow-Token)");
    }
    snprintf(s->hash, sizeof s->hash, "%s", hash);
    snprintf(s->probe, sizeof s->probe, "%s", probe && !json_is_null(jp) ? probe : "");
    s->run = jr && json_is_integer(jr) ? (long long)json_integer_value(jr) : 0;
    s->seq++;
    s->updated_at = now;
    s->expires_at = now + SVC_FOLLOW_TTL_S;
    json_t *o = state_json(s);
    pthread_mutex_unlock(&lock);
    char *text = o ? json_text_dumps(o, JSON_COMPACT) : NULL;
    if (!text) {
        json_decref(o);
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    }
    *out = o;
    *event = text;
    return SVC_OK;
}

svc_status svc_follow_get(const char *code, double now, json_t **out, svc_error *err) {
    *out = NULL;
    pthread_mutex_lock(&lock);
    follow_slot *s = find(code, now);
    json_t *o = s ? state_json(s) : NULL;
    pthread_mutex_unlock(&lock);
    if (!s) return svc_fail(err, SVC_NOT_FOUND, "not_found", "code", "no follow code %.16s (or it has expired)", code);
    if (!o) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    *out = o;
    return SVC_OK;
}

void svc_follow_reset(void) {
    pthread_mutex_lock(&lock);
    memset(slots, 0, sizeof slots);
    pthread_mutex_unlock(&lock);
}
