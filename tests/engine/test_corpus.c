/* Corpus windows, splits and batch order; u16 files; building from text (the committed small corpus). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/test.h"
#include "corpus.h"

/* tokens[i] = i % 60000, so a token tells where it came from */
static corpus *make_corpus(size_t n) {
    uint16_t *t = malloc(n * sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)(i % 60000);
    corpus *c = NULL;
    corpus_from_tokens(&c, t, n, NULL);
    free(t);
    return c;
}

TEST(windows_and_split_sizes) {
    corpus *c = make_corpus(1001);
    CHECK(c);
    CHECK_EQ_INT(corpus_token_count(c), 1001);
    CHECK_EQ_INT(corpus_max_token(c), 1000);
    corpus_loader *l;
    corpus_loader_config cfg = {
        .seq_len = 10, .batch = 4, .order = CORPUS_ORDER_SEQUENTIAL, .seed = 1, .val_fraction = 0.01};
    CHECK(corpus_loader_new(&l, c, &cfg, NULL) == ENGINE_OK);
    /* (1001-1)/10 = 100 windows; 1% = 1 for validation */
    CHECK_EQ_INT(corpus_loader_windows(l, CORPUS_SPLIT_TRAIN), 99);
    CHECK_EQ_INT(corpus_loader_windows(l, CORPUS_SPLIT_VAL), 1);
    corpus_loader_free(l);
    cfg.val_fraction = 0.001; /* rounds to 0 but stays at least 1 */
    CHECK(corpus_loader_new(&l, c, &cfg, NULL) == ENGINE_OK);
    CHECK_EQ_INT(corpus_loader_windows(l, CORPUS_SPLIT_VAL), 1);
    corpus_loader_free(l);
    cfg.val_fraction = 0.25;
    CHECK(corpus_loader_new(&l, c, &cfg, NULL) == ENGINE_OK);
    CHECK_EQ_INT(corpus_loader_windows(l, CORPUS_SPLIT_VAL), 25);
    CHECK_EQ_INT(corpus_loader_windows(l, CORPUS_SPLIT_TRAIN), 75);
    corpus_loader_free(l);
    cfg.val_fraction = 0;
    CHECK(corpus_loader_new(&l, c, &cfg, NULL) == ENGINE_OK);
    CHECK_EQ_INT(corpus_loader_windows(l, CORPUS_SPLIT_VAL), 0);
    CHECK_EQ_INT(corpus_loader_windows(l, CORPUS_SPLIT_TRAIN), 100);
    int32_t out[4 * 11];
    CHECK(corpus_loader_batch(l, CORPUS_SPLIT_VAL, 0, out, NULL) == ENGINE_ERR_INVALID);
    corpus_loader_free(l);
    corpus_free(c);
}

TEST(sequential_rows_and_wrap) {
    corpus *c = make_corpus(1001);
    CHECK(c);
    corpus_loader *l;
    corpus_loader_config cfg = {
        .seq_len = 10, .batch = 4, .order = CORPUS_ORDER_SEQUENTIAL, .seed = 1, .val_fraction = 0.05};
    CHECK(corpus_loader_new(&l, c, &cfg, NULL) == ENGINE_OK);
    CHECK_EQ_INT(corpus_loader_windows(l, CORPUS_SPLIT_TRAIN), 95);
    int32_t out[4 * 11];
    int ok = 1;
    for (long s = 0; s < 60 && ok; s++) {
        ok = corpus_loader_batch(l, CORPUS_SPLIT_TRAIN, s, out, NULL) == ENGINE_OK;
        for (int b = 0; b < 4 && ok; b++) {
            long w = (s * 4 + b) % 95; /* batch s, row b = window (s·B + b) mod W_train */
            for (int t = 0; t <= 10 && ok; t++) ok = out[b * 11 + t] == w * 10 + t;
        }
    }
    CHECK(ok);
    /* validation: the last 5 windows, sequential and wrapping */
    CHECK(corpus_loader_batch(l, CORPUS_SPLIT_VAL, 1, out, NULL) == ENGINE_OK);
    for (int b = 0; b < 4; b++) CHECK_EQ_INT(out[b * 11], (95 + (4 + b) % 5) * 10);
    CHECK_EQ_INT(out[3 * 11 + 10], 970 + 10); /* row 3 reads val window (4+3) mod 5 = window 97 */
    engine_error err = {0};
    CHECK(corpus_loader_batch(l, CORPUS_SPLIT_TRAIN, -1, out, &err) == ENGINE_ERR_INVALID);
    corpus_loader_free(l);
    corpus_free(c);
}

static void epoch_windows(corpus_loader *l, int B, size_t W, long epoch, long *seen) {
    int32_t out[5 * 9];
    for (size_t k = (size_t)epoch * W; k < (size_t)(epoch + 1) * W; k++) {
        long s = (long)(k / (size_t)B);
        int b = (int)(k % (size_t)B);
        corpus_loader_batch(l, CORPUS_SPLIT_TRAIN, s, out, NULL);
        seen[k - (size_t)epoch * W] = out[b * 9] / 8;
    }
}

