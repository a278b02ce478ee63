/* Tokenizer throughput. usage: bench_tok DOCS OUT.u16
 * DOCS holds NUL-terminated documents (as scripts/corpus/extract.py writes them). Encodes every
 * document with GPT-2 on one thread (one fresh memo per run, so its warm-up is counted), three
 * runs, and writes the ids (each document followed by <|endoftext|>) to OUT.u16 for comparison
 * with the reference encoder. Then encodes the documents joined by blank lines as one text, on
 * one thread and through tokenizer_encode_parallel on 2 threads, and checks both agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corpus.h"
#include "tokenizer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        *len = (size_t)n;
    }
    return b;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: bench_tok DOCS OUT.u16\n");
        return 2;
    }
    size_t len;
    char *text = read_all(argv[1], &len);
    if (!text) {
        perror(argv[1]);
        return 1;
    }
    tokenizer *tok;
    engine_error err = {0};
    double t0 = now();
    if (tokenizer_load_gpt2_default(&tok, &err) != ENGINE_OK) {
        fprintf(stderr, "bench_tok: %s\n", err.message);
        return 1;
    }
    printf("load: %.0f ms\n", 1e3 * (now() - t0));
    size_t n_docs = 0;
    for (size_t i = 0; i < len; i++) n_docs += text[i] == 0;
    tokenizer_ids ids = {0};
    double best = 1e30;
    for (int run = 0; run < 3; run++) {
        ids.n = 0;
        tokenizer_cache *c = tokenizer_cache_new();
        if (!c) return 1;
        t0 = now();
        for (size_t i = 0, start = 0; i < len; i++)
            if (text[i] == 0) {
                if (tokenizer_encode_append(tok, c, text + start, i - start, &ids, &err) != ENGINE_OK) {
                    fprintf(stderr, "bench_tok: %s\n", err.message);
                    return 1;
                }
                if (ids.n == ids.cap) {
                    int32_t *p = realloc(ids.ids, (ids.cap * 2 + 16) * sizeof *p);
                    if (!p) return 1;
                    ids.ids = p;
                    ids.cap = ids.cap * 2 + 16;
                }
                ids.ids[ids.n++] = TOKENIZER_GPT2_EOT;
                start = i + 1;
            }
        double dt = now() - t0;
        tokenizer_cache_free(c);
        if (dt < best) best = dt;
        printf("one thread, run %d: %zu documents, %.1f MB, %zu tokens in %.3f s = %.2fM tokens/s\n", run + 1, n_docs,
               len / 1e6, ids.n, dt, ids.n / dt / 1e6);
    }
    printf("RESULT tokens_per_s_1thread %.0f\n", ids.n / best);
    if (corpus_write_u16(argv[2], ids.ids, ids.n, &err) != ENGINE_OK) {
        fprintf(stderr, "bench_tok: %s\n", err.message);
        return 1;
    }
    /* one long text: the documents joined by blank lines */
    for (size_t i = 0; i < len; i++)
        if (text[i] == 0) text[i] = '\n';
    int32_t *a, *b;
    size_t na, nb;
    t0 = now();
    if (tokenizer_encode(tok, text, len, &a, &na, &err) != ENGINE_OK) return 1;
    double d1 = now() - t0;
    t0 = now();
    if (tokenizer_encode_parallel(tok, text, len, 2, &b, &nb, &err) != ENGINE_OK) return 1;
    double d2 = now() - t0;
    int same = na == nb && !memcmp(a, b, na * sizeof *a);
    printf("one text: 1 thread %.2fM tokens/s, 2 threads %.2fM tokens/s (x%.2f), ids %s\n", na / d1 / 1e6,
           nb / d2 / 1e6, d1 / d2, same ? "identical" : "DIFFER");
    free(a);
    free(b);
    free(ids.ids);
    free(text);
    tokenizer_free(tok);
    return same ? 0 : 1;
}
