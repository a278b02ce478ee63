/* The table of attention variants: the API's RunConfig `attention` enum lists its rows in order,
 * every row is complete and consistent, and the model's layout follows the row (tensor count,
 * parameter count, names) for the largest model the limits allow. Run from the repository root
 * (it reads server/api/openapi.json). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/test.h"
#include "model.h"
#include "model_io.h"

TEST(openapi_enum_lists_the_table_in_order) {
    json_error_t jerr;
    json_t *doc = json_load_file("server/api/openapi.json", 0, &jerr);
    CHECK_MSG(doc, "server/api/openapi.json: %s (line %d)", jerr.text, jerr.line);
    const json_t *att = json_object_get(
        json_object_get(json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"), "RunConfig"),
                        "properties"),
        "attention");
    const json_t *en = json_object_get(att, "enum");
    int n = json_is_array(en) ? (int)json_array_size(en) : -1;
    int same = n == attention_count();
    for (int i = 0; same && i < n; i++) same = !strcmp(json_string_value(json_array_get(en, i)), attention_at(i)->name);
    const char *def = json_string_value(json_object_get(att, "default"));
    int default_known = attention_find(def) != NULL;
    json_decref(doc);
    CHECK_MSG(same,
              "RunConfig.attention.enum in server/api/openapi.json must list the attention table's %d names in order",
              attention_count());
    CHECK_MSG(default_known, "RunConfig.attention.default is not a row of the table");
}

TEST(lookups_agree) {
    CHECK(attention_count() >= 3);
    CHECK(attention_at(-1) == NULL && attention_at(attention_count()) == NULL);
    CHECK(attention_find(NULL) == NULL && attention_find("sideways") == NULL && attention_index("") == -1);
    CHECK(!strcmp(attention_kind_name(attention_count()), "unknown"));
    for (int i = 0; i < attention_count(); i++) {
        const attention_variant *v = attention_at(i);
        CHECK(attention_find(v->name) == v && attention_index(v->name) == i);
        int k = -1;
        CHECK(attention_kind_parse(v->name, &k) == 0 && k == i);
        CHECK(!strcmp(attention_kind_name(i), v->name));
    }
    int k = 7;
    CHECK(attention_kind_parse("sideways", &k) == -1 && k == 7);
}

TEST(rows_are_complete_and_consistent) {
    for (int i = 0; i < attention_count(); i++) {
        const attention_variant *v = attention_at(i);
        size_t n = strlen(v->name);
        CHECK_MSG(n >= 1 && n <= 40 && strspn(v->name, "abcdefghijklmnopqrstuvwxyz0123456789_") == n, "name '%s'",
                  v->name);
        for (int j = 0; j < i; j++) CHECK_MSG(strcmp(attention_at(j)->name, v->name), "'%s' twice", v->name);
        CHECK_MSG(v->summary && *v->summary, "%s: no summary", v->name);
        CHECK_MSG((v->qk_forward == NULL) == (v->qk_backward == NULL), "%s: forward and backward come in pairs",
                  v->name);
        if (v->flags & (ATTENTION_ROTATES | ATTENTION_NORMALISES_QK))
            CHECK_MSG(v->qk_forward, "%s: rotates or normalises but has no q/k transform", v->name);
        CHECK_MSG(v->aux_per_head >= 0 && (v->qk_forward || v->aux_per_head == 0), "%s: aux without a transform",
                  v->name);
        if (v->scale == ATTENTION_SCALE_FIXED) {
            CHECK_MSG(v->fixed_scale && !v->scale_suffix, "%s: a fixed scale needs fixed_scale and no tensor", v->name);
        } else {
            /* h.23.<suffix> must fit model_tensor's name */
            CHECK_MSG(v->scale_suffix && strlen(v->scale_suffix) >= 1 && strlen(v->scale_suffix) <= 30,
                      "%s: a learned scale needs a tensor suffix of 1..30 characters", v->name);
        }
    }
}

/* The tensor table is sized from the row; every tensor has a distinct name and the parameter
 * count matches the config's, at the layer limit. */
