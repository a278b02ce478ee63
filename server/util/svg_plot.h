/* Charts as SVG text, for figures a reader would rather look at than read: a line chart with
 * shaded bands (replicate bands over steps, tau per head) and a forest plot (paired differences
 * with their intervals and the zero line). Pure functions of their inputs: no I/O, no state; the
 * same input gives the same bytes. Text is XML-escaped; non-finite values break a line (a gap),
 * never a coordinate. */
#ifndef ATTNLAB_SVG_PLOT_H
#define ATTNLAB_SVG_PLOT_H

#include <stddef.h>

typedef struct {
    const char *title;   /* drawn above the plot (may be NULL) */
    const char *x_label; /* under the x axis (may be NULL) */
    const char *y_label; /* beside the y axis (may be NULL) */
    const char *note;    /* one line under the chart in small type (may be NULL) */
    int width, height;   /* pixels; 0 takes 720 x 420 */
} svg_frame;

/* One line of a line chart: n points (x[i], y[i]); with lo and hi (both non-NULL) a band from lo
 * to hi is shaded under the line in the same colour. thin: a replicate or per-head line, drawn
 * fine and without a legend entry of its own when label is NULL. */
typedef struct {
    const double *x, *y, *lo, *hi;
    size_t n;
    const char *label; /* legend text (NULL: none) */
    const char *color; /* "#rrggbb" */
    int thin;
} svg_series;

/* A line chart of n series on shared linear axes fitted to every finite value (bands included).
 * Returns a malloc'd NUL-terminated SVG document, or NULL when out of memory. */
char *svg_line_chart(const svg_frame *f, const svg_series *s, size_t n);

/* One row of a forest plot: an estimate with an interval [lo, hi] (drawn as a bar with a dot) and
 * optionally a second interval [lo2, hi2] (drawn thinner beneath it; NaN: none). */
typedef struct {
    const char *label;
    double est, lo, hi, lo2, hi2;
    const char *color;
} svg_forest_row;

/* A forest plot of n rows, one per line, on an x axis that always includes 0 (the dashed "no
 * difference" line). legend1/legend2 name the two kinds of interval (NULL: no legend). Returns a
 * malloc'd SVG document, or NULL when out of memory. */
char *svg_forest(const svg_frame *f, const svg_forest_row *rows, size_t n, const char *legend1, const char *legend2);

/* The colour of the i-th of several series when no name fixes one (the dashboard's cycle). */
const char *svg_cycle_color(size_t i);

#endif