TEST(shuffled_is_a_permutation_per_epoch) {
    corpus *c = make_corpus(8 * 200 + 1);
    CHECK(c);
    corpus_loader *l;
    corpus_loader_config cfg = {
        .seq_len = 8, .batch = 5, .order = CORPUS_ORDER_SHUFFLED, .seed = 42, .val_fraction = 0.1};
    CHECK(corpus_loader_new(&l, c, &cfg, NULL) == ENGINE_OK);
    size_t W = corpus_loader_windows(l, CORPUS_SPLIT_TRAIN);
    CHECK_EQ_INT(W, 180);
    long e0[180], e1[180], e0b[180];
    epoch_windows(l, 5, W, 0, e0);
    epoch_windows(l, 5, W, 1, e1);
    epoch_windows(l, 5, W, 0, e0b); /* going back an epoch gives the same order (pure function) */
    int count0[180] = {0}, count1[180] = {0}, identity = 1, same01 = 1;
    for (size_t i = 0; i < W; i++) {
        CHECK(e0[i] >= 0 && e0[i] < 180 && e1[i] >= 0 && e1[i] < 180); /* never a validation window */
        count0[e0[i]]++;
        count1[e1[i]]++;
        identity = identity && e0[i] == (long)i;
        same01 = same01 && e0[i] == e1[i];
        CHECK(e0[i] == e0b[i]);
    }
    for (size_t i = 0; i < W; i++) CHECK(count0[i] == 1 && count1[i] == 1);
    CHECK(!identity);
    CHECK(!same01);
    /* rows inside a window are contiguous tokens */
    int32_t out[5 * 9];
    CHECK(corpus_loader_batch(l, CORPUS_SPLIT_TRAIN, 7, out, NULL) == ENGINE_OK);
    for (int b = 0; b < 5; b++)
        for (int t = 1; t <= 8; t++) CHECK_EQ_INT(out[b * 9 + t], out[b * 9] + t);
    corpus_loader_free(l);
    /* another loader with the same seed agrees; another seed does not */
    long f0[180];
    CHECK(corpus_loader_new(&l, c, &cfg, NULL) == ENGINE_OK);
    epoch_windows(l, 5, W, 0, f0);
    corpus_loader_free(l);
    CHECK(!memcmp(e0, f0, sizeof e0));
    cfg.seed = 43;
    CHECK(corpus_loader_new(&l, c, &cfg, NULL) == ENGINE_OK);
    epoch_windows(l, 5, W, 0, f0);
    corpus_loader_free(l);
    CHECK(memcmp(e0, f0, sizeof e0) != 0);
    corpus_free(c);
}

TEST(shuffled_positions_are_uniform) {
    /* where window 0 lands over 3000 epochs of 10 windows: about 300 times in each slot */
    corpus *c = make_corpus(10 * 4 + 1 + 4);
    CHECK(c);
    corpus_loader *l;
    corpus_loader_config cfg = {.seq_len = 4, .batch = 1, .order = CORPUS_ORDER_SHUFFLED, .seed = 7, .val_fraction = 0};
    CHECK(corpus_loader_new(&l, c, &cfg, NULL) == ENGINE_OK);
    CHECK_EQ_INT(corpus_loader_windows(l, CORPUS_SPLIT_TRAIN), 11);
    int slot[11] = {0};
    int32_t out[5];
    for (long e = 0; e < 3000; e++)
        for (int i = 0; i < 11; i++) {
            CHECK(corpus_loader_batch(l, CORPUS_SPLIT_TRAIN, e * 11 + i, out, NULL) == ENGINE_OK);
            if (out[0] == 0) slot[i]++;
        }
    double chi = 0, expect = 3000.0 / 11;
    for (int i = 0; i < 11; i++) chi += (slot[i] - expect) * (slot[i] - expect) / expect;
    CHECK_MSG(chi < 35.0, "chi-square %.1f over 10 degrees of freedom", chi); /* p < 1e-4 */
    corpus_loader_free(l);
    corpus_free(c);
}

