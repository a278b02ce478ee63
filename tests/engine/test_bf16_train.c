/* bf16 mixed precision in training, on every bf16 kernel path this machine can run (avx512_bf16
 * where the CPU has it, bf16_portable everywhere, amx on the CPU's tiles or, without them, on the
 * emulated tiles of amx_emu.h: the same kernel source): the quality guard at a small config (same
 * init and data, fp32 vs bf16: mean loss of the last 50 of 200 steps within 0.02 nats, every tau
 * within 0.01 at every step), one step's gradients tensor by tensor against fp32, bit-identical
 * results for 1, 2 and 3 threads, an exact resume, and a checkpoint that refuses to be resumed in
 * the other precision. The full-size check (300 steps of
 * the seed configuration on the default corpus) is in `make bench`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/test.h"
#include "amx_emu.h"
#include "attention.h"
#include "cpu.h"
#include "kernel_path.h"
#include "model.h"
#include "rng.h"
#include "train.h"

static char dir[256];

/* A learnable stream: each window counts up by a per-window stride read from the context. */
typedef struct {
    int B, T, V;
} count_src;

static engine_status count_batch(void *ctx, corpus_split split, long step, int32_t *out, engine_error *err) {
    (void)err;
    count_src *s = ctx;
    rng_state r;
    rng_seed(&r, (uint64_t)step * 2 + (split == CORPUS_SPLIT_VAL));
    for (int b = 0; b < s->B; b++) {
        int start = (int)(rng_next_u64(&r) % (uint64_t)s->V), stride = 1 + (int)(rng_next_u64(&r) % 3);
        for (int t = 0; t <= s->T; t++) out[b * (s->T + 1) + t] = (start + stride * t) % s->V;
    }
    return ENGINE_OK;
}

#define MAX_STEPS 200
typedef struct {
    double loss[MAX_STEPS + 1];
    float tau[MAX_STEPS + 1][8];
} rec;

static void on_step(void *ctx, const train_step_metrics *m) {
    rec *r = ctx;
    if (m->step > MAX_STEPS) return;
    r->loss[m->step] = m->loss;
    for (int i = 0; i < m->n_layer * m->n_head && i < 8; i++) r->tau[m->step][i] = m->tau[i];
}

static void small(train_config *c, precision_kind p) {
    train_config_defaults(c);
    c->model.n_layer = 2;
    c->model.n_head = 2;
    c->model.d_model = 32;
    c->model.seq_len = 16;
    c->model.vocab = 97;
    c->model.attention = attention_index("cosine_rope");
    c->batch = 8;
    c->steps = MAX_STEPS;
    c->lr = 3e-3;
    c->eval_every = 0;
    c->precision = p;
}

static engine_status run(const train_config *c, int threads, const char *resume, rec *r) {
    count_src cs = {c->batch, c->model.seq_len, c->model.vocab};
    train_source src = {.ctx = &cs, .batch = count_batch, .has_val = 0};
    train_callbacks cb = {.ctx = r, .on_step = on_step};
    engine_error err;
    engine_status rc = train_run_source(c, &src, threads, resume, &cb, &err);
    if (rc) fprintf(stderr, "train: %s\n", err.message);
    return rc;
}

/* The bf16 paths to test: those the CPU runs, and amx on emulated tiles where it has none. */
static int path_on(kernel_path_id p, const char **how) {
    *how = "";
    lmhead_amx_use(NULL);
    if (p == KERNEL_PATH_AMX && !kernel_path_supported(p, NULL, 0)) {
        lmhead_amx_use(&amx_emu_kernels);
        *how = " (emulated tiles)";
    }
    engine_error err;
    if (kernel_path_force(kernel_path_row(p)->name, &err) == ENGINE_OK) return 1;
    lmhead_amx_use(NULL);
    printf("skipped: %s (%s)\n", kernel_path_row(p)->name, err.message);
    return 0;
}

static void path_off(void) {
    kernel_path_force(NULL, NULL);
    lmhead_amx_use(NULL);
}

static const kernel_path_id bf16_paths[] = {KERNEL_PATH_AVX512_BF16, KERNEL_PATH_AMX, KERNEL_PATH_BF16_PORTABLE};

/* fn on every bf16 path in turn (forced), until one fails; the number of paths run. */
static int each_path(void (*fn)(kernel_path_id path, const char *how)) {
    int n = 0;
    for (int i = 0; i < 3; i++) {
        const char *how;
        if (!path_on(bf16_paths[i], &how)) continue;
        fn(bf16_paths[i], how);
        path_off();
        n++;
        if (test_failed_now) break;
    }
    return n;
}

