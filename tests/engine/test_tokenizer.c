/* GPT-2 BPE against the npm package gpt-3-encoder (run live through node on the same strings),
 * plus invalid UTF-8, decoding, the byte tokenizer, threads and load errors. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/test.h"
#include "tokenizer.h"

static tokenizer *gpt2;

static const char *tricky[] = {
    "Hello world",
    "Hello, World! HELLO hello hElLo",
    "  leading spaces and trailing   ",
    "one  two   three    four\tfive\t\tsix",
    "line\nbreaks\n\nand\r\nwindows\r\n\r\nend\n",
    "\n\n\n",
    "   ",
    " ",
    "",
    "it's I'm you're we've they'll he'd don't can't 'S 'T ''s '''ll",
    "IT'S SHOUTING'RE",
    "1234567890 3.14159 1,000,000 0x1F 2nd 10th 007",
    "caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 Z\xc3\xbcrich \xc3\x85ngstr\xc3\xb6m stra\xc3\x9f"
    "e",
    "cafe\xcc\x81 (combining accent)",
    "\xe4\xb8\xad\xe6\x96\x87\xe6\xb5\x8b\xe8\xaf\x95 "
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
    "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xed\x85\x8c\xec\x8a\xa4\xed\x8a\xb8\xec\x9e\x85\xeb\x8b\x88\xeb\x8b\xa4",
    "emoji \xf0\x9f\x98\x80\xf0\x9f\x98\x83 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd family "
    "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",
    "int main(void) {\n    return printf(\"%d\\n\", x[i] + 1);\n}\n",
    "def f(x):\n\tif x:\n\t\treturn {'a': [1, 2]}  # comment\n",
    "<|endoftext|> is plain text<|endoftext|>",
    "\xc2\xa0nbsp\xc2\xa0\xc2\xa0two \xe3\x80\x80ideographic\xe2\x80\xa8ls\xe2\x80\xa9ps\xef\xbb\xbf"
    "bom",
    "nel\xc2\x85"
    "x fs\x1c"
    "y vt\x0bz ff\x0cw",
    "\",\",\"\"],\"x\",[\"a\"],[1],\"],[\" ',' '\",'",
    "{\"key\": \"value\", \"list\": [\"a\",\"b\"], \"n\": 1},",
    "\xe2\x85\xab roman \xc2\xbd half \xd9\xa3 arabic \xf0\x9d\x94\x98 fraktur \xef\xac\x81 ligature",
    "----------====================**********..........!!!!!!",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "https://example.com/path?query=1&b=2#frag mail@example.org",
    "tab\t \t mixed \t\n \n  \n",
};

static const char *pieces[] = {
    "a",
    "Z",
    "hello",
    "The",
    " ",
    "  ",
    "   ",
    "\n",
    "\r\n",
    "\t",
    "\x0b",
    "\x0c",
    "\xc2\xa0",
    "\xe3\x80\x80",
    "\xe2\x80\xa8",
    "\xef\xbb\xbf",
    "\xc2\x85",
    "\x1c",
    "'",
    "'s",
    "'t",
    "'re",
    "'ll",
    "'S",
    "1",
    "42",
    "\xc2\xbd",
    "\xe2\x85\xab",
    "\xd9\xa3",
    "\xe4\xb8\xad",
    "\xe6\x96\x87",
    "\xed\x95\x9c",
    "\xf0\x9f\x98\x80",
    "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd",
    "\xcc\x81",
    ",",
    "\"",
    ".",
    "!",
    "(",
    ")",
    "{",
    "}",
    "-",
    "_",
    "#",
    "<|endoftext|>",
    "\x7f",
    "\xf0\x9d\x94\x98",
    "\xef\xac\x81",
    "\xc3\xa9",
    "\xc3\x9f",
    "ing",
    "tion",
    "[",
    "]",
    "\\",
    "/",
    "0",
    "x",
};
#define N_PIECES (sizeof pieces / sizeof pieces[0])

static uint64_t rng_state = 0x1234567u;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Runs the package on every string of arr (a JSON array); returns a JSON array of id arrays. */
static json_t *node_encode(json_t *arr) {
    char in[] = "/tmp/attnlab_tok_inXXXXXX", outp[] = "/tmp/attnlab_tok_outXXXXXX";
    int fi = mkstemp(in), fo = mkstemp(outp);
    if (fi < 0 || fo < 0) return NULL;
    close(fo);
    FILE *f = fdopen(fi, "w");
    json_dumpf(arr, f, 0);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "node -e 'const e=require(process.cwd()+\"/node_modules/gpt-3-encoder\");"
             "const fs=require(\"fs\");const a=JSON.parse(fs.readFileSync(process.argv[1],\"utf8\"));"
             "fs.writeFileSync(process.argv[2],JSON.stringify(a.map(s=>e.encode(s))))' %s %s",
             in, outp);
    int rc = system(cmd);
    json_t *res = rc == 0 ? json_load_file(outp, 0, NULL) : NULL;
    unlink(in);
    unlink(outp);
    return res;
}

