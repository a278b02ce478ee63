/* Training runs: learning, determinism, exact resume from a checkpoint, prompt cancel,
 * evaluation, schedules, clipping, configuration limits and bad data. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/test.h"
#include "rng.h"
#include "model_io.h"
#include "train.h"

static char dir[256];

static const char *path_of(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void tiny(train_config *c, int a) {
    train_config_defaults(c);
    c->model.n_layer = 2;
    c->model.n_head = 2;
    c->model.d_model = 16;
    c->model.seq_len = 8;
    c->model.vocab = 29;
    c->model.attention = a;
    c->batch = 4;
    c->steps = 8;
    c->lr = 1e-2;
    c->eval_every = 0;
}

/* A learnable stream: each window counts up by a per-window stride, so the next token is
 * (current + stride) mod V and the stride can be read from the context. */
typedef struct {
    int B, T, V;
    int bad_at_step; /* -1: never; else a token id >= V appears in that step */
} count_src;

static engine_status count_batch(void *ctx, corpus_split split, long step, int32_t *out, engine_error *err) {
    count_src *s = ctx;
    rng_state r;
    rng_seed(&r, (uint64_t)step * 2 + (split == CORPUS_SPLIT_VAL));
    for (int b = 0; b < s->B; b++) {
        int start = (int)(rng_next_u64(&r) % (uint64_t)s->V), stride = 1 + (int)(rng_next_u64(&r) % 2);
        for (int t = 0; t <= s->T; t++) out[b * (s->T + 1) + t] = (start + stride * t) % s->V;
    }
    if (step == s->bad_at_step) out[3] = s->V;
    return ENGINE_OK;
}

typedef struct {
    double loss[400];
    float tau[400][8];
    double grad_norm[400], lr[400];
    long first, last;
    int stop_after; /* should_stop says yes once this many steps were seen (0: never) */
    int evals;
    double val[16];
    long eval_step[16];
    int checkpoints;
    long ckpt_step;
    int entropy_ok;
} rec;

static void on_step(void *ctx, const train_step_metrics *m) {
    rec *r = ctx;
    if (!r->first) r->first = m->step;
    r->last = m->step;
    r->loss[m->step] = m->loss;
    r->grad_norm[m->step] = m->grad_norm;
    r->lr[m->step] = m->lr;
    for (int i = 0; i < m->n_layer * m->n_head && i < 8; i++) r->tau[m->step][i] = m->tau[i];
    for (int i = 0; i < m->n_layer * m->n_head; i++)
        if (!(m->entropy[i] >= 0 && m->entropy[i] <= log(8.0) + 1e-4)) r->entropy_ok = 0;
}
static void on_eval(void *ctx, long step, double v) {
    rec *r = ctx;
    if (r->evals < 16) {
        r->val[r->evals] = v;
        r->eval_step[r->evals] = step;
    }
    r->evals++;
}
static int should_stop(void *ctx) {
    rec *r = ctx;
    return r->stop_after > 0 && r->last >= r->stop_after;
}
static void on_ckpt(void *ctx, long step, const char *path) {
    rec *r = ctx;
    r->checkpoints++;
    r->ckpt_step = step;
}

static engine_status run(const train_config *c, int threads, const char *resume, rec *r, count_src *src_ctx) {
    count_src s = {c->batch, c->model.seq_len, c->model.vocab, -1};
    if (src_ctx) s = *src_ctx;
    train_source src = {.ctx = &s, .batch = count_batch, .has_val = 1};
    train_callbacks cb = {
        .ctx = r, .on_step = on_step, .on_eval = on_eval, .should_stop = should_stop, .on_checkpoint = on_ckpt};
    engine_error err;
    engine_status rc = train_run_source(c, &src, threads, resume, &cb, &err);
    if (rc && rc != ENGINE_ERR_CANCELLED) printf("  train: %s\n", err.message);
    return rc;
}

