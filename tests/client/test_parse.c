/* Client-side translation of the command line into API requests, and of API answers into
 * tables: typed config values, --vary, metric series shapes, probe parameters and results, error
 * lines and exit codes for HTTP statuses. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../client/cli.h"
#include "../../client/cmd_experiments.h"
#include "../../client/cmd_metrics.h"
#include "../../client/cmd_probes.h"
#include "../../client/httpc.h"
#include "../../client/table.h"
#include "../support/test.h"

static int json_eq_text(const json_t *v, const char *want) {
    json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
    int eq = w && json_equal((json_t *)v, w);
    json_decref(w);
    return eq;
}

static char *dump(const json_t *v) { return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY); }

TEST(values_are_typed_by_the_config_schema) {
    json_t *cfg = json_object();
    char msg[256];
    CHECK(cli_config_set(cfg, "steps", "20", msg, sizeof msg) == 0);
    CHECK(cli_config_set(cfg, "d-model", "32", msg, sizeof msg) == 0);
    CHECK(cli_config_set(cfg, "lr", "3e-4", msg, sizeof msg) == 0);
    CHECK(cli_config_set(cfg, "corpus", "2024", msg, sizeof msg) == 0); /* a name, even if numeric */
    CHECK(cli_config_set(cfg, "attention", "cosine_rope", msg, sizeof msg) == 0);
    CHECK(cli_config_set(cfg, "tau_weight_decay", "false", msg, sizeof msg) == 0);
    CHECK(cli_config_set(cfg, "rope_base", "10000", msg, sizeof msg) == 0);
    char *s = dump(cfg);
    CHECK_MSG(json_eq_text(
                  cfg, "{\"steps\":20,\"d_model\":32,\"lr\":0.0003,\"corpus\":\"2024\",\"attention\":\"cosine_rope\","
                       "\"tau_weight_decay\":false,\"rope_base\":10000}"),
              "got %s", s);
    free(s);
    CHECK(cli_config_set(cfg, "steps", "twenty", msg, sizeof msg) < 0);
    CHECK(strstr(msg, "steps wants an integer"));
    CHECK(cli_config_set(cfg, "tau_weight_decay", "maybe", msg, sizeof msg) < 0);
    CHECK(cli_config_set(cfg, "steps", "2.5", msg, sizeof msg) < 0);
    json_decref(cfg);
}

TEST(config_flags_take_both_spellings) {
    char *argv[] = {"--set", "steps=20", "--d-model", "32",    "--n_head=2", "--attention",
                    "rope",  "--name",   "x",         "--set", "oops",       "--steps"};
    int argc = 12;
    json_t *cfg = json_object();
    char msg[256];
    int i = 0;
    CHECK_EQ_INT(cli_config_flag(cfg, argc, argv, &i, msg, sizeof msg), 1);
    CHECK_EQ_INT(i, 1);
    i = 2;
    CHECK_EQ_INT(cli_config_flag(cfg, argc, argv, &i, msg, sizeof msg), 1);
    CHECK_EQ_INT(i, 3);
    i = 4;
    CHECK_EQ_INT(cli_config_flag(cfg, argc, argv, &i, msg, sizeof msg), 1);
    CHECK_EQ_INT(i, 4);
    i = 5;
    CHECK_EQ_INT(cli_config_flag(cfg, argc, argv, &i, msg, sizeof msg), 1);
    i = 7; /* --name is not a config key */
    CHECK_EQ_INT(cli_config_flag(cfg, argc, argv, &i, msg, sizeof msg), 0);
    CHECK_EQ_INT(i, 7);
    i = 9;
    CHECK_EQ_INT(cli_config_flag(cfg, argc, argv, &i, msg, sizeof msg), -1);
    i = 11; /* a config flag with its value missing */
    CHECK_EQ_INT(cli_config_flag(cfg, argc, argv, &i, msg, sizeof msg), -1);
    CHECK(json_eq_text(cfg, "{\"steps\":20,\"d_model\":32,\"n_head\":2,\"attention\":\"rope\"}"));
    json_decref(cfg);
}

TEST(guessed_values) {
    struct {
        const char *in, *json;
    } cases[] = {{"3", "3"},
                 {"-2", "-2"},
                 {"0.5", "0.5"},
                 {"true", "true"},
                 {"null", "null"},
                 {"[1,2]", "[1,2]"},
                 {"{\"a\":1}", "{\"a\":1}"},
                 {"rope", "\"rope\""},
                 {"1,2", "\"1,2\""},
                 {"", "\"\""},
                 {"[oops", "\"[oops\""},
                 {"nan", "\"nan\""}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        json_t *v = cli_value_guess(cases[k].in);
        char *s = dump(v);
        CHECK_MSG(json_eq_text(v, cases[k].json), "'%s' -> %s", cases[k].in, s);
        free(s);
        json_decref(v);
    }
}

