#include "httpc.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#define HTTPC_MAX_BODY ((size_t)256 << 20)

typedef struct {
    char *buf;
    size_t len, cap;
    int too_big;
} sink;

static size_t sink_write(char *data, size_t size, size_t n, void *user) {
    sink *s = user;
    size_t add = size * n;
    if (s->len + add + 1 > HTTPC_MAX_BODY) {
        s->too_big = 1;
        return 0;
    }
    if (s->len + add + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + add + 1) cap *= 2;
        char *nb = realloc(s->buf, cap);
        if (!nb) return 0; /* curl reports a write error, which we turn into a message */
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, add);
    s->len += add;
    s->buf[s->len] = 0;
    return add;
}

static struct curl_slist *base_headers(const cli_ctx *ctx, int json_body) {
    struct curl_slist *h = NULL, *t;
    if ((t = curl_slist_append(h, "Accept: application/json")) == NULL) return h;
    h = t;
    if (json_body && (t = curl_slist_append(h, "Content-Type: application/json")) != NULL) h = t;
    if (ctx->token && *ctx->token) {
        size_t n = strlen(ctx->token) + 32;
        char *line = malloc(n);
        if (line) {
            snprintf(line, n, "Authorization: Bearer %s", ctx->token);
            if ((t = curl_slist_append(h, line)) != NULL) h = t;
            free(line);
        }
    }
    return h;
}

static void describe_curl_error(const cli_ctx *ctx, CURLcode rc, const char *errbuf, double limit_s, char *msg,
                                size_t msglen) {
    const char *why = errbuf && *errbuf ? errbuf : curl_easy_strerror(rc);
    if (rc == CURLE_OPERATION_TIMEDOUT)
        snprintf(msg, msglen, "timed out after %gs waiting for %s (%s)", limit_s, ctx->server, why);
    else
        snprintf(msg, msglen, "cannot reach %s: %s", ctx->server, why);
}

static CURL *make_handle(const cli_ctx *ctx, const char *path, char *errbuf) {
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    size_t n = strlen(ctx->server) + strlen(path) + 1;
    char *url = malloc(n);
    if (!url) {
        curl_easy_cleanup(c);
        return NULL;
    }
    snprintf(url, n, "%s%s", ctx->server, path);
    curl_easy_setopt(c, CURLOPT_URL, url); /* libcurl copies the string */
    free(url);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "attnlab/" ATTNLAB_VERSION);
    long connect_ms = (long)(ctx->timeout_s * 1000);
    if (connect_ms <= 0 || connect_ms > 10000) connect_ms = 10000;
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    return c;
}

int httpc_request(const cli_ctx *ctx, const char *method, const char *path, const char *body, httpc_response *out,
                  char *msg, size_t msglen) {
    memset(out, 0, sizeof *out);
    char errbuf[CURL_ERROR_SIZE] = "";
    CURL *c = make_handle(ctx, path, errbuf);
    if (!c) {
        snprintf(msg, msglen, "out of memory");
        return CLI_EXIT_UNREACHABLE;
    }
    sink s = {0};
    struct curl_slist *h = base_headers(ctx, body != NULL);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD")) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else if (!strcmp(method, "POST") || !strcmp(method, "PATCH")) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    }
    if (ctx->timeout_s > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(ctx->timeout_s * 1000));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    CURLcode rc = curl_easy_perform(c);
    int code = CLI_EXIT_OK;
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
        out->body = s.buf;
        out->len = s.len;
        s.buf = NULL;
    } else if (s.too_big) {
        snprintf(msg, msglen, "the answer from %s is larger than %zu MiB", ctx->server, HTTPC_MAX_BODY >> 20);
        code = CLI_EXIT_SERVER;
    } else {
        describe_curl_error(ctx, rc, errbuf, ctx->timeout_s, msg, msglen);
        code = CLI_EXIT_UNREACHABLE;
    }
    free(s.buf);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return code;
}