TEST(config_errors) {
    corpus *c = make_corpus(50);
    CHECK(c);
    corpus_loader *l;
    engine_error err = {0};
    corpus_loader_config cfg = {.seq_len = 0, .batch = 1, .order = CORPUS_ORDER_SEQUENTIAL};
    CHECK(corpus_loader_new(&l, c, &cfg, &err) == ENGINE_ERR_INVALID);
    cfg.seq_len = 49;
    CHECK(corpus_loader_new(&l, c, &cfg, &err) == ENGINE_OK); /* exactly one window */
    corpus_loader_free(l);
    cfg.val_fraction = 0.5; /* one window cannot be split */
    CHECK(corpus_loader_new(&l, c, &cfg, &err) == ENGINE_ERR_INVALID);
    CHECK(strstr(err.message, "too few") != NULL);
    cfg.seq_len = 50;
    cfg.val_fraction = 0;
    CHECK(corpus_loader_new(&l, c, &cfg, &err) == ENGINE_ERR_INVALID);
    cfg.seq_len = 4;
    cfg.val_fraction = 1.0;
    CHECK(corpus_loader_new(&l, c, &cfg, &err) == ENGINE_ERR_INVALID);
    cfg.val_fraction = 0;
    cfg.batch = 0;
    CHECK(corpus_loader_new(&l, c, &cfg, &err) == ENGINE_ERR_INVALID);
    corpus_free(c);
    CHECK(corpus_from_tokens(&c, NULL, 0, &err) == ENGINE_ERR_INVALID);
    CHECK(c == NULL);
}

TEST(u16_files) {
    char path[] = "/tmp/attnlab_corpus_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    int32_t ids[] = {0, 1, 258, 50256, 65535};
    CHECK(corpus_write_u16(path, ids, 5, NULL) == ENGINE_OK);
    FILE *f = fopen(path, "rb");
    unsigned char raw[16];
    size_t got = fread(raw, 1, sizeof raw, f);
    fclose(f);
    CHECK_EQ_INT(got, 10);
    CHECK(raw[4] == 0x02 && raw[5] == 0x01); /* 258 little-endian */
    CHECK(raw[6] == 0x50 && raw[7] == 0xC4); /* 50256 = 0xC450 */
    corpus *c;
    CHECK(corpus_open_u16(&c, path, NULL) == ENGINE_OK);
    CHECK_EQ_INT(corpus_token_count(c), 5);
    CHECK_EQ_INT(corpus_tokens(c)[3], 50256);
    CHECK_EQ_INT(corpus_max_token(c), 65535);
    corpus_free(c);
    int32_t bad[] = {1, 70000};
    engine_error err = {0};
    CHECK(corpus_write_u16(path, bad, 2, &err) == ENGINE_ERR_INVALID);
    f = fopen(path, "wb");
    fputs("abc", f);
    fclose(f);
    CHECK(corpus_open_u16(&c, path, &err) == ENGINE_ERR_FORMAT);
    unlink(path);
    CHECK(corpus_open_u16(&c, path, &err) == ENGINE_ERR_IO);
}

TEST(small_corpus_from_text) {
    json_t *meta = json_load_file("corpora/small/meta.json", 0, NULL);
    CHECK_MSG(meta, "corpora/small/meta.json missing (run from the repository root)");
    json_int_t want_gpt2 = json_integer_value(json_object_get(json_object_get(meta, "tokens"), "gpt2"));
    json_int_t want_bytes = json_integer_value(json_object_get(json_object_get(meta, "tokens"), "bytes"));
    json_decref(meta);
    tokenizer *tok;
    engine_error err = {0};
    CHECK_MSG(tokenizer_load_gpt2_default(&tok, &err) == ENGINE_OK, "%s", err.message);
    corpus *c;
    engine_status st = corpus_from_text_file(&c, "corpora/small/text.txt", tok, &err);
    tokenizer_free(tok);
    CHECK_MSG(st == ENGINE_OK, "%s", err.message);
    CHECK_EQ_INT(corpus_token_count(c), want_gpt2);
    CHECK(corpus_max_token(c) < 50257);
    corpus_loader *l;
    corpus_loader_config cfg = {
        .seq_len = 128, .batch = 8, .order = CORPUS_ORDER_SHUFFLED, .seed = 1, .val_fraction = 0.01};
    CHECK(corpus_loader_new(&l, c, &cfg, NULL) == ENGINE_OK);
    CHECK_EQ_INT(corpus_loader_windows(l, CORPUS_SPLIT_TRAIN) + corpus_loader_windows(l, CORPUS_SPLIT_VAL),
                 (want_gpt2 - 1) / 128);
    corpus_loader_free(l);
    corpus_free(c);
    CHECK(tokenizer_new_bytes(&tok, NULL) == ENGINE_OK);
    st = corpus_from_text_file(&c, "corpora/small/text.txt", tok, &err);
    tokenizer_free(tok);
    CHECK(st == ENGINE_OK);
    CHECK_EQ_INT(corpus_token_count(c), want_bytes);
    CHECK(corpus_max_token(c) < 256);
    corpus_free(c);
    CHECK(corpus_from_text_file(&c, "corpora/small/nonexistent.txt", NULL, &err) == ENGINE_ERR_IO);
}

int main(void) {
    RUN(windows_and_split_sizes);
    RUN(sequential_rows_and_wrap);
    RUN(shuffled_is_a_permutation_per_epoch);
    RUN(shuffled_positions_are_uniform);
    RUN(config_errors);
    RUN(u16_files);
    RUN(small_corpus_from_text);
    return test_summary();
}
