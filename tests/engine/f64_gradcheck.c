/* Gradient checks in double precision: every parameter tensor of a tiny model (sampled entries)
 * against central finite differences, for every row of the attention table (a row without a case
 * below fails) and each scale parameterisation, with one and with more threads.
 * With `--dump CASE` it prints the loss and gradients of a fixed tiny model instead (one
 * number per line, %.17g) so that the float build can be compared with this double build
 * (tests/engine/test_model_precision.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "model.h"
#include "rng.h"

#define B 2
#define T 5

/* One gradient check: a variant (a row of the attention table) with one parameterisation. */
typedef struct {
    const char *label;   /* the test is gradcheck_<label>; --dump takes the label */
    const char *variant; /* the row's name */
    tau_param_kind tau_param;
    int threads;
    tau_param_kind scale_param; /* for a learned s: its parameterisation, init (0: sqrt(d)), clamp */
    double scale_init, scale_clamp;
    int ignore_every; /* > 0: every ignore_every-th target is MODEL_TARGET_IGNORE (not counted) */
} gc_case;

/* Every row of the table needs at least one case here (checked). */
static const gc_case cases[] = {
    {.label = "dot", .variant = "dot", .threads = 1},
    {.label = "rope", .variant = "rope", .threads = 1},
    {.label = "cosine_rope", .variant = "cosine_rope", .threads = 1},
    {.label = "cosine_rope_log", .variant = "cosine_rope", .tau_param = TAU_PARAM_LOG, .threads = 1},
    {.label = "dot_two_threads", .variant = "dot", .threads = 2},
    {.label = "cosine_rope_three_threads", .variant = "cosine_rope", .threads = 3},
    /* s * cos: nGPT's (linear, init sqrt(d)), Swin V2's (log, init 10, clamp 100), a linear clamp */
    {.label = "cosine_rope_scale", .variant = "cosine_rope_scale", .threads = 1},
    {.label = "cosine_rope_scale_log",
     .variant = "cosine_rope_scale",
     .threads = 1,
     .scale_param = TAU_PARAM_LOG,
     .scale_init = 10,
     .scale_clamp = 100},
    {.label = "cosine_rope_scale_clamp",
     .variant = "cosine_rope_scale",
     .threads = 2,
     .scale_init = 3,
     .scale_clamp = 3.5},
    /* a loss over some targets only (loss_on answers): the others give neither loss nor gradient */
    {.label = "rope_ignored_targets", .variant = "rope", .threads = 2, .ignore_every = 3},
    {.label = "cosine_rope_ignored_targets", .variant = "cosine_rope", .threads = 1, .ignore_every = 2},
#ifdef ATTNLAB_TEST_VARIANT
    {.label = "tanh_q", .variant = "tanh_q", .threads = 1},
#endif
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const gc_case *find_case(const char *label) {
    for (int i = 0; i < N_CASES; i++)
        if (!strcmp(cases[i].label, label)) return &cases[i];
    return NULL;
}

static void tiny_config(model_config *c, const gc_case *k) {
    model_config_defaults(c);
    c->n_layer = 2;
    c->n_head = 2;
    c->d_model = 8;
    c->seq_len = 6;
    c->vocab = 13;
    c->attention = attention_index(k->variant);
    c->tau_param = k->tau_param;
    c->scale_param = k->scale_param;
    c->scale_init = k->scale_init;
    c->scale_clamp = k->scale_clamp;
    c->rope_base = 100.0; /* a small base so every pair turns noticeably within 5 positions */
}

/* Initialised as training would, then every parameter nudged so that biases, LayerNorm weights
 * and the learned scale are away from their special initial values. */
static model *make_model(const gc_case *k, int threads) {
    model_config c;
    tiny_config(&c, k);
    model *m = NULL;
    engine_error err;
    if (model_new(&m, &c, B, threads, 1, &err)) return NULL;
    model_init_params(m, 1234);
    rng_state r;
    rng_seed(&r, 99);
    real *p = model_params(m);
    for (int i = 0; i < model_tensor_count(m); i++) {
        const model_tensor *t = model_tensor_at(m, i);
        double amp = t->is_tau ? 0.3 : (t->ndim == 2 ? 0.2 : 0.1);
        for (size_t j = 0; j < t->numel; j++) p[t->offset + j] += amp * rng_normal(&r);
    }
    return m;
}

static void tokens(int32_t *in, int32_t *tg, int ignore_every) {
    rng_state r;
    rng_seed(&r, 7);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(rng_next_u64(&r) % 13);
        tg[i] = (int32_t)(rng_next_u64(&r) % 13);
        if (ignore_every > 0 && i % ignore_every == 0) tg[i] = MODEL_TARGET_IGNORE;
    }
}

static double max_rel_err;

