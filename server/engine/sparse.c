#include "sparse.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "layers.h"
#include "lmhead.h"
#include "model.h"
#include "rng.h"
#include "threads.h"

/* ---- configuration ---- */

void sparse_config_defaults(sparse_config *c, sparse_predictor p, int k) {
    memset(c, 0, sizeof *c);
    c->predictor = p;
    c->k = k;
    c->lsh_tables = 4;
    c->lsh_bits = 0;
    c->lsh_candidates = 0;
    c->hamming_bits = 32;
    c->seed = 1234;
}

static const char *const predictor_names[SPARSE_PREDICTOR_COUNT] = {"dense",   "topk",      "lsh",
                                                                    "hamming", "unrotated", "window"};

const char *sparse_predictor_name(sparse_predictor p) {
    return (int)p >= 0 && p < SPARSE_PREDICTOR_COUNT ? predictor_names[p] : "unknown";
}

int sparse_predictor_parse(const char *s, sparse_predictor *p) {
    if (!s) return -1;
    for (int i = 0; i < SPARSE_PREDICTOR_COUNT; i++)
        if (!strcmp(s, predictor_names[i])) {
            *p = (sparse_predictor)i;
            return 0;
        }
    return -1;
}

engine_status sparse_config_validate(const sparse_config *c, int d, engine_error *err) {
    if ((int)c->predictor < 0 || c->predictor >= SPARSE_PREDICTOR_COUNT)
        return engine_fail(err, ENGINE_ERR_INVALID, "unknown sparse predictor %d", (int)c->predictor);
    if (c->k < 1) return engine_fail(err, ENGINE_ERR_INVALID, "k %d is not >= 1", c->k);
    if (d < 1 || d > 1024) return engine_fail(err, ENGINE_ERR_INVALID, "head width %d is not in 1..1024", d);
    if (c->predictor == SPARSE_LSH) {
        if (c->lsh_tables < 1 || c->lsh_tables > SPARSE_MAX_TABLES)
            return engine_fail(err, ENGINE_ERR_INVALID, "lsh_tables %d is not in 1..%d", c->lsh_tables,
                               SPARSE_MAX_TABLES);
        if (c->lsh_bits < 0 || c->lsh_bits > SPARSE_MAX_LSH_BITS)
            return engine_fail(err, ENGINE_ERR_INVALID, "lsh_bits %d is not in 0..%d", c->lsh_bits,
                               SPARSE_MAX_LSH_BITS);
        if (c->lsh_candidates < 0 || c->lsh_candidates > 65536)
            return engine_fail(err, ENGINE_ERR_INVALID, "lsh_candidates %d is not in 0..65536", c->lsh_candidates);
    }
    if (c->predictor == SPARSE_HAMMING && (c->hamming_bits < 1 || c->hamming_bits > SPARSE_MAX_HAMMING_BITS))
        return engine_fail(err, ENGINE_ERR_INVALID, "hamming_bits %d is not in 1..%d", c->hamming_bits,
                           SPARSE_MAX_HAMMING_BITS);
    return ENGINE_OK;
}

/* ---- workspace ---- */

struct sparse_ws {
    sparse_config c;
    int max_T, d, kcap, n_planes, cand_cap;
    real *planes;                 /* [n_planes][d] random hyperplanes */
    uint32_t *qcode, *kcode;      /* LSH: [tables][max_T] bucket codes */
    uint64_t *qh, *kh;            /* Hamming: [max_T] codes */
    int *head;                    /* LSH: [tables][2^bits] most recent key in the bucket, -1 none */
    int *prev;                    /* LSH: [tables][max_T] the next older key in the same bucket */
    int *mark;                    /* [max_T] per-query stamps */
    int *cand, *ties;             /* [max_T] candidate keys; tied ones */
    unsigned char *dist;          /* [max_T] Hamming distances */
    real *score, *scratch, *kinv; /* [max_T] each */
    int *idx;                     /* [max_T][kcap] chosen keys, ascending */
    int *cnt;                     /* [max_T] */
    int last_T;
};

void sparse_ws_free(sparse_ws *ws) {
    if (!ws) return;
    free(ws->planes);
    free(ws->qcode);
    free(ws->kcode);
    free(ws->qh);
    free(ws->kh);
    free(ws->head);
    free(ws->prev);
    free(ws->mark);
    free(ws->cand);
    free(ws->ties);
    free(ws->dist);
    free(ws->score);
    free(ws->scratch);
    free(ws->kinv);
    free(ws->idx);
    free(ws->cnt);
    free(ws);
}

