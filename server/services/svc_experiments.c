#include "services/svc_experiments.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services/app.h"
#include "util/log.h"
#include "core/run_config.h"
#include "services/svc_runs.h"

/* ---- the presets: data (server/api/presets.json, compiled in) ------------------------------ */

/* Generated from server/api/presets.json by scripts/embed_text.sh. */
extern const char presets_json[];

/* The presets as published (GET /api/presets: name, description, base, variants, replicates, tiny)
 * and, for each, the task corpora it makes ({"name": corpus, "task": spec} each; [] for none);
 * expanded once from the data file. */
static json_t *published, *corpora_of;
static pthread_once_t presets_once = PTHREAD_ONCE_INIT;

/* A list of configs (names of the file's configs, or objects) merged left to right; NULL when a
 * name is unknown or out of memory. */
static json_t *merged_configs(const json_t *list, const json_t *configs) {
    json_t *out = json_object();
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        const json_t *part = json_is_string(c) ? json_object_get(configs, json_string_value(c)) : c;
        if (!out || !json_is_object(part) || json_object_update(out, (json_t *)part) < 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* A preset's variants: each arm named, or each task and arm ("<task>.<arm>" on the task's corpus);
 * its task corpora into *made. NULL when an arm or task is unknown or out of memory. */
static json_t *expanded_variants(const json_t *preset, const json_t *arms, const json_t *tasks, json_t *made) {
    json_t *out = json_array(), *names = json_object_get(preset, "tasks");
    size_t n_tasks = json_is_array(names) ? json_array_size(names) : 1, t, k;
    json_t *arm;
    int bad = !out;
    for (t = 0; !bad && t < n_tasks; t++) {
        const char *tname = json_string_value(json_array_get(names, t));
        const json_t *task = tname ? json_object_get(tasks, tname) : NULL;
        const char *tcorpus = json_string_value(json_object_get(task, "corpus"));
        if (names && (!tcorpus || json_array_append_new(made, json_pack("{s:s, s:O}", "name", tcorpus, "task",
                                                                        json_object_get(task, "task"))) < 0))
            bad = 1;
        json_array_foreach(json_object_get(preset, "variants"), k, arm) {
            json_t *cfg = json_deep_copy(json_object_get(arms, json_string_value(arm)));
            char name[128];
            snprintf(name, sizeof name, "%s%s%s", tname ? tname : "", tname ? "." : "", json_string_value(arm));
            if (bad || !json_is_object(cfg) ||
                (tcorpus && json_object_set_new(cfg, "corpus", json_string(tcorpus)) < 0) ||
                json_array_append_new(out, json_pack("{s:s, s:o}", "name", name, "config", cfg)) < 0) {
                json_decref(cfg);
                bad = 1;
                break;
            }
        }
    }
    if (!bad) return out;
    json_decref(out);
    return NULL;
}

static void presets_load(void) {
    json_t *doc = json_loads(presets_json, 0, NULL), *p;
    const json_t *configs = json_object_get(doc, "configs"), *arms = json_object_get(doc, "arms"),
                 *tasks = json_object_get(doc, "tasks");
    json_t *pub = json_array(), *corp = json_array();
    size_t i;
    int bad = !doc || !pub || !corp;
    json_array_foreach(json_object_get(doc, "presets"), i, p) {
        json_t *own = json_array();
        json_t *o = bad || !own ? NULL
                                : json_pack("{s:O, s:O, s:o*, s:o*, s:O, s:o*}", "name", json_object_get(p, "name"),
                                            "description", json_object_get(p, "description"), "base",
                                            merged_configs(json_object_get(p, "base"), configs), "variants",
                                            expanded_variants(p, arms, tasks, own), "replicates",
                                            json_object_get(p, "replicates"), "tiny",
                                            merged_configs(json_object_get(p, "tiny"), configs));
        /* a member that could not be made is left out by o*: the preset is broken */
        bad |=
            !o || json_object_size(o) != 6 || json_array_append_new(pub, o) < 0 || json_array_append_new(corp, own) < 0;
        if (bad) break;
    }
    json_decref(doc);
    if (bad || json_array_size(pub) == 0) {
        log_error("the compiled-in presets (server/api/presets.json) are malformed");
        json_decref(pub);
        json_decref(corp);
        pub = json_array();
        corp = json_array();
    }
    published = pub;
    corpora_of = corp;
}

/* Makes the task corpora preset i trains on (nothing when they exist with the same config). */
static svc_status preset_prepare(app *a, size_t i, svc_error *err) {
    size_t t;
    json_t *c;
    json_array_foreach(json_array_get(corpora_of, i), t, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        tasks_config cfg;
        char field[64], msg[512];
        if (corpora_task_config_parse(json_object_get(c, "task"), &cfg, field, sizeof field, msg, sizeof msg) < 0)
            return svc_fail(err, SVC_FAILED, "internal", NULL, "the preset's task %s is malformed", name);
        corpora_task_result r = corpora_create_task(a->corpora, name, &cfg, msg, sizeof msg);
        if (r == CORPORA_TASK_CONFLICT)
            return svc_fail(err, SVC_CONFLICT, "conflict", "preset", "the preset's corpus %s: %s", name, msg);
        if (r == CORPORA_TASK_FAILED) return svc_fail(err, SVC_FAILED, "internal", NULL, "%s", msg);
    }
    return SVC_OK;
}

json_t *svc_experiments_presets(void) {
    pthread_once(&presets_once, presets_load);
    return json_deep_copy(published);
}

/* The index of the preset named name, or -1. */
static int preset_index(const char *name) {
    pthread_once(&presets_once, presets_load);
    for (size_t i = 0; i < json_array_size(published); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(published, i), "name")), name)) return (int)i;
    return -1;
}

