/* Issue 15 in the training loop: accuracy on a task corpus at every evaluation (and that the
 * sparse evaluator reproduces the run's own validation loss and accuracy from its saved weights,
 * k >= T bit for bit), and the per-step head metrics: mean attended distance, entropy as a fraction
 * of the uniform entropy, and the spread of tau across heads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/test.h"
#include "corpus.h"
#include "model.h"
#include "model_io.h"
#include "sparse.h"
#include "tasks.h"
#include "train.h"

static char dir[256];

typedef struct {
    int evals;
    double last_val;
    long last_step;
    tasks_acc last_acc;
    int n_acc;
    char keys[1 + TASKS_MAX_BUCKETS][24];
    double acc[1 + TASKS_MAX_BUCKETS];
    int steps, metrics_ok, first_checked;
    double first_dist_err, first_frac_min;
    int T;
} rec;

static void on_eval(void *ctx, long step, double v) {
    rec *r = ctx;
    r->last_val = v;
    r->last_step = step;
}

static void on_eval_metrics(void *ctx, const train_eval_metrics *m) {
    rec *r = ctx;
    r->evals++;
    CHECK(m->val_loss == r->last_val && m->step == r->last_step);
    r->n_acc = m->n_acc;
    memcpy(r->keys, m->acc_keys, sizeof r->keys);
    memcpy(r->acc, m->acc, sizeof r->acc);
    if (m->acc_counts) r->last_acc = *m->acc_counts;
}

/* Every step: the spreads are those of the tau array; distance and entropy_frac in range. */
static void on_step(void *ctx, const train_step_metrics *m) {
    rec *r = ctx;
    r->steps++;
    int LH = m->n_layer * m->n_head, ok = m->distance && m->entropy_frac && m->tau_std && m->tau_ratio;
    for (int i = 0; ok && i < LH; i++)
        ok = m->distance[i] >= 0 && m->distance[i] <= r->T - 1 && m->entropy_frac[i] >= -1e-6 &&
             m->entropy_frac[i] <= 1 + 1e-4;
    for (int l = 0; ok && l < m->n_layer; l++) {
        const float *t = m->tau + l * m->n_head;
        double mean = 0, lo = INFINITY, hi = -INFINITY, ss = 0;
        for (int h = 0; h < m->n_head; h++) mean += t[h], lo = fmin(lo, t[h]), hi = fmax(hi, t[h]);
        mean /= m->n_head;
        for (int h = 0; h < m->n_head; h++) ss += (t[h] - mean) * (t[h] - mean);
        ok = fabs(m->tau_std[l] - sqrt(ss / m->n_head)) < 1e-9 && fabs(m->tau_ratio[l] - hi / lo) < 1e-9;
    }
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < LH; i++) lo = fmin(lo, m->tau[i]), hi = fmax(hi, m->tau[i]);
    ok = ok && fabs(m->tau_ratio_all - hi / lo) < 1e-9;
    if (!ok) r->metrics_ok = 0;
    if (!r->first_checked) {
        /* the first step's forward pass starts from near-zero scores: nearly uniform attention, so the
         * mean distance is close to the mean over t of t/2 = (T-1)/4 and entropy_frac close to 1 */
        r->first_checked = 1;
        double want = (r->T - 1) / 4.0, worst = 0, fmin_ = 1;
        for (int i = 0; i < LH; i++) {
            worst = fmax(worst, fabs(m->distance[i] - want) / want);
            fmin_ = fmin(fmin_, m->entropy_frac[i]);
        }
        r->first_dist_err = worst;
        r->first_frac_min = fmin_;
    }
}

static tasks_corpus *make_tasks(int windows) {
    tasks_config tc;
    tasks_config_defaults(&tc, tasks_kind_index("copy_offset"));
    engine_error err;
    int offs[] = {1, 3, 6};
    tasks_corpus *t = NULL;
    if (tasks_config_set(&tc, "vocab", 64, &err) || tasks_config_set(&tc, "seq_len", 32, &err) ||
        tasks_config_set(&tc, "windows", windows, &err) || tasks_config_set(&tc, "len_min", 8, &err) ||
        tasks_config_set(&tc, "len_max", 12, &err) || tasks_config_set_offsets(&tc, offs, 3, &err) ||
        tasks_generate(&t, &tc, &err))
        printf("  tasks: %s\n", err.message);
    return t;
}

