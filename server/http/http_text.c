/* Text and time helpers of the HTTP layer (contract: http_text.h; http_utf8_clean and
 * http_parse_event_id are public, in http.h). */
#include "http/http_text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/http.h"

char *http_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long http_url_decode(const char *src, size_t len, char *dst, int plus_is_space) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= len) return -1;
            int hi = hex_value(src[i + 1]), lo = hex_value(src[i + 2]);
            if (hi < 0 || lo < 0) return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (c == 0) return -1;
        dst[o++] = c;
    }
    dst[o] = 0;
    return (long)o;
}

double http_elapsed_ms(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1e3 + (t1.tv_nsec - t0->tv_nsec) / 1e6;
}

double http_mono_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0 when p[0] does not start one. Reads
 * no byte past a NUL. */
static size_t utf8_seq_len(const unsigned char *p) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80 ? 4 : 0;
    }
    return 0;
}

char *http_utf8_clean(const char *src, char *dst, size_t cap) {
    if (!cap) return dst;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)(src ? src : "");
    while (*p) {
        size_t n = utf8_seq_len(p);
        if (n) {
            if (o + n >= cap) break;
            memcpy(dst + o, p, n);
            o += n;
            p += n;
        } else {
            if (o + 4 >= cap) break;
            snprintf(dst + o, 5, "\\x%02X", *p);
            o += 4;
            p++;
        }
    }
    dst[o] = 0;
    return dst;
}

const char *http_log_safe(const char *src, char *dst, size_t cap) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p && o + 5 < cap; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '\\')
            dst[o++] = (char)*p;
        else
            o += (size_t)snprintf(dst + o, 5, "\\x%02X", *p);
    }
    dst[o] = 0;
    return dst;
}

int http_parse_event_id(const char *v, uint64_t *id) {
    if (!v) return -1;
    while (*v == ' ' || *v == '\t') v++;
    if (*v < '0' || *v > '9') return -1;
    uint64_t x = 0;
    while (*v >= '0' && *v <= '9') {
        unsigned d = (unsigned)(*v - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
        v++;
    }
    while (*v == ' ' || *v == '\t') v++;
    if (*v) return -1;
    *id = x;
    return 0;
}
