/* The task corpora's bounds live in one table, the engine's (tasks.h), and are published through
 * the API's schema (POST /api/task-corpora's request in openapi.json), from which GET
 * /api/task-kinds reads them: this keeps the two equal. Every integer field of the request has the
 * engine's default, takes its minimum and maximum and refuses one past each; the kind enum is the
 * engine's table of kinds in its order. */
#include <stdio.h>
#include <string.h>

#include "../support/test.h"
#include "engine/tasks.h"
#include "core/run_config.h"

static const json_t *task_request(void) {
    const json_t *o = run_config_openapi();
    static const char *const path[] = {"paths",   "/api/task-corpora", "post",   "requestBody",
                                       "content", "application/json",  "schema", NULL};
    for (int i = 0; o && path[i]; i++) o = json_object_get(o, path[i]);
    return o;
}

TEST(every_integer_field_has_the_engines_bounds_and_default) {
    CHECK(run_config_init() == 0);
    const json_t *props = json_object_get(task_request(), "properties");
    CHECK(json_is_object(props));
    int checked = 0;
    const char *name;
    json_t *p;
    json_object_foreach((json_t *)props, name, p) {
        if (strcmp(json_string_value(json_object_get(p, "type")), "integer") != 0) continue;
        CHECK_MSG(json_is_string(json_object_get(p, "description")), "%s has no description", name);
        long long def = json_integer_value(json_object_get(p, "default"));
        long long lo = json_integer_value(json_object_get(p, "minimum"));
        long long hi = json_integer_value(json_object_get(p, "maximum"));
        tasks_config c;
        tasks_config_defaults(&c, 0);
        CHECK_MSG(tasks_config_get(&c, name) == def, "%s: the engine's default is %ld, the schema's %lld", name,
                  tasks_config_get(&c, name), def);
        engine_error err;
        if (!strcmp(name, "seed")) { /* any 64-bit seed: the schema keeps to what JSON numbers hold exactly */
            CHECK(lo == 0 && hi == 9007199254740991LL);
            CHECK(tasks_config_set(&c, name, (long)hi, &err) == ENGINE_OK);
            checked++;
            continue;
        }
        CHECK_MSG(tasks_config_set(&c, name, (long)lo, &err) == ENGINE_OK, "%s: the engine refuses the minimum %lld",
                  name, lo);
        CHECK_MSG(tasks_config_set(&c, name, (long)hi, &err) == ENGINE_OK, "%s: the engine refuses the maximum %lld",
                  name, hi);
        CHECK_MSG(tasks_config_set(&c, name, (long)lo - 1, &err) != ENGINE_OK, "%s: the engine takes %lld", name,
                  lo - 1);
        CHECK_MSG(tasks_config_set(&c, name, (long)hi + 1, &err) != ENGINE_OK, "%s: the engine takes %lld", name,
                  hi + 1);
        checked++;
    }
    CHECK_EQ_INT(checked, 4); /* vocab, seq_len, windows, seed */
    run_config_cleanup();
}

TEST(the_kinds_are_the_engines_table) {
    CHECK(run_config_init() == 0);
    const json_t *kinds =
        json_object_get(json_object_get(json_object_get(task_request(), "properties"), "kind"), "enum");
    CHECK_EQ_INT(json_array_size(kinds), tasks_kind_count());
    for (int i = 0; i < tasks_kind_count(); i++)
        CHECK_MSG(!strcmp(json_string_value(json_array_get(kinds, (size_t)i)), tasks_kind_at(i)->name),
                  "kind %d: %s in the schema, %s in the engine", i, json_string_value(json_array_get(kinds, (size_t)i)),
                  tasks_kind_at(i)->name);
    run_config_cleanup();
}

int main(void) {
    RUN(every_integer_field_has_the_engines_bounds_and_default);
    RUN(the_kinds_are_the_engines_table);
    return test_summary();
}
