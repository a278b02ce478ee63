/* The sparse_attention probe's loss per predictor and k next to dense (probe_model.sparse_loss),
 * its inputs (text, token ids, a validation window of the run's corpus; a task-corpus run has no
 * text tokenizer and reads window 0), and topk_prediction saying that for cosine attention its
 * "after rotation" ranking is the score itself. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../support/test.h"
#include "corpus.h"
#include "model.h"
#include "probes/probe_engine_model.h"
#include "sparse.h"
#include "test_probe_util.h"

static json_t *run_on(const char *kind, const probe_engine_model *pm, const char *params, probe_error *err) {
    json_t *p = json_loads(params, 0, NULL), *res = NULL;
    probe_context ctx = {.model = &pm->view};
    engine_status st = probe_run(kind, p, &ctx, &res, err);
    json_decref(p);
    return st ? NULL : res;
}

static const char *sum_str(const json_t *res, const char *key) {
    return json_string_value(json_object_get(json_object_get(res, "summary"), key));
}

static model *make_model(const char *attention, int vocab) {
    model_config c;
    model_config_defaults(&c);
    c.n_layer = 2, c.n_head = 2, c.d_model = 32, c.seq_len = 40, c.vocab = vocab,
    c.attention = attention_index(attention);
    engine_error e;
    model *m = NULL;
    if (model_new(&m, &c, 1, 1, 0, &e) != ENGINE_OK) return NULL;
    model_init_params(m, 17);
    /* sharper attention than the initialisation's, so predictors differ */
    const model_tensor *qkv = model_tensor_find(m, "h.0.attn.qkv.w");
    for (size_t i = 0; i < (size_t)2 * 32 * 32; i++) model_params(m)[qkv->offset + i] *= 30;
    return m;
}

/* The dense loss of ids[0..n) computed directly: model_forward on inputs/targets. */
static double dense_loss(model *m, const int *ids, int n) {
    int32_t in[64], tg[64];
    for (int i = 0; i + 1 < n; i++) in[i] = ids[i], tg[i] = ids[i + 1];
    double loss = NAN;
    engine_error e;
    if (model_forward(m, in, tg, 1, n - 1, &loss, &e) != ENGINE_OK) return NAN;
    return loss;
}

TEST(loss_per_predictor_next_to_dense) {
    tokenizer *tok;
    engine_error e;
    CHECK(tokenizer_new_bytes(&tok, &e) == ENGINE_OK);
    model *m = make_model("cosine_rope", 256);
    CHECK(m != NULL);
    probe_engine_model pm;
    CHECK(probe_engine_model_init(&pm, m, tok, &e) == ENGINE_OK);
    CHECK(pm.view.sparse_loss != NULL && pm.view.val_window == NULL);
    probe_error perr;
    json_t *res = run_on("sparse_attention", &pm,
                         "{\"text\": \"the cat sat on the mat and the dog sat on the log.\", \"max_tokens\": 30, "
                         "\"ks\": [1, 2, 4, 29]}",
                         &perr);
    CHECK_MSG(res != NULL, "%s: %s", perr.field, perr.message);
    const json_t *lt = tp_table(res, "loss");
    CHECK(lt != NULL);
    CHECK_EQ_INT(tp_nrows(lt), 4);
    CHECK(!strcmp(sum_str(res, "input"), "text"));
    /* the same 30 tokens scored directly */
    int ids[64], n = 0;
    CHECK(pm.view.tokenize(pm.view.self, "the cat sat on the mat and the dog sat on the log.", ids, 64, &n, &e) ==
          ENGINE_OK);
    double want = dense_loss(m, ids, 30);
    static const char *const cols[] = {"topk", "lsh", "hamming", "unrotated", "window"};
    for (int r = 0; r < 4; r++) {
        CHECK(tp_cell(lt, r, "dense") == want); /* bit for bit: sparse evaluation with every key is dense */
        for (int c = 0; c < 5; c++) {
            double v = tp_cell(lt, r, cols[c]);
            CHECK(isfinite(v));
            /* k = 29 >= the 29 scored positions: every predictor keeps every key */
            if (r == 3) CHECK_MSG(v == want, "%s at k=29: %.17g vs dense %.17g", cols[c], v, want);
        }
    }
    CHECK(tp_cell(lt, 0, "window") != want); /* one key per query is not dense */
    CHECK(tp_sum(res, "dense_loss") == want);
    CHECK_EQ_INT((int)tp_sum(res, "loss_positions"), 29);
    /* a chart of the loss table */
    int charted = 0;
    size_t i;
    json_t *ch;
    json_array_foreach(json_object_get(res, "charts"), i, ch) charted |=
        !strcmp(json_string_value(json_object_get(ch, "table")), "loss");
    CHECK(charted);
    json_decref(res);

    /* token ids instead of text; ids outside the vocabulary name the field */
    res = run_on("sparse_attention", &pm, "{\"ids\": [5, 9, 200, 3, 7, 7, 9], \"ks\": [2]}", &perr);
    CHECK_MSG(res != NULL, "%s", perr.message);
    CHECK(!strcmp(sum_str(res, "input"), "ids"));
    int ids2[] = {5, 9, 200, 3, 7, 7, 9};
    CHECK(tp_cell(tp_table(res, "loss"), 0, "dense") == dense_loss(m, ids2, 7));
    json_decref(res);
    CHECK(run_on("sparse_attention", &pm, "{\"ids\": [5, 300]}", &perr) == NULL);
    CHECK(!strcmp(perr.field, "ids"));
    /* no corpus given: no validation windows */
    CHECK(run_on("sparse_attention", &pm, "{\"window\": 0}", &perr) == NULL);
    CHECK(!strcmp(perr.field, "window"));
    model_free(m);
    tokenizer_free(tok);
}