static void config(train_config *c, const char *attention) {
    train_config_defaults(c);
    c->model.n_layer = 2, c->model.n_head = 2, c->model.d_model = 16, c->model.seq_len = 32, c->model.vocab = 64;
    c->model.attention = attention_index(attention);
    c->batch = 4, c->steps = 24, c->lr = 3e-3, c->eval_every = 8, c->eval_batches = 3, c->val_fraction = 0.1;
    c->order = CORPUS_ORDER_SHUFFLED;
}

/* A copy_offset corpus of `windows` windows, its token stream and a config that trains on it; 0 when
 * the corpus cannot be made (nothing to free then). */
static int task_setup(int windows, const char *attention, tasks_corpus **tc, corpus **cp, train_config *c) {
    engine_error err;
    *cp = NULL;
    if (!(*tc = make_tasks(windows))) return 0;
    if (corpus_from_tokens(cp, (*tc)->tokens, (*tc)->n_tokens, &err) != ENGINE_OK) {
        tasks_corpus_free(*tc);
        return 0;
    }
    config(c, attention);
    c->tasks = *tc;
    return 1;
}

TEST(task_run_logs_accuracy_the_sparse_evaluator_reproduces) {
    tasks_corpus *tc;
    corpus *cp;
    train_config c;
    CHECK(task_setup(200, "cosine_rope", &tc, &cp, &c));
    engine_error err;
    char weights[300];
    snprintf(weights, sizeof weights, "%s/w.safetensors", dir);
    c.save_path = weights;
    rec r = {.metrics_ok = 1, .T = 32};
    train_callbacks cb = {.ctx = &r, .on_step = on_step, .on_eval = on_eval, .on_eval_metrics = on_eval_metrics};
    CHECK_MSG(train_run(&c, cp, 2, NULL, &cb, &err) == ENGINE_OK, "%s", err.message);
    CHECK_EQ_INT(r.evals, 3); /* steps 8, 16, 24 */
    CHECK(r.metrics_ok);
    CHECK_EQ_INT(r.steps, 24);
    CHECK(r.n_acc >= 2 && !strcmp(r.keys[0], "acc"));
    CHECK(r.last_acc.total > 0);
    CHECK_NEAR(r.acc[0], (double)r.last_acc.correct / r.last_acc.total, 1e-12);
    for (int i = 1; i < r.n_acc; i++) CHECK(!strncmp(r.keys[i], "acc.k", 5));

    /* the saved weights through the sparse evaluator, read as train.c reads the validation split */
    model *m = NULL;
    CHECK(model_load(&m, weights, c.batch, 1, 0, &err) == ENGINE_OK);
    sparse_eval *ev = NULL;
    CHECK(sparse_eval_new(&ev, m, c.batch, &err) == ENGINE_OK);
    corpus_loader_config lc = {
        .seq_len = 32, .batch = c.batch, .order = c.order, .seed = c.seed, .val_fraction = c.val_fraction};
    for (int p = 0; p < 2; p++) {
        /* dense, and exact top-k with k = T (every key): the run's own validation loss, bit for bit */
        sparse_config sc;
        sparse_config_defaults(&sc, p ? SPARSE_TOPK : SPARSE_DENSE, 32);
        double loss;
        tasks_acc acc;
        tasks_acc_init(&acc, tc->n_buckets);
        CHECK(sparse_eval_split(ev, &sc, cp, &lc, CORPUS_SPLIT_VAL, c.eval_batches, tc, &loss, &acc, &err) ==
              ENGINE_OK);
        CHECK_MSG(loss == r.last_val, "%s: %.17g vs the run's %.17g", sparse_predictor_name(sc.predictor), loss,
                  r.last_val);
        CHECK_EQ_INT(acc.total, r.last_acc.total);
        CHECK_EQ_INT(acc.correct, r.last_acc.correct);
        for (int b = 0; b < acc.n_buckets; b++) CHECK_EQ_INT(acc.b_correct[b], r.last_acc.b_correct[b]);
    }
    /* fewer keys than the window: a different loss */
    sparse_config sw;
    sparse_config_defaults(&sw, SPARSE_WINDOW, 2);
    double lw;
    CHECK(sparse_eval_split(ev, &sw, cp, &lc, CORPUS_SPLIT_VAL, c.eval_batches, NULL, &lw, NULL, &err) == ENGINE_OK);
    CHECK(isfinite(lw) && lw != r.last_val);
    sparse_eval_free(ev);
    model_free(m);

    /* a task corpus that is not the one trained on is refused */
    tasks_corpus *other = make_tasks(150);
    CHECK(other != NULL);
    c.tasks = other;
    c.save_path = NULL;
    CHECK(train_run(&c, cp, 1, NULL, &cb, &err) == ENGINE_ERR_INVALID);
    CHECK(strstr(err.message, "task corpus") != NULL);
    tasks_corpus_free(other);
    /* without a task corpus: no accuracy, the loss alone */
    c.tasks = NULL;
    rec r2 = {.metrics_ok = 1, .T = 32};
    cb.ctx = &r2;
    CHECK(train_run(&c, cp, 1, NULL, &cb, &err) == ENGINE_OK);
    CHECK_EQ_INT(r2.evals, 3);
    CHECK_EQ_INT(r2.n_acc, 0);
    corpus_free(cp);
    tasks_corpus_free(tc);
}