static void trains_like_fp32(kernel_path_id path, const char *how) {
    train_config c;
    rec *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    CHECK(a && b);
    small(&c, PRECISION_FP32);
    CHECK(run(&c, 2, NULL, a) == ENGINE_OK);
    small(&c, PRECISION_BF16);
    CHECK(!strcmp(train_config_kernel_path(&c), kernel_path_row(path)->name));
    CHECK(run(&c, 2, NULL, b) == ENGINE_OK);
    double ma = 0, mb = 0, dtau = 0;
    for (int s = MAX_STEPS - 49; s <= MAX_STEPS; s++) {
        ma += a->loss[s] / 50;
        mb += b->loss[s] / 50;
    }
    for (int s = 1; s <= MAX_STEPS; s++)
        for (int i = 0; i < 4; i++) {
            double d = fabs((double)a->tau[s][i] - b->tau[s][i]);
            dtau = d > dtau ? d : dtau;
        }
    printf("%s%s: fp32 %.4f  bf16 %.4f  (first %.4f)  max |tau difference| %.5f\n", kernel_path_row(path)->name, how,
           ma, mb, a->loss[1], dtau);
    free(a);
    free(b);
    CHECK_MSG(ma < 0.5 * 4.57, "fp32 did not learn (mean loss %.3f)", ma); /* log 97 = 4.57 */
    CHECK_MSG(fabs(ma - mb) <= 0.02, "%s: mean loss of steps 151-200: fp32 %.4f, bf16 %.4f",
              kernel_path_row(path)->name, ma, mb);
    CHECK_MSG(dtau <= 0.01, "%s: tau differs by %.5f", kernel_path_row(path)->name, dtau);
}

TEST(bf16_trains_like_fp32) { CHECK(each_path(trains_like_fp32) >= 2); }

static void bit_identical(kernel_path_id path, const char *how) {
    (void)path;
    (void)how;
    train_config c;
    small(&c, PRECISION_BF16);
    c.steps = 12;
    rec *r[3];
    for (int t = 0; t < 3; t++) {
        r[t] = calloc(1, sizeof *r[t]);
        CHECK(r[t] && run(&c, t + 1, NULL, r[t]) == ENGINE_OK);
    }
    int same = 1;
    for (int t = 1; t < 3; t++)
        for (int s = 1; s <= 12; s++) same &= memcmp(&r[0]->loss[s], &r[t]->loss[s], sizeof(double)) == 0;
    double l1 = r[0]->loss[12];
    for (int t = 0; t < 3; t++) free(r[t]);
    CHECK_MSG(same, "%s: losses differ between 1, 2 and 3 threads (step 12: %.9g)", kernel_path_name(), l1);
}

TEST(bf16_is_bit_identical_for_any_thread_count) { CHECK(each_path(bit_identical) >= 2); }

static void resume_exact(kernel_path_id path, const char *how) {
    (void)path;
    (void)how;
    char ck[300], ck2[300];
    snprintf(ck, sizeof ck, "%s/a.safetensors", dir);
    snprintf(ck2, sizeof ck2, "%s/b.safetensors", dir);
    train_config c;
    small(&c, PRECISION_BF16);
    c.steps = 10;
    rec *full = calloc(1, sizeof *full), *part = calloc(1, sizeof *part);
    CHECK(full && part);
    CHECK(run(&c, 2, NULL, full) == ENGINE_OK);
    c.steps = 6;
    c.checkpoint_path = ck;
    CHECK(run(&c, 2, NULL, part) == ENGINE_OK);
    c.steps = 10;
    c.checkpoint_path = ck2;
    CHECK(run(&c, 2, ck, part) == ENGINE_OK);
    int same = 1;
    for (int s = 1; s <= 10; s++) same &= memcmp(&full->loss[s], &part->loss[s], sizeof(double)) == 0;
    free(full);
    free(part);
    CHECK_MSG(same, "a resumed bf16 run differs from an uninterrupted one");
    /* the same checkpoint resumed in fp32 is refused */
    small(&c, PRECISION_FP32);
    c.steps = 10;
    count_src cs = {c.batch, c.model.seq_len, c.model.vocab};
    train_source src = {.ctx = &cs, .batch = count_batch, .has_val = 0};
    engine_error err;
    CHECK(train_run_source(&c, &src, 1, ck, NULL, &err) == ENGINE_ERR_INVALID);
    CHECK(strstr(err.message, "bf16") != NULL);
}

TEST(bf16_resume_is_exact_and_keeps_its_precision) { CHECK(each_path(resume_exact) >= 2); }

