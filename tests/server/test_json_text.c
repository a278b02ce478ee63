/* Reals in JSON text written in their shortest round-trip form (server/util/json_text.h): every
 * double written reads back bit-identical — edge cases and 200,000 random bit patterns — no
 * text is longer than jansson's own %.17g one, the short decimals people type come back as typed,
 * and integers, strings and layout are left alone. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "util/json_text.h"

/* The double read back from the text json_text_dumps writes for [v], through jansson. */
static int round_trips(double v, char *shown, size_t cap) {
    json_t *a = json_pack("[f]", v);
    char *mine = json_text_dumps(a, JSON_COMPACT), *theirs = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    int ok = mine && theirs && strlen(mine) <= strlen(theirs);
    if (mine) snprintf(shown, cap, "%s", mine);
    json_error_t e;
    json_t *b = ok ? json_loads(mine, 0, &e) : NULL;
    json_t *x = json_array_get(b, 0);
    ok = ok && json_is_real(x);
    double back = ok ? json_real_value(x) : NAN;
    ok = ok && memcmp(&back, &v, sizeof v) == 0;
    json_decref(b);
    free(mine);
    free(theirs);
    return ok;
}

static uint64_t next_u64(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

TEST(edge_cases_read_back_bit_identical_in_their_short_form) {
    static const struct {
        double v;
        const char *text;
    } cases[] = {
        {0.0, "[0.0]"},
        {-0.0, "[-0.0]"},
        {1.0, "[1.0]"},
        {-2.0, "[-2.0]"},
        {0.1, "[0.1]"},
        {3e-4, "[0.0003]"},
        {0.1 + 0.2, "[0.30000000000000004]"},
        {1.0 / 3.0, "[0.3333333333333333]"},
        {1e-300, "[1e-300]"},
        {5e-324, "[5e-324]"},
        {2.2250738585072014e-308, "[2.2250738585072014e-308]"},
        {1.7976931348623157e308, "[1.7976931348623157e308]"},
        {-1.7976931348623157e308, "[-1.7976931348623157e308]"},
        {1e21, "[1e21]"},
        {123456789012345680.0, "[1.2345678901234568e17]"},
        {6.97089, "[6.97089]"},
        {0.00029999999999999997, "[0.0003]"},
        {1e-7, "[1e-7]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char shown[64];
        CHECK_MSG(round_trips(cases[i].v, shown, sizeof shown), "%.17g written %s", cases[i].v, shown);
        CHECK_MSG(!strcmp(shown, cases[i].text), "%.17g written %s, want %s", cases[i].v, shown, cases[i].text);
    }
    /* every subnormal power of two and its neighbours */
    for (double v = DBL_MIN; v > 0; v /= 2) {
        char shown[64];
        CHECK_MSG(round_trips(v, shown, sizeof shown), "%.17g written %s", v, shown);
        CHECK_MSG(round_trips(nextafter(v, 1), shown, sizeof shown), "%.17g written %s", nextafter(v, 1), shown);
    }
}

/* Significant digits of a decimal text: its mantissa's digits less leading and trailing zeros. */
static int sig_digits(const char *s) {
    char d[64];
    int n = 0;
    for (; *s && *s != 'e' && *s != 'E' && n < 63; s++)
        if (*s >= '0' && *s <= '9') d[n++] = *s;
    int lo = 0;
    while (lo < n && d[lo] == '0') lo++;
    while (n > lo && d[n - 1] == '0') n--;
    return n - lo;
}

TEST(random_doubles_read_back_bit_identical) {
    uint64_t seed = 25;
    int failures = 0;
    for (int i = 0; i < 200000 && failures < 5; i++) {
        uint64_t bits = next_u64(&seed);
        double v;
        memcpy(&v, &bits, sizeof v);
        if (!isfinite(v)) continue;
        char shown[64];
        if (!round_trips(v, shown, sizeof shown)) {
            failures++;
            CHECK_MSG(0, "%.17g (bits %016llx) written %s", v, (unsigned long long)bits, shown);
        }
    }
    /* and decimals as typed: d digits, any exponent, come back as written */
    for (int i = 0; i < 100000; i++) {
        uint64_t r = next_u64(&seed);
        char typed[40];
        snprintf(typed, sizeof typed, "%.*g", 1 + (int)(r % 15),
                 (double)(r >> 11) * 0x1p-53 * pow(10, (int)(r % 61) - 30));
        double v = strtod(typed, NULL), again = 0;
        char buf[40];
        CHECK(json_text_real(v, buf, sizeof buf) > 0);
        again = strtod(buf, NULL);
        CHECK_MSG(memcmp(&again, &v, sizeof v) == 0 && sig_digits(buf) <= sig_digits(typed), "%s written %s", typed,
                  buf);
    }
}

TEST(integers_strings_and_layout_are_left_alone) {
    json_t *v =
        json_pack("{s:I, s:f, s:s, s:[f, i, f], s:s}", "big", (json_int_t)9007199254740993LL, "lr", 3e-4, "text",
                  "1.50000000000000001e5 \"0.1000000000000000055\\", "list", 0.1, -7, -0.5, "k", "-3.0");
    char *compact = json_text_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(3));
    CHECK_MSG(compact &&
                  !strcmp(compact, "{\"big\":9007199254740993,\"k\":\"-3.0\",\"list\":[0.1,-7,-0.5],\"lr\":0.0003,"
                                   "\"text\":\"1.50000000000000001e5 \\\"0.1000000000000000055\\\\\"}"),
              "%s", compact ? compact : "(null)");
    char *indented = json_text_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
    CHECK(indented && strstr(indented, "\n  \"lr\": 0.0003,\n") != NULL);
    free(compact);
    free(indented);
    json_decref(v);
    CHECK(json_text_shorten(NULL) == NULL);
    char plain[] = "[1e+300,2,-0.0,\"x\"]";
    CHECK(!strcmp(json_text_shorten(plain), "[1e300,2,-0.0,\"x\"]"));
    char buf[4];
    CHECK(json_text_real(0.1, buf, 3) == -1); /* too small: refused, not cut */
    CHECK(json_text_real(INFINITY, buf, sizeof buf) == -1);
}

int main(void) {
    RUN(edge_cases_read_back_bit_identical_in_their_short_form);
    RUN(random_doubles_read_back_bit_identical);
    RUN(integers_strings_and_layout_are_left_alone);
    return test_summary();
}
