/* One training run: model + AdamW + data, driven step by step, reporting through callbacks.
 * JSON-free and thread-agnostic towards its caller: the run creates and joins its own worker
 * threads, so several runs may go on at once in one process.
 *
 * Step s (1-based) trains on training batch s-1 of the data and uses Adam step count s. A
 * checkpoint taken after step k holds the parameters, the AdamW moments and k, so a run resumed
 * from it produces bit-identical losses from step k+1 on (same config); when a cancel cut short
 * the validation after step k, the checkpoint says so (eval_due) and the resumed run does that
 * validation first, so no point is lost. Work is split into items
 * fixed by the sizes, never by the thread count, so the thread count does not change a single
 * bit either (tested with 1, 2 and 3 threads, and for a resume).
 * Validation: after every eval_every-th step and after the last, the mean loss over
 * eval_batches validation batches (the same ones each time); with a task corpus (tasks.h) also the
 * exact-match accuracy of the argmax predictions on its answer positions in those batches, overall
 * and per bucket (train_eval_metrics). */
#ifndef ENGINE_TRAIN_H
#define ENGINE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "corpus.h"
#include "error.h"
#include "model.h"
#include "tasks.h"

typedef enum { LR_SCHEDULE_CONSTANT = 0, LR_SCHEDULE_COSINE = 1 } lr_schedule;
/* Which next-token targets the loss counts: all (default), or on a task corpus only its answers
 * (the others are MODEL_TARGET_IGNORE), for training and validation loss alike. */
typedef enum { TRAIN_LOSS_ALL = 0, TRAIN_LOSS_ANSWERS = 1 } train_loss_on;

typedef struct {
    model_config model;
    int batch;                                  /* B windows of seq_len+1 tokens per step (default 32) */
    long steps;                                 /* default 2000 */
    double lr, beta1, beta2, eps, weight_decay; /* AdamW, PyTorch defaults but lr 3e-4 */
    int tau_weight_decay;        /* 1 (default): weight decay applies to the learned attention scale (tau or s) too */
    double scale_lr_mult;        /* the learned attention scale's lr is lr * this (default 1), decay included */
    double grad_clip;            /* clip the global gradient norm to this; 0 (default) = off */
    lr_schedule schedule;        /* constant (default) or warm-up + cosine */
    long warmup_steps;           /* linear warm-up from lr/warmup to lr (cosine schedule only) */
    double min_lr_ratio;         /* cosine decays to lr * min_lr_ratio at the last step (default 0.1) */
    uint64_t seed;               /* initialisation and shuffled data order (default 1337) */
    corpus_order order;          /* default sequential */
    double val_fraction;         /* share of windows held out for validation (default 0.05) */
    long eval_every;             /* default 100; 0 = never (but still after the last step) */
    int eval_batches;            /* default 4 */
    long checkpoint_every;       /* 0 (default) = only on cancel and at the end */
    const char *checkpoint_path; /* NULL: no checkpoints */
    const char *init_weights;    /* NULL: random init from seed; else a weights/checkpoint file */
    const char *save_path;       /* NULL: none; else the final weights (no optimiser state) */
    int lmhead_blas;             /* 1: BLAS output layer even where the own kernels apply (bench) */
    precision_kind precision;    /* fp32 (default) or bf16 mixed precision (model_set_precision); a
                                  * checkpoint records it and a resume must ask for the same */
    const char *const *meta_kv;  /* n_meta extra metadata pairs (meta_kv[2i] -> meta_kv[2i+1]) written into every
                                  * checkpoint and the saved weights: where the tokens came from (tokenizer,
                                  * vocab_source, corpus, run_id); keys of the engine's own are not allowed.
                                  * NULL/0 (default): none. Read only; must outlive the run */
    int n_meta;                  /* 0..TRAIN_MAX_META */
    const tasks_corpus *tasks;   /* NULL (default): none. The task corpus whose tokens the run trains on:
                                  * accuracy on its answers at every evaluation (needs the source's
                                  * window_start; train_run provides it). Read only; must outlive the run */
    train_loss_on loss_on;       /* TRAIN_LOSS_ANSWERS needs tasks and the source's window_start (a run
                                  * without them fails with ENGINE_ERR_INVALID before its first step) */
} train_config;

#define TRAIN_MAX_META 8

void train_config_defaults(train_config *c);
/* ENGINE_ERR_INVALID with a message for: the model limits (model_config_validate), batch
 * 1..512, steps 1..1e7, lr in (0, 1], betas in [0, 1), eps > 0, weight_decay in [0, 1),
 * scale_lr_mult in (0, 1000], grad_clip >= 0, warmup in 0..steps, min_lr_ratio in [0, 1],
 * val_fraction in [0, 0.5], eval_every >= 0, eval_batches 1..1000, checkpoint_every >= 0,
 * n_meta 0..TRAIN_MAX_META pairs with non-empty keys that are not the engine's own, an unknown
 * loss_on. */
engine_status train_config_validate(const train_config *c, engine_error *err);
/* The kernel path (kernel_path.h) a run of this config would compute on if it started now: "fp32"
 * for precision fp32; for bf16 the process's bf16 path ("avx512_bf16", "amx", "bf16_portable").
 * For the run record and the first line of `attnlabd train`; the run reports the path it actually
 * took in every train_step_metrics and records it in its checkpoints ("kernel_path"). */
const char *train_config_kernel_path(const train_config *c);
/* Estimated peak bytes of a run (model, gradients, optimiser state, activations, scratch). */
size_t train_config_memory_bytes(const train_config *c, int n_threads);
/* The learning rate used at step s (1-based). */
double train_lr_at(const train_config *c, long step);

