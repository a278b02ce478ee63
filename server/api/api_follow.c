/* Presenter mode (services/svc_follow.h): POST /api/follow makes a join code, PUT
 * /api/follow/{code} sets what the presenter shows and broadcasts it as a `follow` event on
 * /api/events, GET /api/follow/{code} reads it for a follower that joins late. */
#include "api/api.h"
#include "services/svc_follow.h"

#include <stdlib.h>
#include <string.h>

void api_follow_create(http_request *req, const api_ctx *api) {
    (void)api;
    json_t *out;
    svc_error err;
    if (svc_follow_create(app_now(), &out, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    http_reply_json(req, 201, json_pack("{s:o}", "follow", out));
}

void api_follow_update(http_request *req, const api_ctx *api) {
    json_t *body = http_request_json_object(req);
    if (!body) return;
    json_t *out;
    char *event;
    svc_error err;
    svc_status st = svc_follow_update(http_request_param(req, "code"), http_request_header(req, "X-Follow-Token"), body,
                                      app_now(), &out, &event, &err);
    json_decref(body);
    if (st == SVC_CONFLICT && err.code && !strcmp(err.code, "forbidden")) {
        http_reply_error(req, 403, "forbidden", "token", "%s", err.message);
        return;
    }
    if (st != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    events_publish(api->svc->events, 0, "follow", event);
    free(event);
    http_reply_json(req, 200, json_pack("{s:o}", "follow", out));
}

void api_follow_get(http_request *req, const api_ctx *api) {
    (void)api;
    json_t *out;
    svc_error err;
    if (svc_follow_get(http_request_param(req, "code"), app_now(), &out, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    http_reply_json(req, 200, json_pack("{s:o}", "follow", out));
}
