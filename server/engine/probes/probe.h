/* Probes: named, deterministic measurements with bounded parameters, answering with tables.
 *
 * A probe kind has a name, a one-line description and a parameter schema (defaults and bounds),
 * so the API and the dashboard can list and validate without knowing the kinds. probe_run takes
 * the kind name and a JSON object of parameters; missing ones take their defaults, unknown ones
 * are refused, and every numeric one (and every list length) is bounded, so no request can make a
 * probe allocate without limit or run for seconds (a timing kind: for at most its budget_ms). The
 * same kind and parameters always give the same result (the random seed is a parameter with a
 * fixed default) - except a timing kind (probe_kind.timing), whose figures are measurements of
 * this machine: the same parameters give the same tables, columns and rows but other times, so
 * the service never answers one from the store.
 *
 * The result is a JSON object:
 *   {"kind": name, "params": {every parameter, defaults filled},
 *    "summary": {key figures},
 *    "tables": [{"name":..., "columns":[...], "rows":[[...], ...]}],
 *    "charts": [{"table":..., "type":"line|bar|heatmap", "x":col, "y":[cols], "title":..., "log_x":bool,
 *                "log_y":bool, "reference":col, "y_line":number}]}
 * Cells are numbers, strings or null (a figure that is not finite). A heatmap has an empty y: each
 * row is one line of the map (labelled by column x) and every other column one cell. "reference"
 * (optional) names the y column the others are read against (drawn dashed), "y_line" (optional) a
 * horizontal reference line; a log axis leaves out values that are not positive.
 *
 * Kinds attention_map, topk_prediction and sparse_attention read a trained model through probe_model
 * (below); the caller fills a probe_context with it. The others need no context (NULL is fine). */
#ifndef PROBE_H
#define PROBE_H

#include <jansson.h>
#include <stdatomic.h>

#include "error.h"
#include "sparse.h"

/* The layout of a result, in a stored answer's cache key so that an answer stored in an older layout
 * is computed again rather than served (2: yes/no summary figures are JSON booleans, not 0/1). */
#define PROBE_RESULT_FORMAT 2

typedef enum {
    PROBE_PARAM_INT,         /* JSON integer in [min, max] */
    PROBE_PARAM_NUMBER,      /* JSON number in [min, max] */
    PROBE_PARAM_CHOICE,      /* one of choices (NULL-terminated); default def_str */
    PROBE_PARAM_INT_LIST,    /* array of integers, each in [min, max], length in [min_len, max_len] */
    PROBE_PARAM_NUMBER_LIST, /* array of numbers, same bounds */
    PROBE_PARAM_VECTOR,      /* array of numbers or null (default null: "draw it at random") */
    PROBE_PARAM_TEXT,        /* string of at most max_len bytes; default def_str */
} probe_param_type;

typedef struct {
    const char *name;
    probe_param_type type;
    const char *help;
    double def, min, max;   /* scalar default; bounds of scalars and of list items */
    const double *def_list; /* list default */
    int def_len;
    int min_len, max_len;       /* list lengths; TEXT: max_len bytes */
    const char *def_str;        /* CHOICE and TEXT default */
    const char *const *choices; /* CHOICE: NULL-terminated */
} probe_param;

typedef struct probe_context probe_context;
typedef struct probe_out probe_out;
struct probe_size; /* probe_estimate.h */
struct probe_cost;

typedef struct {
    engine_status status;
    char field[64]; /* the offending parameter, or "" when the fault is not one field's */
    char message[256];
} probe_error;

typedef struct {
    const char *name;
    const char *title; /* a short heading for the dashboard (UTF-8) */
    const char *description;
    const probe_param *params;
    int n_params;
    int needs_model; /* 1: requires ctx->model */
    int timing;      /* 1: the result holds measured times: not deterministic, never answered from the
                        store (svc_probes), and the tests check its shape and that times are finite and
                        positive instead of comparing two runs */
    /* Fills out (see probe_impl.h); params are already validated and complete. A run that loops
     * long polls probe_cancelled(ctx) at safe points and returns ENGINE_ERR_CANCELLED once it says so. */
    engine_status (*run)(probe_out *out, const json_t *params, const probe_context *ctx, probe_error *err);
    /* May be NULL. The work the complete params ask for, bounded before any is done (and before the
     * request waits for a probe worker): ENGINE_ERR_INVALID naming the parameter to lower, with the
     * bound, when it is over. For a kind whose parameters multiply (each bounded alone, not their
     * product); a timing kind is bounded by its budget instead. */
    engine_status (*check)(const json_t *params, probe_error *err);
    /* May be NULL. A model kind's work on a model of a given size, estimated from the complete params
     * before the model is loaded (probe_estimate.h: the service refuses a request over the bounds). */
    void (*estimate)(const json_t *params, const struct probe_size *size, struct probe_cost *cost);
} probe_kind;

