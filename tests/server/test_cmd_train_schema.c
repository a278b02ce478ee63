/* `attnlabd train` and the REST API share one RunConfig: every property of the schema in
 * server/api/openapi.json is a flag of `attnlabd train --help` with the schema's default and enum, no
 * run-config flag exists that the schema lacks, and a flag run through the command is checked by
 * the same rules (bounds, enums) as the API. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/harness.h"
#include "../support/test.h"

static char *help;
static json_t *props;

static char *run_capture(const char *cmd) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        pclose(p);
        return NULL;
    }
    size_t got;
    while ((got = fread(buf + n, 1, cap - 1 - n, p)) > 0) n += got;
    buf[n] = 0;
    pclose(p);
    return buf;
}

/* The help line of a flag ("  --n-layer ..."), copied into out; NULL when absent. */
static const char *help_line(const char *flag, char *out, size_t len) {
    char needle[96];
    snprintf(needle, sizeof needle, "\n  %s ", flag);
    const char *at = strstr(help, needle);
    if (!at) return NULL;
    at += 1;
    size_t n = strcspn(at, "\n");
    if (n >= len) n = len - 1;
    memcpy(out, at, n);
    out[n] = 0;
    return out;
}

static void flag_of(const char *key, char *out) {
    strcpy(out, "--");
    size_t o = 2;
    for (const char *p = key; *p; p++) out[o++] = *p == '_' ? '-' : *p;
    out[o] = 0;
}

static void value_text(const json_t *v, char *out, size_t len) {
    if (json_is_string(v))
        snprintf(out, len, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(out, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(out, len, "%g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(out, len, "%s", json_is_true(v) ? "true" : "false");
    else
        out[0] = 0;
}

TEST(every_schema_field_is_a_flag_with_its_default_and_values) {
    const char *key;
    json_t *prop;
    int n = 0;
    json_object_foreach(props, key, prop) {
        char flag[80], line[512], want[128], v[64];
        flag_of(key, flag);
        CHECK_MSG(help_line(flag, line, sizeof line), "%s (RunConfig.%s) is not in attnlabd train --help", flag, key);
        const json_t *def = json_object_get(prop, "default");
        if (def) {
            value_text(def, v, sizeof v);
            snprintf(want, sizeof want, "(default %s)", v);
            CHECK_MSG(strstr(line, want), "%s: help says [%s], schema default is %s", flag, line, v);
        }
        size_t i;
        json_t *opt;
        json_array_foreach(json_object_get(prop, "enum"), i, opt) {
            value_text(opt, v, sizeof v);
            CHECK_MSG(strstr(line, v), "%s: help [%s] lacks enum value %s", flag, line, v);
        }
        n++;
    }
    /* No run-config flag the schema does not have: the section has exactly one line per field. */
    const char *start = strstr(help, "run config");
    const char *end = start ? strstr(start, "files and machine") : NULL;
    CHECK(start && end);
    int lines = 0;
    for (const char *p = strstr(start, "\n  --"); p && p < end; p = strstr(p + 1, "\n  --")) lines++;
    CHECK_EQ_INT(lines, n);
}

TEST(flags_are_checked_by_the_api_rules) {
    char cmd[1024];
    const char *bad[][2] = {
        {"--n-layer 25", "--n-layer must be <= 24"},
        {"--attention sideways", "--attention must be one of"},
        {"--lr 0", "--lr must be > 0"},
        {"--n-head 3", "--n-head must divide d_model"},
        {"--order random", "--order must be one of"},
        {"--no-such-flag 1", "unknown flag"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' train %s --steps 1 2>&1; echo \"rc=$?\"", harness_attnlabd(), bad[i][0]);
        char *out = run_capture(cmd);
        CHECK(out);
        int ok = strstr(out, bad[i][1]) && strstr(out, "rc=2");
        if (!ok) printf("  output of [%s]: %s\n", bad[i][0], out);
        free(out);
        CHECK_MSG(ok, "[%s] should exit 2 saying '%s'", bad[i][0], bad[i][1]);
    }
}

int main(void) {
    json_error_t jerr;
    json_t *doc = json_load_file("server/api/openapi.json", 0, &jerr);
    props = json_object_get(
        json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"), "RunConfig"), "properties");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "'%s' train --help", harness_attnlabd());
    help = run_capture(cmd);
    if (!json_is_object(props) || !help) {
        printf("FAIL setup: no schema (%s) or no help output\n", jerr.text);
        return 1;
    }
    RUN(every_schema_field_is_a_flag_with_its_default_and_values);
    RUN(flags_are_checked_by_the_api_rules);
    free(help);
    json_decref(doc);
    return test_summary();
}