engine_status sparse_ws_new(sparse_ws **out, const sparse_config *c, int max_T, int d, engine_error *err) {
    *out = NULL;
    engine_status rc = sparse_config_validate(c, d, err);
    if (rc) return rc;
    if (max_T < 1 || max_T > (1 << 20)) return engine_fail(err, ENGINE_ERR_INVALID, "T %d is not in 1..2^20", max_T);
    sparse_ws *ws = calloc(1, sizeof *ws);
    if (!ws) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for a sparse attention workspace");
    ws->c = *c;
    if (c->predictor == SPARSE_LSH && c->lsh_bits == 0) {
        int b = (int)lround(log2((double)max_T / c->k));
        ws->c.lsh_bits = b < 1 ? 1 : (b > SPARSE_MAX_LSH_BITS ? SPARSE_MAX_LSH_BITS : b);
    }
    c = &ws->c;
    ws->max_T = max_T;
    ws->d = d;
    ws->kcap = c->predictor == SPARSE_DENSE || c->k > max_T ? max_T : c->k;
    size_t T = (size_t)max_T;
    int ok = 1;
#define ALLOC(p, n) (ok = ok && ((p) = malloc(sizeof(*(p)) * (size_t)(n))) != NULL)
    ALLOC(ws->mark, T);
    ALLOC(ws->cand, T);
    ALLOC(ws->ties, T);
    ALLOC(ws->dist, T);
    ALLOC(ws->score, T);
    ALLOC(ws->scratch, T);
    ALLOC(ws->kinv, T);
    ALLOC(ws->idx, T * (size_t)ws->kcap);
    ALLOC(ws->cnt, T);
    if (c->predictor == SPARSE_LSH) {
        size_t tb = (size_t)c->lsh_tables, nb = (size_t)1 << c->lsh_bits;
        ws->n_planes = c->lsh_tables * c->lsh_bits;
        ws->cand_cap = c->lsh_candidates ? c->lsh_candidates : c->k;
        ALLOC(ws->qcode, tb * T);
        ALLOC(ws->kcode, tb * T);
        ALLOC(ws->head, tb * nb);
        ALLOC(ws->prev, tb * T);
        if (ok)
            for (size_t i = 0; i < tb * nb; i++) ws->head[i] = -1;
    } else if (c->predictor == SPARSE_HAMMING) {
        ws->n_planes = c->hamming_bits;
        ALLOC(ws->qh, T);
        ALLOC(ws->kh, T);
    }
    if (ws->n_planes) ALLOC(ws->planes, (size_t)ws->n_planes * d);
#undef ALLOC
    if (!ok) {
        sparse_ws_free(ws);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for a sparse attention workspace (T %d, k %d)", max_T,
                           c->k);
    }
    if (ws->n_planes) {
        rng_state r;
        rng_seed(&r, c->seed);
        for (size_t i = 0; i < (size_t)ws->n_planes * d; i++) ws->planes[i] = (real)rng_normal_polar(&r);
    }
    *out = ws;
    return ENGINE_OK;
}

const sparse_config *sparse_ws_config(const sparse_ws *ws) { return &ws->c; }

const int *sparse_chosen(const sparse_ws *ws, int t, int *n) {
    if (t < 0 || t >= ws->last_T) {
        *n = 0;
        return NULL;
    }
    *n = ws->cnt[t];
    return ws->idx + (size_t)t * ws->kcap;
}

/* ---- kernels ---- */

/* a . b over d, in 8 interleaved partial sums added pairwise, then the tail: a fixed order. */
static inline real dot_d(const real *a, const real *b, int d) {
    real acc[8] = {0};
    int i = 0;
    for (; i + 8 <= d; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    real s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < d; i++) s += a[i] * b[i];
    return s;
}

/* The kth largest (0-based) of a[0..n), n >= 1; a is reordered. Quickselect, median of three. */
static real kth_largest(real *a, int n, int kth) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        real x = a[lo], y = a[mid], z = a[hi];
        real pivot = x > y ? (y > z ? y : (x > z ? z : x)) : (x > z ? x : (y > z ? z : y));
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot) i++;
            while (a[j] < pivot) j--;
            if (i <= j) {
                real t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++, j--;
            }
        }
        if (kth <= j)
            hi = j;
        else if (kth >= i)
            lo = i;
        else
            break;
    }
    return a[kth];
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Ascending; insertion sort for the short lists a query keeps. */
static void sort_ints(int *a, int n) {
    if (n > 64) {
        qsort(a, (size_t)n, sizeof(int), cmp_int);
        return;
    }
    for (int i = 1; i < n; i++) {
        int x = a[i], j = i;
        for (; j > 0 && a[j - 1] > x; j--) a[j] = a[j - 1];
        a[j] = x;
    }
}

/* The kk largest of sc[0..n) (positions 0..n-1; ties: the lower position) into out, ascending.
 * Returns kk. */
static int select_top(sparse_ws *ws, const real *sc, int n, int kk, int *out) {
    memcpy(ws->scratch, sc, sizeof(real) * (size_t)n);
    real thr = kth_largest(ws->scratch, n, kk - 1);
    int above = 0;
    for (int j = 0; j < n; j++) above += sc[j] > thr;
    int ties = kk - above, m = 0;
    for (int j = 0; j < n && m < kk; j++) {
        if (sc[j] > thr)
            out[m++] = j;
        else if (sc[j] == thr && ties > 0)
            out[m++] = j, ties--;
    }
    if (m < kk) { /* only NaN scores leave slots: fill with the most recent keys not taken */
        int *flag = ws->ties;
        for (int j = 0; j < n; j++) flag[j] = 0;
        for (int j = 0; j < m; j++) flag[out[j]] = 1;
        for (int j = n - 1; m < kk && j >= 0; j--)
            if (!flag[j]) out[m++] = j;
        sort_ints(out, m);
    }
    return m;
}

/* select_top for candidates in any order: the kk largest of sc over positions pos (ties: the
 * lower position), into out ascending. Returns the count. */