/* Compares our ids with the package's for every string; reports the first mismatch. */
static int compare_with_node(json_t *strings, char *why, size_t why_cap) {
    json_t *expect = node_encode(strings);
    if (!expect || json_array_size(expect) != json_array_size(strings)) {
        snprintf(why, why_cap, "node with gpt-3-encoder did not run");
        json_decref(expect);
        return 0;
    }
    int ok = 1;
    for (size_t i = 0; i < json_array_size(strings) && ok; i++) {
        json_t *s = json_array_get(strings, i);
        int32_t *ids;
        size_t n;
        if (tokenizer_encode(gpt2, json_string_value(s), json_string_length(s), &ids, &n, NULL) != ENGINE_OK) {
            snprintf(why, why_cap, "encode failed on string %zu", i);
            ok = 0;
            break;
        }
        json_t *e = json_array_get(expect, i);
        if (json_array_size(e) != n) ok = 0;
        for (size_t k = 0; ok && k < n; k++)
            if (json_integer_value(json_array_get(e, k)) != ids[k]) ok = 0;
        if (!ok) {
            char *js = json_dumps(s, JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
            snprintf(why, why_cap, "string %zu %.120s: %zu ids vs %zu expected", i, js ? js : "?", n,
                     json_array_size(e));
            free(js);
        }
        free(ids);
    }
    json_decref(expect);
    return ok;
}

TEST(vocab_and_pieces) {
    CHECK_EQ_INT(tokenizer_vocab_size(gpt2), 50257);
    size_t len;
    const char *p = tokenizer_piece(gpt2, TOKENIZER_GPT2_EOT, &len);
    CHECK(p && len == 13 && !memcmp(p, "<|endoftext|>", 13));
    p = tokenizer_piece(gpt2, 11, &len); /* "," */
    CHECK(p && len == 1 && p[0] == ',');
    p = tokenizer_piece(gpt2, 995, &len); /* " world" */
    CHECK(p && len == 6 && !memcmp(p, " world", 6));
    CHECK(tokenizer_piece(gpt2, 50257, &len) == NULL);
    CHECK(tokenizer_piece(gpt2, -1, &len) == NULL);
    char buf[64];
    CHECK_EQ_INT(tokenizer_piece_display(gpt2, 995, buf, sizeof buf), 6);
    CHECK(!strcmp(buf, " world"));
    /* 171 is the lone byte 0xEF: not valid UTF-8 on its own, so it is shown escaped */
    CHECK(tokenizer_piece(gpt2, 171, &len) && len == 1);
    CHECK_EQ_INT(tokenizer_piece_display(gpt2, 171, buf, sizeof buf), 4);
    CHECK(!strcmp(buf, "\\xEF"));
    CHECK_EQ_INT(tokenizer_piece_display(gpt2, 995, buf, 4), 6); /* truncated, length still reported */
    CHECK(!strcmp(buf, " wo"));
}

TEST(known_ids) {
    int32_t *ids;
    size_t n;
    CHECK(tokenizer_encode(gpt2, "Hello world", 11, &ids, &n, NULL) == ENGINE_OK);
    int ok = n == 2 && ids[0] == 15496 && ids[1] == 995;
    free(ids);
    CHECK(ok);
    /* "<|endoftext|>" in text is plain text, never the special id */
    CHECK(tokenizer_encode(gpt2, "<|endoftext|>", 13, &ids, &n, NULL) == ENGINE_OK);
    ok = n > 1;
    for (size_t i = 0; i < n; i++) ok = ok && ids[i] != TOKENIZER_GPT2_EOT;
    free(ids);
    CHECK(ok);
    CHECK(tokenizer_encode(gpt2, "", 0, &ids, &n, NULL) == ENGINE_OK);
    free(ids);
    CHECK_EQ_INT(n, 0);
}

TEST(matches_npm_on_tricky_strings) {
    json_t *arr = json_array();
    for (size_t i = 0; i < sizeof tricky / sizeof tricky[0]; i++) json_array_append_new(arr, json_string(tricky[i]));
    char why[256] = "";
    int ok = compare_with_node(arr, why, sizeof why);
    json_decref(arr);
    CHECK_MSG(ok, "%s", why);
}

TEST(matches_npm_on_random_mixes) {
    json_t *arr = json_array();
    char buf[2048];
    for (int s = 0; s < 600; s++) {
        size_t o = 0;
        int k = 1 + (int)(rnd() % 24);
        for (int i = 0; i < k; i++) {
            const char *p = pieces[rnd() % N_PIECES];
            size_t l = strlen(p);
            if (o + l >= sizeof buf) break;
            memcpy(buf + o, p, l);
            o += l;
        }
        json_array_append_new(arr, json_stringn(buf, o));
    }
    char why[256] = "";
    int ok = compare_with_node(arr, why, sizeof why);
    json_decref(arr);
    CHECK_MSG(ok, "%s", why);
}

/* Pre-tokens longer than 64 bytes take the heap BPE: long letter runs, CJK without spaces,
 * punctuation runs full of the quote/comma pairs the package ranks by its "left,right" key. */
TEST(matches_npm_on_long_words) {
    static const char *cjk[] = {"\xe4\xb8\xad", "\xe6\x96\x87", "\xe7\x9a\x84",
                                "\xe6\x98\xaf", "\xe4\xba\xba", "\xe5\x9c\xa8"};
    static const char *punct[] = {"\"", ",", "]", "[", "}", ")", ".", "'", ":", "-"};
    json_t *arr = json_array();
    char buf[8192];
    for (int s = 0; s < 40; s++) { /* the package is slow on long words: keep them under 700 bytes */
        size_t o = 0, len = 65 + rnd() % 600;
        int kind = s % 4;
        while (o < len) {
            if (kind == 0)
                buf[o++] = (char)('a' + rnd() % 26);
            else if (kind == 1)
                buf[o++] = "etaoinshrd"[rnd() % 10];
            else if (kind == 2) {
                memcpy(buf + o, cjk[rnd() % 6], 3);
                o += 3;
            } else
                buf[o++] = punct[rnd() % 10][0];
        }
        json_array_append_new(arr, json_stringn(buf, o));
    }
    char why[256] = "";
    int ok = compare_with_node(arr, why, sizeof why);
    json_decref(arr);
    CHECK_MSG(ok, "%s", why);
}

/* A long text with many repeats exercises the memo; the same text split across threads too. */
static char *make_long_text(size_t *len) {
    size_t cap = 400000, o = 0;
    char *t = malloc(cap);
    if (!t) return NULL;
    while (o + 64 < cap) {
        const char *p = pieces[rnd() % N_PIECES];
        size_t l = strlen(p);
        memcpy(t + o, p, l);
        o += l;
        if (rnd() % 3 == 0) t[o++] = ' ';
    }
    *len = o;
    return t;
}

TEST(long_text_matches_npm_and_threads_agree) {
    size_t len;
    char *text = make_long_text(&len);
    CHECK(text);
    /* The package's encode is quadratic in its output, so it gets the text in pieces cut at
     * safe points; the pieces' ids joined must equal ours for the whole text. */
    json_t *arr = json_array();
    for (size_t from = 0; from < len;) {
        size_t to = tokenizer_safe_cut(text, len, from + 2000);
        json_array_append_new(arr, json_stringn(text + from, to - from));
        from = to;
    }
    json_t *expect = node_encode(arr);
    json_decref(arr);
    int32_t *w;
    size_t nw;
    CHECK(tokenizer_encode(gpt2, text, len, &w, &nw, NULL) == ENGINE_OK);
    size_t k = 0;
    int ok = expect != NULL;
    for (size_t i = 0; ok && i < json_array_size(expect); i++) {
        json_t *e = json_array_get(expect, i);
        for (size_t j = 0; ok && j < json_array_size(e); j++, k++)
            ok = k < nw && json_integer_value(json_array_get(e, j)) == w[k];
    }
    ok = ok && k == nw;
    char why[64];
    snprintf(why, sizeof why, "differs from the package near id %zu of %zu", k, nw);
    free(w);
    json_decref(expect);
    int32_t *a, *b;
    size_t na, nb;
    int ok2 = tokenizer_encode(gpt2, text, len, &a, &na, NULL) == ENGINE_OK;
    for (int th = 2; ok2 && th <= 5; th += 3) {
        ok2 = tokenizer_encode_parallel(gpt2, text, len, th, &b, &nb, NULL) == ENGINE_OK;
        ok2 = ok2 && na == nb && !memcmp(a, b, na * sizeof *a);
        free(b);
    }
    free(a);
    free(text);
    CHECK_MSG(ok, "%s", why);
    CHECK(ok2);
}

TEST(safe_cut_rule) {
    const char *s = "ab  cd\xe3\x80\x80 ef";
    size_t n = strlen(s);
    CHECK_EQ_INT(tokenizer_safe_cut(s, n, 0), 2); /* after "ab" */
    CHECK_EQ_INT(tokenizer_safe_cut(s, n, 3), n); /* "cd" is followed by U+3000 then ' ': no cut */
    CHECK_EQ_INT(tokenizer_safe_cut("abc", 3, 0), 3);
}

static int encode_eq(const char *text, size_t len, const int32_t *want, size_t nwant) {
    int32_t *ids;
    size_t n;
    if (tokenizer_encode(gpt2, text, len, &ids, &n, NULL) != ENGINE_OK) return 0;
    int ok = n == nwant && !memcmp(ids, want, n * sizeof *ids);
    free(ids);
    return ok;
}

static int32_t byte_token(unsigned char b) {
    int32_t *ids;
    size_t n;
    char c = (char)b;
    /* a lone continuation/invalid byte encodes to its own byte token */
    if (tokenizer_encode(gpt2, &c, 1, &ids, &n, NULL) != ENGINE_OK || n != 1) return -1;
    int32_t id = ids[0];
    free(ids);
    return id;
}

TEST(invalid_utf8_is_bytes) {
    int32_t a, b, ff;
    {
        int32_t *ids;
        size_t n;
        CHECK(tokenizer_encode(gpt2, "a", 1, &ids, &n, NULL) == ENGINE_OK && n == 1);
        a = ids[0];
        free(ids);
        CHECK(tokenizer_encode(gpt2, "b", 1, &ids, &n, NULL) == ENGINE_OK && n == 1);
        b = ids[0];
        free(ids);
    }
    ff = byte_token(0xFF);
    CHECK(ff >= 0 && ff != a && ff != b);
    size_t len;
    const char *p = tokenizer_piece(gpt2, ff, &len);
    CHECK(p && len == 1 && (unsigned char)p[0] == 0xFF);
    int32_t want[] = {a, ff, b};
    CHECK(encode_eq("a\xff"
                    "b",
                    3, want, 3));
    /* a truncated 3-byte sequence: two byte tokens */
    int32_t e4 = byte_token(0xE4), b8 = byte_token(0xB8);
    int32_t want2[] = {a, e4, b8, b};
    CHECK(encode_eq("a\xe4\xb8"
                    "b",
                    4, want2, 4));
    /* overlong "/" and a UTF-16 surrogate are invalid too */
    int32_t want3[] = {byte_token(0xC0), byte_token(0xAF)};
    CHECK(encode_eq("\xc0\xaf", 2, want3, 2));
    int32_t want4[] = {byte_token(0xED), byte_token(0xA0), byte_token(0x80)};
    CHECK(encode_eq("\xed\xa0\x80", 3, want4, 3));
}

TEST(roundtrip_random_bytes) {
    char buf[512];
    for (int r = 0; r < 300; r++) {
        size_t n = rnd() % sizeof buf;
        for (size_t i = 0; i < n; i++) {
            uint32_t x = rnd();
            buf[i] = (char)(x % 4 == 0 ? ' ' : x % 4 == 1 ? 'a' + (x >> 8) % 26 : (x >> 8));
        }
        int32_t *ids;
        size_t k;
        CHECK(tokenizer_encode(gpt2, buf, n, &ids, &k, NULL) == ENGINE_OK);
        char *back;
        size_t blen;
        engine_status st = tokenizer_decode(gpt2, ids, k, &back, &blen, NULL);
        free(ids);
        CHECK(st == ENGINE_OK);
        int same = blen == n && !memcmp(back, buf, n);
        free(back);
        CHECK_MSG(same, "round trip %d differs", r);
    }
}

TEST(decode_rejects_bad_ids) {
    int32_t ids[] = {15496, 50257};
    char *t;
    size_t n;
    engine_error err = {0};
    CHECK(tokenizer_decode(gpt2, ids, 2, &t, &n, &err) == ENGINE_ERR_INVALID);
    CHECK(strstr(err.message, "50257") != NULL);
    CHECK(tokenizer_decode(gpt2, ids, 1, &t, &n, &err) == ENGINE_OK);
    int ok = n == 5 && !strcmp(t, "Hello");
    free(t);
    CHECK(ok);
}

TEST(byte_tokenizer) {
    tokenizer *bt;
    CHECK(tokenizer_new_bytes(&bt, NULL) == ENGINE_OK);
    CHECK_EQ_INT(tokenizer_vocab_size(bt), 256);
    CHECK(!strcmp(tokenizer_name(bt), "bytes"));
    const char s[] = "h\xc3\xa9\xff\x00z";
    int32_t *ids;
    size_t n;
    CHECK(tokenizer_encode(bt, s, 6, &ids, &n, NULL) == ENGINE_OK);
    int ok = n == 6 && ids[0] == 'h' && ids[1] == 0xC3 && ids[3] == 0xFF && ids[4] == 0 && ids[5] == 'z';
    char *back;
    size_t bl;
    ok = ok && tokenizer_decode(bt, ids, n, &back, &bl, NULL) == ENGINE_OK && bl == 6 && !memcmp(back, s, 6);
    if (ok) free(back);
    free(ids);
    tokenizer_free(bt);
    CHECK(ok);
}

TEST(load_errors) {
    tokenizer *t;
    engine_error err = {0};
    CHECK(tokenizer_load_gpt2(&t, "/nonexistent/encoder.json", "/nonexistent/vocab.bpe", &err) == ENGINE_ERR_IO);
    CHECK(t == NULL);
    char p[] = "/tmp/attnlab_tok_badXXXXXX";
    int fd = mkstemp(p);
    CHECK(fd >= 0);
    CHECK(write(fd, "{\"a\": 0", 7) == 7);
    close(fd);
    CHECK(tokenizer_load_gpt2(&t, p, p, &err) == ENGINE_ERR_FORMAT);
    unlink(p);
    CHECK(tokenizer_new_by_name(&t, "bpe-xl", &err) == ENGINE_ERR_INVALID);
}

int main(void) {
    engine_error err = {0};
    if (tokenizer_load_gpt2_default(&gpt2, &err) != ENGINE_OK) {
        printf("FAIL load_gpt2: %s\n", err.message);
        return 1;
    }
    RUN(vocab_and_pieces);
    RUN(known_ids);
    RUN(matches_npm_on_tricky_strings);
    RUN(matches_npm_on_random_mixes);
    RUN(matches_npm_on_long_words);
    RUN(long_text_matches_npm_and_threads_agree);
    RUN(safe_cut_rule);
    RUN(invalid_utf8_is_bytes);
    RUN(roundtrip_random_bytes);
    RUN(decode_rejects_bad_ids);
    RUN(byte_tokenizer);
    RUN(load_errors);
    tokenizer_free(gpt2);
    return test_summary();
}