typedef struct {
    long step;
    double loss, lr, grad_norm; /* grad_norm: global L2 norm before clipping */
    double tokens_per_s, step_ms;
    int n_layer, n_head;
    const float *tau;     /* [n_layer * n_head]: effective temperature (sqrt(d) if fixed) */
    const float *entropy; /* [n_layer * n_head]: mean attention entropy (nats) this step */
    /* model_attention_distance of this step's forward pass, [n_layer * n_head]: */
    const float *entropy_frac; /* mean row entropy / ln(keys): 1 = uniform over the row's keys */
    const float *distance;     /* mean attended distance in tokens */
    /* The spread of tau across heads (train_head_spread): per layer [n_layer], and over every head */
    const double *tau_std, *tau_ratio;
    double tau_std_all, tau_ratio_all;
    const char *kernel_path; /* the kernel path the run computes on (kernel_path.h; fixed for the run) */
    const double *time_ms;   /* [TRAIN_TIME_PARTS]: where step_ms went (they add up to it) */
} train_step_metrics;

/* The parts of a step's wall time: the output layer (fused products, softmax, loss, the bf16
 * copies' refresh), the other matrix products (with the layer norms, GELU, RoPE and residual adds
 * of their phases), attention (scores, softmax, weighted sums), the optimiser (gradient norm and
 * AdamW), and the rest (embeddings, the batch). */
enum {
    TRAIN_TIME_OUTPUT_LAYER,
    TRAIN_TIME_PRODUCTS,
    TRAIN_TIME_ATTENTION,
    TRAIN_TIME_OPTIMIZER,
    TRAIN_TIME_OTHER,
    TRAIN_TIME_PARTS
};
/* "output_layer", "products", "attention", "optimizer", "other"; NULL outside 0..TRAIN_TIME_PARTS-1. */
const char *train_time_part_name(int part);

/* Spread of x[0..n-1] (n >= 1) across heads: *std the population standard deviation (divisor n: the
 * heads are the whole population), *ratio max / min (NaN when min <= 0). */
void train_head_spread(const float *x, int n, double *std, double *ratio);

/* What one evaluation measured. */
typedef struct {
    long step;
    double val_loss;
    /* With a task corpus (train_config.tasks), else n_acc = 0: keys[i] "acc" (overall), then
     * "acc.<bucket>" for each bucket with answers in the evaluated windows (tasks_acc_metrics), and
     * their exact-match accuracies; acc_counts the raw counts. */
    int n_acc;
    char acc_keys[1 + TASKS_MAX_BUCKETS][24];
    double acc[1 + TASKS_MAX_BUCKETS];
    const tasks_acc *acc_counts;
} train_eval_metrics;

typedef struct {
    void *ctx;
    void (*on_step)(void *ctx, const train_step_metrics *m);         /* may be NULL */
    void (*on_eval)(void *ctx, long step, double val_loss);          /* may be NULL */
    void (*on_eval_metrics)(void *ctx, const train_eval_metrics *m); /* may be NULL; after on_eval */
    int (*should_stop)(void *ctx); /* may be NULL; polled before each step and between layers within
                                    * it (from the thread that called train_run): a stop mid-step drops
                                    * that step, so the checkpoint holds the last completed one */
    void (*on_checkpoint)(void *ctx, long step, const char *path); /* may be NULL */
    /* may be NULL: something the caller should pass on to the user, one line, the run going on: a
     * resume from a checkpoint recorded on another kernel path than this run's (the steps after it
     * are then not bit-identical to an uninterrupted run) */
    void (*on_notice)(void *ctx, const char *message);
} train_callbacks;

/* Where batches come from: out[batch * (seq_len + 1)] for (split, step). corpus_loader fits;
 * tests use synthetic sources. */
typedef struct {
    void *ctx;
    engine_status (*batch)(void *ctx, corpus_split split, long step, int32_t *out, engine_error *err);
    int has_val; /* 0: no validation split, evaluation is skipped */
    /* The first token index (in the task corpus) of the window row b of batch `step` reads; may be
     * NULL (then no accuracy is measured even with train_config.tasks). */
    engine_status (*window_start)(void *ctx, corpus_split split, long step, int b, size_t *start, engine_error *err);
} train_source;

/* Trains on a corpus (a loader is made from the config's order, seed and val_fraction).
 * Returns ENGINE_OK after the last step, ENGINE_ERR_CANCELLED when should_stop asked (after
 * saving a checkpoint if a path is set), or the first error (bad config, token >= vocab, IO,
 * an ATTNLAB_KERNEL_PATH this CPU cannot run: kernel_path_init's message). */
engine_status train_run(const train_config *c, const corpus *data, int n_threads, const char *resume_checkpoint,
                        const train_callbacks *cb, engine_error *err);
/* The same on any batch source. */
engine_status train_run_source(const train_config *c, const train_source *src, int n_threads,
                               const char *resume_checkpoint, const train_callbacks *cb, engine_error *err);

/* Checkpoint files are safetensors: the model's tensors, "adamw.m.<name>" and "adamw.v.<name>"
 * for each, and metadata with the model config and its description (model_config_metadata),
 * "format" = "attnlab-checkpoint", "step" (completed steps), "precision", "kernel_path" (the path the
 * run computed on, kernel_path.h) and the config's meta_kv.
 * The saved weights (save_path) carry the same metadata with "format" = "attnlab-weights". */

#endif