static int select_top_unordered(sparse_ws *ws, const real *sc, const int *pos, int n, int kk, int *out) {
    if (n <= 0) return 0; /* (callers pass n > kk >= 1; the guard also tells the compiler n is positive) */
    memcpy(ws->scratch, sc, sizeof(real) * (size_t)n);
    real thr = kth_largest(ws->scratch, n, kk - 1);
    int m = 0, nt = 0;
    int *ties = ws->ties;
    for (int j = 0; j < n; j++) {
        if (sc[j] > thr)
            out[m++] = pos[j];
        else if (sc[j] == thr)
            ties[nt++] = pos[j];
    }
    if (m + nt < kk) /* NaN scores: treat them as ties below everything */
        for (int j = 0; j < n; j++)
            if (!(sc[j] >= thr)) ties[nt++] = pos[j];
    sort_ints(ties, nt);
    for (int j = 0; j < nt && m < kk; j++) out[m++] = ties[j];
    sort_ints(out, m);
    return m;
}

static uint64_t sign_code(const real *planes, int nb, const real *x, int d) {
    uint64_t c = 0;
    for (int b = 0; b < nb; b++)
        if (dot_d(planes + (size_t)b * d, x, d) > 0) c |= (uint64_t)1 << b;
    return c;
}

static engine_status check_input(const sparse_ws *ws, const sparse_input *in, engine_error *err) {
    if (in->T < 1 || in->T > ws->max_T)
        return engine_fail(err, ENGINE_ERR_INVALID, "T %d is not in 1..%d", in->T, ws->max_T);
    if (in->d != ws->d)
        return engine_fail(err, ENGINE_ERR_INVALID, "head width %d is not the workspace's %d", in->d, ws->d);
    if (!in->q || !in->k) return engine_fail(err, ENGINE_ERR_INVALID, "q and k are required");
    if (ws->c.predictor == SPARSE_UNROTATED && (!in->q_unrot || !in->k_unrot))
        return engine_fail(err, ENGINE_ERR_INVALID, "the unrotated predictor needs q_unrot and k_unrot");
    return ENGINE_OK;
}

engine_status sparse_select(sparse_ws *ws, const sparse_input *in, engine_error *err) {
    engine_status rc = check_input(ws, in, err);
    if (rc) return rc;
    const sparse_config *c = &ws->c;
    const int T = in->T, d = in->d, K = c->k;
    const size_t MT = (size_t)ws->max_T;
    ws->last_T = T;
    for (int t = 0; t < T; t++) ws->mark[t] = -1;
    const int tables = c->lsh_tables, bits = c->lsh_bits;
    if (c->predictor == SPARSE_LSH) {
        for (int tb = 0; tb < tables; tb++) {
            const real *pl = ws->planes + (size_t)tb * bits * d;
            for (int t = 0; t < T; t++) {
                ws->qcode[tb * MT + t] = (uint32_t)sign_code(pl, bits, in->q + t * in->q_stride, d);
                ws->kcode[tb * MT + t] = (uint32_t)sign_code(pl, bits, in->k + t * in->k_stride, d);
            }
        }
    } else if (c->predictor == SPARSE_HAMMING) {
        for (int t = 0; t < T; t++) {
            ws->qh[t] = sign_code(ws->planes, c->hamming_bits, in->q + t * in->q_stride, d);
            ws->kh[t] = sign_code(ws->planes, c->hamming_bits, in->k + t * in->k_stride, d);
        }
    } else if (c->predictor == SPARSE_UNROTATED) {
        for (int s = 0; s < T; s++) {
            const real *x = in->k_unrot + s * in->unrot_stride;
            double n2 = 0;
            for (int i = 0; i < d; i++) n2 += (double)x[i] * x[i];
            ws->kinv[s] = n2 > 0 ? (real)(1.0 / sqrt(n2)) : 0;
        }
    }
    for (int t = 0; t < T; t++) {
        int n = t + 1, kk = K < n ? K : n;
        int *out = ws->idx + (size_t)t * ws->kcap;
        if (c->predictor == SPARSE_LSH)
            for (int tb = 0; tb < tables; tb++) {
                size_t h = ((size_t)tb << bits) + ws->kcode[tb * MT + t];
                ws->prev[tb * MT + t] = ws->head[h];
                ws->head[h] = t;
            }
        if (c->predictor == SPARSE_DENSE || kk == n) {
            for (int s = 0; s < n; s++) out[s] = s;
            ws->cnt[t] = n;
            continue;
        }
        const real *qt = in->q + t * in->q_stride;
        switch (c->predictor) {
        case SPARSE_WINDOW:
            for (int j = 0; j < kk; j++) out[j] = t - kk + 1 + j;
            ws->cnt[t] = kk;
            break;
        case SPARSE_TOPK:
            for (int s = 0; s < n; s++) ws->score[s] = dot_d(qt, in->k + s * in->k_stride, d);
            ws->cnt[t] = select_top(ws, ws->score, n, kk, out);
            break;
        case SPARSE_UNROTATED: {
            const real *qu = in->q_unrot + t * in->unrot_stride;
            for (int s = 0; s < n; s++) ws->score[s] = dot_d(qu, in->k_unrot + s * in->unrot_stride, d) * ws->kinv[s];
            ws->cnt[t] = select_top(ws, ws->score, n, kk, out);
            break;
        }
        case SPARSE_HAMMING: {
            int hist[SPARSE_MAX_HAMMING_BITS + 1] = {0};
            uint64_t qc = ws->qh[t];
            for (int s = 0; s < n; s++) {
                int dd = __builtin_popcountll(qc ^ ws->kh[s]);
                ws->dist[s] = (unsigned char)dd;
                hist[dd]++;
            }
            int D = 0, below = 0;
            while (below + hist[D] < kk) below += hist[D++];
            int need = kk - below; /* of distance D, the most recent */
            for (int s = t; s >= 0 && need > 0; s--)
                if (ws->dist[s] == D) ws->mark[s] = t, need--;
            int m = 0;
            for (int s = 0; s < n; s++)
                if (ws->dist[s] < D || (ws->dist[s] == D && ws->mark[s] == t)) out[m++] = s;
            ws->cnt[t] = m;
            break;
        }
        case SPARSE_LSH: {
            int nc = 0;
            for (int tb = 0; tb < tables; tb++) {
                int s = ws->head[((size_t)tb << bits) + ws->qcode[tb * MT + t]];
                for (int w = 0; s >= 0 && w < ws->cand_cap; w++, s = ws->prev[tb * MT + s])
                    if (ws->mark[s] != t) {
                        ws->mark[s] = t;
                        ws->cand[nc++] = s;
                    }
            }
            if (nc == 0) {
                out[0] = t;
                ws->cnt[t] = 1;
                break;
            }
            if (nc <= kk) {
                memcpy(out, ws->cand, sizeof(int) * (size_t)nc);
                sort_ints(out, nc);
                ws->cnt[t] = nc;
                break;
            }
            for (int j = 0; j < nc; j++) ws->score[j] = dot_d(qt, in->k + ws->cand[j] * in->k_stride, d);
            ws->cnt[t] = select_top_unordered(ws, ws->score, ws->cand, nc, kk, out);
            break;
        }
        default: break;
        }
    }
    if (c->predictor == SPARSE_LSH) /* leave every bucket empty for the next call */
        for (int tb = 0; tb < tables; tb++)
            for (int t = 0; t < T; t++) ws->head[((size_t)tb << bits) + ws->kcode[tb * MT + t]] = -1;
    return ENGINE_OK;
}

