#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adamw.h"
#include "lmhead.h"
#include "mem.h"
#include "model_io.h"
#include "safetensors.h"
#include "sparse.h"
#include "threads.h"

void train_config_defaults(train_config *c) {
    memset(c, 0, sizeof *c);
    model_config_defaults(&c->model);
    c->batch = 32;
    c->steps = 2000;
    adamw_config a;
    adamw_config_defaults(&a);
    c->lr = a.lr;
    c->beta1 = a.beta1;
    c->beta2 = a.beta2;
    c->eps = a.eps;
    c->weight_decay = a.weight_decay;
    c->tau_weight_decay = 1;
    c->scale_lr_mult = 1.0;
    c->grad_clip = 0;
    c->schedule = LR_SCHEDULE_CONSTANT;
    c->warmup_steps = 0;
    c->min_lr_ratio = 0.1;
    c->seed = 1337;
    c->order = CORPUS_ORDER_SEQUENTIAL;
    c->val_fraction = 0.05;
    c->eval_every = 100;
    c->eval_batches = 4;
}

engine_status train_config_validate(const train_config *c, engine_error *err) {
    engine_status rc = model_config_validate(&c->model, err);
    if (rc) return rc;
    if (c->batch < 1 || c->batch > 512)
        return engine_fail(err, ENGINE_ERR_INVALID, "batch %d is not in 1..512", c->batch);
    if (c->steps < 1 || c->steps > 10000000)
        return engine_fail(err, ENGINE_ERR_INVALID, "steps %ld is not in 1..10000000", c->steps);
    if (!(c->lr > 0 && c->lr <= 1)) return engine_fail(err, ENGINE_ERR_INVALID, "lr %g is not in (0, 1]", c->lr);
    if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
        return engine_fail(err, ENGINE_ERR_INVALID, "betas (%g, %g) must be in [0, 1)", c->beta1, c->beta2);
    if (!(c->eps > 0 && c->eps < 1)) return engine_fail(err, ENGINE_ERR_INVALID, "eps %g is not in (0, 1)", c->eps);
    if (!(c->weight_decay >= 0 && c->weight_decay < 1))
        return engine_fail(err, ENGINE_ERR_INVALID, "weight_decay %g is not in [0, 1)", c->weight_decay);
    if (!(c->scale_lr_mult > 0 && c->scale_lr_mult <= 1000))
        return engine_fail(err, ENGINE_ERR_INVALID, "scale_lr_mult %g is not in (0, 1000]", c->scale_lr_mult);
    if (!(c->grad_clip >= 0) || !isfinite(c->grad_clip))
        return engine_fail(err, ENGINE_ERR_INVALID, "grad_clip %g must be >= 0 (0 = off)", c->grad_clip);
    if ((unsigned)c->schedule > LR_SCHEDULE_COSINE)
        return engine_fail(err, ENGINE_ERR_INVALID, "unknown learning-rate schedule %d", (int)c->schedule);
    if (c->warmup_steps < 0 || c->warmup_steps > c->steps)
        return engine_fail(err, ENGINE_ERR_INVALID, "warmup_steps %ld is not in 0..steps", c->warmup_steps);
    if (!(c->min_lr_ratio >= 0 && c->min_lr_ratio <= 1))
        return engine_fail(err, ENGINE_ERR_INVALID, "min_lr_ratio %g is not in [0, 1]", c->min_lr_ratio);
    if (!(c->val_fraction >= 0 && c->val_fraction <= 0.5))
        return engine_fail(err, ENGINE_ERR_INVALID, "val_fraction %g is not in [0, 0.5]", c->val_fraction);
    if (c->eval_every < 0) return engine_fail(err, ENGINE_ERR_INVALID, "eval_every %ld is negative", c->eval_every);
    if (c->eval_batches < 1 || c->eval_batches > 1000)
        return engine_fail(err, ENGINE_ERR_INVALID, "eval_batches %d is not in 1..1000", c->eval_batches);
    if (c->checkpoint_every < 0)
        return engine_fail(err, ENGINE_ERR_INVALID, "checkpoint_every %ld is negative", c->checkpoint_every);
    if ((unsigned)c->order > CORPUS_ORDER_SHUFFLED)
        return engine_fail(err, ENGINE_ERR_INVALID, "unknown data order %d", (int)c->order);
    if (c->n_meta < 0 || c->n_meta > TRAIN_MAX_META || (c->n_meta > 0 && !c->meta_kv))
        return engine_fail(err, ENGINE_ERR_INVALID, "%d extra metadata pairs (at most %d)", c->n_meta, TRAIN_MAX_META);
    for (int i = 0; i < c->n_meta; i++) {
        const char *k = c->meta_kv[2 * i];
        if (!k || !*k || !c->meta_kv[2 * i + 1])
            return engine_fail(err, ENGINE_ERR_INVALID, "extra metadata pair %d has no key or value", i);
        char vals[MODEL_META_COUNT][48];
        const char *kv[2 * MODEL_META_COUNT];
        model_config_metadata(&c->model, vals, kv);
        int taken = !strcmp(k, "format") || !strcmp(k, "step") || !strcmp(k, "precision") || !strcmp(k, "kernel_path");
        for (int j = 0; j < MODEL_META_COUNT && !taken; j++) taken = !strcmp(k, kv[2 * j]);
        if (taken) return engine_fail(err, ENGINE_ERR_INVALID, "extra metadata key '%s' is the engine's own", k);
    }
    if ((unsigned)c->loss_on > TRAIN_LOSS_ANSWERS)
        return engine_fail(err, ENGINE_ERR_INVALID, "unknown loss_on %d", (int)c->loss_on);
    if ((unsigned)c->precision > PRECISION_BF16)
        return engine_fail(err, ENGINE_ERR_INVALID, "unknown precision %d", (int)c->precision);
    return ENGINE_OK;
}