TEST(validation_windows_of_a_task_run_without_a_tokenizer) {
    /* a "task" model: vocab 64, no tokenizer; the corpus is a repeating pattern */
    model *m = make_model("rope", 64);
    CHECK(m != NULL);
    engine_error e;
    probe_engine_model pm;
    CHECK(probe_engine_model_init(&pm, m, NULL, &e) == ENGINE_OK);
    CHECK(pm.view.tokenize == NULL && pm.view.piece == NULL);
    uint16_t toks[2001];
    for (int i = 0; i < 2001; i++) toks[i] = (uint16_t)((i * 5 + i / 7) % 64);
    corpus *cp = NULL;
    CHECK(corpus_from_tokens(&cp, toks, 2001, &e) == ENGINE_OK);
    corpus_loader_config lc = {
        .seq_len = 40, .batch = 8, .order = CORPUS_ORDER_SHUFFLED, .seed = 3, .val_fraction = 0.1};
    CHECK(probe_engine_model_set_corpus(&pm, cp, &lc, &e) == ENGINE_OK);
    CHECK_EQ_INT(pm.view.val_windows, 5); /* 50 windows of 40, a tenth held out */
    probe_error perr;
    /* the default input of a run without a tokenizer: validation window 0 */
    json_t *res = run_on("sparse_attention", &pm, "{\"ks\": [4]}", &perr);
    CHECK_MSG(res != NULL, "%s: %s", perr.field, perr.message);
    CHECK(!strcmp(sum_str(res, "input"), "validation window 0"));
    /* window 0 is the first held-out window: tokens 45*40 .. 45*40 + 40, scored as the run's
     * evaluation scores it (40 positions) */
    int w0[41];
    for (int i = 0; i < 41; i++) w0[i] = toks[45 * 40 + i];
    double want0 = dense_loss(m, w0, 41);
    CHECK_MSG(tp_cell(tp_table(res, "loss"), 0, "dense") == want0, "%.17g vs %.17g",
              tp_cell(tp_table(res, "loss"), 0, "dense"), want0);
    CHECK_EQ_INT((int)tp_sum(res, "n_tokens"), 40);
    json_decref(res);
    /* two windows averaged for the loss */
    res = run_on("sparse_attention", &pm, "{\"window\": 1, \"windows\": 2, \"ks\": [4], \"max_tokens\": 41}", &perr);
    CHECK_MSG(res != NULL, "%s: %s", perr.field, perr.message);
    int w1[41], w2[41];
    for (int i = 0; i < 41; i++) w1[i] = toks[46 * 40 + i], w2[i] = toks[47 * 40 + i];
    CHECK_NEAR(tp_cell(tp_table(res, "loss"), 0, "dense"), (dense_loss(m, w1, 41) + dense_loss(m, w2, 41)) / 2, 1e-12);
    CHECK_EQ_INT((int)tp_sum(res, "loss_positions"), 80);
    json_decref(res);
    CHECK(run_on("sparse_attention", &pm, "{\"window\": 5}", &perr) == NULL);
    CHECK(!strcmp(perr.field, "window"));
    /* text cannot be read without a tokenizer */
    CHECK(run_on("attention_map", &pm, "{\"text\": \"abc\"}", &perr) == NULL);
    CHECK(!strcmp(perr.field, "text") && strstr(perr.message, "task corpus") != NULL);
    /* topk_prediction reads window 0 too */
    res = run_on("topk_prediction", &pm, "{\"ks\": [4]}", &perr);
    CHECK_MSG(res != NULL, "%s: %s", perr.field, perr.message);
    CHECK(!strcmp(sum_str(res, "input"), "validation window 0"));
    json_decref(res);
    corpus_free(cp);
    model_free(m);
}

TEST(topk_prediction_says_when_after_rotation_is_the_score) {
    tokenizer *tok;
    engine_error e;
    CHECK(tokenizer_new_bytes(&tok, &e) == ENGINE_OK);
    for (int v = 0; v < 2; v++) {
        model *m = make_model(v ? "rope" : "cosine_rope", 256);
        CHECK(m != NULL);
        probe_engine_model pm;
        CHECK(probe_engine_model_init(&pm, m, tok, &e) == ENGINE_OK);
        probe_error perr;
        json_t *res =
            run_on("topk_prediction", &pm, "{\"text\": \"a quick test of the top-k ranking\", \"ks\": [4]}", &perr);
        CHECK_MSG(res != NULL, "%s", perr.message);
        CHECK_EQ_INT(tp_bool(res, "after_rotation_is_the_score"), !v);
        CHECK_EQ_INT(tp_bool(res, "cosine_attention"), !v);
        CHECK_EQ_INT(tp_bool(res, "rope"), 1);
        CHECK_EQ_INT(tp_bool(res, "truncated"), 0);
        const char *note = sum_str(res, "note");
        CHECK(note != NULL);
        if (!v) {
            CHECK(strstr(note, "IS the score") != NULL);
            /* and indeed: recall after rotation is 1 up to float ties */
            CHECK(tp_cell(tp_table(res, "topk"), 0, "recall_after") > 0.99);
        } else {
            CHECK(strstr(note, "genuine predictor") != NULL);
        }
        json_decref(res);
        model_free(m);
    }
    tokenizer_free(tok);
}

int main(void) {
    RUN(loss_per_predictor_next_to_dense);
    RUN(validation_windows_of_a_task_run_without_a_tokenizer);
    RUN(topk_prediction_says_when_after_rotation_is_the_score);
    return test_summary();
}
