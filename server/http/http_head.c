/* The request-head check of the front door (contract: http_head_check in http.h). Pure: no I/O,
 * no state; used by the admission code (http_admission.c) and by the fuzz tests. */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "http/http.h"

static int is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int head_fail(http_head_check_result *res, int status, const char *code, const char *message) {
    res->status = status;
    res->code = code;
    res->message = message;
    return -1;
}

/* Finds the line starting at pos within buf[0..n): 1 with its length (CR of a CRLF excluded) and
 * the start of the next line, 0 when no LF follows yet, -1 at a CR not followed by LF. */
static int head_line(const char *buf, size_t n, size_t pos, size_t *len, size_t *next) {
    for (size_t i = pos; i < n; i++) {
        if (buf[i] == '\n') {
            *len = i - pos;
            *next = i + 1;
            return 1;
        }
        if (buf[i] == '\r') {
            if (i + 1 == n) return 0;
            if (buf[i + 1] != '\n') return -1;
            *len = i - pos;
            *next = i + 2;
            return 1;
        }
    }
    return 0;
}

static int value_is(const char *v, size_t n, const char *word) {
    while (n && (*v == ' ' || *v == '\t')) v++, n--;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    return n == strlen(word) && !strncasecmp(v, word, n);
}

/* s[*a..*b) without the blanks (SP, HTAB) at either end. */
static void trim_blanks(const char *s, size_t *a, size_t *b) {
    while (*a < *b && (s[*a] == ' ' || s[*a] == '\t')) (*a)++;
    while (*b > *a && (s[*b - 1] == ' ' || s[*b - 1] == '\t')) (*b)--;
}

/* The rest of a complete request line line[0..ll) after its method: the target from t0 (its bytes,
 * length and query arguments), then the HTTP version. 0, or -1 with res set. */
