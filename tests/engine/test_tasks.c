/* Synthetic task corpora (tasks.h): tiny instances written by hand with their answers and
 * labels, every generated instance re-solved by an independent parser in this file, window
 * alignment through the corpus loader, determinism, bounds, and the accuracy metric on
 * hand-made predictions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/test.h"
#include "corpus.h"
#include "tasks.h"

static int kind(const char *name) { return tasks_kind_index(name); }

#define CHECK_ARR(got, want, n)                                                                                        \
    do {                                                                                                               \
        for (int i_ = 0; i_ < (n); i_++)                                                                               \
            CHECK_MSG((got)[i_] == (want)[i_], "%s[%d] = %d, want %d", #got, i_, (int)(got)[i_], (int)(want)[i_]);     \
    } while (0)

TEST(table_lists_the_four_kinds_with_bounded_params) {
    static const char *const names[] = {"copy_offset", "induction", "associative_recall", "relative_order"};
    CHECK_EQ_INT(tasks_kind_count(), 4);
    for (int i = 0; i < 4; i++) {
        const tasks_kind *k = tasks_kind_at(i);
        CHECK(k && !strcmp(k->name, names[i]) && tasks_kind_index(names[i]) == i);
        CHECK(k->summary && strlen(k->summary) > 10 && k->n_params >= 2 && k->n_params <= TASKS_MAX_PARAMS);
        for (int j = 0; j < k->n_params; j++) {
            const tasks_param *p = &k->params[j];
            CHECK(p->min <= p->def && p->def <= p->max && p->help);
        }
        tasks_config c;
        tasks_config_defaults(&c, i);
        engine_error err;
        CHECK_MSG(tasks_config_validate(&c, &err) == ENGINE_OK, "%s: %s", names[i], err.message);
    }
    CHECK(tasks_kind_at(4) == NULL && tasks_kind_at(-1) == NULL);
    CHECK(tasks_kind_index("nope") == -1 && tasks_kind_index(NULL) == -1);
}

TEST(hand_built_instances_have_the_right_answers_and_labels) {
    tasks_config c;
    engine_error err;
    uint16_t tok[64];
    uint8_t lab[64];
    int n;
    /* copy_offset, offsets {1, 3}: 3 back from QUERY (at index 6) is index 3, token 32 */
    tasks_config_defaults(&c, kind("copy_offset"));
    static const int offs[] = {1, 3};
    CHECK(tasks_config_set_offsets(&c, offs, 2, &err) == ENGINE_OK);
    static const uint16_t s1[] = {30, 31, 32, 33, 34};
    tasks_instance in = {.offset_index = 1, .len = 5, .seq = s1};
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_OK);
    static const uint16_t w1[] = {TASKS_TAG_COPY + 1, 30, 31, 32, 33, 34, TASKS_QUERY, 32};
    static const uint8_t l1[] = {0, 0, 0, 0, 0, 0, 0, 2};
    CHECK_EQ_INT(n, 8);
    CHECK_ARR(tok, w1, 8);
    CHECK_ARR(lab, l1, 8);
    in.offset_index = 0; /* k = 1: the token just before QUERY */
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_OK);
    CHECK(tok[0] == TASKS_TAG_COPY && tok[7] == 34 && lab[7] == 1);
    in.len = 2, in.offset_index = 1;
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_ERR_INVALID); /* 3 back of 2 */
    in.len = 5, in.offset_index = 2;
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_ERR_INVALID);
    in.offset_index = 0;
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 7, &n, &err) == ENGINE_ERR_INVALID); /* no room */
    char names[TASKS_MAX_BUCKETS][12];
    CHECK_EQ_INT(tasks_buckets(&c, names), 2);
    CHECK(!strcmp(names[0], "k1") && !strcmp(names[1], "k3"));

    /* induction, L = 3: distance 4; lengths 2..5 give distances 3..6, buckets d2 [2,4), d4 [4,8) */
    tasks_config_defaults(&c, kind("induction"));
    CHECK(tasks_config_set(&c, "len_min", 2, &err) == ENGINE_OK &&
          tasks_config_set(&c, "len_max", 5, &err) == ENGINE_OK);
    CHECK_EQ_INT(tasks_buckets(&c, names), 2);
    CHECK(!strcmp(names[0], "d2") && !strcmp(names[1], "d4"));
    static const uint16_t s2[] = {40, 41, 42};
    in = (tasks_instance){.len = 3, .seq = s2};
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_OK);
    static const uint16_t w2[] = {TASKS_TAG_INDUCTION, 40, 41, 42, TASKS_REPEAT, 40, 41, 42};
    static const uint8_t l2[] = {0, 0, 0, 0, 0, 2, 2, 2};
    CHECK_EQ_INT(n, 8);
    CHECK_ARR(tok, w2, 8);
    CHECK_ARR(lab, l2, 8);
    in.len = 2; /* distance 3: bucket d2 */
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_OK);
    CHECK(n == 6 && lab[5] == 1 && lab[4] == 1 && lab[3] == 0);

    /* associative_recall, 3 pairs, asking for pair 1: distance 2(3-1)+1 = 5 (bucket d4 of d2,d4,d8) */
    tasks_config_defaults(&c, kind("associative_recall"));
    CHECK(tasks_config_set(&c, "pairs_min", 1, &err) == ENGINE_OK &&
          tasks_config_set(&c, "pairs_max", 4, &err) == ENGINE_OK);
    CHECK_EQ_INT(tasks_buckets(&c, names), 3);
    CHECK(!strcmp(names[2], "d8"));
    static const uint16_t keys[] = {30, 31, 32}, vals[] = {90, 91, 92};
    in = (tasks_instance){.len = 3, .seq = keys, .values = vals, .query = 1};
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_OK);
    static const uint16_t w3[] = {TASKS_TAG_ASSOC, 30, 90, 31, 91, 32, 92, TASKS_QUERY, 31, 91};
    static const uint8_t l3[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    CHECK_EQ_INT(n, 10);
    CHECK_ARR(tok, w3, 10);
    CHECK_ARR(lab, l3, 10);
    in.query = 2; /* distance 3 */
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_OK);
    CHECK(tok[8] == 32 && tok[9] == 92 && lab[9] == 1);
    in.query = 3;
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_ERR_INVALID);

    /* relative_order: marked 120 at 2 and 121 at 5, distance 3 (bucket d2 of d1,d2,d4,d8) */
    tasks_config_defaults(&c, kind("relative_order"));
    CHECK(tasks_config_set(&c, "len_min", 4, &err) == ENGINE_OK &&
          tasks_config_set(&c, "len_max", 10, &err) == ENGINE_OK);
    CHECK(tasks_config_set(&c, "dist_max", 8, &err) == ENGINE_OK);
    CHECK_EQ_INT(tasks_buckets(&c, names), 4);
    static const uint16_t s4[] = {30, 31, 120, 33, 34, 121, 36};
    in = (tasks_instance){.len = 7, .seq = s4, .pos_a = 2, .pos_b = 5};
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_OK);
    static const uint16_t w4[] = {TASKS_TAG_ORDER, 30, 31, 120, 33, 34, 121, 36, TASKS_QUERY, 120};
    static const uint8_t l4[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    CHECK_EQ_INT(n, 10);
    CHECK_ARR(tok, w4, 10);
    CHECK_ARR(lab, l4, 10);
    in.pos_a = 5, in.pos_b = 2;
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_ERR_INVALID);
    static const uint16_t big[] = {30, 31, 200, 33};
    in = (tasks_instance){.len = 4, .seq = big, .pos_a = 0, .pos_b = 1};
    CHECK(tasks_emit_instance(&c, &in, tok, lab, 64, &n, &err) == ENGINE_ERR_INVALID); /* 200 >= vocab 128 */
    CHECK(strstr(err.message, "vocab") != NULL);
}

