#include <criterion/criterion.h>
#include <string.h>

#include "core/internal.h"
#include "dtr.h"

Test(status, names_and_strings_come_from_one_map) {
    cr_expect_str_eq(dtr_status_name(DTR_OK), "DTR_OK");
    cr_expect_str_eq(dtr_status_name(DTR_ERR_PARSE), "DTR_ERR_PARSE");
    cr_expect_str_eq(dtr_status_name(DTR_ERR_NOT_IN_MESH), "DTR_ERR_NOT_IN_MESH");
    cr_expect_str_eq(dtr_status_name((dtr_status_t)-999), "DTR_UNKNOWN_STATUS");
    cr_expect_str_eq(dtr_status_string(DTR_OK), "success");
    cr_expect_str_eq(dtr_status_string(DTR_ERR_OVERFLOW), "size overflows 64 bits");
    cr_expect_str_eq(dtr_status_string((dtr_status_t)42), "unknown status");
    cr_expect_eq(DTR_OK, 0);
    cr_expect_lt(DTR_ERR_INVALID_ARGUMENT, 0);
}

Test(status, last_error_names_the_function_and_survives_success) {
    dtr_placement_t p;
    cr_assert_eq(dtr_placement_parse("S(", &p), DTR_ERR_PARSE);
    cr_expect_eq(dtr_last_status(), DTR_ERR_PARSE);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_placement_parse: text \"S(\": expected a tensor dim (an integer) in "
                     "S(...), found end of text");
    cr_assert_eq(dtr_placement_parse("R", &p), DTR_OK);
    cr_expect_eq(dtr_last_status(), DTR_ERR_PARSE, "success must not clear the last error");
}

Test(status, long_details_are_truncated_not_overrun) {
    char text[2000];
    memset(text, 'R', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    dtr_placement_t p;
    cr_assert_eq(dtr_placement_parse(text, &p), DTR_ERR_PARSE);
    cr_expect_lt(strlen(dtr_last_error()), 512);
    cr_expect_eq(strncmp(dtr_last_error(), "dtr_placement_parse: text \"RRR", 30), 0);
}

Test(status, scan_i64_limits) {
    const char *p = "9223372036854775807x";
    int64_t v;
    cr_assert_eq(dtr__scan_i64(&p, &v), 0);
    cr_expect_eq(v, INT64_MAX);
    cr_expect_eq(*p, 'x');
    p = "-9223372036854775808";
    cr_assert_eq(dtr__scan_i64(&p, &v), 0);
    cr_expect_eq(v, INT64_MIN);
    p = "9223372036854775808";
    cr_expect_eq(dtr__scan_i64(&p, &v), -2);
    p = "-";
    cr_expect_eq(dtr__scan_i64(&p, &v), -1);
}