TEST(vary_makes_one_variant_per_value) {
    char msg[256];
    json_t *v = cmd_experiments_vary("attention=rope,cosine_rope", msg, sizeof msg);
    CHECK(v);
    CHECK(json_eq_text(v, "[{\"name\":\"rope\",\"config\":{\"attention\":\"rope\"}},"
                          "{\"name\":\"cosine_rope\",\"config\":{\"attention\":\"cosine_rope\"}}]"));
    json_decref(v);
    v = cmd_experiments_vary("rope-base=10000,500000", msg, sizeof msg);
    CHECK(v);
    CHECK(json_eq_text(v, "[{\"name\":\"10000\",\"config\":{\"rope_base\":10000}},"
                          "{\"name\":\"500000\",\"config\":{\"rope_base\":500000}}]"));
    json_decref(v);
    CHECK(cmd_experiments_vary("attention", msg, sizeof msg) == NULL);
    CHECK(cmd_experiments_vary("attention=", msg, sizeof msg) == NULL);
    CHECK(cmd_experiments_vary("attention=rope,,dot", msg, sizeof msg) == NULL);
    CHECK(cmd_experiments_vary("steps=10,many", msg, sizeof msg) == NULL);
    CHECK(strstr(msg, "integer"));
}

static char *table_text(table *t, int csv) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (csv)
        table_print_csv(t, f);
    else
        table_print(t, f);
    fclose(f);
    return buf;
}

TEST(metric_series_in_each_shape_give_one_row_per_step) {
    const char *answers[] = {
        "{\"run_id\":1,\"series\":{\"loss\":{\"steps\":[1,2,3],\"values\":[6.5,6.25,6]},"
        "\"val_loss\":{\"steps\":[2],\"values\":[6.4]}}}",
        "{\"series\":{\"loss\":[[1,6.5],[2,6.25],[3,6]],\"val_loss\":[[2,6.4]]}}",
        "{\"loss\":[{\"step\":1,\"value\":6.5},{\"step\":2,\"value\":6.25},{\"step\":3,\"value\":6}],"
        "\"val_loss\":[{\"step\":2,\"value\":6.4}]}",
        "{\"series\":[{\"key\":\"loss\",\"steps\":[1,2,3],\"values\":[6.5,6.25,6]},{\"key\":\"val_loss\",\"points\":[["
        "2,6.4]]}]}",
    };
    for (size_t k = 0; k < sizeof answers / sizeof answers[0]; k++) {
        json_t *a = json_loads(answers[k], 0, NULL);
        CHECK(a);
        char msg[256];
        table *t = cmd_metrics_table(a, msg, sizeof msg);
        json_decref(a);
        CHECK_MSG(t, "shape %zu: %s", k, msg);
        char *csv = table_text(t, 1);
        table_free(t);
        CHECK_MSG(!strcmp(csv, "step,loss,val_loss\n1,6.5,\n2,6.25,6.4\n3,6,\n"), "shape %zu: %s", k, csv);
        free(csv);
    }
    json_t *none = json_loads("{\"run_id\":1}", 0, NULL);
    char msg[256];
    CHECK(cmd_metrics_table(none, msg, sizeof msg) == NULL);
    json_decref(none);
}

TEST(metric_steps_merge_and_null_values_stay_empty) {
    json_t *a = json_loads("{\"series\":{\"tau.0.0\":{\"steps\":[10,0,20],\"values\":[5.5,5.656,null]},"
                           "\"lr\":{\"steps\":[0,20,20],\"values\":[0.0003,0.0002,0.0001]}}}",
                           0, NULL);
    char msg[256];
    table *t = cmd_metrics_table(a, msg, sizeof msg);
    json_decref(a);
    CHECK(t);
    char *txt = table_text(t, 0);
    table_free(t);
    /* Unsorted steps are found, a repeated step keeps its last sample, null is an empty cell. */
    CHECK_MSG(!strcmp(txt, "step  tau.0.0      lr\n"
                           "   0    5.656  0.0003\n"
                           "  10      5.5\n"
                           "  20           0.0001\n"),
              "got:\n%s", txt);
    free(txt);
}

