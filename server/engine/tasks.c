#include "tasks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "rng.h"

enum { K_COPY, K_INDUCTION, K_ASSOC, K_ORDER };

static const tasks_param copy_params[] = {
    {"len_min", "fewest content tokens before QUERY", 16, 1, 4000},
    {"len_max", "most content tokens before QUERY", 32, 1, 4000},
};
static const tasks_param induction_params[] = {
    {"len_min", "shortest repeated sequence", 4, 1, 2000},
    {"len_max", "longest repeated sequence", 16, 1, 2000},
};
static const tasks_param assoc_params[] = {
    {"pairs_min", "fewest key-value pairs", 2, 1, 2000},
    {"pairs_max", "most key-value pairs", 8, 1, 2000},
};
static const tasks_param order_params[] = {
    {"len_min", "fewest content tokens before QUERY", 8, 2, 4000},
    {"len_max", "most content tokens before QUERY", 48, 2, 4000},
    {"dist_min", "smallest distance between the two marked tokens", 1, 1, 4000},
    {"dist_max", "largest distance between the two marked tokens", 32, 1, 4000},
};

static const tasks_kind kinds[] = {
    {"copy_offset", "predict the token k back from QUERY, k from a set of offsets", copy_params, 2, 1},
    {"induction", "a random sequence repeated: predict its second copy", induction_params, 2, 0},
    {"associative_recall", "key-value pairs, then a key: predict its value", assoc_params, 2, 0},
    {"relative_order", "which of two marked tokens came first", order_params, 4, 0},
};
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

static const int default_offsets[] = {1, 2, 3, 4, 6, 8, 12, 16};

int tasks_kind_count(void) { return N_KINDS; }
const tasks_kind *tasks_kind_at(int i) { return i >= 0 && i < N_KINDS ? &kinds[i] : NULL; }

int tasks_kind_index(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < N_KINDS; i++)
        if (!strcmp(kinds[i].name, name)) return i;
    return -1;
}

/* ---- configuration ---- */

typedef struct {
    const char *name;
    long def, min, max;
} common_param;

static const common_param common[] = {
    {"vocab", 128, 64, 1024},
    {"seq_len", 128, 16, 4096},
    {"windows", 2048, 1, 1000000},
};

void tasks_config_defaults(tasks_config *c, int kind) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->vocab = (int)common[0].def;
    c->seq_len = (int)common[1].def;
    c->windows = common[2].def;
    c->seed = 1234;
    const tasks_kind *k = tasks_kind_at(kind);
    if (!k) return;
    for (int i = 0; i < k->n_params; i++) c->p[i] = k->params[i].def;
    if (k->has_offsets) {
        c->n_offsets = (int)(sizeof default_offsets / sizeof default_offsets[0]);
        memcpy(c->offsets, default_offsets, sizeof default_offsets);
    }
}

static int param_index(const tasks_kind *k, const char *name) {
    for (int i = 0; k && i < k->n_params; i++)
        if (!strcmp(k->params[i].name, name)) return i;
    return -1;
}

engine_status tasks_config_set(tasks_config *c, const char *name, long value, engine_error *err) {
    if (!name) return engine_fail(err, ENGINE_ERR_INVALID, "no parameter name");
    if (!strcmp(name, "seed")) {
        c->seed = (uint64_t)value;
        return ENGINE_OK;
    }
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, common[i].name)) {
            if (value < common[i].min || value > common[i].max)
                return engine_fail(err, ENGINE_ERR_INVALID, "%s %ld is not in %ld..%ld", name, value, common[i].min,
                                   common[i].max);
            if (i == 0)
                c->vocab = (int)value;
            else if (i == 1)
                c->seq_len = (int)value;
            else
                c->windows = value;
            return ENGINE_OK;
        }
    const tasks_kind *k = tasks_kind_at(c->kind);
    int j = param_index(k, name);
    if (j < 0) return engine_fail(err, ENGINE_ERR_INVALID, "%s has no parameter %s", k ? k->name : "this task", name);
    const tasks_param *p = &k->params[j];
    if (value < p->min || value > p->max)
        return engine_fail(err, ENGINE_ERR_INVALID, "%s %ld is not in %d..%d", name, value, p->min, p->max);
    c->p[j] = (int)value;
    return ENGINE_OK;
}

