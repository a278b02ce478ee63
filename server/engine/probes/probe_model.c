/* What the model probes share: turning text (or token ids, or a validation window) into a bounded
 * token window, the forward pass over it, and the default text of their parameters. */
#include <stdio.h>
#include <stdlib.h>

#include "probe_impl.h"

#define MAX_MODEL_FLOATS (16L * 1024 * 1024) /* per buffer: 64 MiB of float */

const char probe_model_default_text[] =
    "In the beginning the river ran quietly past the mill, and the miller, who had lived by the river all his life, "
    "listened to it every night before he slept. One winter the river froze, and the mill stood still.";

engine_status probe_model_tokens(const probe_model *m, const char *text, int max_tokens, int *ids, int *n,
                                 int *truncated, probe_error *err) {
    int cap = max_tokens < m->max_seq ? max_tokens : m->max_seq, total = 0;
    if (cap < 1) return probe_fail(err, ENGINE_ERR_INVALID, "run", "the model's max_seq is %d", m->max_seq);
    long per = (long)m->n_layer * m->n_head;
    if (per * cap * cap > MAX_MODEL_FLOATS || per * cap * m->head_dim > MAX_MODEL_FLOATS)
        return probe_fail(err, ENGINE_ERR_INVALID, "max_tokens",
                          "max_tokens %d is too many for a model of %d layers x %d heads", cap, m->n_layer, m->n_head);
    if (!m->tokenize)
        return probe_fail(err, ENGINE_ERR_INVALID, "text",
                          "this run's corpus has no text tokenizer (a task corpus): its tokens are ids 0..%d",
                          m->vocab_size - 1);
    engine_error e = {0};
    engine_status st = m->tokenize(m->self, text, ids, cap, &total, &e);
    if (st) return probe_fail(err, st, "text", "tokenizing failed: %s", e.message);
    if (total < 1) return probe_fail(err, ENGINE_ERR_INVALID, "text", "text gives no tokens");
    *n = total < cap ? total : cap;
    *truncated = total > cap;
    return ENGINE_OK;
}

engine_status probe_model_forward(const probe_model *m, const int *ids, int T, int with_qk, int with_tau,
                                  probe_model_pass *pass, probe_error *err) {
    const size_t lh = (size_t)m->n_layer * m->n_head, nqk = lh * T * m->head_dim;
    *pass = (probe_model_pass){0};
    pass->w = malloc(sizeof(float) * lh * T * T);
    if (with_qk) pass->q = malloc(sizeof(float) * nqk), pass->k = malloc(sizeof(float) * nqk);
    if (with_tau) pass->tau = malloc(sizeof(float) * lh);
    if (!pass->w || (with_qk && (!pass->q || !pass->k)) || (with_tau && !pass->tau))
        return probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    engine_error e = {0};
    engine_status st = m->inspect(m->self, ids, T, pass->q, pass->k, pass->w, pass->tau, &e);
    if (st) return probe_fail(err, st, "run", "forward pass failed: %s", e.message);
    return ENGINE_OK;
}

void probe_model_pass_free(probe_model_pass *pass) {
    free(pass->q), free(pass->k), free(pass->w), free(pass->tau);
    *pass = (probe_model_pass){0};
}

void probe_model_token_table(probe_out *out, const probe_model *m, const int *ids, int n) {
    static const char *const cols[] = {"index", "id", "piece"};
    json_t *rows = probe_table(out, "tokens", cols, 3);
    char buf[128];
    for (int i = 0; i < n; i++) {
        int ok = m->piece && m->piece(m->self, ids[i], buf, sizeof buf) >= 0;
        json_t *probe = ok ? json_string(buf) : NULL; /* NULL also when a cut left broken UTF-8 */
        if (!probe) snprintf(buf, sizeof buf, "#%d", ids[i]);
        json_decref(probe);
        probe_row(out, rows, "iis", i, ids[i], buf);
    }
}

engine_status probe_model_input(const probe_model *m, const json_t *p, int max_tokens, int *ids, int *n, int *truncated,
                                char *source, size_t source_len, probe_error *err) {
    const int cap = max_tokens < m->max_seq + 1 ? max_tokens : m->max_seq + 1;
    const json_t *jids = json_object_get(p, "ids"), *jw = json_object_get(p, "window");
    long window = json_is_integer(jw) ? (long)json_integer_value(jw) : -1;
    *truncated = 0;
    if (json_array_size(jids) > 0) {
        size_t i;
        const json_t *v;
        int k = 0;
        json_array_foreach(jids, i, v) {
            long id = (long)json_integer_value(v);
            if (id >= m->vocab_size)
                return probe_fail(err, ENGINE_ERR_INVALID, "ids",
                                  "ids[%zu] = %ld is outside the model's vocabulary (0..%d)", i, id, m->vocab_size - 1);
            if (k < cap) ids[k++] = (int)id;
        }
        *n = k;
        *truncated = json_array_size(jids) > (size_t)cap;
        if (k < 2) return probe_fail(err, ENGINE_ERR_INVALID, "ids", "give at least 2 token ids");
        snprintf(source, source_len, "ids");
    } else if (window >= 0 || !m->tokenize) {
        if (!m->val_window)
            return probe_fail(err, ENGINE_ERR_INVALID, window >= 0 ? "window" : "text",
                              "the run's validation windows are not available%s",
                              m->tokenize ? "" : ", and its corpus has no text tokenizer: give ids");
        if (window < 0) window = 0;
        if (window >= m->val_windows)
            return probe_fail(err, ENGINE_ERR_INVALID, "window", "the run has %ld validation windows (0..%ld)",
                              m->val_windows, m->val_windows - 1);
        engine_error e = {0};
        engine_status st = m->val_window(m->self, window, ids, cap, n, &e);
        if (st) return probe_fail(err, st, "window", "reading the window failed: %s", e.message);
        *truncated = *n >= cap && cap < m->max_seq + 1;
        snprintf(source, source_len, "validation window %ld", window);
        if (*n < 2) return probe_fail(err, ENGINE_ERR_INVALID, "window", "the window holds fewer than 2 tokens");
    } else {
        engine_status st = probe_model_tokens(m, probe_p_str(p, "text"), cap, ids, n, truncated, err);
        if (st) return st;
        snprintf(source, source_len, "text");
    }
    long per = (long)m->n_layer * m->n_head, T = *n < m->max_seq ? *n : m->max_seq;
    if (per * T * T > MAX_MODEL_FLOATS || per * T * m->head_dim > MAX_MODEL_FLOATS)
        return probe_fail(err, ENGINE_ERR_INVALID, "max_tokens",
                          "max_tokens %ld is too many for a model of %d layers x %d heads", T, m->n_layer, m->n_head);
    return ENGINE_OK;
}