TEST(probe_parameters_follow_their_schema) {
    char msg[256];
    json_t *list = json_loads("{\"name\":\"offsets\",\"type\":\"int_list\"}", 0, NULL);
    json_t *text = json_loads("{\"name\":\"text\",\"type\":\"text\"}", 0, NULL);
    json_t *num = json_loads("{\"name\":\"dim\",\"type\":\"int\"}", 0, NULL);
    json_t *v = cmd_probes_param_value(list, "0,16,256", msg, sizeof msg);
    CHECK(json_eq_text(v, "[0,16,256]"));
    json_decref(v);
    v = cmd_probes_param_value(list, "7", msg, sizeof msg);
    CHECK(json_eq_text(v, "[7]"));
    json_decref(v);
    CHECK(cmd_probes_param_value(list, "1,x", msg, sizeof msg) == NULL);
    v = cmd_probes_param_value(text, "42", msg, sizeof msg);
    CHECK(json_eq_text(v, "\"42\""));
    json_decref(v);
    v = cmd_probes_param_value(num, "64", msg, sizeof msg);
    CHECK(json_eq_text(v, "64"));
    json_decref(v);
    CHECK(cmd_probes_param_value(num, "lots", msg, sizeof msg) == NULL);
    /* Without a schema: commas of numbers make a list, anything else is guessed. */
    v = cmd_probes_param_value(NULL, "1.5,2", msg, sizeof msg);
    CHECK(json_eq_text(v, "[1.5,2]"));
    json_decref(v);
    v = cmd_probes_param_value(NULL, "hello, world", msg, sizeof msg);
    CHECK(json_eq_text(v, "\"hello, world\""));
    json_decref(v);
    v = cmd_probes_param_value(NULL, "null", msg, sizeof msg);
    CHECK(json_is_null(v));
    json_decref(v);
    json_decref(list), json_decref(text), json_decref(num);
}

static char *print_result(const char *result, const char *format, const char *only, int *code) {
    char *buf = NULL, *ebuf = NULL;
    size_t len = 0, elen = 0;
    cli_ctx ctx = {.server = "http://x", .out = open_memstream(&buf, &len), .err = open_memstream(&ebuf, &elen)};
    json_t *r = json_loads(result, 0, NULL);
    *code = cmd_probes_print_result(&ctx, r, format, only);
    json_decref(r);
    fclose(ctx.out);
    fclose(ctx.err);
    free(ebuf);
    return buf;
}

TEST(probe_results_print_as_tables_and_csv) {
    const char *res = "{\"id\":4,\"result\":{\"kind\":\"pair_turns\",\"params\":{\"dim\":8},\"summary\":{\"pairs\":4,"
                      "\"base\":10000.0},"
                      "\"tables\":[{\"name\":\"turns\",\"columns\":[\"pair\",\"θ\",\"turns at 512\"],"
                      "\"rows\":[[0,1.0,81.487],[1,0.1,8.1487],[2,0.01,null]]},"
                      "{\"name\":\"notes\",\"columns\":[\"what\"],\"rows\":[[\"a, b\"]]}]}}";
    int code;
    char *s = print_result(res, "table", NULL, &code);
    CHECK_EQ_INT(code, 0);
    CHECK_MSG(strstr(s, "probe pair_turns (result 4)\n") && strstr(s, "pairs        4\n") &&
                  strstr(s, "base     10000\n"),
              "%s", s);
    CHECK_MSG(
        strstr(
            s,
            "== turns ==\npair     θ  turns at 512\n   0     1        81.487\n   1   0.1        8.1487\n   2  0.01\n"),
        "%s", s);
    CHECK(strstr(s, "== notes ==\nwhat\na, b\n"));
    free(s);
    s = print_result(res, "csv", NULL, &code);
    CHECK_MSG(
        !strcmp(s, "# turns\npair,θ,turns at 512\n0,1,81.487\n1,0.1,8.1487\n2,0.01,\n\n# notes\nwhat\n\"a, b\"\n"),
        "%s", s);
    free(s);
    s = print_result(res, "csv", "notes", &code);
    CHECK_MSG(!strcmp(s, "what\n\"a, b\"\n"), "%s", s);
    free(s);
    s = print_result(res, "table", "missing", &code);
    CHECK_EQ_INT(code, CLI_EXIT_USAGE);
    free(s);
    s = print_result("{\"kind\":\"x\"}", "table", NULL, &code);
    CHECK_EQ_INT(code, CLI_EXIT_SERVER);
    free(s);
}

