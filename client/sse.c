#include "sse.h"

#include <stdlib.h>
#include <string.h>

void sse_init(sse_parser *p) { memset(p, 0, sizeof *p); }

void sse_free(sse_parser *p) {
    free(p->line);
    free(p->data);
    memset(p, 0, sizeof *p);
}

void sse_reset_partial(sse_parser *p) {
    p->line_len = 0;
    p->line_cut = 0;
    p->after_cr = 0;
    p->data_len = 0;
    p->has_data = 0;
    p->event[0] = 0;
}

static int grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *n = realloc(*buf, c);
    if (!n) return -1;
    *buf = n;
    *cap = c;
    return 0;
}

static int append_data(sse_parser *p, const char *v, size_t n) {
    size_t need = p->data_len + n + (p->has_data ? 1 : 0) + 1;
    if (grow(&p->data, &p->data_cap, need) < 0) return -1;
    if (p->has_data) p->data[p->data_len++] = '\n';
    memcpy(p->data + p->data_len, v, n);
    p->data_len += n;
    p->data[p->data_len] = 0;
    p->has_data = 1;
    return 0;
}

/* One complete line (without its terminator). */
static int process_line(sse_parser *p, const char *line, size_t n, sse_event_fn fn, void *user) {
    if (n == 0) {
        int rc = 0;
        if (p->has_data) {
            sse_event ev = {p->event[0] ? p->event : "message", p->data, p->data_len, p->id};
            rc = fn(&ev, user);
        }
        p->data_len = 0;
        p->has_data = 0;
        p->event[0] = 0;
        return rc;
    }
    if (line[0] == ':') {
        p->comments++;
        return 0;
    }
    const char *colon = memchr(line, ':', n);
    size_t fn_len = colon ? (size_t)(colon - line) : n;
    const char *v = colon ? colon + 1 : line + n;
    size_t vn = colon ? n - fn_len - 1 : 0;
    if (vn && *v == ' ') v++, vn--;
    if (fn_len == 4 && !memcmp(line, "data", 4)) return append_data(p, v, vn);
    if (fn_len == 5 && !memcmp(line, "event", 5)) {
        size_t k = vn < sizeof p->event - 1 ? vn : sizeof p->event - 1;
        memcpy(p->event, v, k);
        p->event[k] = 0;
    } else if (fn_len == 2 && !memcmp(line, "id", 2)) {
        if (!memchr(v, 0, vn)) {
            size_t k = vn < sizeof p->id - 1 ? vn : sizeof p->id - 1;
            memcpy(p->id, v, k);
            p->id[k] = 0;
        }
    }
    return 0;
}

int sse_feed(sse_parser *p, const char *buf, size_t len, sse_event_fn fn, void *user) {
    int oom = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = buf[i];
        if (ch == '\n' && p->after_cr) {
            p->after_cr = 0;
            continue;
        }
        p->after_cr = 0;
        if (ch == '\n' || ch == '\r') {
            p->after_cr = ch == '\r';
            int rc = process_line(p, p->line ? p->line : "", p->line_len, fn, user);
            p->line_len = 0;
            p->line_cut = 0;
            if (rc < 0)
                oom = 1;
            else if (rc)
                return rc;
            continue;
        }
        if (p->line_len >= SSE_MAX_LINE) {
            p->line_cut = 1;
            continue;
        }
        if (grow(&p->line, &p->line_cap, p->line_len + 1) < 0) {
            oom = 1;
            continue;
        }
        p->line[p->line_len++] = ch;
    }
    return oom ? -1 : 0;
}
