/* POST /api/experiments/import: a bundle (GET /api/experiments/{id}/bundle's JSON) as the body,
 * stored again as an experiment with its runs and points, nothing trained (svc_import.h). An upload
 * route (the body goes to a file, up to SVC_IMPORT_MAX_BYTES) that runs on the compute pool. */
#include <string.h>

#include "api/api.h"
#include "services/svc_import.h"

void api_experiments_import(http_request *req, const api_ctx *api) {
    size_t size = 0;
    const char *upload = http_request_upload_path(req, &size);
    const char *name = http_request_query(req, "name");
    if (!upload || size == 0) {
        http_reply_error(req, 422, "invalid_field", "body",
                         "send an experiment's bundle (GET /api/experiments/{id}/bundle) as the body");
        return;
    }
    if (name && (!*name || strlen(name) > 200)) {
        http_reply_error(req, 422, "invalid_field", "name", "name must be 1 to 200 characters");
        return;
    }
    json_t *out = NULL;
    svc_error err;
    if (svc_import_bundle(api->svc, upload, name, &out, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    http_reply_json(req, 201, out);
}
