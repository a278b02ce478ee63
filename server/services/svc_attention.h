/* The table of attention variants (engine/attention.h) as the API publishes it (GET
 * /api/attention-kinds), so that clients read each variant's traits instead of knowing names:
 *   {"kinds": [{"name", "summary", "learned_positions", "rotates", "normalises_qk",
 *               "scale": {"form": "fixed"}
 *                      | {"form": "tau" | "mult", "tensor": "attn.tau", "init": "tau_init",
 *                         "param": "tau_param", "clamp": "scale_clamp" (mult only)}}],
 *    "rules": {"initial_value": …, "recorded_tau": {"tau": …, "mult": …}}}
 * where a scale's "init", "param" and "clamp" name the RunConfig fields that set it, and "rules"
 * states in words the one rule of attention_scale_init and attention_initial_tau: a learned value
 * starts at its init field when above 0, else at sqrt(d_model / n_head); the temperature a run
 * records (tau.L.H) is that value for "tau", 1 / min(value, clamp) (clamp 0: none) for "mult". */
#ifndef ATTNLAB_SVC_ATTENTION_H
#define ATTNLAB_SVC_ATTENTION_H

#include <jansson.h>

/* The table as JSON; NULL when out of memory. */
json_t *svc_attention_kinds(void);

#endif
