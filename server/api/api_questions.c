/* The seed blog's open questions over an experiment: head spread (Q1) and task accuracy (Q2), as
 * JSON or CSV. The figures come from svc_questions.h; their CSV tables are written here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "services/svc_questions.h"
#include "util/csv.h"

/* ---- the answers as CSV tables (new strings, NULL when out of memory) ------------------------- */

/* Figures in %.10g, empty where they do not exist. */
static void csv_summary(csv_buf *b, const json_t *s, int with_p) {
    csv_number(b, json_object_get(s, "n"), 10);
    csv_number(b, json_object_get(s, "mean"), 10);
    csv_number(b, json_object_get(s, "std"), 10);
    csv_number(b, json_array_get(json_object_get(s, "ci"), 0), 10);
    csv_number(b, json_array_get(json_object_get(s, "ci"), 1), 10);
    if (with_p) csv_number(b, json_object_get(s, "p"), 10);
    csv_text(b, json_string_value(json_object_get(s, "ci_method")));
    if (!with_p) { /* an accuracy: the pooled answers and their Wilson interval (overall acc only) */
        csv_number(b, json_object_get(s, "answers"), 10);
        csv_number(b, json_array_get(json_object_get(s, "wilson_ci"), 0), 10);
        csv_number(b, json_array_get(json_object_get(s, "wilson_ci"), 1), 10);
    }
    csv_end_row(b);
}

/* variant,attention,metric,point,n,mean,std,ci_lo,ci_hi,p,ci_method (point: at, end, change) */
static char *head_spread_csv(const json_t *answer) {
    csv_buf b = {0};
    csv_cells(&b, "variant,attention,metric,point,n,mean,std,ci_lo,ci_hi,p,ci_method");
    csv_end_row(&b);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(answer, "variants"), i, v) {
        const char *mk;
        json_t *m;
        json_object_foreach(json_object_get(v, "metrics"), mk, m) {
            static const char *const points[] = {"at", "end", "change"};
            for (int p = 0; p < 3; p++) {
                csv_text(&b, json_string_value(json_object_get(v, "name")));
                csv_text(&b, json_string_value(json_object_get(v, "attention")));
                csv_text(&b, mk);
                csv_text(&b, points[p]);
                csv_summary(&b, json_object_get(m, points[p]), 1);
            }
        }
    }
    return csv_take(&b, NULL);
}

/* variant,attention,corpus,task,key,n,mean,std,ci_lo,ci_hi,ci_method,answers,wilson_lo,wilson_hi */
static char *accuracy_csv(const json_t *answer) {
    csv_buf b = {0};
    csv_cells(&b, "variant,attention,corpus,task,key,n,mean,std,ci_lo,ci_hi,ci_method,answers,wilson_lo,wilson_hi");
    csv_end_row(&b);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(answer, "variants"), i, v) {
        size_t k;
        json_t *key;
        json_array_foreach(json_object_get(v, "keys"), k, key) {
            const char *ks = json_string_value(key);
            csv_text(&b, json_string_value(json_object_get(v, "name")));
            csv_text(&b, json_string_value(json_object_get(v, "attention")));
            csv_text(&b, json_string_value(json_object_get(v, "corpus")));
            csv_text(&b, json_string_value(json_object_get(json_object_get(v, "task"), "kind")));
            csv_text(&b, ks);
            csv_summary(&b, json_object_get(json_object_get(v, "acc"), ks), 0);
        }
    }
    return csv_take(&b, NULL);
}

static void reply(http_request *req, const api_ctx *api, int which, int as_csv) {
    long long id, at = 0;
    if (api_path_id(req, &id) < 0) return;
    /* absent: step 2000 (or a fifth of shorter runs), chosen by the service */
    if (which == 0 && api_query_int(req, "at", 1, 10000000, 0, &at) < 0) return;
    char what[96], key[256], disp[112];
    snprintf(what, sizeof what, "%s|%s|%lld", which == 0 ? "head_spread" : "accuracy", as_csv ? "csv" : "json", at);
    if (api_experiment_key(api, id, what, key, sizeof key) < 0) key[0] = 0;
    snprintf(disp, sizeof disp, "attachment; filename=\"experiment-%lld-%s.csv\"", id,
             which == 0 ? "head-spread" : "accuracy");
    if (as_csv) http_reply_header(req, "Content-Disposition", disp);
    const char *type = as_csv ? "text/csv; charset=utf-8" : "application/json";
    if (api_reply_cached(req, api, key, type)) return;
    json_t *ans = NULL;
    svc_error err;
    svc_status st = which == 0 ? svc_questions_head_spread(api->svc, id, (long)at, 0.95, &ans, &err)
                               : svc_questions_accuracy(api->svc, id, 0.95, &ans, &err);
    if (st != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    const char *member = which == 0 ? "head_spread" : "accuracy";
    if (!as_csv) {
        api_reply_json_keeping(req, api, key, json_pack("{s:o}", member, ans));
        return;
    }
    char *csv = which == 0 ? head_spread_csv(ans) : accuracy_csv(ans);
    json_decref(ans);
    api_reply_keeping(req, api, key, type, csv, csv ? strlen(csv) : 0);
}

void api_experiments_head_spread(http_request *req, const api_ctx *api) { reply(req, api, 0, 0); }
void api_experiments_head_spread_csv(http_request *req, const api_ctx *api) { reply(req, api, 0, 1); }
void api_experiments_accuracy(http_request *req, const api_ctx *api) { reply(req, api, 1, 0); }
void api_experiments_accuracy_csv(http_request *req, const api_ctx *api) { reply(req, api, 1, 1); }