engine_status sparse_attention(sparse_ws *ws, const sparse_input *in, real *y, long y_stride, engine_error *err) {
    engine_status rc = sparse_select(ws, in, err);
    if (rc) return rc;
    const int T = in->T, d = in->d;
    real *sc = ws->score;
    for (int t = 0; t < T; t++) {
        const int *c = ws->idx + (size_t)t * ws->kcap, n = ws->cnt[t];
        const real *qt = in->q + t * in->q_stride;
        real mx = -INFINITY;
        for (int j = 0; j < n; j++) {
            sc[j] = in->scale * dot_d(qt, in->k + c[j] * in->k_stride, d);
            if (sc[j] > mx) mx = sc[j];
        }
        double sum = 0;
        for (int j = 0; j < n; j++) {
            sc[j] = rexp(sc[j] - mx);
            sum += sc[j];
        }
        real inv = (real)(1.0 / sum);
        real *yt = y + t * y_stride;
        for (int i = 0; i < d; i++) yt[i] = 0;
        for (int j = 0; j < n; j++) {
            real p = sc[j] * inv;
            const real *vs = in->v + c[j] * in->v_stride;
            for (int i = 0; i < d; i++) yt[i] += p * vs[i];
        }
    }
    return ENGINE_OK;
}

void sparse_quality_add(sparse_ws *ws, const real *att, long att_stride, sparse_quality *q) {
    const int K = ws->c.k;
    for (int t = 0; t < ws->last_T; t++) {
        int n = t + 1;
        if (n <= K) continue;
        const real *w = att + t * att_stride;
        memcpy(ws->scratch, w, sizeof(real) * (size_t)n);
        real thr = kth_largest(ws->scratch, n, K - 1);
        const int *c = ws->idx + (size_t)t * ws->kcap, m = ws->cnt[t];
        int hits = 0;
        double mass = 0;
        for (int j = 0; j < m; j++) {
            hits += w[c[j]] >= thr;
            mass += w[c[j]];
        }
        q->recall += (double)(hits < K ? hits : K) / K;
        q->mass += mass;
        q->keys += m;
        q->queries++;
    }
}

/* ---- a whole model with sparse attention ---- */

enum { EV_ENCODE, EV_FWD_A, EV_ATT, EV_FWD_B, EV_FINAL, EV_LMHEAD, EV_ARGMAX };

#define EV_ARGMAX_ROWS 16

typedef struct {
    const real *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb, *scale, *ln2w, *ln2b, *fcw, *fcb, *fcpw, *fcpb;
} ev_layer;

struct sparse_eval {
    model *m;
    const attention_variant *v;
    attention_scale sc;
    int L, H, C, d, V, Tmax, max_B, nth;
    threadpool *pool;
    const real *wte, *wpe, *lnfw, *lnfb, *lm;
    ev_layer *lp;
    real *x, *x2, *ln, *mean, *rstd, *qkv, *qk, *aux, *atty, *res1, *fch, *gel, *lnf, *losses;
    real *rope_cos, *rope_sin;
    real *att_th, *y_th, *logit_th, *lm_buf;
    size_t lm_stride;
    lmhead_bf16 *lm_bf;
    atomic_long tickets[LMHEAD_SLICES];
    sparse_ws **ws; /* [nth] */
    sparse_config ws_cfg;
    int have_ws, gather_always;
    sparse_quality *uq; /* [max_B * H] */
    /* the pass in progress */
    int ph, layer, B, T, want_q, dense;
    long rows_chunk, n_chunks;
    const int32_t *inputs, *targets;
    int32_t *argmax;
    const sparse_config *cfg;
};

