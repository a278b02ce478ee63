/* The model probes' work estimates (probe_estimate.h): every kind that reads a model has one and no
 * other kind does; a forward pass counts what the training cost model counts for it; the estimate
 * grows with each parameter that multiplies the work; the defaults on the models the presets train
 * pass, and a request over a bound is refused naming the parameter to lower and the bound. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../support/test.h"
#include "model.h"
#include "probes/probe.h"
#include "probes/probe_estimate.h"

/* A preset-sized model (gpt2 vocabulary) and the largest the engine takes. */
static const probe_size small = {.n_layer = 4, .n_head = 4, .d_model = 128, .seq_len = 128, .vocab = 50257};
static const probe_size large = {.n_layer = 24, .n_head = 16, .d_model = 1024, .seq_len = 1024, .vocab = 50257};

/* The kind's complete params from JSON text (NULL: the defaults). */
static json_t *resolved(const probe_kind *k, const char *text) {
    json_t *given = text ? json_loads(text, 0, NULL) : json_object();
    probe_error err = {0};
    json_t *r = given ? probe_params_resolve(k, given, &err) : NULL;
    if (!r) printf("# %s %s: %s\n", k->name, text ? text : "{}", err.message);
    json_decref(given);
    return r;
}

static double flops(const char *kind, const char *text, const probe_size *s) {
    const probe_kind *k = probe_find(kind);
    json_t *p = resolved(k, text);
    probe_cost c = {0};
    if (p) k->estimate(p, s, &c);
    json_decref(p);
    return p ? c.flops : -1;
}

TEST(every_model_kind_has_an_estimate_and_no_other_kind) {
    int model_kinds = 0;
    for (int i = 0; i < probe_kind_count(); i++) {
        const probe_kind *k = probe_kind_at(i);
        CHECK_MSG(!k->needs_model == !k->estimate, "kind %s: needs_model %d, estimate %s", k->name, k->needs_model,
                  k->estimate ? "yes" : "no");
        model_kinds += k->needs_model;
    }
    CHECK(model_kinds >= 3);
}

TEST(a_forward_pass_is_what_the_training_cost_model_counts_for_it) {
    /* model_config_train_flops_per_token is 3 forward passes' worth (forward and backward) over
     * windows of seq_len; one forward of T = seq_len tokens is a third of it per token, but for the
     * diagonal (T + 1 keys where the cost model counts T). */
    model_config c;
    model_config_defaults(&c);
    c.n_layer = large.n_layer, c.n_head = large.n_head, c.d_model = large.d_model, c.seq_len = 256,
    c.vocab = large.vocab;
    probe_size s = large;
    s.seq_len = 256;
    double mine = probe_forward_flops(&s, 256) / 256, theirs = model_config_train_flops_per_token(&c) / 3;
    CHECK_MSG(fabs(mine / theirs - 1) < 0.01, "forward %.4g per token, the cost model's third %.4g", mine, theirs);
}

TEST(the_estimate_grows_with_each_factor_of_the_work) {
    CHECK(flops("attention_map", "{\"max_tokens\":128}", &small) >
          flops("attention_map", "{\"max_tokens\":64}", &small));
    CHECK(flops("attention_map", NULL, &large) > flops("attention_map", NULL, &small));
    CHECK(flops("topk_prediction", "{\"ks\":[4,8,16,32,64]}", &small) > flops("topk_prediction", NULL, &small));
    CHECK(flops("sparse_attention", "{\"windows\":4}", &small) > 3.5 * flops("sparse_attention", NULL, &small));
    CHECK(flops("sparse_attention", "{\"ks\":[1,2,4,8,16,32,64,128]}", &small) >
          flops("sparse_attention", "{\"ks\":[1,2]}", &small));
    CHECK(flops("sparse_attention", "{\"lsh_tables\":8}", &small) > flops("sparse_attention", NULL, &small));
    /* the input is cut to the model's window */
    probe_size tiny = small;
    tiny.seq_len = 16;
    CHECK(flops("attention_map", "{\"max_tokens\":256}", &tiny) ==
          flops("attention_map", "{\"max_tokens\":16}", &tiny));
    /* attention_map: one forward pass and a pass over every head's T x T weights */
    double T = 64, heads = 16;
    CHECK(flops("attention_map", NULL, &small) == probe_forward_flops(&small, 64) + heads * T * T * 8);
}

/* probe_estimate_check's answer for kind with params text on s: 1 when accepted, else the field. */
static int accepted(const char *kind, const char *text, const probe_size *s, char *field, char *msg) {
    const probe_kind *k = probe_find(kind);
    json_t *p = resolved(k, text);
    probe_cost c;
    probe_error err = {0};
    engine_status st = p ? probe_estimate_check(k, p, s, 1, &c, &err) : ENGINE_ERR_INVALID;
    json_decref(p);
    snprintf(field, 64, "%s", err.field);
    snprintf(msg, 256, "%s", err.message);
    return st == ENGINE_OK && err.field[0] == 0;
}

TEST(defaults_pass_and_a_request_over_a_bound_names_what_to_lower) {
    char field[64], msg[256];
    static const char *const kinds[] = {"attention_map", "topk_prediction", "sparse_attention"};
    for (int i = 0; i < 3; i++) CHECK_MSG(accepted(kinds[i], NULL, &small, field, msg), "%s: %s", kinds[i], msg);
    CHECK(accepted("attention_map", NULL, &large, field, msg));
    /* every window's loss under 5 predictors x 16 ks: about 1300 forward passes */
    CHECK(!accepted("sparse_attention", "{\"windows\":16,\"ks\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}", &small,
                    field, msg));
    CHECK_MSG(!strcmp(field, "windows"), "field %s", field);
    char bound[32];
    snprintf(bound, sizeof bound, "%.3g", PROBE_MAX_FLOPS);
    CHECK_MSG(strstr(msg, bound) && strstr(msg, "sparse_attention"), "%s", msg);
    CHECK(!accepted("sparse_attention", "{\"ks\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],\"max_tokens\":257}", &large,
                    field, msg));
    CHECK_MSG(!strcmp(field, "ks"), "field %s", field);
    /* 384 heads' 256 x 257 maps: about 25 million cells */
    CHECK(!accepted("attention_map", "{\"max_tokens\":256}", &large, field, msg));
    CHECK_MSG(!strcmp(field, "max_tokens") && strstr(msg, "cells"), "%s: %s", field, msg);
    /* a kind without an estimate, or a model whose size is not known */
    const probe_kind *dephasing = probe_find("dephasing");
    json_t *p = resolved(dephasing, NULL);
    probe_cost c;
    probe_error err = {0};
    CHECK(probe_estimate_check(dephasing, p, &large, 1, &c, &err) == ENGINE_OK && c.flops == 0);
    json_decref(p);
    const probe_kind *map = probe_find("attention_map");
    p = resolved(map, NULL);
    probe_size unknown = {0};
    CHECK(probe_estimate_check(map, p, &unknown, 1, &c, &err) == ENGINE_ERR_INVALID && !strcmp(err.field, "run"));
    /* a lower bound (the service's test hook) refuses what passes at 1 */
    CHECK(probe_estimate_check(map, p, &small, 1e-6, &c, &err) == ENGINE_ERR_INVALID);
    json_decref(p);
}

int main(void) {
    RUN(every_model_kind_has_an_estimate_and_no_other_kind);
    RUN(a_forward_pass_is_what_the_training_cost_model_counts_for_it);
    RUN(the_estimate_grows_with_each_factor_of_the_work);
    RUN(defaults_pass_and_a_request_over_a_bound_names_what_to_lower);
    return test_summary();
}