const char *train_time_part_name(int part) {
    static const char *names[TRAIN_TIME_PARTS] = {"output_layer", "products", "attention", "optimizer", "other"};
    return part >= 0 && part < TRAIN_TIME_PARTS ? names[part] : NULL;
}

const char *train_config_kernel_path(const train_config *c) { return kernel_path_name_for_precision(c->precision); }

size_t train_config_memory_bytes(const train_config *c, int n_threads) {
    size_t np = model_config_param_count(&c->model);
    return model_memory_bytes(&c->model, c->batch, n_threads, 1) + 2 * np * sizeof(real) +
           (size_t)c->batch * (size_t)(c->model.seq_len + 1) * 3 * sizeof(int32_t) +
           (c->precision == PRECISION_BF16 ? model_bf16_bytes(&c->model, c->batch, n_threads) : 0);
}

double train_lr_at(const train_config *c, long step) {
    if (c->schedule == LR_SCHEDULE_CONSTANT) return c->lr;
    if (step <= c->warmup_steps) return c->lr * (double)step / (double)c->warmup_steps;
    long span = c->steps - c->warmup_steps;
    double progress = span > 0 ? (double)(step - c->warmup_steps) / (double)span : 1.0;
    if (progress > 1) progress = 1;
    double lo = c->lr * c->min_lr_ratio;
    return lo + 0.5 * (c->lr - lo) * (1 + cos(M_PI * progress));
}

void train_head_spread(const float *x, int n, double *std, double *ratio) {
    double mean = 0, lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        mean += x[i];
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    mean /= n;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    *std = sqrt(ss / n);
    *ratio = lo > 0 ? hi / lo : NAN;
}

/* ---- one run's state ---- */

