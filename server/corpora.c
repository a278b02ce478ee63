#include "corpora.h"

#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"

struct corpora {
    store *st;
    char data_dir[PATH_MAX];
    tokenizer *gpt2, *bytes;
};

int corpora_name_reserved(const char *name) { return name && (!strcmp(name, "small") || !strcmp(name, "default")); }

void corpora_dir(corpora *c, const char *name, char *buf, size_t len) {
    snprintf(buf, len, "%s/corpora/%s", c->data_dir, name);
}

const tokenizer *corpora_tokenizer(corpora *c, const char *encoding) {
    if (!strcmp(encoding, "gpt2")) return c->gpt2;
    if (!strcmp(encoding, "bytes")) return c->bytes;
    return NULL;
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static const char *find_source_dir(const char *given, char *buf, size_t len) {
    if (given) return given;
    if (file_exists("corpora/small/text.txt")) return "corpora";
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = 0;
    const char *dir = dirname(exe);
    const char *candidates[] = {"%s/../../corpora", "%s/../share/attnlab/corpora"};
    for (size_t i = 0; i < 2; i++) {
        char probe[PATH_MAX + 32];
        snprintf(buf, len, candidates[i], dir);
        snprintf(probe, sizeof probe, "%s/small/text.txt", buf);
        if (file_exists(probe)) return buf;
    }
    return NULL;
}

/* Writes a tokenized corpus as the little-endian uint16 file that corpus_open_u16 reads. */
static engine_status write_tokens(const corpus *cp, const char *path, engine_error *err) {
    size_t n = corpus_token_count(cp);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    const uint16_t *t = corpus_tokens(cp);
    for (size_t i = 0; i < n; i++) ids[i] = t[i];
    engine_status s = corpus_write_u16(path, ids, n, err);
    free(ids);
    return s;
}

/* Tokenizes the built-in small corpus into the data directory once (a few hundred KB: milliseconds). */
static void register_small(corpora *c, const char *source_dir) {
    char text[PATH_MAX], dir[PATH_MAX], tokens[PATH_MAX + 16];
    snprintf(text, sizeof text, "%s/small/text.txt", source_dir);
    corpora_dir(c, "small", dir, sizeof dir);
    snprintf(tokens, sizeof tokens, "%s/tokens.u16", dir);
    if (!c->gpt2 || !file_exists(text)) return;
    engine_error err = {0};
    corpus *cp = NULL;
    if (fs_mkdirs(dir) < 0 || corpus_from_text_file(&cp, text, c->gpt2, &err) != ENGINE_OK) {
        log_warn("corpus small: %s", err.message[0] ? err.message : strerror(errno));
        return;
    }
    size_t n = corpus_token_count(cp);
    engine_status s = write_tokens(cp, tokens, &err);
    corpus_free(cp);
    struct stat stt;
    stat(text, &stt);
    store_corpus row = {.name = "small",
                        .source = "Moby-Dick chapters 1-32 (public domain), shipped in corpora/small",
                        .tokenizer = "gpt2",
                        .status = s == ENGINE_OK ? "ready" : "failed",
                        .error = s == ENGINE_OK ? NULL : err.message,
                        .documents = 32,
                        .bytes = stt.st_size,
                        .tokens = (long long)n,
                        .builtin = 1};
    store_corpus_put(c->st, &row);
}

/* The default corpus is built by `make corpus`; its meta.json describes it. */
static void register_default(corpora *c) {
    char dir[PATH_MAX], meta[PATH_MAX + 16], tokens[PATH_MAX + 16];
    corpora_dir(c, "default", dir, sizeof dir);
    snprintf(meta, sizeof meta, "%s/meta.json", dir);
    snprintf(tokens, sizeof tokens, "%s/tokens.u16", dir);
    if (!file_exists(tokens)) return;
    /* An upload that took the name before names were reserved keeps it; it is not `make corpus`'s. */
    json_t *old = NULL;
    if (store_corpus_get(c->st, "default", &old) == STORE_OK && !json_is_true(json_object_get(old, "builtin"))) {
        log_warn("corpus 'default' is an upload, not the built-in corpus: rename or delete it, then run `make corpus`");
        json_decref(old);
        return;
    }
    json_decref(old);
    json_t *m = json_load_file(meta, 0, NULL);
    struct stat st;
    stat(tokens, &st);
    const char *tok = m ? json_string_value(json_object_get(m, "tokenizer")) : NULL;
    store_corpus row = {.name = "default",
                        .source = m && json_is_string(json_object_get(m, "source"))
                                      ? json_string_value(json_object_get(m, "source"))
                                      : "MiniPile stand-in built by make corpus",
                        .tokenizer = tok && !strcmp(tok, "bytes") ? "bytes" : "gpt2",
                        .status = "ready",
                        .documents = m ? json_integer_value(json_object_get(m, "documents")) : 0,
                        .bytes = m ? json_integer_value(json_object_get(m, "bytes")) : 0,
                        .tokens = (long long)(st.st_size / 2),
                        .builtin = 1};
    store_corpus_put(c->st, &row);
    json_decref(m);
}

corpora *corpora_start(store *st, const char *data_dir, const char *source_dir) {
    corpora *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->st = st;
    snprintf(c->data_dir, sizeof c->data_dir, "%s", data_dir);
    engine_error err = {0};
    if (tokenizer_load_gpt2_default(&c->gpt2, &err) != ENGINE_OK) {
        log_warn("GPT-2 tokenizer unavailable: %s", err.message);
        c->gpt2 = NULL;
    }
    if (tokenizer_new_bytes(&c->bytes, &err) != ENGINE_OK) c->bytes = NULL;
    /* Uploads cut off by the death of the last process will never finish: say so. */
    int stale = 0;
    if (store_corpora_fail_tokenizing(st, "the service stopped while this corpus was being tokenized: delete it and "
                                          "upload it again", &stale) != STORE_OK)
        log_error("corpora: could not recover uploads left tokenizing: %s", store_last_error());
    else if (stale > 0)
        log_warn("%d corpus upload(s) were being tokenized when the service last stopped: now failed", stale);
    char buf[PATH_MAX];
    const char *src = find_source_dir(source_dir, buf, sizeof buf);
    if (src)
        register_small(c, src);
    else
        log_warn("the built-in corpus 'small' was not found (corpora/small/text.txt)");
    register_default(c);
    return c;
}

void corpora_free(corpora *c) {
    if (!c) return;
    tokenizer_free(c->gpt2);
    tokenizer_free(c->bytes);
    free(c);
}

int corpora_vocab(corpora *c, const char *name) {
    json_t *row = NULL;
    if (store_corpus_get(c->st, name, &row) != STORE_OK) return -1;
    int ready = !strcmp(json_string_value(json_object_get(row, "status")), "ready");
    const char *tok = json_string_value(json_object_get(row, "tokenizer"));
    int vocab = !ready ? -1 : !strcmp(tok, "bytes") ? 256 : 50257;
    json_decref(row);
    return vocab;
}

engine_status corpora_open(corpora *c, const char *name, corpus **out, engine_error *err) {
    char dir[PATH_MAX], tokens[PATH_MAX + 16];
    corpora_dir(c, name, dir, sizeof dir);
    snprintf(tokens, sizeof tokens, "%s/tokens.u16", dir);
    return corpus_open_u16(out, tokens, err);
}

void corpora_tokenize_upload(corpora *c, const char *name, const char *encoding) {
    char dir[PATH_MAX], text[PATH_MAX + 16], tokens[PATH_MAX + 16];
    corpora_dir(c, name, dir, sizeof dir);
    snprintf(text, sizeof text, "%s/upload.txt", dir);
    snprintf(tokens, sizeof tokens, "%s/tokens.u16", dir);
    const tokenizer *tok = corpora_tokenizer(c, encoding);
    engine_error err = {0};
    corpus *cp = NULL;
    engine_status s = tok ? corpus_from_text_file(&cp, text, tok, &err)
                          : engine_fail(&err, ENGINE_ERR_INVALID, "the %s tokenizer is not available", encoding);
    size_t n = 0;
    if (s == ENGINE_OK) {
        n = corpus_token_count(cp);
        s = write_tokens(cp, tokens, &err);
        corpus_free(cp);
    }
    if (s == ENGINE_OK && n < 2) s = engine_fail(&err, ENGINE_ERR_INVALID, "the text holds fewer than 2 tokens");
    struct stat st;
    long long bytes = stat(text, &st) == 0 ? (long long)st.st_size : 0;
    store_corpus row = {.name = name,
                        .source = "uploaded text",
                        .tokenizer = encoding,
                        .status = s == ENGINE_OK ? "ready" : "failed",
                        .error = s == ENGINE_OK ? NULL : err.message,
                        .documents = 1,
                        .bytes = bytes,
                        .tokens = (long long)n};
    store_corpus_put(c->st, &row);
    log_info("corpus %s: %s (%zu tokens)", name, row.status, n);
}

void corpora_remove_files(corpora *c, const char *name) {
    char dir[PATH_MAX];
    corpora_dir(c, name, dir, sizeof dir);
    fs_remove_tree(dir);
}
