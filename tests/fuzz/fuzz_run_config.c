/* The run-config validator (run_config_normalize against the OpenAPI RunConfig schema) on
 * arbitrary JSON: it accepts or names a field; an accepted config is a complete object that
 * normalises to itself, merges with overrides, turns into an engine config and is either valid
 * for the engine or refused by it with a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/run_config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (run_config_init() < 0) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 16384) return -1;
    json_error_t jerr;
    json_t *in = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!in) return 0;
    json_t *out = NULL;
    run_config_error err;
    memset(&err, 0, sizeof err);
    if (run_config_normalize(in, "config.", &out, &err) < 0) {
        if (out || !err.message[0]) {
            fprintf(stderr, "fuzz_run_config: refused without a message (field '%s')\n", err.field);
            abort();
        }
        json_decref(in);
        return 0;
    }
    if (!json_is_object(out)) abort();
    json_t *again = NULL;
    run_config_error err2;
    if (run_config_normalize(out, "config.", &again, &err2) < 0 || !json_equal(out, again)) {
        fprintf(stderr, "fuzz_run_config: a normalised config does not normalise to itself\n");
        abort();
    }
    if (json_is_object(in)) {
        json_t *merged = run_config_merge(out, in);
        if (!merged) abort();
        json_decref(merged);
    }
    train_config tc;
    run_config_to_train(out, 256, &tc);
    engine_error eerr = {0};
    if (train_config_validate(&tc, &eerr) != ENGINE_OK && !eerr.message[0]) abort();
    train_config_memory_bytes(&tc, 1);
    json_decref(again);
    json_decref(out);
    json_decref(in);
    return 0;
}
