/* The seed blog's open questions over an experiment: head spread (Q1) and task accuracy (Q2), as
 * JSON or CSV. The figures come from svc_questions.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "services/svc_questions.h"

static void reply(http_request *req, app *a, int which, int as_csv) {
    long long id, at = 0;
    if (api_path_id(req, &id) < 0) return;
    /* absent: step 2000 (or a fifth of shorter runs), chosen by the service */
    if (which == 0 && api_query_int(req, "at", 1, 10000000, 0, &at) < 0) return;
    char what[96], key[256], disp[112];
    snprintf(what, sizeof what, "%s|%s|%lld", which == 0 ? "head_spread" : "accuracy", as_csv ? "csv" : "json", at);
    if (api_experiment_key(a, id, what, key, sizeof key) < 0) key[0] = 0;
    snprintf(disp, sizeof disp, "attachment; filename=\"experiment-%lld-%s.csv\"", id,
             which == 0 ? "head-spread" : "accuracy");
    if (as_csv) http_reply_header(req, "Content-Disposition", disp);
    const char *type = as_csv ? "text/csv; charset=utf-8" : "application/json";
    if (api_reply_cached(req, a, key, type)) return;
    json_t *ans = NULL;
    svc_error err;
    svc_status st = which == 0 ? svc_questions_head_spread(a, id, (long)at, 0.95, &ans, &err)
                               : svc_questions_accuracy(a, id, 0.95, &ans, &err);
    if (st != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    const char *member = which == 0 ? "head_spread" : "accuracy";
    if (!as_csv) {
        api_reply_json_keeping(req, a, key, json_pack("{s:o}", member, ans));
        return;
    }
    char *csv = which == 0 ? svc_questions_head_spread_csv(ans) : svc_questions_accuracy_csv(ans);
    json_decref(ans);
    api_reply_keeping(req, a, key, type, csv, csv ? strlen(csv) : 0);
}

void api_experiments_head_spread(http_request *req, void *ctx) { reply(req, ctx, 0, 0); }
void api_experiments_head_spread_csv(http_request *req, void *ctx) { reply(req, ctx, 0, 1); }
void api_experiments_accuracy(http_request *req, void *ctx) { reply(req, ctx, 1, 0); }
void api_experiments_accuracy_csv(http_request *req, void *ctx) { reply(req, ctx, 1, 1); }
