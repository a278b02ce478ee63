/* The engine's own model and tokenizer seen through probe_model, for the model probes. The
 * integrator loads a run's weights or checkpoint (model_load; model_set_precision to the run's
 * precision, so losses are the run's), a tokenizer (tokenizer_new_by_name) and, optionally, the
 * run's corpus, fills one of these, and passes &pm->view in the probe_context. Nothing is copied:
 * the model, tokenizer and corpus must outlive the probe call, and like any model it serves one
 * caller thread at a time. sparse_loss makes a sparse evaluator (sparse.h) per call. */
#ifndef PROBE_ENGINE_MODEL_H
#define PROBE_ENGINE_MODEL_H

#include "corpus.h"
#include "model.h"
#include "probe.h"
#include "tokenizer.h"

typedef struct {
    probe_model view; /* what the probes read */
    model *model;
    const tokenizer *tok;
    const corpus *data; /* probe_engine_model_set_corpus */
    corpus_loader_config lc;
} probe_engine_model;

/* Fills pm from m's config: head_dim = d_model / n_head, max_seq = seq_len, rope_base 0 for
 * variants that do not rotate, cosine for those that normalise q and k (the attention table's
 * flags), and sparse_loss. tok may be NULL (a task corpus: view.tokenize NULL, tokens labelled by
 * id). ENGINE_ERR_INVALID when the tokenizer's vocabulary is larger than the model's (its ids
 * would be refused). */
engine_status probe_engine_model_init(probe_engine_model *pm, model *m, const tokenizer *tok, engine_error *err);
/* Gives the view the run's corpus and its loader settings (seq_len, order, seed, val_fraction as
 * the run has them; batch is ignored): view.val_window and view.val_windows. ENGINE_ERR_INVALID
 * when the corpus has no validation window under lc (val_window stays NULL then). */
engine_status probe_engine_model_set_corpus(probe_engine_model *pm, const corpus *data, const corpus_loader_config *lc,
                                            engine_error *err);

#endif
