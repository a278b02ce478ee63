/* The Server-Sent Events parser: fields, line endings, comments, the persistent id, and the same
 * events whatever the chunk boundaries. */
#include <stdlib.h>
#include <string.h>

#include "../../client/sse.h"
#include "../support/test.h"

typedef struct {
    int n;
    char log[4096];
    int stop_after;
} collected;

static int collect(const sse_event *ev, void *user) {
    collected *c = user;
    size_t used = strlen(c->log);
    snprintf(c->log + used, sizeof c->log - used, "[%s|%s|%s]", ev->event, ev->id, ev->data);
    c->n++;
    return c->stop_after && c->n >= c->stop_after ? 7 : 0;
}

static const char stream[] = ": ping\n\n"
                             "id: 1\nevent: metrics\ndata: {\"step\":1}\n\n"
                             "event: status\r\ndata: line one\r\ndata: line two\r\n\r\n"
                             "id:3\ndata:no space\rretry: 100\r\r"
                             "data\n\n"
                             "event: empty\n\n"
                             "id: 5\nevent: resync\ndata: {}\n\n";

static const char expected[] = "[metrics|1|{\"step\":1}]"
                               "[status|1|line one\nline two]"
                               "[message|3|no space]"
                               "[message|3|]"
                               "[resync|5|{}]";

TEST(parses_fields_endings_and_comments) {
    sse_parser p;
    sse_init(&p);
    collected c = {0};
    CHECK_EQ_INT(sse_feed(&p, stream, sizeof stream - 1, collect, &c), 0);
    CHECK_MSG(!strcmp(c.log, expected), "got %s", c.log);
    CHECK_EQ_INT(c.n, 5);
    CHECK_EQ_INT(p.comments, 1);
    CHECK(!strcmp(p.id, "5"));
    sse_free(&p);
}

TEST(any_split_gives_the_same_events) {
    size_t n = sizeof stream - 1;
    for (size_t cut1 = 0; cut1 <= n; cut1 += 1) {
        for (size_t cut2 = cut1; cut2 <= n; cut2 += 7) {
            sse_parser p;
            sse_init(&p);
            collected c = {0};
            sse_feed(&p, stream, cut1, collect, &c);
            sse_feed(&p, stream + cut1, cut2 - cut1, collect, &c);
            sse_feed(&p, stream + cut2, n - cut2, collect, &c);
            CHECK_MSG(!strcmp(c.log, expected), "cuts %zu,%zu: got %s", cut1, cut2, c.log);
            sse_free(&p);
        }
    }
}

TEST(byte_by_byte_crlf_is_one_line_end) {
    /* A CR at the end of one chunk and its LF at the start of the next must not end two lines
     * (that blank line would dispatch a half-built event). */
    const char s[] = "data: a\r\ndata: b\r\n\r\n";
    sse_parser p;
    sse_init(&p);
    collected c = {0};
    for (size_t i = 0; i < sizeof s - 1; i++) sse_feed(&p, s + i, 1, collect, &c);
    CHECK_EQ_INT(c.n, 1);
    CHECK_MSG(!strcmp(c.log, "[message||a\nb]"), "got %s", c.log);
    sse_free(&p);
}

TEST(stop_returns_the_callbacks_value) {
    sse_parser p;
    sse_init(&p);
    collected c = {.stop_after = 2};
    CHECK_EQ_INT(sse_feed(&p, stream, sizeof stream - 1, collect, &c), 7);
    CHECK_EQ_INT(c.n, 2);
    sse_free(&p);
}

TEST(reset_drops_the_partial_event_but_keeps_the_id) {
    sse_parser p;
    sse_init(&p);
    collected c = {0};
    const char a[] = "id: 41\nevent: metrics\ndata: {\"step\":41}\n\nid: 42\nevent: metrics\ndata: {\"st";
    sse_feed(&p, a, sizeof a - 1, collect, &c);
    CHECK_EQ_INT(c.n, 1);
    CHECK(!strcmp(p.id, "42")); /* the id line of the unfinished event was read */
    sse_reset_partial(&p);
    const char b[] = "data: {\"step\":43}\n\n";
    sse_feed(&p, b, sizeof b - 1, collect, &c);
    CHECK_EQ_INT(c.n, 2);
    CHECK_MSG(strstr(c.log, "[message|42|{\"step\":43}]"), "got %s", c.log);
    sse_free(&p);
}

TEST(an_overlong_line_is_cut_not_grown) {
    sse_parser p;
    sse_init(&p);
    collected c = {0};
    size_t n = SSE_MAX_LINE + 5000;
    char *big = malloc(n + 16);
    CHECK(big);
    memcpy(big, "data: ", 6);
    memset(big + 6, 'x', n - 6);
    memcpy(big + n, "\n\n", 2);
    sse_feed(&p, big, n + 2, collect, &c);
    free(big);
    CHECK_EQ_INT(c.n, 1);
    CHECK(p.line_cap <= SSE_MAX_LINE);
    CHECK_EQ_INT(p.data_len, 0);
    sse_free(&p);
}

int main(void) {
    RUN(parses_fields_endings_and_comments);
    RUN(any_split_gives_the_same_events);
    RUN(byte_by_byte_crlf_is_one_line_end);
    RUN(stop_returns_the_callbacks_value);
    RUN(reset_drops_the_partial_event_but_keeps_the_id);
    RUN(an_overlong_line_is_cut_not_grown);
    return test_summary();
}
