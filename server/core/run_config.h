/* Run configurations as the API sees them: a JSON object checked against the RunConfig schema of
 * server/api/openapi.json (types, bounds, enums, no unknown fields), completed with its defaults, and
 * turned into the engine's train_config. The schema is the single source of the bounds: the
 * dashboard reads the same document to build its form. */
#ifndef ATTNLAB_RUN_CONFIG_H
#define ATTNLAB_RUN_CONFIG_H

#include <jansson.h>
#include <stddef.h>

#include "engine/train.h"

/* Parses the embedded OpenAPI document once; -1 if it is broken (a build error, really). */
int run_config_init(void);
void run_config_cleanup(void);
/* The parsed OpenAPI document (borrowed). */
const json_t *run_config_openapi(void);
/* The RunConfig schema's property `key` (borrowed), or NULL. */
const json_t *run_config_property(const char *key);

typedef struct {
    char field[64];
    char message[256];
} run_config_error;

/* Validates `in` (NULL = empty) and returns a new object with every field set: -1 on the first bad
 * field, named in err. `prefix` is prepended to field names in messages (e.g. "config."). */
int run_config_normalize(const json_t *in, const char *prefix, json_t **out, run_config_error *err);
/* Checks one field on its own against its RunConfig property (type, bounds, enum, pattern; no rule
 * that ties fields together): 0 when `key` is a RunConfig field and `v` a value it takes, -1 with
 * the reason in err otherwise (an unknown key included). err's field is prefix + key. */
int run_config_check_field(const char *key, const json_t *v, const char *prefix, run_config_error *err);
/* The text of one field's value as its RunConfig type reads it ("3" an integer, "1e-3" a number,
 * "true"/"false" a boolean, anything else a string), then checked as run_config_check_field does:
 * 0 with a new value in *out, or -1 with *out NULL and the reason in err. */
int run_config_field_from_text(const char *key, const char *text, const char *prefix, json_t **out,
                               run_config_error *err);
/* 0 when a config's own choices make `key` change nothing in its run, 1 otherwise (a key of a config
 * whose attention variant is unknown, as an external run's may be, counts as used): rope_base
 * without RoPE, tau_init and tau_param without a learned tau, scale_init, scale_param and
 * scale_clamp without a learned multiplier s, tau_weight_decay and scale_lr_mult with a fixed
 * scale, warmup_steps and min_lr_ratio with the constant lr schedule. One table, in run_config.c. */
int run_config_key_used(const json_t *cfg, const char *key);
/* Copies the fields of `overrides` over `base` (both objects; an overrides that is not one changes
 * nothing); a new reference, NULL when out of memory. */
json_t *run_config_merge(const json_t *base, const json_t *overrides);
/* A normalised config -> the engine's config. vocab comes from the corpus's tokenizer. */
void run_config_to_train(const json_t *cfg, int vocab, train_config *tc);

#endif
