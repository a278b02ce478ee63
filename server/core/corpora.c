#include "core/corpora.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fsutil.h"
#include "util/hash.h"
#include "util/log.h"

struct corpora {
    store *st;
    char data_dir[PATH_MAX];
    tokenizer *gpt2, *bytes;
};

int corpora_name_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 40) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-')) return 0;
    return 1;
}

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

/* Writes a tokenized corpus as the little-endian uint16 file that corpus_open_u16 reads: under a
 * name of its own first, then renamed, so a reader (another node sharing the directory) sees the old
 * file or the new one, never half of one; then records its size and SHA-256 (corpora_open checks
 * them). */
static engine_status write_tokens(corpora *c, const char *name, const corpus *cp, const char *path, engine_error *err) {
    size_t n = corpus_token_count(cp);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    const uint16_t *t = corpus_tokens(cp);
    for (size_t i = 0; i < n; i++) ids[i] = t[i];
    char tmp[PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld-%p", path, (long)getpid(), (void *)ids);
    engine_status s = corpus_write_u16(tmp, ids, n, err);
    free(ids);
    if (s == ENGINE_OK && rename(tmp, path) != 0) {
        s = engine_fail(err, ENGINE_ERR_IO, "cannot rename %s: %s", tmp, strerror(errno));
        unlink(tmp);
    }
    char hex[65], rel[PATH_MAX];
    uint64_t bytes = 0;
    snprintf(rel, sizeof rel, "corpora/%s/tokens.u16", name);
    if (s == ENGINE_OK && hash_file_sha256(path, hex, &bytes) == 0) {
        store_artifact a = {.path = rel, .kind = "corpus", .bytes = (long long)bytes, .sha256 = hex};
        if (store_artifact_put(c->st, &a) != STORE_OK) log_warn("corpus %s: its checksum could not be recorded", name);
    }
    return s;
}

/* The built-in corpora made from text shipped in the tree, tokenized into the data directory at each
 * start (a few hundred KB: milliseconds). One row each: its name, the tokenizer, the text under the
 * source directory and what it is. `default` is built apart, by `make corpus`. */
static const struct {
    const char *name, *encoding, *text, *source;
    int documents;
} builtins[] = {
    {"small", "gpt2", "small/text.txt", "Moby-Dick chapters 1-32 (public domain), shipped in corpora/small", 32},
    {"small-bytes", "bytes", "small/text.txt",
     "Moby-Dick chapters 1-32 (public domain), shipped in corpora/small, as bytes (vocabulary 256): the classroom "
     "corpus",
     32},
};

int corpora_name_reserved(const char *name) {
    if (!name) return 0;
    if (!strcmp(name, "default")) return 1;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(name, builtins[i].name)) return 1;
    return 0;
}