/* ---- an independent solver for generated blocks ---- */

static int floor_log2(int x) {
    int b = -1;
    while (x) x >>= 1, b++;
    return b;
}

/* 1 + the bucket this test expects for distance d when the kind's smallest distance is dmin. */
static int want_label(int d, int dmin) { return 1 + floor_log2(d) - floor_log2(dmin); }

typedef struct {
    long answers, instances;
    long offset_seen[TASKS_MAX_OFFSETS];
    long label_seen[TASKS_MAX_BUCKETS + 1];
    long first_is_smaller; /* relative_order: the answer is the smaller of the two marked ids */
} solve_stats;

/* Parses every block of tc and checks each answer and label; returns 0 or the failing token index + 1. */
static size_t solve(const tasks_corpus *tc, solve_stats *st, int32_t *oracle) {
    const tasks_config *c = &tc->cfg;
    const int T = c->seq_len, V = c->vocab, nc = V - TASKS_FIRST_CONTENT, nm = nc / 4 < 2 ? 2 : nc / 4;
    const uint16_t *x = tc->tokens;
    const uint8_t *lab = tc->labels;
    memset(st, 0, sizeof *st);
    for (long w = 0; w < c->windows; w++) {
        size_t b0 = (size_t)w * T, i = b0;
        if (x[i] != TASKS_BOS || lab[i]) return i + 1;
        i++;
        while (i < b0 + T && x[i] != TASKS_PAD) {
            size_t start = i;
            int tag = x[i++];
            size_t ans; /* index of the (last) answer token */
            if (tag >= TASKS_TAG_COPY && tag < TASKS_TAG_COPY + c->n_offsets) {
                int k = c->offsets[tag - TASKS_TAG_COPY];
                while (x[i] >= TASKS_FIRST_CONTENT) i++;
                if (x[i] != TASKS_QUERY || (int)(i - start - 1) < k) return i + 1;
                ans = i + 1;
                if (x[ans] != x[i - k] || lab[ans] != 1 + tag - TASKS_TAG_COPY) return ans + 1;
                if (oracle) oracle[ans - 1] = x[i - k];
                st->offset_seen[tag - TASKS_TAG_COPY]++;
            } else if (tag == TASKS_TAG_INDUCTION) {
                size_t s0 = i;
                while (x[i] >= TASKS_FIRST_CONTENT) i++;
                int L = (int)(i - s0);
                if (x[i] != TASKS_REPEAT || L < c->p[0] || L > c->p[1]) return i + 1;
                for (int a = 0; a < L; a++)
                    for (int b = 0; b < a; b++)
                        if (x[s0 + a] == x[s0 + b]) return s0 + a + 1; /* distinct */
                for (int a = 0; a < L; a++) {
                    size_t p = i + 1 + a;
                    if (x[p] != x[s0 + a] || lab[p] != want_label(L + 1, c->p[0] + 1)) return p + 1;
                    if (oracle) oracle[p - 1] = x[s0 + a];
                }
                ans = i + L;
            } else if (tag == TASKS_TAG_ASSOC) {
                size_t s0 = i;
                while (x[i] != TASKS_QUERY) {
                    if (x[i] < TASKS_FIRST_CONTENT || x[i] >= TASKS_FIRST_CONTENT + nc / 2) return i + 1; /* key */
                    if (x[i + 1] < TASKS_FIRST_CONTENT + nc / 2) return i + 2;                            /* value */
                    i += 2;
                }
                int n = (int)(i - s0) / 2, j = -1;
                for (int a = 0; a < n; a++)
                    if (x[s0 + 2 * a] == x[i + 1]) {
                        if (j >= 0) return i + 2; /* keys distinct */
                        j = a;
                    }
                ans = i + 2;
                if (j < 0 || x[ans] != x[s0 + 2 * j + 1] || lab[ans] != want_label(2 * (n - j) + 1, 3)) return ans + 1;
                if (lab[i + 1]) return i + 2;
                if (oracle) oracle[ans - 1] = x[s0 + 2 * j + 1];
            } else if (tag == TASKS_TAG_ORDER) {
                size_t s0 = i;
                long pa = -1, pb = -1;
                while (x[i] >= TASKS_FIRST_CONTENT) {
                    if (x[i] >= V - nm) {
                        if (pa < 0)
                            pa = (long)i;
                        else if (pb < 0)
                            pb = (long)i;
                        else
                            return i + 1; /* a third marked token */
                    }
                    i++;
                }
                int m = (int)(i - s0);
                if (x[i] != TASKS_QUERY || pb < 0 || m < c->p[0] || m > c->p[1]) return i + 1;
                int d = (int)(pb - pa);
                ans = i + 1;
                if (d < c->p[2] || d > c->p[3] || x[ans] != x[pa] || x[pa] == x[pb] ||
                    lab[ans] != want_label(d, c->p[2]))
                    return ans + 1;
                st->first_is_smaller += x[pa] < x[pb];
                if (oracle) oracle[ans - 1] = x[pa];
            } else {
                return i;
            }
            /* labels exactly on the answers: one, or the L tokens of induction's second copy */
            long want = tag == TASKS_TAG_INDUCTION ? (long)(ans - start) / 2 : 1, got = 0;
            for (size_t p = start; p <= ans; p++)
                if (lab[p]) {
                    got++;
                    st->label_seen[lab[p]]++;
                    if (p + want <= ans) return p + 1; /* a label before the answers */
                }
            if (got != want) return ans + 1;
            st->answers += got;
            st->instances++;
            i = ans + 1;
        }
        for (; i < b0 + T; i++)
            if (x[i] != TASKS_PAD || lab[i]) return i + 1;
    }
    if (x[tc->n_tokens - 1] != TASKS_BOS || lab[tc->n_tokens - 1]) return tc->n_tokens;
    return 0;
}