TEST(learns_a_learnable_stream) {
    train_config c;
    tiny(&c, attention_index("cosine_rope"));
    c.steps = 60;
    c.eval_every = 30;
    rec *r = calloc(1, sizeof *r);
    r->entropy_ok = 1;
    CHECK(run(&c, 2, NULL, r, NULL) == ENGINE_OK);
    CHECK(r->first == 1 && r->last == 60);
    CHECK_NEAR(r->loss[1], log(29.0), 0.3); /* starts at chance */
    CHECK(r->loss[60] < 0.6 * r->loss[1]);
    CHECK(r->entropy_ok);
    CHECK_EQ_INT(r->evals, 2);
    CHECK(r->eval_step[0] == 30 && r->eval_step[1] == 60);
    CHECK(r->val[1] < r->val[0] && r->val[1] < 0.7 * log(29.0));
    /* tau is learned: it moved from sqrt(8) */
    CHECK(fabs(r->tau[60][0] - sqrt(8.0)) > 1e-3);
    CHECK_NEAR(r->tau[1][0], sqrt(8.0), 0.05);
    free(r);
}

TEST(same_seed_is_bit_identical_for_any_thread_count) {
    for (int k = 0; k < attention_count(); k++) {
        train_config c;
        tiny(&c, k);
        c.order = CORPUS_ORDER_SHUFFLED;
        rec *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
        CHECK(run(&c, 2, NULL, a, NULL) == ENGINE_OK);
        CHECK(run(&c, 2, NULL, b, NULL) == ENGINE_OK);
        int same = memcmp(a->loss, b->loss, sizeof a->loss) == 0 &&
                   memcmp(a->grad_norm, b->grad_norm, sizeof a->grad_norm) == 0;
        rec *e = calloc(1, sizeof *e);
        CHECK(run(&c, 3, NULL, e, NULL) == ENGINE_OK); /* another thread count: same bits */
        same &= memcmp(a->loss, e->loss, sizeof a->loss) == 0;
        free(e);
        c.seed = 99;
        rec *d = calloc(1, sizeof *d);
        CHECK(run(&c, 2, NULL, d, NULL) == ENGINE_OK);
        int differs = a->loss[1] != d->loss[1];
        free(a);
        free(b);
        free(d);
        CHECK(same);
        CHECK(differs);
    }
}

/* Stop after step 4 (checkpoint written on cancel), resume with another thread count: steps 5..8
 * equal the straight run. */
TEST(resume_from_checkpoint_is_bit_identical) {
    for (int k = 0; k < attention_count(); k++) {
        train_config c;
        tiny(&c, k);
        c.grad_clip = 0.5;
        c.schedule = LR_SCHEDULE_COSINE;
        c.warmup_steps = 2;
        rec *full = calloc(1, sizeof *full), *part = calloc(1, sizeof *part), *rest = calloc(1, sizeof *rest);
        CHECK(run(&c, 2, NULL, full, NULL) == ENGINE_OK);
        c.checkpoint_path = path_of("ck.safetensors");
        part->stop_after = 4;
        CHECK(run(&c, 2, NULL, part, NULL) == ENGINE_ERR_CANCELLED);
        CHECK(part->last == 4 && part->checkpoints == 1 && part->ckpt_step == 4);
        CHECK(run(&c, 3, path_of("ck.safetensors"), rest, NULL) == ENGINE_OK); /* other thread count */
        CHECK(rest->first == 5 && rest->last == 8);
        int same = 1;
        for (int s = 5; s <= 8; s++) same &= rest->loss[s] == full->loss[s] && rest->lr[s] == full->lr[s];
        for (int s = 1; s <= 4; s++) same &= part->loss[s] == full->loss[s];
        free(full);
        free(part);
        free(rest);
        CHECK(same);
    }
}

/* A cancel during the evaluation after a step (here 4, and the last, 8) checkpoints that step
 * with the evaluation still due: the resumed run evaluates it first, so the validation curve has
 * every point of the straight run, bit for bit. */
