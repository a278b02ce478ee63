/* pair_turns: how far each rotary pair turns over a gap, and how many pairs have not yet wrapped
 * (a wrapped pair cannot tell gap from gap minus one period; seed 002's "stack of rulers"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe_impl.h"
#include "rope_math.h"

#define MAX_GAPS 32

static const double def_gaps[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};

static const probe_param params[] = {
    PROBE_ROW_D(64, 4096),
    PROBE_ROW_BASE,
    PROBE_ROW_INT_LIST("gaps", "distances between query and key", 1, 1e9, def_gaps, MAX_GAPS),
};

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    int d = (int)probe_p_int(p, "d");
    if (d % 2) return probe_fail(err, ENGINE_ERR_INVALID, "d", "d must be even (got %d)", d);
    double base = probe_p_num(p, "base"), gaps[MAX_GAPS];
    int ng = probe_p_list(p, "gaps", gaps, MAX_GAPS), h = d / 2;
    double *theta = malloc(sizeof(double) * (size_t)h);
    double *row = malloc(sizeof(double) * (size_t)(3 + ng));
    if (!theta || !row) {
        free(theta);
        free(row);
        return probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    }
    probe_rope_thetas(d, base, theta);

    static const char *const fixed[] = {"pair", "theta", "wavelength"};
    json_t *cols = probe_cols(fixed, 3);
    for (int g = 0; g < ng; g++) cols = probe_cols_add(cols, "turns_gap_%.0f", gaps[g]);
    json_t *rows = probe_table_cols(out, "turns", cols);
    for (int i = 0; i < h; i++) {
        row[0] = i, row[1] = theta[i], row[2] = 2 * M_PI / theta[i];
        for (int g = 0; g < ng; g++) row[3 + g] = gaps[g] * theta[i] / (2 * M_PI);
        probe_row_nums(out, rows, row, 3 + ng);
    }

    static const char *const icols[] = {"gap", "pairs_inside_first_turn", "fraction"};
    rows = probe_table(out, "inside_first_turn", icols, 3);
    for (int g = 0; g < ng; g++) {
        int inside = 0;
        for (int i = 0; i < h; i++) inside += gaps[g] * theta[i] < 2 * M_PI;
        probe_row(out, rows, "did", gaps[g], inside, (double)inside / h);
        if (g == 0) probe_summary_int(out, "inside_at_first_gap", inside);
        if (g == ng - 1) probe_summary_int(out, "inside_at_last_gap", inside);
    }
    probe_summary_int(out, "pairs", h);
    probe_summary_num(out, "slowest_wavelength", 2 * M_PI / theta[h - 1]);
    free(theta);
    free(row);

    static const char *const iy[] = {"pairs_inside_first_turn", NULL};
    probe_chart(out, "inside_first_turn", "line", "gap", iy, "pairs still inside their first turn", 1);
    const char *ty[MAX_GAPS + 1] = {NULL};
    json_t *tcols = json_object_get(json_array_get(json_object_get(out->result, "tables"), 0), "columns");
    for (int g = 0; g < ng && tcols; g++) ty[g] = json_string_value(json_array_get(tcols, (size_t)(3 + g)));
    probe_chart(out, "turns", "line", "pair", ty, "turns per pair at each gap", 0);
    return ENGINE_OK;
}

const probe_kind probe_kind_pair_turns = {
    .name = "pair_turns",
    .title = "Pairs inside their first turn",
    .description = "turns per rotary pair over each gap, and how many pairs are still inside their first turn",
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .run = run,
};
