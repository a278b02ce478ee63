/* Task corpora (engine/tasks.h): the kinds with their parameters, and generating one by name. A
 * task corpus is made in milliseconds from its config and recorded with it (corpora.h). */
#include <stdio.h>
#include <string.h>

#include "api/app.h"

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

static int valid_name(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 40) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-')) return 0;
    return 1;
}

void api_task_corpora_create(http_request *req, void *ctx) {
    app *a = ctx;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *spec = json_deep_copy(body);
    if (!spec) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        goto done;
    }
    json_object_del(spec, "name");
    tasks_config cfg;
    char field[64], msg[512];
    if (!valid_name(name)) {
        http_reply_error(req, 422, "invalid_field", "name", "name must be 1-40 characters of a-z, 0-9, _ and -");
    } else if (corpora_name_reserved(name)) {
        http_reply_error(req, 409, "conflict", "name", "'%s' is the name of a built-in corpus", name);
    } else if (corpora_task_config_parse(spec, &cfg, field, sizeof field, msg, sizeof msg) < 0) {
        http_reply_error(req, 422, "invalid_field", field[0] ? field : NULL, "%s", msg);
    } else {
        corpora_task_result r = corpora_create_task(a->corpora, name, &cfg, msg, sizeof msg);
        json_t *row = NULL;
        if (r == CORPORA_TASK_CONFLICT) {
            http_reply_error(req, 409, "conflict", "name", "%s", msg);
        } else if (r == CORPORA_TASK_FAILED) {
            http_reply_error(req, 500, "internal", NULL, "%s", msg);
        } else if (store_corpus_get(a->store, name, &row) != STORE_OK) {
            api_store_failed(req);
        } else {
            http_reply_json(req, r == CORPORA_TASK_CREATED ? 201 : 200, json_pack("{s:o}", "corpus", row));
        }
    }
done:
    json_decref(spec);
    json_decref(body);
}
