#include "services/svc_idempotency.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services/app.h"
#include "util/hash.h"

static int key_ok(const char *k) {
    size_t n = strlen(k);
    if (n < 1 || n > SVC_IDEMPOTENCY_KEY_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] < 0x20 || (unsigned char)k[i] > 0x7e) return 0;
    return 1;
}

/* What the key holds, compared with idem: SVC_OK (a retry: idem->replay set), SVC_NOT_FOUND (not
 * recorded), or the error. */
static svc_status lookup(app *a, svc_idem *idem, svc_error *err) {
    json_t *row = NULL;
    store_status s = store_idempotency_get(a->store, idem->key, &row);
    if (s == STORE_NOT_FOUND) return SVC_NOT_FOUND;
    if (s != STORE_OK) return svc_store_failed(err);
    const char *kind = json_string_value(json_object_get(row, "kind"));
    const char *hash = json_string_value(json_object_get(row, "request_hash"));
    long long id = (long long)json_integer_value(json_object_get(row, "id"));
    svc_status v = SVC_OK;
    if (!kind || !hash || strcmp(kind, idem->kind) || strcmp(hash, idem->request_hash) || id <= 0)
        v = svc_fail(err, SVC_INVALID, "idempotency_key_reused", "Idempotency-Key",
                     "this Idempotency-Key was used for another request; use a new key for a new request");
    else
        idem->replay = id;
    json_decref(row);
    return v;
}

svc_status svc_idempotency_begin(app *a, const char *kind, const char *key, const json_t *request, svc_idem *out,
                                 svc_error *err) {
    memset(out, 0, sizeof *out);
    if (!key_ok(key))
        return svc_fail(err, SVC_INVALID, "invalid_field", "Idempotency-Key",
                        "Idempotency-Key must be 1 to %d printable ASCII characters", SVC_IDEMPOTENCY_KEY_MAX);
    snprintf(out->key, sizeof out->key, "%s", key);
    out->kind = kind;
    /* The request as the hash sees it: its members sorted, so that the order they came in does not
     * count; the kind first, so that one body for two kinds differs. */
    char *text = json_dumps(request, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!text) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    hash_sha256 h;
    hash_sha256_init(&h);
    hash_sha256_update(&h, kind, strlen(kind) + 1);
    hash_sha256_update(&h, text, strlen(text));
    hash_sha256_hex(&h, out->request_hash);
    free(text);
    out->record = (store_idempotency){.key = out->key, .request_hash = out->request_hash};
    svc_status v = lookup(a, out, err);
    return v == SVC_NOT_FOUND ? SVC_OK : v;
}

svc_status svc_idempotency_settle(app *a, svc_idem *idem, svc_error *err) { return lookup(a, idem, err); }