TEST(every_generated_instance_solves_to_its_marked_answer) {
    for (int k = 0; k < tasks_kind_count(); k++)
        for (int variant = 0; variant < 2; variant++) {
            tasks_config c;
            tasks_config_defaults(&c, k);
            engine_error err;
            if (variant) { /* small vocabulary and windows, odd lengths */
                CHECK(tasks_config_set(&c, "vocab", 64, &err) == ENGINE_OK);
                CHECK(tasks_config_set(&c, "seq_len", 72, &err) == ENGINE_OK);
                CHECK(tasks_config_set(&c, "seed", 99, &err) == ENGINE_OK);
            }
            CHECK(tasks_config_set(&c, "windows", 300, &err) == ENGINE_OK);
            tasks_corpus *tc;
            CHECK_MSG(tasks_generate(&tc, &c, &err) == ENGINE_OK, "%s: %s", tasks_kind_at(k)->name, err.message);
            CHECK_EQ_INT(tc->n_tokens, (size_t)300 * c.seq_len + 1);
            int32_t *oracle = malloc(sizeof(int32_t) * tc->n_tokens);
            CHECK(oracle != NULL);
            solve_stats st;
            size_t bad = solve(tc, &st, oracle);
            CHECK_MSG(bad == 0, "%s variant %d: token %zu (id %d, label %d) does not solve", tasks_kind_at(k)->name,
                      variant, bad - 1, bad ? tc->tokens[bad - 1] : 0, bad ? tc->labels[bad - 1] : 0);
            CHECK_EQ_INT(st.answers, tc->n_answers);
            CHECK_EQ_INT(st.instances, tc->n_instances);
            CHECK(tc->n_instances >= 300); /* at least one whole instance per window */
            /* every bucket is reached */
            for (int b = 1; b <= tc->n_buckets; b++)
                CHECK_MSG(st.label_seen[b] > 0, "%s: bucket %s never occurs", tasks_kind_at(k)->name,
                          tc->bucket_names[b - 1]);
            if (k == kind("relative_order")) /* which one comes first is not given away by the ids */
                CHECK(st.first_is_smaller > tc->n_instances / 3 && st.first_is_smaller < 2 * tc->n_instances / 3);
            /* the solver as a model: accuracy 1 overall and in every bucket, through the windows */
            tasks_acc a;
            tasks_acc_init(&a, tc->n_buckets);
            int T = c.seq_len;
            int32_t *tg = malloc(sizeof(int32_t) * (size_t)T);
            uint8_t *lw = malloc((size_t)T);
            CHECK(tg && lw);
            for (long w = 0; w < c.windows; w++) {
                for (int t = 0; t < T; t++) tg[t] = tc->tokens[(size_t)w * T + t + 1];
                tasks_window_labels(tc, (size_t)w * T, T, lw);
                CHECK(lw[T - 1] == 0); /* the window's last target is the next block's BOS */
                tasks_acc_add(&a, oracle + (size_t)w * T, tg, lw, T);
            }
            CHECK_EQ_INT(a.total, tc->n_answers);
            CHECK_NEAR(tasks_acc_value(&a, -1), 1.0, 0);
            for (int b = 0; b < tc->n_buckets; b++) CHECK_NEAR(tasks_acc_value(&a, b), 1.0, 0);
            free(tg), free(lw), free(oracle);
            tasks_corpus_free(tc);
        }
}