long tasks_config_get(const tasks_config *c, const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "vocab")) return c->vocab;
    if (!strcmp(name, "seq_len")) return c->seq_len;
    if (!strcmp(name, "windows")) return c->windows;
    if (!strcmp(name, "seed")) return (long)c->seed;
    int j = param_index(tasks_kind_at(c->kind), name);
    return j < 0 ? -1 : c->p[j];
}

engine_status tasks_config_set_offsets(tasks_config *c, const int *offsets, int n, engine_error *err) {
    const tasks_kind *k = tasks_kind_at(c->kind);
    if (!k || !k->has_offsets) return engine_fail(err, ENGINE_ERR_INVALID, "only copy_offset takes offsets");
    if (n < 1 || n > TASKS_MAX_OFFSETS)
        return engine_fail(err, ENGINE_ERR_INVALID, "offsets has %d values; 1..%d are allowed", n, TASKS_MAX_OFFSETS);
    for (int i = 0; i < n; i++) {
        if (offsets[i] < 1 || offsets[i] > 1024)
            return engine_fail(err, ENGINE_ERR_INVALID, "offset %d is not in 1..1024", offsets[i]);
        for (int j = 0; j < i; j++)
            if (offsets[j] == offsets[i])
                return engine_fail(err, ENGINE_ERR_INVALID, "offset %d is listed twice", offsets[i]);
    }
    c->n_offsets = n;
    memcpy(c->offsets, offsets, sizeof(int) * (size_t)n);
    return ENGINE_OK;
}

static int n_content(const tasks_config *c) { return c->vocab - TASKS_FIRST_CONTENT; }
static int n_marked(const tasks_config *c) { return n_content(c) / 4 < 2 ? 2 : n_content(c) / 4; }

/* The length of the longest instance c can generate. */
static int tasks_max_instance_len(const tasks_config *c) {
    switch (c->kind) {
    case K_COPY: return c->p[1] + 3;
    case K_INDUCTION: return 2 * c->p[1] + 2;
    case K_ASSOC: return 2 * c->p[1] + 4;
    case K_ORDER: return c->p[1] + 3;
    }
    return 0;
}

/* The smallest and largest answer distance a distance-bucketed kind produces. */
static void distance_range(const tasks_config *c, int *lo, int *hi) {
    switch (c->kind) {
    case K_INDUCTION: *lo = c->p[0] + 1, *hi = c->p[1] + 1; break;
    case K_ASSOC: *lo = 3, *hi = 2 * c->p[1] + 1; break;
    case K_ORDER:
        *lo = c->p[2];
        *hi = c->p[3] < c->p[1] - 1 ? c->p[3] : c->p[1] - 1;
        break;
    default: *lo = *hi = 1; break;
    }
}

static int floor_log2(int x) {
    int b = 0;
    while (x >> (b + 1)) b++;
    return b;
}

int tasks_buckets(const tasks_config *c, char names[TASKS_MAX_BUCKETS][12]) {
    if (c->kind == K_COPY) {
        for (int i = 0; names && i < c->n_offsets; i++) snprintf(names[i], 12, "k%d", c->offsets[i]);
        return c->n_offsets;
    }
    int lo, hi;
    distance_range(c, &lo, &hi);
    int b0 = floor_log2(lo), n = floor_log2(hi) - b0 + 1;
    for (int i = 0; names && i < n; i++) snprintf(names[i], 12, "d%d", 1 << (b0 + i));
    return n;
}

/* The bucket of an answer at distance (or, for copy_offset, of offset index) x; -1 if none. */
static int tasks_bucket_of(const tasks_config *c, int x) {
    int n = tasks_buckets(c, NULL);
    if (c->kind == K_COPY) return x >= 0 && x < n ? x : -1;
    if (x < 1) return -1;
    int lo, hi;
    distance_range(c, &lo, &hi);
    int b = floor_log2(x) - floor_log2(lo);
    return b >= 0 && b < n ? b : -1;
}

