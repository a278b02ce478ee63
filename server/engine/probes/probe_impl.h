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

/* ---- parameter rows -----------------------------------------------------------------------
 * A kind's table (probe_kind.params) is written with these, one row per parameter, so that a
 * parameter several kinds share is defined once. The first group is one row of each type:
 * name, help, then what that type has (probe.h: default, bounds, list lengths). A list's default
 * is a static array, its length taken from the array; a list takes 1 to max_len items. */
#define PROBE_ROW_INT(name_, help_, def_, min_, max_)                                                                  \
    { .name = (name_), .type = PROBE_PARAM_INT, .help = (help_), .def = (def_), .min = (min_), .max = (max_) }
#define PROBE_ROW_NUMBER(name_, help_, def_, min_, max_)                                                               \
    { .name = (name_), .type = PROBE_PARAM_NUMBER, .help = (help_), .def = (def_), .min = (min_), .max = (max_) }
#define PROBE_ROW_TEXT(name_, help_, def_, max_len_)                                                                   \
    { .name = (name_), .type = PROBE_PARAM_TEXT, .help = (help_), .def_str = (def_), .max_len = (max_len_) }
#define PROBE_ROW_CHOICE(name_, help_, def_, choices_)                                                                 \
    { .name = (name_), .type = PROBE_PARAM_CHOICE, .help = (help_), .def_str = (def_), .choices = (choices_) }
#define PROBE_ROW_LIST_(type_, name_, help_, min_, max_, defs_, max_len_)                                              \
    {                                                                                                                  \
        .name = (name_), .type = (type_), .help = (help_), .min = (min_), .max = (max_), .def_list = (defs_),          \
        .def_len = (int)(sizeof(defs_) / sizeof((defs_)[0])), .min_len = 1, .max_len = (max_len_)                      \
    }
#define PROBE_ROW_INT_LIST(name_, help_, min_, max_, defs_, max_len_)                                                  \
    PROBE_ROW_LIST_(PROBE_PARAM_INT_LIST, name_, help_, min_, max_, defs_, max_len_)
#define PROBE_ROW_NUMBER_LIST(name_, help_, min_, max_, defs_, max_len_)                                               \
    PROBE_ROW_LIST_(PROBE_PARAM_NUMBER_LIST, name_, help_, min_, max_, defs_, max_len_)
/* A vector (default null: drawn at random) of min_len to max_len numbers in [min, max]. */
#define PROBE_ROW_VECTOR(name_, help_, min_, max_, min_len_, max_len_)                                                 \
    {                                                                                                                  \
        .name = (name_), .type = PROBE_PARAM_VECTOR, .help = (help_), .min = (min_), .max = (max_),                    \
        .min_len = (min_len_), .max_len = (max_len_)                                                                   \
    }

/* The parameters several kinds share. "d": a rotary vector's dimension (the kind checks it is
 * even), from 2 to max; "base": the rotary base; "seed": a seed, 1234 by default, help saying what
 * it draws. */
#define PROBE_ROW_D(def_, max_) PROBE_ROW_INT("d", "vector dimension (even)", def_, 2, max_)
#define PROBE_ROW_BASE PROBE_ROW_NUMBER("base", "rotary base", 10000, 1.5, 1e7)
#define PROBE_ROW_SEED(help_) PROBE_ROW_INT("seed", help_, 1234, 0, 2147483647)
#define PROBE_ROW_RANDOM_SEED PROBE_ROW_SEED("random seed")
/* The model probes': "text" (its default given: probe_model_default_text is the passage of the
 * kinds that read more tokens than a short sentence has), "max_tokens" (64 by default; at most
 * PROBE_MODEL_MAX_TOKENS, or one more where the last is only a target) and "ks", how many keys each
 * query keeps (at most PROBE_MODEL_MAX_KS values, each at most PROBE_MODEL_MAX_TOKENS). */
#define PROBE_MODEL_MAX_TOKENS 256
#define PROBE_MODEL_MAX_KS 16
extern const char probe_model_default_text[];
#define PROBE_ROW_MODEL_TEXT(def_, max_len_) PROBE_ROW_TEXT("text", "text to run through the model", def_, max_len_)
#define PROBE_ROW_MAX_TOKENS(help_, min_, max_) PROBE_ROW_INT("max_tokens", help_, 64, min_, max_)
#define PROBE_ROW_MODEL_KS(defs_)                                                                                      \
    PROBE_ROW_INT_LIST("ks", "how many keys each query keeps", 1, PROBE_MODEL_MAX_TOKENS, defs_, PROBE_MODEL_MAX_KS)

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
/* Column names for probe_table_cols: a new array of names[0..n), or NULL on allocation failure. */
json_t *probe_cols(const char *const *names, int n);
/* Appends the name printed from fmt (at most 127 bytes) to cols and returns cols; on failure, or
 * for a NULL cols, frees cols and returns NULL (which probe_table_cols records as oom), so a
 * kind can chain the calls and hand the result over unchecked. */
json_t *probe_cols_add(json_t *cols, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends the table "vectors" (component, q, k) of the d-vectors q and k a kind drew. */
void probe_vectors_table(probe_out *out, const double *q, const double *k, int d);
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
/* One forward pass of a model probe over ids[0..T): q and k ([L][H][T][head_dim], before the
 * rotary embedding; only when with_qk), the weights w ([L][H][T][T]) and, when with_tau, tau
 * ([L][H]); the arrays not asked for stay NULL. Allocated here: free with probe_model_pass_free,
 * also after an error. Errors: ENGINE_ERR_NOMEM, or the adapter's (field "run"). */
typedef struct {
    float *q, *k, *w, *tau;
} probe_model_pass;
engine_status probe_model_forward(const probe_model *m, const int *ids, int T, int with_qk, int with_tau,
                                  probe_model_pass *pass, probe_error *err);
void probe_model_pass_free(probe_model_pass *pass);
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