typedef struct {
    const train_config *cfg;
    model *m;
    real *adam_m, *adam_v;
    int32_t *batch, *inputs, *targets;
    long step; /* completed steps */
    /* per-step parallel work */
    double *norm_part;
    double lr;
    real grad_scale;
    adamw_config ac;
    /* accuracy on a task corpus: argmax predictions by the sparse evaluator's dense pass */
    sparse_eval *ev;
    int32_t *argmax;
    uint8_t *labels;
    char resumed_path[32]; /* the kernel path a resumed checkpoint recorded ("" when none) */
    int eval_due; /* the evaluation after step `step` was cancelled: the checkpoint says so, the resume runs it */
} run_state;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void split_batch(run_state *s) {
    int B = s->cfg->batch, T = s->cfg->model.seq_len;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            s->inputs[b * T + t] = s->batch[b * (T + 1) + t];
            s->targets[b * T + t] = s->batch[b * (T + 1) + t + 1];
        }
}

/* Sum of squared gradients in fixed items of NORM_CHUNK, added in item order afterwards, so
 * the norm does not depend on the thread count. */
#define NORM_CHUNK 65536

static long norm_items(const run_state *s) { return ((long)model_param_count(s->m) + NORM_CHUNK - 1) / NORM_CHUNK; }

static void norm_fn(void *ctx, int tid, int nth) {
    run_state *s = ctx;
    const real *g = model_grads(s->m);
    long n = (long)model_param_count(s->m), items = norm_items(s);
    for (long k; (k = threads_next(model_threads(s->m))) < items;) {
        long hi = (k + 1) * NORM_CHUNK < n ? (k + 1) * NORM_CHUNK : n;
        double acc = 0;
        for (long i = k * NORM_CHUNK; i < hi; i++) acc += (double)g[i] * g[i];
        s->norm_part[k] = acc;
    }
}

static void adam_fn(void *ctx, int tid, int nth) {
    run_state *s = ctx;
    model *m = s->m;
    long lo, hi;
    threads_split((long)model_param_count(m), tid, nth, &lo, &hi);
    real *p = model_params(m);
    const real *g = model_grads(m);
    /* walk the tensors overlapping [lo, hi): decay depends on the tensor */
    for (int i = 0; i < model_tensor_count(m); i++) {
        const model_tensor *t = model_tensor_at(m, i);
        long a = (long)t->offset, b = (long)(t->offset + t->numel);
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a >= b) continue;
        /* the learned attention scale (tau or s): its own lr multiplier, weight decay optional */
        int decay = !(t->is_tau && !s->cfg->tau_weight_decay);
        double lr = t->is_tau ? s->lr * s->cfg->scale_lr_mult : s->lr;
        adamw_update(p + a, g + a, s->adam_m + a, s->adam_v + a, (size_t)(b - a), &s->ac, lr, s->step + 1, decay,
                     s->grad_scale);
    }
}

/* The pairs a run adds to the model's metadata: step (completed steps, formatted into step_buf),
 * precision, kernel_path, then the config's meta_kv. Returns the pair count (at most RUN_META_MAX). */
#define RUN_META_MAX (3 + TRAIN_MAX_META)
static int run_meta(const run_state *s, char *step_buf, size_t step_len, const char **kv) {
    snprintf(step_buf, step_len, "%ld", s->step);
    kv[0] = "step";
    kv[1] = step_buf;
    kv[2] = "precision";
    kv[3] = precision_name(model_precision(s->m));
    kv[4] = "kernel_path";
    kv[5] = kernel_path_row(model_kernel_path(s->m))->name;
    int n = 3;
    for (int i = 0; i < s->cfg->n_meta && i < TRAIN_MAX_META; i++, n++) {
        kv[2 * n] = s->cfg->meta_kv[2 * i];
        kv[2 * n + 1] = s->cfg->meta_kv[2 * i + 1];
    }
    return n;
}