static void register_builtin(corpora *c, const char *source_dir, size_t b) {
    char text[PATH_MAX], dir[PATH_MAX], tokens[PATH_MAX + 16];
    const tokenizer *tok = corpora_tokenizer(c, builtins[b].encoding);
    snprintf(text, sizeof text, "%s/%s", source_dir, builtins[b].text);
    corpora_dir(c, builtins[b].name, dir, sizeof dir);
    snprintf(tokens, sizeof tokens, "%s/tokens.u16", dir);
    if (!tok || !file_exists(text)) return;
    json_t *old = NULL; /* an upload that took the name before it was reserved keeps it */
    int upload =
        store_corpus_get(c->st, builtins[b].name, &old) == STORE_OK && !json_is_true(json_object_get(old, "builtin"));
    json_decref(old);
    if (upload) {
        log_warn("corpus '%s' is an upload, not the built-in corpus: rename or delete it", builtins[b].name);
        return;
    }
    engine_error err = {0};
    corpus *cp = NULL;
    if (fs_mkdirs(dir) < 0 || corpus_from_text_file(&cp, text, tok, &err) != ENGINE_OK) {
        log_warn("corpus %s: %s", builtins[b].name, err.message[0] ? err.message : strerror(errno));
        return;
    }
    size_t n = corpus_token_count(cp);
    engine_status s = write_tokens(c, builtins[b].name, cp, tokens, &err);
    corpus_free(cp);
    struct stat stt;
    stat(text, &stt);
    store_corpus row = {.name = builtins[b].name,
                        .source = builtins[b].source,
                        .tokenizer = builtins[b].encoding,
                        .status = s == ENGINE_OK ? "ready" : "failed",
                        .error = s == ENGINE_OK ? NULL : err.message,
                        .documents = builtins[b].documents,
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
    if (store_corpora_fail_tokenizing(st,
                                      "the service stopped while this corpus was being tokenized: delete it and "
                                      "upload it again",
                                      &stale) != STORE_OK)
        log_error("corpora: could not recover uploads left tokenizing: %s", store_last_error());
    else if (stale > 0)
        log_warn("%d corpus upload(s) were being tokenized when the service last stopped: now failed", stale);
    char buf[PATH_MAX];
    const char *src = find_source_dir(source_dir, buf, sizeof buf);
    if (src)
        for (size_t b = 0; b < sizeof builtins / sizeof builtins[0]; b++) register_builtin(c, src, b);
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

int corpora_vocab_of(const json_t *row) {
    const char *status = json_string_value(json_object_get(row, "status"));
    const char *tok = json_string_value(json_object_get(row, "tokenizer"));
    if (!status || strcmp(status, "ready") || !tok) return -1;
    if (!strcmp(tok, "task")) {
        json_int_t v = json_integer_value(json_object_get(json_object_get(row, "task"), "vocab"));
        return v >= 2 ? (int)v : -1;
    }
    return !strcmp(tok, "bytes") ? 256 : 50257;
}

int corpora_vocab(corpora *c, const char *name) {
    json_t *row = NULL;
    if (store_corpus_get(c->st, name, &row) != STORE_OK) return -1;
    int vocab = corpora_vocab_of(row);
    json_decref(row);
    return vocab;
}

engine_status corpora_open(corpora *c, const char *name, corpus **out, engine_error *err) {
    char dir[PATH_MAX], tokens[PATH_MAX + 16];
    corpora_dir(c, name, dir, sizeof dir);
    snprintf(tokens, sizeof tokens, "%s/tokens.u16", dir);
    /* A token file written by a node is recorded with its checksum: one that no longer matches (cut
     * short, replaced by another's) is refused rather than trained on. */
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "corpora/%s/tokens.u16", name);
    json_t *rec = NULL;
    if (store_artifact_get(c->st, rel, &rec) == STORE_OK) {
        char hex[65];
        uint64_t bytes = 0;
        const char *want = json_string_value(json_object_get(rec, "sha256"));
        int ok = hash_file_sha256(tokens, hex, &bytes) == 0 && want && !strcmp(hex, want) &&
                 (long long)bytes == json_integer_value(json_object_get(rec, "bytes"));
        json_decref(rec);
        if (!ok) {
            *out = NULL;
            return engine_fail(err, ENGINE_ERR_FORMAT,
                               "the token file of corpus '%s' does not match its recorded checksum", name);
        }
    }
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
        s = write_tokens(c, name, cp, tokens, &err);
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

/* ---- task corpora ---------------------------------------------------------------------------- */

static int task_fail(char *field, size_t flen, char *msg, size_t mlen, const char *f, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int task_fail(char *field, size_t flen, char *msg, size_t mlen, const char *f, const char *fmt, ...) {
    snprintf(field, flen, "%s", f);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, mlen, fmt, ap);
    va_end(ap);
    return -1;
}

int corpora_task_config_parse(const json_t *spec, tasks_config *out, char *field, size_t field_len, char *msg,
                              size_t msg_len) {
    if (!json_is_object(spec))
        return task_fail(field, field_len, msg, msg_len, "", "a task corpus config is an object");
    const char *kind = json_string_value(json_object_get(spec, "kind"));
    int ki = tasks_kind_index(kind);
    if (ki < 0) {
        char known[160] = "";
        for (int i = 0; i < tasks_kind_count(); i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                     tasks_kind_at(i)->name);
        return task_fail(field, field_len, msg, msg_len, "kind", "kind must be one of %s", known);
    }
    const tasks_kind *k = tasks_kind_at(ki);
    tasks_config_defaults(out, ki);
    engine_error err = {0};
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)spec, key, v) {
        if (!strcmp(key, "kind")) continue;
        if (!strcmp(key, "params")) {
            if (!json_is_object(v))
                return task_fail(field, field_len, msg, msg_len, "params", "params must be an object");
            const char *pk;
            json_t *pv;
            json_object_foreach(v, pk, pv) {
                char f[64];
                snprintf(f, sizeof f, "params.%s", pk);
                int known = 0;
                for (int i = 0; i < k->n_params; i++) known |= !strcmp(k->params[i].name, pk);
                if (!known)
                    return task_fail(field, field_len, msg, msg_len, f, "%s has no parameter '%s'", k->name, pk);
                if (!json_is_integer(pv))
                    return task_fail(field, field_len, msg, msg_len, f, "%s must be an integer", pk);
                if (tasks_config_set(out, pk, (long)json_integer_value(pv), &err) != ENGINE_OK)
                    return task_fail(field, field_len, msg, msg_len, f, "%s", err.message);
            }
        } else if (!strcmp(key, "offsets")) {
            if (!k->has_offsets)
                return task_fail(field, field_len, msg, msg_len, "offsets", "%s takes no offsets", k->name);
            int offs[TASKS_MAX_OFFSETS], n = 0;
            size_t i;
            json_t *o;
            if (!json_is_array(v) || json_array_size(v) > TASKS_MAX_OFFSETS)
                return task_fail(field, field_len, msg, msg_len, "offsets",
                                 "offsets must be an array of 1 to %d integers", TASKS_MAX_OFFSETS);
            json_array_foreach(v, i, o) {
                if (!json_is_integer(o))
                    return task_fail(field, field_len, msg, msg_len, "offsets", "offsets[%zu] must be an integer", i);
                offs[n++] = (int)json_integer_value(o);
            }
            if (tasks_config_set_offsets(out, offs, n, &err) != ENGINE_OK)
                return task_fail(field, field_len, msg, msg_len, "offsets", "%s", err.message);
        } else if (!strcmp(key, "vocab") || !strcmp(key, "seq_len") || !strcmp(key, "windows") ||
                   !strcmp(key, "seed")) {
            if (!json_is_integer(v) || json_integer_value(v) < 0)
                return task_fail(field, field_len, msg, msg_len, key, "%s must be a non-negative integer", key);
            if (tasks_config_set(out, key, (long)json_integer_value(v), &err) != ENGINE_OK)
                return task_fail(field, field_len, msg, msg_len, key, "%s", err.message);
        } else {
            return task_fail(field, field_len, msg, msg_len, key, "unknown member '%s'", key);
        }
    }
    if ((long long)out->windows * out->seq_len > CORPORA_TASK_MAX_TOKENS)
        return task_fail(field, field_len, msg, msg_len, "windows",
                         "windows x seq_len = %lld tokens is more than a task corpus may hold (%d)",
                         (long long)out->windows * out->seq_len, CORPORA_TASK_MAX_TOKENS);
    if (tasks_config_validate(out, &err) != ENGINE_OK) {
        /* the engine's message names the field it is about */
        const char *f = "";
        static const char *const names[] = {"vocab", "seq_len", "windows", "offsets", NULL};
        for (int i = 0; names[i]; i++)
            if (strstr(err.message, names[i])) f = names[i];
        for (int i = 0; i < k->n_params; i++)
            if (strstr(err.message, k->params[i].name)) {
                char tmp[64];
                snprintf(tmp, sizeof tmp, "params.%s", k->params[i].name);
                return task_fail(field, field_len, msg, msg_len, tmp, "%s", err.message);
            }
        return task_fail(field, field_len, msg, msg_len, f, "%s", err.message);
    }
    return 0;
}

