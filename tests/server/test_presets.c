/* The experiment presets are data (server/api/presets.json, compiled in): every preset expands to
 * a base, variants and a classroom override that the RunConfig schema accepts (each variant's
 * config over the base, and over the base with the classroom override), every arm and task it names
 * exists, and each task corpus's config is one a task corpus takes. A preset that would be refused
 * when started is caught here, at build time, not by a class. */
#include <stdio.h>
#include <string.h>

#include "../support/test.h"
#include "core/corpora.h"
#include "core/run_config.h"
#include "services/svc_experiments.h"

extern const char presets_json[];

/* 0 when base + over (may be NULL) + variant config normalise; prints why otherwise. */
static int accepted(const char *preset, const char *what, const json_t *base, const json_t *over, const json_t *vcfg) {
    json_t *b = over ? run_config_merge(base, over) : json_incref((json_t *)base);
    json_t *merged = b ? run_config_merge(b, vcfg) : NULL, *norm = NULL;
    run_config_error err;
    int rc = merged ? run_config_normalize(merged, "", &norm, &err) : -1;
    if (rc) printf("# %s, %s: %s %s\n", preset, what, err.field, err.message);
    json_decref(b);
    json_decref(merged);
    json_decref(norm);
    return rc;
}

TEST(every_preset_is_a_valid_experiment) {
    CHECK(run_config_init() == 0);
    json_t *presets = svc_experiments_presets();
    CHECK(json_array_size(presets) >= 5);
    size_t i, k;
    json_t *p, *v;
    json_array_foreach(presets, i, p) {
        const char *name = json_string_value(json_object_get(p, "name"));
        CHECK(name && json_string_value(json_object_get(p, "description")));
        CHECK_EQ_INT(json_object_size(p), 6); /* name, description, base, variants, replicates, tiny */
        json_int_t reps = json_integer_value(json_object_get(p, "replicates"));
        CHECK(reps >= 1 && reps <= 32);
        const json_t *base = json_object_get(p, "base"), *tiny = json_object_get(p, "tiny");
        CHECK(json_is_object(base) && json_is_object(tiny));
        CHECK(json_array_size(json_object_get(p, "variants")) >= 2);
        json_array_foreach(json_object_get(p, "variants"), k, v) {
            const char *vname = json_string_value(json_object_get(v, "name"));
            CHECK_MSG(vname && svc_experiments_variant_name_ok(vname), "%s: variant %zu's name", name, k);
            CHECK_MSG(!accepted(name, vname, base, NULL, json_object_get(v, "config")), "%s: %s is refused", name,
                      vname);
            CHECK_MSG(!accepted(name, vname, base, tiny, json_object_get(v, "config")), "%s: %s (tiny) is refused",
                      name, vname);
        }
    }
    json_decref(presets);
    run_config_cleanup();
}

TEST(the_file_names_only_what_it_defines_and_each_arm_once) {
    json_t *doc = json_loads(presets_json, 0, NULL);
    CHECK(doc);
    const json_t *configs = json_object_get(doc, "configs"), *arms = json_object_get(doc, "arms"),
                 *tasks = json_object_get(doc, "tasks");
    size_t i, k;
    json_t *p, *x;
    json_array_foreach(json_object_get(doc, "presets"), i, p) {
        static const char *const lists[] = {"base", "tiny"};
        for (int l = 0; l < 2; l++)
            json_array_foreach(json_object_get(p, lists[l]), k, x)
                CHECK_MSG(json_is_object(x) || json_object_get(configs, json_string_value(x)), "%s: config %s",
                          json_string_value(json_object_get(p, "name")), json_string_value(x));
        json_array_foreach(json_object_get(p, "variants"), k, x) CHECK(json_object_get(arms, json_string_value(x)));
        json_array_foreach(json_object_get(p, "tasks"), k, x) CHECK(json_object_get(tasks, json_string_value(x)));
    }
    /* the task corpora: configs a task corpus takes, under a name a corpus may have */
    const char *tname;
    json_object_foreach((json_t *)tasks, tname, x) {
        tasks_config cfg;
        char field[64], msg[512];
        CHECK(corpora_name_ok(json_string_value(json_object_get(x, "corpus"))));
        CHECK_MSG(corpora_task_config_parse(json_object_get(x, "task"), &cfg, field, sizeof field, msg, sizeof msg) ==
                      0,
                  "task %s: %s %s", tname, field, msg);
    }
    /* one definition of each arm: no two arms with the same config */
    const char *a, *b;
    json_t *ca, *cb;
    json_object_foreach((json_t *)arms, a, ca) json_object_foreach((json_t *)arms, b, cb) if (strcmp(a, b) < 0)
        CHECK_MSG(!json_equal(ca, cb), "arms %s and %s are the same config", a, b);
    json_decref(doc);
}

int main(void) {
    RUN(every_preset_is_a_valid_experiment);
    RUN(the_file_names_only_what_it_defines_and_each_arm_once);
    return test_summary();
}
