#include "model.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"
#include "gemm.h"
#include "layers.h"
#include "lmhead.h"
#include "mem.h"
#include "rng.h"
#include "threads.h"

#define ROW_CHUNK_MAX 256 /* rows per work item; fewer for small passes so work still spreads */
#define OUT_CHUNK 32      /* output features per work item of a weight-gradient product */
#define DWG_PAD 32        /* entries past the tokens in each row of an item's transposed gradient (dwg) */
_Static_assert(OUT_CHUNK % 32 == 0, "the tile products of the weight gradients take OUT_CHUNK outputs as N");

/* Work is handed out in items whose boundaries depend only on the pass's size, never on the
 * thread count, and per-item partial sums are added in item order: results are bit-identical
 * whatever the number of threads. */
static long row_chunk_for(long N) {
    long r = (N + 15) / 16;
    return r < 1 ? 1 : (r > ROW_CHUNK_MAX ? ROW_CHUNK_MAX : r);
}

/* Offsets of one block's parameters inside the flat parameter/gradient arrays. */
typedef struct {
    size_t ln1w, ln1b, qkvw, qkvb, projw, projb, scale, ln2w, ln2b, fcw, fcb, fcpw, fcpb; /* scale: -1 if none */
} layer_off;

/* Per-layer activations kept for the backward pass (pointers into one block). */
typedef struct {
    real *ln1, *ln1_mean, *ln1_rstd; /* [N,C], [N], [N] */
    real *qkv;                       /* [N,3C] */
    real *qk;                        /* [N,2C] q|k as the score uses them (variants with a q/k transform) */
    real *qk_aux;                    /* [N,2H*A] what the transform keeps for its backward (A per head) */
    real *att;                       /* [B,H,T,T] */
    real *atty;                      /* [N,C] */
    real *res1;                      /* [N,C] */
    real *ln2, *ln2_mean, *ln2_rstd;
    real *fch;  /* [N,4C] before GELU */
    real *res2; /* [N,C] block output */
} layer_acts;

/* The phases of a pass, in order; a block's backward runs its layers from the top down:
 * _DX phases carry the input gradients over rows, _DW phases the weight gradients over output
 * columns (gemm_tn), so that each writes its own part of every buffer. */
enum {
    PH_ENCODE,      /* token and position embeddings */
    PH_FWD_A,       /* layernorm 1, qkv */
    PH_FWD_ATT,     /* attention, per (batch element, head) */
    PH_FWD_B,       /* output projection, residual, layernorm 2, MLP, residual */
    PH_FINAL,       /* the final layernorm */
    PH_LMHEAD,      /* the fused output layer, softmax and cross-entropy (lmhead.c) */
    PH_LNF_BWD,     /* the final layernorm's backward */
    PH_BWD_MLP_DX,  /* through the MLP's output projection and GELU */
    PH_BWD_DW_PACK, /* amx: the next _DW phase's inputs packed for the tiles (dw_inputs) */
    PH_BWD_MLP_DW,  /* the MLP's weight and bias gradients */
    PH_BWD_LN2_DX,  /* through the MLP's input projection, layernorm 2 and the output projection */
    PH_BWD_PROJ_DW, /* the output projection's weight and bias gradients */
    PH_BWD_ATT,     /* attention's backward, per (batch element, head) */
    PH_BWD_QKV_DW,  /* qkv's weight and bias gradients */
    PH_BWD_LN1_DX,  /* through qkv and layernorm 1 */
};

struct model {
    model_config cfg;
    double phase_s[MODEL_TIME_PARTS]; /* wall time of this pass's phases by part (model_time_ms) */
    const attention_variant *att;     /* the config's row of the attention table */
    attention_scale scale;            /* its score multiplier, as the config parameterises it */
    int max_B, n_threads, with_grads;
    int C, H, d, L, V, Tmax;
    threadpool *pool;

    model_tensor *tensors; /* [max_tensors], sized from the layout (layout_tensor_count) */
    int n_tensors, max_tensors, layout_overflow;
    size_t n_params;
    size_t wte, wpe, lnfw, lnfb, lm_head; /* offsets; wpe is (size_t)-1 without it */
    layer_off *lo;

    real *params, *grads;
    real *act_block;
    real *x0;       /* [N,C] embeddings */
    layer_acts *la; /* [L] */
    real *lnf, *lnf_mean, *lnf_rstd, *losses;
    real *rope_cos, *rope_sin; /* [Tmax, d/2] */
    /* backward scratch */
    real *dres, *dln, *dqkv, *datty, *dfch;
    /* The MLP's GELU output [N,4C], needed only between the two products of one block (forward)
     * and recomputed for each block's backward; it shares memory with lm_buf, which is in use
     * only in the lm-head and (as scratch) in attention's backward, never at the same time. */
    real *gelu;
    real *lm_buf;   /* nthreads * chunk * V */
    real *part;     /* per row chunk partial sums: [max_row_chunks][2C] LayerNorm dw|db */
    double *part_d; /* per (b, h) unit: entropy [max_B*H] | dscale [max_B*H] */
    long max_row_chunks;
    size_t lm_per_thread; /* reals of lm_buf per thread */
    double entropy[24 * 1024];
    atomic_long tickets[LMHEAD_SLICES];
    /* the current pass */
    int ph, ph_layer, B, T, train;
    int lmhead_blas;
    precision_kind precision;
    lmhead_bf16 *lm_bf;  /* bf16 copies of lm_head (bf16 precision) */
    atomic_int bf_stale; /* parameters may have changed since lm_bf was refreshed (set from any thread) */
    /* bf16 precision on a path with a bf16 unit: the blocks' four linear products (forward and input
     * gradients) read bf16 too: wpk holds each weight packed both ways (wpk_at), refreshed before a
     * pass when pk_stale; bscr is per thread scratch for a row chunk's bf16 inputs. NULL otherwise. */
    bf16 *wpk, *bscr;
    size_t bscr_per;
    atomic_int pk_stale;
    bf16 *wpt; /* on amx, the same packed weights in the tile layout (gemm_bf16_pack_tiles); else NULL */
    /* on the amx path the weight gradients take the tiles too (dw_product): dwx holds the inputs of
     * the _DW phase dw_next packed in tiles, K the tokens (PH_BWD_DW_PACK), dwg per thread (dwg_per
     * each) a work item's output-gradient columns transposed. NULL otherwise. */
    bf16 *dwx, *dwg;
    size_t dwg_per;
    int dw_next;
    int (*interrupt)(void *ctx); /* polled between layers; non-zero stops the pass */
    void *interrupt_ctx;
    long rows_chunk, n_row_chunks; /* row chunks of this pass: fixed by B*T, not by threads */
    const int32_t *inputs, *targets;
    long n_counted; /* targets that are not MODEL_TARGET_IGNORE */
};

/* ---- configuration ---- */

void model_config_defaults(model_config *c) {
    memset(c, 0, sizeof *c);
    c->n_layer = 3;
    c->n_head = 4;
    c->d_model = 128;
    c->seq_len = 128;
    c->vocab = 50257;
    c->attention = attention_index("dot");
    c->rope_base = 10000.0;
    c->tau_init = 0.0;
    c->tau_param = TAU_PARAM_LINEAR;
    c->scale_init = 0.0;
    c->scale_param = TAU_PARAM_LINEAR;
    c->scale_clamp = 0.0;
}

static double scale_init_value(const model_config *c) {
    return attention_scale_init(c->scale_init, c->d_model / c->n_head);
}

