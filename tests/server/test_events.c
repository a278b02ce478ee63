/* The event bus alone: ordering, per-run filters, Last-Event-ID replay, lagging readers dropped. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "core/events.h"

static atomic_int wakes;
static void count_wake(void *ctx) {
    (void)ctx;
    atomic_fetch_add(&wakes, 1);
}

/* Reads everything due into one string. */
static char *drain(events_sub *s, ssize_t *last) {
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    for (;;) {
        if (cap - len < 4096) out = realloc(out, cap *= 2);
        ssize_t n = events_sub_read(s, out + len, cap - len - 1);
        *last = n;
        if (n <= 0) break;
        len += (size_t)n;
    }
    out[len] = 0;
    return out;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
    return n;
}

TEST(readers_get_their_runs_events_in_order) {
    events *ev = events_new(64, 3600);
    atomic_store(&wakes, 0);
    events_sub *all = events_subscribe(ev, 0, 0, count_wake, NULL);
    events_sub *one = events_subscribe(ev, 2, 0, count_wake, NULL);
    for (int i = 0; i < 10; i++) {
        char data[32];
        snprintf(data, sizeof data, "{\"i\":%d}", i);
        CHECK(events_publish(ev, 1 + i % 2, "metrics", data) > 0);
    }
    CHECK_EQ_INT(atomic_load(&wakes), 10 + 5);
    ssize_t last;
    char *a = drain(all, &last), *o = drain(one, &last);
    CHECK_EQ_INT(last, 0);
    CHECK_EQ_INT(count(a, "event: metrics"), 10);
    CHECK_EQ_INT(count(o, "event: metrics"), 5);
    CHECK(strstr(a, "retry: "));
    const char *p0 = strstr(a, "{\"i\":0}"), *p9 = strstr(a, "{\"i\":9}");
    CHECK(p0 && p9 && p0 < p9);
    CHECK(!strstr(o, "{\"i\":0}") && strstr(o, "{\"i\":1}"));
    free(a);
    free(o);
    events_unsubscribe(all);
    events_unsubscribe(one);
    events_free(ev);
}

TEST(last_event_id_replays_what_followed) {
    events *ev = events_new(64, 3600);
    uint64_t ids[6];
    for (int i = 0; i < 6; i++) ids[i] = events_publish(ev, 1, "metrics", "{}");
    events_sub *s = events_subscribe(ev, 1, ids[2], count_wake, NULL);
    ssize_t last;
    char *t = drain(s, &last);
    CHECK_EQ_INT(count(t, "event: metrics"), 3);
    char want[48];
    snprintf(want, sizeof want, "id: %llu\n", (unsigned long long)ids[3]);
    CHECK(strstr(t, want));
    snprintf(want, sizeof want, "id: %llu\n", (unsigned long long)ids[2]);
    CHECK(!strstr(t, want));
    free(t);
    events_unsubscribe(s);
    events_free(ev);
}

TEST(a_reader_that_falls_behind_is_told_and_dropped) {
    events *ev = events_new(16, 3600);
    events_sub *s = events_subscribe(ev, 0, 0, count_wake, NULL);
    for (int i = 0; i < 40; i++) events_publish(ev, 1, "metrics", "{}"); /* never waits for the reader */
    ssize_t last;
    char *t = drain(s, &last);
    CHECK(strstr(t, "event: resync"));
    CHECK_EQ_INT(count(t, "event: metrics"), 0);
    CHECK_EQ_INT(last, -1);
    CHECK_EQ_INT(events_sub_read(s, t, 100), -1);
    free(t);
    /* An id older than the ring: resync, then the reader carries on with new events. */
    events_sub *late = events_subscribe(ev, 0, 1, count_wake, NULL);
    events_publish(ev, 1, "status", "{\"status\":\"running\"}");
    t = drain(late, &last);
    CHECK(strstr(t, "event: resync"));
    CHECK(strstr(t, "event: status"));
    CHECK_EQ_INT(last, 0);
    free(t);
    events_unsubscribe(late);
    events_unsubscribe(s);
    events_free(ev);
}

TEST(an_event_larger_than_the_buffer_arrives_whole) {
    events *ev = events_new(8, 3600);
    events_sub *s = events_subscribe(ev, 0, 0, count_wake, NULL);
    char *big = malloc(10000);
    memset(big, 'x', 9999);
    big[0] = '"';
    big[9998] = '"';
    big[9999] = 0;
    events_publish(ev, 1, "metrics", big);
    char out[20000];
    size_t len = 0;
    ssize_t n;
    while ((n = events_sub_read(s, out + len, 700)) > 0) len += (size_t)n;
    out[len] = 0;
    CHECK(strstr(out, big));
    CHECK(strstr(out, "\n\n"));
    free(big);
    events_unsubscribe(s);
    events_free(ev);
}

int main(void) {
    RUN(readers_get_their_runs_events_in_order);
    RUN(last_event_id_replays_what_followed);
    RUN(a_reader_that_falls_behind_is_told_and_dropped);
    RUN(an_event_larger_than_the_buffer_arrives_whole);
    return test_summary();
}