TEST(bf16_runs_without_the_instructions) {
    /* a CPU without AVX-512 BF16: the portable loops give a run of the same quality */
    train_config c;
    small(&c, PRECISION_BF16);
    c.steps = 6;
    rec *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    CHECK(a && b);
    CHECK(run(&c, 2, NULL, a) == ENGINE_OK);
    cpu_disable_bf16(1);
    engine_status rc = run(&c, 2, NULL, b);
    cpu_disable_bf16(0);
    CHECK(rc == ENGINE_OK);
    double d = fabs(a->loss[6] - b->loss[6]);
    free(a);
    free(b);
    CHECK_MSG(d < 1e-3, "portable and vdpbf16ps runs differ by %g at step 6", d);
    CHECK(precision_default() == kernel_path_row(kernel_path_chosen())->precision);
    cpu_disable_bf16(1);
    CHECK(precision_default() == PRECISION_FP32);
    cpu_disable_bf16(0);
}

/* One step's gradients in bf16 against fp32, tensor by tensor (same parameters and batch): each
 * within a relative L2 error a bf16 rounding of the products' inputs explains. Catches a product
 * that is wrong rather than rounded (on amx: the blocks' weight gradients on tiles too). */
static void gradients_match(kernel_path_id path, const char *how) {
    model_config mc;
    model_config_defaults(&mc);
    mc.n_layer = 2;
    mc.n_head = 2;
    mc.d_model = 64;
    mc.seq_len = 32;
    mc.vocab = 97;
    mc.attention = attention_index("cosine_rope");
    const int B = 4, T = 32;
    model *m = NULL;
    engine_error err;
    CHECK(model_new(&m, &mc, B, 2, 1, &err) == ENGINE_OK);
    if (!m) return;
    model_init_params(m, 3);
    int32_t in[4 * 32], tg[4 * 32];
    rng_state r;
    rng_seed(&r, 11);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(rng_next_u64(&r) % 97);
        tg[i] = (int32_t)(rng_next_u64(&r) % 97);
    }
    const size_t np = model_param_count(m);
    float *g32 = malloc(sizeof(float) * np);
    double loss;
    CHECK(g32 && model_forward_backward(m, in, tg, B, T, &loss, &err) == ENGINE_OK);
    memcpy(g32, model_grads(m), sizeof(float) * np);
    CHECK(model_set_precision(m, PRECISION_BF16, &err) == ENGINE_OK);
    CHECK(model_kernel_path(m) == path);
    CHECK(model_forward_backward(m, in, tg, B, T, &loss, &err) == ENGINE_OK);
    const float *gb = model_grads(m);
    /* tau's gradient sums terms of both signs over every score: its relative error is larger */
    double worst[2] = {0, 0};
    const char *wn[2] = {"", ""};
    for (int t = 0; t < model_tensor_count(m); t++) {
        const model_tensor *mt = model_tensor_at(m, t);
        double d2 = 0, n2 = 0;
        for (size_t i = mt->offset; i < mt->offset + mt->numel; i++) {
            d2 += ((double)gb[i] - g32[i]) * ((double)gb[i] - g32[i]);
            n2 += (double)g32[i] * g32[i];
        }
        double rel = n2 > 0 ? sqrt(d2 / n2) : 0;
        int k = mt->is_tau != 0;
        if (rel > worst[k]) {
            worst[k] = rel;
            wn[k] = mt->name;
        }
    }
    printf("%s%s: largest relative gradient error %.4f (%s), of tau %.4f (%s)\n", kernel_path_row(path)->name, how,
           worst[0], wn[0], worst[1], wn[1]);
    CHECK_MSG(worst[0] < 0.02, "%s: gradient of %s off by %.3f (relative L2)", kernel_path_row(path)->name, wn[0],
              worst[0]);
    CHECK_MSG(worst[1] < 0.1, "%s: gradient of %s off by %.3f (relative L2)", kernel_path_row(path)->name, wn[1],
              worst[1]);
    free(g32);
    model_free(m);
}

TEST(bf16_gradients_match_fp32) { CHECK(each_path(gradients_match) >= 2); }

TEST(bf16_needs_d_model_a_multiple_of_16) {
    train_config c;
    small(&c, PRECISION_BF16);
    c.model.d_model = 24;
    c.steps = 2;
    rec r;
    CHECK(run(&c, 1, NULL, &r) == ENGINE_ERR_INVALID);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/attnlab-bf16-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return 1;
    RUN(bf16_trains_like_fp32);
    RUN(bf16_is_bit_identical_for_any_thread_count);
    RUN(bf16_resume_is_exact_and_keeps_its_precision);
    RUN(bf16_runs_without_the_instructions);
    RUN(bf16_gradients_match_fp32);
    RUN(bf16_needs_d_model_a_multiple_of_16);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return 1;
    return test_summary();
}