static engine_status save_checkpoint(run_state *s, const char *path, engine_error *err) {
    model *m = s->m;
    int n = model_tensor_count(m);
    st_write_entry *e = calloc((size_t)n * 3, sizeof *e);
    char(*names)[56] = calloc((size_t)n * 2, sizeof *names);
    if (!e || !names) {
        free(e);
        free(names);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory writing a checkpoint");
    }
    for (int i = 0; i < n; i++) {
        const model_tensor *t = model_tensor_at(m, i);
        for (int k = 0; k < 3; k++) {
            st_write_entry *w = &e[k * n + i];
            w->ndim = t->ndim;
            w->shape[0] = t->shape[0];
            w->shape[1] = t->shape[1];
        }
        e[i].name = t->name;
        e[i].data = model_params(m) + t->offset;
        snprintf(names[2 * i], 56, "adamw.m.%s", t->name);
        snprintf(names[2 * i + 1], 56, "adamw.v.%s", t->name);
        e[n + i].name = names[2 * i];
        e[n + i].data = s->adam_m + t->offset;
        e[2 * n + i].name = names[2 * i + 1];
        e[2 * n + i].data = s->adam_v + t->offset;
    }
    char step[32], vals[MODEL_META_COUNT][48];
    const char *kv[2 * MODEL_META_COUNT + 4 + 2 * RUN_META_MAX];
    model_config_metadata(model_get_config(m), vals, kv);
    kv[2 * MODEL_META_COUNT] = "format";
    kv[2 * MODEL_META_COUNT + 1] = "attnlab-checkpoint";
    int n_kv = MODEL_META_COUNT + 1;
    n_kv += run_meta(s, step, sizeof step, kv + 2 * n_kv);
    if (s->eval_due) {
        kv[2 * n_kv] = "eval_due";
        kv[2 * n_kv + 1] = "1";
        n_kv++;
    }
    engine_status rc = safetensors_write(path, e, 3 * n, kv, n_kv, err);
    free(e);
    free(names);
    return rc;
}

static engine_status load_checkpoint(run_state *s, const char *path, engine_error *err) {
    engine_status rc = model_load_params(s->m, path, err);
    if (rc) return rc;
    safetensors *st;
    rc = safetensors_open(&st, path, err);
    if (rc) return rc;
    const char *fmt = safetensors_meta(st, "format"), *step = safetensors_meta(st, "step");
    if (!fmt || strcmp(fmt, "attnlab-checkpoint") != 0 || !step) {
        safetensors_close(st);
        return engine_fail(err, ENGINE_ERR_FORMAT, "%s is a weights file, not a checkpoint (no optimiser state)", path);
    }
    /* a checkpoint without the key predates bf16 and was trained in fp32 */
    precision_kind cp = PRECISION_FP32;
    const char *prec = safetensors_meta(st, "precision");
    if (prec && precision_parse(prec, &cp)) {
        safetensors_close(st);
        return engine_fail(err, ENGINE_ERR_FORMAT, "%s: checkpoint precision '%s' is unknown", path, prec);
    }
    if (cp != model_precision(s->m)) {
        safetensors_close(st);
        return engine_fail(err, ENGINE_ERR_INVALID, "%s was trained in %s; resume it with precision %s", path,
                           precision_name(cp), precision_name(cp));
    }
    /* a checkpoint without the key predates the kernel path table */
    const char *kp = safetensors_meta(st, "kernel_path"), *due = safetensors_meta(st, "eval_due");
    snprintf(s->resumed_path, sizeof s->resumed_path, "%s", kp ? kp : "");
    s->eval_due = due && strcmp(due, "1") == 0;
    char *end;
    long k = strtol(step, &end, 10);
    if (end == step || *end || k < 0) {
        safetensors_close(st);
        return engine_fail(err, ENGINE_ERR_FORMAT, "%s: checkpoint step '%s' is not a count", path, step);
    }
    for (int i = 0; !rc && i < model_tensor_count(s->m); i++) {
        const model_tensor *t = model_tensor_at(s->m, i);
        char name[56];
        snprintf(name, sizeof name, "adamw.m.%s", t->name);
        rc = safetensors_read_real(st, name, t->ndim, t->shape, s->adam_m + t->offset, err);
        if (rc) break;
        snprintf(name, sizeof name, "adamw.v.%s", t->name);
        rc = safetensors_read_real(st, name, t->ndim, t->shape, s->adam_v + t->offset, err);
    }
    safetensors_close(st);
    if (!rc) s->step = k;
    return rc;
}