TEST(cancel_during_an_evaluation_evaluates_that_step_on_resume) {
    train_config c;
    tiny(&c, attention_index("cosine_rope"));
    c.eval_every = 4;
    rec *full = calloc(1, sizeof *full);
    CHECK(run(&c, 2, NULL, full, NULL) == ENGINE_OK);
    CHECK(full->evals == 2 && full->eval_step[0] == 4 && full->eval_step[1] == 8);
    c.checkpoint_path = path_of("eval.safetensors");
    for (int at = 4; at <= 8; at += 4) {
        rec *part = calloc(1, sizeof *part), *rest = calloc(1, sizeof *rest);
        part->stop_after = at; /* yes from step `at` on: the evaluation's forward is the first to ask */
        CHECK(run(&c, 2, NULL, part, NULL) == ENGINE_ERR_CANCELLED);
        CHECK_EQ_INT(part->last, at);
        CHECK_EQ_INT(part->evals, at / 4 - 1); /* the one after step `at` was cancelled */
        CHECK(part->checkpoints == 1 && part->ckpt_step == at);
        CHECK(run(&c, 1, path_of("eval.safetensors"), rest, NULL) == ENGINE_OK);
        CHECK_EQ_INT(rest->evals, 3 - at / 4);
        CHECK_EQ_INT(rest->eval_step[0], at);
        int same = 1;
        for (int i = 0; i < rest->evals && i < 2; i++) same &= rest->val[i] == full->val[at / 4 - 1 + i];
        for (int k = at + 1; k <= 8; k++) same &= rest->loss[k] == full->loss[k];
        CHECK(same);
        free(part);
        free(rest);
    }
    free(full);
}

TEST(periodic_checkpoints_and_final_weights) {
    train_config c;
    tiny(&c, attention_index("rope"));
    c.checkpoint_every = 3;
    c.checkpoint_path = path_of("periodic.safetensors");
    c.save_path = path_of("final.safetensors");
    rec *r = calloc(1, sizeof *r);
    CHECK(run(&c, 1, NULL, r, NULL) == ENGINE_OK);
    CHECK_EQ_INT(r->checkpoints, 3); /* after steps 3, 6 and the last */
    CHECK_EQ_INT(r->ckpt_step, 8);
    /* the final weights start a new run: its first loss is the trained model's loss on batch 0 */
    model *m;
    engine_error err;
    CHECK(model_load(&m, path_of("final.safetensors"), 4, 1, 0, &err) == ENGINE_OK);
    int32_t batch[4 * 9], in[32], tg[32];
    count_src s = {4, 8, 29, -1};
    count_batch(&s, CORPUS_SPLIT_TRAIN, 0, batch, &err);
    for (int b = 0; b < 4; b++)
        for (int t = 0; t < 8; t++) {
            in[b * 8 + t] = batch[b * 9 + t];
            tg[b * 8 + t] = batch[b * 9 + t + 1];
        }
    double loss;
    CHECK(model_forward(m, in, tg, 4, 8, &loss, &err) == ENGINE_OK);
    model_free(m);
    train_config c2;
    tiny(&c2, attention_index("rope"));
    c2.steps = 1;
    c2.init_weights = path_of("final.safetensors");
    rec *r2 = calloc(1, sizeof *r2);
    CHECK(run(&c2, 1, NULL, r2, NULL) == ENGINE_OK);
    double first = r2->loss[1];
    free(r);
    free(r2);
    CHECK(first == loss);
    /* a weights file cannot be resumed from: it has no optimiser state */
    rec *r3 = calloc(1, sizeof *r3);
    CHECK(run(&c, 1, path_of("final.safetensors"), r3, NULL) == ENGINE_ERR_FORMAT);
    free(r3);
}

TEST(cancel_is_prompt) {
    train_config c;
    tiny(&c, attention_index("dot"));
    c.steps = 100000;
    rec *r = calloc(1, sizeof *r);
    r->stop_after = 2;
    CHECK(run(&c, 2, NULL, r, NULL) == ENGINE_ERR_CANCELLED);
    CHECK_EQ_INT(r->last, 2);
    free(r);
}

/* should_stop is also polled inside a step (between layers): a stop requested there abandons the
 * step, checkpoints the last completed one, and resuming from it reproduces the straight run. */
typedef struct {
    rec *r;
    int polls, stop_at_poll;
} poll_ctx;
static void poll_on_step(void *ctx, const train_step_metrics *m) { on_step(((poll_ctx *)ctx)->r, m); }
static int poll_stop(void *ctx) {
    poll_ctx *p = ctx;
    return ++p->polls >= p->stop_at_poll;
}