void sparse_eval_free(sparse_eval *ev) {
    if (!ev) return;
    free(ev->lp);
    free(ev->x);
    free(ev->x2);
    free(ev->ln);
    free(ev->mean);
    free(ev->rstd);
    free(ev->qkv);
    free(ev->qk);
    free(ev->aux);
    free(ev->atty);
    free(ev->res1);
    free(ev->fch);
    free(ev->gel);
    free(ev->lnf);
    free(ev->losses);
    free(ev->rope_cos);
    free(ev->rope_sin);
    free(ev->att_th);
    free(ev->y_th);
    free(ev->logit_th);
    free(ev->lm_buf);
    free(ev->uq);
    lmhead_bf16_free(ev->lm_bf);
    if (ev->ws)
        for (int i = 0; i < ev->nth; i++) sparse_ws_free(ev->ws[i]);
    free(ev->ws);
    free(ev);
}

void sparse_eval_set_gather_always(sparse_eval *ev, int on) { ev->gather_always = on; }

static const real *tensor(model *m, const char *name, size_t numel, engine_error *err, int *bad) {
    const model_tensor *t = model_tensor_find(m, name);
    if (!t || t->numel != numel) {
        if (!*bad) engine_fail(err, ENGINE_ERR_INVALID, "the model has no tensor %s of %zu values", name, numel);
        *bad = 1;
        return NULL;
    }
    return model_params(m) + t->offset;
}

engine_status sparse_eval_new(sparse_eval **out, model *m, int max_B, engine_error *err) {
    *out = NULL;
    const model_config *c = model_get_config(m);
    const attention_variant *v = model_config_attention(c);
    if (!v) return engine_fail(err, ENGINE_ERR_INVALID, "the model's attention variant is unknown");
    if (max_B < 1) return engine_fail(err, ENGINE_ERR_INVALID, "batch %d is not >= 1", max_B);
    sparse_eval *ev = calloc(1, sizeof *ev);
    if (!ev) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for the sparse evaluator");
    ev->m = m;
    ev->v = v;
    ev->sc = model_config_scale(c);
    ev->L = c->n_layer, ev->H = c->n_head, ev->C = c->d_model, ev->d = c->d_model / c->n_head;
    ev->V = c->vocab, ev->Tmax = c->seq_len, ev->max_B = max_B;
    ev->pool = model_threads(m);
    ev->nth = threads_count(ev->pool);
    const size_t C = (size_t)ev->C, N = (size_t)max_B * ev->Tmax, T = (size_t)ev->Tmax, H = (size_t)ev->H;
    const size_t A = (size_t)v->aux_per_head, nth = (size_t)ev->nth;
    int bad = 0;
    char nm[48];
    ev->wte = tensor(m, "wte", (size_t)ev->V * C, err, &bad);
    if (v->flags & ATTENTION_LEARNED_POSITIONS) ev->wpe = tensor(m, "wpe", T * C, err, &bad);
    ev->lnfw = tensor(m, "lnf.w", C, err, &bad);
    ev->lnfb = tensor(m, "lnf.b", C, err, &bad);
    ev->lm = tensor(m, "lm_head.w", (size_t)ev->V * C, err, &bad);
    ev->lp = calloc((size_t)ev->L, sizeof *ev->lp);
    if (!ev->lp) {
        sparse_eval_free(ev);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for the sparse evaluator");
    }
    for (int l = 0; l < ev->L && !bad; l++) {
        ev_layer *p = &ev->lp[l];
#define TN(field, suffix, n) (snprintf(nm, sizeof nm, "h.%d.%s", l, suffix), p->field = tensor(m, nm, n, err, &bad))
        TN(ln1w, "ln1.w", C);
        TN(ln1b, "ln1.b", C);
        TN(qkvw, "attn.qkv.w", 3 * C * C);
        TN(qkvb, "attn.qkv.b", 3 * C);
        TN(projw, "attn.proj.w", C * C);
        TN(projb, "attn.proj.b", C);
        if (v->scale != ATTENTION_SCALE_FIXED) TN(scale, v->scale_suffix, H);
        TN(ln2w, "ln2.w", C);
        TN(ln2b, "ln2.b", C);
        TN(fcw, "mlp.fc.w", 4 * C * C);
        TN(fcb, "mlp.fc.b", 4 * C);
        TN(fcpw, "mlp.proj.w", 4 * C * C);
        TN(fcpb, "mlp.proj.b", C);
#undef TN
    }
    if (bad) {
        sparse_eval_free(ev);
        return ENGINE_ERR_INVALID;
    }
    ev->lm_stride = lmhead_scratch_per_thread(ev->C, ev->V);
    int ok = 1;
#define ALLOC(p, n) (ok = ok && ((p) = malloc(sizeof(*(p)) * (size_t)(n))) != NULL)
    ALLOC(ev->x, N * C);
    ALLOC(ev->x2, N * C);
    ALLOC(ev->ln, N * C);
    ALLOC(ev->mean, N);
    ALLOC(ev->rstd, N);
    ALLOC(ev->qkv, N * 3 * C);
    if (v->qk_forward) ALLOC(ev->qk, N * 2 * C);
    if (A) ALLOC(ev->aux, N * 2 * H * A);
    ALLOC(ev->atty, N * C);
    ALLOC(ev->res1, N * C);
    ALLOC(ev->fch, N * 4 * C);
    ALLOC(ev->gel, N * 4 * C);
    ALLOC(ev->lnf, N * C);
    ALLOC(ev->losses, N);
    ALLOC(ev->rope_cos, T * (size_t)(ev->d / 2 > 0 ? ev->d / 2 : 1));
    ALLOC(ev->rope_sin, T * (size_t)(ev->d / 2 > 0 ? ev->d / 2 : 1));
    ALLOC(ev->att_th, nth * T * T);
    ALLOC(ev->y_th, nth * T * (size_t)ev->d);
    ALLOC(ev->logit_th, nth * EV_ARGMAX_ROWS * (size_t)ev->V);
    ALLOC(ev->lm_buf, nth * ev->lm_stride);
    ALLOC(ev->uq, (size_t)max_B * H);
    ev->ws = calloc(nth, sizeof *ev->ws);
    ok = ok && ev->ws;
#undef ALLOC
    if (!ok) {
        sparse_eval_free(ev);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for the sparse evaluator (batch %d)", max_B);
    }
    if (v->flags & ATTENTION_ROTATES) rope_tables(ev->rope_cos, ev->rope_sin, ev->Tmax, ev->d, c->rope_base);
#if !REAL_IS_DOUBLE
    if (model_precision(m) == PRECISION_BF16 && lmhead_bf16_applies(ev->C)) {
        engine_status rc = lmhead_bf16_new_on(&ev->lm_bf, ev->V, ev->C, model_kernel_path(m), err);
        if (rc) {
            sparse_eval_free(ev);
            return rc;
        }
    }
#endif
    *out = ev;
    return ENGINE_OK;
}

