#include "cli.h"
#include "table.h"

#include "util/json_text.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_fail(const cli_ctx *ctx, int code, const char *fmt, ...) {
    FILE *err = ctx && ctx->err ? ctx->err : stderr;
    va_list ap;
    va_start(ap, fmt);
    /* Messages carry the server's words (its errors echo names): shown safe for a terminal. */
    char raw[4096], shown[16384];
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    fprintf(err, "attnlab: %s\n", table_safe(raw, shown, sizeof shown));
    return code;
}

int cli_usage(const cli_ctx *ctx, const char *cmd, const char *fmt, ...) {
    FILE *err = ctx && ctx->err ? ctx->err : stderr;
    va_list ap;
    va_start(ap, fmt);
    fputs("attnlab: ", err);
    vfprintf(err, fmt, ap);
    /* One line, still: the hint rides on the same line so that scripts can grep a single line. */
    fprintf(err, " (see 'attnlab %s--help')\n", cmd && *cmd ? cmd : "");
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != 0) return 0;
    if (*i + 1 >= argc) return -1;
    *value = argv[++*i];
    return 1;
}

int cli_is_help(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h"); }

int cli_parse_id(const char *s, long long *id) {
    if (!s || !*s) return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9') return -1;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno || v <= 0 || v > (1LL << 53)) return -1;
    *id = v;
    return 0;
}

json_t *cli_value_guess(const char *text) {
    if (*text == '[' || *text == '{') {
        json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
        if (j) return j;
        return json_string(text);
    }
    if (!strcmp(text, "true")) return json_true();
    if (!strcmp(text, "false")) return json_false();
    if (!strcmp(text, "null")) return json_null();
    if (*text) {
        char *end;
        errno = 0;
        long long iv = strtoll(text, &end, 10);
        if (!*end && !errno) return json_integer(iv);
        errno = 0;
        double dv = strtod(text, &end);
        if (!*end && !errno && isfinite(dv)) return json_real(dv);
    }
    return json_string(text);
}

int cli_split_kv(const char *text, char *key, size_t keylen, const char **value) {
    const char *eq = strchr(text, '=');
    if (!eq || eq == text || (size_t)(eq - text) >= keylen) return -1;
    memcpy(key, text, (size_t)(eq - text));
    key[eq - text] = 0;
    *value = eq + 1;
    return 0;
}

/* The RunConfig schema: the same server/api/openapi.json the server validates against, compiled into
 * the client too (scripts/embed_text.sh), so flag names and types never need a list of their own.
 * Parsed once; NULL only if the embedded document were broken. */
extern const char openapi_json[];
static const json_t *run_config_props(void) {
    static json_t *doc;
    static const json_t *props;
    if (!doc) {
        doc = json_loads(openapi_json, 0, NULL);
        props = json_object_get(
            json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"), "RunConfig"), "properties");
    }
    return json_is_object(props) ? props : NULL;
}

const char *cli_config_type(const char *key) {
    return json_string_value(json_object_get(json_object_get(run_config_props(), key), "type"));
}

int cli_config_set(json_t *config, const char *key_in, const char *text, char *msg, size_t msglen) {
    char key[64];
    size_t n = strlen(key_in);
    if (n == 0 || n >= sizeof key) {
        snprintf(msg, msglen, "bad config key '%s'", key_in);
        return -1;
    }
    for (size_t i = 0; i <= n; i++) key[i] = key_in[i] == '-' ? '_' : key_in[i];
    json_t *v;
    const char *type = cli_config_type(key);
    if (type && !strcmp(type, "string")) {
        v = json_string(text);
    } else if (type && !strcmp(type, "boolean")) {
        if (!strcmp(text, "true") || !strcmp(text, "1"))
            v = json_true();
        else if (!strcmp(text, "false") || !strcmp(text, "0"))
            v = json_false();
        else {
            snprintf(msg, msglen, "%s wants true or false, not '%s'", key, text);
            return -1;
        }
    } else if (type && !strcmp(type, "integer")) {
        char *end;
        errno = 0;
        long long iv = strtoll(text, &end, 10);
        if (!*text || *end || errno) {
            snprintf(msg, msglen, "%s wants an integer, not '%s'", key, text);
            return -1;
        }
        v = json_integer(iv);
    } else {
        v = cli_value_guess(text);
    }
    if (!v || json_object_set_new(config, key, v) < 0) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    return 0;
}

json_t *cli_read_json_file(const char *path, char *msg, size_t msglen) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) {
        snprintf(msg, msglen, "%s: %s (line %d)", path, e.text, e.line);
        return NULL;
    }
    if (!json_is_object(j)) {
        snprintf(msg, msglen, "%s: a JSON object was expected", path);
        json_decref(j);
        return NULL;
    }
    return j;
}

