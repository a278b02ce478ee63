#include "probe_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

static const probe_kind *const kinds[] = {
    &probe_kind_rope_invariance, &probe_kind_pair_turns,       &probe_kind_dephasing,     &probe_kind_context_extension,
    &probe_kind_rotation_check,  &probe_kind_scaling,          &probe_kind_cosine_scores, &probe_kind_attention_map,
    &probe_kind_topk_prediction, &probe_kind_sparse_attention, &probe_kind_sparse_cost,
};
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

int probe_kind_count(void) { return N_KINDS; }

const probe_kind *probe_kind_at(int i) { return i >= 0 && i < N_KINDS ? kinds[i] : NULL; }

const probe_kind *probe_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < N_KINDS; i++)
        if (strcmp(kinds[i]->name, name) == 0) return kinds[i];
    return NULL;
}

engine_status probe_fail(probe_error *err, engine_status status, const char *field, const char *fmt, ...) {
    if (err) {
        err->status = status;
        snprintf(err->field, sizeof err->field, "%s", field ? field : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

json_t *probe_json_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* ---- schema as JSON ---------------------------------------------------------------------- */

static const char *type_name(probe_param_type t) {
    switch (t) {
    case PROBE_PARAM_INT: return "int";
    case PROBE_PARAM_NUMBER: return "number";
    case PROBE_PARAM_CHOICE: return "choice";
    case PROBE_PARAM_INT_LIST: return "int_list";
    case PROBE_PARAM_NUMBER_LIST: return "number_list";
    case PROBE_PARAM_VECTOR: return "vector";
    case PROBE_PARAM_TEXT: return "text";
    }
    return "unknown";
}

static int is_list(probe_param_type t) {
    return t == PROBE_PARAM_INT_LIST || t == PROBE_PARAM_NUMBER_LIST || t == PROBE_PARAM_VECTOR;
}

static json_t *default_value(const probe_param *p) {
    switch (p->type) {
    case PROBE_PARAM_INT: return json_integer((json_int_t)p->def);
    case PROBE_PARAM_NUMBER: return json_real(p->def);
    case PROBE_PARAM_CHOICE:
    case PROBE_PARAM_TEXT: return json_string(p->def_str ? p->def_str : "");
    case PROBE_PARAM_VECTOR: return json_null();
    case PROBE_PARAM_INT_LIST:
    case PROBE_PARAM_NUMBER_LIST: {
        json_t *a = json_array();
        if (!a) return NULL;
        for (int i = 0; i < p->def_len; i++) {
            json_t *v =
                p->type == PROBE_PARAM_INT_LIST ? json_integer((json_int_t)p->def_list[i]) : json_real(p->def_list[i]);
            if (json_array_append_new(a, v)) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    }
    return NULL;
}

static json_t *param_json(const probe_param *p) {
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = 0;
    bad |= json_object_set_new(o, "name", json_string(p->name));
    bad |= json_object_set_new(o, "type", json_string(type_name(p->type)));
    bad |= json_object_set_new(o, "help", json_string(p->help ? p->help : ""));
    bad |= json_object_set_new(o, "default", default_value(p));
    if (p->type != PROBE_PARAM_CHOICE && p->type != PROBE_PARAM_TEXT) {
        bad |= json_object_set_new(o, "min", json_real(p->min));
        bad |= json_object_set_new(o, "max", json_real(p->max));
    }
    if (is_list(p->type)) {
        bad |= json_object_set_new(o, "min_len", json_integer(p->min_len));
        bad |= json_object_set_new(o, "max_len", json_integer(p->max_len));
    }
    if (p->type == PROBE_PARAM_TEXT) bad |= json_object_set_new(o, "max_len", json_integer(p->max_len));
    if (p->type == PROBE_PARAM_CHOICE) {
        json_t *c = json_array();
        bad |= json_object_set_new(o, "choices", c);
        for (int i = 0; c && p->choices && p->choices[i]; i++)
            bad |= json_array_append_new(c, json_string(p->choices[i]));
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *probe_kinds_json(void) {
    json_t *arr = json_array();
    if (!arr) return NULL;
    for (int i = 0; i < N_KINDS; i++) {
        const probe_kind *k = kinds[i];
        json_t *o = json_object(), *ps = json_array();
        int bad = !o || !ps;
        if (!bad) {
            bad |= json_object_set_new(o, "name", json_string(k->name));
            bad |= json_object_set_new(o, "title", json_string(k->title));
            bad |= json_object_set_new(o, "description", json_string(k->description));
            bad |= json_object_set_new(o, "needs_model", json_boolean(k->needs_model));
            bad |= json_object_set_new(o, "timing", json_boolean(k->timing));
            for (int j = 0; j < k->n_params && !bad; j++) bad |= json_array_append_new(ps, param_json(&k->params[j]));
            bad |= json_object_set(o, "params", ps);
        }
        json_decref(ps);
        if (bad || json_array_append_new(arr, o)) {
            if (bad) json_decref(o);
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* ---- parameter validation ---------------------------------------------------------------- */

/* An integer, or a real with an integral value (clients that write 64.0 mean 64). */
static int as_int(const json_t *v, double *out) {
    if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
        return 1;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (isfinite(d) && d == floor(d)) {
            *out = d;
            return 1;
        }
    }
    return 0;
}

static int as_num(const json_t *v, double *out) {
    if (!json_is_number(v)) return 0;
    *out = json_number_value(v);
    return isfinite(*out);
}

static engine_status check_scalar(const probe_param *p, const json_t *v, const char *what, probe_error *err) {
    double d;
    if (p->type == PROBE_PARAM_INT || p->type == PROBE_PARAM_INT_LIST) {
        if (!as_int(v, &d)) return probe_fail(err, ENGINE_ERR_INVALID, p->name, "%s must be an integer", what);
        if (d < p->min || d > p->max)
            return probe_fail(err, ENGINE_ERR_INVALID, p->name, "%s must be between %.0f and %.0f (got %.0f)", what,
                              p->min, p->max, d);
    } else {
        if (!as_num(v, &d)) return probe_fail(err, ENGINE_ERR_INVALID, p->name, "%s must be a finite number", what);
        if (d < p->min || d > p->max)
            return probe_fail(err, ENGINE_ERR_INVALID, p->name, "%s must be between %g and %g (got %g)", what, p->min,
                              p->max, d);
    }
    return ENGINE_OK;
}

/* A CHOICE parameter: a copy of v when it is one of p's choices. */
static json_t *resolve_choice(const probe_param *p, const json_t *v, probe_error *err, engine_status *st) {
    const char *s = json_string_value(v);
    int match = 0;
    for (int i = 0; s && p->choices && p->choices[i] && !match; i++) match = strcmp(s, p->choices[i]) == 0;
    if (match) return json_string(s);
    char list[160] = "";
    for (int i = 0; p->choices && p->choices[i]; i++) {
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", p->choices[i]);
    }
    *st = probe_fail(err, ENGINE_ERR_INVALID, p->name, "%s must be one of: %s", p->name, list);
    return NULL;
}

/* A TEXT parameter: a copy of v when it is a string of 1 to max_len bytes. */
static json_t *resolve_text(const probe_param *p, const json_t *v, probe_error *err, engine_status *st) {
    if (!json_is_string(v)) {
        *st = probe_fail(err, ENGINE_ERR_INVALID, p->name, "%s must be a string", p->name);
        return NULL;
    }
    if (json_string_length(v) > (size_t)p->max_len || json_string_length(v) == 0) {
        *st = probe_fail(err, ENGINE_ERR_INVALID, p->name, "%s must be 1 to %d bytes long", p->name, p->max_len);
        return NULL;
    }
    return json_string(json_string_value(v));
}

/* A list (or a given vector): a new array of its items, each checked against p's bounds. */
static json_t *resolve_list(const probe_param *p, const json_t *v, probe_error *err, engine_status *st) {
    if (!json_is_array(v)) {
        *st = probe_fail(err, ENGINE_ERR_INVALID, p->name, "%s must be an array", p->name);
        return NULL;
    }
    int n = (int)json_array_size(v);
    if (n < p->min_len || n > p->max_len) {
        *st = probe_fail(err, ENGINE_ERR_INVALID, p->name, "%s must have %d to %d items (got %d)", p->name, p->min_len,
                         p->max_len, n);
        return NULL;
    }
    json_t *r = json_array();
    char what[96];
    for (int i = 0; r && i < n; i++) {
        const json_t *item = json_array_get(v, (size_t)i);
        snprintf(what, sizeof what, "%s[%d]", p->name, i);
        if ((*st = check_scalar(p, item, what, err))) {
            json_decref(r);
            return NULL;
        }
        double d = json_number_value(item);
        json_t *x = p->type == PROBE_PARAM_INT_LIST ? json_integer((json_int_t)d) : json_real(d);
        if (json_array_append_new(r, x)) {
            json_decref(r);
            r = NULL;
        }
    }
    return r;
}

/* Returns a new, normalised value for parameter p from the client's v (NULL: absent). */
static json_t *resolve_one(const probe_param *p, const json_t *v, probe_error *err, engine_status *st) {
    *st = ENGINE_OK;
    json_t *r = NULL;
    if (!v) {
        r = default_value(p);
    } else if (p->type == PROBE_PARAM_INT || p->type == PROBE_PARAM_NUMBER) {
        if ((*st = check_scalar(p, v, p->name, err))) return NULL;
        r = p->type == PROBE_PARAM_INT ? json_integer((json_int_t)json_number_value(v))
                                       : json_real(json_number_value(v));
    } else if (p->type == PROBE_PARAM_CHOICE) {
        r = resolve_choice(p, v, err, st);
    } else if (p->type == PROBE_PARAM_TEXT) {
        r = resolve_text(p, v, err, st);
    } else if (p->type == PROBE_PARAM_VECTOR && json_is_null(v)) {
        r = json_null();
    } else { /* a list, or a given vector: a number list */
        r = resolve_list(p, v, err, st);
    }
    if (!r && *st == ENGINE_OK) *st = probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    return r;
}

json_t *probe_params_resolve(const probe_kind *kind, const json_t *params, probe_error *err) {
    if (params && !json_is_null(params) && !json_is_object(params)) {
        probe_fail(err, ENGINE_ERR_INVALID, "params", "params must be an object");
        return NULL;
    }
    if (params && json_is_object(params)) {
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)params, key, val) {
            int known = 0;
            for (int i = 0; i < kind->n_params && !known; i++) known = strcmp(kind->params[i].name, key) == 0;
            if (!known) {
                probe_fail(err, ENGINE_ERR_INVALID, key, "unknown parameter '%s' for probe %s", key, kind->name);
                return NULL;
            }
        }
    }
    json_t *out = json_object();
    if (!out) {
        probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
        return NULL;
    }
    for (int i = 0; i < kind->n_params; i++) {
        const probe_param *p = &kind->params[i];
        const json_t *v = json_is_object(params) ? json_object_get(params, p->name) : NULL;
        engine_status st;
        json_t *r = resolve_one(p, v, err, &st);
        if (st || json_object_set_new(out, p->name, r)) {
            if (!st) probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
            json_decref(out);
            return NULL;
        }
    }
    if (kind->check && kind->check(out, err) != ENGINE_OK) { /* the work, bounded before any is done */
        json_decref(out);
        return NULL;
    }
    return out;
}

int probe_cancelled(const probe_context *ctx) { return ctx && ctx->cancel && atomic_load(ctx->cancel); }

/* ---- resolved parameter access ----------------------------------------------------------- */

long probe_p_int(const json_t *params, const char *name) {
    return (long)json_number_value(json_object_get(params, name));
}

double probe_p_num(const json_t *params, const char *name) { return json_number_value(json_object_get(params, name)); }

const char *probe_p_str(const json_t *params, const char *name) {
    const char *s = json_string_value(json_object_get(params, name));
    return s ? s : "";
}

int probe_p_list(const json_t *params, const char *name, double *out, int cap) {
    const json_t *a = json_object_get(params, name);
    if (!json_is_array(a)) return -1;
    int n = (int)json_array_size(a);
    for (int i = 0; i < n && i < cap; i++) out[i] = json_number_value(json_array_get(a, (size_t)i));
    return n;
}

/* ---- result building --------------------------------------------------------------------- */

static void set(probe_out *out, json_t *obj, const char *key, json_t *v) {
    if (out->oom || !obj) {
        json_decref(v);
        return;
    }
    if (json_object_set_new(obj, key, v)) out->oom = 1;
}

static void append(probe_out *out, json_t *arr, json_t *v) {
    if (out->oom || !arr) {
        json_decref(v);
        out->oom = 1;
        return;
    }
    if (json_array_append_new(arr, v)) out->oom = 1;
}

void probe_summary_num(probe_out *out, const char *key, double v) {
    set(out, json_object_get(out->result, "summary"), key, probe_json_num(v));
}

void probe_summary_int(probe_out *out, const char *key, long v) {
    set(out, json_object_get(out->result, "summary"), key, json_integer(v));
}

void probe_summary_str(probe_out *out, const char *key, const char *v) {
    set(out, json_object_get(out->result, "summary"), key, json_string(v));
}

void probe_summary_bool(probe_out *out, const char *key, int v) {
    set(out, json_object_get(out->result, "summary"), key, json_boolean(v));
}

json_t *probe_table_cols(probe_out *out, const char *name, json_t *cols) {
    json_t *t = json_object(), *rows = json_array();
    if (out->oom || !t || !rows || !cols) {
        json_decref(t);
        json_decref(rows);
        json_decref(cols);
        out->oom = 1;
        return NULL;
    }
    int bad = json_object_set_new(t, "name", json_string(name));
    bad |= json_object_set_new(t, "columns", cols);
    bad |= json_object_set_new(t, "rows", rows);
    if (bad) {
        json_decref(t);
        out->oom = 1;
        return NULL;
    }
    append(out, json_object_get(out->result, "tables"), t);
    return out->oom ? NULL : rows;
}

json_t *probe_cols_add(json_t *cols, const char *fmt, ...) {
    if (!cols) return NULL;
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (json_array_append_new(cols, json_string(name))) {
        json_decref(cols);
        return NULL;
    }
    return cols;
}

json_t *probe_cols(const char *const *names, int n) {
    json_t *c = json_array();
    for (int i = 0; c && i < n; i++) c = probe_cols_add(c, "%s", names[i]);
    return c;
}

json_t *probe_table(probe_out *out, const char *name, const char *const *cols, int ncols) {
    return probe_table_cols(out, name, probe_cols(cols, ncols));
}

void probe_vectors_table(probe_out *out, const double *q, const double *k, int d) {
    static const char *const cols[] = {"component", "q", "k"};
    json_t *rows = probe_table(out, "vectors", cols, 3);
    for (int i = 0; i < d; i++) probe_row(out, rows, "idd", i, q[i], k[i]);
}

void probe_row_nums(probe_out *out, json_t *rows, const double *v, int n) {
    if (out->oom) return;
    json_t *r = json_array();
    for (int i = 0; r && i < n; i++)
        if (json_array_append_new(r, probe_json_num(v[i]))) {
            json_decref(r);
            r = NULL;
        }
    if (!r) {
        out->oom = 1;
        return;
    }
    append(out, rows, r);
}

void probe_row(probe_out *out, json_t *rows, const char *fmt, ...) {
    if (out->oom) return;
    json_t *r = json_array();
    va_list ap;
    va_start(ap, fmt);
    for (const char *f = fmt; r && *f; f++) {
        json_t *v = NULL;
        if (*f == 'd')
            v = probe_json_num(va_arg(ap, double));
        else if (*f == 'i')
            v = json_integer(va_arg(ap, int));
        else if (*f == 's')
            v = json_string(va_arg(ap, const char *));
        if (json_array_append_new(r, v)) {
            json_decref(r);
            r = NULL;
        }
    }
    va_end(ap);
    if (!r) {
        out->oom = 1;
        return;
    }
    append(out, rows, r);
}

void probe_chart(probe_out *out, const char *table, const char *type, const char *x, const char *const *ys,
                 const char *title, int log_x) {
    probe_chart_with(out, table, type, x, ys, title, &(probe_chart_opts){.log_x = log_x});
}

void probe_chart_with(probe_out *out, const char *table, const char *type, const char *x, const char *const *ys,
                      const char *title, const probe_chart_opts *opts) {
    if (out->oom) return;
    json_t *c = json_object(), *y = json_array();
    if (!c || !y) {
        json_decref(c);
        json_decref(y);
        out->oom = 1;
        return;
    }
    for (int i = 0; ys && ys[i]; i++) append(out, y, json_string(ys[i]));
    set(out, c, "table", json_string(table));
    set(out, c, "type", json_string(type));
    set(out, c, "x", json_string(x));
    set(out, c, "y", y);
    set(out, c, "title", json_string(title));
    set(out, c, "log_x", json_boolean(opts->log_x));
    set(out, c, "log_y", json_boolean(opts->log_y));
    if (opts->reference) set(out, c, "reference", json_string(opts->reference));
    if (opts->has_y_line) set(out, c, "y_line", probe_json_num(opts->y_line));
    append(out, json_object_get(out->result, "charts"), c);
}

/* ---- running ----------------------------------------------------------------------------- */

engine_status probe_run(const char *kind_name, const json_t *params, const probe_context *ctx, json_t **result,
                        probe_error *err) {
    probe_error local;
    if (!err) err = &local; /* the kinds may then always report through err */
    memset(err, 0, sizeof *err);
    if (!result) return probe_fail(err, ENGINE_ERR_INVALID, "", "no result pointer");
    *result = NULL;
    const probe_kind *kind = probe_find(kind_name);
    if (!kind)
        return probe_fail(err, ENGINE_ERR_INVALID, "kind", "unknown probe kind '%s'", kind_name ? kind_name : "");
    json_t *resolved = probe_params_resolve(kind, params, err);
    if (!resolved) return err->status;
    if (kind->needs_model && (!ctx || !ctx->model)) {
        json_decref(resolved);
        return probe_fail(err, ENGINE_ERR_INVALID, "run", "probe %s needs a trained run's model", kind->name);
    }
    probe_out out = {json_object(), 0};
    if (!out.result) {
        json_decref(resolved);
        return probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    }
    set(&out, out.result, "kind", json_string(kind->name));
    set(&out, out.result, "params", json_incref(resolved));
    set(&out, out.result, "summary", json_object());
    set(&out, out.result, "tables", json_array());
    set(&out, out.result, "charts", json_array());
    engine_status st = out.oom ? ENGINE_ERR_NOMEM : kind->run(&out, resolved, ctx, err);
    json_decref(resolved);
    if (st == ENGINE_OK && out.oom) st = probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory building the result");
    if (st != ENGINE_OK) {
        json_decref(out.result);
        return st;
    }
    *result = out.result;
    return ENGINE_OK;
}
