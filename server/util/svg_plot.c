/* SVG charts (svg_plot.h): a fixed layout (margins for the title, the axes' ticks and labels, a
 * legend on the right) and numbers written with %.6g, so a chart's bytes depend only on its input;
 * lines simplified to the drawing's resolution (TOL_PX). */
#include "util/svg_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CYCLE[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                    "#56B4E9", "#7B4EA3", "#000000", "#8C564B", "#7F7F7F"};

const char *svg_cycle_color(size_t i) { return CYCLE[i % (sizeof CYCLE / sizeof CYCLE[0])]; }

/* XML text: & < > " ' escaped; control characters dropped. */
static void put_text(FILE *o, const char *s) {
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&')
            fputs("&amp;", o);
        else if (c == '<')
            fputs("&lt;", o);
        else if (c == '>')
            fputs("&gt;", o);
        else if (c == '"')
            fputs("&quot;", o);
        else if (c == '\'')
            fputs("&#39;", o);
        else if (c >= 0x20 || c == '\t')
            fputc(c, o);
    }
}

/* A colour attribute: "#rrggbb" as given, anything else the first cycle colour (a colour is never
 * written unchecked into the document). */
static const char *color_of(const char *c) {
    if (c && c[0] == '#' && strlen(c) == 7 && strspn(c + 1, "0123456789abcdefABCDEF") == 6) return c;
    return CYCLE[0];
}

/* Ticks at 1, 2 or 5 times a power of ten, about `want` of them over [lo, hi]. */
typedef struct {
    double lo, hi, step;
    int n;
} ticks;

static ticks nice_ticks(double lo, double hi, int want) {
    ticks t = {lo, hi, 1, 0};
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.05 : 1;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / (want > 1 ? want : 2), mag = pow(10, floor(log10(raw))), f = raw / mag;
    t.step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
    t.lo = floor(lo / t.step) * t.step;
    t.hi = ceil(hi / t.step) * t.step;
    t.n = (int)llround((t.hi - t.lo) / t.step) + 1;
    return t;
}

/* A tick's label: the value rounded to the tick step's decimals, "-0" written "0". */
static void tick_label(char *buf, size_t len, double v, double step) {
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 8) dec = 8;
    if (fabs(v) < step * 1e-6) v = 0;
    snprintf(buf, len, "%.*f", dec, v);
}

typedef struct {
    double x0, y0, w, h; /* the plot area in pixels */
    ticks tx, ty;
} area;

static double px(const area *a, double x) { return a->x0 + (x - a->tx.lo) / (a->tx.hi - a->tx.lo) * a->w; }
static double py(const area *a, double y) { return a->y0 + a->h - (y - a->ty.lo) / (a->ty.hi - a->ty.lo) * a->h; }

static void header(FILE *o, const svg_frame *f, int W, int H) {
    fprintf(o,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
            W, H, W, H);
    if (f->title) {
        fputs("<text x=\"12\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", o);
        put_text(o, f->title);
        fputs("</text>\n", o);
    }
    if (f->note) {
        fprintf(o, "<text x=\"12\" y=\"%d\" font-size=\"11\" fill=\"#555555\">", H - 8);
        put_text(o, f->note);
        fputs("</text>\n", o);
    }
}