int svc_experiments_variant_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > SVC_EXPERIMENTS_MAX_VARIANT_NAME) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              strchr("_.-=,+", s[i])))
            return 0;
    return 1;
}

/* A grid value as a variant name shows it: integers and booleans as JSON writes them, numbers to 15
 * significant digits (1e-3 is "0.001"), strings as they are. Writes at most len - 1 characters;
 * returns the length it needed. */
static int grid_value_text(const json_t *v, char *buf, size_t len) {
    if (json_is_string(v)) return snprintf(buf, len, "%s", json_string_value(v));
    if (json_is_integer(v)) return snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    if (json_is_real(v)) return snprintf(buf, len, "%.15g", json_real_value(v));
    return snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
}

/* Checks a grid: an object of 1..SVC_EXPERIMENTS_MAX_GRID_KEYS RunConfig keys, each an array of
 * 1..SVC_EXPERIMENTS_MAX_GRID_VALUES distinct values that the key takes; *n gets the number of
 * combinations, or SIZE_MAX once it passes SVC_EXPERIMENTS_MAX_RUNS. */
static svc_status grid_check(const json_t *grid, size_t *n, svc_error *err) {
    *n = 0;
    if (!json_is_object(grid) || json_object_size(grid) < 1 || json_object_size(grid) > SVC_EXPERIMENTS_MAX_GRID_KEYS)
        return svc_fail(err, SVC_INVALID, "invalid_field", "grid",
                        "grid must be an object of 1 to %d config keys, each with an array of values",
                        SVC_EXPERIMENTS_MAX_GRID_KEYS);
    size_t product = 1;
    const char *key;
    const json_t *vals;
    json_object_foreach((json_t *)grid, key, vals) {
        char field[96];
        snprintf(field, sizeof field, "grid.%.80s", key);
        size_t nv = json_array_size(vals);
        if (!json_is_array(vals) || nv < 1 || nv > SVC_EXPERIMENTS_MAX_GRID_VALUES)
            return svc_fail(err, SVC_INVALID, "invalid_field", field, "%s must be an array of 1 to %d values", field,
                            SVC_EXPERIMENTS_MAX_GRID_VALUES);
        for (size_t i = 0; i < nv; i++) {
            const json_t *v = json_array_get(vals, i);
            run_config_error cerr;
            if (run_config_check_field(key, v, "grid.", &cerr) < 0)
                return svc_fail(err, SVC_INVALID, "invalid_field", cerr.field, "%s", cerr.message);
            for (size_t k = 0; k < i; k++)
                if (json_equal((json_t *)v, json_array_get(vals, k)))
                    return svc_fail(err, SVC_INVALID, "invalid_field", field, "%s has the value at [%zu] twice", field,
                                    i);
        }
        product = product > SVC_EXPERIMENTS_MAX_RUNS ? product : product * nv;
    }
    *n = product > SVC_EXPERIMENTS_MAX_RUNS ? SIZE_MAX : product;
    return SVC_OK;
}