/* Row work items: the same boundaries as model.c's (a function of the pass size only). */
static long ev_row_chunk(long N) {
    long r = (N + 15) / 16;
    return r < 1 ? 1 : (r > 256 ? 256 : r);
}

static void ev_rows(sparse_eval *ev, int tid, long r0, long r1) {
    const int C = ev->C, T = ev->T;
    const long nr = r1 - r0;
    const ev_layer *p = ev->layer >= 0 ? &ev->lp[ev->layer] : NULL;
    switch (ev->ph) {
    case EV_ENCODE:
        for (long r = r0; r < r1; r++) {
            const real *e = ev->wte + (size_t)ev->inputs[r] * C;
            real *x = ev->x + r * C;
            if (ev->wpe) {
                const real *pe = ev->wpe + (size_t)(r % T) * C;
                for (int i = 0; i < C; i++) x[i] = e[i] + pe[i];
            } else {
                memcpy(x, e, sizeof(real) * (size_t)C);
            }
        }
        break;
    case EV_FWD_A:
        layernorm_forward(ev->ln + r0 * C, ev->mean + r0, ev->rstd + r0, ev->x + r0 * C, p->ln1w, p->ln1b, nr, C);
        model_linear_forward(ev->m, tid, ev->layer, MODEL_LINEAR_QKV, ev->qkv + r0 * 3 * C, ev->ln + r0 * C, nr);
        break;
    case EV_FWD_B:
        model_linear_forward(ev->m, tid, ev->layer, MODEL_LINEAR_PROJ, ev->res1 + r0 * C, ev->atty + r0 * C, nr);
        for (long i = r0 * C; i < r1 * C; i++) ev->res1[i] += ev->x[i];
        layernorm_forward(ev->ln + r0 * C, ev->mean + r0, ev->rstd + r0, ev->res1 + r0 * C, p->ln2w, p->ln2b, nr, C);
        model_linear_forward(ev->m, tid, ev->layer, MODEL_LINEAR_FC, ev->fch + r0 * 4 * C, ev->ln + r0 * C, nr);
        gelu_forward(ev->gel + r0 * 4 * C, ev->fch + r0 * 4 * C, nr * 4 * C);
        model_linear_forward(ev->m, tid, ev->layer, MODEL_LINEAR_FCP, ev->x2 + r0 * C, ev->gel + r0 * 4 * C, nr);
        for (long i = r0 * C; i < r1 * C; i++) ev->x2[i] += ev->res1[i];
        break;
    case EV_FINAL:
        layernorm_forward(ev->lnf + r0 * C, ev->mean + r0, ev->rstd + r0, ev->x + r0 * C, ev->lnfw, ev->lnfb, nr, C);
        break;
    default: break;
    }
}

