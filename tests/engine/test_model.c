/* The model: sizes, initialisation, causal masking, what the inspection API returns, errors on
 * bad input, and determinism across runs and thread counts. */
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "gemm.h"
#include "model.h"
#include "rng.h"

static void small_config(model_config *c, int k) {
    model_config_defaults(c);
    c->n_layer = 2;
    c->n_head = 2;
    c->d_model = 16;
    c->seq_len = 12;
    c->vocab = 50;
    c->attention = k;
}

static void rand_tokens(int32_t *x, int n, int V, uint64_t seed) {
    rng_state r;
    rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int32_t)(rng_next_u64(&r) % (uint64_t)V);
}

TEST(seed_config_has_13_46M_parameters) {
    model_config c;
    model_config_defaults(&c);
    CHECK_EQ_INT(c.n_layer, 3);
    CHECK_EQ_INT(c.n_head, 4);
    CHECK_EQ_INT(c.d_model, 128);
    CHECK_EQ_INT(c.seq_len, 128);
    CHECK_EQ_INT(c.vocab, 50257);
    c.attention = attention_index("rope");
    size_t rope = model_config_param_count(&c);
    CHECK(rope > 13450000 && rope < 13470000);
    c.attention = attention_index("dot");
    CHECK_EQ_INT(model_config_param_count(&c), rope + 128 * 128); /* + wpe */
    c.attention = attention_index("cosine_rope");
    CHECK_EQ_INT(model_config_param_count(&c), rope + 3 * 4); /* + tau per layer and head */
    /* the output layer dominates the step's FLOPs: ~158 of ~173 GFLOP at B32 */
    double f = model_config_train_flops_per_token(&c) * 32 * 128;
    CHECK(f > 170e9 && f < 176e9);
}

TEST(layout_matches_names_and_shapes) {
    model_config c;
    small_config(&c, attention_index("cosine_rope"));
    model *m;
    engine_error err;
    CHECK(model_new(&m, &c, 2, 1, 0, &err) == ENGINE_OK);
    CHECK_EQ_INT(model_param_count(m), model_config_param_count(&c));
    const model_tensor *t = model_tensor_find(m, "h.1.attn.qkv.w");
    CHECK(t && t->ndim == 2 && t->shape[0] == 48 && t->shape[1] == 16);
    t = model_tensor_find(m, "h.0.mlp.proj.w");
    CHECK(t && t->shape[0] == 16 && t->shape[1] == 64);
    t = model_tensor_find(m, "h.1.attn.tau");
    CHECK(t && t->ndim == 1 && t->shape[0] == 2 && t->is_tau);
    t = model_tensor_find(m, "lm_head.w");
    CHECK(t && t->shape[0] == 50 && t->shape[1] == 16);
    CHECK(model_tensor_find(m, "wpe") == NULL);
    size_t sum = 0;
    for (int i = 0; i < model_tensor_count(m); i++) sum += model_tensor_at(m, i)->numel;
    CHECK_EQ_INT(sum, model_param_count(m));
    model_free(m);
    small_config(&c, attention_index("dot"));
    CHECK(model_new(&m, &c, 2, 1, 0, &err) == ENGINE_OK);
    t = model_tensor_find(m, "wpe");
    CHECK(t && t->shape[0] == 12 && t->shape[1] == 16);
    CHECK(model_tensor_find(m, "h.0.attn.tau") == NULL);
    model_free(m);
}