static int check_target_and_version(const char *line, size_t ll, size_t t0, http_head_check_result *res) {
    size_t j = t0;
    for (; j < ll && line[j] != ' '; j++) {
        unsigned char c = (unsigned char)line[j];
        if (c < 0x21 || c == 0x7f) return head_fail(res, 400, "bad_request", "control character in the request target");
    }
    if (j == t0) return head_fail(res, 400, "bad_request", "malformed request line");
    if (j - t0 > HTTP_MAX_TARGET)
        return head_fail(res, 414, "uri_too_long", "the request target is longer than 4096 bytes");
    if (j >= ll) return head_fail(res, 400, "bad_request", "the request line has no HTTP version");
    const char *v = line + j + 1;
    size_t vl = ll - j - 1;
    if (vl != 8 || memcmp(v, "HTTP/", 5) || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' || v[7] > '9')
        return head_fail(res, 400, "bad_request", "malformed HTTP version");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return head_fail(res, 505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are served");
    const char *q = memchr(line + t0, '?', j - t0);
    if (q) {
        size_t args = 1;
        for (const char *c = q + 1; c < line + j; c++) args += *c == '&';
        if (args > HTTP_MAX_QUERY_ARGS)
            return head_fail(res, 431, "too_many_query_arguments", "more than 64 query arguments");
    }
    return 0;
}

/* What the header lines so far have counted. */
typedef struct {
    int headers, cookies, has_cl, has_te, has_host;
    size_t cookie_bytes;
} head_counts;

static int check_content_length(const char *val, size_t val_len, http_head_check_result *res) {
    size_t a = 0, b = val_len;
    trim_blanks(val, &a, &b);
    if (a == b) return head_fail(res, 400, "bad_request", "malformed Content-Length");
    uint64_t x = 0;
    for (size_t m = a; m < b; m++) {
        if (val[m] < '0' || val[m] > '9') return head_fail(res, 400, "bad_request", "malformed Content-Length");
        unsigned d = (unsigned)(val[m] - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10)
            return head_fail(res, 413, "body_too_large", "Content-Length too large");
        x = x * 10 + d;
    }
    return 0;
}

static int check_cookie(const char *val, size_t val_len, head_counts *hc, http_head_check_result *res) {
    size_t a = 0, b = val_len;
    trim_blanks(val, &a, &b);
    hc->cookie_bytes += b - a;
    if (hc->cookie_bytes > HTTP_MAX_COOKIE_BYTES)
        return head_fail(res, 431, "header_fields_too_large", "Cookie headers longer than 4096 bytes");
    hc->cookies++;
    for (size_t m = 0; m < val_len; m++) hc->cookies += val[m] == ';' || val[m] == ',';
    if (hc->cookies > HTTP_MAX_COOKIES) return head_fail(res, 431, "header_fields_too_large", "more than 32 cookies");
    return 0;
}

/* One header line line[0..ll) (not empty): its form, then the headers whose number or value is
 * limited. 0, or -1 with res set. */
static int check_header(const char *line, size_t ll, head_counts *hc, http_head_check_result *res) {
    if (line[0] == ' ' || line[0] == '\t') return head_fail(res, 400, "bad_request", "folded header line");
    size_t i = 0;
    while (i < ll && is_tchar((unsigned char)line[i])) i++;
    if (i == 0 || i >= ll || line[i] != ':') return head_fail(res, 400, "bad_request", "malformed header line");
    size_t name_len = i;
    const char *val = line + i + 1;
    size_t val_len = ll - i - 1;
    for (size_t m = 0; m < val_len; m++) {
        unsigned char c = (unsigned char)val[m];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return head_fail(res, 400, "bad_request", "control character in a header value");
    }
    if (++hc->headers > HTTP_MAX_HEADERS)
        return head_fail(res, 431, "header_fields_too_large", "more than 48 header lines");
    if (name_len == 14 && !strncasecmp(line, "Content-Length", 14)) {
        if (hc->has_cl++) return head_fail(res, 400, "bad_request", "repeated Content-Length");
        return check_content_length(val, val_len, res);
    }
    if (name_len == 4 && !strncasecmp(line, "Host", 4)) {
        /* Two Host headers leave the name the request is for to whoever reads which. */
        if (hc->has_host++) return head_fail(res, 400, "bad_request", "repeated Host");
    } else if (name_len == 17 && !strncasecmp(line, "Transfer-Encoding", 17)) {
        if (hc->has_te++) return head_fail(res, 400, "bad_request", "repeated Transfer-Encoding");
        if (!value_is(val, val_len, "chunked"))
            return head_fail(res, 501, "not_implemented", "the only transfer coding served is chunked");
    } else if (name_len == 6 && !strncasecmp(line, "Cookie", 6)) {
        return check_cookie(val, val_len, hc, res);
    }
    return 0;
}

int http_head_check(const char *buf, size_t len, int eof, http_head_check_result *res) {
    memset(res, 0, sizeof *res);
    size_t n = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD; /* the head must end within the limit */
    int more = len > HTTP_MAX_HEAD;                       /* bytes beyond the window exist */
    size_t pos = 0, ll = 0, next = 0;
    int k;
    /* Blank lines before a request line are skipped, as libmicrohttpd does. */
    while ((k = head_line(buf, n, pos, &ll, &next)) == 1 && ll == 0) pos = next;
    if (k < 0) return head_fail(res, 400, "bad_request", "bare CR in the request head");
    const char *line = buf + pos;
    size_t avail = k == 1 ? ll : n - pos;
    /* The method is checked as soon as it arrives, so a stray protocol (TLS, say) fails at once. */
    size_t i = 0;
    while (i < avail && is_tchar((unsigned char)line[i])) i++;
    if ((i < avail && line[i] != ' ') || i > 32 || (i == 0 && avail > 0))
        return head_fail(res, 400, "bad_request", "malformed request line");
    if (k == 0) {
        if (more) return head_fail(res, 414, "uri_too_long", "the request line is longer than the request head limit");
        if (eof && pos < len) return head_fail(res, 400, "bad_request", "incomplete request");
        return 0;
    }
    res->is_head = i == 4 && !memcmp(line, "HEAD", 4);
    if (check_target_and_version(line, ll, i + 1, res) < 0) return -1;
    head_counts hc = {0};
    for (pos = next;; pos = next) {
        k = head_line(buf, n, pos, &ll, &next);
        if (k < 0) return head_fail(res, 400, "bad_request", "bare CR in the request head");
        if (k == 0) {
            if (more)
                return head_fail(res, 431, "header_fields_too_large", "the request head is larger than 8192 bytes");
            if (eof) return head_fail(res, 400, "bad_request", "incomplete request");
            return 0;
        }
        if (ll == 0) break;
        if (check_header(buf + pos, ll, &hc, res) < 0) return -1;
    }
    if (hc.has_cl && hc.has_te) return head_fail(res, 400, "bad_request", "both Content-Length and Transfer-Encoding");
    res->head_len = next;
    return 1;
}
