/* Weights files: a model's parameters and the config that rebuilds it, as safetensors (safetensors.h)
 * with the engine's own description of how it computes, written and read through model.h's public
 * contract. */
#ifndef ENGINE_MODEL_IO_H
#define ENGINE_MODEL_IO_H

#include "model.h"

/* Weights files (safetensors, F32, PyTorch [out, in] layouts): tensor names wte, wpe (variants with learned positions),
 * h.{l}.ln1.w, h.{l}.ln1.b, h.{l}.attn.qkv.w [3C,C], h.{l}.attn.qkv.b, h.{l}.attn.proj.w, h.{l}.attn.proj.b,
 * h.{l}.<scale suffix> [H] (variants with a learned scale: h.{l}.attn.tau for cosine_rope, log tau
 * when tau_param is log; h.{l}.attn.scale for cosine_rope_scale, log s when scale_param is log),
 * h.{l}.ln2.w, h.{l}.ln2.b,
 * h.{l}.mlp.fc.w [4C,C], h.{l}.mlp.fc.b, h.{l}.mlp.proj.w [C,4C], h.{l}.mlp.proj.b, lnf.w, lnf.b,
 * lm_head.w [V,C]. __metadata__ carries the config (n_layer, n_head, d_model, seq_len, vocab,
 * attention, rope_base, tau_init, tau_param, scale_init, scale_param, scale_clamp) and how the engine
 * computes with it, so that the file alone rebuilds the model elsewhere:
 *   positions      "learned" (wpe added to wte[tok]) or "none"
 *   qk_transform   what q, k go through before the score: "none", "rope", "l2norm", "l2norm,rope"
 *                  (l2norm: q / sqrt(sum q^2 + cosine_eps), then rotated), "custom" (test-only rows)
 *   rope_layout    MODEL_ROPE_LAYOUT: "interleaved", pairs (2i, 2i+1), angle pos * rope_base^(-2i/d)
 *   cosine_eps     COSINE_NORM_EPS, as "%.17g"
 *   score_scale    the score's multiplier g (score = g q_used.k_used): "fixed" (g = fixed_scale),
 *                  "inv_tau" (g = 1/tau, h.{l}.attn.tau holds tau, or log tau when tau_param is log),
 *                  "mult" (g = min(s, scale_clamp), clamp 0 = none; h.{l}.attn.scale holds s or log s)
 *   fixed_scale    g for "fixed" ("%.17g", 1/sqrt(d)); "none" for the learned forms
 *   layernorm_eps  LAYERNORM_EPS: y = (x - mean) / sqrt(var + eps) w + b, biased variance
 *   gelu           MODEL_GELU: "tanh", 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 *   attnlab_version  the version that wrote the file
 * (all strings), then "format" = "attnlab-weights" and any extra pairs given. */
engine_status model_save(const model *m, const char *path, const char *const *extra_meta, int n_extra,
                         engine_error *err);
/* The most extra pairs model_save takes. */
#define MODEL_SAVE_MAX_EXTRA 32
#define MODEL_ROPE_LAYOUT "interleaved"
#define MODEL_GELU "tanh"
/* The config and the engine's description of it (above) as safetensors metadata: kv[2i] = key,
 * kv[2i+1] = value (pointing into vals or static strings). */
#define MODEL_META_COUNT 21
void model_config_metadata(const model_config *c, char vals[MODEL_META_COUNT][48],
                           const char *kv[2 * MODEL_META_COUNT]);
/* Reads the config from a weights or checkpoint file's metadata (ENGINE_ERR_FORMAT if absent or
 * invalid). The description keys are optional (files written before them load as before), but one
 * that is present must agree with how this engine computes for that config (ENGINE_ERR_FORMAT
 * otherwise: a file that says half-split RoPE or erf GELU is not one this engine can run). */
engine_status model_config_from_file(const char *path, model_config *cfg, engine_error *err);
/* The same on a file already open (safetensors.h); path only names it in messages. */
struct safetensors;
engine_status model_config_from_safetensors(const struct safetensors *st, const char *path, model_config *cfg,
                                            engine_error *err);
/* Copies the parameters from a weights or checkpoint file into m: every tensor must be present
 * with the model's shape and the file's config must match m's (ENGINE_ERR_FORMAT otherwise). */
engine_status model_load_params(model *m, const char *path, engine_error *err);
/* model_config_from_file + model_new + model_load_params. */
engine_status model_load(model **out, const char *path, int batch, int n_threads, int with_grads, engine_error *err);

#endif
