/* The probe-parameter validator: the first input byte picks a probe kind, the rest is JSON
 * parameters. probe_params_resolve either names the bad parameter or gives a complete parameter
 * object that resolves to itself; every kind's defaults resolve. (Probes are not run: their cost
 * is bounded by these same parameters, which is what is checked here.) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/probe.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    for (int i = 0; i < probe_kind_count(); i++) {
        probe_error err;
        memset(&err, 0, sizeof err);
        json_t *p = probe_params_resolve(probe_kind_at(i), NULL, &err);
        if (!p) {
            fprintf(stderr, "fuzz_probe_params: defaults of %s do not resolve: %s\n", probe_kind_at(i)->name,
                    err.message);
            abort();
        }
        json_decref(p);
    }
    json_t *kinds = probe_kinds_json();
    if (!kinds) abort();
    json_decref(kinds);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 16384) return -1;
    int n = probe_kind_count();
    if (n <= 0) abort();
    const probe_kind *kind = probe_kind_at(data[0] % n);
    json_error_t jerr;
    json_t *in = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!in) return 0;
    probe_error err;
    memset(&err, 0, sizeof err);
    json_t *out = probe_params_resolve(kind, in, &err);
    if (!out) {
        if (!err.message[0]) abort();
        json_decref(in);
        return 0;
    }
    if (!json_is_object(out)) abort();
    probe_error err2;
    memset(&err2, 0, sizeof err2);
    json_t *again = probe_params_resolve(kind, out, &err2);
    if (!again || !json_equal(again, out)) {
        fprintf(stderr, "fuzz_probe_params: %s: resolved parameters do not resolve to themselves (%s)\n", kind->name,
                err2.message);
        abort();
    }
    json_decref(again);
    json_decref(out);
    json_decref(in);
    return 0;
}
