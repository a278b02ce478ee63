/* For the probe kinds themselves: reading resolved parameters and building the result.
 *
 * The builders never fail loudly: an allocation failure sets out->oom and later calls do nothing,
 * so a kind can build its tables straight through and probe_run turns oom into ENGINE_ERR_NOMEM. */
#ifndef PROBE_IMPL_H
#define PROBE_IMPL_H

#include "probe.h"
#include "probe_estimate.h"

struct probe_out {
    json_t *result; /* {"kind","params","summary","tables","charts"} */
    int oom;
};

/* Parameters (already validated, so these cannot fail). */
long probe_p_int(const json_t *params, const char *name);
double probe_p_num(const json_t *params, const char *name);
const char *probe_p_str(const json_t *params, const char *name);
/* Copies up to cap items of a list (or vector) parameter; returns the list's length, or -1 when
 * a VECTOR parameter is null. */
int probe_p_list(const json_t *params, const char *name, double *out, int cap);

/* 1 once ctx's cancel flag is set (never for a NULL ctx or flag): the run should stop and return
 * probe_fail(err, ENGINE_ERR_CANCELLED, ...). */
int probe_cancelled(const probe_context *ctx);

/* Fills err (field may be "") and returns status. */
engine_status probe_fail(probe_error *err, engine_status status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Summary figures. Non-finite numbers are stored as null. */
void probe_summary_num(probe_out *out, const char *key, double v);
void probe_summary_int(probe_out *out, const char *key, long v);
void probe_summary_str(probe_out *out, const char *key, const char *v);
/* A yes/no figure, written as JSON true (v non-zero) or false. */
void probe_summary_bool(probe_out *out, const char *key, int v);

/* A table with ncols columns; returns its rows array (borrowed), or NULL after oom. */
json_t *probe_table(probe_out *out, const char *name, const char *const *cols, int ncols);
/* Same, column names built by the caller (the array is stolen). */
json_t *probe_table_cols(probe_out *out, const char *name, json_t *cols);
/* Appends a row of n numbers. */
void probe_row_nums(probe_out *out, json_t *rows, const double *v, int n);
/* Appends a row described by fmt, one letter per cell: 'd' double, 'i' int, 's' string. */
void probe_row(probe_out *out, json_t *rows, const char *fmt, ...);

/* A chart over table `table`: x column, ys columns (NULL-terminated). */
void probe_chart(probe_out *out, const char *table, const char *type, const char *x, const char *const *ys,
                 const char *title, int log_x);
/* The same with more of the hint (probe.h): log axes and reference lines. */
typedef struct {
    int log_x, log_y;
    const char *reference; /* a column of ys the others are read against (drawn dashed), or NULL */
    double y_line;         /* a horizontal reference line at y_line, when has_y_line */
    int has_y_line;
} probe_chart_opts;
void probe_chart_with(probe_out *out, const char *table, const char *type, const char *x, const char *const *ys,
                      const char *title, const probe_chart_opts *opts);

/* A number cell: json real, or null when v is not finite. NULL only on oom. */
json_t *probe_json_num(double v);

/* For the model probes: tokenizes text through the adapter, keeping at most max_tokens (and
 * the model's max_seq) ids; writes their count (>= 1) and whether text was cut. Checks that the
 * model's buffers (n_layer * n_head * T * T floats) stay under a fixed bound. Errors name the field
 * ("text" for text that yields no token, "max_tokens" when the buffers would be too big). */
engine_status probe_model_tokens(const probe_model *m, const char *text, int max_tokens, int *ids, int *n,
                                 int *truncated, probe_error *err);
/* The token window of a model probe whose parameters may hold "ids" (a list: used when non-empty),
 * "window" (a validation window index, -1: none) and "text", in that order of preference; a run
 * without a text tokenizer falls back to validation window 0. At most min(max_tokens, max_seq + 1)
 * tokens (the last of max_seq + 1 only ever a target), at least 2. source gets "ids", "text" or
 * "validation window N". Errors name the field ("ids", "window", "text", "max_tokens"). */
engine_status probe_model_input(const probe_model *m, const json_t *params, int max_tokens, int *ids, int *n,
                                int *truncated, char *source, size_t source_len, probe_error *err);
/* Appends the table "tokens" (index, id, piece). */
void probe_model_token_table(probe_out *out, const probe_model *m, const int *ids, int n);

/* The kinds, one file each; probe.c lists them in this order. */
extern const probe_kind probe_kind_rope_invariance;
extern const probe_kind probe_kind_pair_turns;
extern const probe_kind probe_kind_dephasing;
extern const probe_kind probe_kind_context_extension;
extern const probe_kind probe_kind_rotation_check;
extern const probe_kind probe_kind_scaling;
extern const probe_kind probe_kind_cosine_scores;
extern const probe_kind probe_kind_attention_map;
extern const probe_kind probe_kind_topk_prediction;
extern const probe_kind probe_kind_sparse_attention;
extern const probe_kind probe_kind_sparse_cost;

#endif