engine_status tasks_config_validate(const tasks_config *c, engine_error *err) {
    const tasks_kind *k = tasks_kind_at(c->kind);
    if (!k) return engine_fail(err, ENGINE_ERR_INVALID, "unknown task kind %d", c->kind);
    long v[3] = {c->vocab, c->seq_len, c->windows};
    for (int i = 0; i < 3; i++)
        if (v[i] < common[i].min || v[i] > common[i].max)
            return engine_fail(err, ENGINE_ERR_INVALID, "%s %ld is not in %ld..%ld", common[i].name, v[i],
                               common[i].min, common[i].max);
    for (int i = 0; i < k->n_params; i++)
        if (c->p[i] < k->params[i].min || c->p[i] > k->params[i].max)
            return engine_fail(err, ENGINE_ERR_INVALID, "%s %d is not in %d..%d", k->params[i].name, c->p[i],
                               k->params[i].min, k->params[i].max);
    if (c->p[0] > c->p[1])
        return engine_fail(err, ENGINE_ERR_INVALID, "%s %d is above %s %d", k->params[0].name, c->p[0],
                           k->params[1].name, c->p[1]);
    int nc = n_content(c);
    switch (c->kind) {
    case K_COPY:
        if (c->n_offsets < 1 || c->n_offsets > TASKS_MAX_OFFSETS)
            return engine_fail(err, ENGINE_ERR_INVALID, "offsets has %d values; 1..%d are allowed", c->n_offsets,
                               TASKS_MAX_OFFSETS);
        for (int i = 0; i < c->n_offsets; i++)
            if (c->offsets[i] < 1 || c->offsets[i] > c->p[0])
                return engine_fail(err, ENGINE_ERR_INVALID, "offset %d is not in 1..len_min (%d)", c->offsets[i],
                                   c->p[0]);
        break;
    case K_INDUCTION:
        if (c->p[1] > nc)
            return engine_fail(err, ENGINE_ERR_INVALID, "len_max %d needs %d distinct content ids; vocab %d has %d",
                               c->p[1], c->p[1], c->vocab, nc);
        break;
    case K_ASSOC:
        if (c->p[1] > nc / 2)
            return engine_fail(err, ENGINE_ERR_INVALID, "pairs_max %d needs %d distinct keys; vocab %d has %d", c->p[1],
                               c->p[1], c->vocab, nc / 2);
        break;
    case K_ORDER:
        if (c->p[2] > c->p[3])
            return engine_fail(err, ENGINE_ERR_INVALID, "dist_min %d is above dist_max %d", c->p[2], c->p[3]);
        if (c->p[2] > c->p[0] - 1)
            return engine_fail(err, ENGINE_ERR_INVALID, "dist_min %d does not fit in len_min %d tokens", c->p[2],
                               c->p[0]);
        break;
    }
    int longest = tasks_max_instance_len(c);
    if (longest > c->seq_len - 1)
        return engine_fail(err, ENGINE_ERR_INVALID, "an instance can take %d tokens; a window of seq_len %d holds %d",
                           longest, c->seq_len, c->seq_len - 1);
    return ENGINE_OK;
}

/* ---- instances ---- */

static engine_status put_ids(const tasks_config *c, const uint16_t *ids, int n, engine_error *err) {
    for (int i = 0; i < n; i++)
        if (ids[i] >= c->vocab)
            return engine_fail(err, ENGINE_ERR_INVALID, "token %u is not below vocab %d", ids[i], c->vocab);
    return ENGINE_OK;
}