static engine_status checkpoint(run_state *s, const train_callbacks *cb, engine_error *err) {
    const char *path = s->cfg->checkpoint_path;
    if (!path || !*path) return ENGINE_OK;
    engine_status rc = save_checkpoint(s, path, err);
    if (!rc && cb && cb->on_checkpoint) cb->on_checkpoint(cb->ctx, s->step, path);
    return rc;
}

/* The answer labels of batch `step` of split into s->labels, and with loss_on answers every other
 * target made MODEL_TARGET_IGNORE. */
static engine_status label_batch(run_state *s, const train_source *src, corpus_split split, long step,
                                 engine_error *err) {
    int B = s->cfg->batch, T = s->cfg->model.seq_len;
    for (int b = 0; b < B; b++) {
        size_t start;
        engine_status rc = src->window_start(src->ctx, split, step, b, &start, err);
        if (rc) return rc;
        tasks_window_labels(s->cfg->tasks, start, T, s->labels + (size_t)b * T);
    }
    if (s->cfg->loss_on == TRAIN_LOSS_ANSWERS)
        for (long i = 0; i < (long)B * T; i++)
            if (!s->labels[i]) s->targets[i] = MODEL_TARGET_IGNORE;
    return ENGINE_OK;
}

/* The validation loss (model_forward, as always; with loss_on answers over the answers) and,
 * with a task corpus, the accuracy of the argmax predictions on its answers (acc, may be NULL
 * otherwise). */
static engine_status evaluate(run_state *s, const train_source *src, double *val, tasks_acc *acc, engine_error *err) {
    int B = s->cfg->batch, T = s->cfg->model.seq_len;
    const tasks_corpus *tc = acc ? s->cfg->tasks : NULL;
    if (tc) tasks_acc_init(acc, tc->n_buckets);
    double sum = 0;
    for (int i = 0; i < s->cfg->eval_batches; i++) {
        engine_status rc = src->batch(src->ctx, CORPUS_SPLIT_VAL, i, s->batch, err);
        if (rc) return rc;
        split_batch(s);
        if (tc && (rc = label_batch(s, src, CORPUS_SPLIT_VAL, i, err))) return rc;
        double loss;
        rc = model_forward(s->m, s->inputs, s->targets, B, T, &loss, err);
        if (rc) return rc;
        sum += loss;
        if (!tc) continue;
        sparse_config dense;
        sparse_config_defaults(&dense, SPARSE_DENSE, T);
        rc = sparse_eval_run(s->ev, &dense, s->inputs, NULL, B, T, NULL, s->argmax, NULL, err);
        if (rc) return rc;
        /* an ignored target is never an answer, so the count sees only real targets */
        tasks_acc_add(acc, s->argmax, s->targets, s->labels, (long)B * T);
    }
    *val = sum / s->cfg->eval_batches;
    return ENGINE_OK;
}

/* The evaluation after step s->step (every eval_every steps and after the last), reported through
 * cb. A cancel during it checkpoints the step with eval_due set, so that the resumed run evaluates
 * this step before training the next and the validation curve keeps every point; ENGINE_ERR_CANCELLED
 * then. */
static engine_status eval_step(run_state *s, const train_source *src, int want_acc, const train_callbacks *cb,
                               engine_error *err) {
    double val;
    tasks_acc acc;
    engine_status rc = evaluate(s, src, &val, want_acc ? &acc : NULL, err);
    if (rc == ENGINE_ERR_CANCELLED) {
        s->eval_due = 1;
        rc = checkpoint(s, cb, err);
        return rc ? rc
                  : engine_fail(err, ENGINE_ERR_CANCELLED, "cancelled after step %ld, during its evaluation", s->step);
    }
    if (rc) return rc;
    s->eval_due = 0;
    if (cb && cb->on_eval) cb->on_eval(cb->ctx, s->step, val);
    if (cb && cb->on_eval_metrics) {
        train_eval_metrics em = {.step = s->step, .val_loss = val, .acc_counts = want_acc ? &acc : NULL};
        if (want_acc) em.n_acc = tasks_acc_metrics(&acc, s->cfg->tasks, em.acc_keys, em.acc, 1 + TASKS_MAX_BUCKETS);
        cb->on_eval_metrics(cb->ctx, &em);
    }
    return ENGINE_OK;
}