/* Grid lines and tick labels of both axes (x_ticks 0: the x axis has category rows instead). */
static void axes(FILE *o, const area *a, const svg_frame *f, int x_ticks, int y_ticks) {
    char lab[48];
    fprintf(o, "<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
    for (int i = 0; y_ticks && i < a->ty.n; i++)
        fprintf(o, "<line x1=\"%.6g\" x2=\"%.6g\" y1=\"%.6g\" y2=\"%.6g\"/>\n", a->x0, a->x0 + a->w,
                py(a, a->ty.lo + i * a->ty.step), py(a, a->ty.lo + i * a->ty.step));
    for (int i = 0; x_ticks && i < a->tx.n; i++)
        fprintf(o, "<line x1=\"%.6g\" x2=\"%.6g\" y1=\"%.6g\" y2=\"%.6g\"/>\n", px(a, a->tx.lo + i * a->tx.step),
                px(a, a->tx.lo + i * a->tx.step), a->y0, a->y0 + a->h);
    fprintf(o, "</g>\n<rect x=\"%.6g\" y=\"%.6g\" width=\"%.6g\" height=\"%.6g\" fill=\"none\" stroke=\"#888888\"/>\n",
            a->x0, a->y0, a->w, a->h);
    for (int i = 0; y_ticks && i < a->ty.n; i++) {
        double v = a->ty.lo + i * a->ty.step;
        tick_label(lab, sizeof lab, v, a->ty.step);
        fprintf(o, "<text x=\"%.6g\" y=\"%.6g\" text-anchor=\"end\" dominant-baseline=\"middle\">%s</text>\n",
                a->x0 - 6, py(a, v), lab);
    }
    for (int i = 0; x_ticks && i < a->tx.n; i++) {
        double v = a->tx.lo + i * a->tx.step;
        tick_label(lab, sizeof lab, v, a->tx.step);
        fprintf(o, "<text x=\"%.6g\" y=\"%.6g\" text-anchor=\"middle\">%s</text>\n", px(a, v), a->y0 + a->h + 16, lab);
    }
    if (f->x_label) {
        fprintf(o, "<text x=\"%.6g\" y=\"%.6g\" text-anchor=\"middle\">", a->x0 + a->w / 2, a->y0 + a->h + 34);
        put_text(o, f->x_label);
        fputs("</text>\n", o);
    }
    if (f->y_label) {
        fprintf(o, "<text transform=\"translate(16 %.6g) rotate(-90)\" text-anchor=\"middle\">", a->y0 + a->h / 2);
        put_text(o, f->y_label);
        fputs("</text>\n", o);
    }
}

static void legend_entry(FILE *o, double x, double y, const char *color, const char *label, int dashed) {
    fprintf(o, "<line x1=\"%.6g\" x2=\"%.6g\" y1=\"%.6g\" y2=\"%.6g\" stroke=\"%s\" stroke-width=\"3\"%s/>\n", x,
            x + 18, y, y, color_of(color), dashed ? " stroke-dasharray=\"4 3\"" : "");
    fprintf(o, "<text x=\"%.6g\" y=\"%.6g\" dominant-baseline=\"middle\">", x + 24, y);
    put_text(o, label);
    fputs("</text>\n", o);
}

/* Closes the document; *buf (open_memstream's, valid only after fclose) is the answer or NULL. */
static char *finish(FILE *o, char **buf) {
    fputs("</svg>\n", o);
    int bad = ferror(o);
    if (fclose(o) != 0 || bad) {
        free(*buf);
        return NULL;
    }
    return *buf;
}

/* Lines are drawn at the page's resolution, not the data's: a run of points is simplified
 * (Ramer-Douglas-Peucker on pixel coordinates) so that every point left out lies within TOL_PX of
 * the drawn segment that replaces it, and coordinates are rounded to 0.01 px. A 5,000-step curve
 * on a 600-px axis then takes a few hundred points instead of thousands, and looks the same. */
#define TOL_PX 0.25

/* Scratch for simplify(): pixel coordinates, the kept marks and the pending ranges of one run. */
typedef struct {
    double *x, *y;
    unsigned char *keep;
    size_t *stack;
} simp;

static int simp_init(simp *sc, size_t n) {
    sc->x = malloc((n ? n : 1) * sizeof *sc->x);
    sc->y = malloc((n ? n : 1) * sizeof *sc->y);
    sc->keep = malloc(n ? n : 1);
    sc->stack = malloc(2 * (n ? n : 1) * sizeof *sc->stack);
    return sc->x && sc->y && sc->keep && sc->stack ? 0 : -1;
}

static void simp_free(simp *sc) {
    free(sc->x);
    free(sc->y);
    free(sc->keep);
    free(sc->stack);
}

/* Distance from (x, y) to the segment (ax, ay)-(bx, by). */
static double seg_dist(double x, double y, double ax, double ay, double bx, double by) {
    double dx = bx - ax, dy = by - ay, len2 = dx * dx + dy * dy, t = 0;
    if (len2 > 0) t = fmax(0, fmin(1, ((x - ax) * dx + (y - ay) * dy) / len2));
    return hypot(x - (ax + t * dx), y - (ay + t * dy));
}

/* Ramer-Douglas-Peucker keeps at most this many points apart, so a run of n points costs at most
 * n * SIMP_BLOCK distances whatever its shape (a block's ends are kept: a few points more). */
#define SIMP_BLOCK 256

/* Marks in sc->keep[0..n) the points of sc->x/y to draw: both ends, and every point that is
 * farther than TOL_PX from the segment between the kept points around it (iteratively: no
 * recursion however long the run). */
static void simplify(simp *sc, size_t n) {
    memset(sc->keep, 0, n);
    if (!n) return;
    sc->keep[0] = sc->keep[n - 1] = 1;
    size_t top = 0;
    for (size_t a = 0; a + 1 < n; a += SIMP_BLOCK) {
        size_t b = a + SIMP_BLOCK < n - 1 ? a + SIMP_BLOCK : n - 1;
        sc->keep[b] = 1;
        if (b - a > 1) sc->stack[top++] = a, sc->stack[top++] = b;
    }
    while (top) {
        size_t b = sc->stack[--top], a = sc->stack[--top], far = a;
        double worst = TOL_PX;
        for (size_t i = a + 1; i < b; i++) {
            double d = seg_dist(sc->x[i], sc->y[i], sc->x[a], sc->y[a], sc->x[b], sc->y[b]);
            if (d > worst) worst = d, far = i;
        }
        if (far == a) continue;
        sc->keep[far] = 1;
        if (far - a > 1) sc->stack[top++] = a, sc->stack[top++] = far;
        if (b - far > 1) sc->stack[top++] = far, sc->stack[top++] = b;
    }
}

/* A pixel coordinate to 0.01 px ("-0" never written). */
static double px_round(double v) {
    v = round(v * 100) / 100;
    return v == 0 ? 0 : v;
}

/* Fills sc with the pixel coordinates of points m in [i, j) of (x, ys), simplified. */
static void run_points(simp *sc, const area *a, const double *x, const double *ys, size_t i, size_t j) {
    for (size_t m = i; m < j; m++) sc->x[m - i] = px(a, x[m]), sc->y[m - i] = py(a, ys[m]);
    simplify(sc, j - i);
}

/* Writes the kept points of the run sc holds (n of them), forwards or backwards. */
static void put_run(FILE *o, const simp *sc, size_t n, int backwards) {
    for (size_t k = 0; k < n; k++) {
        size_t m = backwards ? n - 1 - k : k;
        if (sc->keep[m]) fprintf(o, "%.6g,%.6g ", px_round(sc->x[m]), px_round(sc->y[m]));
    }
}

static void grow(double v, double *lo, double *hi) {
    if (!isfinite(v)) return;
    if (v < *lo) *lo = v;
    if (v > *hi) *hi = v;
}

char *svg_line_chart(const svg_frame *f, const svg_series *s, size_t n) {
    int W = f->width > 0 ? f->width : 720, H = f->height > 0 ? f->height : 420;
    char *buf = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&buf, &len);
    if (!o) return NULL;
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    size_t labelled = 0;
    for (size_t k = 0; k < n; k++) {
        if (s[k].label) labelled++;
        for (size_t i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i]) || !isfinite(s[k].x[i])) continue;
            grow(s[k].x[i], &xlo, &xhi);
            grow(s[k].y[i], &ylo, &yhi);
            if (s[k].lo && s[k].hi) {
                grow(s[k].lo[i], &ylo, &yhi);
                grow(s[k].hi[i], &ylo, &yhi);
            }
        }
    }
    if (!isfinite(xlo)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
    size_t longest_run = 0;
    for (size_t k = 0; k < n; k++)
        if (s[k].n > longest_run) longest_run = s[k].n;
    simp sc;
    if (simp_init(&sc, longest_run) < 0) {
        simp_free(&sc);
        fclose(o);
        free(buf);
        return NULL;
    }
    /* the legend as wide as its longest label (about 7 px a character at 12 px), at most a third */
    size_t longest = 0;
    for (size_t k = 0; k < n; k++)
        if (s[k].label && strlen(s[k].label) > longest) longest = strlen(s[k].label);
    double legend_w = labelled ? fmin(44 + 7.0 * (double)longest, W / 3.0) : 0;
    area a = {.x0 = 64, .y0 = f->title ? 36 : 14, .tx = nice_ticks(xlo, xhi, 6), .ty = nice_ticks(ylo, yhi, 6)};
    a.w = W - a.x0 - 16 - legend_w;
    a.h = H - a.y0 - 44 - (f->note ? 16 : 0);
    header(o, f, W, H);
    axes(o, &a, f, 1, 1);
    fprintf(
        o,
        "<defs><clipPath id=\"plot\"><rect x=\"%.6g\" y=\"%.6g\" width=\"%.6g\" height=\"%.6g\"/></clipPath></defs>\n"
        "<g clip-path=\"url(#plot)\">\n",
        a.x0, a.y0, a.w, a.h);
    /* bands first, under every line; each band is split where a value is missing */
    for (size_t k = 0; k < n; k++) {
        if (!s[k].lo || !s[k].hi) continue;
        for (size_t i = 0; i < s[k].n;) {
            size_t j = i;
            while (j < s[k].n && isfinite(s[k].lo[j]) && isfinite(s[k].hi[j]) && isfinite(s[k].x[j])) j++;
            if (j - i >= 2) {
                fprintf(o, "<polygon fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" points=\"",
                        color_of(s[k].color));
                run_points(&sc, &a, s[k].x, s[k].hi, i, j);
                put_run(o, &sc, j - i, 0);
                run_points(&sc, &a, s[k].x, s[k].lo, i, j);
                put_run(o, &sc, j - i, 1);
                fputs("\"/>\n", o);
            }
            i = j + 1;
        }
    }
    for (size_t k = 0; k < n; k++) {
        fprintf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"", color_of(s[k].color),
                s[k].thin ? "1" : "2.2", s[k].thin ? " stroke-opacity=\"0.7\"" : "");
        int open = 0; /* a run of finite points is one piece; a missing value starts another */
        for (size_t i = 0; i < s[k].n;) {
            size_t j = i;
            while (j < s[k].n && isfinite(s[k].y[j]) && isfinite(s[k].x[j])) j++;
            if (j == i) {
                i++;
                continue;
            }
            if (open)
                fprintf(o, "\"/>\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"",
                        color_of(s[k].color), s[k].thin ? "1" : "2.2", s[k].thin ? " stroke-opacity=\"0.7\"" : "");
            run_points(&sc, &a, s[k].x, s[k].y, i, j);
            put_run(o, &sc, j - i, 0);
            open = 1;
            i = j;
        }
        fputs("\"/>\n", o);
    }
    simp_free(&sc);
    fputs("</g>\n", o);
    double ly = a.y0 + 10;
    for (size_t k = 0; k < n; k++) {
        if (!s[k].label) continue;
        legend_entry(o, a.x0 + a.w + 14, ly, s[k].color, s[k].label, 0);
        ly += 20;
    }
    return finish(o, &buf);
}

