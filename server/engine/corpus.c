/* Token corpora, windows and batch order; the contract is in corpus.h. */
#include "corpus.h"
#include "fileio.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct corpus {
    uint16_t *tokens;
    size_t n;
    int max_token;
};

struct corpus_loader {
    const corpus *c;
    corpus_loader_config cfg;
    size_t windows, n_train, n_val;
    uint32_t *perm; /* the permutation of epoch perm_epoch, allocated once */
    long perm_epoch;
};

static engine_status corpus_adopt(corpus **out, uint16_t *tokens, size_t n) {
    corpus *c = malloc(sizeof *c);
    if (!c) return ENGINE_ERR_NOMEM;
    c->tokens = tokens;
    c->n = n;
    int m = 0;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] > m) m = tokens[i];
    c->max_token = m;
    *out = c;
    return ENGINE_OK;
}

engine_status corpus_open_u16(corpus **out, const char *path, engine_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return engine_fail(err, ENGINE_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return engine_fail(err, ENGINE_ERR_IO, "cannot seek %s", path);
    }
    long size = ftell(f);
    rewind(f);
    if (size < 0) {
        fclose(f);
        return engine_fail(err, ENGINE_ERR_IO, "cannot size %s", path);
    }
    if (size == 0 || size % 2) {
        fclose(f);
        return engine_fail(err, ENGINE_ERR_FORMAT, "%s: %ld bytes is not a non-empty uint16 stream", path, size);
    }
    size_t n = (size_t)size / 2;
    uint16_t *tok = malloc(n * sizeof *tok);
    if (!tok) {
        fclose(f);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for %zu tokens", n);
    }
    size_t got = fread(tok, 2, n, f);
    fclose(f);
    if (got != n) {
        free(tok);
        return engine_fail(err, ENGINE_ERR_IO, "short read on %s", path);
    }
    /* the file is little-endian whatever the host */
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe != 1)
        for (size_t i = 0; i < n; i++) tok[i] = (uint16_t)((tok[i] >> 8) | (tok[i] << 8));
    if (corpus_adopt(out, tok, n) != ENGINE_OK) {
        free(tok);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    }
    return ENGINE_OK;
}

engine_status corpus_from_tokens(corpus **out, const uint16_t *tokens, size_t n, engine_error *err) {
    *out = NULL;
    if (n == 0 || !tokens) return engine_fail(err, ENGINE_ERR_INVALID, "a corpus needs at least one token");
    uint16_t *copy = malloc(n * sizeof *copy);
    if (!copy) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for %zu tokens", n);
    memcpy(copy, tokens, n * sizeof *copy);
    if (corpus_adopt(out, copy, n) != ENGINE_OK) {
        free(copy);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    }
    return ENGINE_OK;
}

engine_status corpus_from_text(corpus **out, const char *text, size_t len, const tokenizer *tok, engine_error *err) {
    *out = NULL;
    int32_t *ids;
    size_t n;
    engine_status st = tokenizer_encode_parallel(tok, text, len, 0, &ids, &n, err);
    if (st != ENGINE_OK) return st;
    if (n == 0) {
        free(ids);
        return engine_fail(err, ENGINE_ERR_INVALID, "the text gives no tokens");
    }
    uint16_t *t16 = malloc(n * sizeof *t16);
    if (!t16) {
        free(ids);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for %zu tokens", n);
    }
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] > 65535) {
            free(ids);
            free(t16);
            return engine_fail(err, ENGINE_ERR_INVALID, "token id %d does not fit 16 bits", (int)ids[i]);
        }
        t16[i] = (uint16_t)ids[i];
    }
    free(ids);
    if (corpus_adopt(out, t16, n) != ENGINE_OK) {
        free(t16);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    }
    return ENGINE_OK;
}

engine_status corpus_from_text_file(corpus **out, const char *path, const tokenizer *tok, engine_error *err) {
    *out = NULL;
    char *buf;
    size_t len;
    if (file_read_all(path, &buf, &len, err) != ENGINE_OK) return err->status;
    engine_status st = corpus_from_text(out, buf, len, tok, err);
    free(buf);
    return st;
}

void corpus_free(corpus *c) {
    if (!c) return;
    free(c->tokens);
    free(c);
}

size_t corpus_token_count(const corpus *c) { return c->n; }
int corpus_max_token(const corpus *c) { return c->max_token; }
const uint16_t *corpus_tokens(const corpus *c) { return c->tokens; }

engine_status corpus_write_u16(const char *path, const int32_t *ids, size_t n, engine_error *err) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] > 65535)
            return engine_fail(err, ENGINE_ERR_INVALID, "token id %d at %zu does not fit 16 bits", (int)ids[i], i);
    FILE *f = fopen(path, "wb");
    if (!f) return engine_fail(err, ENGINE_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    unsigned char buf[1 << 15];
    size_t o = 0;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        buf[o++] = (unsigned char)(ids[i] & 0xFF);
        buf[o++] = (unsigned char)(ids[i] >> 8);
        if (o == sizeof buf) {
            ok = fwrite(buf, 1, o, f) == o;
            o = 0;
        }
    }
    if (ok && o) ok = fwrite(buf, 1, o, f) == o;
    if (fclose(f) != 0) ok = 0;
    if (!ok) {
        remove(path);
        return engine_fail(err, ENGINE_ERR_IO, "cannot write %s", path);
    }
    return ENGINE_OK;
}

/* ---------------------------------------------------------------- loader */