/* The variants of a checked grid of n combinations: [{"name":"k1=v1,k2=v2","config":{k1:v1,k2:v2}}]
 * with the first key varying slowest. NULL with err set when out of memory or a name would be too
 * long. */
static json_t *grid_variants(const json_t *grid, size_t n, svc_error *err) {
    size_t nk = json_object_size(grid);
    const char *keys[SVC_EXPERIMENTS_MAX_GRID_KEYS];
    const json_t *vals[SVC_EXPERIMENTS_MAX_GRID_KEYS];
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)grid, key, v) {
        keys[k] = key;
        vals[k++] = v;
    }
    json_t *out = json_array();
    for (size_t c = 0; out && c < n; c++) {
        char name[SVC_EXPERIMENTS_MAX_VARIANT_NAME + 64] = "";
        size_t used = 0, rest = c;
        json_t *cfg = json_object();
        int bad = !cfg;
        /* Combination c in mixed radix, the last key's index changing fastest. */
        size_t idx[SVC_EXPERIMENTS_MAX_GRID_KEYS];
        for (size_t j = nk; j-- > 0;) {
            idx[j] = rest % json_array_size(vals[j]);
            rest /= json_array_size(vals[j]);
        }
        for (size_t j = 0; j < nk && !bad; j++) {
            const json_t *x = json_array_get(vals[j], idx[j]);
            char text[64];
            grid_value_text(x, text, sizeof text);
            int w = snprintf(name + used, sizeof name - used, "%s%s=%s", j ? "," : "", keys[j], text);
            if (w < 0 || (size_t)w >= sizeof name - used) {
                used = sizeof name;
                break;
            }
            used += (size_t)w;
            bad = json_object_set_new(cfg, keys[j], json_deep_copy(x)) < 0;
        }
        if (!bad && (used > SVC_EXPERIMENTS_MAX_VARIANT_NAME || !svc_experiments_variant_name_ok(name))) {
            json_decref(cfg);
            json_decref(out);
            svc_fail(err, SVC_INVALID, "invalid_field", "grid",
                     "the grid's variant name '%.60s...' is longer than %d characters or has characters other than "
                     "letters, digits and _ . - = , +",
                     name, SVC_EXPERIMENTS_MAX_VARIANT_NAME);
            return NULL;
        }
        json_t *variant = bad ? NULL : json_pack("{s:s, s:o}", "name", name, "config", cfg);
        if (!variant) {
            if (!bad) cfg = NULL; /* json_pack's "o" took it even on failure */
            json_decref(cfg);
            json_decref(out);
            out = NULL;
            break;
        }
        if (json_array_append_new(out, variant) < 0) {
            json_decref(out);
            out = NULL;
        }
    }
    if (!out) svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    return out;
}

void svc_experiments_plan_free(svc_experiment_plan *plan) {
    json_decref(plan->all_variants);
    json_decref(plan->base);
    json_decref(plan->variants);
    json_decref(plan->configs);
    memset(plan, 0, sizeof *plan);
}

