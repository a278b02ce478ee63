/* Task corpora (engine/tasks.h): the kinds with their parameters, and generating one by name. A
 * task corpus is made in milliseconds from its config and recorded with it (corpora.h). */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "services/svc_corpora.h"

void api_task_kinds(http_request *req, const api_ctx *api) {
    (void)api;
    json_t *kinds;
    svc_error err;
    if (svc_corpora_task_kinds(&kinds, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        http_reply_json(req, 200, kinds);
}

void api_task_corpora_create(http_request *req, const api_ctx *api) {
    json_t *body = http_request_json_object(req);
    if (!body) return;
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *spec = json_deep_copy(body), *row;
    int created;
    svc_error err;
    if (spec) json_object_del(spec, "name");
    if (!spec)
        http_reply_error(req, 500, "internal", NULL, "out of memory");
    else if (svc_corpora_create_task(api->svc, name, spec, &row, &created, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        http_reply_json(req, created ? 201 : 200, json_pack("{s:o}", "corpus", row));
    json_decref(spec);
    json_decref(body);
}