engine_status train_run_source(const train_config *c, const train_source *src, int n_threads,
                               const char *resume_checkpoint, const train_callbacks *cb, engine_error *err) {
    engine_status rc = train_config_validate(c, err);
    if (rc) return rc;
    if ((rc = kernel_path_init(err))) return rc;
    run_state s;
    memset(&s, 0, sizeof s);
    s.cfg = c;
    s.ac.lr = c->lr;
    s.ac.beta1 = c->beta1;
    s.ac.beta2 = c->beta2;
    s.ac.eps = c->eps;
    s.ac.weight_decay = c->weight_decay;
    rc = model_new(&s.m, &c->model, c->batch, n_threads, 1, err);
    if (rc) return rc;
    model_set_lmhead_blas(s.m, c->lmhead_blas);
    rc = model_set_precision(s.m, c->precision, err);
    if (rc) {
        model_free(s.m);
        return rc;
    }
    int B = c->batch, T = c->model.seq_len, L = c->model.n_layer, H = c->model.n_head;
    size_t np = model_param_count(s.m);
    s.adam_m = mem_calloc64(np, sizeof(real));
    s.adam_v = mem_calloc64(np, sizeof(real));
    s.batch = malloc(sizeof(int32_t) * (size_t)B * (T + 1));
    s.inputs = malloc(sizeof(int32_t) * (size_t)B * T);
    s.targets = malloc(sizeof(int32_t) * (size_t)B * T);
    s.norm_part = calloc((size_t)norm_items(&s), sizeof(double));
    float *tau = malloc(sizeof(float) * (size_t)L * H), *ent = malloc(sizeof(float) * (size_t)L * H);
    float *efrac = malloc(sizeof(float) * (size_t)L * H), *dist = malloc(sizeof(float) * (size_t)L * H);
    double *tau_std = malloc(sizeof(double) * (size_t)L), *tau_ratio = malloc(sizeof(double) * (size_t)L);
    if (!s.adam_m || !s.adam_v || !s.batch || !s.inputs || !s.targets || !s.norm_part || !tau || !ent || !efrac ||
        !dist || !tau_std || !tau_ratio) {
        rc = engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for the optimiser state");
        goto done;
    }
    const int want_acc = c->tasks && src->window_start && src->has_val;
    if (c->loss_on == TRAIN_LOSS_ANSWERS && (!c->tasks || !src->window_start)) {
        rc = engine_fail(err, ENGINE_ERR_INVALID, "loss_on answers needs a task corpus (one with answer positions)%s",
                         c->tasks ? " and the batches' window positions" : "");
        goto done;
    }
    if (want_acc || c->loss_on == TRAIN_LOSS_ANSWERS) {
        if (want_acc && (rc = sparse_eval_new(&s.ev, s.m, B, err))) goto done;
        s.argmax = malloc(sizeof(int32_t) * (size_t)B * T);
        s.labels = malloc((size_t)B * T);
        if (!s.argmax || !s.labels) {
            rc = engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for the accuracy buffers");
            goto done;
        }
    }
    if (resume_checkpoint) {
        rc = load_checkpoint(&s, resume_checkpoint, err);
        if (rc) goto done;
        if (s.step > c->steps) {
            rc = engine_fail(err, ENGINE_ERR_INVALID, "checkpoint is at step %ld, past the run's %ld steps", s.step,
                             c->steps);
            goto done;
        }
        const char *now = kernel_path_row(model_kernel_path(s.m))->name;
        if (s.resumed_path[0] && strcmp(s.resumed_path, now) != 0 && cb && cb->on_notice) {
            char msg[256];
            snprintf(msg, sizeof msg,
                     "checkpoint at step %ld was trained on kernel path %s; this run continues on %s, so the steps "
                     "from %ld on are not bit-identical to an uninterrupted run (same precision, %s)",
                     s.step, s.resumed_path, now, s.step + 1, precision_name(model_precision(s.m)));
            cb->on_notice(cb->ctx, msg);
        }
    } else if (c->init_weights) {
        rc = model_load_params(s.m, c->init_weights, err);
        if (rc) goto done;
    } else {
        model_init_params(s.m, c->seed);
    }

    threadpool *pool = model_threads(s.m);
    /* should_stop is also polled inside steps, so a cancel lands within a layer's time */
    if (cb && cb->should_stop) model_set_interrupt(s.m, cb->should_stop, cb->ctx);
    if (s.eval_due && src->has_val && (rc = eval_step(&s, src, want_acc, cb, err))) goto done;
    while (s.step < c->steps) {
        if (cb && cb->should_stop && cb->should_stop(cb->ctx)) {
            rc = checkpoint(&s, cb, err);
            if (!rc) rc = engine_fail(err, ENGINE_ERR_CANCELLED, "cancelled after step %ld", s.step);
            goto done;
        }
        double t0 = now_s();
        rc = src->batch(src->ctx, CORPUS_SPLIT_TRAIN, s.step, s.batch, err);
        if (rc) goto done;
        split_batch(&s);
        if (c->loss_on == TRAIN_LOSS_ANSWERS && (rc = label_batch(&s, src, CORPUS_SPLIT_TRAIN, s.step, err))) goto done;
        double loss;
        rc = model_forward_backward(s.m, s.inputs, s.targets, B, T, &loss, err);
        if (rc == ENGINE_ERR_CANCELLED) {
            /* the step was abandoned before the optimiser ran: the state is that of step s.step */
            rc = checkpoint(&s, cb, err);
            if (!rc) rc = engine_fail(err, ENGINE_ERR_CANCELLED, "cancelled during step %ld", s.step + 1);
            goto done;
        }
        if (rc) goto done;
        if (!isfinite(loss)) {
            rc = engine_fail(err, ENGINE_ERR_INVALID, "loss became %g at step %ld (lr too high?)", loss, s.step + 1);
            goto done;
        }
        double t_opt = now_s();
        threads_run(pool, norm_fn, &s);
        double sq = 0;
        for (long k = 0; k < norm_items(&s); k++) sq += s.norm_part[k];
        double gnorm = sqrt(sq);
        s.grad_scale = 1;
        /* as torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when above */
        if (c->grad_clip > 0 && gnorm > c->grad_clip) s.grad_scale = (real)(c->grad_clip / (gnorm + 1e-6));
        s.lr = train_lr_at(c, s.step + 1);
        threads_run(pool, adam_fn, &s);
        s.step++;
        double t1 = now_s();
        double mt_ms[MODEL_TIME_PARTS], parts[TRAIN_TIME_PARTS];
        model_time_ms(s.m, mt_ms);
        parts[TRAIN_TIME_OUTPUT_LAYER] = mt_ms[MODEL_TIME_OUTPUT_LAYER];
        parts[TRAIN_TIME_PRODUCTS] = mt_ms[MODEL_TIME_PRODUCTS];
        parts[TRAIN_TIME_ATTENTION] = mt_ms[MODEL_TIME_ATTENTION];
        parts[TRAIN_TIME_OPTIMIZER] = 1000 * (t1 - t_opt);
        parts[TRAIN_TIME_OTHER] = 1000 * (t1 - t0);
        for (int i = 0; i < TRAIN_TIME_OTHER; i++) parts[TRAIN_TIME_OTHER] -= parts[i];
        model_tau(s.m, tau);
        model_attention_entropy(s.m, ent);
        if (cb && cb->on_step) {
            model_attention_distance(s.m, dist, efrac);
            for (int l = 0; l < L; l++) train_head_spread(tau + (size_t)l * H, H, &tau_std[l], &tau_ratio[l]);
            double tau_std_all, tau_ratio_all;
            train_head_spread(tau, L * H, &tau_std_all, &tau_ratio_all);
            train_step_metrics mt = {
                .step = s.step,
                .loss = loss,
                .lr = s.lr,
                .grad_norm = gnorm,
                .tokens_per_s = (double)B * T / (t1 - t0),
                .step_ms = 1000 * (t1 - t0),
                .n_layer = L,
                .n_head = H,
                .tau = tau,
                .entropy = ent,
                .entropy_frac = efrac,
                .distance = dist,
                .tau_std = tau_std,
                .tau_ratio = tau_ratio,
                .tau_std_all = tau_std_all,
                .tau_ratio_all = tau_ratio_all,
                .kernel_path = kernel_path_row(model_kernel_path(s.m))->name,
                .time_ms = parts,
            };
            cb->on_step(cb->ctx, &mt);
        }
        if (src->has_val && ((c->eval_every > 0 && s.step % c->eval_every == 0) || s.step == c->steps) &&
            (rc = eval_step(&s, src, want_acc, cb, err)))
            goto done;
        if (c->checkpoint_every > 0 && s.step % c->checkpoint_every == 0 && s.step < c->steps) {
            rc = checkpoint(&s, cb, err);
            if (rc) goto done;
        }
    }
    rc = checkpoint(&s, cb, err);
    if (!rc && c->save_path && *c->save_path) {
        char step[32];
        const char *kv[2 * RUN_META_MAX];
        int n_run = run_meta(&s, step, sizeof step, kv);
        rc = model_save(s.m, c->save_path, kv, n_run, err);
    }
done:
    sparse_eval_free(s.ev);
    free(s.argmax);
    free(s.labels);
    free(tau);
    free(ent);
    free(efrac);
    free(dist);
    free(tau_std);
    free(tau_ratio);
    free(s.norm_part);
    free(s.targets);
    free(s.inputs);
    free(s.batch);
    mem_free64(s.adam_v);
    mem_free64(s.adam_m);
    model_free(s.m);
    return rc;
}

