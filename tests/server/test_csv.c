/* The CSV module (server/util/csv.h): RFC 4180 quoting, cell separators, the API's number formats, JSON
 * values as cells, and a long text that makes the buffer grow. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "util/csv.h"

/* s on one line of stderr, its CR and LF written \r and \n. */
static void print_escaped(const char *label, const char *s) {
    fprintf(stderr, "# %s [", label);
    if (!s) s = "(NULL)";
    for (; *s; s++) {
        if (*s == '\n' || *s == '\r')
            fputs(*s == '\n' ? "\\n" : "\\r", stderr);
        else
            fputc(*s, stderr);
    }
    fputs("]\n", stderr);
}

/* The text of b (taken: b is empty afterwards); compared, then freed. */
static int text_is(csv_buf *b, const char *want) {
    size_t len = 0;
    char *got = csv_take(b, &len);
    int ok = got && len == strlen(want) && !strcmp(got, want);
    if (!ok) {
        print_escaped("got ", got);
        print_escaped("want", want);
    }
    free(got);
    return ok;
}

/* One text cell alone on its row. */
static int cell_is(const char *s, const char *want) {
    csv_buf b = {0};
    csv_text(&b, s);
    return text_is(&b, want);
}

TEST(plain_text_is_written_as_it_is) {
    CHECK(cell_is("loss", "loss"));
    CHECK(cell_is("a b\tc;d'e", "a b\tc;d'e"));
    CHECK(cell_is("", ""));
    CHECK(cell_is(NULL, ""));
}

TEST(comma_quote_cr_and_lf_are_quoted) {
    CHECK(cell_is("a,b", "\"a,b\""));
    CHECK(cell_is("say \"hi\"", "\"say \"\"hi\"\"\""));
    CHECK(cell_is("\"", "\"\"\"\""));
    CHECK(cell_is("\"\"", "\"\"\"\"\"\""));
    CHECK(cell_is("line\nnext", "\"line\nnext\""));
    CHECK(cell_is("line\rnext", "\"line\rnext\""));
    CHECK(cell_is("crlf\r\n", "\"crlf\r\n\""));
    CHECK(cell_is("a,\"b\"\n", "\"a,\"\"b\"\"\n\""));
}

TEST(cells_are_separated_and_rows_ended) {
    csv_buf b = {0};
    csv_cells(&b, "step,wall_time");
    csv_text(&b, "x,y");
    csv_end_row(&b);
    csv_empty(&b, 1); /* an empty first cell still takes its place */
    csv_text(&b, NULL);
    csv_int(&b, 3);
    csv_empty(&b, 2);
    csv_end_row(&b);
    csv_int(&b, -7);
    csv_end_row(&b);
    csv_end_row(&b); /* an empty row */
    CHECK(text_is(&b, "step,wall_time,\"x,y\"\n,,3,,\n-7\n\n"));
}

TEST(numbers_use_the_formats_the_api_asks_for) {
    csv_buf b = {0};
    csv_int(&b, 0);
    csv_int(&b, -9223372036854775807LL - 1);
    csv_real(&b, 0.1, 17);
    csv_real(&b, 0.1, 10);
    csv_real(&b, 1.0 / 3.0, 9);
    csv_real(&b, 1e300, 17);
    csv_real(&b, 2.5, 17);
    csv_cellf(&b, "%.3f", 12.34567);
    csv_end_row(&b);
    CHECK(
        text_is(&b, "0,-9223372036854775808,0.10000000000000001,0.1,0.333333333,1.0000000000000001e+300,2.5,12.346\n"));
}

TEST(json_values_as_cells) {
    json_t *row =
        json_pack("[i, f, f, s, s, n, b, b, [i, s], {s:i}]", 42, 0.1, 2.0, "plain", "a,\"b\"", 1, 0, 1, "x", "k", 2);
    CHECK(row);
    csv_buf b = {0};
    size_t i;
    json_t *v;
    json_array_foreach(row, i, v) csv_json(&b, v, 17);
    csv_json(&b, NULL, 17); /* absent */
    csv_end_row(&b);
    int ok = text_is(
        &b, "42,0.10000000000000001,2,plain,\"a,\"\"b\"\"\",,true,false,\"[1,\"\"x\"\"]\",\"{\"\"k\"\":2}\",\n");
    CHECK(ok);
    /* csv_number: numbers only; null, absent, text and booleans are empty cells. */
    json_array_foreach(row, i, v) csv_number(&b, v, 10);
    csv_number(&b, NULL, 10);
    csv_end_row(&b);
    ok = text_is(&b, "42,0.1,2,,,,,,,,\n");
    json_decref(row);
    CHECK(ok);
}

TEST(a_row_of_cells_is_reused) {
    csv_buf lead = {0}, b = {0};
    csv_int(&lead, 5);
    csv_text(&lead, "run, five");
    csv_empty(&lead, 1);
    for (int step = 1; step <= 2; step++) {
        csv_row_cells(&b, &lead);
        csv_int(&b, step);
        csv_end_row(&b);
    }
    csv_buf none = {0};
    csv_row_cells(&b, &none); /* no cells: nothing, not even a comma */
    csv_int(&b, 9);
    csv_end_row(&b);
    csv_free(&lead);
    CHECK(text_is(&b, "5,\"run, five\",,1\n5,\"run, five\",,2\n9\n"));
}

TEST(an_empty_text_is_an_empty_string_and_long_texts_grow) {
    csv_buf b = {0};
    size_t len = 99;
    char *t = csv_take(&b, &len);
    CHECK(t && !strcmp(t, "") && len == 0);
    free(t);
    /* Longer than the first allocation, a cell at a time and in one printf cell. */
    char big[10000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = 0;
    for (int i = 0; i < 3; i++) csv_text(&b, big);
    csv_cellf(&b, "%s", big);
    csv_end_row(&b);
    t = csv_take(&b, &len);
    CHECK(t);
    int ok = len == 4 * (sizeof big - 1) + 3 + 1 && strlen(t) == len && t[len - 1] == '\n' && t[sizeof big - 1] == ',';
    free(t);
    CHECK(ok);
    CHECK(b.data == NULL && b.len == 0 && !b.mid_row);
}

TEST(a_failed_buffer_answers_null) {
    csv_buf b = {0}, row = {0};
    csv_text(&b, "kept until the failure");
    b.failed = 1; /* as an allocation failure leaves it */
    csv_text(&b, "more");
    csv_end_row(&b);
    size_t len = 99;
    CHECK(csv_take(&b, &len) == NULL && len == 0 && b.data == NULL && !b.failed);
    csv_int(&row, 1);
    row.failed = 1;
    csv_row_cells(&b, &row); /* a failed row of cells fails the text it is copied into */
    csv_free(&row);
    CHECK(b.failed);
    CHECK(csv_take(&b, NULL) == NULL);
}

int main(void) {
    RUN(plain_text_is_written_as_it_is);
    RUN(comma_quote_cr_and_lf_are_quoted);
    RUN(cells_are_separated_and_rows_ended);
    RUN(numbers_use_the_formats_the_api_asks_for);
    RUN(json_values_as_cells);
    RUN(a_row_of_cells_is_reused);
    RUN(an_empty_text_is_an_empty_string_and_long_texts_grow);
    RUN(a_failed_buffer_answers_null);
    return test_summary();
}