TEST(layout_follows_the_row) {
    for (int i = 0; i < attention_count(); i++) {
        const attention_variant *v = attention_at(i);
        model_config c;
        model_config_defaults(&c);
        c.attention = i;
        c.n_layer = 24;
        c.n_head = 2;
        c.d_model = 8;
        c.seq_len = 4;
        c.vocab = 5;
        model *m;
        engine_error err;
        CHECK_MSG(model_new(&m, &c, 1, 1, 0, &err) == ENGINE_OK, "%s: %s", v->name, err.message);
        int want = 4 + !!(v->flags & ATTENTION_LEARNED_POSITIONS) + 24 * (12 + attention_layer_extra_tensors(v));
        int got = model_tensor_count(m);
        int ok = got == want && model_param_count(m) == model_config_param_count(&c);
        for (int a = 0; ok && a < model_tensor_count(m); a++)
            for (int b = 0; ok && b < a; b++)
                ok = strcmp(model_tensor_at(m, a)->name, model_tensor_at(m, b)->name) != 0;
        int has_wpe = model_tensor_find(m, "wpe") != NULL;
        char nm[48] = "";
        if (v->scale_suffix) snprintf(nm, sizeof nm, "h.23.%s", v->scale_suffix);
        const model_tensor *sc = v->scale_suffix ? model_tensor_find(m, nm) : NULL;
        int scale_ok = sc && sc->is_tau && sc->ndim == 1 && sc->shape[0] == 2;
        model_free(m);
        CHECK_MSG(ok, "%s: %d tensors (want %d), names distinct, parameter count as counted", v->name, got, want);
        CHECK(has_wpe == !!(v->flags & ATTENTION_LEARNED_POSITIONS));
        if (v->scale_suffix) CHECK_MSG(scale_ok, "%s: no %s [n_head]", v->name, nm);
    }
}

/* Every variant's weights file loads back as the same model: its tensors by name and the config,
 * scale parameterisation included, from the metadata. */
TEST(weights_round_trip_for_every_variant) {
    char dir[512], path[600];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/attnlab-atttable-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    for (int i = 0; i < attention_count(); i++) {
        model_config c;
        model_config_defaults(&c);
        c.attention = i;
        c.n_layer = 2;
        c.n_head = 2;
        c.d_model = 8;
        c.seq_len = 4;
        c.vocab = 7;
        c.tau_param = TAU_PARAM_LOG;
        c.scale_param = TAU_PARAM_LOG;
        c.scale_init = 10;
        c.scale_clamp = 100;
        model *m, *back = NULL;
        engine_error err = {0};
        CHECK(model_new(&m, &c, 1, 1, 0, &err) == ENGINE_OK);
        model_init_params(m, 3);
        int ok = model_save(m, path, NULL, 0, &err) == ENGINE_OK && model_load(&back, path, 1, 1, 0, &err) == ENGINE_OK;
        if (ok) {
            const model_config *b = model_get_config(back);
            ok = b->attention == i && b->tau_param == TAU_PARAM_LOG && b->scale_param == TAU_PARAM_LOG &&
                 b->scale_init == 10 && b->scale_clamp == 100 && model_param_count(back) == model_param_count(m) &&
                 memcmp(model_params(back), model_params(m), sizeof(real) * model_param_count(m)) == 0;
        }
        model_free(back);
        model_free(m);
        unlink(path);
        CHECK_MSG(ok, "%s: %s", attention_at(i)->name, err.message);
    }
    rmdir(dir);
}

/* The head-width rule follows the row: odd widths are refused only where RoPE pairs them. */
TEST(odd_head_width_only_refused_when_rotating) {
    for (int i = 0; i < attention_count(); i++) {
        model_config c;
        model_config_defaults(&c);
        c.attention = i;
        c.n_head = 2;
        c.d_model = 6;
        engine_error err;
        engine_status st = model_config_validate(&c, &err);
        CHECK_MSG((st == ENGINE_OK) == !(attention_at(i)->flags & ATTENTION_ROTATES), "%s", attention_at(i)->name);
    }
    model_config c;
    model_config_defaults(&c);
    c.attention = attention_count();
    engine_error err;
    CHECK(model_config_validate(&c, &err) == ENGINE_ERR_INVALID);
}

int main(void) {
    RUN(openapi_enum_lists_the_table_in_order);
    RUN(lookups_agree);
    RUN(rows_are_complete_and_consistent);
    RUN(layout_follows_the_row);
    RUN(weights_round_trip_for_every_variant);
    RUN(odd_head_width_only_refused_when_rotating);
    return test_summary();
}
