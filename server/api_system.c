/* System routes: health. */
#include "app.h"

void api_health(http_request *req, void *ctx) {
    app *a = ctx;
    int db_ok = store_ping(a->store) == STORE_OK;
    json_t *body = json_pack("{s:s, s:s, s:s, s:f, s:i}", "status", db_ok ? "ok" : "degraded", "version",
                             ATTNLAB_VERSION, "db", db_ok ? "ok" : "error", "uptime_s", app_now() - a->started_at,
                             "schema_version", store_schema_version(a->store));
    http_reply_json(req, db_ok ? 200 : 503, body);
}
