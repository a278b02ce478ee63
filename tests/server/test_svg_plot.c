/* The SVG charts (server/util/svg_plot.h) on inputs whose drawing is known: coordinates on nice
 * axes, a gap where a value is missing, escaped text, colours that cannot break out of their
 * attribute, a forest plot's zero line and its rows in order, the same bytes for the same input,
 * and a long line drawn with few points yet within a quarter pixel of its data. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "util/svg_plot.h"

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* x, y of the first point of the first polyline */
static int first_point(const char *svg, double *x, double *y) {
    const char *p = strstr(svg, "<polyline");
    p = p ? strstr(p, "points=\"") : NULL;
    return p && sscanf(p + 8, "%lf,%lf", x, y) == 2 ? 0 : -1;
}

TEST(a_line_maps_onto_its_nice_axes) {
    /* x 0..10 and y 0..1 are their own nice ranges: (0,0) is the plot's bottom-left corner and
     * (10,1) its top-right, at 720 x 420 with no title, note or legend: x0 64, y0 14, w 640, h 362 */
    double x[] = {0, 5, 10}, y[] = {0, 0.8, 1};
    svg_series s = {.x = x, .y = y, .n = 3, .color = "#123456"};
    svg_frame f = {0};
    char *svg = svg_line_chart(&f, &s, 1);
    CHECK(svg);
    CHECK(!strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"420\"", 63));
    double px, py;
    CHECK(first_point(svg, &px, &py) == 0);
    CHECK_MSG(fabs(px - 64) < 1e-9 && fabs(py - (14 + 362)) < 1e-9, "first point at %g,%g", px, py);
    CHECK_MSG(strstr(svg, "384,86.4 704,14 "), "middle and last points: %s", strstr(svg, "points="));
    CHECK(strstr(svg, "stroke=\"#123456\""));
    /* ticks every 2 on x (0..10) and every 0.2 on y, labelled with the step's decimals */
    CHECK(strstr(svg, ">0.2</text>") && strstr(svg, ">10</text>") && !strstr(svg, ">0.20000"));
    char *again = svg_line_chart(&f, &s, 1);
    CHECK(again && !strcmp(svg, again));
    free(again);
    free(svg);
}

TEST(a_missing_value_is_a_gap_and_a_band_is_shaded_under_its_line) {
    double x[] = {1, 2, 3, 4, 5}, y[] = {1, 2, NAN, 4, 5}, lo[] = {0.5, 1.5, NAN, 3.5, 4.5},
           hi[] = {1.5, 2.5, NAN, 4.5, 5.5};
    svg_series s = {.x = x, .y = y, .lo = lo, .hi = hi, .n = 5, .label = "v", .color = "#0072B2"};
    svg_frame f = {.title = "t"};
    char *svg = svg_line_chart(&f, &s, 1);
    CHECK(svg);
    CHECK_MSG(count(svg, "<polyline") == 2, "%d polylines", count(svg, "<polyline"));
    CHECK_MSG(count(svg, "<polygon") == 2, "%d band pieces", count(svg, "<polygon"));
    /* "nan" only inside the word "dominant-baseline"; no "inf" anywhere: no coordinate is not finite */
    CHECK(count(svg, "nan") == count(svg, "dominant") && !strstr(svg, "inf"));
    CHECK(strstr(svg, "<polygon") < strstr(svg, "<polyline")); /* bands under the lines */
    free(svg);
}

TEST(text_is_escaped_and_a_colour_cannot_break_out) {
    double x[] = {0, 1}, y[] = {0, 1};
    svg_series s = {.x = x, .y = y, .n = 2, .label = "a<b & \"c\"", .color = "red\"/><script>"};
    svg_frame f = {.title = "</svg><script>alert(1)</script>", .note = "it's"};
    char *svg = svg_line_chart(&f, &s, 1);
    CHECK(svg);
    CHECK(!strstr(svg, "<script>"));
    CHECK(strstr(svg, "&lt;/svg&gt;&lt;script&gt;") && strstr(svg, "a&lt;b &amp; &quot;c&quot;") &&
          strstr(svg, "it&#39;s"));
    CHECK(strstr(svg, "stroke=\"#0072B2\"")); /* the default colour instead */
    CHECK_EQ_INT(count(svg, "</svg>"), 1);
    free(svg);
}

