/* The engine's own model and tokenizer seen through probe_model, for attention_map and
 * topk_prediction. The integrator loads a run's weights or checkpoint (model_load) and a
 * tokenizer (tokenizer_new_by_name), fills one of these, and passes &pm->view in the
 * probe_context. Nothing is copied: the model and tokenizer must outlive the probe call, and
 * like any model it serves one caller thread at a time. */
#ifndef PROBE_ENGINE_MODEL_H
#define PROBE_ENGINE_MODEL_H

#include "model.h"
#include "probe.h"
#include "tokenizer.h"

typedef struct {
    probe_model view; /* what the probes read */
    model *model;
    const tokenizer *tok;
} probe_engine_model;

/* Fills pm from m's config: head_dim = d_model / n_head, max_seq = seq_len, rope_base 0 for
 * variants that do not rotate, cosine for those that normalise q and k (the attention table's
 * flags). ENGINE_ERR_INVALID when the tokenizer's vocabulary is
 * larger than the model's (its ids would be refused). */
engine_status probe_engine_model_init(probe_engine_model *pm, model *m, const tokenizer *tok, engine_error *err);

#endif