TEST(cancel_inside_a_step_keeps_the_last_completed_one) {
    train_config c;
    tiny(&c, attention_index("rope"));
    c.model.n_layer = 3;
    rec *full = calloc(1, sizeof *full), *part = calloc(1, sizeof *part), *rest = calloc(1, sizeof *rest);
    CHECK(run(&c, 2, NULL, full, NULL) == ENGINE_OK);
    count_src s = {c.batch, c.model.seq_len, c.model.vocab, -1};
    train_source src = {.ctx = &s, .batch = count_batch, .has_val = 1};
    /* polls per step: 1 before it, 3 in the forward (one per layer), 1 after it, 2 in the backward */
    poll_ctx pc = {.r = part, .stop_at_poll = 7 * 3 + 3};
    train_callbacks cb = {.ctx = &pc, .on_step = poll_on_step, .should_stop = poll_stop};
    c.checkpoint_path = path_of("mid.safetensors");
    engine_error err;
    CHECK(train_run_source(&c, &src, 2, NULL, &cb, &err) == ENGINE_ERR_CANCELLED);
    CHECK(strstr(err.message, "during step 4") != NULL);
    CHECK_EQ_INT(part->last, 3);
    CHECK(run(&c, 1, path_of("mid.safetensors"), rest, NULL) == ENGINE_OK);
    CHECK_EQ_INT(rest->first, 4);
    int same = 1;
    for (int k = 4; k <= 8; k++) same &= rest->loss[k] == full->loss[k];
    free(full);
    free(part);
    free(rest);
    CHECK(same);
}

TEST(token_outside_vocab_is_an_error) {
    train_config c;
    tiny(&c, attention_index("dot"));
    count_src s = {4, 8, 29, 3};
    rec *r = calloc(1, sizeof *r);
    train_source src = {.ctx = &s, .batch = count_batch, .has_val = 0};
    train_callbacks cb = {.ctx = r, .on_step = on_step};
    engine_error err;
    CHECK(train_run_source(&c, &src, 1, NULL, &cb, &err) == ENGINE_ERR_INVALID);
    CHECK(strstr(err.message, "29") != NULL);
    CHECK_EQ_INT(r->last, 3);
    free(r);
}

TEST(trains_from_a_corpus) {
    uint16_t toks[2000];
    for (int i = 0; i < 2000; i++) toks[i] = (uint16_t)((i * 7) % 29);
    corpus *cp;
    engine_error err;
    CHECK(corpus_from_tokens(&cp, toks, 2000, &err) == ENGINE_OK);
    train_config c;
    tiny(&c, attention_index("rope"));
    c.steps = 20;
    c.eval_every = 10;
    c.val_fraction = 0.1;
    rec *r = calloc(1, sizeof *r);
    train_callbacks cb = {.ctx = r, .on_step = on_step, .on_eval = on_eval};
    engine_status rc = train_run(&c, cp, 2, NULL, &cb, &err);
    CHECK(rc == ENGINE_OK);
    CHECK(r->evals == 2 && isfinite(r->val[1]) && r->val[1] < r->val[0]);
    c.model.vocab = 20; /* the corpus holds ids up to 28 */
    CHECK(train_run(&c, cp, 1, NULL, &cb, &err) == ENGINE_ERR_INVALID);
    corpus_free(cp);
    free(r);
}

TEST(lr_schedule_warmup_cosine) {
    train_config c;
    train_config_defaults(&c);
    CHECK(train_lr_at(&c, 1) == 3e-4 && train_lr_at(&c, 2000) == 3e-4);
    c.schedule = LR_SCHEDULE_COSINE;
    c.steps = 100;
    c.warmup_steps = 10;
    c.min_lr_ratio = 0.1;
    CHECK_NEAR(train_lr_at(&c, 1), 3e-5, 1e-12);
    CHECK_NEAR(train_lr_at(&c, 10), 3e-4, 1e-12);
    CHECK_NEAR(train_lr_at(&c, 55), 0.5 * (3e-4 + 3e-5), 1e-12);
    CHECK_NEAR(train_lr_at(&c, 100), 3e-5, 1e-12);
    for (long s = 11; s <= 100; s++) CHECK(train_lr_at(&c, s) < train_lr_at(&c, s - 1));
}