/* The config as the JSON that is stored (every parameter explicit); NULL on allocation failure. */
static json_t *corpora_task_config_json(const tasks_config *cfg) {
    const tasks_kind *k = tasks_kind_at(cfg->kind);
    if (!k) return NULL;
    json_t *params = json_object();
    for (int i = 0; params && i < k->n_params; i++)
        if (json_object_set_new(params, k->params[i].name, json_integer(cfg->p[i])) < 0) {
            json_decref(params);
            params = NULL;
        }
    json_t *o = params ? json_pack("{s:s, s:i, s:i, s:I, s:I, s:o}", "kind", k->name, "vocab", cfg->vocab, "seq_len",
                                   cfg->seq_len, "windows", (json_int_t)cfg->windows, "seed", (json_int_t)cfg->seed,
                                   "params", params)
                       : NULL;
    if (o && k->has_offsets) {
        json_t *offs = json_array();
        for (int i = 0; offs && i < cfg->n_offsets; i++)
            if (json_array_append_new(offs, json_integer(cfg->offsets[i])) < 0) {
                json_decref(offs);
                offs = NULL;
            }
        if (!offs || json_object_set_new(o, "offsets", offs) < 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

corpora_task_result corpora_create_task(corpora *c, const char *name, const tasks_config *cfg, char *msg,
                                        size_t msg_len) {
    json_t *want = corpora_task_config_json(cfg), *old = NULL;
    char *text = want ? json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    corpora_task_result res = CORPORA_TASK_FAILED;
    if (!text) {
        snprintf(msg, msg_len, "out of memory");
        goto done;
    }
    store_status gs = store_corpus_get(c->st, name, &old);
    if (gs == STORE_OK) {
        json_t *t = json_object_get(old, "task");
        const char *status = json_string_value(json_object_get(old, "status"));
        res = t && json_equal(t, want) && status && !strcmp(status, "ready") ? CORPORA_TASK_EXISTS
                                                                             : CORPORA_TASK_CONFLICT;
        if (res == CORPORA_TASK_CONFLICT)
            snprintf(msg, msg_len, "a corpus named '%s' exists already with other contents", name);
        goto done;
    }
    if (gs != STORE_NOT_FOUND) {
        snprintf(msg, msg_len, "the corpus catalogue cannot be read: %s", store_last_error());
        goto done;
    }
    engine_error err = {0};
    tasks_corpus *tc = NULL;
    char dir[PATH_MAX], tokens[PATH_MAX + 16], labels[PATH_MAX + 16];
    corpora_dir(c, name, dir, sizeof dir);
    snprintf(tokens, sizeof tokens, "%s/tokens.u16", dir);
    snprintf(labels, sizeof labels, "%s/labels.u8", dir);
    if (tasks_generate(&tc, cfg, &err) != ENGINE_OK || fs_mkdirs(dir) < 0 ||
        tasks_write(tc, tokens, labels, &err) != ENGINE_OK) {
        snprintf(msg, msg_len, "the task corpus could not be written: %s",
                 err.message[0] ? err.message : strerror(errno));
        tasks_corpus_free(tc);
        goto done;
    }
    char source[200];
    snprintf(source, sizeof source, "task %s: %ld instances, %ld answers, vocab %d (generated, seed %llu)",
             tasks_kind_at(cfg->kind)->name, tc->n_instances, tc->n_answers, cfg->vocab, (unsigned long long)cfg->seed);
    store_corpus row = {.name = name,
                        .source = source,
                        .tokenizer = "task",
                        .status = "ready",
                        .documents = tc->n_instances,
                        .bytes = (long long)(tc->n_tokens * 2),
                        .tokens = (long long)tc->n_tokens,
                        .task_json = text};
    tasks_corpus_free(tc);
    store_status s = store_corpus_create(c->st, &row);
    if (s == STORE_OK) {
        res = CORPORA_TASK_CREATED;
        log_info("corpus %s: generated (%s)", name, source);
    } else if (s == STORE_CONFLICT) {
        /* someone else made it meanwhile: same config is as good as ours */
        json_t *now = NULL;
        res = store_corpus_get(c->st, name, &now) == STORE_OK && json_equal(json_object_get(now, "task"), want)
                  ? CORPORA_TASK_EXISTS
                  : CORPORA_TASK_CONFLICT;
        if (res == CORPORA_TASK_CONFLICT) snprintf(msg, msg_len, "a corpus named '%s' exists already", name);
        json_decref(now);
    } else {
        snprintf(msg, msg_len, "the corpus could not be recorded: %s", store_last_error());
    }
done:
    json_decref(old);
    json_decref(want);
    free(text);
    return res;
}

engine_status corpora_open_tasks(corpora *c, const char *name, tasks_corpus **out, engine_error *err) {
    *out = NULL;
    json_t *row = NULL;
    if (store_corpus_get(c->st, name, &row) != STORE_OK)
        return engine_fail(err, ENGINE_ERR_INVALID, "corpus '%s' is not available", name);
    const json_t *task = json_object_get(row, "task");
    engine_status s = ENGINE_OK;
    if (task) {
        tasks_config cfg;
        char field[64], msg[256];
        if (corpora_task_config_parse(task, &cfg, field, sizeof field, msg, sizeof msg) < 0)
            s = engine_fail(err, ENGINE_ERR_INVALID, "corpus '%s' has a bad task config (%s): %s", name, field, msg);
        else
            s = tasks_generate(out, &cfg, err);
    }
    json_decref(row);
    return s;
}

int corpora_is_task(corpora *c, const char *name) {
    json_t *row = NULL;
    if (store_corpus_get(c->st, name, &row) != STORE_OK) return 0;
    int yes = !strcmp(json_string_value(json_object_get(row, "status")), "ready") &&
              json_is_object(json_object_get(row, "task"));
    json_decref(row);
    return yes;
}
