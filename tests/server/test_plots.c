/* An experiment's figures as SVG (GET /api/experiments/{id}/plot.svg), against a real attnlabd with
 * a trained 2 x 3 experiment (rope and cosine_rope, three replicates each): each kind is an SVG
 * document with a line per variant that has the series (rope learns no tau), labelled with its
 * replicate count; the forest plot has a row per comparison of /stats, its estimate on the side
 * of the zero line that /stats's mean difference says; bad queries are 422 naming the field and an
 * unknown experiment 404; the kind enum of openapi.json is the kinds table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"
#include "services/svc_plots.h"

static harness_server srv;
static long long exp_id;

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

TEST(setup_a_trained_experiment) {
    json_t *runs;
    exp_id = api_create_experiment(
        &srv,
        "{\"name\":\"plots\",\"replicates\":3,\"base\":{" TINY_CONFIG
        ",\"steps\":12,\"checkpoint_every\":0},\"variants\":[{\"name\":\"rope\",\"config\":{"
        "\"attention\":\"rope\"}},{\"name\":\"cosine_rope\",\"config\":{\"attention\":\"cosine_rope\"}}]}",
        &runs);
    CHECK(exp_id > 0);
    size_t n = json_array_size(runs);
    int missed = api_wait_runs(&srv, runs, "succeeded", 120000);
    json_decref(runs);
    CHECK_EQ_INT(n, 6);
    CHECK_EQ_INT(missed, 0);
}

/* GET the figure: 200, image/svg+xml, a whole document; the body (malloc'd) or NULL. */
static char *figure(const char *query) {
    char path[200], ct[96];
    snprintf(path, sizeof path, "/api/experiments/%lld/plot.svg%s", exp_id, query);
    harness_response r;
    if (harness_get(&srv, path, &r) != 0) return NULL;
    char *body = NULL;
    if (r.status == 200 && harness_header(&r, "Content-Type", ct, sizeof ct) && !strncmp(ct, "image/svg+xml", 13) &&
        !strncmp(r.body, "<svg ", 5) && strstr(r.body, "</svg>\n"))
        body = strdup(r.body);
    else
        printf("# %s: HTTP %ld %.200s\n", path, r.status, r.body ? r.body : "");
    harness_response_free(&r);
    return body;
}

TEST(bands_have_a_line_and_a_band_per_variant) {
    CHECK(exp_id > 0);
    char *svg = figure("?kind=bands&key=loss");
    CHECK(svg);
    CHECK_MSG(count(svg, "<polyline") == 2, "%d lines", count(svg, "<polyline"));
    CHECK(count(svg, "<polygon") >= 2);
    CHECK(strstr(svg, ">rope (3 replicates)</text>") && strstr(svg, ">cosine_rope (3 replicates)</text>"));
    CHECK(strstr(svg, "plots: loss"));
    free(svg);
    char *dflt = figure(""); /* kind bands, key val_loss */
    CHECK(dflt && strstr(dflt, "plots: val_loss"));
    free(dflt);
}

TEST(tau_has_a_line_per_head_of_the_variant_that_learns_it) {
    char *svg = figure("?kind=tau");
    CHECK(svg);
    /* TINY_CONFIG: 1 layer x 2 heads; rope has no tau */
    CHECK_MSG(count(svg, "<polyline") == 2, "%d lines", count(svg, "<polyline"));
    CHECK(strstr(svg, ">cosine_rope</text>") && !strstr(svg, ">rope</text>"));
    free(svg);
    char *spread = figure("?kind=head_spread");
    CHECK(spread && count(spread, "<polyline") == 1 && strstr(spread, ">cosine_rope (3 replicates)</text>"));
    free(spread);
}