typedef struct {
    corpus_loader *loader;
} corpus_src;

static engine_status corpus_batch(void *ctx, corpus_split split, long step, int32_t *out, engine_error *err) {
    corpus_src *cs = ctx;
    return corpus_loader_batch(cs->loader, split, step, out, err);
}

static engine_status corpus_window_start(void *ctx, corpus_split split, long step, int b, size_t *start,
                                         engine_error *err) {
    corpus_src *cs = ctx;
    return corpus_loader_window_start(cs->loader, split, step, b, start, err);
}

engine_status train_run(const train_config *c, const corpus *data, int n_threads, const char *resume_checkpoint,
                        const train_callbacks *cb, engine_error *err) {
    engine_status rc = train_config_validate(c, err);
    if (rc) return rc;
    if (corpus_max_token(data) >= c->model.vocab)
        return engine_fail(err, ENGINE_ERR_INVALID, "corpus holds token id %d, outside the model's vocabulary of %d",
                           corpus_max_token(data), c->model.vocab);
    if (c->tasks && (c->tasks->n_tokens != corpus_token_count(data) ||
                     memcmp(c->tasks->tokens, corpus_tokens(data), sizeof(uint16_t) * c->tasks->n_tokens) != 0))
        return engine_fail(err, ENGINE_ERR_INVALID, "the task corpus given for accuracy is not the corpus trained on");
    corpus_loader_config lc = {
        .seq_len = c->model.seq_len,
        .batch = c->batch,
        .order = c->order,
        .seed = c->seed,
        .val_fraction = c->val_fraction,
    };
    corpus_src cs;
    rc = corpus_loader_new(&cs.loader, data, &lc, err);
    if (rc) return rc;
    train_source src = {
        .ctx = &cs, .batch = corpus_batch, .has_val = c->val_fraction > 0, .window_start = corpus_window_start};
    rc = train_run_source(c, &src, n_threads, resume_checkpoint, cb, err);
    corpus_loader_free(cs.loader);
    return rc;
}
