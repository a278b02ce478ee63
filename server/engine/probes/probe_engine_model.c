#include "probe_engine_model.h"

#include <stdlib.h>
#include <string.h>

static engine_status pe_tokenize(void *self, const char *text, int *ids, int cap, int *n, engine_error *err) {
    probe_engine_model *pm = self;
    int32_t *all = NULL;
    size_t count = 0;
    engine_status st = tokenizer_encode(pm->tok, text, strlen(text), &all, &count, err);
    if (st) return st;
    for (size_t i = 0; i < count && i < (size_t)cap; i++) ids[i] = all[i];
    *n = count > (size_t)0x7fffffff ? 0x7fffffff : (int)count;
    free(all);
    return ENGINE_OK;
}

static int pe_piece(void *self, int id, char *buf, size_t cap) {
    probe_engine_model *pm = self;
    return tokenizer_piece_display(pm->tok, id, buf, cap);
}

static engine_status pe_inspect(void *self, const int *ids, int T, float *q, float *k, float *weights, float *tau,
                                engine_error *err) {
    probe_engine_model *pm = self;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)T);
    if (!tok) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    for (int i = 0; i < T; i++) tok[i] = ids[i];
    model_inspect ins;
    engine_status st = model_forward_inspect(pm->model, tok, T, &ins, err);
    free(tok);
    if (st) return st;
    size_t lh = (size_t)ins.n_layer * ins.n_head, nqk = lh * T * ins.head_dim;
    if (q) memcpy(q, ins.q_raw, sizeof(float) * nqk);
    if (k) memcpy(k, ins.k_raw, sizeof(float) * nqk);
    if (weights) memcpy(weights, ins.att, sizeof(float) * lh * T * T);
    if (tau) memcpy(tau, ins.tau, sizeof(float) * lh);
    model_inspect_free(&ins);
    return ENGINE_OK;
}

engine_status probe_engine_model_init(probe_engine_model *pm, model *m, const tokenizer *tok, engine_error *err) {
    const model_config *c = model_get_config(m);
    if (tokenizer_vocab_size(tok) > c->vocab)
        return engine_fail(err, ENGINE_ERR_INVALID, "tokenizer %s has %d ids but the model only %d", tokenizer_name(tok),
                           tokenizer_vocab_size(tok), c->vocab);
    memset(pm, 0, sizeof *pm);
    pm->model = m;
    pm->tok = tok;
    probe_model *v = &pm->view;
    v->n_layer = c->n_layer;
    v->n_head = c->n_head;
    v->head_dim = c->d_model / c->n_head;
    v->max_seq = c->seq_len;
    v->vocab_size = c->vocab;
    v->self = pm;
    v->tokenize = pe_tokenize;
    v->inspect = pe_inspect;
    v->piece = pe_piece;
    unsigned flags = model_config_attention(c)->flags;
    v->rope_base = (flags & ATTENTION_ROTATES) ? c->rope_base : 0;
    v->rope_half_split = 0; /* the engine pairs adjacent dimensions (model.h) */
    v->cosine = (flags & ATTENTION_NORMALISES_QK) != 0;
    return ENGINE_OK;
}
