/* The live streams' Last-Event-ID: http_parse_event_id on arbitrary header values (accepts
 * exactly optional blanks, decimal digits, optional blanks, up to 2^63-1, and prints back to the
 * same number), then a subscription to an event bus that holds more events than it keeps, from
 * the parsed id (mapped near the bus's ids so that resumes, resyncs and "from now" all happen).
 * What the reader gets must be Server-Sent Events whose ids increase and follow the requested
 * one, with a resync first when the id is older than what is kept. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/events.h"
#include "http/http.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { KEEP = 32, PUBLISHED = 100 };
static events *bus;
static uint64_t first_id, last_id;

static void no_wake(void *ctx) { (void)ctx; }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    bus = events_new(KEEP, 3600);
    if (!bus) abort();
    for (int i = 0; i < PUBLISHED; i++) {
        char data[64];
        snprintf(data, sizeof data, "{\"run_id\":%d,\"step\":%d}", 1 + i % 3, i);
        uint64_t id = events_publish(bus, 1 + i % 3, "metrics", data);
        if (!id) abort();
        if (!first_id) first_id = id;
        last_id = id;
    }
    return 0;
}

/* The reference: blanks, digits, blanks, nothing else, value at most INT64_MAX. */
static int reference_parse(const char *s, uint64_t *out) {
    size_t i = 0;
    while (s[i] == ' ' || s[i] == '\t') i++;
    size_t d0 = i;
    while (s[i] >= '0' && s[i] <= '9') i++;
    size_t d1 = i;
    while (s[i] == ' ' || s[i] == '\t') i++;
    if (d1 == d0 || s[i]) return -1;
    while (d0 < d1 - 1 && s[d0] == '0') d0++;
    if (d1 - d0 > 19) return -1;
    char digits[20];
    memcpy(digits, s + d0, d1 - d0);
    digits[d1 - d0] = 0;
    if (d1 - d0 == 19 && strcmp(digits, "9223372036854775807") > 0) return -1;
    *out = strtoull(digits, NULL, 10);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 256) return -1;
    char value[257];
    memcpy(value, data + 1, size - 1);
    value[size - 1] = 0;
    if (strlen(value) != size - 1) return -1; /* a header value holds no NUL */
    uint64_t id = 0, ref = 0;
    int ok = http_parse_event_id(value, &id) == 0;
    int ref_ok = reference_parse(value, &ref) == 0;
    if (ok != ref_ok || (ok && id != ref)) {
        fprintf(stderr, "fuzz_event_id: '%s': parsed %d (%" PRIu64 "), reference %d (%" PRIu64 ")\n", value, ok, id,
                ref_ok, ref);
        abort();
    }
    if (ok) {
        char back[32];
        snprintf(back, sizeof back, "%" PRIu64, id);
        uint64_t id2;
        if (http_parse_event_id(back, &id2) != 0 || id2 != id) abort();
    }
    /* Small ids land around the bus's own, so every branch of the subscription is reached. */
    uint64_t from = !ok ? 0 : id < first_id ? first_id - 5 + id % (PUBLISHED + 10) : id;
    long long run = data[0] % 4; /* 0: all runs */
    events_sub *sub = events_subscribe(bus, run, from, no_wake, NULL);
    if (!sub) abort();
    char buf[4096];
    uint64_t prev = 0;
    int first_event = 1, saw_resync = 0;
    uint64_t oldest = last_id - KEEP + 1;
    for (int round = 0; round < 200; round++) {
        ssize_t n = events_sub_read(sub, buf, sizeof buf - 1);
        if (n <= 0) break;
        buf[n] = 0;
        for (char *p = buf; (p = strstr(p, "id: ")) != NULL; p += 4) {
            if (p != buf && p[-1] != '\n') continue;
            uint64_t eid = strtoull(p + 4, NULL, 10);
            if (eid <= prev || (from && eid <= from && from >= oldest - 1)) {
                fprintf(stderr, "fuzz_event_id: from %" PRIu64 ": id %" PRIu64 " after %" PRIu64 "\n", from, eid, prev);
                abort();
            }
            prev = eid;
        }
        if (first_event && strstr(buf, "event: resync")) saw_resync = 1;
        if (strstr(buf, "event: ")) first_event = 0;
    }
    if (ok && from && from + 1 < oldest && !saw_resync) {
        fprintf(stderr, "fuzz_event_id: from %" PRIu64 " (older than %" PRIu64 ") without a resync\n", from, oldest);
        abort();
    }
    events_unsubscribe(sub);
    return 0;
}