/* Characters of a UTF-8 string (for the width its label needs). */
static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; s && *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

char *svg_forest(const svg_frame *f, const svg_forest_row *rows, size_t n, const char *legend1, const char *legend2) {
    /* the labels' column: as wide as the longest label at about 7 px a character (12 px text) */
    size_t longest = 0;
    for (size_t i = 0; i < n; i++)
        if (utf8_chars(rows[i].label) > longest) longest = utf8_chars(rows[i].label);
    double x0 = 16 + 7.0 * (double)longest;
    if (x0 < 210) x0 = 210;
    if (x0 > 600) x0 = 600;
    int W = f->width > 0 ? f->width : (int)x0 + 510;
    int H = f->height > 0 ? f->height : (int)(100 + 34 * (n ? n : 1) + (f->note ? 16 : 0) + (legend1 ? 22 : 0));
    char *buf = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&buf, &len);
    if (!o) return NULL;
    double lo = 0, hi = 0; /* the axis always holds the zero line */
    for (size_t i = 0; i < n; i++) {
        grow(rows[i].est, &lo, &hi);
        grow(rows[i].lo, &lo, &hi);
        grow(rows[i].hi, &lo, &hi);
        grow(rows[i].lo2, &lo, &hi);
        grow(rows[i].hi2, &lo, &hi);
    }
    area a = {.x0 = x0, .y0 = f->title ? 40 : 16, .tx = nice_ticks(lo, hi, 6), .ty = {0, 1, 1, 0}};
    a.w = W - a.x0 - 24;
    a.h = 34.0 * (n ? n : 1);
    header(o, f, W, H);
    axes(o, &a, f, 1, 0);
    fprintf(o, "<line x1=\"%.6g\" x2=\"%.6g\" y1=\"%.6g\" y2=\"%.6g\" stroke=\"#333333\" stroke-dasharray=\"5 4\"/>\n",
            px(&a, 0), px(&a, 0), a.y0, a.y0 + a.h);
    for (size_t i = 0; i < n; i++) {
        double y = a.y0 + 17 + 34.0 * i;
        const char *c = color_of(rows[i].color);
        fprintf(o, "<text x=\"%.6g\" y=\"%.6g\" text-anchor=\"end\" dominant-baseline=\"middle\">", a.x0 - 8, y);
        put_text(o, rows[i].label);
        fputs("</text>\n", o);
        if (isfinite(rows[i].lo) && isfinite(rows[i].hi))
            fprintf(o, "<line x1=\"%.6g\" x2=\"%.6g\" y1=\"%.6g\" y2=\"%.6g\" stroke=\"%s\" stroke-width=\"3\"/>\n",
                    px(&a, rows[i].lo), px(&a, rows[i].hi), y - 3, y - 3, c);
        if (isfinite(rows[i].lo2) && isfinite(rows[i].hi2))
            fprintf(o,
                    "<line x1=\"%.6g\" x2=\"%.6g\" y1=\"%.6g\" y2=\"%.6g\" stroke=\"%s\" stroke-width=\"1.5\" "
                    "stroke-dasharray=\"4 3\"/>\n",
                    px(&a, rows[i].lo2), px(&a, rows[i].hi2), y + 5, y + 5, c);
        if (isfinite(rows[i].est))
            fprintf(o, "<circle cx=\"%.6g\" cy=\"%.6g\" r=\"5\" fill=\"%s\"/>\n", px(&a, rows[i].est), y - 3, c);
    }
    if (legend1) {
        double ly = a.y0 + a.h + 48;
        legend_entry(o, a.x0, ly, "#333333", legend1, 0);
        if (legend2) legend_entry(o, a.x0 + 260, ly, "#333333", legend2, 1);
    }
    return finish(o, &buf);
}
