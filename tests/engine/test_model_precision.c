/* The float build agrees with the double build: the same tiny model (as built by
 * f64_gradcheck.c, whose `--dump` mode prints the double-precision loss and gradients) is run
 * here in float and compared. The double binary sits next to this one in the build tree. */
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/test.h"
#include "model.h"
#include "rng.h"

#define B 2
#define T 5

typedef struct {
    tau_param_kind param;
    double init, clamp;
} scale_cfg; /* the learned s of cosine_rope_scale */

/* Mirrors f64_gradcheck.c's make_model and tokens exactly. */
static model *make_model(int kind, tau_param_kind tp, scale_cfg sc) {
    model_config c;
    model_config_defaults(&c);
    c.n_layer = 2;
    c.n_head = 2;
    c.d_model = 8;
    c.seq_len = 6;
    c.vocab = 13;
    c.attention = kind;
    c.tau_param = tp;
    c.scale_param = sc.param;
    c.scale_init = sc.init;
    c.scale_clamp = sc.clamp;
    c.rope_base = 100.0;
    model *m = NULL;
    engine_error err;
    if (model_new(&m, &c, B, 1, 1, &err)) return NULL;
    model_init_params(m, 1234);
    rng_state r;
    rng_seed(&r, 99);
    real *p = model_params(m);
    for (int i = 0; i < model_tensor_count(m); i++) {
        const model_tensor *t = model_tensor_at(m, i);
        double amp = t->is_tau ? 0.3 : (t->ndim == 2 ? 0.2 : 0.1);
        for (size_t j = 0; j < t->numel; j++)
            p[t->offset + j] = (real)((double)p[t->offset + j] + amp * rng_normal(&r));
    }
    return m;
}

static void tokens(int32_t *in, int32_t *tg) {
    rng_state r;
    rng_seed(&r, 7);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(rng_next_u64(&r) % 13);
        tg[i] = (int32_t)(rng_next_u64(&r) % 13);
    }
}

static char f64_bin[4096];

static int compare_scale(const char *variant, int kind, tau_param_kind tp, scale_cfg sc) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' --dump %s", f64_bin, variant);
    FILE *f = popen(cmd, "r");
    if (!f) return 0;
    model *m = make_model(kind, tp, sc);
    int32_t in[B * T], tg[B * T];
    tokens(in, tg);
    double loss, ref;
    engine_error err;
    int ok = m && model_forward_backward(m, in, tg, B, T, &loss, &err) == ENGINE_OK && fscanf(f, "%lf", &ref) == 1;
    if (ok && fabs(loss - ref) > 1e-5 * fabs(ref)) {
        printf("  %s: loss float %.9g double %.9g\n", variant, loss, ref);
        ok = 0;
    }
    size_t n = ok ? model_param_count(m) : 0, got = 0;
    double maxd = 0, maxg = 0;
    for (size_t i = 0; ok && i < n; i++) {
        double g;
        if (fscanf(f, "%lf", &g) != 1) break;
        got++;
        double d = fabs(g - (double)model_grads(m)[i]);
        if (d > maxd) maxd = d;
        if (fabs(g) > maxg) maxg = fabs(g);
    }
    pclose(f);
    model_free(m);
    if (ok && got != n) {
        printf("  %s: read %zu of %zu gradients from the double build\n", variant, got, n);
        return 0;
    }
    if (ok && !(maxd <= 2e-5 * maxg)) {
        printf("  %s: largest gradient difference %.3g (largest gradient %.3g)\n", variant, maxd, maxg);
        ok = 0;
    }
    return ok;
}

static int compare(const char *variant, int kind, tau_param_kind tp) {
    return compare_scale(variant, kind, tp, (scale_cfg){TAU_PARAM_LINEAR, 0, 0});
}

TEST(float_matches_double_dot) { CHECK(compare("dot", attention_index("dot"), TAU_PARAM_LINEAR)); }
TEST(float_matches_double_rope) { CHECK(compare("rope", attention_index("rope"), TAU_PARAM_LINEAR)); }
TEST(float_matches_double_cosine_rope) {
    CHECK(compare("cosine_rope", attention_index("cosine_rope"), TAU_PARAM_LINEAR));
}
TEST(float_matches_double_cosine_rope_log) {
    CHECK(compare("cosine_rope_log", attention_index("cosine_rope"), TAU_PARAM_LOG));
}
TEST(float_matches_double_cosine_rope_scale_log) {
    CHECK(compare_scale("cosine_rope_scale_log", attention_index("cosine_rope_scale"), TAU_PARAM_LINEAR,
                        (scale_cfg){TAU_PARAM_LOG, 10, 100}));
}
/* the comparison can fail: the float rope model against the double dot model */
TEST(comparison_detects_a_different_model) { CHECK(!compare("dot", attention_index("rope"), TAU_PARAM_LINEAR)); }

int main(void) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 1;
    self[n] = 0;
    snprintf(f64_bin, sizeof f64_bin, "%s/f64_gradcheck", dirname(self));
    RUN(float_matches_double_dot);
    RUN(float_matches_double_rope);
    RUN(float_matches_double_cosine_rope);
    RUN(float_matches_double_cosine_rope_log);
    RUN(float_matches_double_cosine_rope_scale_log);
    RUN(comparison_detects_a_different_model);
    return test_summary();
}