engine_status corpus_loader_new(corpus_loader **out, const corpus *c, const corpus_loader_config *cfg,
                                engine_error *err) {
    *out = NULL;
    if (!c || !cfg) return engine_fail(err, ENGINE_ERR_INVALID, "no corpus or config");
    if (cfg->seq_len < 1) return engine_fail(err, ENGINE_ERR_INVALID, "seq_len %d must be >= 1", cfg->seq_len);
    if (cfg->batch < 1) return engine_fail(err, ENGINE_ERR_INVALID, "batch %d must be >= 1", cfg->batch);
    if (!(cfg->val_fraction >= 0.0 && cfg->val_fraction < 1.0))
        return engine_fail(err, ENGINE_ERR_INVALID, "val_fraction %g must be in [0, 1)", cfg->val_fraction);
    if (cfg->order != CORPUS_ORDER_SEQUENTIAL && cfg->order != CORPUS_ORDER_SHUFFLED)
        return engine_fail(err, ENGINE_ERR_INVALID, "unknown batch order %d", (int)cfg->order);
    size_t T = (size_t)cfg->seq_len;
    size_t windows = c->n >= T + 1 ? (c->n - 1) / T : 0;
    size_t n_val = 0;
    if (cfg->val_fraction > 0) {
        n_val = (size_t)floor((double)windows * cfg->val_fraction);
        if (n_val < 1) n_val = 1;
    }
    if (windows < n_val + 1)
        return engine_fail(err, ENGINE_ERR_INVALID, "%zu tokens give %zu windows of %zu+1: too few for training%s",
                           c->n, windows, T, n_val ? " and validation" : "");
    if (windows - n_val > UINT32_MAX)
        return engine_fail(err, ENGINE_ERR_INVALID, "too many windows (%zu)", windows - n_val);
    corpus_loader *l = calloc(1, sizeof *l);
    if (!l) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    l->c = c;
    l->cfg = *cfg;
    l->windows = windows;
    l->n_val = n_val;
    l->n_train = windows - n_val;
    l->perm_epoch = -1;
    if (cfg->order == CORPUS_ORDER_SHUFFLED) {
        l->perm = malloc(l->n_train * sizeof *l->perm);
        if (!l->perm) {
            free(l);
            return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for a permutation of %zu windows", windows);
        }
    }
    *out = l;
    return ENGINE_OK;
}

void corpus_loader_free(corpus_loader *l) {
    if (!l) return;
    free(l->perm);
    free(l);
}

size_t corpus_loader_windows(const corpus_loader *l, corpus_split split) {
    return split == CORPUS_SPLIT_VAL ? l->n_val : l->n_train;
}

static inline uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, range) (Lemire's method, with rejection). */
static inline uint64_t bounded(uint64_t *s, uint64_t range) {
    unsigned __int128 m = (unsigned __int128)splitmix64(s) * range;
    uint64_t low = (uint64_t)m;
    if (low < range) {
        uint64_t thresh = (0 - range) % range;
        while (low < thresh) {
            m = (unsigned __int128)splitmix64(s) * range;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

static void make_perm(corpus_loader *l, long epoch) {
    size_t n = l->n_train;
    for (size_t i = 0; i < n; i++) l->perm[i] = (uint32_t)i;
    uint64_t s = l->cfg.seed + (uint64_t)(epoch + 1) * 0x9E3779B97F4A7C15ULL;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)bounded(&s, (uint64_t)i + 1);
        uint32_t tmp = l->perm[i];
        l->perm[i] = l->perm[j];
        l->perm[j] = tmp;
    }
    l->perm_epoch = epoch;
}

engine_status corpus_loader_window_start(corpus_loader *l, corpus_split split, long step, int b, size_t *start,
                                         engine_error *err) {
    if (step < 0) return engine_fail(err, ENGINE_ERR_INVALID, "step %ld < 0", step);
    if (b < 0 || b >= l->cfg.batch) return engine_fail(err, ENGINE_ERR_INVALID, "row %d outside the batch", b);
    size_t count = corpus_loader_windows(l, split);
    if (count == 0)
        return engine_fail(err, ENGINE_ERR_INVALID, "the %s split is empty",
                           split == CORPUS_SPLIT_VAL ? "validation" : "training");
    unsigned __int128 k = (unsigned __int128)(uint64_t)step * (uint64_t)l->cfg.batch + (uint64_t)b;
    size_t w;
    if (split == CORPUS_SPLIT_VAL) {
        w = l->n_train + (size_t)(k % count);
    } else if (l->cfg.order == CORPUS_ORDER_SEQUENTIAL) {
        w = (size_t)(k % count);
    } else {
        long epoch = (long)(k / count);
        if (epoch != l->perm_epoch) make_perm(l, epoch);
        w = l->perm[(size_t)(k % count)];
    }
    *start = w * (size_t)l->cfg.seq_len;
    return ENGINE_OK;
}

engine_status corpus_loader_batch(corpus_loader *l, corpus_split split, long step, int32_t *out, engine_error *err) {
    size_t T1 = (size_t)l->cfg.seq_len + 1;
    const uint16_t *tok = l->c->tokens;
    for (int b = 0; b < l->cfg.batch; b++) {
        size_t start;
        engine_status st = corpus_loader_window_start(l, split, step, b, &start, err);
        if (st != ENGINE_OK) return st;
        int32_t *row = out + (size_t)b * T1;
        for (size_t t = 0; t < T1; t++) row[t] = tok[start + t];
    }
    return ENGINE_OK;
}