TEST(same_seed_same_bytes_other_seed_other_bytes) {
    tasks_config c;
    tasks_config_defaults(&c, kind("associative_recall"));
    engine_error err;
    CHECK(tasks_config_set(&c, "windows", 50, &err) == ENGINE_OK);
    tasks_corpus *a, *b, *d;
    CHECK(tasks_generate(&a, &c, &err) == ENGINE_OK);
    CHECK(tasks_generate(&b, &c, &err) == ENGINE_OK);
    c.seed = 1235;
    CHECK(tasks_generate(&d, &c, &err) == ENGINE_OK);
    CHECK(!memcmp(a->tokens, b->tokens, sizeof(uint16_t) * a->n_tokens));
    CHECK(!memcmp(a->labels, b->labels, a->n_tokens));
    CHECK(memcmp(a->tokens, d->tokens, sizeof(uint16_t) * a->n_tokens) != 0);
    /* the first window of a stream does not depend on how many windows follow */
    c.seed = 1234;
    CHECK(tasks_config_set(&c, "windows", 3, &err) == ENGINE_OK);
    tasks_corpus *e;
    CHECK(tasks_generate(&e, &c, &err) == ENGINE_OK);
    CHECK(!memcmp(a->tokens, e->tokens, sizeof(uint16_t) * 3 * 128));
    tasks_corpus_free(a), tasks_corpus_free(b), tasks_corpus_free(d), tasks_corpus_free(e);
    tasks_corpus_free(NULL);
}