TEST(clipping_and_tau_decay_change_the_run) {
    train_config c;
    tiny(&c, attention_index("cosine_rope"));
    c.steps = 3;
    c.weight_decay = 0.5;
    rec *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *d = calloc(1, sizeof *d);
    CHECK(run(&c, 1, NULL, a, NULL) == ENGINE_OK);
    c.grad_clip = 1e-3;
    CHECK(run(&c, 1, NULL, b, NULL) == ENGINE_OK);
    c.grad_clip = 0;
    c.tau_weight_decay = 0;
    CHECK(run(&c, 1, NULL, d, NULL) == ENGINE_OK);
    int ok = a->loss[1] == b->loss[1] && a->grad_norm[1] == b->grad_norm[1] && a->loss[3] != b->loss[3] &&
             a->tau[3][0] != d->tau[3][0] && a->loss[1] == d->loss[1];
    free(a);
    free(b);
    free(d);
    CHECK(ok);
}

/* The normalised arm with a learned multiplier, s * cos: Swin V2's parameterisation (log s,
 * init 10, clamp 100), nGPT's init (sqrt(d), linear) and a linear s with a clamp all learn. */
static int scale_run_learns(tau_param_kind param, double init, double clamp, double *s_first, double *s_last) {
    train_config c;
    tiny(&c, attention_index("cosine_rope_scale"));
    c.steps = 60;
    c.model.scale_param = param;
    c.model.scale_init = init;
    c.model.scale_clamp = clamp;
    rec *r = calloc(1, sizeof *r);
    int ok = r && run(&c, 2, NULL, r, NULL) == ENGINE_OK && r->last == 60 && fabs(r->loss[1] - log(29.0)) < 0.3 &&
             r->loss[60] < 0.6 * r->loss[1];
    /* tau is the effective temperature 1/s */
    if (r) *s_first = 1 / r->tau[1][0], *s_last = 1 / r->tau[60][0];
    if (r && !ok) printf("  loss %g -> %g\n", r->loss[1], r->loss[60]);
    free(r);
    return ok;
}

TEST(cosine_scale_log_init_10_clamp_100_learns) {
    double s1, s60;
    CHECK(scale_run_learns(TAU_PARAM_LOG, 10, 100, &s1, &s60));
    CHECK_NEAR(s1, 10, 0.1);
    CHECK(fabs(s60 - 10) > 1e-3 && s60 <= 100);
}

TEST(cosine_scale_linear_sqrt_d_learns) {
    double s1, s60;
    CHECK(scale_run_learns(TAU_PARAM_LINEAR, 0, 0, &s1, &s60));
    CHECK_NEAR(s1, sqrt(8.0), 0.05);
    CHECK(fabs(s60 - sqrt(8.0)) > 1e-3);
}

/* A clamp at the initial value: s may fall below it but is never used above it. */
TEST(cosine_scale_clamp_bounds_s) {
    double s1, s60;
    CHECK(scale_run_learns(TAU_PARAM_LINEAR, 4, 4, &s1, &s60));
    CHECK(s1 <= 4 + 1e-6 && s60 <= 4 + 1e-6);
}

/* The learned scale's lr multiplier moves it further; a multiplier of 1 changes nothing. */
TEST(scale_lr_mult_applies_to_the_learned_scale_only) {
    train_config c;
    tiny(&c, attention_index("cosine_rope"));
    c.steps = 4;
    rec *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *d = calloc(1, sizeof *d);
    CHECK(run(&c, 1, NULL, a, NULL) == ENGINE_OK);
    c.scale_lr_mult = 1.0;
    CHECK(run(&c, 1, NULL, d, NULL) == ENGINE_OK);
    c.scale_lr_mult = 20;
    CHECK(run(&c, 1, NULL, b, NULL) == ENGINE_OK);
    double moved_a = fabs(a->tau[4][0] - a->tau[1][0]), moved_b = fabs(b->tau[4][0] - b->tau[1][0]);
    int same = memcmp(a->loss, d->loss, sizeof a->loss) == 0;
    int first_same = a->loss[1] == b->loss[1];
    free(a);
    free(b);
    free(d);
    CHECK(same && first_same);
    CHECK_MSG(moved_b > 5 * moved_a, "tau moved %g with the multiplier, %g without", moved_b, moved_a);
}