engine_status model_config_validate(const model_config *c, engine_error *err) {
    if (c->n_layer < 1 || c->n_layer > 24)
        return engine_fail(err, ENGINE_ERR_INVALID, "n_layer %d is not in 1..24", c->n_layer);
    if (c->d_model < 2 || c->d_model > 1024)
        return engine_fail(err, ENGINE_ERR_INVALID, "d_model %d is not in 2..1024", c->d_model);
    if (c->n_head < 1 || c->d_model % c->n_head != 0)
        return engine_fail(err, ENGINE_ERR_INVALID, "n_head %d does not divide d_model %d", c->n_head, c->d_model);
    const attention_variant *v = model_config_attention(c);
    if (!v) return engine_fail(err, ENGINE_ERR_INVALID, "unknown attention kind %d", c->attention);
    if ((v->flags & ATTENTION_ROTATES) && (c->d_model / c->n_head) % 2 != 0)
        return engine_fail(err, ENGINE_ERR_INVALID, "head width %d is odd (RoPE needs pairs)", c->d_model / c->n_head);
    if (c->seq_len < 1 || c->seq_len > 4096)
        return engine_fail(err, ENGINE_ERR_INVALID, "seq_len %d is not in 1..4096", c->seq_len);
    if (c->vocab < 2 || c->vocab > (1 << 20))
        return engine_fail(err, ENGINE_ERR_INVALID, "vocab %d is not in 2..1048576", c->vocab);
    if (!(c->rope_base > 1.0) || !isfinite(c->rope_base))
        return engine_fail(err, ENGINE_ERR_INVALID, "rope_base %g must be a finite number > 1", c->rope_base);
    if (!isfinite(c->tau_init) || c->tau_init > 1e6)
        return engine_fail(err, ENGINE_ERR_INVALID, "tau_init %g is not a usable temperature", c->tau_init);
    if ((unsigned)c->tau_param > TAU_PARAM_LOG)
        return engine_fail(err, ENGINE_ERR_INVALID, "unknown tau_param %d", (int)c->tau_param);
    if (!isfinite(c->scale_init) || c->scale_init > 1e6)
        return engine_fail(err, ENGINE_ERR_INVALID, "scale_init %g is not a usable scale", c->scale_init);
    if ((unsigned)c->scale_param > TAU_PARAM_LOG)
        return engine_fail(err, ENGINE_ERR_INVALID, "unknown scale_param %d", (int)c->scale_param);
    if (!isfinite(c->scale_clamp) || c->scale_clamp < 0)
        return engine_fail(err, ENGINE_ERR_INVALID, "scale_clamp %g must be 0 (none) or a finite bound",
                           c->scale_clamp);
    if (c->scale_clamp > 0 && c->scale_clamp < scale_init_value(c))
        return engine_fail(err, ENGINE_ERR_INVALID, "scale_clamp %g is below the initial scale %g", c->scale_clamp,
                           scale_init_value(c));
    return ENGINE_OK;
}

const attention_variant *model_config_attention(const model_config *c) { return attention_at(c->attention); }

const char *tau_param_name(tau_param_kind k) { return k == TAU_PARAM_LOG ? "log" : "linear"; }

int tau_param_parse(const char *s, tau_param_kind *k) {
    if (!s) return -1;
    if (!strcmp(s, "linear"))
        *k = TAU_PARAM_LINEAR;
    else if (!strcmp(s, "log"))
        *k = TAU_PARAM_LOG;
    else
        return -1;
    return 0;
}

static double tau_init_value(const model_config *c) {
    return attention_scale_init(c->tau_init, c->d_model / c->n_head);
}

attention_scale model_config_scale(const model_config *c) {
    const attention_variant *v = model_config_attention(c);
    attention_scale s = {.form = v ? v->scale : ATTENTION_SCALE_FIXED, .param = TAU_PARAM_LINEAR, .init = 0};
    if (s.form == ATTENTION_SCALE_TAU) {
        s.param = c->tau_param;
        s.init = tau_init_value(c);
    } else if (s.form == ATTENTION_SCALE_MULT) {
        s.param = c->scale_param;
        s.init = scale_init_value(c);
        s.clamp = c->scale_clamp;
    }
    return s;
}

size_t model_config_param_count(const model_config *c) {
    size_t C = (size_t)c->d_model, V = (size_t)c->vocab, L = (size_t)c->n_layer;
    const attention_variant *v = model_config_attention(c);
    size_t n = 2 * V * C + 2 * C;
    if (v && (v->flags & ATTENTION_LEARNED_POSITIONS)) n += (size_t)c->seq_len * C;
    n += L * (12 * C * C + 13 * C);
    if (v) n += L * (size_t)attention_layer_extra_tensors(v) * (size_t)c->n_head;
    return n;
}

double model_config_train_flops_per_token(const model_config *c) {
    double C = c->d_model, L = c->n_layer, V = c->vocab, T = c->seq_len;
    double matmul_params = L * 12 * C * C + V * C;
    /* causal attention: QK^T and AV over on average T/2 keys, 2 FLOPs each, per layer */
    double attn = L * 2 * T * C;
    return 6 * matmul_params + 3 * attn;
}

/* ---- layout ---- */

/* Tensors in the layout of config c: wte, wpe (learned positions), 12 per block plus the
 * variant's own, lnf.w, lnf.b, lm_head.w. */
static int layout_tensor_count(const model_config *c) {
    const attention_variant *v = model_config_attention(c);
    return 4 + !!(v->flags & ATTENTION_LEARNED_POSITIONS) + c->n_layer * (12 + attention_layer_extra_tensors(v));
}

/* Appends one tensor and returns its offset. Past the counted capacity, or with a name too long
 * for model_tensor, it records the overflow and returns (size_t)-1; build_layout then fails. */
static size_t add_tensor(model *m, const char *name, int ndim, int64_t d0, int64_t d1, int is_tau) {
    if (m->n_tensors >= m->max_tensors || strlen(name) >= sizeof m->tensors[0].name) {
        m->layout_overflow = 1;
        return (size_t)-1;
    }
    model_tensor *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = ndim > 1 ? d1 : 0;
    t->numel = (size_t)d0 * (ndim > 1 ? (size_t)d1 : 1);
    t->offset = m->n_params;
    t->is_tau = is_tau;
    m->n_params += t->numel;
    return t->offset;
}

static engine_status build_layout(model *m, engine_error *err) {
    int C = m->C, V = m->V;
    char nm[40];
    m->n_tensors = 0;
    m->n_params = 0;
    m->wte = add_tensor(m, "wte", 2, V, C, 0);
    m->wpe = (m->att->flags & ATTENTION_LEARNED_POSITIONS) ? add_tensor(m, "wpe", 2, m->Tmax, C, 0) : (size_t)-1;
    for (int l = 0; l < m->L; l++) {
        layer_off *o = &m->lo[l];
#define T1(field, suffix, n) (snprintf(nm, sizeof nm, "h.%d.%s", l, suffix), o->field = add_tensor(m, nm, 1, n, 0, 0))
#define T2(field, suffix, a, b)                                                                                        \
    (snprintf(nm, sizeof nm, "h.%d.%s", l, suffix), o->field = add_tensor(m, nm, 2, a, b, 0))
        T1(ln1w, "ln1.w", C);
        T1(ln1b, "ln1.b", C);
        T2(qkvw, "attn.qkv.w", 3 * C, C);
        T1(qkvb, "attn.qkv.b", 3 * C);
        T2(projw, "attn.proj.w", C, C);
        T1(projb, "attn.proj.b", C);
        if (attention_layer_extra_tensors(m->att)) {
            snprintf(nm, sizeof nm, "h.%d.%s", l, m->att->scale_suffix);
            o->scale = add_tensor(m, nm, 1, m->H, 0, 1);
        } else {
            o->scale = (size_t)-1;
        }
        T1(ln2w, "ln2.w", C);
        T1(ln2b, "ln2.b", C);
        T2(fcw, "mlp.fc.w", 4 * C, C);
        T1(fcb, "mlp.fc.b", 4 * C);
        T2(fcpw, "mlp.proj.w", C, 4 * C);
        T1(fcpb, "mlp.proj.b", C);
#undef T1
#undef T2
    }
    m->lnfw = add_tensor(m, "lnf.w", 1, C, 0, 0);
    m->lnfb = add_tensor(m, "lnf.b", 1, C, 0, 0);
    m->lm_head = add_tensor(m, "lm_head.w", 2, V, C, 0);
    if (m->layout_overflow)
        return engine_fail(err, ENGINE_ERR_INVALID,
                           "the layout of attention '%s' does not fit its tensor table (%d tensors counted, "
                           "names under %zu characters)",
                           m->att->name, m->max_tensors, sizeof m->tensors[0].name);
    return ENGINE_OK;
}

