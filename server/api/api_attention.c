/* GET /api/attention-kinds: the table of attention variants (svc_attention.h). */
#include "api/api.h"
#include "services/svc_attention.h"

void api_attention_kinds(http_request *req, const api_ctx *api) {
    (void)api;
    json_t *kinds = svc_attention_kinds();
    if (!kinds)
        http_reply_error(req, 500, "internal", NULL, "out of memory");
    else
        http_reply_json(req, 200, kinds);
}