engine_status tasks_emit_instance(const tasks_config *c, const tasks_instance *in, uint16_t *tok, uint8_t *lab, int cap,
                                  int *len, engine_error *err) {
    const int L = in->len;
    int n = 0, b;
    if (L < 1 || !in->seq) return engine_fail(err, ENGINE_ERR_INVALID, "an instance needs len >= 1 and its tokens");
    engine_status rc = put_ids(c, in->seq, L, err);
    if (rc) return rc;
#define ROOM(need)                                                                                                     \
    if ((need) > cap) return engine_fail(err, ENGINE_ERR_INVALID, "the instance takes %d tokens; %d fit", (need), cap)
    switch (c->kind) {
    case K_COPY: {
        if (in->offset_index < 0 || in->offset_index >= c->n_offsets)
            return engine_fail(err, ENGINE_ERR_INVALID, "offset index %d is not in 0..%d", in->offset_index,
                               c->n_offsets - 1);
        int k = c->offsets[in->offset_index];
        if (k > L) return engine_fail(err, ENGINE_ERR_INVALID, "offset %d is beyond %d tokens", k, L);
        ROOM(L + 3);
        tok[n] = (uint16_t)(TASKS_TAG_COPY + in->offset_index), lab[n++] = 0;
        for (int i = 0; i < L; i++) tok[n] = in->seq[i], lab[n++] = 0;
        tok[n] = TASKS_QUERY, lab[n++] = 0;
        tok[n] = in->seq[L - k], lab[n++] = (uint8_t)(1 + in->offset_index);
        break;
    }
    case K_INDUCTION:
        if ((b = tasks_bucket_of(c, L + 1)) < 0)
            return engine_fail(err, ENGINE_ERR_INVALID, "distance %d has no bucket in this config", L + 1);
        ROOM(2 * L + 2);
        tok[n] = TASKS_TAG_INDUCTION, lab[n++] = 0;
        for (int i = 0; i < L; i++) tok[n] = in->seq[i], lab[n++] = 0;
        tok[n] = TASKS_REPEAT, lab[n++] = 0;
        for (int i = 0; i < L; i++) tok[n] = in->seq[i], lab[n++] = (uint8_t)(1 + b);
        break;
    case K_ASSOC: {
        if (!in->values) return engine_fail(err, ENGINE_ERR_INVALID, "associative_recall needs values");
        if ((rc = put_ids(c, in->values, L, err))) return rc;
        if (in->query < 0 || in->query >= L)
            return engine_fail(err, ENGINE_ERR_INVALID, "query %d is not in 0..%d", in->query, L - 1);
        if ((b = tasks_bucket_of(c, 2 * (L - in->query) + 1)) < 0)
            return engine_fail(err, ENGINE_ERR_INVALID, "distance %d has no bucket in this config",
                               2 * (L - in->query) + 1);
        ROOM(2 * L + 4);
        tok[n] = TASKS_TAG_ASSOC, lab[n++] = 0;
        for (int i = 0; i < L; i++) {
            tok[n] = in->seq[i], lab[n++] = 0;
            tok[n] = in->values[i], lab[n++] = 0;
        }
        tok[n] = TASKS_QUERY, lab[n++] = 0;
        tok[n] = in->seq[in->query], lab[n++] = 0;
        tok[n] = in->values[in->query], lab[n++] = (uint8_t)(1 + b);
        break;
    }
    case K_ORDER:
        if (in->pos_a < 0 || in->pos_a >= in->pos_b || in->pos_b >= L)
            return engine_fail(err, ENGINE_ERR_INVALID, "marked positions %d, %d are not 0 <= a < b < %d", in->pos_a,
                               in->pos_b, L);
        if ((b = tasks_bucket_of(c, in->pos_b - in->pos_a)) < 0)
            return engine_fail(err, ENGINE_ERR_INVALID, "distance %d has no bucket in this config",
                               in->pos_b - in->pos_a);
        ROOM(L + 3);
        tok[n] = TASKS_TAG_ORDER, lab[n++] = 0;
        for (int i = 0; i < L; i++) tok[n] = in->seq[i], lab[n++] = 0;
        tok[n] = TASKS_QUERY, lab[n++] = 0;
        tok[n] = in->seq[in->pos_a], lab[n++] = (uint8_t)(1 + b);
        break;
    default: return engine_fail(err, ENGINE_ERR_INVALID, "unknown task kind %d", c->kind);
    }
#undef ROOM
    *len = n;
    return ENGINE_OK;
}