/* The base config and variants of a request, before any variant is looked at. */
static svc_status plan_base(app *a, const svc_experiment_request *r, svc_experiment_plan *p, svc_error *err) {
    if (r->overrides && !json_is_object(r->overrides))
        return svc_fail(err, SVC_INVALID, "invalid_field", "overrides", "overrides must be an object of config fields");
    p->replicates = 1;
    if (r->preset) {
        int at = preset_index(r->preset);
        if (at < 0) {
            char known[256] = "";
            for (size_t i = 0; i < json_array_size(published); i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                         json_string_value(json_object_get(json_array_get(published, i), "name")));
            return svc_fail(err, SVC_INVALID, "invalid_field", "preset", "unknown preset '%s' (known: %s)", r->preset,
                            known);
        }
        svc_status ps = preset_prepare(a, (size_t)at, err);
        if (ps != SVC_OK) return ps;
        const json_t *preset = json_array_get(published, (size_t)at);
        p->base = run_config_merge(json_object_get(preset, "base"), r->base);
        p->variants =
            r->variants ? json_incref((json_t *)r->variants) : json_deep_copy(json_object_get(preset, "variants"));
        p->preset = json_string_value(json_object_get(preset, "name"));
        if (!p->name) p->name = p->preset;
        p->replicates = (int)json_integer_value(json_object_get(preset, "replicates"));
    } else {
        if (!json_is_object(r->base))
            return svc_fail(err, SVC_INVALID, "invalid_field", "base",
                            "give a preset, or a base config object and variants");
        p->base = json_deep_copy(r->base);
        p->variants = json_incref((json_t *)r->variants);
    }
    if (!p->base) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (r->overrides && json_object_update(p->base, (json_t *)r->overrides) < 0)
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (r->replicates) {
        json_int_t n = json_is_integer(r->replicates) ? json_integer_value(r->replicates) : 0;
        if (n < 1 || n > SVC_EXPERIMENTS_MAX_REPLICATES)
            return svc_fail(err, SVC_INVALID, "invalid_field", "replicates",
                            "replicates must be an integer from 1 to %d (runs per variant, seeds seed, seed+1, ...)",
                            SVC_EXPERIMENTS_MAX_REPLICATES);
        p->replicates = (int)n;
    }
    size_t nv;
    if (r->grid) {
        if (r->variants)
            return svc_fail(err, SVC_INVALID, "invalid_field", "grid", "give either grid or variants, not both");
        svc_status gs = grid_check(r->grid, &nv, err);
        if (gs != SVC_OK) return gs;
    } else {
        nv = json_array_size(p->variants);
        if (!json_is_array(p->variants) || nv < 1 || nv > SVC_EXPERIMENTS_MAX_RUNS)
            return svc_fail(err, SVC_INVALID, "invalid_field", "variants",
                            "variants must be an array of 1 to %d objects", SVC_EXPERIMENTS_MAX_RUNS);
    }
    /* The bound is checked before a grid's product is built. */
    if (nv == SIZE_MAX || nv * (size_t)p->replicates > SVC_EXPERIMENTS_MAX_RUNS) {
        if (nv == SIZE_MAX)
            return svc_fail(err, SVC_INVALID, "invalid_field", "grid",
                            "the grid makes more than %d variants; an experiment has at most %d runs (variants x "
                            "replicates)",
                            SVC_EXPERIMENTS_MAX_RUNS, SVC_EXPERIMENTS_MAX_RUNS);
        return svc_fail(err, SVC_INVALID, "invalid_field", r->grid ? "grid" : "variants",
                        "%zu variants x %d replicates make %zu runs; an experiment has at most %d runs", nv,
                        p->replicates, nv * (size_t)p->replicates, SVC_EXPERIMENTS_MAX_RUNS);
    }
    if (r->grid) {
        json_decref(p->variants);
        if (!(p->variants = grid_variants(r->grid, nv, err))) return err->status;
    }
    return SVC_OK;
}

/* The largest seed a config takes (RunConfig.seed's maximum, 2^53 - 1). */
#define MAX_SEED 9007199254740991LL