TEST(windows_line_up_with_the_corpus_loader) {
    tasks_config c;
    tasks_config_defaults(&c, kind("copy_offset"));
    engine_error err;
    CHECK(tasks_config_set(&c, "windows", 40, &err) == ENGINE_OK &&
          tasks_config_set(&c, "seq_len", 64, &err) == ENGINE_OK);
    tasks_corpus *tc;
    CHECK(tasks_generate(&tc, &c, &err) == ENGINE_OK);
    corpus *cp;
    CHECK(corpus_from_tokens(&cp, tc->tokens, tc->n_tokens, &err) == ENGINE_OK);
    corpus_loader *ld;
    corpus_loader_config lc = {
        .seq_len = 64, .batch = 4, .order = CORPUS_ORDER_SHUFFLED, .seed = 5, .val_fraction = 0.1};
    CHECK(corpus_loader_new(&ld, cp, &lc, &err) == ENGINE_OK);
    CHECK_EQ_INT(corpus_loader_windows(ld, CORPUS_SPLIT_TRAIN) + corpus_loader_windows(ld, CORPUS_SPLIT_VAL), 40);
    int32_t batch[4 * 65];
    uint8_t lw[64];
    for (int split = 0; split < 2; split++)
        for (long step = 0; step < 5; step++) {
            corpus_split sp = split ? CORPUS_SPLIT_VAL : CORPUS_SPLIT_TRAIN;
            CHECK(corpus_loader_batch(ld, sp, step, batch, &err) == ENGINE_OK);
            for (int b = 0; b < 4; b++) {
                size_t start;
                CHECK(corpus_loader_window_start(ld, sp, step, b, &start, &err) == ENGINE_OK);
                CHECK(start % 64 == 0);
                CHECK(batch[b * 65] == TASKS_BOS && batch[b * 65 + 64] == TASKS_BOS); /* whole blocks */
                tasks_window_labels(tc, start, 64, lw);
                for (int t = 0; t < 64; t++) {
                    CHECK(lw[t] == tc->labels[start + t + 1]);
                    if (lw[t]) CHECK(batch[b * 65 + t] == TASKS_QUERY); /* copy_offset answers follow QUERY */
                }
            }
        }
    tasks_window_labels(tc, tc->n_tokens - 2, 64, lw); /* past the end: no labels */
    for (int t = 0; t < 64; t++) CHECK(lw[t] == 0);
    corpus_loader_free(ld);
    corpus_free(cp);
    tasks_corpus_free(tc);
}