/* Uniform in [0, n), n >= 1: Lemire's multiply-shift with rejection, exactly uniform. */
static uint32_t below(rng_state *r, uint32_t n) {
    uint64_t m = (uint64_t)(uint32_t)rng_next_u64(r) * n;
    uint32_t l = (uint32_t)m;
    if (l < n) {
        uint32_t t = -n % n;
        while (l < t) {
            m = (uint64_t)(uint32_t)rng_next_u64(r) * n;
            l = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

static int between(rng_state *r, int lo, int hi) { return lo + (int)below(r, (uint32_t)(hi - lo + 1)); }

/* Draws one instance of c's kind into in (using seq/values/pool scratch of the corpus). */
static void draw(const tasks_config *c, rng_state *r, tasks_instance *in, uint16_t *seq, uint16_t *vals,
                 uint16_t *pool) {
    const int nc = n_content(c);
    memset(in, 0, sizeof *in);
    in->seq = seq;
    in->values = vals;
    switch (c->kind) {
    case K_COPY:
        in->offset_index = (int)below(r, (uint32_t)c->n_offsets);
        in->len = between(r, c->p[0], c->p[1]);
        for (int i = 0; i < in->len; i++) seq[i] = (uint16_t)(TASKS_FIRST_CONTENT + below(r, (uint32_t)nc));
        break;
    case K_INDUCTION: /* distinct ids: the first len steps of a Fisher-Yates shuffle of the content */
        in->len = between(r, c->p[0], c->p[1]);
        for (int i = 0; i < nc; i++) pool[i] = (uint16_t)(TASKS_FIRST_CONTENT + i);
        for (int i = 0; i < in->len; i++) {
            int j = i + (int)below(r, (uint32_t)(nc - i));
            uint16_t t = pool[i];
            pool[i] = pool[j], pool[j] = t;
            seq[i] = pool[i];
        }
        break;
    case K_ASSOC: {
        int nk = nc / 2;
        in->len = between(r, c->p[0], c->p[1]);
        for (int i = 0; i < nk; i++) pool[i] = (uint16_t)(TASKS_FIRST_CONTENT + i);
        for (int i = 0; i < in->len; i++) {
            int j = i + (int)below(r, (uint32_t)(nk - i));
            uint16_t t = pool[i];
            pool[i] = pool[j], pool[j] = t;
            seq[i] = pool[i];
            vals[i] = (uint16_t)(TASKS_FIRST_CONTENT + nk + below(r, (uint32_t)(nc - nk)));
        }
        in->query = (int)below(r, (uint32_t)in->len);
        break;
    }
    case K_ORDER: {
        int nm = n_marked(c), np = nc - nm;
        in->len = between(r, c->p[0], c->p[1]);
        int dmax = c->p[3] < in->len - 1 ? c->p[3] : in->len - 1;
        int d = between(r, c->p[2], dmax);
        in->pos_a = between(r, 0, in->len - 1 - d);
        in->pos_b = in->pos_a + d;
        for (int i = 0; i < in->len; i++) seq[i] = (uint16_t)(TASKS_FIRST_CONTENT + below(r, (uint32_t)np));
        int a = (int)below(r, (uint32_t)nm), b = (int)below(r, (uint32_t)(nm - 1));
        if (b >= a) b++;
        seq[in->pos_a] = (uint16_t)(c->vocab - nm + a);
        seq[in->pos_b] = (uint16_t)(c->vocab - nm + b);
        break;
    }
    }
}

void tasks_corpus_free(tasks_corpus *tc) {
    if (!tc) return;
    free(tc->tokens);
    free(tc->labels);
    free(tc);
}

engine_status tasks_generate(tasks_corpus **out, const tasks_config *c, engine_error *err) {
    *out = NULL;
    engine_status rc = tasks_config_validate(c, err);
    if (rc) return rc;
    const int T = c->seq_len, maxlen = tasks_max_instance_len(c);
    tasks_corpus *tc = calloc(1, sizeof *tc);
    uint16_t *seq = malloc(sizeof(uint16_t) * (size_t)(T + c->vocab) * 3), *vals = seq ? seq + T + c->vocab : NULL,
             *pool = vals ? vals + T + c->vocab : NULL;
    uint16_t *ptok = malloc(sizeof(uint16_t) * (size_t)maxlen);
    uint8_t *plab = malloc((size_t)maxlen);
    if (tc) {
        tc->n_tokens = (size_t)c->windows * T + 1;
        tc->tokens = malloc(sizeof(uint16_t) * tc->n_tokens);
        tc->labels = malloc(tc->n_tokens);
    }
    if (!tc || !tc->tokens || !tc->labels || !seq || !ptok || !plab) {
        tasks_corpus_free(tc);
        free(seq), free(ptok), free(plab);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for a task corpus of %ld windows", c->windows);
    }
    tc->cfg = *c;
    tc->n_buckets = tasks_buckets(c, tc->bucket_names);
    rng_state r;
    rng_seed(&r, c->seed);
    int plen = 0; /* a drawn instance waiting for room */
    for (long w = 0; w < c->windows && !rc; w++) {
        uint16_t *bt = tc->tokens + (size_t)w * T;
        uint8_t *bl = tc->labels + (size_t)w * T;
        int used = 1;
        bt[0] = TASKS_BOS, bl[0] = 0;
        for (;;) {
            if (!plen) {
                tasks_instance in;
                draw(c, &r, &in, seq, vals, pool);
                if ((rc = tasks_emit_instance(c, &in, ptok, plab, maxlen, &plen, err))) break;
            }
            if (used + plen > T) break;
            memcpy(bt + used, ptok, sizeof(uint16_t) * (size_t)plen);
            memcpy(bl + used, plab, (size_t)plen);
            for (int i = 0; i < plen; i++) tc->n_answers += plab[i] != 0;
            tc->n_instances++;
            used += plen;
            plen = 0;
        }
        for (int i = used; i < T; i++) bt[i] = TASKS_PAD, bl[i] = 0;
    }
    tc->tokens[tc->n_tokens - 1] = TASKS_BOS;
    tc->labels[tc->n_tokens - 1] = 0;
    free(seq), free(ptok), free(plab);
    if (rc) { /* cannot happen for a validated config; kept so a bug cannot pass silently */
        tasks_corpus_free(tc);
        return rc;
    }
    *out = tc;
    return ENGINE_OK;
}

void tasks_window_labels(const tasks_corpus *tc, size_t start, int T, uint8_t *out) {
    for (int t = 0; t < T; t++) out[t] = start + t + 1 < tc->n_tokens ? tc->labels[start + t + 1] : 0;
}

engine_status tasks_write(const tasks_corpus *tc, const char *tokens_path, const char *labels_path, engine_error *err) {
    if (tokens_path) {
        int32_t *ids = malloc(sizeof(int32_t) * tc->n_tokens);
        if (!ids) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory writing %s", tokens_path);
        for (size_t i = 0; i < tc->n_tokens; i++) ids[i] = tc->tokens[i];
        engine_status rc = corpus_write_u16(tokens_path, ids, tc->n_tokens, err);
        free(ids);
        if (rc) return rc;
    }
    if (labels_path) {
        FILE *f = fopen(labels_path, "wb");
        if (!f) return engine_fail(err, ENGINE_ERR_IO, "cannot write %s", labels_path);
        size_t n = fwrite(tc->labels, 1, tc->n_tokens, f);
        int bad = n != tc->n_tokens;
        if (fclose(f) != 0) bad = 1;
        if (bad) {
            remove(labels_path);
            return engine_fail(err, ENGINE_ERR_IO, "cannot write %s", labels_path);
        }
    }
    return ENGINE_OK;
}

/* ---- accuracy ---- */

void tasks_acc_init(tasks_acc *a, int n_buckets) {
    memset(a, 0, sizeof *a);
    a->n_buckets = n_buckets < 0 ? 0 : (n_buckets > TASKS_MAX_BUCKETS ? TASKS_MAX_BUCKETS : n_buckets);
}

static void acc_one(tasks_acc *a, int ok, int label) {
    a->total++;
    a->correct += ok;
    int b = label - 1;
    if (b < a->n_buckets) {
        a->b_total[b]++;
        a->b_correct[b] += ok;
    }
}

void tasks_acc_add(tasks_acc *a, const int32_t *pred, const int32_t *target, const uint8_t *labels, long n) {
    for (long i = 0; i < n; i++)
        if (labels[i]) acc_one(a, pred[i] == target[i], labels[i]);
}

void tasks_acc_add_logits(tasks_acc *a, const real *logits, int V, const int32_t *target, const uint8_t *labels,
                          long n) {
    for (long i = 0; i < n; i++) {
        if (!labels[i]) continue;
        const real *row = logits + (size_t)i * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (row[v] > row[best]) best = v;
        acc_one(a, best == target[i], labels[i]);
    }
}

void tasks_accuracy(const int32_t *pred, const int32_t *target, const uint8_t *labels, long n, int n_buckets,
                    tasks_acc *out) {
    tasks_acc_init(out, n_buckets);
    tasks_acc_add(out, pred, target, labels, n);
}

double tasks_acc_value(const tasks_acc *a, int bucket) {
    if (bucket < 0) return a->total ? (double)a->correct / a->total : NAN;
    if (bucket >= a->n_buckets || !a->b_total[bucket]) return NAN;
    return (double)a->b_correct[bucket] / a->b_total[bucket];
}

int tasks_acc_metrics(const tasks_acc *a, const tasks_corpus *tc, char keys[][24], double *vals, int cap) {
    int n = 0;
    if (cap < 1) return 0;
    snprintf(keys[n], 24, "acc");
    vals[n++] = tasks_acc_value(a, -1);
    for (int b = 0; b < a->n_buckets && b < tc->n_buckets && n < cap; b++) {
        if (!a->b_total[b]) continue;
        snprintf(keys[n], 24, "acc.%s", tc->bucket_names[b]);
        vals[n++] = tasks_acc_value(a, b);
    }
    return n;
}
