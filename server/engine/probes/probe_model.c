/* What the two model probes share: turning text into a bounded token window. */
#include <stdio.h>

#include "probe_impl.h"

#define MAX_MODEL_FLOATS (16L * 1024 * 1024) /* per buffer: 64 MiB of float */

engine_status probe_model_tokens(const probe_model *m, const char *text, int max_tokens, int *ids, int *n,
                                 int *truncated, probe_error *err) {
    int cap = max_tokens < m->max_seq ? max_tokens : m->max_seq, total = 0;
    if (cap < 1) return probe_fail(err, ENGINE_ERR_INVALID, "run", "the model's max_seq is %d", m->max_seq);
    long per = (long)m->n_layer * m->n_head;
    if (per * cap * cap > MAX_MODEL_FLOATS || per * cap * m->head_dim > MAX_MODEL_FLOATS)
        return probe_fail(err, ENGINE_ERR_INVALID, "max_tokens",
                          "max_tokens %d is too many for a model of %d layers x %d heads", cap, m->n_layer, m->n_head);
    engine_error e = {0};
    engine_status st = m->tokenize(m->self, text, ids, cap, &total, &e);
    if (st) return probe_fail(err, st, "text", "tokenizing failed: %s", e.message);
    if (total < 1) return probe_fail(err, ENGINE_ERR_INVALID, "text", "text gives no tokens");
    *n = total < cap ? total : cap;
    *truncated = total > cap;
    return ENGINE_OK;
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