TEST(config_limits) {
    train_config c;
    engine_error err;
    train_config_defaults(&c);
    CHECK(train_config_validate(&c, &err) == ENGINE_OK);
    c.batch = 0;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "batch"));
    train_config_defaults(&c);
    c.batch = 513;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID);
    train_config_defaults(&c);
    c.lr = 0;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "lr"));
    c.lr = 1.5;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID);
    train_config_defaults(&c);
    c.steps = 0;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID);
    c.steps = 10000001;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID);
    train_config_defaults(&c);
    c.model.n_head = 5;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "n_head"));
    train_config_defaults(&c);
    c.warmup_steps = 5000;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID);
    train_config_defaults(&c);
    c.scale_lr_mult = 0;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "scale_lr_mult"));
    train_config_defaults(&c);
    c.model.scale_init = 10;
    c.model.scale_clamp = 5; /* below the initial s */
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "scale_clamp"));
    c.model.scale_clamp = 10;
    CHECK(train_config_validate(&c, &err) == ENGINE_OK);
    c.model.scale_clamp = -1;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID);
    train_config_defaults(&c);
    c.model.scale_param = (tau_param_kind)2;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "scale_param"));
    /* memory estimate: the seed run is a few hundred MB and grows with the batch */
    train_config_defaults(&c);
    size_t m32 = train_config_memory_bytes(&c, 2);
    c.batch = 64;
    size_t m64 = train_config_memory_bytes(&c, 2);
    CHECK(m32 > (200u << 20) && m32 < (600u << 20));
    CHECK(m64 > m32 + (100u << 20));
    /* a run with a bad config fails before doing anything */
    tiny(&c, attention_index("dot"));
    c.lr = -1;
    rec *r = calloc(1, sizeof *r);
    CHECK(run(&c, 1, NULL, r, NULL) == ENGINE_ERR_INVALID);
    CHECK_EQ_INT(r->last, 0);
    free(r);
}

/* Two runs at once in one process (each with its own threads) give what each gives alone. */
typedef struct {
    train_config c;
    int threads;
    rec *r;
    engine_status rc;
} concurrent_arg;

static void *concurrent_main(void *p) {
    concurrent_arg *a = p;
    a->rc = run(&a->c, a->threads, NULL, a->r, NULL);
    return NULL;
}

TEST(concurrent_runs_do_not_interfere) {
    concurrent_arg a[2];
    rec *alone[2];
    for (int i = 0; i < 2; i++) {
        tiny(&a[i].c, i ? attention_index("cosine_rope") : attention_index("dot"));
        a[i].threads = i + 1;
        a[i].r = calloc(1, sizeof(rec));
        alone[i] = calloc(1, sizeof(rec));
        CHECK(run(&a[i].c, 1, NULL, alone[i], NULL) == ENGINE_OK);
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, concurrent_main, &a[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        ok &= a[i].rc == ENGINE_OK && memcmp(a[i].r->loss, alone[i]->loss, sizeof alone[i]->loss) == 0;
        free(a[i].r);
        free(alone[i]);
    }
    CHECK(ok);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/attnlab-train-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(learns_a_learnable_stream);
    RUN(same_seed_is_bit_identical_for_any_thread_count);
    RUN(resume_from_checkpoint_is_bit_identical);
    RUN(cancel_during_an_evaluation_evaluates_that_step_on_resume);
    RUN(periodic_checkpoints_and_final_weights);
    RUN(cancel_is_prompt);
    RUN(cancel_inside_a_step_keeps_the_last_completed_one);
    RUN(token_outside_vocab_is_an_error);
    RUN(trains_from_a_corpus);
    RUN(lr_schedule_warmup_cosine);
    RUN(clipping_and_tau_decay_change_the_run);
    RUN(cosine_scale_log_init_10_clamp_100_learns);
    RUN(cosine_scale_linear_sqrt_d_learns);
    RUN(cosine_scale_clamp_bounds_s);
    RUN(scale_lr_mult_applies_to_the_learned_scale_only);
    RUN(config_limits);
    RUN(concurrent_runs_do_not_interfere);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
    return test_summary();
}
