/* The tokenizers' round-trip property: for any bytes, GPT-2 BPE and the byte tokenizer give ids
 * inside the vocabulary that decode to exactly the input; every id has a piece and a display
 * label that is valid UTF-8; the parallel encoder gives the same ids as the sequential one. The
 * first input byte picks the parallel encoder's thread count. GPT-2 needs node_modules (found as
 * the server finds it); without it only the byte tokenizer is checked. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tokenizer *gpt2, *bytes;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    engine_error err = {0};
    if (tokenizer_load_gpt2_default(&gpt2, &err) != ENGINE_OK) {
        fprintf(stderr, "fuzz_tokenizer: GPT-2 unavailable (%s): checking bytes only\n", err.message);
        gpt2 = NULL;
    }
    if (tokenizer_new_bytes(&bytes, &err) != ENGINE_OK) abort();
    return 0;
}

static void round_trip(const tokenizer *t, const char *text, size_t len, int threads) {
    engine_error err = {0};
    int32_t *ids = NULL, *pids = NULL;
    size_t n = 0, pn = 0;
    if (tokenizer_encode(t, text, len, &ids, &n, &err) != ENGINE_OK) abort();
    int vocab = tokenizer_vocab_size(t);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab) abort();
        size_t pl = 0;
        if (!tokenizer_piece(t, ids[i], &pl) || pl == 0) abort();
        char label[512], clean[2048];
        int need = tokenizer_piece_display(t, ids[i], label, sizeof label);
        if (need < 0) abort();
        if ((size_t)need < sizeof label && strcmp(http_utf8_clean(label, clean, sizeof clean), label) != 0) abort();
    }
    char *back = NULL;
    size_t back_len = 0;
    if (tokenizer_decode(t, ids, n, &back, &back_len, &err) != ENGINE_OK) abort();
    if (back_len != len || memcmp(back, text, len) != 0) {
        fprintf(stderr, "fuzz_tokenizer: %s: decode(encode(x)) != x (%zu bytes in, %zu out)\n", tokenizer_name(t), len,
                back_len);
        abort();
    }
    if (tokenizer_encode_parallel(t, text, len, threads, &pids, &pn, &err) != ENGINE_OK) abort();
    if (pn != n || memcmp(pids, ids, n * sizeof *ids) != 0) {
        fprintf(stderr, "fuzz_tokenizer: %s: parallel encoding differs\n", tokenizer_name(t));
        abort();
    }
    free(back);
    free(ids);
    free(pids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 16384) return -1;
    int threads = 1 + data[0] % 4;
    round_trip(bytes, (const char *)data + 1, size - 1, threads);
    if (gpt2) round_trip(gpt2, (const char *)data + 1, size - 1, threads);
    return 0;
}
