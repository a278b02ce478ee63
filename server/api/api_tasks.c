/* Task corpora (engine/tasks.h): the kinds with their parameters, and generating one by name. A
 * task corpus is made in milliseconds from its config and recorded with it (corpora.h). */
#include <stdio.h>
#include <string.h>

#include "api/app.h"
#include "services/svc_corpora.h"

/* The common fields' bounds, as tasks.h states them (tasks_config_set checks them). */
static const struct {
    const char *name, *help;
    long long def, min, max;
} common[] = {
    {"vocab", "token ids 0..vocab-1 (24 reserved for PAD, BOS, QUERY, REPEAT and the tags)", 128, 64, 1024},
    {"seq_len", "window length: every window holds whole instances only", 128, 16, 4096},
    {"windows", "how many windows of seq_len tokens", 2048, 1, 1000000},
    {"seed", "the generator's seed", 1234, 0, 9007199254740991LL},
};

void api_task_kinds(http_request *req, void *ctx) {
    (void)ctx;
    json_t *kinds = json_array(), *fields = json_array();
    int bad = !kinds || !fields;
    for (size_t i = 0; !bad && i < sizeof common / sizeof common[0]; i++)
        bad |= json_array_append_new(fields, json_pack("{s:s, s:s, s:I, s:I, s:I}", "name", common[i].name, "help",
                                                       common[i].help, "default", (json_int_t)common[i].def, "min",
                                                       (json_int_t)common[i].min, "max", (json_int_t)common[i].max));
    for (int i = 0; !bad && i < tasks_kind_count(); i++) {
        const tasks_kind *k = tasks_kind_at(i);
        tasks_config d;
        tasks_config_defaults(&d, i);
        json_t *params = json_array();
        bad |= !params;
        for (int p = 0; !bad && p < k->n_params; p++)
            bad |= json_array_append_new(params, json_pack("{s:s, s:s, s:i, s:i, s:i}", "name", k->params[p].name,
                                                           "help", k->params[p].help, "default", k->params[p].def,
                                                           "min", k->params[p].min, "max", k->params[p].max));
        json_t *o = bad ? NULL
                        : json_pack("{s:s, s:s, s:o, s:b}", "name", k->name, "summary", k->summary, "params", params,
                                    "has_offsets", k->has_offsets);
        if (!o) json_decref(params);
        if (o && k->has_offsets) {
            json_t *offs = json_array();
            for (int j = 0; offs && j < d.n_offsets; j++) json_array_append_new(offs, json_integer(d.offsets[j]));
            bad |= !offs || json_object_set_new(o, "default_offsets", offs) < 0;
        }
        char names[TASKS_MAX_BUCKETS][12];
        int nb = tasks_buckets(&d, names);
        json_t *bk = json_array();
        for (int b = 0; bk && b < nb; b++) json_array_append_new(bk, json_string(names[b]));
        bad |= !o || !bk || json_object_set_new(o, "default_buckets", bk) < 0 || json_array_append_new(kinds, o) < 0;
    }
    if (bad) {
        json_decref(kinds);
        json_decref(fields);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    http_reply_json(req, 200, json_pack("{s:o, s:o}", "kinds", kinds, "fields", fields));
}

void api_task_corpora_create(http_request *req, void *ctx) {
    json_t *body = http_request_json_object(req);
    if (!body) return;
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *spec = json_deep_copy(body), *row;
    int created;
    svc_error err;
    if (spec) json_object_del(spec, "name");
    if (!spec)
        http_reply_error(req, 500, "internal", NULL, "out of memory");
    else if (svc_corpora_create_task(ctx, name, spec, &row, &created, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        http_reply_json(req, created ? 201 : 200, json_pack("{s:o}", "corpus", row));
    json_decref(spec);
    json_decref(body);
}