TEST(a_forest_has_its_zero_line_and_rows_in_order) {
    svg_forest_row rows[] = {{"a - b", -0.5, -1, 0, -0.9, -0.1, "#0072B2"},
                             {"a - c", 1, 0.5, 1.5, NAN, NAN, "#D55E00"}};
    svg_frame f = {.title = "diff"};
    char *svg = svg_forest(&f, rows, 2, "t interval", "bootstrap");
    CHECK(svg);
    /* x axis -1..1.5 (0.5 steps): the zero line sits at 40% of the plot's width from its left */
    const char *dash = strstr(svg, "stroke-dasharray=\"5 4\"");
    CHECK(dash);
    double zx = 0;
    const char *l = dash;
    while (l > svg && strncmp(l, "<line", 5)) l--;
    CHECK(sscanf(l, "<line x1=\"%lf\"", &zx) == 1);
    double x0 = 210, w = 720 - 210 - 24;
    CHECK_MSG(fabs(zx - (x0 + 0.4 * w)) < 1e-6, "zero line at %g", zx);
    /* the two estimates: the first left of zero, the second right, in row order */
    const char *c1 = strstr(svg, "<circle"), *c2 = c1 ? strstr(c1 + 1, "<circle") : NULL;
    double cx1 = 0, cx2 = 0;
    CHECK(c1 && c2 && sscanf(c1, "<circle cx=\"%lf\"", &cx1) == 1 && sscanf(c2, "<circle cx=\"%lf\"", &cx2) == 1);
    CHECK(cx1 < zx && cx2 > zx);
    CHECK(strstr(svg, ">a - b</text>") < strstr(svg, ">a - c</text>"));
    CHECK_EQ_INT(count(svg, "stroke-dasharray=\"4 3\""), 2); /* row 1's bootstrap interval and the legend's */
    free(svg);
}

/* The points of the first polyline, in pixels, into px/py (at most cap); their count. */
static size_t polyline_points(const char *svg, double *px, double *py, size_t cap) {
    const char *p = strstr(svg, "<polyline");
    p = p ? strstr(p, "points=\"") : NULL;
    if (!p) return 0;
    p += 8;
    size_t n = 0;
    int used = 0;
    while (n < cap && *p != '"' && sscanf(p, "%lf,%lf %n", &px[n], &py[n], &used) == 2) p += used, n++;
    return n;
}

static double seg_distance(double x, double y, double ax, double ay, double bx, double by) {
    double dx = bx - ax, dy = by - ay, len2 = dx * dx + dy * dy, t = 0;
    if (len2 > 0) t = fmax(0, fmin(1, ((x - ax) * dx + (y - ay) * dy) / len2));
    return hypot(x - (ax + t * dx), y - (ay + t * dy));
}

TEST(a_long_line_is_drawn_at_the_pages_resolution_and_keeps_its_shape) {
    /* 20,000 points of a slow wave with one spike: far fewer points drawn, the ends and the spike
     * among them, and every point of the data within 0.25 px (+ the 0.01-px rounding) of the line
     * drawn; the axes as in the first test (x 0..10 on 64..704 px, y 0..1 on 376..14 px) */
    enum { N = 20000 };
    static double x[N], y[N], dx[N], dy[N];
    for (int i = 0; i < N; i++) {
        x[i] = 10.0 * i / (N - 1);
        y[i] = 0.5 + 0.4 * sin(x[i]);
    }
    y[7000] = 1;
    y[0] = 0;
    svg_series s = {.x = x, .y = y, .n = N, .color = "#123456"};
    svg_frame f = {0};
    char *svg = svg_line_chart(&f, &s, 1);
    CHECK(svg);
    size_t m = polyline_points(svg, dx, dy, N);
    CHECK_MSG(m >= 4 && m < 400, "%zu of %d points drawn", m, N);
    CHECK(m >= 2 && fabs(dx[0] - 64) < 1e-9 && fabs(dy[0] - 376) < 1e-9 && fabs(dx[m - 1] - 704) < 1e-9);
    double spike_x = 64 + 640 * x[7000] / 10, worst = 0;
    int spike = 0;
    for (size_t k = 0; k < m; k++) spike |= fabs(dx[k] - spike_x) < 0.006 && fabs(dy[k] - 14) < 0.006;
    CHECK_MSG(spike, "the spike at x %.3f px is not drawn", spike_x);
    for (int i = 0; i < N; i++) {
        double qx = 64 + 640 * x[i] / 10, qy = 376 - 362 * y[i], best = INFINITY;
        for (size_t k = 0; k + 1 < m; k++) best = fmin(best, seg_distance(qx, qy, dx[k], dy[k], dx[k + 1], dy[k + 1]));
        worst = fmax(worst, best);
    }
    CHECK_MSG(worst <= 0.25 + 0.015, "a point of the data is %.3f px from the line drawn", worst);
    free(svg);
}

int main(void) {
    RUN(a_line_maps_onto_its_nice_axes);
    RUN(a_missing_value_is_a_gap_and_a_band_is_shaded_under_its_line);
    RUN(text_is_escaped_and_a_colour_cannot_break_out);
    RUN(a_forest_has_its_zero_line_and_rows_in_order);
    RUN(a_long_line_is_drawn_at_the_pages_resolution_and_keeps_its_shape);
    return test_summary();
}