/* ---- the model seen by the model probes -------------------------------------------------
 * A small adapter so that the probes depend on no particular model layout: the integrator wraps
 * the engine's loaded model and tokenizer in these function pointers. Every function returns
 * ENGINE_OK or an error (and may fill err). */
typedef struct {
    int n_layer, n_head, head_dim, max_seq; /* head_dim: size of one head's q and k vectors */
    int vocab_size;
    void *self; /* handed back to each function */
    /* Text to token ids: writes the first min(cap, count) ids and the text's full token count to *n.
     * NULL when the run's corpus has no text tokenizer (a task corpus): probes then take token ids
     * or a validation window. */
    engine_status (*tokenize)(void *self, const char *text, int *ids, int cap, int *n, engine_error *err);
    /* Runs the forward pass on ids[0..T) and writes, for every layer l and head h:
     *   q, k  (may be NULL when not wanted): [l][h][t][head_dim], before the rotary embedding;
     *   weights (may be NULL): [l][h][t][s] the causal attention weights (0 for s > t);
     *   tau (may be NULL): [l][h] the head's temperature (cosine attention) or its fixed scale.
     * Buffers are owned by the caller and sized from the fields above. */
    engine_status (*inspect)(void *self, const int *ids, int T, float *q, float *k, float *weights, float *tau,
                             engine_error *err);
    /* A display label for token id (like snprintf: returns the length needed, -1 for a bad id).
     * May be NULL: tokens are then labelled by id. */
    int (*piece)(void *self, int id, char *buf, size_t cap);
    /* How scores are formed, so that probes can recompute them from q and k: rope_base (0: no
     * rotary embedding), rope_half_split (0: pairs (2i, 2i+1); 1: pairs (i, i + head_dim/2)),
     * cosine (1: cos(q,k)/tau; 0: q.k/tau). */
    double rope_base;
    int rope_half_split;
    int cosine;
    /* The mean next-token cross-entropy over ids[0..T) (T >= 2: inputs ids[0..T-1), targets
     * ids[1..T)) with every head's attention under cfg (sparse.h: SPARSE_DENSE, or k >= T - 1, is
     * the dense loss), computed as the run's own evaluation computes it (its precision). May be
     * NULL: no loss is reported then. */
    engine_status (*sparse_loss)(void *self, const int *ids, int T, const sparse_config *cfg, double *loss,
                                 engine_error *err);
    /* Validation window `index` (taken modulo val_windows) of the run's own corpus as its evaluation
     * reads it: its seq_len + 1 tokens (inputs and the last target) into ids, at most cap, *n how
     * many. NULL (and val_windows 0) when the corpus is not at hand. */
    engine_status (*val_window)(void *self, long index, int *ids, int cap, int *n, engine_error *err);
    long val_windows;
} probe_model;

struct probe_context {
    const probe_model *model; /* NULL when no run is loaded */
    /* NULL, or a flag that becomes non-zero when nobody waits for the result any more (the client
     * left): the kinds poll it through probe_cancelled() and stop with ENGINE_ERR_CANCELLED. */
    const atomic_int *cancel;
};

/* The registry, in a fixed order. */
int probe_kind_count(void);
const probe_kind *probe_kind_at(int i);         /* NULL when out of range */
const probe_kind *probe_find(const char *name); /* NULL when unknown */

/* The kinds and their schemas as JSON: [{"name","description","needs_model","timing","params":[{"name",
 * "type","help","default","min","max","min_len","max_len","choices"}]}]. NULL on allocation failure. */
json_t *probe_kinds_json(void);

/* Validates params against the kind's schema and returns a new object with every parameter set
 * (defaults filled), then bounds their work (probe_kind.check). On a bad value or too much work:
 * NULL, err->field names it, err->status ENGINE_ERR_INVALID. */
json_t *probe_params_resolve(const probe_kind *kind, const json_t *params, probe_error *err);

/* Runs kind `kind` with `params` (NULL or an object). On success *result is a new reference.
 * Errors: ENGINE_ERR_INVALID (unknown kind: field "kind"; bad parameter: its name; a model
 * probe without a model: field "run"), ENGINE_ERR_NOMEM, ENGINE_ERR_CANCELLED (ctx->cancel was
 * set), or what the model adapter returned. */
engine_status probe_run(const char *kind, const json_t *params, const probe_context *ctx, json_t **result,
                        probe_error *err);

#endif