TEST(init_is_normal_002_and_seeded) {
    model_config c;
    small_config(&c, attention_index("cosine_rope"));
    c.vocab = 2000;
    c.d_model = 64;
    model *m, *m2;
    engine_error err;
    CHECK(model_new(&m, &c, 1, 1, 0, &err) == ENGINE_OK);
    CHECK(model_new(&m2, &c, 1, 1, 0, &err) == ENGINE_OK);
    model_init_params(m, 5);
    model_init_params(m2, 5);
    CHECK(memcmp(model_params(m), model_params(m2), sizeof(real) * model_param_count(m)) == 0);
    const model_tensor *t = model_tensor_find(m, "wte");
    const real *p = model_params(m) + t->offset;
    double s = 0, s2 = 0;
    for (size_t i = 0; i < t->numel; i++) {
        s += p[i];
        s2 += (double)p[i] * p[i];
    }
    double mean = s / t->numel, sd = sqrt(s2 / t->numel - mean * mean);
    CHECK_NEAR(mean, 0, 3e-4);
    CHECK_NEAR(sd, 0.02, 0.0005);
    t = model_tensor_find(m, "h.0.ln1.w");
    CHECK(model_params(m)[t->offset] == 1 && model_params(m)[t->offset + 63] == 1);
    t = model_tensor_find(m, "h.0.attn.qkv.b");
    CHECK(model_params(m)[t->offset] == 0);
    t = model_tensor_find(m, "h.1.attn.tau");
    CHECK_NEAR(model_params(m)[t->offset], sqrt(32.0), 1e-6);
    float tau[4];
    model_tau(m, tau);
    CHECK_NEAR(tau[3], sqrt(32.0), 1e-5);
    model_init_params(m2, 6);
    CHECK(memcmp(model_params(m), model_params(m2), sizeof(real) * model_param_count(m)) != 0);
    model_free(m2);
    /* log parameterisation stores log tau; the effective tau is the same */
    c.tau_param = TAU_PARAM_LOG;
    c.tau_init = 3.0;
    CHECK(model_new(&m2, &c, 1, 1, 0, &err) == ENGINE_OK);
    model_init_params(m2, 5);
    t = model_tensor_find(m2, "h.0.attn.tau");
    CHECK_NEAR(model_params(m2)[t->offset], log(3.0), 1e-6);
    model_tau(m2, tau);
    CHECK_NEAR(tau[0], 3.0, 1e-5);
    model_free(m2);
    model_free(m);
}

/* Changing the last token must not change anything the earlier positions compute, in any layer. */
static int causal_for(int k) {
    model_config c;
    small_config(&c, k);
    model *m;
    engine_error err;
    if (model_new(&m, &c, 1, 1, 0, &err)) return 0;
    model_init_params(m, 3);
    int32_t tok[12];
    rand_tokens(tok, 12, 50, 8);
    model_inspect a, b;
    if (model_forward_inspect(m, tok, 12, &a, &err)) return 0;
    tok[11] = (tok[11] + 1) % 50;
    tok[10] = (tok[10] + 7) % 50;
    if (model_forward_inspect(m, tok, 12, &b, &err)) return 0;
    int ok = 1, L = 2, H = 2, T = 12, d = 8;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < 10; t++) {
                size_t base = ((size_t)(l * H + h) * T + t);
                ok &= memcmp(a.att + base * T, b.att + base * T, sizeof(float) * T) == 0;
                ok &= memcmp(a.q_raw + base * d, b.q_raw + base * d, sizeof(float) * d) == 0;
            }
    /* ...while the changed positions do change (in the last layer) */
    size_t last = ((size_t)(1 * H + 0) * T + 11);
    ok &= memcmp(a.q_raw + last * d, b.q_raw + last * d, sizeof(float) * d) != 0;
    model_inspect_free(&a);
    model_inspect_free(&b);
    model_free(m);
    return ok;
}

TEST(causal_mask_every_variant) {
    for (int k = 0; k < attention_count(); k++) CHECK_MSG(causal_for(k), "%s", attention_at(k)->name);
}