void httpc_response_free(httpc_response *r) {
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

int httpc_status_exit(long status) {
    if (status >= 200 && status < 300) return CLI_EXIT_OK;
    if (status >= 400 && status < 500) return CLI_EXIT_REFUSED;
    return CLI_EXIT_SERVER;
}

void httpc_error_line(long status, const char *body, char *msg, size_t msglen) {
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    json_t *e = json_object_get(j, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *text = json_string_value(json_object_get(e, "message"));
    const char *field = json_string_value(json_object_get(e, "field"));
    if (!text && json_is_string(e)) text = json_string_value(e);
    if (text) {
        if (field && *field)
            snprintf(msg, msglen, "HTTP %ld %s: %s (field: %s)", status, code ? code : "error", text, field);
        else
            snprintf(msg, msglen, "HTTP %ld %s: %s", status, code ? code : "error", text);
    } else {
        /* Not the API's error shape (a proxy, another program on the port): show where it starts. */
        char head[120] = "";
        if (body) {
            size_t k = 0;
            for (const char *p = body; *p && k < sizeof head - 1; p++)
                head[k++] = (*p == '\n' || *p == '\r') ? ' ' : *p;
            head[k] = 0;
        }
        snprintf(msg, msglen, "HTTP %ld%s%s", status, *head ? ": " : "", head);
    }
    json_decref(j);
}

int httpc_json(const cli_ctx *ctx, const char *method, const char *path, const json_t *body_json, json_t **out) {
    *out = NULL;
    char *body = NULL;
    if (body_json) {
        body = json_dumps(body_json, JSON_COMPACT);
        if (!body) return cli_fail(ctx, CLI_EXIT_USAGE, "out of memory");
    }
    char msg[1024];
    httpc_response r;
    int code = httpc_request(ctx, method, path, body, &r, msg, sizeof msg);
    free(body);
    if (code != CLI_EXIT_OK) return cli_fail(ctx, code, "%s", msg);
    code = httpc_status_exit(r.status);
    if (code != CLI_EXIT_OK) {
        httpc_error_line(r.status, r.body, msg, sizeof msg);
        httpc_response_free(&r);
        return cli_fail(ctx, code, "%s %s: %s", method, path, msg);
    }
    if (r.len == 0) {
        *out = json_null();
    } else {
        json_error_t e;
        *out = json_loadb(r.body, r.len, JSON_DECODE_ANY, &e);
        if (!*out) {
            httpc_response_free(&r);
            return cli_fail(ctx, CLI_EXIT_SERVER, "%s %s: the answer is not JSON (%s)", method, path, e.text);
        }
    }
    httpc_response_free(&r);
    return CLI_EXIT_OK;
}

char *httpc_escape(const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *o = malloc(3 * n + 1), *p = o;
    if (!o) return NULL;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
            ch == '_' || ch == '.' || ch == '~') {
            *p++ = (char)ch;
        } else {
            *p++ = '%';
            *p++ = hex[ch >> 4];
            *p++ = hex[ch & 15];
        }
    }
    *p = 0;
    return o;
}

typedef struct {
    httpc_data_fn fn;
    void *user;
    CURL *c;
    int checked, ok, stopped;
    sink errbody; /* a non-2xx body, for the message */
} stream_state;

static size_t stream_write(char *data, size_t size, size_t n, void *user) {
    stream_state *st = user;
    size_t len = size * n;
    if (!st->checked) {
        long status = 0;
        curl_easy_getinfo(st->c, CURLINFO_RESPONSE_CODE, &status);
        st->ok = status >= 200 && status < 300;
        st->checked = 1;
    }
    if (!st->ok) {
        if (st->errbody.len < 4096) sink_write(data, 1, len, &st->errbody);
        return len;
    }
    if (st->fn(data, len, st->user)) {
        st->stopped = 1;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR, which we know to be ours */
    }
    return len;
}

int httpc_stream(const cli_ctx *ctx, const char *path, const char *const *extra_headers, double idle_s,
                 httpc_data_fn on_data, void *user, long *status, char *msg, size_t msglen) {
    *status = 0;
    char errbuf[CURL_ERROR_SIZE] = "";
    CURL *c = make_handle(ctx, path, errbuf);
    if (!c) {
        snprintf(msg, msglen, "out of memory");
        return CLI_EXIT_UNREACHABLE;
    }
    struct curl_slist *h = base_headers(ctx, 0), *t;
    if ((t = curl_slist_append(h, "Accept: text/event-stream")) != NULL) h = t;
    for (int i = 0; extra_headers && extra_headers[i]; i++)
        if ((t = curl_slist_append(h, extra_headers[i])) != NULL) h = t;
    stream_state st = {.fn = on_data, .user = user, .c = c};
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, stream_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &st);
    /* Idle detection: the server sends a comment every 15 s, so a silent connection is dead. */
    long idle = idle_s > 1 ? (long)idle_s : 1;
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, idle);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    int code = CLI_EXIT_OK;
    if (st.stopped) {
        code = CLI_EXIT_OK;
    } else if (rc != CURLE_OK && *status == 0) {
        describe_curl_error(ctx, rc, errbuf, ctx->timeout_s, msg, msglen);
        code = CLI_EXIT_UNREACHABLE;
    } else if (*status >= 200 && *status < 300) {
        if (rc != CURLE_OK) {
            snprintf(msg, msglen, "stream from %s broke off: %s", ctx->server,
                     *errbuf ? errbuf : curl_easy_strerror(rc));
            code = CLI_EXIT_UNREACHABLE;
        }
    } else {
        httpc_error_line(*status, st.errbody.buf, msg, msglen);
    }
    free(st.errbody.buf);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return code;
}
