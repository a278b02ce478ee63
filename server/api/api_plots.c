/* GET /api/experiments/{id}/plot.svg?kind=bands|forest|tau|head_spread[&key=…|&metric=…]: an
 * experiment's figure as an SVG document (svc_plots.h), to embed or download. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "services/svc_plots.h"

void api_experiments_plot_svg(http_request *req, const api_ctx *api) {
    long long id;
    if (api_path_id(req, &id) < 0) return;
    const char *kind = http_request_query(req, "kind"), *key = http_request_query(req, "key");
    const char *metric = http_request_query(req, "metric");
    if (!kind) kind = "bands";
    if ((key && strlen(key) > 100) || (metric && strlen(metric) > 100)) {
        http_reply_error(req, 422, "invalid_field", key && strlen(key) > 100 ? "key" : "metric",
                         "at most 100 characters");
        return;
    }
    /* each kind takes the argument its table row names, and only that one */
    const char *arg = NULL;
    for (const svc_plot_kind *k = svc_plot_kinds; k->name; k++) {
        if (strcmp(k->name, kind)) continue;
        const char *wrong = !k->arg_name                  ? (key      ? "key"
                                                             : metric ? "metric"
                                                                      : NULL)
                            : !strcmp(k->arg_name, "key") ? (metric ? "metric" : NULL)
                                                          : (key ? "key" : NULL);
        if (wrong) {
            http_reply_error(req, 422, "invalid_field", wrong, "kind %s does not take %s", kind, wrong);
            return;
        }
        arg = k->arg_name && !strcmp(k->arg_name, "key") ? key : metric;
    }
    char *svg = NULL;
    svc_error err;
    if (svc_plot_experiment(api->svc, id, kind, arg, &svg, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    http_reply_take(req, 200, "image/svg+xml; charset=utf-8", svg, strlen(svg));
}