static int gradcheck(const gc_case *gc) {
    model *m = make_model(gc, gc->threads);
    if (!m) return 0;
    int32_t in[B * T], tg[B * T];
    tokens(in, tg, gc->ignore_every);
    double loss;
    engine_error err;
    if (model_forward_backward(m, in, tg, B, T, &loss, &err)) {
        model_free(m);
        return 0;
    }
    size_t n = model_param_count(m);
    double *g = malloc(sizeof(double) * n);
    memcpy(g, model_grads(m), sizeof(double) * n);
    real *p = model_params(m);
    int ok = 1;
    const double eps = 1e-5;
    for (int i = 0; i < model_tensor_count(m) && ok; i++) {
        const model_tensor *t = model_tensor_at(m, i);
        /* up to 12 entries spread over the tensor, always the first and last */
        int samples = t->numel < 12 ? (int)t->numel : 12;
        double tensor_norm = 0;
        for (int s = 0; s < samples; s++) {
            size_t j = samples == 1 ? 0 : (size_t)((double)s * (double)(t->numel - 1) / (samples - 1));
            size_t k = t->offset + j;
            double keep = p[k], lp, lm;
            p[k] = keep + eps;
            model_forward(m, in, tg, B, T, &lp, &err);
            p[k] = keep - eps;
            model_forward(m, in, tg, B, T, &lm, &err);
            p[k] = keep;
            double num = (lp - lm) / (2 * eps), ana = g[k];
            double scale = fabs(num) > fabs(ana) ? fabs(num) : fabs(ana);
            double rel = fabs(num - ana) / (scale > 1e-3 ? scale : 1e-3);
            if (rel > max_rel_err) max_rel_err = rel;
            tensor_norm += fabs(ana);
            if (rel > 1e-6) {
                printf("  %s[%zu]: analytic %.12g numeric %.12g (rel %.3g)\n", t->name, j, ana, num, rel);
                ok = 0;
            }
        }
        if (tensor_norm == 0 && strcmp(t->name, "wpe") != 0) {
            printf("  %s: every sampled gradient is zero\n", t->name);
            ok = 0;
        }
    }
    free(g);
    model_free(m);
    return ok;
}

static const gc_case *current;
static void run_current(void) { CHECK(gradcheck(current)); }

/* A row added to the attention table must come with its gradient check. */
TEST(every_variant_has_a_gradcheck_case) {
    for (int i = 0; i < attention_count(); i++) {
        int found = 0;
        for (int c = 0; c < N_CASES; c++) found |= !strcmp(cases[c].variant, attention_at(i)->name);
        CHECK_MSG(found, "attention variant '%s' has no case in tests/engine/f64_gradcheck.c", attention_at(i)->name);
    }
    for (int c = 0; c < N_CASES; c++)
        CHECK_MSG(attention_find(cases[c].variant), "case %s names no attention variant", cases[c].label);
}

#ifdef ATTNLAB_TEST_VARIANT
/* The build that proves HACKING.md's recipe: the test-only row is in the table. */
TEST(test_variant_is_in_the_table) { CHECK(attention_find("tanh_q") != NULL); }
#endif

/* Where the clamp holds s (theta above the bound), the loss does not move with theta and its
 * gradient is exactly 0; below it the gradient is the finite difference. */
static int clamp_case(tau_param_kind param) {
    gc_case k = {.variant = "cosine_rope_scale", .threads = 1, .scale_param = param, .scale_init = 3, .scale_clamp = 4};
    model *m = make_model(&k, 1);
    if (!m) return 0;
    const model_tensor *t = model_tensor_find(m, "h.1.attn.scale");
    real *p = model_params(m);
    double top = param == TAU_PARAM_LOG ? log(4.0) : 4.0;
    p[t->offset] = top + 0.5;     /* held at 4 */
    p[t->offset + 1] = top - 0.2; /* free */
    int32_t in[B * T], tg[B * T];
    tokens(in, tg, 0);
    double loss, lp, lm;
    engine_error err;
    int ok = model_forward_backward(m, in, tg, B, T, &loss, &err) == ENGINE_OK;
    double g0 = model_grads(m)[t->offset], g1 = model_grads(m)[t->offset + 1];
    p[t->offset] = top + 1.5;
    ok &= model_forward(m, in, tg, B, T, &lp, &err) == ENGINE_OK;
    ok &= lp == loss && g0 == 0;
    p[t->offset] = top + 0.5;
    double keep = p[t->offset + 1];
    p[t->offset + 1] = keep + 1e-5;
    model_forward(m, in, tg, B, T, &lp, &err);
    p[t->offset + 1] = keep - 1e-5;
    model_forward(m, in, tg, B, T, &lm, &err);
    double num = (lp - lm) / 2e-5;
    ok &= g1 != 0 && fabs(num - g1) <= 1e-6 * fabs(num);
    if (!ok) printf("  held gradient %g, free gradient %.12g vs %.12g\n", g0, g1, num);
    model_free(m);
    return ok;
}

TEST(scale_clamp_holds_s_and_stops_its_gradient) {
    CHECK(clamp_case(TAU_PARAM_LINEAR));
    CHECK(clamp_case(TAU_PARAM_LOG));
}

