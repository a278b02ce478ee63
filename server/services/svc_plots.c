/* Figures of an experiment as SVG (svc_plots.h): the statistics service's bands and comparisons,
 * drawn by util/svg_plot. */
#include "services/svc_plots.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services/app.h"
#include "services/svc_stats.h"
#include "util/svg_plot.h"

static svc_status oom(svc_error *err) { return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory"); }

/* The experiment's name for a title ("experiment N" when it has none or cannot be read). */
static void experiment_title(app *a, long long id, const char *what, char *buf, size_t len) {
    json_t *e = NULL;
    const char *name = NULL;
    if (store_experiment_get(a->store, id, &e) == STORE_OK) name = json_string_value(json_object_get(e, "name"));
    if (name && *name)
        snprintf(buf, len, "%s: %s", name, what);
    else
        snprintf(buf, len, "experiment %lld: %s", id, what);
    json_decref(e);
}

/* One series per variant band: x steps, y mean, band min..max (the arrays carved from one block). */
typedef struct {
    svg_series *s;
    double *block;
    char (*labels)[96];
    size_t n;
} series_set;

static void series_set_free(series_set *ss) {
    free(ss->s);
    free(ss->block);
    free(ss->labels);
    memset(ss, 0, sizeof *ss);
}

/* Appends the bands of b (one series per variant with points) to ss, coloured by variant index and
 * labelled "variant (n replicates)" or, with head, "variant L.H"; thin lines without a band when
 * `lines` is set. 0, or -1 when out of memory. */
static int add_bands(series_set *ss, const svc_stats_bands *b, const char *head, int lines) {
    size_t pts = 0, add = 0;
    for (size_t v = 0; v < b->n; v++)
        if (b->variants[v].n_points) pts += b->variants[v].n_points, add++;
    if (!add) return 0;
    svg_series *s = realloc(ss->s, (ss->n + add) * sizeof *s);
    if (!s) return -1;
    ss->s = s;
    char(*labels)[96] = realloc(ss->labels, (ss->n + add) * sizeof *labels);
    if (!labels) return -1;
    ss->labels = labels;
    for (size_t k = 0; k < ss->n; k++) ss->s[k].label = labels[k]; /* the array may have moved */
    /* the earlier series point into the old block: copy it into the grown one and re-point them */
    size_t old = 0;
    for (size_t k = 0; k < ss->n; k++) old += 4 * ss->s[k].n;
    double *block = malloc((old + 4 * pts) * sizeof *block);
    if (!block) return -1;
    if (old) memcpy(block, ss->block, old * sizeof *block);
    size_t off = 0;
    for (size_t k = 0; k < ss->n; k++) {
        size_t n = ss->s[k].n;
        ss->s[k].x = block + off;
        ss->s[k].y = block + off + n;
        ss->s[k].lo = ss->s[k].lo ? block + off + 2 * n : NULL;
        ss->s[k].hi = ss->s[k].hi ? block + off + 3 * n : NULL;
        off += 4 * n;
    }
    free(ss->block);
    ss->block = block;
    for (size_t v = 0; v < b->n; v++) {
        const svc_stats_band *band = &b->variants[v];
        size_t n = band->n_points;
        if (!n) continue;
        double *x = block + off, *y = x + n, *lo = y + n, *hi = lo + n;
        int reps = 0;
        for (size_t i = 0; i < n; i++) {
            x[i] = (double)band->points[i].step;
            y[i] = band->points[i].mean;
            lo[i] = band->points[i].min;
            hi[i] = band->points[i].max;
            if ((int)band->points[i].n > reps) reps = (int)band->points[i].n;
        }
        off += 4 * n;
        char *label = ss->labels[ss->n];
        if (head)
            snprintf(label, sizeof ss->labels[0], "%s %s", band->variant, head);
        else
            snprintf(label, sizeof ss->labels[0], "%s (%d replicate%s)", band->variant, reps, reps == 1 ? "" : "s");
        ss->s[ss->n++] = (svg_series){.x = x,
                                      .y = y,
                                      .lo = lines ? NULL : lo,
                                      .hi = lines ? NULL : hi,
                                      .n = n,
                                      .label = label,
                                      .color = svg_cycle_color(v),
                                      .thin = lines};
    }
    return 0;
}

static svc_status plot_bands(app *a, long long id, const char *key, const char *title_what, const char *y_label,
                             char **svg, svc_error *err) {
    svc_stats_bands b;
    svc_status st = svc_stats_bands_get(a, id, key, &b, err);
    if (st != SVC_OK) return st;
    series_set ss = {0};
    if (add_bands(&ss, &b, NULL, 0) < 0) {
        svc_stats_bands_free(&b);
        series_set_free(&ss);
        return oom(err);
    }
    svc_stats_bands_free(&b);
    char title[200];
    experiment_title(a, id, title_what, title, sizeof title);
    svg_frame f = {.title = title,
                   .x_label = "step",
                   .y_label = y_label,
                   .note = ss.n ? "line: mean over replicates; shaded: their min-max range"
                                : "no run of this experiment has this series yet"};
    *svg = svg_line_chart(&f, ss.s, ss.n);
    series_set_free(&ss);
    return *svg ? SVC_OK : oom(err);
}

/* tau.L.H for every head of the experiment's runs (the largest n_layer x n_head among them, read
 * from each variant's first run): one thin line per variant and head. */
static svc_status plot_tau(app *a, long long id, char **svg, svc_error *err) {
    svc_stats_bands b;
    svc_status st = svc_stats_bands_get(a, id, "tau.mean", &b, err);
    if (st != SVC_OK) return st;
    long L = 0, H = 0;
    for (size_t v = 0; v < b.n; v++) {
        json_t *first = json_array_get(b.variants[v].runs, 0), *run = NULL;
        long long rid = (long long)json_integer_value(json_object_get(first, "id"));
        if (rid > 0 && store_run_get(a->store, rid, &run) == STORE_OK) {
            json_t *cfg = json_object_get(run, "config");
            long l = (long)json_integer_value(json_object_get(cfg, "n_layer"));
            long h = (long)json_integer_value(json_object_get(cfg, "n_head"));
            if (l > L) L = l;
            if (h > H) H = h;
        }
        json_decref(run);
    }
    svc_stats_bands_free(&b);
    if (L > 64) L = 64;
    if (H > 64) H = 64;
    series_set ss = {0};
    for (long l = 0; l < L; l++)
        for (long h = 0; h < H; h++) {
            char key[32], head[24];
            snprintf(key, sizeof key, "tau.%ld.%ld", l, h);
            snprintf(head, sizeof head, "L%ld.H%ld", l, h);
            if ((st = svc_stats_bands_get(a, id, key, &b, err)) != SVC_OK) {
                series_set_free(&ss);
                return st;
            }
            int rc = add_bands(&ss, &b, head, 1);
            svc_stats_bands_free(&b);
            if (rc < 0) {
                series_set_free(&ss);
                return oom(err);
            }
        }
    /* one legend entry per variant: the first head's line carries it */
    for (size_t k = 0; k < ss.n; k++) {
        char *sp = strchr(ss.labels[k], ' ');
        int first_of_variant = 1;
        for (size_t j = 0; j < k; j++)
            if (ss.s[j].color == ss.s[k].color) first_of_variant = 0;
        if (!first_of_variant)
            ss.s[k].label = NULL;
        else if (sp)
            *sp = '\0';
    }
    char title[200];
    experiment_title(a, id, "tau per head", title, sizeof title);
    svg_frame f = {.title = title,
                   .x_label = "step",
                   .y_label = "tau",
                   .note = ss.n ? "one line per head (layer.head), the mean over the variant's replicates"
                                : "no variant of this experiment learns a temperature"};
    *svg = svg_line_chart(&f, ss.s, ss.n);
    series_set_free(&ss);
    return *svg ? SVC_OK : oom(err);
}

static double num_at(json_t *arr, size_t i) {
    json_t *v = json_array_get(arr, i);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static svc_status plot_forest(app *a, long long id, const char *metric, char **svg, svc_error *err) {
    svc_stats_options o;
    svc_stats_options_default(&o);
    json_t *stats = NULL;
    svc_status st = svc_stats_experiment(a, id, &o, &stats, err);
    if (st != SVC_OK) return st;
    int known = 0;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(stats, "metrics"), i, m) {
        const char *name = json_string_value(json_object_get(m, "name"));
        if (name && !strcmp(name, metric)) known = 1;
    }
    if (!known) {
        json_decref(stats);
        return svc_fail(err, SVC_INVALID, "invalid_field", "metric", "metric must be one of the statistics' metrics");
    }
    json_t *comps = json_object_get(stats, "comparisons");
    size_t n = 0;
    svg_forest_row *rows = calloc(json_array_size(comps) + 1, sizeof *rows);
    char(*labels)[120] = calloc(json_array_size(comps) + 1, sizeof *labels);
    if (!rows || !labels) {
        free(rows);
        free(labels);
        json_decref(stats);
        return oom(err);
    }
    json_t *c;
    json_array_foreach(comps, i, c) {
        const char *cm = json_string_value(json_object_get(c, "metric"));
        if (!cm || strcmp(cm, metric)) continue;
        json_t *mean = json_object_get(c, "mean_diff");
        snprintf(labels[n], sizeof labels[0], "%s - %s (n=%lld)", json_string_value(json_object_get(c, "a")),
                 json_string_value(json_object_get(c, "b")), (long long)json_integer_value(json_object_get(c, "n")));
        rows[n] = (svg_forest_row){.label = labels[n],
                                   .est = json_is_number(mean) ? json_number_value(mean) : NAN,
                                   .lo = num_at(json_object_get(c, "ci"), 0),
                                   .hi = num_at(json_object_get(c, "ci"), 1),
                                   .lo2 = num_at(json_object_get(c, "bootstrap_ci"), 0),
                                   .hi2 = num_at(json_object_get(c, "bootstrap_ci"), 1),
                                   .color = svg_cycle_color(n)};
        n++;
    }
    char title[200], what[120], note[160];
    snprintf(what, sizeof what, "paired differences of %s", metric);
    experiment_title(a, id, what, title, sizeof title);
    snprintf(note, sizeof note,
             "pairs by replicate (same seed and data order); intervals at %.0f%%, bootstrap %lld resamples",
             100 * o.conf,
             (long long)json_integer_value(json_object_get(json_object_get(stats, "bootstrap"), "resamples")));
    svg_frame f = {.title = title,
                   .x_label = "difference a - b (left of the dashed line: a is lower)",
                   .note = n ? note : "fewer than two variants with succeeded runs: nothing to compare"};
    *svg = svg_forest(&f, rows, n, "t interval", "bootstrap interval");
    free(rows);
    free(labels);
    json_decref(stats);
    return *svg ? SVC_OK : oom(err);
}

/* The kinds' drawings, one signature: arg is the key or metric (the kind's default when none). */
static svc_status draw_bands(app *a, long long id, const char *key, char **svg, svc_error *err) {
    return plot_bands(a, id, key, key, key, svg, err);
}

static svc_status draw_head_spread(app *a, long long id, const char *arg, char **svg, svc_error *err) {
    return plot_bands(a, id, "tau.spread", "tau spread over heads (max - min)", "tau max - min", svg, err);
}

static svc_status draw_tau(app *a, long long id, const char *arg, char **svg, svc_error *err) {
    return plot_tau(a, id, svg, err);
}

const svc_plot_kind svc_plot_kinds[] = {
    {"bands", "val_loss", "key", "per variant: the mean of a series over its replicates with their min-max band",
     draw_bands},
    {"forest", "final_val_loss", "metric",
     "paired differences between variants with their t and bootstrap intervals and the zero line", plot_forest},
    {"tau", NULL, NULL, "tau per head over steps: one line per variant and head, the mean over replicates", draw_tau},
    {"head_spread", NULL, NULL, "per variant: max - min of tau over its heads at each step, mean and band",
     draw_head_spread},
    {NULL, NULL, NULL, NULL, NULL},
};

svc_status svc_plot_experiment(app *a, long long exp_id, const char *kind, const char *arg, char **svg,
                               svc_error *err) {
    *svg = NULL;
    const svc_plot_kind *k = svc_plot_kinds;
    while (k->name && !(kind && !strcmp(kind, k->name))) k++;
    if (!k->name) { /* the error lists the table's kinds */
        char names[160] = "";
        for (const svc_plot_kind *p = svc_plot_kinds; p->name; p++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", p->name);
        }
        return svc_fail(err, SVC_INVALID, "invalid_field", "kind", "kind must be one of %s", names);
    }
    if (arg && !k->arg_name)
        return svc_fail(err, SVC_INVALID, "invalid_field", "key", "kind %s takes no key or metric", k->name);
    return k->draw(a, exp_id, arg ? arg : k->default_arg, svg, err);
}
