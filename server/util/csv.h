/* CSV text (RFC 4180) as the API answers it, built in one growable buffer: cells are appended one at
 * a time and separated by commas, a row ends with "\n" (not CRLF). A text cell is quoted when it
 * holds a comma, a quote, a CR or an LF, its quotes written twice; numbers are written as the caller
 * asks (%lld for integers, %.<digits>g for reals: every CSV of the API names its own precision).
 *
 * Usage: csv_buf b = {0}; csv_text(&b, "a"); csv_int(&b, 1); csv_end_row(&b); then csv_take. An
 * allocation failure marks the buffer failed; every later call does nothing and csv_take answers
 * NULL, so callers check once at the end. */
#ifndef ATTNLAB_CSV_H
#define ATTNLAB_CSV_H

#include <jansson.h>
#include <stddef.h>

typedef struct {
    char *data;  /* the text so far, NUL-terminated (NULL before the first byte) */
    size_t len;  /* its length, without the NUL */
    size_t cap;  /* bytes allocated at data */
    int failed;  /* an allocation failed: the text is incomplete */
    int mid_row; /* a cell was written on the current row: the next one starts with a comma */
} csv_buf;

/* One text cell: s as it is, or in quotes with each quote doubled when it holds ',', '"', CR or LF.
 * NULL is an empty cell. */
void csv_text(csv_buf *b, const char *s);

/* n empty cells (n <= 0: none). */
void csv_empty(csv_buf *b, int n);

/* One integer cell, %lld. */
void csv_int(csv_buf *b, long long v);

/* One real cell, printf's %.<digits>g (nan, inf as printf writes them). */
void csv_real(csv_buf *b, double v, int digits);

/* One cell written by printf from fmt, as it is (never quoted: for numbers in a fixed format such as
 * "%.3f"; the caller guarantees the result needs no quoting). */
void csv_cellf(csv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Several cells given as their text, e.g. a fixed header "step,wall_time", written as they are
 * (never quoted; the caller guarantees they need none). An empty string is one empty cell. */
void csv_cells(csv_buf *b, const char *cells);

/* A JSON number as one cell: an integer %lld, a real %.<digits>g; anything else (null, absent,
 * text) is an empty cell. */
void csv_number(csv_buf *b, const json_t *v, int digits);

/* Any JSON value as one cell: a string as csv_text, a number as csv_number, true/false, an array or
 * object as its compact JSON text (quoted as text); null or absent (v NULL) an empty cell. */
void csv_json(csv_buf *b, const json_t *v, int digits);

/* The cells of row, a buffer holding one row not ended, appended as cells of b's current row: a run
 * of cells the same on many rows is formatted once. Nothing when row holds no cell; a failed row
 * fails b. */
void csv_row_cells(csv_buf *b, const csv_buf *row);

/* Ends the current row: "\n"; the next cell starts a new row. */
void csv_end_row(csv_buf *b);

/* The text, for the caller to free(): NUL-terminated, also when empty; *len (when len is not NULL)
 * its length. NULL (and the buffer freed) when an allocation failed. b is empty afterwards. */
char *csv_take(csv_buf *b, size_t *len);

/* Frees the text; b is empty afterwards (and may be used again). */
void csv_free(csv_buf *b);

#endif