/* Ignored targets: the loss is the mean over the counted ones, so N * loss(all) splits into the
 * counted sums of the two halves, loss and every gradient; with none counted, loss 0 and no
 * gradient. */
TEST(ignored_targets_split_the_loss_and_its_gradient) {
    model *m = make_model(find_case("rope"), 1);
    CHECK(m != NULL);
    int32_t in[B * T], tg[B * T], even[B * T], odd[B * T], none[B * T];
    tokens(in, tg, 0);
    for (int i = 0; i < B * T; i++) {
        even[i] = i % 2 ? MODEL_TARGET_IGNORE : tg[i];
        odd[i] = i % 2 ? tg[i] : MODEL_TARGET_IGNORE;
        none[i] = MODEL_TARGET_IGNORE;
    }
    size_t n = model_param_count(m);
    double *g_all = malloc(sizeof(double) * n), *g_even = malloc(sizeof(double) * n);
    double l_all, l_even, l_odd, l_none, worst = 0;
    engine_error err;
    CHECK(model_forward_backward(m, in, tg, B, T, &l_all, &err) == ENGINE_OK);
    memcpy(g_all, model_grads(m), sizeof(double) * n);
    CHECK(model_forward_backward(m, in, even, B, T, &l_even, &err) == ENGINE_OK);
    memcpy(g_even, model_grads(m), sizeof(double) * n);
    CHECK(model_forward_backward(m, in, odd, B, T, &l_odd, &err) == ENGINE_OK);
    const int ne = (B * T + 1) / 2, no = B * T / 2;
    CHECK(fabs(B * T * l_all - (ne * l_even + no * l_odd)) < 1e-12 * B * T * l_all);
    for (size_t i = 0; i < n; i++) {
        double d = fabs(B * T * g_all[i] - (ne * g_even[i] + no * model_grads(m)[i]));
        if (d > worst) worst = d;
    }
    CHECK(worst < 1e-12);
    CHECK(fabs(l_even - l_odd) > 1e-6); /* the halves really differ */
    CHECK(model_forward_backward(m, in, none, B, T, &l_none, &err) == ENGINE_OK);
    CHECK(l_none == 0);
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= model_grads(m)[i] == 0;
    CHECK(zero);
    /* below MODEL_TARGET_IGNORE is still out of range */
    none[0] = -2;
    CHECK(model_forward(m, in, none, B, T, &l_none, &err) == ENGINE_ERR_INVALID);
    free(g_all);
    free(g_even);
    model_free(m);
}

/* The checker itself must be able to fail: a gradient deliberately off by 1% is caught. */
TEST(gradcheck_detects_wrong_gradient) {
    model *m = make_model(find_case("rope"), 1);
    CHECK(m != NULL);
    int32_t in[B * T], tg[B * T];
    tokens(in, tg, 0);
    double loss, lp, lm;
    engine_error err;
    CHECK(model_forward_backward(m, in, tg, B, T, &loss, &err) == ENGINE_OK);
    const model_tensor *t = model_tensor_find(m, "h.1.attn.qkv.w");
    size_t k = t->offset + 3;
    double ana = model_grads(m)[k] * 1.01;
    real *p = model_params(m);
    double keep = p[k];
    p[k] = keep + 1e-5;
    model_forward(m, in, tg, B, T, &lp, &err);
    p[k] = keep - 1e-5;
    model_forward(m, in, tg, B, T, &lm, &err);
    p[k] = keep;
    double num = (lp - lm) / 2e-5;
    model_free(m);
    CHECK(fabs(num - ana) / fabs(num) > 1e-6);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--dump")) {
        const gc_case *k = find_case(argv[2]);
        if (!k) return 2;
        model *m = make_model(k, 1);
        if (!m) return 1;
        int32_t in[B * T], tg[B * T];
        tokens(in, tg, k->ignore_every);
        double loss;
        engine_error err;
        if (model_forward_backward(m, in, tg, B, T, &loss, &err)) return 1;
        printf("%.17g\n", loss);
        for (size_t i = 0; i < model_param_count(m); i++) printf("%.17g\n", model_grads(m)[i]);
        model_free(m);
        return 0;
    }
#ifdef ATTNLAB_TEST_VARIANT
    RUN(test_variant_is_in_the_table);
#endif
    RUN(every_variant_has_a_gradcheck_case);
    char names[N_CASES][80];
    for (int i = 0; i < N_CASES; i++) {
        current = &cases[i];
        snprintf(names[i], sizeof names[i], "gradcheck_%s", cases[i].label);
        test_run(names[i], run_current);
    }
    RUN(scale_clamp_holds_s_and_stops_its_gradient);
    RUN(ignored_targets_split_the_loss_and_its_gradient);
    RUN(gradcheck_detects_wrong_gradient);
    printf("# largest relative error %.3g\n", max_rel_err);
    return test_summary();
}