const char *cli_cell(const json_t *v, char *buf, size_t len) {
    if (!len) return buf;
    buf[0] = 0;
    if (!v) return buf;
    switch (json_typeof(v)) {
    case JSON_STRING: table_safe(json_string_value(v), buf, len); break; /* server text: terminal-safe */
    case JSON_INTEGER: snprintf(buf, len, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: {
        /* Bounds like 2147483647.0 read better whole than as 2.14748e+09. */
        double d = json_real_value(v);
        if (d == (double)(long long)d && fabs(d) < 1e15)
            snprintf(buf, len, "%lld", (long long)d);
        else
            snprintf(buf, len, "%.6g", d);
        break;
    }
    case JSON_TRUE: snprintf(buf, len, "true"); break;
    case JSON_FALSE: snprintf(buf, len, "false"); break;
    case JSON_NULL: break;
    case JSON_ARRAY: {
        size_t used = 0, i;
        json_t *it;
        json_array_foreach(v, i, it) {
            char one[128];
            cli_cell(it, one, sizeof one);
            int w = snprintf(buf + used, len - used, "%s%s", i ? "," : "", one);
            if (w < 0 || (size_t)w >= len - used) break;
            used += (size_t)w;
        }
        break;
    }
    case JSON_OBJECT: {
        char *s = json_text_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (s) snprintf(buf, len, "%s", s);
        free(s);
        break;
    }
    }
    return buf;
}

void cli_print_json(const cli_ctx *ctx, const json_t *v) {
    FILE *out = ctx && ctx->out ? ctx->out : stdout;
    char *text = json_text_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    if (text)
        fputs(text, out);
    else
        json_dumpf(v, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    free(text);
    fputc('\n', out);
}

json_t *cli_list_items(json_t *v, const char *const *keys) {
    if (json_is_array(v)) return v;
    if (!json_is_object(v)) return NULL;
    for (; keys && *keys; keys++) {
        json_t *a = json_object_get(v, *keys);
        if (json_is_array(a)) return a;
    }
    const char *k;
    json_t *m;
    json_object_foreach(v, k, m) if (json_is_array(m)) return m;
    return NULL;
}

const char *cli_time(const json_t *v, char *buf, size_t len) {
    if (!len) return buf;
    buf[0] = 0;
    if (json_is_number(v)) {
        time_t t = (time_t)json_number_value(v);
        struct tm tm;
        if (gmtime_r(&t, &tm)) strftime(buf, len, "%Y-%m-%d %H:%M", &tm);
    } else if (json_is_string(v)) {
        /* ISO 8601: keep date and minutes, drop the rest. */
        const char *s = json_string_value(v);
        snprintf(buf, len, "%.16s", s);
        if (strlen(buf) > 10 && buf[10] == 'T') buf[10] = ' ';
    }
    return buf;
}

int cli_config_flag(json_t *config, int argc, char **argv, int *i, char *msg, size_t msglen) {
    const char *a = argv[*i], *v;
    int r = cli_opt_value(argc, argv, i, "--set", &v);
    if (r < 0) {
        snprintf(msg, msglen, "--set wants KEY=VALUE");
        return -1;
    }
    if (r > 0) {
        char key[64];
        const char *val;
        if (cli_split_kv(v, key, sizeof key, &val) < 0) {
            snprintf(msg, msglen, "--set wants KEY=VALUE, not '%s'", v);
            return -1;
        }
        return cli_config_set(config, key, val, msg, msglen) < 0 ? -1 : 1;
    }
    if (strncmp(a, "--", 2) != 0) return 0;
    char key[64];
    size_t n = strcspn(a + 2, "=");
    if (n == 0 || n >= sizeof key) return 0;
    for (size_t k = 0; k < n; k++) key[k] = a[2 + k] == '-' ? '_' : a[2 + k];
    key[n] = 0;
    if (!cli_config_type(key)) return 0;
    char opt[80];
    snprintf(opt, sizeof opt, "--%.*s", (int)n, a + 2);
    r = cli_opt_value(argc, argv, i, opt, &v);
    if (r <= 0) {
        snprintf(msg, msglen, "%s wants a value", opt);
        return -1;
    }
    return cli_config_set(config, key, v, msg, msglen) < 0 ? -1 : 1;
}

json_t *cli_unwrap(json_t *v, const char *key) {
    json_t *inner = json_object_get(v, key);
    return json_is_object(inner) ? inner : v;
}

const json_t *cli_last_value(const json_t *v) {
    if (json_is_number(v)) return v;
    const json_t *l = json_object_get(v, "last");
    return json_is_number(l) ? l : NULL;
}