/* s * cos: h.{l}.attn.scale holds s (or log s), the effective temperature is 1/s. */
TEST(learned_scale_s_init_and_log) {
    model_config c;
    small_config(&c, attention_index("cosine_rope_scale"));
    model *m;
    engine_error err;
    CHECK(model_new(&m, &c, 1, 1, 0, &err) == ENGINE_OK);
    model_init_params(m, 5);
    const model_tensor *t = model_tensor_find(m, "h.1.attn.scale");
    CHECK(t && t->is_tau && t->shape[0] == 2 && !model_tensor_find(m, "h.1.attn.tau") && !model_tensor_find(m, "wpe"));
    CHECK_NEAR(model_params(m)[t->offset], sqrt(8.0), 1e-6); /* nGPT's init: sqrt(d) */
    float tau[4];
    model_tau(m, tau);
    CHECK_NEAR(tau[3], 1 / sqrt(8.0), 1e-6);
    model_free(m);
    c.scale_param = TAU_PARAM_LOG; /* Swin V2: log s, init 10, clamp 100 */
    c.scale_init = 10;
    c.scale_clamp = 100;
    CHECK(model_new(&m, &c, 1, 1, 0, &err) == ENGINE_OK);
    model_init_params(m, 5);
    t = model_tensor_find(m, "h.0.attn.scale");
    CHECK_NEAR(model_params(m)[t->offset], log(10.0), 1e-6);
    model_params(m)[t->offset + 1] = (real)log(1000.0); /* above the clamp: used as 100 */
    model_tau(m, tau);
    CHECK_NEAR(tau[0], 0.1, 1e-6);
    CHECK_NEAR(tau[1], 0.01, 1e-6);
    model_free(m);
    c.scale_clamp = 5; /* below the initial s */
    CHECK(model_new(&m, &c, 1, 1, 0, &err) == ENGINE_ERR_INVALID && strstr(err.message, "scale_clamp"));
}

TEST(inspect_returns_probabilities_and_used_vectors) {
    for (int k = 0; k < attention_count(); k++) {
        model_config c;
        small_config(&c, k);
        model *m;
        engine_error err;
        CHECK(model_new(&m, &c, 1, 1, 0, &err) == ENGINE_OK);
        model_init_params(m, 4);
        int32_t tok[9];
        rand_tokens(tok, 9, 50, 9);
        model_inspect ins;
        CHECK(model_forward_inspect(m, tok, 9, &ins, &err) == ENGINE_OK);
        CHECK(ins.T == 9 && ins.n_layer == 2 && ins.n_head == 2 && ins.head_dim == 8);
        for (int lh = 0; lh < 4; lh++)
            for (int t = 0; t < 9; t++) {
                const float *row = ins.att + ((size_t)lh * 9 + t) * 9;
                double s = 0;
                for (int j = 0; j < 9; j++) {
                    if (j > t) CHECK(row[j] == 0);
                    s += row[j];
                }
                CHECK_NEAR(s, 1, 1e-5);
                const float *qr = ins.q_raw + ((size_t)lh * 9 + t) * 8, *qu = ins.q_used + ((size_t)lh * 9 + t) * 8;
                double nr = 0, nu = 0;
                for (int i = 0; i < 8; i++) {
                    nr += (double)qr[i] * qr[i];
                    nu += (double)qu[i] * qu[i];
                }
                const attention_variant *v = attention_at(k);
                if (!v->qk_forward) CHECK(memcmp(qr, qu, sizeof(float) * 8) == 0);
                if (v->flags & ATTENTION_NORMALISES_QK)
                    CHECK_NEAR(nu, nr / (nr + 1e-6), 1e-5);
                else if (v->flags & ATTENTION_ROTATES)
                    CHECK_NEAR(nu, nr, 1e-4 * nr);
            }
        /* the initial effective temperature: sqrt(d) for the built-in variants */
        attention_scale sc = model_config_scale(&c);
        double tau0 = 1 / (double)attention_scale_value(attention_at(k), &sc, 8, (real)attention_scale_theta0(&sc));
        CHECK_NEAR(ins.tau[0], tau0, 1e-5 * tau0);
        const char *name = attention_at(k)->name;
        if (!strcmp(name, "dot") || !strcmp(name, "rope") || !strcmp(name, "cosine_rope"))
            CHECK_NEAR(ins.tau[0], sqrt(8.0), 1e-5);
        model_inspect_free(&ins);
        model_free(m);
    }
}

/* With the qkv projection zeroed every score is 0, so row t is uniform over t+1 keys and its
 * entropy is log(t+1): the reported mean entropy must be the mean of those. */
