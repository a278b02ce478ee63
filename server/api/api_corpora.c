/* Corpora: list, get, upload plain text (streamed to disk, tokenized on the probe queue), delete;
 * and a small tokenize endpoint for labelling attention maps. The workflows are the corpus
 * service's (svc_corpora.h); these parse, call and reply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "services/svc_corpora.h"

void api_corpora_list(http_request *req, const api_ctx *api) {
    json_t *list;
    svc_error err;
    if (svc_corpora_list(api->svc, &list, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        http_reply_json(req, 200, json_pack("{s:o}", "corpora", list));
}

void api_corpora_get(http_request *req, const api_ctx *api) {
    json_t *c;
    svc_error err;
    if (svc_corpora_get(api->svc, http_request_param(req, "name"), &c, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        http_reply_json(req, 200, json_pack("{s:o}", "corpus", c));
}

void api_corpora_upload(http_request *req, const api_ctx *api) {
    size_t size;
    const char *upload = http_request_upload_path(req, &size);
    json_t *c;
    svc_error err;
    if (svc_corpora_upload(api->svc, http_request_query(req, "name"), http_request_query(req, "encoding"), upload, size,
                           &c, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        http_reply_json(req, 202, json_pack("{s:o}", "corpus", c));
}

void api_corpora_delete(http_request *req, const api_ctx *api) {
    svc_error err;
    if (svc_corpora_delete(api->svc, http_request_param(req, "name"), &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        http_reply_bytes(req, 204, NULL, "", 0);
}

void api_tokenize(http_request *req, const api_ctx *api) {
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
    const tokenizer *tok = corpora_tokenizer(api->svc->corpora, encoding);
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
    int bad = !jids || !pieces;
    for (size_t i = 0; i < n && !bad; i++) {
        char piece[256];
        tokenizer_piece_display(tok, ids[i], piece, sizeof piece);
        json_t *js = json_string(piece);
        if (!js) { /* not valid UTF-8 on its own (part of a character): show the id */
            snprintf(piece, sizeof piece, "<%d>", ids[i]);
            js = json_string(piece);
        }
        bad |= json_array_append_new(jids, json_integer(ids[i])) < 0;
        bad |= json_array_append_new(pieces, js) < 0;
    }
    free(ids);
    if (bad) { /* http_reply_json answers 500 for what could not be built */
        json_decref(jids);
        json_decref(pieces);
        jids = pieces = NULL;
    }
    http_reply_json(req, 200, json_pack("{s:s, s:o, s:o}", "encoding", encoding, "ids", jids, "pieces", pieces));
done:
    json_decref(body);
}
