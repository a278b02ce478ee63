#include "table.h"

#include <ctype.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct table {
    int ncols, nrows, cap;
    char **cells; /* (nrows + 1) * ncols, row 0 is the header */
};

static char *dup_or_empty(const char *s) {
    if (!s) s = "";
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

table *table_new(int ncols, const char *const *headers) {
    if (ncols < 1) return NULL;
    table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ncols = ncols;
    t->cap = 16;
    t->cells = calloc((size_t)t->cap * (size_t)ncols, sizeof *t->cells);
    if (!t->cells) {
        free(t);
        return NULL;
    }
    for (int c = 0; c < ncols; c++) {
        if (!(t->cells[c] = dup_or_empty(headers ? headers[c] : NULL))) {
            table_free(t);
            return NULL;
        }
    }
    return t;
}

int table_add_row(table *t, const char *const *cells) {
    if (t->nrows + 2 > t->cap) {
        int cap = t->cap * 2;
        char **n = realloc(t->cells, (size_t)cap * (size_t)t->ncols * sizeof *n);
        if (!n) return -1;
        t->cells = n;
        t->cap = cap;
    }
    char **row = t->cells + (size_t)(t->nrows + 1) * (size_t)t->ncols;
    for (int c = 0; c < t->ncols; c++) {
        row[c] = dup_or_empty(cells ? cells[c] : NULL);
        if (!row[c]) {
            for (int k = 0; k < c; k++) free(row[k]);
            return -1;
        }
    }
    t->nrows++;
    return 0;
}

int table_rows(const table *t) { return t ? t->nrows : 0; }

void table_free(table *t) {
    if (!t) return;
    if (t->cells)
        for (size_t i = 0; i < (size_t)(t->nrows + 1) * (size_t)t->ncols; i++) free(t->cells[i]);
    free(t->cells);
    free(t);
}

/* Zero-width code points: combining marks and joiners (the ranges that occur in practice). */
static int is_zero_width(uint32_t c) {
    return (c >= 0x0300 && c <= 0x036F) || (c >= 0x0483 && c <= 0x0489) || (c >= 0x0591 && c <= 0x05BD) ||
           (c >= 0x0610 && c <= 0x061A) || (c >= 0x064B && c <= 0x065F) || (c >= 0x1AB0 && c <= 0x1AFF) ||
           (c >= 0x1DC0 && c <= 0x1DFF) || (c >= 0x200B && c <= 0x200F) || (c >= 0x20D0 && c <= 0x20FF) ||
           (c >= 0xFE00 && c <= 0xFE0F) || (c >= 0xFE20 && c <= 0xFE2F) || c == 0x2060 || c == 0xFEFF;
}

/* Wide code points: East Asian Wide/Fullwidth blocks and the emoji planes. */
static int is_wide(uint32_t c) {
    return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0x303E) || (c >= 0x3041 && c <= 0x33FF) ||
           (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xA000 && c <= 0xA4CF) ||
           (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) ||
           (c >= 0xFF00 && c <= 0xFF60) || (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
           (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD);
}

size_t table_display_width(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t w = 0;
    while (*p) {
        uint32_t c;
        int n;
        if (*p < 0x80)
            c = *p, n = 1;
        else if ((*p & 0xE0) == 0xC0)
            c = *p & 0x1F, n = 2;
        else if ((*p & 0xF0) == 0xE0)
            c = *p & 0x0F, n = 3;
        else if ((*p & 0xF8) == 0xF0)
            c = *p & 0x07, n = 4;
        else {
            w++, p++;
            continue;
        }
        int ok = 1;
        for (int k = 1; k < n; k++) {
            if ((p[k] & 0xC0) != 0x80) {
                ok = 0;
                break;
            }
            c = (c << 6) | (p[k] & 0x3F);
        }
        if (!ok) {
            w++, p++;
            continue;
        }
        p += n;
        if (c < 0x20 || (c >= 0x7F && c < 0xA0)) continue;
        w += is_zero_width(c) ? 0 : is_wide(c) ? 2 : 1;
    }
    return w;
}

/* Code points that may not reach a terminal as they are (see table_safe). */
static int is_unsafe(uint32_t c) {
    return c < 0x20 || (c >= 0x7F && c < 0xA0) || c == 0x061C || c == 0x200E || c == 0x200F ||
           (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || c == 0x2028 || c == 0x2029;
}

const char *table_safe(const char *s, char *buf, size_t cap) {
    if (!cap) return buf;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        uint32_t c = *p;
        int n = 1;
        if (*p >= 0x80) {
            n = (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
            c = n == 2 ? *p & 0x1F : n == 3 ? *p & 0x0F : *p & 0x07;
            for (int k = 1; k < n; k++) {
                if ((p[k] & 0xC0) != 0x80) {
                    n = 0;
                    break;
                }
                c = (c << 6) | (p[k] & 0x3F);
            }
        }
        char esc[12];
        const char *piece = (const char *)p;
        size_t len = (size_t)n;
        if (n == 0 || (c != '\t' && is_unsafe(c))) {
            if (n == 0 || c < 0x80)
                snprintf(esc, sizeof esc, "\\x%02X", *p);
            else
                snprintf(esc, sizeof esc, "\\u%04X", (unsigned)c);
            piece = esc;
            len = strlen(esc);
            if (n == 0) n = 1;
        }
        if (o + len >= cap) break;
        memcpy(buf + o, piece, len);
        o += len;
        p += n;
    }
    buf[o] = 0;
    return buf;
}

int table_is_numeric(const char *s) {
    if (!strcmp(s, "nan") || !strcmp(s, "inf") || !strcmp(s, "-inf") || !strcmp(s, "NaN")) return 1;
    const char *p = s;
    if (*p == '-' || *p == '+') p++;
    int digits = 0;
    while (isdigit((unsigned char)*p)) p++, digits++;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) p++, digits++;
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '-' || *p == '+') p++;
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
    }
    return *p == 0;
}