TEST(entropy_of_uniform_attention) {
    model_config c;
    small_config(&c, attention_index("rope"));
    model *m;
    engine_error err;
    CHECK(model_new(&m, &c, 2, 2, 0, &err) == ENGINE_OK);
    model_init_params(m, 4);
    const model_tensor *t = model_tensor_find(m, "h.0.attn.qkv.w");
    memset(model_params(m) + t->offset, 0, sizeof(real) * t->numel);
    t = model_tensor_find(m, "h.1.attn.qkv.w"); /* layer 1: sharpened, so far from uniform */
    for (size_t i = 0; i < t->numel; i++) model_params(m)[t->offset + i] *= 100;
    int32_t tok[24], tg[24];
    rand_tokens(tok, 24, 50, 1);
    rand_tokens(tg, 24, 50, 2);
    double loss;
    CHECK(model_forward(m, tok, tg, 2, 12, &loss, &err) == ENGINE_OK);
    float ent[4];
    model_attention_entropy(m, ent);
    double want = 0;
    for (int i = 0; i < 12; i++) want += log(i + 1.0);
    want /= 12;
    CHECK_NEAR(ent[0], want, 1e-5);
    CHECK_NEAR(ent[1], want, 1e-5);
    CHECK(ent[2] < want - 0.1); /* layer 1 still has its (sharpened) projection */
    CHECK(loss > 0 && fabs(loss - log(50.0)) < 0.1);
    model_free(m);
}

TEST(bad_input_is_an_error_not_a_crash) {
    model_config c;
    small_config(&c, attention_index("rope"));
    model *m, *mi;
    engine_error err;
    CHECK(model_new(&m, &c, 2, 1, 1, &err) == ENGINE_OK);
    CHECK(model_new(&mi, &c, 1, 1, 0, &err) == ENGINE_OK);
    model_init_params(m, 1);
    int32_t tok[26], tg[26];
    rand_tokens(tok, 26, 50, 1);
    rand_tokens(tg, 26, 50, 2);
    double loss;
    tok[5] = 50;
    CHECK(model_forward_backward(m, tok, tg, 2, 12, &loss, &err) == ENGINE_ERR_INVALID);
    CHECK(strstr(err.message, "50") != NULL);
    tok[5] = -1;
    CHECK(model_forward(m, tok, tg, 2, 12, &loss, &err) == ENGINE_ERR_INVALID);
    tok[5] = 3;
    tg[7] = 1000;
    CHECK(model_forward(m, tok, tg, 2, 12, &loss, &err) == ENGINE_ERR_INVALID);
    tg[7] = 3;
    CHECK(model_forward(m, tok, tg, 2, 13, &loss, &err) == ENGINE_ERR_INVALID); /* T > seq_len */
    CHECK(strstr(err.message, "13") != NULL);
    CHECK(model_forward(m, tok, tg, 3, 12, &loss, &err) == ENGINE_ERR_INVALID);           /* B > batch */
    CHECK(model_forward_backward(mi, tok, tg, 1, 12, &loss, &err) == ENGINE_ERR_INVALID); /* no grads */
    model_inspect ins;
    tok[0] = 99;
    CHECK(model_forward_inspect(mi, tok, 12, &ins, &err) == ENGINE_ERR_INVALID);
    CHECK(ins.att == NULL);
    tok[0] = 1;
    CHECK(model_forward(m, tok, tg, 2, 12, &loss, &err) == ENGINE_OK);
    model_free(mi);
    model_free(m);
    /* configurations */
    c.n_head = 3;
    CHECK(model_new(&m, &c, 1, 1, 0, &err) == ENGINE_ERR_INVALID);
    CHECK(m == NULL);
    small_config(&c, attention_index("rope"));
    c.n_layer = 25;
    CHECK(model_new(&m, &c, 1, 1, 0, &err) == ENGINE_ERR_INVALID);
    small_config(&c, attention_index("rope"));
    c.d_model = 2048;
    c.n_head = 16;
    CHECK(model_config_validate(&c, &err) == ENGINE_ERR_INVALID);
    small_config(&c, attention_index("rope"));
    c.seq_len = 5000;
    CHECK(model_config_validate(&c, &err) == ENGINE_ERR_INVALID);
    small_config(&c, attention_index("rope"));
    c.n_head = 16; /* head width 1: RoPE needs pairs */
    CHECK(model_config_validate(&c, &err) == ENGINE_ERR_INVALID);
}

