/* context_extension: where each pair's angle lands when a model trained to length L is asked about
 * L' = s L, untouched and under the three usual repairs: position interpolation (every theta / s),
 * NTK-aware base (base * s^(d/(d-2)): the slowest pair lands exactly at theta/s, the fastest
 * stays at 1 rad/token), and YaRN (per-pair ramp between the two by rotations seen in training,
 * plus an attention temperature 0.1 ln s + 1). Seed 003's table is the d=16 case. */
#include <math.h>
#include <stdlib.h>

#include "probe_impl.h"
#include "rope_math.h"

static const probe_param params[] = {
    PROBE_ROW_INT("trained_length", "context length seen in training", 512, 1, 1000000),
    PROBE_ROW_INT("target_length", "context length asked for", 4096, 1, 100000000),
    PROBE_ROW_INT("d", "head dimension (even, at least 4)", 16, 4, 4096),
    PROBE_ROW_BASE,
    PROBE_ROW_NUMBER("yarn_alpha", "YaRN: below this many training rotations a pair is interpolated", 1, 0, 1e6),
    PROBE_ROW_NUMBER("yarn_beta", "YaRN: above this many training rotations a pair is left alone", 32, 0, 1e6),
};

enum { S_TRAINED, S_UNTOUCHED, S_PI, S_NTK, S_YARN, N_STRAT };
static const char *const strat_names[N_STRAT] = {"trained", "untouched", "position_interpolation", "ntk_aware", "yarn"};

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    double L = (double)probe_p_int(p, "trained_length"), Lt = (double)probe_p_int(p, "target_length");
    int d = (int)probe_p_int(p, "d"), h = d / 2;
    double base = probe_p_num(p, "base"), alpha = probe_p_num(p, "yarn_alpha"), beta = probe_p_num(p, "yarn_beta");
    if (d % 2) return probe_fail(err, ENGINE_ERR_INVALID, "d", "d must be even (got %d)", d);
    if (Lt < L)
        return probe_fail(err, ENGINE_ERR_INVALID, "target_length",
                          "target_length (%.0f) must be at least trained_length (%.0f)", Lt, L);
    if (beta <= alpha)
        return probe_fail(err, ENGINE_ERR_INVALID, "yarn_beta", "yarn_beta (%g) must exceed yarn_alpha (%g)", beta,
                          alpha);
    double s = Lt / L, ntk_base = base * pow(s, (double)d / (d - 2));

    double *th = malloc(sizeof(double) * (size_t)(4 * h));
    if (!th) return probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    double *th_ntk = th + h, *th_yarn = th_ntk + h, *ramp = th_yarn + h;
    probe_rope_thetas(d, base, th);
    probe_rope_thetas(d, ntk_base, th_ntk);
    for (int i = 0; i < h; i++) {
        double r = L * th[i] / (2 * M_PI); /* turns made across the training context */
        double g = r < alpha ? 0 : r > beta ? 1 : (r - alpha) / (beta - alpha);
        ramp[i] = g;
        th_yarn[i] = (1 - g) * th[i] / s + g * th[i];
    }

    static const char *const cols[] = {"pair",          "theta",           "wavelength", "turns_in_training",
                                       "angle_trained", "angle_untouched", "angle_pi",   "angle_ntk",
                                       "angle_yarn",    "yarn_ramp"};
    json_t *rows = probe_table(out, "pairs", cols, 10);
    for (int i = 0; i < h; i++) {
        double row[10] = {i,          th[i],          2 * M_PI / th[i], L * th[i] / (2 * M_PI), L * th[i],
                          Lt * th[i], Lt * th[i] / s, Lt * th_ntk[i],   Lt * th_yarn[i],        ramp[i]};
        probe_row_nums(out, rows, row, 10);
    }

    /* Per strategy: the position used and the per-token speed of the fastest and slowest pairs. */
    double pos[N_STRAT] = {L, Lt, Lt, Lt, Lt};
    double fast[N_STRAT] = {th[0], th[0], th[0] / s, th_ntk[0], th_yarn[0]};
    double slow[N_STRAT] = {th[h - 1], th[h - 1], th[h - 1] / s, th_ntk[h - 1], th_yarn[h - 1]};
    static const char *const scols[] = {"strategy",      "position",     "slowest_angle",
                                        "fastest_angle", "fastest_step", "slowest_vs_trained"};
    rows = probe_table(out, "strategies", scols, 6);
    for (int k = 0; k < N_STRAT; k++)
        probe_row(out, rows, "sddddd", strat_names[k], pos[k], pos[k] * slow[k], pos[k] * fast[k], fast[k],
                  pos[k] * slow[k] / (L * th[h - 1]));
    probe_summary_num(out, "scale", s);
    probe_summary_num(out, "ntk_base", ntk_base);
    probe_summary_num(out, "yarn_attention_factor", 0.1 * log(s) + 1);
    probe_summary_num(out, "slowest_trained", L * th[h - 1]);
    probe_summary_num(out, "slowest_untouched", Lt * th[h - 1]);
    probe_summary_num(out, "slowest_pi", Lt * th[h - 1] / s);
    probe_summary_num(out, "slowest_ntk", Lt * th_ntk[h - 1]);
    probe_summary_num(out, "slowest_yarn", Lt * th_yarn[h - 1]);
    probe_summary_num(out, "fastest_step_trained", th[0]);
    probe_summary_num(out, "fastest_step_pi", th[0] / s);
    probe_summary_num(out, "fastest_step_ntk", th_ntk[0]);
    probe_summary_num(out, "fastest_step_yarn", th_yarn[0]);
    probe_summary_num(out, "slowest_turn_fraction_in_training", L * th[h - 1] / (2 * M_PI));
    free(th);

    static const char *const y[] = {"angle_trained", "angle_untouched", "angle_pi", "angle_ntk", "angle_yarn", NULL};
    probe_chart(out, "pairs", "line", "pair", y, "angle reached by each pair at the target length", 0);
    static const char *const sy[] = {"slowest_angle", NULL};
    probe_chart(out, "strategies", "bar", "strategy", sy, "slowest pair's angle by strategy", 0);
    return ENGINE_OK;
}

const probe_kind probe_kind_context_extension = {
    .name = "context_extension",
    .title = "Context extension: PI, NTK, YaRN",
    .description = "pair angles past the trained length: untouched, position interpolation, NTK-aware base, YaRN",
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .run = run,
};
