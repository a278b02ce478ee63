/* Token corpora for training: a token stream (from a little-endian uint16 file, from ids, or
 * from text through a tokenizer), cut into windows, served in batches.
 *
 * Window w starts at token w·T and holds T+1 tokens (inputs and shifted targets), so a stream
 * of n tokens has floor((n-1)/T) windows. The validation split is the last val_fraction of the
 * windows (floor, but at least 1 when val_fraction > 0); training uses the ones before it.
 *
 * Batch order (training split):
 *   sequential: batch s, row b = train window (s·B + b) mod W_train, i.e. the window starting
 *               at token ((s·B + b) mod W_train)·T; it wraps over the train windows.
 *   shuffled:   k = s·B + b, epoch e = k / W_train, window = perm_e[k mod W_train], where perm_e
 *               is a Fisher–Yates shuffle (from the top, i = W-1 .. 1, j uniform in [0, i]) driven
 *               by SplitMix64 seeded with seed + (e+1)·0x9E3779B97F4A7C15; j is drawn by Lemire's
 *               multiply-shift with rejection, so it is exactly uniform.
 * The validation split is always read sequentially (val window (s·B + b) mod W_val), so
 * evaluation sees the same windows whatever the training order.
 * A batch is a pure function of (corpus, config, split, step): resumed runs see the same data. */
#ifndef ENGINE_CORPUS_H
#define ENGINE_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "tokenizer.h"

typedef struct corpus corpus;
typedef enum { CORPUS_ORDER_SEQUENTIAL, CORPUS_ORDER_SHUFFLED } corpus_order;
typedef enum { CORPUS_SPLIT_TRAIN, CORPUS_SPLIT_VAL } corpus_split;

/* ENGINE_ERR_IO (cannot read), ENGINE_ERR_FORMAT (odd byte count or empty), ENGINE_ERR_NOMEM. */
engine_status corpus_open_u16(corpus **out, const char *path, engine_error *err); /* little-endian uint16 tokens */
/* Copies the tokens. ENGINE_ERR_INVALID when n == 0. */
engine_status corpus_from_tokens(corpus **out, const uint16_t *tokens, size_t n, engine_error *err);
/* Tokenizes text (ids must fit 16 bits: true for gpt2 and bytes). ENGINE_ERR_INVALID when the
 * text gives no tokens. */
engine_status corpus_from_text(corpus **out, const char *text, size_t len, const tokenizer *tok, engine_error *err);
/* corpus_from_text on a file's bytes (ENGINE_ERR_IO when it cannot be read). */
engine_status corpus_from_text_file(corpus **out, const char *path, const tokenizer *tok, engine_error *err);
void corpus_free(corpus *c);
size_t corpus_token_count(const corpus *c);
int corpus_max_token(const corpus *c);
const uint16_t *corpus_tokens(const corpus *c);

/* Writes ids as little-endian uint16 (ENGINE_ERR_INVALID for an id outside 0..65535,
 * ENGINE_ERR_IO when the file cannot be written; a partial file is removed). */
engine_status corpus_write_u16(const char *path, const int32_t *ids, size_t n, engine_error *err);

typedef struct {
    int seq_len;
    int batch;
    corpus_order order;
    uint64_t seed;
    double val_fraction;
} corpus_loader_config;
typedef struct corpus_loader corpus_loader;

/* ENGINE_ERR_INVALID: seq_len < 1, batch < 1, val_fraction outside [0, 1), or too few tokens
 * for one training window (plus one validation window when val_fraction > 0). The loader keeps
 * a pointer to c, which must outlive it. */
engine_status corpus_loader_new(corpus_loader **out, const corpus *c, const corpus_loader_config *cfg,
                                engine_error *err);
void corpus_loader_free(corpus_loader *l);
size_t corpus_loader_windows(const corpus_loader *l, corpus_split split);
/* out[batch*(seq_len+1)]: a pure function of (corpus, config, split, step) so resumed runs see
 * the same batches. ENGINE_ERR_INVALID for step < 0 or an empty split. Not safe to call on one
 * loader from two threads at once (it caches the current epoch's permutation). */
engine_status corpus_loader_batch(corpus_loader *l, corpus_split split, long step, int32_t *out, engine_error *err);
/* The first token index of the window that row b of batch `step` reads (for tests and displays). */
engine_status corpus_loader_window_start(corpus_loader *l, corpus_split split, long step, int b, size_t *start,
                                         engine_error *err);

#endif