/* Bit-identical across runs and across thread counts (work items do not depend on threads). */
TEST(deterministic_per_thread_count) {
    model_config c;
    small_config(&c, attention_index("cosine_rope"));
    c.vocab = 300; /* several lm-head chunks and vocabulary slices */
    int32_t tok[4 * 12], tg[4 * 12];
    rand_tokens(tok, 48, 300, 3);
    rand_tokens(tg, 48, 300, 4);
    real *g[3];
    double loss[3];
    int threads[3] = {3, 3, 1};
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        model *m;
        engine_error err;
        CHECK(model_new(&m, &c, 4, threads[i], 1, &err) == ENGINE_OK);
        model_init_params(m, 9);
        CHECK(model_forward_backward(m, tok, tg, 4, 12, &loss[i], &err) == ENGINE_OK);
        n = model_param_count(m);
        g[i] = malloc(sizeof(real) * n);
        memcpy(g[i], model_grads(m), sizeof(real) * n);
        model_free(m);
    }
    int same01 = loss[0] == loss[1] && memcmp(g[0], g[1], sizeof(real) * n) == 0;
    double maxd = 0, maxg = 0;
    for (size_t i = 0; i < n; i++) {
        double dd = fabs((double)g[0][i] - g[2][i]);
        if (dd > maxd) maxd = dd;
        if (fabs(g[2][i]) > maxg) maxg = fabs(g[2][i]);
    }
    for (int i = 0; i < 3; i++) free(g[i]);
    CHECK(same01);
    CHECK(loss[0] == loss[2]);
    CHECK(maxd == 0 && maxg > 0);
}

/* A batch-4 model of config c for the output-layer tests, on 2 threads, with large output weights
 * (a peaked softmax exercises the max and the exp) and the BLAS output path when blas; NULL if it
 * cannot be made. */
static model *lmhead_model(const model_config *c, int blas) {
    model *m;
    engine_error err;
    if (model_new(&m, c, 4, 2, 1, &err) != ENGINE_OK) return NULL;
    model_init_params(m, 2);
    const model_tensor *t = model_tensor_find(m, "lm_head.w");
    for (size_t j = 0; j < t->numel; j++) model_params(m)[t->offset + j] *= 50;
    model_set_lmhead_blas(m, blas);
    return m;
}

/* The output layer's own kernels (float, AVX-512, d_model % 16 == 0) against the BLAS path:
 * same loss and gradients to rounding, for ragged sizes (rows not a multiple of 16, vocab not a
 * multiple of the tiles) and several threads. */
TEST(lmhead_kernels_match_blas) {
    int dims[3] = {16, 64, 128};
    for (int i = 0; i < 3; i++) {
        model_config c;
        small_config(&c, attention_index("rope"));
        c.d_model = dims[i];
        c.n_head = 2;
        c.vocab = 1237;
        /* 4 x 203 rows: chunks of 51 (64-row tiles) and a last one of 47 (32- and 16-row tiles) */
        c.seq_len = 203;
        int32_t tok[4 * 203], tg[4 * 203];
        rand_tokens(tok, 4 * 203, 1237, 5);
        rand_tokens(tg, 4 * 203, 1237, 6);
        real *g[2];
        double loss[2];
        size_t n = 0;
        for (int k = 0; k < 2; k++) {
            engine_error err;
            model *m = lmhead_model(&c, k);
            CHECK(m != NULL);
            CHECK(model_forward_backward(m, tok, tg, 4, 203, &loss[k], &err) == ENGINE_OK);
            n = model_param_count(m);
            g[k] = malloc(sizeof(real) * n);
            memcpy(g[k], model_grads(m), sizeof(real) * n);
            model_free(m);
        }
        double maxd = 0, maxg = 0;
        for (size_t j = 0; j < n; j++) {
            double dd = fabs((double)g[0][j] - g[1][j]);
            if (dd > maxd) maxd = dd;
            if (fabs(g[1][j]) > maxg) maxg = fabs(g[1][j]);
        }
        free(g[0]);
        free(g[1]);
        CHECK_NEAR(loss[0], loss[1], 1e-5 * loss[1]);
        CHECK_MSG(maxd <= 1e-5 * maxg, "d_model %d: max gradient difference %g of %g", dims[i], maxd, maxg);
    }
}