TEST(bounds_and_cross_field_rules) {
    tasks_config c;
    engine_error err;
    tasks_config_defaults(&c, kind("copy_offset"));
    CHECK(tasks_config_set(&c, "vocab", 63, &err) == ENGINE_ERR_INVALID && strstr(err.message, "vocab"));
    CHECK(tasks_config_set(&c, "vocab", 1025, &err) == ENGINE_ERR_INVALID);
    CHECK(tasks_config_set(&c, "seq_len", 15, &err) == ENGINE_ERR_INVALID);
    CHECK(tasks_config_set(&c, "windows", 0, &err) == ENGINE_ERR_INVALID);
    CHECK(tasks_config_set(&c, "pairs_max", 3, &err) == ENGINE_ERR_INVALID && strstr(err.message, "pairs_max"));
    CHECK(tasks_config_set(&c, "len_min", 0, &err) == ENGINE_ERR_INVALID);
    CHECK(tasks_config_get(&c, "len_max") == 32 && tasks_config_get(&c, "seq_len") == 128);
    CHECK(tasks_config_get(&c, "nope") == -1);
    static const int too_far[] = {1, 17};
    CHECK(tasks_config_set_offsets(&c, too_far, 2, &err) == ENGINE_OK);
    CHECK(tasks_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "len_min")); /* 17 > 16 */
    static const int twice[] = {2, 2};
    CHECK(tasks_config_set_offsets(&c, twice, 2, &err) == ENGINE_ERR_INVALID);
    CHECK(tasks_config_set_offsets(&c, twice, 0, &err) == ENGINE_ERR_INVALID);
    tasks_config_defaults(&c, kind("copy_offset"));
    CHECK(tasks_config_set(&c, "len_max", 200, &err) == ENGINE_OK);
    CHECK(tasks_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "seq_len"));
    CHECK(tasks_config_set(&c, "seq_len", 256, &err) == ENGINE_OK);
    CHECK(tasks_config_validate(&c, &err) == ENGINE_OK);
    CHECK(tasks_config_set(&c, "len_min", 201, &err) == ENGINE_OK);
    CHECK(tasks_config_validate(&c, &err) == ENGINE_ERR_INVALID); /* min above max */
    tasks_config_defaults(&c, kind("induction"));
    CHECK(tasks_config_set_offsets(&c, twice, 1, &err) == ENGINE_ERR_INVALID);
    CHECK(tasks_config_set(&c, "vocab", 64, &err) == ENGINE_OK &&
          tasks_config_set(&c, "len_max", 41, &err) == ENGINE_OK);
    CHECK(tasks_config_set(&c, "seq_len", 256, &err) == ENGINE_OK);
    CHECK(tasks_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "distinct"));
    tasks_config_defaults(&c, kind("associative_recall"));
    CHECK(tasks_config_set(&c, "vocab", 64, &err) == ENGINE_OK &&
          tasks_config_set(&c, "pairs_max", 21, &err) == ENGINE_OK);
    CHECK(tasks_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "keys"));
    tasks_config_defaults(&c, kind("relative_order"));
    CHECK(tasks_config_set(&c, "dist_min", 8, &err) == ENGINE_OK);
    CHECK(tasks_config_validate(&c, &err) == ENGINE_ERR_INVALID && strstr(err.message, "dist_min"));
    tasks_config_defaults(&c, 9);
    CHECK(tasks_config_validate(&c, &err) == ENGINE_ERR_INVALID);
    tasks_corpus *tc = (tasks_corpus *)&c;
    CHECK(tasks_generate(&tc, &c, &err) == ENGINE_ERR_INVALID && tc == NULL);
}

