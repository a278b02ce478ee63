/* The table formatter: display width of UTF-8 text, column alignment, CSV quoting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../client/table.h"
#include "../support/test.h"

static char *render(const table *t, int csv) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    if (csv)
        table_print_csv(t, f);
    else
        table_print(t, f);
    fclose(f);
    return buf;
}

TEST(display_width_counts_columns_not_bytes) {
    CHECK_EQ_INT(table_display_width(""), 0);
    CHECK_EQ_INT(table_display_width("loss"), 4);
    CHECK_EQ_INT(table_display_width("τ"), 1);                /* 2 bytes, 1 column */
    CHECK_EQ_INT(table_display_width("√d_k"), 4);             /* 3-byte sign */
    CHECK_EQ_INT(table_display_width("4.8–5.2"), 7);          /* en dash */
    CHECK_EQ_INT(table_display_width("회전"), 4);             /* Hangul: wide */
    CHECK_EQ_INT(table_display_width("位置"), 4);             /* CJK: wide */
    CHECK_EQ_INT(table_display_width("e\xcc\x81"), 1);        /* e + combining acute */
    CHECK_EQ_INT(table_display_width("\xf0\x9f\x94\xb4"), 2); /* emoji */
    CHECK_EQ_INT(table_display_width("a\xff"
                                     "b"),
                 3);                                  /* an invalid byte counts one */
    CHECK_EQ_INT(table_display_width("\xe2\x82"), 2); /* a truncated sequence too */
}

TEST(numbers_are_recognised) {
    CHECK(table_is_numeric("0"));
    CHECK(table_is_numeric("-3.25"));
    CHECK(table_is_numeric("1e-08"));
    CHECK(table_is_numeric("5.656"));
    CHECK(table_is_numeric("nan"));
    CHECK(!table_is_numeric(""));
    CHECK(!table_is_numeric("rope"));
    CHECK(!table_is_numeric("1.2.3"));
    CHECK(!table_is_numeric("e5"));
    CHECK(!table_is_numeric("3e"));
}

TEST(columns_align_by_display_width) {
    const char *head[] = {"head", "τ", "note"};
    table *t = table_new(3, head);
    CHECK(t);
    const char *r1[] = {"0.0", "5.656", "√32"};
    const char *r2[] = {"1.10", "4.8", "회전 ok"};
    const char *r3[] = {"12", "-0.25", ""};
    CHECK(table_add_row(t, r1) == 0);
    CHECK(table_add_row(t, r2) == 0);
    CHECK(table_add_row(t, r3) == 0);
    CHECK_EQ_INT(table_rows(t), 3);
    char *s = render(t, 0);
    table_free(t);
    CHECK(s);
    /* Numeric columns right-aligned (header too); text left-aligned; no trailing blanks. */
    const char *want = "head      τ  note\n"
                       " 0.0  5.656  √32\n"
                       "1.10    4.8  회전 ok\n"
                       "  12  -0.25\n";
    CHECK_MSG(!strcmp(s, want), "got:\n%s", s);
    free(s);
}

TEST(every_line_has_the_same_width_before_the_last_column) {
    const char *head[] = {"kind", "value"};
    table *t = table_new(2, head);
    CHECK(t);
    const char *rows[][2] = {{"τ-init", "x"}, {"位置编码", "y"}, {"plain", "z"}, {"e\xcc\x81t\xc3\xa9", "w"}};
    for (int i = 0; i < 4; i++) CHECK(table_add_row(t, rows[i]) == 0);
    char *s = render(t, 0);
    table_free(t);
    CHECK(s);
    /* The second column starts at the same display column on every line. */
    int lines = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        char *last = strrchr(line, ' ');
        CHECK(last);
        *last = 0;
        CHECK_MSG(table_display_width(line) + 1 == 10, "'%s' is %zu wide", line, table_display_width(line));
    }
    CHECK_EQ_INT(lines, 5);
    free(s);
}