/* Variant i: its shape, its name once, its merged config normalised and admitted. */
static svc_status plan_variant(app *a, svc_experiment_plan *p, size_t i, svc_error *err) {
    char field[64];
    snprintf(field, sizeof field, "variants[%zu]", i);
    json_t *v = json_array_get(p->variants, i);
    const char *vname = json_string_value(json_object_get(v, "name"));
    json_t *vcfg = json_object_get(v, "config");
    if (!json_is_object(v) || !vname || !svc_experiments_variant_name_ok(vname) || (vcfg && !json_is_object(vcfg)) ||
        json_object_size(v) != (size_t)(1 + (vcfg != NULL)))
        return svc_fail(err, SVC_INVALID, "invalid_field", field,
                        "%s must be {\"name\": 1-%d characters of letters, digits and _ . - = , +, \"config\": "
                        "{fields that differ}}",
                        field, SVC_EXPERIMENTS_MAX_VARIANT_NAME);
    for (size_t k = 0; k < i; k++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(p->variants, k), "name")), vname))
            return svc_fail(err, SVC_INVALID, "invalid_field", field, "variant name '%s' is used twice", vname);
    json_t *merged = run_config_merge(p->base, vcfg), *norm = NULL;
    if (!merged) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    run_config_error cerr;
    snprintf(field, sizeof field, "variants[%zu].config.", i);
    int bad = run_config_normalize(merged, field, &norm, &cerr);
    json_decref(merged);
    if (bad) return svc_fail(err, SVC_INVALID, "invalid_field", cerr.field, "%s", cerr.message);
    if (json_array_append_new(p->configs, norm) < 0)
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (json_integer_value(json_object_get(norm, "seed")) > MAX_SEED - (p->replicates - 1))
        return svc_fail(err, SVC_INVALID, "invalid_field", "replicates",
                        "%d replicates from seed %lld pass the largest seed (%lld)", p->replicates,
                        (long long)json_integer_value(json_object_get(norm, "seed")), MAX_SEED);
    return svc_runs_admit(a, norm, field, (int)(json_array_size(p->variants) * (size_t)p->replicates), err);
}

svc_status svc_experiments_plan(app *a, const svc_experiment_request *r, svc_experiment_plan *plan, svc_error *err) {
    memset(plan, 0, sizeof *plan);
    plan->name = r->name;
    plan->name_given = r->name_given;
    plan->first_replicate = r->first_replicate;
    plan->tags = r->tags;
    svc_status v = plan_base(a, r, plan, err);
    if (v == SVC_OK && !(plan->configs = json_array()))
        v = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    /* Every variant is checked before any run is made: an experiment is created whole or not at all. */
    for (size_t i = 0; v == SVC_OK && i < json_array_size(plan->variants); i++) v = plan_variant(a, plan, i, err);
    /* Refuse now rather than leave half an experiment queued. */
    size_t n = json_array_size(plan->configs) * (size_t)(plan->replicates - plan->first_replicate);
    plan->n_runs = n;
    /* More runs than the queue can ever hold is no reason to try again later (it was a 429 forever). */
    if (v == SVC_OK && n > (size_t)jobs_max_queued(a->jobs))
        v = svc_fail(err, SVC_INVALID, "too_many_runs", NULL,
                     "an experiment of %zu runs can never fit the training queue, which holds %d (attnlabd "
                     "--max-queued); ask for fewer variants or replicates, or start the server with a larger queue",
                     n, jobs_max_queued(a->jobs));
    if (v == SVC_OK && jobs_queue_room(a->jobs) < (int)n) {
        v = svc_fail(err, SVC_BUSY, "queue_full", NULL, "the training queue has no room for %zu runs; try again later",
                     n);
        err->retry_after = 30;
    }
    if (v != SVC_OK) svc_experiments_plan_free(plan);
    return v;
}

/* The config of run k: variant k % nv's, its seed plus its replicate, first_replicate + k / nv. NULL
 * when out of memory. */
static json_t *run_config_of(const svc_experiment_plan *p, size_t k) {
    size_t nv = json_array_size(p->configs);
    json_t *cfg = json_deep_copy(json_array_get(p->configs, k % nv));
    json_int_t seed = json_integer_value(json_object_get(cfg, "seed")) + p->first_replicate + (json_int_t)(k / nv);
    if (cfg && json_object_set_new(cfg, "seed", json_integer(seed)) < 0) {
        json_decref(cfg);
        return NULL;
    }
    return cfg;
}

