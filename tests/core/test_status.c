#include <criterion/criterion.h>
#include <string.h>

#include "core/common.h"
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

/* The classes every front end maps from: each status's class, its exit code and Python
 * exception, as tests/data/exit_codes.txt and docs/python.md ("Errors") say. */
Test(status, every_status_has_its_class_exit_code_and_exception) {
    static const struct {
        dtr_status_t st;
        dtr_error_class_t cls;
        int exit_code;
        const char *python;
    } rows[] = {
        {DTR_OK, DTR_CLASS_OK, 0, ""},
        {DTR_ERR_INVALID_ARGUMENT, DTR_CLASS_ARGUMENT, 2, "ArgumentError"},
        {DTR_ERR_PARSE, DTR_CLASS_ARGUMENT, 2, "ArgumentError"},
        {DTR_ERR_OVERFLOW, DTR_CLASS_ARGUMENT, 2, "ArgumentError"},
        {DTR_ERR_OUT_OF_MEMORY, DTR_CLASS_RUN, 1, "Error"},
        {DTR_ERR_NOT_IN_MESH, DTR_CLASS_ARGUMENT, 2, "ArgumentError"},
        {DTR_ERR_BUFFER_TOO_SMALL, DTR_CLASS_ARGUMENT, 2, "ArgumentError"},
        {DTR_ERR_INTERNAL, DTR_CLASS_RUN, 1, "Error"},
        {DTR_ERR_UNSUPPORTED, DTR_CLASS_REFUSED, 3, "RefusedError"},
        {DTR_ERR_BACKEND, DTR_CLASS_COMMUNICATION, 1, "BackendError"},
        {DTR_ERR_MISMATCH, DTR_CLASS_COMMUNICATION, 1, "BackendError"},
        {DTR_ERR_REMOTE, DTR_CLASS_COMMUNICATION, 1, "BackendError"},
        {DTR_ERR_BUSY, DTR_CLASS_COMMUNICATION, 1, "BackendError"},
        {DTR_ERR_TIMEOUT, DTR_CLASS_TIMEOUT, 1, "TimeoutError"},
        {DTR_ERR_ABORTED, DTR_CLASS_TIMEOUT, 1, "TimeoutError"},
        {DTR_ERR_IO, DTR_CLASS_FILE, 2, "FileError"},
    };
    /* every status of the map is a row (-15 is the last) */
    cr_expect_eq(sizeof rows / sizeof rows[0], 16);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dtr_error_class_t c = dtr_status_class(rows[i].st);
        cr_expect_eq(c, rows[i].cls, "%s", dtr_status_name(rows[i].st));
        cr_expect_eq(dtr_error_class_exit_code(c), rows[i].exit_code, "%s",
                     dtr_status_name(rows[i].st));
        cr_expect_str_eq(dtr_error_class_python(c), rows[i].python);
    }
    cr_expect_str_eq(dtr_error_class_name(DTR_CLASS_REFUSED), "DTR_CLASS_REFUSED");
    cr_expect_null(dtr_error_class_name(DTR_CLASS_LAST));
    cr_expect_eq(dtr_status_class((dtr_status_t)-999), DTR_CLASS_RUN);
    cr_expect_eq(dtr_error_class_exit_code((dtr_error_class_t)99), 1);
    cr_expect_str_eq(dtr_error_class_python((dtr_error_class_t)99), "Error");
}
