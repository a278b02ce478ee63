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

static engine_status pe_sparse_loss(void *self, const int *ids, int T, const sparse_config *cfg, double *loss,
                                    engine_error *err) {
    probe_engine_model *pm = self;
    if (T < 2 || T - 1 > model_get_config(pm->model)->seq_len)
        return engine_fail(err, ENGINE_ERR_INVALID, "%d tokens: a loss needs 2 to seq_len + 1 of them", T);
    int32_t *in = malloc(sizeof(int32_t) * (size_t)(2 * (T - 1)));
    if (!in) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    int32_t *tg = in + (T - 1);
    for (int i = 0; i + 1 < T; i++) in[i] = ids[i], tg[i] = ids[i + 1];
    sparse_eval *ev = NULL;
    engine_status st = sparse_eval_new(&ev, pm->model, 1, err);
    if (!st) st = sparse_eval_run(ev, cfg, in, tg, 1, T - 1, loss, NULL, NULL, err);
    sparse_eval_free(ev);
    free(in);
    return st;
}

static engine_status pe_val_window(void *self, long index, int *ids, int cap, int *n, engine_error *err) {
    probe_engine_model *pm = self;
    corpus_loader_config lc = pm->lc;
    lc.batch = 1;
    corpus_loader *l = NULL;
    engine_status st = corpus_loader_new(&l, pm->data, &lc, err);
    size_t start = 0;
    if (!st) st = corpus_loader_window_start(l, CORPUS_SPLIT_VAL, index, 0, &start, err);
    corpus_loader_free(l);
    if (st) return st;
    const uint16_t *tok = corpus_tokens(pm->data);
    size_t total = corpus_token_count(pm->data);
    int k = 0;
    for (; k < cap && k <= lc.seq_len && start + (size_t)k < total; k++) ids[k] = tok[start + (size_t)k];
    *n = k;
    return ENGINE_OK;
}

engine_status probe_engine_model_set_corpus(probe_engine_model *pm, const corpus *data, const corpus_loader_config *lc,
                                            engine_error *err) {
    corpus_loader_config c = *lc;
    c.batch = 1;
    corpus_loader *l = NULL;
    engine_status st = corpus_loader_new(&l, data, &c, err);
    if (st) return st;
    long w = (long)corpus_loader_windows(l, CORPUS_SPLIT_VAL);
    corpus_loader_free(l);
    if (w < 1) return engine_fail(err, ENGINE_ERR_INVALID, "the run's corpus has no validation window");
    pm->data = data;
    pm->lc = c;
    pm->view.val_window = pe_val_window;
    pm->view.val_windows = w;
    return ENGINE_OK;
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
    if (tok && tokenizer_vocab_size(tok) > c->vocab)
        return engine_fail(err, ENGINE_ERR_INVALID, "tokenizer %s has %d ids but the model only %d",
                           tokenizer_name(tok), tokenizer_vocab_size(tok), c->vocab);
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
    v->tokenize = tok ? pe_tokenize : NULL;
    v->inspect = pe_inspect;
    v->piece = tok ? pe_piece : NULL;
    v->sparse_loss = pe_sparse_loss;
    unsigned flags = model_config_attention(c)->flags;
    v->rope_base = (flags & ATTENTION_ROTATES) ? c->rope_base : 0;
    v->rope_half_split = 0; /* the engine pairs adjacent dimensions (model.h) */
    v->cosine = (flags & ATTENTION_NORMALISES_QK) != 0;
    return ENGINE_OK;
}