static void pad(FILE *out, size_t n) {
    while (n--) fputc(' ', out);
}

char *table_safe_dup(const char *s) {
    if (!s) s = "";
    size_t cap = 4 * strlen(s) + 1; /* each byte becomes at most 4 */
    char *d = malloc(cap);
    if (d) table_safe(s, d, cap);
    return d;
}

/* A copy of s fit for a terminal (table_safe), or NULL when out of memory. */
static char *safe_copy(const char *s) {
    size_t cap = 4 * strlen(s) + 1; /* each byte becomes at most 4 */
    char *d = malloc(cap);
    if (d) table_safe(s, d, cap);
    return d;
}

/* Every cell made safe for a terminal: t's cells are its own, the copy freed with free_shown. */
static table *shown_copy(const table *t) {
    table *v = calloc(1, sizeof *v);
    size_t n = (size_t)(t->nrows + 1) * (size_t)t->ncols;
    if (!v || !(v->cells = calloc(n, sizeof *v->cells))) {
        free(v);
        return NULL;
    }
    v->ncols = t->ncols;
    v->nrows = t->nrows;
    for (size_t i = 0; i < n; i++)
        if (!(v->cells[i] = safe_copy(t->cells[i]))) {
            v->nrows = (int)(i / (size_t)t->ncols) - 1; /* table_free frees whole rows only */
            for (size_t k = (size_t)(v->nrows + 1) * (size_t)t->ncols; k < i; k++) free(v->cells[k]);
            table_free(v);
            return NULL;
        }
    return v;
}

static void print_aligned(const table *t, FILE *out);

void table_print(const table *t, FILE *out) {
    table *v = shown_copy(t);
    if (!v) {
        fputs("(out of memory)\n", out);
        return;
    }
    print_aligned(v, out);
    table_free(v);
}

static void print_aligned(const table *t, FILE *out) {
    size_t *width = calloc((size_t)t->ncols, sizeof *width);
    int *right = calloc((size_t)t->ncols, sizeof *right);
    if (!width || !right) {
        /* Without room for the layout the content still matters more than the alignment. */
        free(width);
        free(right);
        table_print_csv(t, out);
        return;
    }
    for (int c = 0; c < t->ncols; c++) {
        int numeric = 1, any = 0;
        for (int r = 0; r <= t->nrows; r++) {
            const char *cell = t->cells[(size_t)r * (size_t)t->ncols + (size_t)c];
            size_t w = table_display_width(cell);
            if (w > width[c]) width[c] = w;
            if (r > 0 && *cell) {
                any = 1;
                if (!table_is_numeric(cell)) numeric = 0;
            }
        }
        right[c] = any && numeric;
    }
    /* Key/value listings have no header: all-empty headers print no line. */
    int first = 1;
    for (int c = 0; c < t->ncols; c++)
        if (*t->cells[c]) first = 0;
    for (int r = first; r <= t->nrows; r++) {
        /* Trailing blanks are dropped: count the columns that still have text to their right. */
        int last = t->ncols - 1;
        while (last > 0 && !*t->cells[(size_t)r * (size_t)t->ncols + (size_t)last]) last--;
        for (int c = 0; c <= last; c++) {
            const char *cell = t->cells[(size_t)r * (size_t)t->ncols + (size_t)c];
            size_t gap = width[c] - table_display_width(cell);
            if (c) fputs("  ", out);
            if (right[c]) pad(out, gap);
            fputs(cell, out);
            if (!right[c] && c < last) pad(out, gap);
        }
        fputc('\n', out);
    }
    free(width);
    free(right);
}

/* Writes one CSV field (quoted when needed). */
static void table_csv_field(const char *s, FILE *out) {
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"') fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

void table_print_csv(const table *t, FILE *out) {
    /* CSV keeps the data as it is, except on a terminal, which gets it as table_print would. */
    table *v = isatty(fileno(out)) ? shown_copy(t) : NULL;
    if (v) t = v;
    for (int r = 0; r <= t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            if (c) fputc(',', out);
            table_csv_field(t->cells[(size_t)r * (size_t)t->ncols + (size_t)c], out);
        }
        fputc('\n', out);
    }
    table_free(v);
}