static void ev_unit(sparse_eval *ev, long u, int tid) {
    const int C = ev->C, H = ev->H, d = ev->d, T = ev->T, A = ev->v->aux_per_head;
    const int b = (int)(u / H), h = (int)(u % H);
    const size_t row0 = (size_t)b * T;
    const ev_layer *p = &ev->lp[ev->layer];
    int rot = ev->v->qk_forward != NULL;
    if (rot) {
        attention_qk_unit qu = {
            .T = T,
            .d = d,
            .q = ev->qkv + row0 * 3 * C + (size_t)h * d,
            .raw_stride = 3 * C,
            .q_used = ev->qk + row0 * 2 * C + (size_t)h * d,
            .used_stride = 2 * C,
            .aux_stride = 2L * H * A,
            .rope_cos = ev->rope_cos,
            .rope_sin = ev->rope_sin,
        };
        qu.k = qu.q + C;
        qu.k_used = qu.q_used + C;
        if (A) {
            qu.q_aux = ev->aux + row0 * 2 * H * A + (size_t)h * A;
            qu.k_aux = qu.q_aux + (size_t)H * A;
        }
        ev->v->qk_forward(&qu);
    }
    const real *q = rot ? ev->qk + row0 * 2 * C + (size_t)h * d : ev->qkv + row0 * 3 * C + (size_t)h * d;
    const int qs = rot ? 2 * C : 3 * C;
    const real *vv = ev->qkv + row0 * 3 * C + 2 * C + (size_t)h * d;
    real theta = p->scale ? p->scale[h] : 0;
    real g = attention_scale_value(ev->v, &ev->sc, d, theta);
    real *y = ev->atty + row0 * C + (size_t)h * d;
    real *att = ev->att_th + (size_t)tid * ev->Tmax * ev->Tmax;
    double ent = 0;
    if (ev->dense) {
        attention_forward_unit(q, q + C, qs, vv, 3 * C, att, y, C, T, d, g, &ent);
        if (!ev->want_q) return;
    }
    sparse_input in = {.T = T,
                       .d = d,
                       .q = q,
                       .k = q + C,
                       .v = vv,
                       .q_stride = qs,
                       .k_stride = qs,
                       .v_stride = 3 * C,
                       .scale = g,
                       .q_unrot = ev->qkv + row0 * 3 * C + (size_t)h * d,
                       .unrot_stride = 3 * C};
    in.k_unrot = in.q_unrot + C;
    sparse_ws *ws = ev->ws[tid];
    /* inputs were checked when the evaluator and the config were; these cannot fail */
    if (ev->dense) {
        sparse_select(ws, &in, NULL);
    } else {
        sparse_attention(ws, &in, y, C, NULL);
        if (!ev->want_q) return;
        attention_forward_unit(q, q + C, qs, vv, 3 * C, att, ev->y_th + (size_t)tid * T * d, d, T, d, g, &ent);
    }
    sparse_quality_add(ws, att, T, &ev->uq[u]);
}

static void ev_argmax(sparse_eval *ev, long item, int tid) {
    const int C = ev->C, V = ev->V;
    const long N = (long)ev->B * ev->T, r0 = item * EV_ARGMAX_ROWS;
    const long nr = N - r0 < EV_ARGMAX_ROWS ? N - r0 : EV_ARGMAX_ROWS;
    real *lg = ev->logit_th + (size_t)tid * EV_ARGMAX_ROWS * V;
    linear_forward(lg, ev->lnf + r0 * C, ev->lm, NULL, nr, C, V);
    for (long r = 0; r < nr; r++) {
        const real *row = lg + r * V;
        int best = 0;
        for (int i = 1; i < V; i++)
            if (row[i] > row[best]) best = i;
        ev->argmax[r0 + r] = best;
    }
}

static void ev_phase(void *ctx, int tid, int nth) {
    sparse_eval *ev = ctx;
    const long N = (long)ev->B * ev->T;
    switch (ev->ph) {
    case EV_ATT:
        for (long u; (u = threads_next(ev->pool)) < (long)ev->B * ev->H;) ev_unit(ev, u, tid);
        break;
    case EV_LMHEAD: {
        long R = (N + 15) / 16;
        if (ev->lm_bf || lmhead_uses_kernels(ev->C)) R = (R + 15) / 16 * 16;
        if (R > lmhead_max_rows(ev->lm_bf)) R = lmhead_max_rows(ev->lm_bf);
        lmhead_args la = {
            .x = ev->lnf,
            .w = ev->lm,
            .targets = ev->targets,
            .N = N,
            .C = ev->C,
            .V = ev->V,
            .losses = ev->losses,
            .grad_scale = (real)(1.0 / (double)N),
            .buf = ev->lm_buf,
            .buf_stride = ev->lm_stride,
            .chunk_rows = (int)R,
            .tickets = ev->tickets,
            .bf = ev->lm_bf,
        };
        lmhead_thread(&la, ev->pool, tid, nth);
        break;
    }
    case EV_ARGMAX:
        for (long k; (k = threads_next(ev->pool)) < (N + EV_ARGMAX_ROWS - 1) / EV_ARGMAX_ROWS;) ev_argmax(ev, k, tid);
        break;
    default:
        for (long k; (k = threads_next(ev->pool)) < ev->n_chunks;) {
            long r0 = k * ev->rows_chunk, r1 = r0 + ev->rows_chunk < N ? r0 + ev->rows_chunk : N;
            ev_rows(ev, tid, r0, r1);
        }
        break;
    }
}

static void ev_run(sparse_eval *ev, int ph, int layer) {
    ev->ph = ph;
    ev->layer = layer;
    if (ph == EV_LMHEAD)
        for (int i = 0; i < LMHEAD_SLICES; i++) atomic_store(&ev->tickets[i], 0);
    threads_run(ev->pool, ev_phase, ev);
}

static int same_config(const sparse_config *a, const sparse_config *b) {
    return a->predictor == b->predictor && a->k == b->k && a->lsh_tables == b->lsh_tables &&
           a->lsh_bits == b->lsh_bits && a->lsh_candidates == b->lsh_candidates && a->hamming_bits == b->hamming_bits &&
           a->seed == b->seed;
}