#define ALIGN_REALS (64 / sizeof(real)) /* reals in 64 bytes */
static size_t round_up_reals(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* Sizes (in reals) of the activation block; also used for the memory estimate. */
typedef struct {
    size_t per_layer, base, grads_scratch, lm_per_thread, lm_buf, part, total;
} act_sizes;

static act_sizes compute_act_sizes(const model_config *c, int B, int nth, int with_grads) {
    act_sizes s;
    size_t C = (size_t)c->d_model, N = (size_t)B * (size_t)c->seq_len, T = (size_t)c->seq_len, H = (size_t)c->n_head;
    const attention_variant *v = model_config_attention(c);
    int transforms = v && v->qk_forward, aux = v ? v->aux_per_head : 0;
    s.per_layer = N * C + 2 * N + N * 3 * C + (transforms ? N * 2 * C : 0) + N * 2 * H * (size_t)aux +
                  (size_t)B * H * T * T + N * C + N * C + N * C + 2 * N + N * 4 * C + N * C;
    s.base = N * C /* x0 */ + N * C + 2 * N /* lnf */ + N /* losses */ + T * (C / H) /* rope tables */ +
             N * C /* dln, needed by the lm-head even without grads */;
    s.grads_scratch = with_grads ? N * C /*dres*/ + N * 3 * C + N * C + N * 4 * C : 0;
    /* per thread: the lm-head's logits chunk, or (backward) attention's T x T scratch */
    size_t lm = lmhead_scratch_per_thread(c->d_model, c->vocab);
    s.lm_per_thread = round_up_reals(lm > T * T ? lm : T * T, ALIGN_REALS); /* each thread's part starts aligned */
    s.lm_buf = (size_t)nth * s.lm_per_thread;
    if (s.lm_buf < N * 4 * C) s.lm_buf = N * 4 * C; /* shared with the GELU output */
    {
        long N_ = (long)N, rc = row_chunk_for(N_);
        s.part = (size_t)((N_ + rc - 1) / rc) * 2 * C;
    }
    /* + room to start lm_buf on a 64-byte boundary (mem.h) */
    s.total = s.per_layer * (size_t)c->n_layer + s.base + s.grads_scratch + ALIGN_REALS + s.lm_buf + s.part;
    return s;
}

size_t model_memory_bytes(const model_config *cfg, int batch, int n_threads, int with_grads) {
    act_sizes s = compute_act_sizes(cfg, batch, n_threads, with_grads);
    size_t np = model_config_param_count(cfg);
    /* + a margin for what is not ours but comes with a run: thread stacks, BLAS buffers */
    return sizeof(real) * (s.total + np * (with_grads ? 2 : 1)) + sizeof(model) + ((size_t)16 << 20);
}

engine_status model_new(model **out, const model_config *cfg, int batch, int n_threads, int with_grads,
                        engine_error *err) {
    *out = NULL;
    engine_status rc = model_config_validate(cfg, err);
    if (rc) return rc;
    if (batch < 1 || batch > 4096) return engine_fail(err, ENGINE_ERR_INVALID, "batch %d is not in 1..4096", batch);
    if (n_threads < 1 || n_threads > 256)
        return engine_fail(err, ENGINE_ERR_INVALID, "thread count %d is not in 1..256", n_threads);
    gemm_init();
    model *m = calloc(1, sizeof *m);
    if (!m) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for a model");
    m->cfg = *cfg;
    m->att = model_config_attention(cfg);
    m->scale = model_config_scale(cfg);
    m->max_B = batch;
    m->n_threads = n_threads;
    m->with_grads = with_grads;
    m->C = cfg->d_model;
    m->H = cfg->n_head;
    m->d = cfg->d_model / cfg->n_head;
    m->L = cfg->n_layer;
    m->V = cfg->vocab;
    m->Tmax = cfg->seq_len;
    m->lo = calloc((size_t)m->L, sizeof *m->lo);
    m->la = calloc((size_t)m->L, sizeof *m->la);
    m->part_d = calloc((size_t)batch * 2 * (size_t)m->H, sizeof(double));
    m->max_tensors = layout_tensor_count(cfg);
    m->tensors = calloc((size_t)m->max_tensors, sizeof *m->tensors);
    {
        long N_ = (long)batch * m->Tmax, per = row_chunk_for(N_);
        m->max_row_chunks = (N_ + per - 1) / per;
    }
    if (!m->lo || !m->la || !m->part_d || !m->tensors) goto nomem;
    rc = build_layout(m, err);
    if (rc) {
        model_free(m);
        return rc;
    }
    m->params = mem_calloc64(m->n_params, sizeof(real));
    if (!m->params) goto nomem;
    if (with_grads) {
        m->grads = mem_calloc64(m->n_params, sizeof(real));
        if (!m->grads) goto nomem;
    }
    act_sizes s = compute_act_sizes(cfg, batch, n_threads, with_grads);
    m->lm_per_thread = s.lm_per_thread;
    /* zeroed as calloc: pages are only touched when used, and never-written regions read as zero */
    m->act_block = mem_calloc64(s.total, sizeof(real));
    if (!m->act_block) goto nomem;
    {
        size_t C = (size_t)m->C, N = (size_t)batch * (size_t)m->Tmax, T = (size_t)m->Tmax, H = (size_t)m->H;
        real *p = m->act_block;
#define TAKE(ptr, n) (ptr = p, p += (n))
        for (int l = 0; l < m->L; l++) {
            layer_acts *a = &m->la[l];
            TAKE(a->ln1, N * C);
            TAKE(a->ln1_mean, N);
            TAKE(a->ln1_rstd, N);
            TAKE(a->qkv, N * 3 * C);
            if (m->att->qk_forward) TAKE(a->qk, N * 2 * C);
            if (m->att->aux_per_head) TAKE(a->qk_aux, N * 2 * H * (size_t)m->att->aux_per_head);
            TAKE(a->att, (size_t)batch * H * T * T);
            TAKE(a->atty, N * C);
            TAKE(a->res1, N * C);
            TAKE(a->ln2, N * C);
            TAKE(a->ln2_mean, N);
            TAKE(a->ln2_rstd, N);
            TAKE(a->fch, N * 4 * C);
            TAKE(a->res2, N * C);
        }
        TAKE(m->x0, N * C);
        TAKE(m->lnf, N * C);
        TAKE(m->lnf_mean, N);
        TAKE(m->lnf_rstd, N);
        TAKE(m->losses, N);
        TAKE(m->rope_cos, T * (size_t)m->d / 2);
        TAKE(m->rope_sin, T * (size_t)m->d / 2);
        TAKE(m->dln, N * C);
        if (with_grads) {
            TAKE(m->dres, N * C);
            TAKE(m->dqkv, N * 3 * C);
            TAKE(m->datty, N * C);
            TAKE(m->dfch, N * 4 * C);
        }
        p = m->act_block + round_up_reals((size_t)(p - m->act_block), ALIGN_REALS); /* the block is aligned */
        TAKE(m->lm_buf, s.lm_buf);
        m->gelu = m->lm_buf;
        TAKE(m->part, s.part);
#undef TAKE
    }
    rope_tables(m->rope_cos, m->rope_sin, m->Tmax, m->d, cfg->rope_base);
    rc = threads_create(&m->pool, n_threads, err);
    if (rc) {
        model_free(m);
        return rc;
    }
    *out = m;
    return ENGINE_OK;
nomem:
    model_free(m);
    return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for a model of %zu parameters (batch %d)",
                       model_config_param_count(cfg), batch);
}

/* Frees the blocks' bf16 copies and scratch (model_set_precision), leaving them NULL. */
static void bf16_blocks_free(model *m) {
    mem_free64(m->wpk);
    mem_free64(m->wpt);
    mem_free64(m->bscr);
    mem_free64(m->dwx);
    mem_free64(m->dwg);
    m->wpk = m->wpt = m->bscr = m->dwx = m->dwg = NULL;
}

void model_free(model *m) {
    if (!m) return;
    lmhead_bf16_free(m->lm_bf);
    bf16_blocks_free(m);
    threads_free(m->pool);
    mem_free64(m->act_block);
    mem_free64(m->grads);
    mem_free64(m->params);
    free(m->part_d);
    free(m->la);
    free(m->lo);
    free(m->tensors);
    free(m);
}

const model_config *model_get_config(const model *m) { return &m->cfg; }
size_t model_param_count(const model *m) { return m->n_params; }
real *model_params(model *m) {
    atomic_store_explicit(&m->bf_stale, 1, memory_order_relaxed); /* the caller may write them */
    atomic_store_explicit(&m->pk_stale, 1, memory_order_relaxed);
    return m->params;
}
const real *model_params_read(const model *m) { return m->params; }
real *model_grads(model *m) { return m->grads; }
threadpool *model_threads(model *m) { return m->pool; }
int model_tensor_count(const model *m) { return m->n_tensors; }
const model_tensor *model_tensor_at(const model *m, int i) { return &m->tensors[i]; }