TEST(forest_rows_follow_the_statistics) {
    long status;
    char path[128];
    snprintf(path, sizeof path, "/api/experiments/%lld/stats", exp_id);
    json_t *st = api_call(&srv, "GET", path, NULL, &status);
    CHECK_EQ_INT(status, 200);
    json_t *c = NULL, *x;
    size_t i;
    json_array_foreach(json_object_get(json_object_get(st, "stats"), "comparisons"), i,
                       x) if (!strcmp(json_string_value(json_object_get(x, "metric")), "final_train_loss")) c = x;
    CHECK(c);
    double diff = json_number_value(json_object_get(c, "mean_diff"));
    char label[160];
    snprintf(label, sizeof label, ">%s - %s (n=3)</text>", json_string_value(json_object_get(c, "a")),
             json_string_value(json_object_get(c, "b")));
    char *svg = figure("?kind=forest&metric=final_train_loss");
    json_decref(st);
    CHECK(svg);
    CHECK_MSG(strstr(svg, label), "no row %s", label);
    CHECK_EQ_INT(count(svg, "<circle"), 1);
    const char *dash = strstr(svg, "stroke-dasharray=\"5 4\""), *l = dash;
    while (l && l > svg && strncmp(l, "<line", 5)) l--;
    double zx = 0, cx = 0;
    CHECK(l && sscanf(l, "<line x1=\"%lf\"", &zx) == 1 &&
          sscanf(strstr(svg, "<circle"), "<circle cx=\"%lf\"", &cx) == 1);
    CHECK_MSG(diff < 0 ? cx < zx : diff > 0 ? cx > zx : cx == zx, "mean_diff %g drawn at %g, zero at %g", diff, cx, zx);
    free(svg);
}

TEST(bad_queries_are_422_and_unknown_experiments_404) {
    static const char *const bad[][2] = {{"?kind=pie", "kind"},
                                         {"?kind=tau&key=loss", "key"},
                                         {"?kind=bands&metric=final_val_loss", "metric"},
                                         {"?kind=forest&key=loss", "key"},
                                         {"?kind=forest&metric=nope", "metric"},
                                         {"?kind=bands&key=no%20such%20key!", "key"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[200];
        snprintf(path, sizeof path, "/api/experiments/%lld/plot.svg%s", exp_id, bad[i][0]);
        long status;
        json_t *j = api_call(&srv, "GET", path, NULL, &status);
        const char *field = json_string_value(json_object_get(json_object_get(j, "error"), "field"));
        CHECK_MSG(status == 422 && field && !strcmp(field, bad[i][1]), "%s: %ld field %s", bad[i][0], status,
                  field ? field : "(none)");
        if (i == 0) { /* an unknown kind: the answer names every kind of the table */
            const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
            CHECK_MSG(msg && strstr(msg, "bands, forest, tau, head_spread"), "message: %s", msg ? msg : "(none)");
        }
        json_decref(j);
    }
    long status;
    json_t *j = api_call(&srv, "GET", "/api/experiments/999999/plot.svg", NULL, &status);
    CHECK_EQ_INT(status, 404);
    json_decref(j);
}

/* The kind enum of plot.svg in openapi.json names exactly the rows of svc_plot_kinds, in order (a
 * new kind must be described too). */
TEST(openapi_kind_enum_is_the_kinds_table) {
    long code;
    json_t *doc = api_call(&srv, "GET", "/api/openapi.json", NULL, &code);
    CHECK_EQ_INT(code, 200);
    json_t *params = json_object_get(
        json_object_get(json_object_get(json_object_get(doc, "paths"), "/api/experiments/{id}/plot.svg"), "get"),
        "parameters");
    json_t *en = NULL, *p;
    size_t i;
    json_array_foreach(params, i, p) {
        const char *name = json_string_value(json_object_get(p, "name"));
        if (name && !strcmp(name, "kind")) en = json_object_get(json_object_get(p, "schema"), "enum");
    }
    CHECK(json_is_array(en));
    size_t n = 0;
    for (const svc_plot_kind *k = svc_plot_kinds; k->name; k++, n++) {
        const char *got = json_string_value(json_array_get(en, n));
        CHECK_MSG(got && !strcmp(got, k->name), "kind %zu: openapi.json says '%s', the table '%s'", n,
                  got ? got : "(none)", k->name);
    }
    CHECK_MSG(json_array_size(en) == n, "openapi.json lists %zu kinds, the table has %zu", json_array_size(en), n);
    json_decref(doc);
}

static void cases(void) {
    RUN(setup_a_trained_experiment);
    RUN(bands_have_a_line_and_a_band_per_variant);
    RUN(tau_has_a_line_per_head_of_the_variant_that_learns_it);
    RUN(forest_rows_follow_the_statistics);
    RUN(bad_queries_are_422_and_unknown_experiments_404);
    RUN(openapi_kind_enum_is_the_kinds_table);
}

int main(void) { return api_suite_main(&srv, NULL, cases); }
