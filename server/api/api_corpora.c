/* Corpora: list, get, upload plain text (streamed to disk, tokenized on the probe queue), delete;
 * and a small tokenize endpoint for labelling attention maps. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "util/fsutil.h"
#include "util/log.h"

void api_corpora_list(http_request *req, void *ctx) {
    app *a = ctx;
    json_t *list;
    if (store_corpus_list(a->store, &list) != STORE_OK) {
        json_decref(list);
        api_store_failed(req);
        return;
    }
    size_t i;
    json_t *c;
    /* Windows at the run default of 128 tokens: what a training run can draw from. */
    json_array_foreach(list, i, c) {
        json_int_t tokens = json_integer_value(json_object_get(c, "tokens"));
        json_object_set_new(c, "windows", json_integer(tokens > 1 ? (tokens - 1) / 128 : 0));
        json_object_set_new(c, "window_tokens", json_integer(128));
    }
    http_reply_json(req, 200, json_pack("{s:o}", "corpora", list));
}

static int valid_name(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 40) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-')) return 0;
    return 1;
}

void api_corpora_get(http_request *req, void *ctx) {
    app *a = ctx;
    const char *name = http_request_param(req, "name");
    json_t *c = NULL;
    store_status s = valid_name(name) ? store_corpus_get(a->store, name, &c) : STORE_NOT_FOUND;
    if (s == STORE_NOT_FOUND)
        http_reply_error(req, 404, "not_found", "name", "no corpus named '%s'", name ? name : "");
    else if (s != STORE_OK)
        api_store_failed(req);
    else
        http_reply_json(req, 200, json_pack("{s:o}", "corpus", c));
}

typedef struct {
    corpora *c;
    char name[48], encoding[8];
} tokenize_job;

static void tokenize_upload(void *arg) {
    tokenize_job *t = arg;
    corpora_tokenize_upload(t->c, t->name, t->encoding);
    free(t);
}

void api_corpora_upload(http_request *req, void *ctx) {
    app *a = ctx;
    const char *name = http_request_query(req, "name");
    static const char *const encodings[] = {"gpt2", "bytes", NULL};
    const char *encoding;
    if (!valid_name(name)) {
        http_reply_error(req, 422, "invalid_field", "name", "name must be 1-40 characters of a-z, 0-9, _ and -");
        return;
    }
    if (corpora_name_reserved(name)) {
        http_reply_error(req, 409, "conflict", "name", "'%s' is the name of a built-in corpus", name);
        return;
    }
    if (api_query_enum(req, "encoding", encodings, &encoding) < 0) return;
    if (!encoding) encoding = "gpt2";
    if (!corpora_tokenizer(a->corpora, encoding)) {
        http_reply_error(req, 422, "invalid_field", "encoding", "the %s tokenizer is not available here", encoding);
        return;
    }
    size_t size;
    const char *upload = http_request_upload_path(req, &size);
    if (!upload || size == 0) {
        http_reply_error(req, 422, "invalid_field", "body", "send the corpus as a non-empty text/plain body");
        return;
    }
    store_corpus row = {.name = name,
                        .source = "uploaded text",
                        .tokenizer = encoding,
                        .status = "tokenizing",
                        .bytes = (long long)size};
    store_status s = store_corpus_create(a->store, &row);
    if (s == STORE_CONFLICT) {
        http_reply_error(req, 409, "conflict", "name", "a corpus named '%s' exists already", name);
        return;
    }
    if (s != STORE_OK) {
        api_store_failed(req);
        return;
    }
    char dir[PATH_MAX], dest[PATH_MAX + 16];
    corpora_dir(a->corpora, name, dir, sizeof dir);
    snprintf(dest, sizeof dest, "%s/upload.txt", dir);
    tokenize_job *t = calloc(1, sizeof *t);
    if (fs_mkdirs(dir) < 0 || rename(upload, dest) < 0 || !t) {
        free(t);
        store_corpus_delete(a->store, name);
        http_reply_error(req, 500, "internal", NULL, "could not store the upload: %s", strerror(errno));
        return;
    }
    t->c = a->corpora;
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->encoding, sizeof t->encoding, "%s", encoding);
    if (jobs_probe_submit(a->jobs, tokenize_upload, t) < 0) {
        free(t);
        store_corpus_delete(a->store, name);
        corpora_remove_files(a->corpora, name);
        http_reply_header(req, "Retry-After", "5");
        http_reply_error(req, 429, "queue_full", NULL, "the probe queue is full; try again shortly");
        return;
    }
    json_t *c = NULL;
    if (store_corpus_get(a->store, name, &c) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    http_reply_json(req, 202, json_pack("{s:o}", "corpus", c));
}

void api_corpora_delete(http_request *req, void *ctx) {
    app *a = ctx;
    const char *name = http_request_param(req, "name");
    store_status s = valid_name(name) ? store_corpus_delete(a->store, name) : STORE_NOT_FOUND;
    if (s == STORE_NOT_FOUND) {
        http_reply_error(req, 404, "not_found", "name", "no corpus named '%s'", name ? name : "");
    } else if (s == STORE_CONFLICT) {
        http_reply_error(req, 409, "conflict", "name", "corpus '%s' is built in or used by a run", name);
    } else if (s != STORE_OK) {
        api_store_failed(req);
    } else {
        corpora_remove_files(a->corpora, name);
        http_reply_bytes(req, 204, NULL, "", 0);
    }
}

void api_tokenize(http_request *req, void *ctx) {
    app *a = ctx;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"text", "encoding", NULL};
    const char *text, *encoding;
    if (api_only_fields(req, body, fields) < 0 || api_opt_string(req, body, "text", 65536, &text) < 0 ||
        api_opt_string(req, body, "encoding", 8, &encoding) < 0)
        goto done;
    if (!text) {
        http_reply_error(req, 422, "invalid_field", "text", "text is required");
        goto done;
    }
    if (!encoding) encoding = "gpt2";
    const tokenizer *tok = corpora_tokenizer(a->corpora, encoding);
    if (!tok) {
        http_reply_error(req, 422, "invalid_field", "encoding", "encoding must be gpt2 or bytes (and available)");
        goto done;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    engine_error err = {0};
    if (tokenizer_encode(tok, text, strlen(text), &ids, &n, &err) != ENGINE_OK) {
        http_reply_error(req, 500, "internal", NULL, "%s", err.message);
        goto done;
    }
    json_t *jids = json_array(), *pieces = json_array();
    for (size_t i = 0; i < n; i++) {
        char piece[256];
        tokenizer_piece_display(tok, ids[i], piece, sizeof piece);
        json_t *js = json_string(piece);
        if (!js) { /* not valid UTF-8 on its own (part of a character): show the id */
            snprintf(piece, sizeof piece, "<%d>", ids[i]);
            js = json_string(piece);
        }
        json_array_append_new(jids, json_integer(ids[i]));
        json_array_append_new(pieces, js);
    }
    free(ids);
    http_reply_json(req, 200, json_pack("{s:s, s:o, s:o}", "encoding", encoding, "ids", jids, "pieces", pieces));
done:
    json_decref(body);
}
