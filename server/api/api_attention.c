/* GET /api/attention-kinds: the table of attention variants (svc_attention.h). */
#include "api/app.h"
#include "services/svc_attention.h"

void api_attention_kinds(http_request *req, void *ctx) {
    (void)ctx;
    json_t *kinds = svc_attention_kinds();
    if (!kinds)
        http_reply_error(req, 500, "internal", NULL, "out of memory");
    else
        http_reply_json(req, 200, kinds);
}