static void on_step_loss(void *ctx, const train_step_metrics *m) {
    if (m->step == 1) *(double *)ctx = m->loss;
}

/* loss_on answers: step 1's loss is the model's mean loss over the answer targets of batch 0 alone
 * (labels read straight from the task corpus), not over every target; without a task corpus the
 * run is refused before its first step. */
TEST(loss_on_answers_counts_the_answers_only) {
    tasks_corpus *tc;
    corpus *cp;
    train_config c;
    CHECK(task_setup(200, "rope", &tc, &cp, &c));
    engine_error err;
    c.loss_on = TRAIN_LOSS_ANSWERS;
    c.steps = 1;
    double step1 = NAN;
    train_callbacks cb = {.ctx = &step1, .on_step = on_step_loss};
    CHECK_MSG(train_run(&c, cp, 2, NULL, &cb, &err) == ENGINE_OK, "%s", err.message);

    model *m = NULL;
    CHECK(model_new(&m, &c.model, c.batch, 1, 0, &err) == ENGINE_OK);
    model_init_params(m, c.seed);
    corpus_loader *l = NULL;
    corpus_loader_config lc = {
        .seq_len = 32, .batch = c.batch, .order = c.order, .seed = c.seed, .val_fraction = c.val_fraction};
    CHECK(corpus_loader_new(&l, cp, &lc, &err) == ENGINE_OK);
    int32_t buf[4 * 33], in[4 * 32], all[4 * 32], answers[4 * 32];
    CHECK(corpus_loader_batch(l, CORPUS_SPLIT_TRAIN, 0, buf, &err) == ENGINE_OK);
    int counted = 0;
    for (int b = 0; b < 4; b++) {
        size_t start;
        CHECK(corpus_loader_window_start(l, CORPUS_SPLIT_TRAIN, 0, b, &start, &err) == ENGINE_OK);
        for (int t = 0; t < 32; t++) {
            in[b * 32 + t] = buf[b * 33 + t];
            all[b * 32 + t] = buf[b * 33 + t + 1];
            CHECK(all[b * 32 + t] == tc->tokens[start + t + 1]);
            answers[b * 32 + t] = tc->labels[start + t + 1] ? all[b * 32 + t] : MODEL_TARGET_IGNORE;
            counted += tc->labels[start + t + 1] != 0;
        }
    }
    CHECK(counted > 0 && counted < 4 * 32);
    double l_all, l_answers;
    CHECK(model_forward(m, in, all, 4, 32, &l_all, &err) == ENGINE_OK);
    CHECK(model_forward(m, in, answers, 4, 32, &l_answers, &err) == ENGINE_OK);
    CHECK_MSG(fabs(step1 - l_answers) <= 1e-6 * l_answers, "step 1 loss %.9g, answers %.9g, all %.9g", step1, l_answers,
              l_all);
    CHECK(fabs(l_answers - l_all) > 1e-3);
    corpus_loader_free(l);
    model_free(m);

    c.tasks = NULL;
    step1 = NAN;
    CHECK(train_run(&c, cp, 1, NULL, &cb, &err) == ENGINE_ERR_INVALID);
    CHECK(strstr(err.message, "task corpus") != NULL);
    CHECK(isnan(step1));
    corpus_free(cp);
    tasks_corpus_free(tc);
}

