/* Shortest round-trip reals in JSON text; the contract is in json_text.h. */
#include "util/json_text.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jansson's form of a %g text: '.0' when it looks like an integer, an exponent without '+' or
 * leading zeros ("1e+300" -> "1e300", "5e-05" -> "5e-5"). Returns the new length. */
static int jansson_form(char *s, int n, size_t cap) {
    char *e = strpbrk(s, "eE");
    if (!e && !strchr(s, '.')) {
        if ((size_t)n + 3 > cap) return -1;
        memcpy(s + n, ".0", 3);
        return n + 2;
    }
    if (e) {
        char *from = e + 1, *to = e + 1;
        if (*from == '+')
            from++;
        else if (*from == '-')
            *to++ = *from++;
        while (*from == '0' && from[1]) from++;
        memmove(to, from, strlen(from) + 1);
        n = (int)strlen(s);
    }
    return n;
}

int json_text_real(double v, char *buf, size_t cap) {
    if (!isfinite(v) || cap < 2) return -1;
    /* a subnormal has fewer digits than 15 to give: try them all from 1 */
    int first = v != 0 && fabs(v) < DBL_MIN ? 1 : 15;
    for (int prec = first; prec <= 17; prec++) {
        int n = snprintf(buf, cap, "%.*g", prec, v);
        if (n < 0 || (size_t)n >= cap) return -1;
        if (prec == 17 || strtod(buf, NULL) == v) {
            /* -0.0 == 0.0: keep the sign %g wrote (it writes "-0" for -0.0) */
            return jansson_form(buf, n, cap);
        }
    }
    return -1;
}

char *json_text_shorten(char *text) {
    if (!text) return NULL;
    char *r = text, *w = text;
    int in_string = 0;
    while (*r) {
        char c = *r;
        if (in_string) {
            *w++ = *r++;
            if (c == '\\' && *r)
                *w++ = *r++;
            else if (c == '"')
                in_string = 0;
            continue;
        }
        if (c == '"') {
            in_string = 1;
            *w++ = *r++;
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            const char *start = r;
            int real = 0;
            while (*r == '-' || *r == '+' || *r == '.' || *r == 'e' || *r == 'E' || (*r >= '0' && *r <= '9')) {
                real |= *r == '.' || *r == 'e' || *r == 'E';
                r++;
            }
            size_t len = (size_t)(r - start);
            char buf[40];
            int n = -1;
            if (real && len < sizeof buf) {
                memcpy(buf, start, len);
                buf[len] = '\0';
                char *end;
                double v = strtod(buf, &end);
                if (end == buf + len) n = json_text_real(v, buf, sizeof buf);
            }
            if (n >= 0 && (size_t)n <= len) {
                memcpy(w, buf, (size_t)n);
                w += n;
            } else {
                memmove(w, start, len);
                w += len;
            }
            continue;
        }
        *w++ = *r++;
    }
    *w = '\0';
    return text;
}

char *json_text_dumps(const json_t *v, size_t flags) {
    flags &= ~(size_t)JSON_REAL_PRECISION(0x1F);
    return json_text_shorten(json_dumps(v, flags));
}
