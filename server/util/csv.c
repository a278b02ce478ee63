#include "util/csv.h"
#include "util/json_text.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL; 0, or -1 (the buffer failed) when out of memory. */
static int reserve(csv_buf *b, size_t n) {
    if (b->failed) return -1;
    if (n > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return -1;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need) cap *= 2;
    char *g = realloc(b->data, cap);
    if (!g) {
        b->failed = 1;
        return -1;
    }
    b->data = g;
    b->cap = cap;
    return 0;
}

static void add(csv_buf *b, const char *s, size_t n) {
    if (reserve(b, n) < 0) return;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

/* The comma before a cell that is not its row's first. */
static void next_cell(csv_buf *b) {
    if (b->mid_row) add(b, ",", 1);
    b->mid_row = 1;
}

void csv_text(csv_buf *b, const char *s) {
    next_cell(b);
    if (!s) return;
    if (!strpbrk(s, ",\"\r\n")) {
        add(b, s, strlen(s));
        return;
    }
    add(b, "\"", 1);
    for (const char *q; (q = strchr(s, '"')); s = q + 1) {
        add(b, s, (size_t)(q - s) + 1);
        add(b, "\"", 1); /* a quote is written twice */
    }
    add(b, s, strlen(s));
    add(b, "\"", 1);
}

void csv_empty(csv_buf *b, int n) {
    for (int i = 0; i < n; i++) next_cell(b);
}

static void vcell(csv_buf *b, const char *fmt, va_list ap) {
    next_cell(b);
    if (b->failed) return;
    va_list again;
    va_copy(again, ap);
    size_t room = b->cap - b->len; /* 0 before the first byte */
    int n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
    if (n >= 0 && (size_t)n >= room && reserve(b, (size_t)n) == 0)
        n = vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
    va_end(again);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if (!b->failed) b->len += (size_t)n;
}

void csv_cellf(csv_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vcell(b, fmt, ap);
    va_end(ap);
}

void csv_int(csv_buf *b, long long v) { csv_cellf(b, "%lld", v); }

void csv_real(csv_buf *b, double v, int digits) { csv_cellf(b, "%.*g", digits, v); }

void csv_cells(csv_buf *b, const char *cells) {
    next_cell(b);
    add(b, cells, strlen(cells));
}

void csv_number(csv_buf *b, const json_t *v, int digits) {
    if (json_is_integer(v))
        csv_int(b, (long long)json_integer_value(v));
    else if (json_is_real(v))
        csv_real(b, json_real_value(v), digits);
    else
        csv_empty(b, 1);
}

void csv_json(csv_buf *b, const json_t *v, int digits) {
    if (!v || json_is_null(v)) {
        csv_empty(b, 1);
    } else if (json_is_string(v)) {
        csv_text(b, json_string_value(v));
    } else if (json_is_number(v)) {
        csv_number(b, v, digits);
    } else if (json_is_boolean(v)) {
        csv_cells(b, json_is_true(v) ? "true" : "false");
    } else {
        char *t = json_text_dumps(v, JSON_COMPACT);
        if (!t) {
            next_cell(b);
            b->failed = 1;
            return;
        }
        csv_text(b, t);
        free(t);
    }
}

void csv_row_cells(csv_buf *b, const csv_buf *row) {
    if (row->failed) b->failed = 1;
    if (!row->mid_row) return;
    next_cell(b);
    add(b, row->data, row->len);
}

void csv_end_row(csv_buf *b) {
    add(b, "\n", 1);
    b->mid_row = 0;
}

char *csv_take(csv_buf *b, size_t *len) {
    if (!b->data) add(b, "", 0); /* an empty text is "", not NULL */
    char *text = b->failed ? NULL : b->data;
    if (len) *len = text ? b->len : 0;
    if (!text) free(b->data);
    *b = (csv_buf){0};
    return text;
}

void csv_free(csv_buf *b) {
    free(b->data);
    *b = (csv_buf){0};
}