TEST(accuracy_on_hand_made_predictions) {
    /* six positions, four answers: bucket 0 twice (one right), bucket 1 twice (both right) */
    static const int32_t target[] = {5, 6, 7, 8, 9, 10};
    static const int32_t pred[] = {0, 6, 7, 1, 9, 10};
    static const uint8_t labels[] = {0, 1, 2, 1, 0, 2};
    tasks_acc a;
    tasks_accuracy(pred, target, labels, 6, 3, &a);
    CHECK_EQ_INT(a.total, 4);
    CHECK_EQ_INT(a.correct, 3);
    CHECK_NEAR(tasks_acc_value(&a, -1), 0.75, 0);
    CHECK_NEAR(tasks_acc_value(&a, 0), 0.5, 0);
    CHECK_NEAR(tasks_acc_value(&a, 1), 1.0, 0);
    CHECK(isnan(tasks_acc_value(&a, 2)) && isnan(tasks_acc_value(&a, 7)));
    tasks_acc empty;
    tasks_acc_init(&empty, 2);
    CHECK(isnan(tasks_acc_value(&empty, -1)));
    /* the same through logits, with a tie at position 3 going to the lowest id (8 vs 9: 8) */
    enum { V = 12 };
    real logits[6 * V];
    for (int i = 0; i < 6 * V; i++) logits[i] = 0;
    for (int i = 0; i < 6; i++) logits[i * V + pred[i]] = 1;
    logits[3 * V + 1] = 0, logits[3 * V + 8] = 2, logits[3 * V + 9] = 2;
    tasks_acc b;
    tasks_acc_init(&b, 3);
    tasks_acc_add_logits(&b, logits, V, target, labels, 6);
    CHECK_EQ_INT(b.correct, 4);
    CHECK_NEAR(tasks_acc_value(&b, 0), 1.0, 0);
    logits[3 * V + 7] = 2; /* now 7 wins the tie: wrong */
    tasks_acc_init(&b, 3);
    tasks_acc_add_logits(&b, logits, V, target, labels, 6);
    CHECK_EQ_INT(b.correct, 3);
    /* metric names from a corpus: acc, then acc.<bucket> for buckets with answers */
    tasks_config c;
    tasks_config_defaults(&c, kind("copy_offset"));
    engine_error err;
    static const int offs[] = {1, 3, 4};
    CHECK(tasks_config_set_offsets(&c, offs, 3, &err) == ENGINE_OK);
    CHECK(tasks_config_set(&c, "windows", 2, &err) == ENGINE_OK);
    tasks_corpus *tc;
    CHECK(tasks_generate(&tc, &c, &err) == ENGINE_OK);
    char keys[8][24];
    double vals[8];
    int n = tasks_acc_metrics(&a, tc, keys, vals, 8);
    CHECK_EQ_INT(n, 3);
    CHECK(!strcmp(keys[0], "acc") && !strcmp(keys[1], "acc.k1") && !strcmp(keys[2], "acc.k3"));
    CHECK_NEAR(vals[0], 0.75, 0);
    CHECK_NEAR(vals[1], 0.5, 0);
    CHECK_NEAR(vals[2], 1.0, 0);
    CHECK_EQ_INT(tasks_acc_metrics(&a, tc, keys, vals, 1), 1);
    /* labels beyond the counted buckets count overall only */
    tasks_accuracy(pred, target, labels, 6, 1, &a);
    CHECK_EQ_INT(a.total, 4);
    CHECK_EQ_INT(a.b_total[0], 2);
    tasks_corpus_free(tc);
}

TEST(written_files_read_back) {
    tasks_config c;
    tasks_config_defaults(&c, kind("relative_order"));
    engine_error err;
    CHECK(tasks_config_set(&c, "windows", 10, &err) == ENGINE_OK);
    tasks_corpus *tc;
    CHECK(tasks_generate(&tc, &c, &err) == ENGINE_OK);
    char dir[] = "/tmp/attnlab_tasks_XXXXXX", tp[64], lp[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(tp, sizeof tp, "%s/tokens.u16", dir);
    snprintf(lp, sizeof lp, "%s/labels.u8", dir);
    CHECK(tasks_write(tc, tp, lp, &err) == ENGINE_OK);
    corpus *cp;
    CHECK(corpus_open_u16(&cp, tp, &err) == ENGINE_OK);
    CHECK_EQ_INT(corpus_token_count(cp), tc->n_tokens);
    CHECK(!memcmp(corpus_tokens(cp), tc->tokens, sizeof(uint16_t) * tc->n_tokens));
    corpus_free(cp);
    FILE *f = fopen(lp, "rb");
    CHECK(f != NULL);
    uint8_t *buf = malloc(tc->n_tokens + 1);
    size_t got = fread(buf, 1, tc->n_tokens + 1, f);
    fclose(f);
    CHECK_EQ_INT(got, tc->n_tokens);
    CHECK(!memcmp(buf, tc->labels, tc->n_tokens));
    free(buf);
    snprintf(lp, sizeof lp, "%s/no/such/dir", dir);
    CHECK(tasks_write(tc, NULL, lp, &err) == ENGINE_ERR_IO);
    unlink(tp);
    snprintf(lp, sizeof lp, "%s/labels.u8", dir);
    unlink(lp);
    rmdir(dir);
    tasks_corpus_free(tc);
}

int main(void) {
    RUN(table_lists_the_four_kinds_with_bounded_params);
    RUN(hand_built_instances_have_the_right_answers_and_labels);
    RUN(every_generated_instance_solves_to_its_marked_answer);
    RUN(same_seed_same_bytes_other_seed_other_bytes);
    RUN(windows_line_up_with_the_corpus_loader);
    RUN(bounds_and_cross_field_rules);
    RUN(accuracy_on_hand_made_predictions);
    RUN(written_files_read_back);
    return test_summary();
}
