/* Text tables for the terminal and for CSV.
 *
 * Cells are UTF-8 strings, copied in. Aligned output pads by display width (what a terminal shows:
 * combining marks take no column, East Asian wide characters and emoji take two), so "τ" or "√d"
 * in a header does not shift the columns. A column whose non-empty cells all look like numbers is
 * right-aligned; the rest are left-aligned. Lines carry no trailing blanks. */
#ifndef ATTNLAB_TABLE_H
#define ATTNLAB_TABLE_H

#include <stddef.h>
#include <stdio.h>

typedef struct table table;

/* A table with these column headers (copied). NULL when out of memory or ncols < 1. */
table *table_new(int ncols, const char *const *headers);
/* Appends a row of ncols cells (copied; NULL cells are empty). -1 when out of memory. */
int table_add_row(table *t, const char *const *cells);
int table_rows(const table *t);
/* Aligned columns separated by two spaces, a header line (none when every header is ""), then
 * the rows. */
void table_print(const table *t, FILE *out);
/* RFC 4180 CSV: header line then rows; cells with a comma, quote, CR or LF are quoted. */
void table_print_csv(const table *t, FILE *out);
void table_free(table *t);

/* s made safe to show on a terminal, into buf (cap bytes, always terminated, cut on a character
 * boundary): every control character (C0 but tab, DEL, C1: ESC sequences, CR, BEL...) becomes
 * \xHH or \uHHHH, and so does every bidirectional control (U+061C, U+200E, U+200F, U+202A..U+202E,
 * U+2066..U+2069) and line or paragraph separator, so that text from the server (names, notes,
 * messages) can neither drive the terminal nor reorder what is shown; invalid UTF-8 bytes become
 * \xHH. Returns buf. */
const char *table_safe(const char *s, char *buf, size_t cap);
/* The same as a malloc'd copy of any length (NULL when out of memory; s NULL is ""). */
char *table_safe_dup(const char *s);

/* Columns that s takes on a terminal. Invalid UTF-8 bytes count one column each. */
size_t table_display_width(const char *s);
/* 1 when s reads as a number (optional sign, digits, '.', exponent; also nan, inf). */
int table_is_numeric(const char *s);

#endif