TEST(http_statuses_map_to_exit_codes_and_one_line) {
    CHECK_EQ_INT(httpc_status_exit(200), CLI_EXIT_OK);
    CHECK_EQ_INT(httpc_status_exit(204), CLI_EXIT_OK);
    CHECK_EQ_INT(httpc_status_exit(404), CLI_EXIT_REFUSED);
    CHECK_EQ_INT(httpc_status_exit(422), CLI_EXIT_REFUSED);
    CHECK_EQ_INT(httpc_status_exit(500), CLI_EXIT_SERVER);
    CHECK_EQ_INT(httpc_status_exit(503), CLI_EXIT_SERVER);
    CHECK_EQ_INT(httpc_status_exit(302), CLI_EXIT_SERVER);
    char m[512];
    httpc_error_line(
        422, "{\"error\":{\"code\":\"invalid\",\"message\":\"steps must be at least 1\",\"field\":\"config.steps\"}}",
        m, sizeof m);
    CHECK_MSG(!strcmp(m, "HTTP 422 invalid: steps must be at least 1 (field: config.steps)"), "%s", m);
    httpc_error_line(404, "{\"error\":{\"code\":\"not_found\",\"message\":\"no run 9\"}}", m, sizeof m);
    CHECK(!strcmp(m, "HTTP 404 not_found: no run 9"));
    httpc_error_line(502, "<html>\n<body>Bad gateway</body>", m, sizeof m);
    CHECK_MSG(!strcmp(m, "HTTP 502: <html> <body>Bad gateway</body>"), "%s", m);
    httpc_error_line(500, NULL, m, sizeof m);
    CHECK(!strcmp(m, "HTTP 500"));
    char *e = httpc_escape("tau.* a/b&c=d");
    CHECK_MSG(!strcmp(e, "tau.%2A%20a%2Fb%26c%3Dd"), "%s", e);
    free(e);
}

TEST(ids_and_options) {
    long long id;
    CHECK(cli_parse_id("7", &id) == 0 && id == 7);
    CHECK(cli_parse_id("0", &id) < 0);
    CHECK(cli_parse_id("-3", &id) < 0);
    CHECK(cli_parse_id("7x", &id) < 0);
    CHECK(cli_parse_id("", &id) < 0);
    CHECK(cli_parse_id("99999999999999999999", &id) < 0);
    char *argv[] = {"--keys", "loss", "--keys=tau.*", "--keysx", "--keys"};
    const char *v;
    int i = 0;
    CHECK_EQ_INT(cli_opt_value(5, argv, &i, "--keys", &v), 1);
    CHECK(!strcmp(v, "loss") && i == 1);
    i = 2;
    CHECK_EQ_INT(cli_opt_value(5, argv, &i, "--keys", &v), 1);
    CHECK(!strcmp(v, "tau.*") && i == 2);
    i = 3;
    CHECK_EQ_INT(cli_opt_value(5, argv, &i, "--keys", &v), 0);
    i = 4;
    CHECK_EQ_INT(cli_opt_value(5, argv, &i, "--keys", &v), -1);
}

TEST(every_run_config_field_is_a_client_flag_with_its_schema_type) {
    /* The client has no key list of its own: each field of the schema file is a flag, typed as
     * the schema says, and nothing else is. */
    json_t *doc = json_load_file("server/api/openapi.json", 0, NULL);
    json_t *props = json_object_get(
        json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"), "RunConfig"), "properties");
    CHECK(json_object_size(props) > 10);
    const char *key;
    json_t *prop;
    json_object_foreach(props, key, prop) {
        const char *t = cli_config_type(key);
        CHECK_MSG(t && !strcmp(t, json_string_value(json_object_get(prop, "type"))), "%s: client type %s", key,
                  t ? t : "(none)");
        char flag[80];
        snprintf(flag, sizeof flag, "--%s", key);
        for (char *c = flag + 2; *c; c++)
            if (*c == '_') *c = '-';
        char *argv[] = {flag, (char *)(!strcmp(t, "boolean") ? "true" : !strcmp(t, "string") ? "x" : "1")};
        int i = 0;
        char msg[200];
        json_t *cfg = json_object();
        CHECK_MSG(cli_config_flag(cfg, 2, argv, &i, msg, sizeof msg) == 1, "%s is not a client flag", flag);
        json_decref(cfg);
    }
    CHECK(cli_config_type("no_such_key") == NULL);
    json_decref(doc);
}

int main(void) {
    RUN(values_are_typed_by_the_config_schema);
    RUN(every_run_config_field_is_a_client_flag_with_its_schema_type);
    RUN(config_flags_take_both_spellings);
    RUN(guessed_values);
    RUN(vary_makes_one_variant_per_value);
    RUN(metric_series_in_each_shape_give_one_row_per_step);
    RUN(metric_steps_merge_and_null_values_stay_empty);
    RUN(probe_parameters_follow_their_schema);
    RUN(probe_results_print_as_tables_and_csv);
    RUN(http_statuses_map_to_exit_codes_and_one_line);
    RUN(ids_and_options);
    return test_summary();
}
