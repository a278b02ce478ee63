/* Browser-origin defences (contract: http_origin.h). */
#include "http/http_origin.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http_text.h"

#define NAME_CAP 256

/* An IP literal in its canonical text (inet_ntop), in place; 4 or 6, or 0 when name is not one. */
static int canonical_ip(char *name, size_t cap) {
    unsigned char bin[16];
    if (inet_pton(AF_INET, name, bin) == 1) {
        inet_ntop(AF_INET, bin, name, (socklen_t)cap);
        return 4;
    }
    if (inet_pton(AF_INET6, name, bin) == 1) {
        inet_ntop(AF_INET6, bin, name, (socklen_t)cap);
        return 6;
    }
    return 0;
}

/* Splits an authority "name[:port]" or "[v6][:port]" (len bytes) into its name (lower case, without
 * brackets or one trailing dot; an IP literal in canonical form) and its port (digits, "" when
 * none). -1 when malformed. */
static int split_authority(const char *in, size_t len, char name[NAME_CAP], char port[8]) {
    const char *end = in + len, *n0, *n1, *p = NULL;
    if (len == 0) return -1;
    if (in[0] == '[') {
        n0 = in + 1;
        n1 = memchr(n0, ']', len - 1);
        if (!n1) return -1;
        if (n1 + 1 < end) {
            if (n1[1] != ':') return -1;
            p = n1 + 2;
        }
    } else {
        n0 = in;
        n1 = memchr(in, ':', len);
        if (n1 && memchr(n1 + 1, ':', (size_t)(end - n1 - 1))) return -1; /* a bare IPv6 literal */
        if (n1)
            p = n1 + 1;
        else
            n1 = end;
    }
    size_t nl = (size_t)(n1 - n0);
    if (nl && n0[nl - 1] == '.') nl--;
    if (nl == 0 || nl >= NAME_CAP) return -1;
    for (size_t i = 0; i < nl; i++) {
        unsigned char c = (unsigned char)n0[i];
        if (c <= 0x20 || c >= 0x7f || strchr("/?#@\\\"<>", c)) return -1;
        name[i] = (char)tolower(c);
    }
    name[nl] = 0;
    size_t pl = p ? (size_t)(end - p) : 0;
    if (pl >= 8 || (p && pl == 0)) return -1;
    for (size_t i = 0; i < pl; i++)
        if (!isdigit((unsigned char)p[i])) return -1;
    if (pl) memcpy(port, p, pl);
    port[pl] = 0;
    canonical_ip(name, NAME_CAP);
    return 0;
}

static int is_loopback(const char *name) {
    size_t n = strlen(name);
    if (!strcmp(name, "localhost") || (n > 10 && !strcmp(name + n - 10, ".localhost"))) return 1;
    unsigned char bin[16];
    if (inet_pton(AF_INET, name, bin) == 1) return bin[0] == 127;
    if (inet_pton(AF_INET6, name, bin) == 1) {
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        return !memcmp(bin, &in6addr_loopback, 16) || (!memcmp(bin, mapped, 12) && bin[12] == 127);
    }
    return 0;
}

static int in_extra(const http_origin *o, const char *name) {
    for (size_t i = 0; i < o->n_extra; i++)
        if (!strcmp(o->extra[i], name)) return 1;
    return 0;
}

int http_origin_init(http_origin *o, const char *bind_addr, const char *const *extra) {
    memset(o, 0, sizeof *o);
    if (bind_addr) {
        char b[NAME_CAP];
        snprintf(b, sizeof b, "%s", bind_addr);
        int v = canonical_ip(b, sizeof b);
        if ((v == 4 && !strcmp(b, "0.0.0.0")) || (v == 6 && !strcmp(b, "::")))
            o->any_ip_literal = 1;
        else if (!(o->bound = http_strdup(b)))
            return -1;
    }
    size_t n = 0;
    while (extra && extra[n]) n++;
    o->extra = calloc(n ? n : 1, sizeof *o->extra);
    if (!o->extra) {
        http_origin_free(o);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(extra[i], "*")) {
            o->any_host = 1;
            continue;
        }
        char name[NAME_CAP], port[8];
        /* A name as given (its port, if any, is not part of the check). */
        if (split_authority(extra[i], strlen(extra[i]), name, port) < 0) snprintf(name, sizeof name, "%s", extra[i]);
        if (!(o->extra[o->n_extra] = http_strdup(name))) {
            http_origin_free(o);
            return -1;
        }
        o->n_extra++;
    }
    return 0;
}

void http_origin_free(http_origin *o) {
    for (size_t i = 0; i < o->n_extra; i++) free(o->extra[i]);
    free(o->extra);
    free(o->bound);
    memset(o, 0, sizeof *o);
}

static int refuse(http_origin_refusal *out, int status, const char *code, const char *fmt, const char *what) {
    char clean[128];
    out->status = status;
    out->code = code;
    snprintf(out->message, sizeof out->message, fmt, http_utf8_clean(what, clean, sizeof clean));
    return -1;
}

/* The media type of a Content-Type value: up to ';', blanks trimmed; 1 when it is application/json. */
static int is_json_type(const char *v) {
    while (*v == ' ' || *v == '\t') v++;
    size_t n = strcspn(v, ";");
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    return n == 16 && !strncasecmp(v, "application/json", 16);
}

int http_origin_check(const http_origin *o, const char *method, int json_route, const char *host, const char *origin,
                      const char *content_type, const char *content_length, const char *transfer_encoding,
                      http_origin_refusal *out) {
    char hname[NAME_CAP] = "", hport[8] = "";
    if (host) {
        if (split_authority(host, strlen(host), hname, hport) < 0)
            return refuse(out, 400, "bad_request", "malformed Host header '%s'", host);
        int ok = o->any_host || is_loopback(hname) || (o->bound && !strcmp(hname, o->bound)) || in_extra(o, hname) ||
                 (o->any_ip_literal && canonical_ip(hname, sizeof hname));
        if (!ok)
            return refuse(out, 403, "host_not_allowed",
                          "this server does not answer to the name '%s' (add it with --allowed-host)", hname);
    }
    int change = strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
    if (!change) return 0;
    if (origin) {
        const char *sep = strstr(origin, "://");
        size_t sl = sep ? (size_t)(sep - origin) : 0;
        int https = sl == 5 && !strncasecmp(origin, "https", 5);
        char oname[NAME_CAP], oport[8];
        if (!sep || !(https || (sl == 4 && !strncasecmp(origin, "http", 4))) ||
            split_authority(sep + 3, strlen(sep + 3), oname, oport) < 0)
            return refuse(out, 403, "origin_not_allowed", "changes are not taken from the origin '%s'", origin);
        const char *def = https ? "443" : "80";
        int same = host && !strcmp(oname, hname) && !strcmp(oport[0] ? oport : def, hport[0] ? hport : def);
        if (!same && !in_extra(o, oname))
            return refuse(out, 403, "origin_not_allowed",
                          "changes are not taken from pages of another origin ('%s'; add its host with --allowed-host)",
                          origin);
    }
    int body = (content_length && strtoull(content_length, NULL, 10) > 0) || transfer_encoding;
    if (json_route && body && !(content_type && is_json_type(content_type)))
        return refuse(out, 415, "unsupported_media_type",
                      "the body must be JSON sent as Content-Type: application/json%s",
                      content_type ? "" : " (none was given)");
    return 0;
}