TEST(csv_quotes_only_what_needs_it) {
    const char *head[] = {"name", "text"};
    table *t = table_new(2, head);
    CHECK(t);
    const char *r1[] = {"a", "plain"};
    const char *r2[] = {"b,c", "say \"hi\""};
    const char *r3[] = {"multi", "line\nbreak"};
    const char *r4[] = {NULL, "τ"};
    CHECK(table_add_row(t, r1) == 0 && table_add_row(t, r2) == 0 && table_add_row(t, r3) == 0 &&
          table_add_row(t, r4) == 0);
    char *s = render(t, 1);
    table_free(t);
    CHECK(s);
    CHECK_MSG(!strcmp(s, "name,text\na,plain\n\"b,c\",\"say \"\"hi\"\"\"\nmulti,\"line\nbreak\"\n,τ\n"), "got:\n%s", s);
    free(s);
}

TEST(many_rows_grow_the_table) {
    const char *head[] = {"i"};
    table *t = table_new(1, head);
    CHECK(t);
    char b[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(b, sizeof b, "%d", i);
        const char *row[] = {b};
        CHECK(table_add_row(t, row) == 0);
    }
    CHECK_EQ_INT(table_rows(t), 1000);
    char *s = render(t, 0);
    table_free(t);
    CHECK(s);
    CHECK(strstr(s, "  i\n  0\n  1\n"));
    CHECK(strstr(s, "999\n"));
    free(s);
    CHECK(table_new(0, NULL) == NULL);
}

/* Text from the server reaches the terminal harmless (issue 23 item 7): escape sequences, bare CRs,
 * bells, C1 controls and bidirectional overrides are written out as \xHH / \uHHHH. */
TEST(control_and_bidi_characters_never_reach_the_terminal) {
    char buf[256];
    CHECK(!strcmp(table_safe("plain τ √d 位置", buf, sizeof buf), "plain τ √d 位置"));
    CHECK(!strcmp(table_safe("\x1b[2J\x1b]0;pwned\x07", buf, sizeof buf), "\\x1B[2J\\x1B]0;pwned\\x07"));
    CHECK(!strcmp(table_safe("a\rb\nc\td", buf, sizeof buf), "a\\x0Db\\x0Ac\td"));
    CHECK(!strcmp(table_safe("abc\xe2\x80\xaegnp.exe", buf, sizeof buf), "abc\\u202Egnp.exe")); /* U+202E */
    CHECK(!strcmp(table_safe("\xc2\x9b"
                             "31m",
                             buf, sizeof buf),
                  "\\u009B31m")); /* C1 CSI */
    CHECK(!strcmp(table_safe("\xe2\x81\xa6x\xe2\x81\xa9", buf, sizeof buf), "\\u2066x\\u2069"));
    CHECK(!strcmp(table_safe("bad\xff\xc3", buf, sizeof buf), "bad\\xFF\\xC3"));
    CHECK(!strcmp(table_safe("\x7f", buf, sizeof buf), "\\x7F"));
    /* cut to the buffer on a whole piece, never half an escape */
    char small[6];
    CHECK(!strcmp(table_safe("ab\x1b", small, sizeof small), "ab"));
    /* a table with such cells prints none of those bytes */
    static const char *const head[] = {"NAME", "NOTE"};
    table *t = table_new(2, head);
    CHECK(t);
    const char *row[] = {"\x1b[31mred\x1b[0m", "x\xe2\x80\xaey\rz"};
    CHECK(table_add_row(t, row) == 0);
    for (int csv = 0; csv < 2; csv++) {
        char *out = render(t, csv);
        CHECK(out);
        int bad = 0;
        for (const unsigned char *p = (const unsigned char *)out; *p; p++) bad |= *p < 0x20 && *p != '\n';
        if (csv) bad = 0; /* CSV keeps the data unless it goes to a terminal (render writes to memory) */
        CHECK_MSG(!bad && (csv || (!strstr(out, "\xe2\x80\xae") && strstr(out, "\\x1B[31mred"))), "%s", out);
        free(out);
    }
    table_free(t);
}

int main(void) {
    RUN(control_and_bidi_characters_never_reach_the_terminal);
    RUN(display_width_counts_columns_not_bytes);
    RUN(numbers_are_recognised);
    RUN(columns_align_by_display_width);
    RUN(every_line_has_the_same_width_before_the_last_column);
    RUN(csv_quotes_only_what_needs_it);
    RUN(many_rows_grow_the_table);
    return test_summary();
}