/* Ignored targets (MODEL_TARGET_IGNORE) on every output path: the kernels, BLAS and bf16 mixed
 * precision. The loss is a mean over the counted rows, so N * loss(all) = n_A loss(A) + n_B loss(B)
 * for a split of the rows into A and B, and the same for every gradient; A's loss agrees between the
 * kernels and BLAS. */
TEST(ignored_targets_on_every_output_path) {
    model_config c;
    small_config(&c, attention_index("rope"));
    c.d_model = 64;
    c.n_head = 2;
    c.vocab = 1237;
    c.seq_len = 203;
    enum { NR = 4 * 203 };
    static int32_t tok[NR], tg[NR], ta[NR], tb[NR];
    rand_tokens(tok, NR, 1237, 5);
    rand_tokens(tg, NR, 1237, 6);
    int na = 0;
    for (int i = 0; i < NR; i++) {
        int in_a = i % 7 == 0 || i % 5 == 1; /* ragged against the 16-row tiles */
        na += in_a;
        ta[i] = in_a ? tg[i] : MODEL_TARGET_IGNORE;
        tb[i] = in_a ? MODEL_TARGET_IGNORE : tg[i];
    }
    double loss_a[3];
    for (int path = 0; path < 3; path++) {
        engine_error err;
        model *m = lmhead_model(&c, path == 1);
        CHECK(m != NULL);
        if (path == 2) CHECK(model_set_precision(m, PRECISION_BF16, &err) == ENGINE_OK);
        size_t n = model_param_count(m);
        real *g[3];
        double l[3];
        const int32_t *which[3] = {tg, ta, tb};
        for (int k = 0; k < 3; k++) {
            CHECK(model_forward_backward(m, tok, which[k], 4, 203, &l[k], &err) == ENGINE_OK);
            g[k] = malloc(sizeof(real) * n);
            memcpy(g[k], model_grads(m), sizeof(real) * n);
        }
        model_free(m);
        double maxd = 0, maxg = 0;
        for (size_t j = 0; j < n; j++) {
            double dd = fabs((double)NR * g[0][j] - ((double)na * g[1][j] + (double)(NR - na) * g[2][j]));
            if (dd > maxd) maxd = dd;
            if (fabs((double)NR * g[0][j]) > maxg) maxg = fabs((double)NR * g[0][j]);
        }
        for (int k = 0; k < 3; k++) free(g[k]);
        CHECK_NEAR((double)NR * l[0], na * l[1] + (NR - na) * l[2], 1e-5 * NR * l[0]);
        /* in bf16 the blocks' input-gradient products round each pass's upstream gradient (scaled by its
         * own 1/n) to bf16: the split holds to bf16's precision there, 2^-7 */
        CHECK_MSG(maxd <= (path == 2 && gemm_bf16_available() ? 1.0 / 128 : 1e-4) * maxg,
                  "path %d: split gradients differ by %g of %g", path, maxd, maxg);
        CHECK(fabs(l[1] - l[2]) > 1e-3);
        loss_a[path] = l[1];
    }
    CHECK_NEAR(loss_a[0], loss_a[1], 1e-5 * loss_a[1]);
    CHECK_NEAR(loss_a[2], loss_a[1], 1e-2 * loss_a[1]);
}

int main(void) {
    RUN(seed_config_has_13_46M_parameters);
    RUN(layout_matches_names_and_shapes);
    RUN(init_is_normal_002_and_seeded);
    RUN(causal_mask_every_variant);
    RUN(learned_scale_s_init_and_log);
    RUN(inspect_returns_probabilities_and_used_vectors);
    RUN(entropy_of_uniform_attention);
    RUN(bad_input_is_an_error_not_a_crash);
    RUN(deterministic_per_thread_count);
    RUN(lmhead_kernels_match_blas);
    RUN(ignored_targets_on_every_output_path);
    return test_summary();
}