svc_status svc_experiments_commit(app *a, const svc_experiment_plan *p, long long *exp_id, long long *run_ids,
                                  svc_error *err) {
    *exp_id = 0;
    size_t n = p->n_runs, nv = json_array_size(p->configs);
    for (size_t i = 0; i < n; i++) run_ids[i] = 0;
    store_new_run *rows = calloc(n, sizeof *rows);
    char **texts = calloc(n, sizeof *texts), **names = calloc(n, sizeof *names);
    json_t **cfgs = calloc(n, sizeof *cfgs);
    char *base_text = json_dumps(p->base, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    char *variants_text = json_dumps(p->all_variants ? p->all_variants : p->variants, JSON_COMPACT);
    svc_status v = rows && texts && names && cfgs && base_text && variants_text && nv ? SVC_OK : SVC_FAILED;
    for (size_t i = 0; v == SVC_OK && i < n; i++) {
        const char *vname = json_string_value(json_object_get(json_array_get(p->variants, i % nv), "name"));
        int rep = p->first_replicate + (int)(i / nv);
        int rc = p->replicates > 1 ? asprintf(&names[i], "%s/%s/r%d", p->name ? p->name : "experiment", vname, rep)
                                   : asprintf(&names[i], "%s/%s", p->name ? p->name : "experiment", vname);
        if (rc < 0 || !(cfgs[i] = run_config_of(p, i))) {
            if (rc < 0) names[i] = NULL;
            v = SVC_FAILED;
            break;
        }
        svc_new_run r = {.name = names[i], .variant = vname, .tags = p->tags, .config = cfgs[i]};
        if (svc_runs_store_row(&r, &rows[i], &texts[i]) < 0) v = SVC_FAILED;
        rows[i].replicate = rep;
    }
    if (v != SVC_OK) {
        svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    } else {
        /* A name the request gave is its own (409 when in use); a default one (the preset's, the
         * bundle's, "experiment") takes the first free "name (2)", "name (3)", … */
        store_new_experiment e = {.name = p->name ? p->name : "experiment",
                                  .preset = p->preset,
                                  .base_json = base_text,
                                  .variants_json = variants_text,
                                  .replicates = p->replicates,
                                  .rename_if_taken = !p->name_given,
                                  .idempotency = p->idem && !p->into ? &p->idem->record : NULL};
        long long id = p->into;
        store_status s = STORE_CONFLICT;
        svc_status key = SVC_NOT_FOUND; /* what a conflict with the idempotency key says; NOT_FOUND: none */
        /* on a shared database another node may take the free name first: try the next; a conflict
         * may also be the idempotency key, recorded by a request alongside (then it is a retry) */
        for (int tries = 0; !p->into && key == SVC_NOT_FOUND && s == STORE_CONFLICT && tries < 3; tries++) {
            s = store_experiment_create(a->store, &e, rows, n, &id, run_ids);
            if (s == STORE_CONFLICT && p->idem) key = svc_idempotency_settle(a, p->idem, err);
        }
        if (p->into) s = store_experiment_add_runs(a->store, id, variants_text, p->replicates, rows, n, run_ids);
        if (key == SVC_OK) {
            *exp_id = p->idem->replay;
        } else if (key != SVC_NOT_FOUND) {
            v = key; /* the key was used for another request, or could not be read */
        } else if (s == STORE_CONFLICT) {
            v = svc_fail(err, SVC_CONFLICT, "conflict", "name",
                         "an experiment named '%s' exists: choose another name, or rename or delete that one", e.name);
        } else if (s == STORE_NOT_FOUND) {
            v = svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no experiment %lld", id);
        } else if (s != STORE_OK) {
            v = svc_store_failed(err);
        } else if (jobs_submit_runs(a->jobs, run_ids, (int)n) < 0) {
            /* The queue filled up since the plan: take the whole experiment back; runs added to an
             * experiment that has others stay, ended, saying why. */
            static const char *const queued[] = {"queued", NULL};
            if (!p->into && store_experiment_discard(a->store, id) != STORE_OK)
                log_warn("experiment %lld: could not take back an experiment the queue refused: %s", id,
                         store_last_error());
            for (size_t i = 0; p->into && i < n; i++)
                if (store_run_transition(a->store, run_ids[i], queued, "failed",
                                         "the training queue was full when the run was added") != STORE_OK)
                    log_warn("run %lld: could not mark a run the queue refused as failed: %s", run_ids[i],
                             store_last_error());
            for (size_t i = 0; i < n; i++) run_ids[i] = 0;
            v = svc_fail(err, SVC_BUSY, "queue_full", NULL, "the training queue is full; try again later");
            err->retry_after = 30;
        } else {
            *exp_id = id;
        }
    }
    for (size_t i = 0; i < n && texts && names && cfgs; i++) {
        free(texts[i]);
        free(names[i]);
        json_decref(cfgs[i]);
    }
    free(cfgs);
    free(rows);
    free(texts);
    free(names);
    free(base_text);
    free(variants_text);
    return v;
}