const model_tensor *model_tensor_find(const model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

void model_init_params(model *m, uint64_t seed) {
    atomic_store(&m->bf_stale, 1);
    atomic_store(&m->pk_stale, 1);
    rng_state r;
    rng_seed(&r, seed);
    double theta0 = attention_scale_theta0(&m->scale);
    for (int i = 0; i < m->n_tensors; i++) {
        const model_tensor *t = &m->tensors[i];
        real *p = m->params + t->offset;
        size_t len = strlen(t->name);
        if (t->is_tau) {
            for (size_t j = 0; j < t->numel; j++) p[j] = (real)theta0;
        } else if (t->ndim == 2) {
            for (size_t j = 0; j < t->numel; j++) p[j] = (real)(0.02 * rng_normal(&r));
        } else if (len >= 4 && t->name[len - 1] == 'w' && t->name[len - 2] == '.' && (strstr(t->name, "ln") != NULL)) {
            for (size_t j = 0; j < t->numel; j++) p[j] = 1;
        } else {
            for (size_t j = 0; j < t->numel; j++) p[j] = 0;
        }
    }
}

/* ---- passes ---- */

#define P(off) (m->params + (off))
#define G(off) (m->grads + (off))

/* The score multiplier of layer l, head h (fixed, or from its learned parameter). */
static real layer_scale(const model *m, int l, int h) {
    real theta = m->lo[l].scale == (size_t)-1 ? 0 : m->params[m->lo[l].scale + (size_t)h];
    return attention_scale_value(m->att, &m->scale, m->d, theta);
}

/* One (b, h) unit of layer activations a as the variant's q/k transform sees it. */
static attention_qk_unit qk_unit(const model *m, const layer_acts *a, int b, int h) {
    const int C = m->C, H = m->H, d = m->d, A = m->att->aux_per_head;
    size_t row0 = (size_t)b * m->T;
    attention_qk_unit u = {
        .T = m->T,
        .d = d,
        .q = a->qkv + row0 * 3 * C + (size_t)h * d,
        .raw_stride = 3 * C,
        .q_used = a->qk + row0 * 2 * C + (size_t)h * d,
        .used_stride = 2 * C,
        .aux_stride = 2L * H * A,
        .dq = m->dqkv ? m->dqkv + row0 * 3 * C + (size_t)h * d : NULL,
        .d_stride = 3 * C,
        .rope_cos = m->rope_cos,
        .rope_sin = m->rope_sin,
    };
    u.k = u.q + C;
    u.k_used = u.q_used + C;
    if (A) {
        u.q_aux = a->qk_aux + row0 * 2 * H * A + (size_t)h * A;
        u.k_aux = u.q_aux + (size_t)H * A;
    }
    if (u.dq) u.dk = u.dq + C;
    return u;
}

static const real *layer_input(const model *m, int l) { return l == 0 ? m->x0 : m->la[l - 1].res2; }

/* Bias gradient for outputs [o0, o1): db[o] += sum over rows of dy[r, o]. */
static void bias_grad(real *db, const real *dy, long rows, int width, long o0, long o1) {
    for (long r = 0; r < rows; r++) {
        const real *row = dy + r * width;
        for (long o = o0; o < o1; o++) db[o] += row[o];
    }
}

/* ---- the blocks' linear products in bf16 (model.wpk) ---- */
enum { W_QKV, W_PROJ, W_FC, W_FCP, W_COUNT };

/* A weight's out and in sizes. */
static void w_dims(const model *m, int w, int *out, int *in) {
    const int C = m->C;
    *out = w == W_QKV ? 3 * C : w == W_FC ? 4 * C : C;
    *in = w == W_FCP ? 4 * C : C;
}

static size_t w_off(const layer_off *o, int w) {
    return w == W_QKV ? o->qkvw : w == W_PROJ ? o->projw : w == W_FC ? o->fcw : o->fcpw;
}

/* Weight w of layer l packed for the forward product x W^T (dir 0: pairs along its inputs) or for
 * the input gradient dy W (dir 1: pairs along its outputs). Layers one after another (every layer
 * the same size), each weight's two packings in turn. */
static size_t wpk_one(const model *m, int w, int dir) {
    int out, in;
    w_dims(m, w, &out, &in);
    return dir == 0 ? gemm_bf16_packed_count(in, out) : gemm_bf16_packed_count(out, in);
}
static size_t wpk_count(const model *m) {
    size_t n = 0;
    for (int w = 0; w < W_COUNT; w++) n += wpk_one(m, w, 0) + wpk_one(m, w, 1);
    return n * (size_t)m->L;
}
/* Where weight w of layer l, packed for direction dir, starts in wpk (and in wpt). */
static size_t wpk_off(const model *m, int l, int w, int dir) {
    size_t off = wpk_count(m) / (size_t)m->L * (size_t)l;
    for (int ww = 0; ww < w; ww++) off += wpk_one(m, ww, 0) + wpk_one(m, ww, 1);
    return off + (dir ? wpk_one(m, w, 0) : 0);
}
static bf16 *wpk_at(const model *m, int l, int w, int dir) { return m->wpk + wpk_off(m, l, w, dir); }

typedef struct {
    model *m;
} pack_ctx;

static void pack_fn(void *ctx, int tid, int nth) {
    (void)tid;
    (void)nth;
    model *m = ((pack_ctx *)ctx)->m;
    const long per = (long)m->L * W_COUNT * 2, items = per * (m->wpt ? 2 : 1);
    for (long k; (k = threads_next(m->pool)) < items;) {
        const int tiles = k >= per;
        const long j = k % per;
        int l = (int)(j / (W_COUNT * 2)), w = (int)(j / 2 % W_COUNT), dir = (int)(j % 2), out, in;
        w_dims(m, w, &out, &in);
        const real *W = m->params + w_off(&m->lo[l], w);
        const size_t off = wpk_off(m, l, w, dir);
        /* dir 0: B(k = input, n = output); dir 1: B(k = output, n = input) */
        if (tiles)
            gemm_bf16_pack_tiles(m->wpt + off, dir ? out : in, dir ? in : out, W, dir ? in : 1, dir ? 1 : in);
        else if (dir == 0)
            gemm_bf16_pack(m->wpk + off, in, out, W, 1, in);
        else
            gemm_bf16_pack(m->wpk + off, out, in, W, in, 1);
    }
}

/* out[nr][N] (=) x[nr][K] . B on thread tid: B is weight w of layer l transposed (dir 0, the forward
 * product; N its outputs) or as it is (dir 1, an input gradient; N its inputs). In bf16 through the
 * packed weights where the model has them, else the fp32 product. */
static void block_product(model *m, int tid, int l, int w, int dir, real *out, const real *x, long nr) {
    int o, i;
    w_dims(m, w, &o, &i);
    const int K = dir == 0 ? i : o, N = dir == 0 ? o : i;
    if (m->wpk) {
        bf16 *xb = m->bscr + (size_t)tid * m->bscr_per;
        gemm_bf16_rows(xb, K, x, K, (int)nr, K);
        if (!m->wpt || !gemm_bf16_amx((int)nr, N, K, xb, K, m->wpt + wpk_off(m, l, w, dir), out, N, 0))
            gemm_bf16((int)nr, N, K, xb, K, wpk_at(m, l, w, dir), out, N, 0);
        return;
    }
    const real *W = m->params + w_off(&m->lo[l], w);
    if (dir == 0)
        gemm_nt((int)nr, N, K, x, K, W, K, out, N, 0);
    else
        gemm_nn((int)nr, N, K, x, K, W, N, out, N, 0);
}

static void add_bias(real *out, const real *bias, long rows, int n) {
    for (long r = 0; r < rows; r++)
        for (int o = 0; o < n; o++) out[r * n + o] += bias[o];
}

/* One work item of a row phase: rows [r0, r1), item index k (for partial sums). */
static void row_item(model *m, int tid, long k, long r0, long r1) {
    const int C = m->C, T = m->T;
    const long nr = r1 - r0;
    const int l = m->ph_layer;
    layer_acts *a = l >= 0 && l < m->L ? &m->la[l] : NULL;
    const layer_off *o = l >= 0 && l < m->L ? &m->lo[l] : NULL;
    real *part = m->part + (size_t)k * 2 * C;
    switch (m->ph) {
    case PH_ENCODE:
        for (long r = r0; r < r1; r++) {
            const real *e = P(m->wte) + (size_t)m->inputs[r] * C;
            real *x = m->x0 + r * C;
            if (m->wpe != (size_t)-1) {
                const real *pe = P(m->wpe) + (size_t)(r % T) * C;
                for (int i = 0; i < C; i++) x[i] = e[i] + pe[i];
            } else {
                memcpy(x, e, sizeof(real) * C);
            }
        }
        break;
    case PH_FWD_A: {
        const real *xin = layer_input(m, l);
        layernorm_forward(a->ln1 + r0 * C, a->ln1_mean + r0, a->ln1_rstd + r0, xin + r0 * C, P(o->ln1w), P(o->ln1b), nr,
                          C);
        block_product(m, tid, l, W_QKV, 0, a->qkv + r0 * 3 * C, a->ln1 + r0 * C, nr);
        add_bias(a->qkv + r0 * 3 * C, P(o->qkvb), nr, 3 * C);
        break;
    }
    case PH_FWD_B: {
        const real *xin = layer_input(m, l);
        block_product(m, tid, l, W_PROJ, 0, a->res1 + r0 * C, a->atty + r0 * C, nr);
        add_bias(a->res1 + r0 * C, P(o->projb), nr, C);
        for (long i = r0 * C; i < r1 * C; i++) a->res1[i] += xin[i];
        layernorm_forward(a->ln2 + r0 * C, a->ln2_mean + r0, a->ln2_rstd + r0, a->res1 + r0 * C, P(o->ln2w), P(o->ln2b),
                          nr, C);
        block_product(m, tid, l, W_FC, 0, a->fch + r0 * 4 * C, a->ln2 + r0 * C, nr);
        add_bias(a->fch + r0 * 4 * C, P(o->fcb), nr, 4 * C);
        gelu_forward(m->gelu + r0 * 4 * C, a->fch + r0 * 4 * C, nr * 4 * C);
        block_product(m, tid, l, W_FCP, 0, a->res2 + r0 * C, m->gelu + r0 * 4 * C, nr);
        add_bias(a->res2 + r0 * C, P(o->fcpb), nr, C);
        for (long i = r0 * C; i < r1 * C; i++) a->res2[i] += a->res1[i];
        break;
    }
    case PH_FINAL:
        layernorm_forward(m->lnf + r0 * C, m->lnf_mean + r0, m->lnf_rstd + r0, m->la[m->L - 1].res2 + r0 * C,
                          P(m->lnfw), P(m->lnfb), nr, C);
        break;
    case PH_LNF_BWD:
        memset(part, 0, sizeof(real) * 2 * C);
        memset(m->dres + r0 * C, 0, sizeof(real) * (size_t)nr * C);
        layernorm_backward(m->dres + r0 * C, part, part + C, m->dln + r0 * C, m->la[m->L - 1].res2 + r0 * C, P(m->lnfw),
                           m->lnf_mean + r0, m->lnf_rstd + r0, nr, C);
        break;
    case PH_BWD_MLP_DX:
        /* MLP output projection, input side: dgelu = dres . Wp, then back through GELU */
        gelu_forward(m->gelu + r0 * 4 * C, a->fch + r0 * 4 * C, nr * 4 * C);
        block_product(m, tid, l, W_FCP, 1, m->dfch + r0 * 4 * C, m->dres + r0 * C, nr);
        gelu_backward(m->dfch + r0 * 4 * C, a->fch + r0 * 4 * C, m->dfch + r0 * 4 * C, nr * 4 * C);
        break;
    case PH_BWD_LN2_DX:
        memset(part, 0, sizeof(real) * 2 * C);
        block_product(m, tid, l, W_FC, 1, m->dln + r0 * C, m->dfch + r0 * 4 * C, nr);
        layernorm_backward(m->dres + r0 * C, part, part + C, m->dln + r0 * C, a->res1 + r0 * C, P(o->ln2w),
                           a->ln2_mean + r0, a->ln2_rstd + r0, nr, C);
        block_product(m, tid, l, W_PROJ, 1, m->datty + r0 * C, m->dres + r0 * C, nr);
        break;
    case PH_BWD_LN1_DX:
        memset(part, 0, sizeof(real) * 2 * C);
        block_product(m, tid, l, W_QKV, 1, m->dln + r0 * C, m->dqkv + r0 * 3 * C, nr);
        layernorm_backward(m->dres + r0 * C, part, part + C, m->dln + r0 * C, layer_input(m, l) + r0 * C, P(o->ln1w),
                           a->ln1_mean + r0, a->ln1_rstd + r0, nr, C);
        break;
    }
}

/* One (batch element, head) unit of attention, forward or backward. */
static void unit_item(model *m, long u, int tid) {
    const int C = m->C, H = m->H, d = m->d, T = m->T;
    const int l = m->ph_layer;
    layer_acts *a = &m->la[l];
    int rot = m->att->qk_forward != NULL;
    int b = (int)(u / H), h = (int)(u % H);
    size_t row0 = (size_t)b * T;
    const real *q = rot ? a->qk + row0 * 2 * C + (size_t)h * d : a->qkv + row0 * 3 * C + (size_t)h * d;
    int qs = rot ? 2 * C : 3 * C;
    const real *v = a->qkv + row0 * 3 * C + 2 * C + (size_t)h * d;
    double *ent = m->part_d, *dsc = m->part_d + (size_t)m->max_B * H;
    if (m->ph == PH_FWD_ATT) {
        if (rot) {
            attention_qk_unit qu = qk_unit(m, a, b, h);
            m->att->qk_forward(&qu);
        }
        ent[u] = 0;
        attention_forward_unit(q, q + C, qs, v, 3 * C, a->att + (size_t)u * T * T, a->atty + row0 * C + (size_t)h * d,
                               C, T, d, layer_scale(m, l, h), &ent[u]);
    } else {
        real *scratch = m->lm_buf + (size_t)tid * m->lm_per_thread; /* idle during backward */
        real *dq = m->dqkv + row0 * 3 * C + (size_t)h * d;
        dsc[u] = 0;
        attention_backward_unit(q, q + C, qs, v, 3 * C, a->att + (size_t)u * T * T, m->datty + row0 * C + (size_t)h * d,
                                C, dq, dq + C, 3 * C, dq + 2 * C, 3 * C, T, d, layer_scale(m, l, h),
                                m->lo[l].scale != (size_t)-1 ? &dsc[u] : NULL, scratch);
        if (rot) {
            attention_qk_unit qu = qk_unit(m, a, b, h);
            m->att->qk_backward(&qu);
        }
    }
}

/* The inputs of weight-gradient phase ph of layer l, as dwx holds them packed: x [N][width], its
 * copy at dwx + off. Returns how many (the MLP's two products, one each for the others). */
typedef struct {
    const real *x;
    int width;
    size_t off;
} dw_input;
static int dw_inputs(const model *m, int ph, int l, dw_input in[2]) {
    const int C = m->C;
    const size_t N = (size_t)m->B * m->T;
    const layer_acts *a = &m->la[l];
    switch (ph) {
    case PH_BWD_MLP_DW:
        in[0] = (dw_input){m->gelu, 4 * C, 0};
        in[1] = (dw_input){a->ln2, C, N * 4 * C};
        return 2;
    case PH_BWD_PROJ_DW: in[0] = (dw_input){a->atty, C, 0}; return 1;
    case PH_BWD_QKV_DW: in[0] = (dw_input){a->ln1, C, 0}; return 1;
    default: return 0;
    }
}

/* Whether this pass's weight gradients take the tiles: the amx path, and every product's sides
 * (tokens, inputs, OUT_CHUNK outputs: asserted) multiples of 32, as gemm_bf16_amx needs. */
static int dw_on_tiles(const model *m) { return m->dwx && ((long)m->B * m->T) % 32 == 0 && m->C % 32 == 0; }

/* Rows [r0, r1) (multiples of 32) of the next _DW phase's inputs into dwx, in the tile layout
 * (gemm_bf16_pack_tiles, K the tokens). */
static void dw_pack_item(model *m, long r0, long r1) {
    dw_input in[2];
    int n = dw_inputs(m, m->dw_next, m->ph_layer, in);
    for (int i = 0; i < n; i++)
        gemm_bf16_pack_tiles(m->dwx + in[i].off + (size_t)r0 * in[i].width, (int)(r1 - r0), in[i].width,
                             in[i].x + r0 * in[i].width, in[i].width, 1);
}

/* g[o0..o1)[0..width) += dy[.][o0..o1)^T . x over the pass's tokens, on tiles (x packed at dwx +
 * xoff); 0 when the shapes do not suit (nothing is touched: the caller takes gemm_tn). Each entry
 * sums its tokens in one fixed order, whatever thread takes the item. */
static int dw_product(model *m, int tid, long o0, long o1, const real *dy, int ldy, size_t xoff, int width, real *g) {
    const long N = (long)m->B * m->T;
    if (!dw_on_tiles(m) || (o1 - o0) % 32 || width % 32) return 0;
    /* rows DWG_PAD entries longer than the tokens: 2^k-byte rows would crowd a few cache sets */
    const int lda = (int)N + DWG_PAD;
    bf16 *a = m->dwg + (size_t)tid * m->dwg_per;
    gemm_bf16_cols(a, lda, dy + o0, ldy, (int)N, (int)(o1 - o0));
    return gemm_bf16_amx((int)(o1 - o0), width, (int)N, a, lda, m->dwx + xoff, g, width, 1);
}

/* One item of a weight-gradient phase: output features [o0, o1) of one product. */
static void out_item(model *m, int tid, long k) {
    const int C = m->C;
    const long N = (long)m->B * m->T;
    const int l = m->ph_layer;
    layer_acts *a = &m->la[l];
    const layer_off *o = &m->lo[l];
    long o0 = k * OUT_CHUNK, o1;
    dw_input in[2];
    dw_inputs(m, m->ph, l, in);
    switch (m->ph) {
    case PH_BWD_MLP_DW: {
        long nfcp = (C + OUT_CHUNK - 1) / OUT_CHUNK;
        if (k < nfcp) {
            o1 = o0 + OUT_CHUNK < C ? o0 + OUT_CHUNK : C;
            if (!dw_product(m, tid, o0, o1, m->dres, C, in[0].off, 4 * C, G(o->fcpw) + o0 * 4 * C))
                gemm_tn((int)(o1 - o0), 4 * C, (int)N, m->dres + o0, C, m->gelu, 4 * C, G(o->fcpw) + o0 * 4 * C, 4 * C,
                        1);
            bias_grad(G(o->fcpb), m->dres, N, C, o0, o1);
        } else {
            o0 = (k - nfcp) * OUT_CHUNK;
            o1 = o0 + OUT_CHUNK < 4 * C ? o0 + OUT_CHUNK : 4 * C;
            if (!dw_product(m, tid, o0, o1, m->dfch, 4 * C, in[1].off, C, G(o->fcw) + o0 * C))
                gemm_tn((int)(o1 - o0), C, (int)N, m->dfch + o0, 4 * C, a->ln2, C, G(o->fcw) + o0 * C, C, 1);
            bias_grad(G(o->fcb), m->dfch, N, 4 * C, o0, o1);
        }
        break;
    }
    case PH_BWD_PROJ_DW:
        o1 = o0 + OUT_CHUNK < C ? o0 + OUT_CHUNK : C;
        if (!dw_product(m, tid, o0, o1, m->dres, C, in[0].off, C, G(o->projw) + o0 * C))
            gemm_tn((int)(o1 - o0), C, (int)N, m->dres + o0, C, a->atty, C, G(o->projw) + o0 * C, C, 1);
        bias_grad(G(o->projb), m->dres, N, C, o0, o1);
        break;
    case PH_BWD_QKV_DW:
        o1 = o0 + OUT_CHUNK < 3 * C ? o0 + OUT_CHUNK : 3 * C;
        if (!dw_product(m, tid, o0, o1, m->dqkv, 3 * C, in[0].off, C, G(o->qkvw) + o0 * C))
            gemm_tn((int)(o1 - o0), C, (int)N, m->dqkv + o0, 3 * C, a->ln1, C, G(o->qkvw) + o0 * C, C, 1);
        bias_grad(G(o->qkvb), m->dqkv, N, 3 * C, o0, o1);
        break;
    }
}

static void phase_fn(void *ctx, int tid, int nth) {
    model *m = ctx;
    const int C = m->C;
    const long N = (long)m->B * m->T;
    long items;
    switch (m->ph) {
    case PH_FWD_ATT:
    case PH_BWD_ATT:
        items = (long)m->B * m->H;
        for (long u; (u = threads_next(m->pool)) < items;) unit_item(m, u, tid);
        break;
    case PH_BWD_DW_PACK: {
        const long rb = 64; /* tokens per item: a multiple of 32, so items split no tile */
        items = (N + rb - 1) / rb;
        for (long k; (k = threads_next(m->pool)) < items;) dw_pack_item(m, k * rb, (k + 1) * rb < N ? (k + 1) * rb : N);
        break;
    }
    case PH_BWD_MLP_DW:
    case PH_BWD_PROJ_DW:
    case PH_BWD_QKV_DW: {
        long oc = (C + OUT_CHUNK - 1) / OUT_CHUNK;
        items = m->ph == PH_BWD_MLP_DW ? oc + (4 * C + OUT_CHUNK - 1) / OUT_CHUNK
                                       : (m->ph == PH_BWD_PROJ_DW ? oc : (3 * C + OUT_CHUNK - 1) / OUT_CHUNK);
        for (long k; (k = threads_next(m->pool)) < items;) out_item(m, tid, k);
        break;
    }
    case PH_LMHEAD: {
        /* about 16 chunks, at most lmhead_max_rows rows; the kernels pad a chunk to a multiple
         * of 16 rows, so their chunks are sized in 16s (a 2-row chunk would cost as much as 16) */
        long R = (N + 15) / 16;
        if (lmhead_max_rows(m->lm_bf) > LMHEAD_MAX_ROWS) R = (N + 7) / 8; /* amx: about 8 */
        if (m->lm_bf || (!m->lmhead_blas && lmhead_uses_kernels(C))) R = (R + 15) / 16 * 16;
        if (R > lmhead_max_rows(m->lm_bf)) R = lmhead_max_rows(m->lm_bf);
        lmhead_args la = {
            .x = m->lnf,
            .w = P(m->lm_head),
            .targets = m->targets,
            .N = N,
            .C = C,
            .V = m->V,
            .losses = m->losses,
            .dx = m->train ? m->dln : NULL,
            .dw = m->train ? G(m->lm_head) : NULL,
            .grad_scale = m->n_counted > 0 ? (real)(1.0 / (double)m->n_counted) : 0,
            .buf = m->lm_buf,
            .buf_stride = m->lm_per_thread,
            .use_blas = m->lmhead_blas,
            .chunk_rows = (int)R,
            .tickets = m->tickets,
            .bf = m->lm_bf,
        };
        lmhead_thread(&la, m->pool, tid, nth);
        break;
    }
    default:
        for (long k; (k = threads_next(m->pool)) < m->n_row_chunks;) {
            long r0 = k * m->rows_chunk, r1 = r0 + m->rows_chunk < N ? r0 + m->rows_chunk : N;
            row_item(m, tid, k, r0, r1);
        }
        break;
    }
}

static double phase_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The part of the time (model_time_ms) a phase counts towards. */
static int phase_part(int ph) {
    switch (ph) {
    case PH_LMHEAD: return MODEL_TIME_OUTPUT_LAYER;
    case PH_FWD_ATT:
    case PH_BWD_ATT: return MODEL_TIME_ATTENTION;
    case PH_ENCODE: return MODEL_TIME_OTHER;
    default: return MODEL_TIME_PRODUCTS;
    }
}

static void run_phase(model *m, int ph, int layer) {
    m->ph = ph;
    m->ph_layer = layer;
    if (ph == PH_LMHEAD)
        for (int i = 0; i < LMHEAD_SLICES; i++) atomic_store(&m->tickets[i], 0);
    double t0 = phase_now();
    threads_run(m->pool, phase_fn, m);
    m->phase_s[phase_part(ph)] += phase_now() - t0;
}

/* A weight-gradient phase, after the phase that packs its inputs where it takes the tiles. */
static void run_dw_phase(model *m, int ph, int layer) {
    if (dw_on_tiles(m)) {
        m->dw_next = ph;
        run_phase(m, PH_BWD_DW_PACK, layer);
    }
    run_phase(m, ph, layer);
}

void model_time_ms(const model *m, double out[MODEL_TIME_PARTS]) {
    for (int i = 0; i < MODEL_TIME_PARTS; i++) out[i] = 1000 * m->phase_s[i];
}

/* Adds the per-item LayerNorm partials, in item order, to dw and db. */
static void reduce_ln(model *m, size_t w_off, size_t b_off) {
    int C = m->C;
    for (long t = 0; t < m->n_row_chunks; t++) {
        const real *part = m->part + (size_t)t * 2 * C;
        for (int i = 0; i < C; i++) {
            m->grads[w_off + i] += part[i];
            m->grads[b_off + i] += part[C + i];
        }
    }
}

static engine_status check_batch(const model *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                                 engine_error *err) {
    if (B < 1 || B > m->max_B) return engine_fail(err, ENGINE_ERR_INVALID, "batch %d is not in 1..%d", B, m->max_B);
    if (T < 1 || T > m->Tmax)
        return engine_fail(err, ENGINE_ERR_INVALID, "sequence length %d exceeds the model's %d", T, m->Tmax);
    long n = (long)B * T;
    for (long i = 0; i < n; i++) {
        if (inputs[i] < 0 || inputs[i] >= m->V)
            return engine_fail(err, ENGINE_ERR_INVALID, "token id %d at position %ld is outside the vocabulary (0..%d)",
                               inputs[i], i, m->V - 1);
        if (targets && (targets[i] < MODEL_TARGET_IGNORE || targets[i] >= m->V))
            return engine_fail(err, ENGINE_ERR_INVALID,
                               "target token id %d at position %ld is outside the vocabulary (0..%d)", targets[i], i,
                               m->V - 1);
    }
    return ENGINE_OK;
}

static int interrupted(model *m) { return m->interrupt && m->interrupt(m->interrupt_ctx); }

/* Returns 1 if the interrupt check asked to stop (the activations are then incomplete). */
size_t model_bf16_bytes(const model_config *cfg, int batch, int n_threads) {
    const size_t C = (size_t)cfg->d_model, N = (size_t)batch * (size_t)cfg->seq_len;
    /* the output head's copies; each block's four weights (12 C^2) packed both ways (on amx in two
     * layouts); row scratch;
     * on amx, the weight gradients' packed inputs (5 C per token) and transposed columns */
    return lmhead_bf16_bytes(cfg->vocab, cfg->d_model) + sizeof(bf16) * 2 * 2 * 12 * C * C * (size_t)cfg->n_layer +
           sizeof(bf16) * (size_t)ROW_CHUNK_MAX * 4 * C * (size_t)n_threads +
           sizeof(bf16) * (N * 5 * C + (N + DWG_PAD) * (size_t)OUT_CHUNK * (size_t)n_threads);
}

void model_linear_prepare(model *m) {
    if (m->wpk && atomic_load(&m->pk_stale)) {
        pack_ctx pc = {m};
        threads_run(m->pool, pack_fn, &pc);
        atomic_store(&m->pk_stale, 0);
    }
}

void model_linear_forward(model *m, int tid, int layer, int which, real *out, const real *x, long nr) {
    static const int w_of[4] = {W_QKV, W_PROJ, W_FC, W_FCP};
    const layer_off *o = &m->lo[layer];
    const size_t bias[4] = {o->qkvb, o->projb, o->fcb, o->fcpb};
    int n, in;
    w_dims(m, w_of[which], &n, &in);
    block_product(m, tid, layer, w_of[which], 0, out, x, nr);
    add_bias(out, m->params + bias[which], nr, n);
}

static int forward_passes(model *m, int B, int T, const int32_t *inputs, const int32_t *targets, int train) {
    memset(m->phase_s, 0, sizeof m->phase_s);
    double tp = phase_now();
    model_linear_prepare(m);
    m->phase_s[MODEL_TIME_PRODUCTS] += phase_now() - tp;
    m->B = B;
    m->T = T;
    m->inputs = inputs;
    m->targets = targets;
    m->n_counted = 0;
    for (long i = 0; targets && i < (long)B * T; i++) m->n_counted += targets[i] != MODEL_TARGET_IGNORE;
    m->train = train;
    m->rows_chunk = row_chunk_for((long)B * T);
    m->n_row_chunks = ((long)B * T + m->rows_chunk - 1) / m->rows_chunk;
    run_phase(m, PH_ENCODE, -1);
    for (int l = 0; l < m->L; l++) {
        run_phase(m, PH_FWD_A, l);
        run_phase(m, PH_FWD_ATT, l);
        for (int h = 0; h < m->H; h++) {
            double s = 0;
            for (int b = 0; b < B; b++) s += m->part_d[(size_t)b * m->H + h];
            m->entropy[l * m->H + h] = s / ((double)B * T);
        }
        run_phase(m, PH_FWD_B, l);
        if (interrupted(m)) return 1;
    }
    run_phase(m, PH_FINAL, -1);
    if (targets && m->lm_bf && atomic_load(&m->bf_stale)) {
        double t0 = phase_now();
        lmhead_bf16_refresh(m->lm_bf, P(m->lm_head), m->pool);
        atomic_store(&m->bf_stale, 0);
        m->phase_s[MODEL_TIME_OUTPUT_LAYER] += phase_now() - t0;
    }
    if (targets) run_phase(m, PH_LMHEAD, -1);
    return 0;
}

/* The mean over the counted rows (an ignored row's loss is 0); 0 when none is counted. */
static double mean_loss(const model *m, long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += m->losses[i];
    return m->n_counted > 0 ? s / (double)m->n_counted : 0;
}

engine_status model_forward(model *m, const int32_t *inputs, const int32_t *targets, int B, int T, double *loss,
                            engine_error *err) {
    engine_status rc = check_batch(m, inputs, targets, B, T, err);
    if (rc) return rc;
    if (forward_passes(m, B, T, inputs, targets, 0))
        return engine_fail(err, ENGINE_ERR_CANCELLED, "forward pass interrupted");
    if (targets && loss) *loss = mean_loss(m, (long)B * T);
    return ENGINE_OK;
}

engine_status model_forward_backward(model *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                                     double *loss, engine_error *err) {
    if (!m->with_grads) return engine_fail(err, ENGINE_ERR_INVALID, "model was made without gradients");
    if (!targets) return engine_fail(err, ENGINE_ERR_INVALID, "training needs targets");
    engine_status rc = check_batch(m, inputs, targets, B, T, err);
    if (rc) return rc;
    memset(m->grads, 0, sizeof(real) * m->n_params);
    if (forward_passes(m, B, T, inputs, targets, 1) || interrupted(m))
        return engine_fail(err, ENGINE_ERR_CANCELLED, "training step interrupted");
    if (loss) *loss = mean_loss(m, (long)B * T);

    run_phase(m, PH_LNF_BWD, -1);
    reduce_ln(m, m->lnfw, m->lnfb);
    for (int l = m->L - 1; l >= 0; l--) {
        const layer_off *o = &m->lo[l];
        run_phase(m, PH_BWD_MLP_DX, l);
        run_dw_phase(m, PH_BWD_MLP_DW, l);
        run_phase(m, PH_BWD_LN2_DX, l);
        reduce_ln(m, o->ln2w, o->ln2b);
        run_dw_phase(m, PH_BWD_PROJ_DW, l);
        run_phase(m, PH_BWD_ATT, l);
        if (o->scale != (size_t)-1) {
            for (int h = 0; h < m->H; h++) {
                double dg = 0; /* dL/dg, g the head's score multiplier */
                const double *dsc = m->part_d + (size_t)m->max_B * m->H;
                for (int b = 0; b < B; b++) dg += dsc[(size_t)b * m->H + h];
                double g = layer_scale(m, l, h);
                double dp = attention_scale_dtheta(&m->scale, m->params[o->scale + (size_t)h], g, dg);
                m->grads[o->scale + (size_t)h] += (real)dp;
            }
        }
        run_dw_phase(m, PH_BWD_QKV_DW, l);
        run_phase(m, PH_BWD_LN1_DX, l);
        reduce_ln(m, o->ln1w, o->ln1b);
        if (l > 0 && interrupted(m)) return engine_fail(err, ENGINE_ERR_CANCELLED, "training step interrupted");
    }
    /* Embedding gradients: a scatter-add where tokens repeat, so one thread in row order. */
    long n = (long)B * T;
    int C = m->C;
    for (long r = 0; r < n; r++) {
        real *g = m->grads + m->wte + (size_t)inputs[r] * C;
        const real *dx = m->dres + r * C;
        for (int i = 0; i < C; i++) g[i] += dx[i];
        if (m->wpe != (size_t)-1) {
            real *gp = m->grads + m->wpe + (size_t)(r % T) * C;
            for (int i = 0; i < C; i++) gp[i] += dx[i];
        }
    }
    return ENGINE_OK;
}

void model_set_lmhead_blas(model *m, int on) { m->lmhead_blas = on; }

engine_status model_set_precision(model *m, precision_kind p, engine_error *err) {
    if (p == PRECISION_FP32) {
        lmhead_bf16_free(m->lm_bf);
        m->lm_bf = NULL;
        bf16_blocks_free(m);
        m->precision = p;
        return ENGINE_OK;
    }
    if (p != PRECISION_BF16) return engine_fail(err, ENGINE_ERR_INVALID, "unknown precision %d", (int)p);
    if (m->lm_bf) return ENGINE_OK;
    if (REAL_IS_DOUBLE || !lmhead_bf16_applies(m->C))
        return engine_fail(err, ENGINE_ERR_INVALID, "bf16 precision needs d_model a multiple of 16 (not %d)%s", m->C,
                           REAL_IS_DOUBLE ? " and the float build" : "");
    engine_status rc = lmhead_bf16_new(&m->lm_bf, m->V, m->C, err);
    if (rc) return rc;
    /* the blocks' products in bf16 on the paths with a bf16 unit (the portable path keeps them fp32) */
    if (m->lm_bf->path != KERNEL_PATH_BF16_PORTABLE && gemm_bf16_available()) {
        m->bscr_per = (size_t)ROW_CHUNK_MAX * 4 * m->C;
        m->wpk = mem_calloc64(wpk_count(m), sizeof(bf16));
        m->bscr = mem_calloc64(m->bscr_per * (size_t)m->n_threads, sizeof(bf16));
        int ok = m->wpk && m->bscr;
        /* on the tiles: the weights in their layout too, and the weight gradients' scratch */
        if (m->lm_bf->path == KERNEL_PATH_AMX && cpu_has_amx_bf16() && m->C % 32 == 0) {
            m->wpt = mem_calloc64(wpk_count(m), sizeof(bf16));
            ok = ok && m->wpt;
            if (m->with_grads) {
                const size_t N = (size_t)m->max_B * m->Tmax;
                m->dwg_per = (size_t)OUT_CHUNK * (N + DWG_PAD);
                m->dwx = mem_calloc64(N * 5 * (size_t)m->C, sizeof(bf16));
                m->dwg = mem_calloc64(m->dwg_per * (size_t)m->n_threads, sizeof(bf16));
                ok = ok && m->dwx && m->dwg;
            }
        }
        if (!ok) {
            bf16_blocks_free(m);
            lmhead_bf16_free(m->lm_bf);
            m->lm_bf = NULL;
            return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for the bf16 weight copies");
        }
        atomic_store(&m->pk_stale, 1);
    }
    m->precision = p;
    atomic_store(&m->bf_stale, 1);
    return ENGINE_OK;
}

precision_kind model_precision(const model *m) { return m->precision; }

kernel_path_id model_kernel_path(const model *m) { return m->lm_bf ? m->lm_bf->path : KERNEL_PATH_FP32; }

void model_set_interrupt(model *m, int (*check)(void *ctx), void *ctx) {
    m->interrupt = check;
    m->interrupt_ctx = ctx;
}

void model_attention_entropy(const model *m, float *out) {
    for (int i = 0; i < m->L * m->H; i++) out[i] = (float)m->entropy[i];
}

void model_attention_distance(const model *m, float *dist, float *entropy_frac) {
    const int T = m->T, B = m->B, H = m->H;
    for (int l = 0; l < m->L; l++)
        for (int h = 0; h < H; h++) {
            double dsum = 0, fsum = 0;
            for (int b = 0; b < B; b++) {
                const real *att = m->la[l].att + ((size_t)b * H + h) * (size_t)T * T;
                for (int t = 0; t < T; t++) {
                    const real *p = att + (size_t)t * T;
                    double dd = 0, ent = 0;
                    for (int s = 0; s <= t; s++) {
                        float w = (float)p[s];
                        dd += (double)w * (t - s);
                        if (w > 0) ent -= (double)(w * logf(w));
                    }
                    dsum += dd;
                    if (t > 0) fsum += ent / log((double)(t + 1));
                }
            }
            if (dist) dist[l * H + h] = B > 0 && T > 0 ? (float)(dsum / ((double)B * T)) : 0.f;
            if (entropy_frac) entropy_frac[l * H + h] = B > 0 && T > 1 ? (float)(fsum / ((double)B * (T - 1))) : 0.f;
        }
}

void model_tau(const model *m, float *out) {
    for (int l = 0; l < m->L; l++)
        for (int h = 0; h < m->H; h++) out[l * m->H + h] = (float)(1.0 / (double)layer_scale(m, l, h));
}

/* ---- inspection ---- */

void model_inspect_free(model_inspect *ins) {
    if (!ins) return;
    free(ins->att);
    free(ins->q_raw);
    free(ins->k_raw);
    free(ins->q_used);
    free(ins->k_used);
    free(ins->tau);
    free(ins->entropy);
    memset(ins, 0, sizeof *ins);
}

engine_status model_forward_inspect(model *m, const int32_t *tokens, int T, model_inspect *out, engine_error *err) {
    memset(out, 0, sizeof *out);
    engine_status rc = check_batch(m, tokens, NULL, 1, T, err);
    if (rc) return rc;
    int L = m->L, H = m->H, d = m->d, C = m->C;
    size_t lh = (size_t)L * H;
    out->n_layer = L;
    out->n_head = H;
    out->T = T;
    out->head_dim = d;
    out->att = malloc(sizeof(float) * lh * T * T);
    out->q_raw = malloc(sizeof(float) * lh * T * d);
    out->k_raw = malloc(sizeof(float) * lh * T * d);
    out->q_used = malloc(sizeof(float) * lh * T * d);
    out->k_used = malloc(sizeof(float) * lh * T * d);
    out->tau = malloc(sizeof(float) * lh);
    out->entropy = malloc(sizeof(float) * lh);
    if (!out->att || !out->q_raw || !out->k_raw || !out->q_used || !out->k_used || !out->tau || !out->entropy) {
        model_inspect_free(out);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for attention maps");
    }
    if (forward_passes(m, 1, T, tokens, NULL, 0)) {
        model_inspect_free(out);
        return engine_fail(err, ENGINE_ERR_CANCELLED, "forward pass interrupted");
    }
    int rot = m->att->qk_forward != NULL;
    for (int l = 0; l < L; l++) {
        const layer_acts *a = &m->la[l];
        for (int h = 0; h < H; h++) {
            size_t base = ((size_t)l * H + h);
            for (size_t i = 0; i < (size_t)T * T; i++)
                out->att[base * T * T + i] = (float)a->att[(size_t)h * T * T + i];
            for (int t = 0; t < T; t++)
                for (int i = 0; i < d; i++) {
                    size_t dst = (base * T + t) * d + i;
                    const real *q = a->qkv + (size_t)t * 3 * C + (size_t)h * d;
                    out->q_raw[dst] = (float)q[i];
                    out->k_raw[dst] = (float)q[C + i];
                    const real *qu = rot ? a->qk + (size_t)t * 2 * C + (size_t)h * d : q;
                    out->q_used[dst] = (float)qu[i];
                    out->k_used[dst] = (float)qu[C + i];
                }
        }
    }
    model_tau(m, out->tau);
    model_attention_entropy(m, out->entropy);
    return ENGINE_OK;
}
