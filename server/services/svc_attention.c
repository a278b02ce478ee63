/* The table of attention variants as the API publishes it (svc_attention.h). */
#include "services/svc_attention.h"

#include "engine/attention.h"

/* A row's learned scale: its form and the RunConfig fields that set it. */
static json_t *scale_json(const attention_variant *v) {
    switch (v->scale) {
    case ATTENTION_SCALE_TAU:
        return json_pack("{s:s, s:s, s:s, s:s}", "form", "tau", "tensor", v->scale_suffix, "init", "tau_init", "param",
                         "tau_param");
    case ATTENTION_SCALE_MULT:
        return json_pack("{s:s, s:s, s:s, s:s, s:s}", "form", "mult", "tensor", v->scale_suffix, "init", "scale_init",
                         "param", "scale_param", "clamp", "scale_clamp");
    case ATTENTION_SCALE_FIXED: break;
    }
    return json_pack("{s:s}", "form", "fixed");
}

json_t *svc_attention_kinds(void) {
    json_t *kinds = json_array();
    int bad = !kinds;
    for (int i = 0; !bad && i < attention_count(); i++) {
        const attention_variant *v = attention_at(i);
        bad |= json_array_append_new(kinds,
                                     json_pack("{s:s, s:s, s:b, s:b, s:b, s:o}", "name", v->name, "summary", v->summary,
                                               "learned_positions", (v->flags & ATTENTION_LEARNED_POSITIONS) != 0,
                                               "rotates", (v->flags & ATTENTION_ROTATES) != 0, "normalises_qk",
                                               (v->flags & ATTENTION_NORMALISES_QK) != 0, "scale", scale_json(v))) < 0;
    }
    json_t *out = bad ? NULL
                      : json_pack("{s:o, s:{s:s, s:{s:s, s:s}}}", "kinds", kinds, "rules", "initial_value",
                                  "the scale's init field when above 0, else sqrt(d_model / n_head)", "recorded_tau",
                                  "tau", "the value", "mult", "1 / min(value, clamp); clamp 0: none");
    if (!out && bad) json_decref(kinds);
    return out;
}