TEST(first_step_attention_is_nearly_uniform) {
    /* dot attention at initialisation: scores of order 1e-4, weights within 0.1% of uniform */
    tasks_corpus *tc = make_tasks(120);
    CHECK(tc != NULL);
    engine_error err;
    corpus *cp = NULL;
    CHECK(corpus_from_tokens(&cp, tc->tokens, tc->n_tokens, &err) == ENGINE_OK);
    train_config c;
    config(&c, "dot");
    c.steps = 2;
    rec r = {.metrics_ok = 1, .T = 32};
    train_callbacks cb = {.ctx = &r, .on_step = on_step};
    CHECK(train_run(&c, cp, 1, NULL, &cb, &err) == ENGINE_OK);
    CHECK(r.metrics_ok);
    CHECK_MSG(r.first_dist_err < 0.01, "distance off uniform's (T-1)/4 by %.3g", r.first_dist_err);
    CHECK_MSG(r.first_frac_min > 0.999, "entropy fraction %.6f", r.first_frac_min);
    corpus_free(cp);
    tasks_corpus_free(tc);
}

TEST(attention_distance_matches_the_inspected_weights) {
    /* model_attention_distance after a forward pass against the same quantities computed in double
     * from model_forward_inspect's weights */
    model_config mc;
    model_config_defaults(&mc);
    mc.n_layer = 2, mc.n_head = 2, mc.d_model = 32, mc.seq_len = 24, mc.vocab = 50;
    mc.attention = attention_index("cosine_rope");
    mc.tau_init = 0.05; /* sharp: far from uniform */
    engine_error err;
    model *m = NULL;
    CHECK(model_new(&m, &mc, 1, 1, 0, &err) == ENGINE_OK);
    model_init_params(m, 9);
    int32_t tok[24];
    for (int i = 0; i < 24; i++) tok[i] = (i * 7 + 3) % 50;
    model_inspect ins;
    CHECK(model_forward_inspect(m, tok, 24, &ins, &err) == ENGINE_OK);
    float dist[4], frac[4];
    model_attention_distance(m, dist, frac);
    for (int lh = 0; lh < 4; lh++) {
        double d = 0, f = 0;
        for (int t = 0; t < 24; t++) {
            double e = 0;
            for (int s = 0; s <= t; s++) {
                double p = ins.att[((size_t)lh * 24 + t) * 24 + s];
                d += p * (t - s);
                if (p > 0) e -= p * log(p);
            }
            if (t > 0) f += e / log(t + 1.0);
        }
        CHECK_NEAR(dist[lh], d / 24, 1e-4);
        CHECK_NEAR(frac[lh], f / 23, 1e-4);
        CHECK(frac[lh] < 0.9); /* tau 0.05 is sharp */
    }
    model_attention_distance(m, NULL, frac); /* either output may be NULL */
    model_inspect_free(&ins);
    model_free(m);
}

TEST(head_spread_of_known_values) {
    float x[] = {1, 2, 4, 1};
    double sd, ratio;
    train_head_spread(x, 4, &sd, &ratio);
    CHECK_NEAR(sd, sqrt(((1 - 2) * (1 - 2) + 0 + 4 + 1) / 4.0), 1e-12);
    CHECK_NEAR(ratio, 4.0, 1e-12);
    float z[] = {0, 2};
    train_head_spread(z, 2, &sd, &ratio);
    CHECK(isnan(ratio));
    float one[] = {3};
    train_head_spread(one, 1, &sd, &ratio);
    CHECK(sd == 0 && ratio == 1);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/attnlab-train-tasks-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(task_run_logs_accuracy_the_sparse_evaluator_reproduces);
    RUN(loss_on_answers_counts_the_answers_only);
    RUN(first_step_attention_is_nearly_uniform);
    RUN(attention_distance_matches_the_inspected_weights);
    RUN(head_spread_of_known_values);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
    return test_summary();
}