engine_status sparse_eval_run(sparse_eval *ev, const sparse_config *cfg, const int32_t *inputs, const int32_t *targets,
                              int B, int T, double *loss, int32_t *argmax, sparse_quality *quality, engine_error *err) {
    engine_status rc = sparse_config_validate(cfg, ev->d, err);
    if (rc) return rc;
    if (B < 1 || B > ev->max_B) return engine_fail(err, ENGINE_ERR_INVALID, "batch %d is not in 1..%d", B, ev->max_B);
    if (T < 1 || T > ev->Tmax)
        return engine_fail(err, ENGINE_ERR_INVALID, "sequence length %d exceeds the model's %d", T, ev->Tmax);
    const long N = (long)B * T;
    for (long i = 0; i < N; i++) {
        if (inputs[i] < 0 || inputs[i] >= ev->V)
            return engine_fail(err, ENGINE_ERR_INVALID, "token id %d at position %ld is outside the vocabulary (0..%d)",
                               inputs[i], i, ev->V - 1);
        if (targets && (targets[i] < 0 || targets[i] >= ev->V))
            return engine_fail(err, ENGINE_ERR_INVALID,
                               "target token id %d at position %ld is outside the vocabulary (0..%d)", targets[i], i,
                               ev->V - 1);
    }
    ev->dense = !ev->gather_always && (cfg->predictor == SPARSE_DENSE || cfg->k >= T);
    ev->want_q = quality != NULL;
    if ((!ev->dense || ev->want_q) && (!ev->have_ws || !same_config(&ev->ws_cfg, cfg))) {
        for (int i = 0; i < ev->nth; i++) {
            sparse_ws_free(ev->ws[i]);
            ev->ws[i] = NULL;
        }
        ev->have_ws = 0;
        for (int i = 0; i < ev->nth; i++)
            if ((rc = sparse_ws_new(&ev->ws[i], cfg, ev->Tmax, ev->d, err))) return rc;
        ev->ws_cfg = *cfg;
        ev->have_ws = 1;
    }
    ev->cfg = cfg;
    ev->B = B, ev->T = T;
    ev->inputs = inputs, ev->targets = targets, ev->argmax = argmax;
    ev->rows_chunk = ev_row_chunk(N);
    ev->n_chunks = (N + ev->rows_chunk - 1) / ev->rows_chunk;
    model_linear_prepare(ev->m);
    ev_run(ev, EV_ENCODE, -1);
    for (int l = 0; l < ev->L; l++) {
        ev_run(ev, EV_FWD_A, l);
        if (ev->want_q) memset(ev->uq, 0, sizeof(sparse_quality) * (size_t)B * ev->H);
        ev_run(ev, EV_ATT, l);
        if (ev->want_q)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < ev->H; h++) {
                    const sparse_quality *s = &ev->uq[(size_t)b * ev->H + h];
                    sparse_quality *dst = &quality[(size_t)l * ev->H + h];
                    dst->recall += s->recall, dst->mass += s->mass, dst->keys += s->keys, dst->queries += s->queries;
                }
        ev_run(ev, EV_FWD_B, l);
        real *t = ev->x;
        ev->x = ev->x2, ev->x2 = t;
    }
    ev_run(ev, EV_FINAL, -1);
    if (targets) {
#if !REAL_IS_DOUBLE
        if (ev->lm_bf) lmhead_bf16_refresh(ev->lm_bf, ev->lm, ev->pool);
#endif
        ev_run(ev, EV_LMHEAD, -1);
        double s = 0;
        for (long i = 0; i < N; i++) s += ev->losses[i];
        if (loss) *loss = s / (double)N;
    }
    if (argmax) ev_run(ev, EV_ARGMAX, -1);
    return ENGINE_OK;
}

engine_status sparse_eval_split(sparse_eval *ev, const sparse_config *cfg, const corpus *c,
                                const corpus_loader_config *lc, corpus_split split, int n_batches,
                                const tasks_corpus *tc, double *mean_loss, tasks_acc *acc, engine_error *err) {
    const int B = lc->batch, T = lc->seq_len;
    if (B < 1 || B > ev->max_B) return engine_fail(err, ENGINE_ERR_INVALID, "batch %d is not in 1..%d", B, ev->max_B);
    if (T < 1 || T > ev->Tmax)
        return engine_fail(err, ENGINE_ERR_INVALID, "sequence length %d exceeds the model's %d", T, ev->Tmax);
    if (n_batches < 1) return engine_fail(err, ENGINE_ERR_INVALID, "n_batches %d is not >= 1", n_batches);
    corpus_loader *l;
    engine_status rc = corpus_loader_new(&l, c, lc, err);
    if (rc) return rc;
    const size_t N = (size_t)B * T;
    int32_t *batch = malloc(sizeof(int32_t) * (size_t)B * (T + 1)), *in = malloc(sizeof(int32_t) * N),
            *tg = malloc(sizeof(int32_t) * N), *am = tc && acc ? malloc(sizeof(int32_t) * N) : NULL;
    uint8_t *lab = tc && acc ? malloc(N) : NULL;
    if (!batch || !in || !tg || (tc && acc && (!am || !lab))) {
        rc = engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for evaluation batches");
        goto done;
    }
    double sum = 0;
    for (int i = 0; i < n_batches; i++) {
        if ((rc = corpus_loader_batch(l, split, i, batch, err))) goto done;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                in[b * T + t] = batch[b * (T + 1) + t];
                tg[b * T + t] = batch[b * (T + 1) + t + 1];
            }
        double loss = 0;
        if ((rc = sparse_eval_run(ev, cfg, in, tg, B, T, &loss, am, NULL, err))) goto done;
        sum += loss;
        if (am) {
            for (int b = 0; b < B; b++) {
                size_t start;
                if ((rc = corpus_loader_window_start(l, split, i, b, &start, err))) goto done;
                tasks_window_labels(tc, start, T, lab + (size_t)b * T);
            }
            tasks_acc_add(acc, am, tg, lab, (long)N);
        }
    }
    if (mean_loss) *mean_loss = sum / n_batches;
done:
    corpus_loader_free(l);
    free(batch), free(in), free(tg), free(am), free(lab);
    return rc;
}
