/* The table of attention variants as GET /api/attention-kinds publishes it (svc_attention.h): one
 * row per engine row, in the RunConfig attention enum's order, with the row's flags and scale form
 * and the RunConfig fields that set the scale; and the one rule for a learned scale's start
 * (attention_scale_init, attention_initial_tau) that the model, the config defaults, the
 * statistics and the dashboard share. */
#include <math.h>
#include <string.h>

#include "../support/test.h"
#include "engine/attention.h"
#include "core/run_config.h"
#include "services/svc_attention.h"

TEST(every_row_is_published_with_its_traits) {
    CHECK(run_config_init() == 0);
    json_t *kinds = svc_attention_kinds();
    CHECK(kinds);
    json_t *rows = json_object_get(kinds, "kinds");
    const json_t *en = json_object_get(run_config_property("attention"), "enum");
    CHECK_EQ_INT(json_array_size(rows), attention_count());
    CHECK_EQ_INT(json_array_size(en), attention_count());
    for (int i = 0; i < attention_count(); i++) {
        const attention_variant *v = attention_at(i);
        json_t *r = json_array_get(rows, (size_t)i);
        CHECK(!strcmp(json_string_value(json_object_get(r, "name")), v->name));
        CHECK(!strcmp(json_string_value(json_array_get(en, (size_t)i)), v->name));
        CHECK(json_is_true(json_object_get(r, "rotates")) == !!(v->flags & ATTENTION_ROTATES));
        CHECK(json_is_true(json_object_get(r, "learned_positions")) == !!(v->flags & ATTENTION_LEARNED_POSITIONS));
        CHECK(json_is_true(json_object_get(r, "normalises_qk")) == !!(v->flags & ATTENTION_NORMALISES_QK));
        json_t *sc = json_object_get(r, "scale");
        const char *form = json_string_value(json_object_get(sc, "form"));
        CHECK(!strcmp(form, v->scale == ATTENTION_SCALE_TAU    ? "tau"
                            : v->scale == ATTENTION_SCALE_MULT ? "mult"
                                                               : "fixed"));
        if (v->scale == ATTENTION_SCALE_FIXED) continue;
        CHECK(!strcmp(json_string_value(json_object_get(sc, "tensor")), v->scale_suffix));
        /* the fields it names are RunConfig fields */
        static const char *const named[] = {"init", "param", "clamp"};
        for (int k = 0; k < 3; k++) {
            const char *f = json_string_value(json_object_get(sc, named[k]));
            if (f) CHECK_MSG(run_config_property(f), "%s names %s, not a RunConfig field", v->name, f);
        }
    }
    json_decref(kinds);
    run_config_cleanup();
}

TEST(a_learned_scale_starts_by_one_rule) {
    CHECK(attention_scale_init(0, 32) == sqrt(32.0));
    CHECK(attention_scale_init(3, 32) == 3);
    attention_scale tau = {.form = ATTENTION_SCALE_TAU, .init = 2.5};
    CHECK(attention_initial_tau(&tau) == 2.5);
    attention_scale mult = {.form = ATTENTION_SCALE_MULT, .init = 10, .clamp = 100};
    CHECK(fabs(attention_initial_tau(&mult) - 0.1) < 1e-15);
    mult.clamp = 4; /* the clamp holds s */
    CHECK(attention_initial_tau(&mult) == 0.25);
    attention_scale fixed = {.form = ATTENTION_SCALE_FIXED};
    CHECK(isnan(attention_initial_tau(&fixed)));
    /* a config without them gets the same defaults */
    CHECK(run_config_init() == 0);
    json_t *in = json_pack("{s:s, s:i, s:i}", "attention", "cosine_rope", "d_model", 64, "n_head", 2), *cfg = NULL;
    run_config_error err;
    CHECK(run_config_normalize(in, "", &cfg, &err) == 0);
    CHECK(json_real_value(json_object_get(cfg, "tau_init")) == attention_scale_init(0, 32));
    CHECK(json_real_value(json_object_get(cfg, "scale_init")) == attention_scale_init(0, 32));
    json_decref(in);
    json_decref(cfg);
    run_config_cleanup();
}

int main(void) {
    RUN(every_row_is_published_with_its_traits);
    RUN(a_learned_scale_starts_by_one_rule);
    return test_summary();
}
