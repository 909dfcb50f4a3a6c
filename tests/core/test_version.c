/* dtr_version, dtr_version_string and the header/library check (dtr.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "dtr.h"

/* The sizes dtr_check_headers hands over, for tests that alter one. */
static int current_sizes(size_t *sizes, int cap) {
    const size_t s[] = {DTR_ABI_STRUCTS(DTR__ABI_SIZEOF)};
    int n = (int)(sizeof s / sizeof s[0]);
    cr_assert_leq(n, cap);
    memcpy(sizes, s, sizeof s);
    return n;
}

Test(version, library_and_headers_agree) {
    cr_expect_eq(dtr_version(), DTR_VERSION_CODE);
    cr_expect_eq(DTR_VERSION_CODE,
                 DTR_VERSION_MAJOR * 10000 + DTR_VERSION_MINOR * 100 + DTR_VERSION_PATCH);
    cr_expect_str_eq(dtr_version_string(), DTR_VERSION_STRING);
    cr_expect_eq(dtr_check_headers(), DTR_OK);
}

Test(version, an_older_header_of_the_same_major_is_accepted) {
    size_t sizes[32];
    int n = current_sizes(sizes, 32);
    cr_expect_eq(dtr_abi_check(DTR_VERSION_MAJOR * 10000, sizes, n), DTR_OK);
    /* and one that lists fewer structs (an older list is a prefix) */
    cr_expect_eq(dtr_abi_check(DTR_VERSION_CODE, sizes, 3), DTR_OK);
}

Test(version, a_struct_of_another_size_is_named) {
    size_t sizes[32];
    int n = current_sizes(sizes, 32);
    sizes[7] += 8; /* dtr_plan_t, the eighth of DTR_ABI_STRUCTS */
    cr_expect_eq(dtr_abi_check(DTR_VERSION_CODE, sizes, n), DTR_ERR_MISMATCH);
    char want[200];
    snprintf(want, sizeof want, "dtr_abi_check: sizeof(dtr_plan_t) is %zu in the headers and %zu in library %s",
             sizeof(dtr_plan_t) + 8, sizeof(dtr_plan_t), DTR_VERSION_STRING);
    cr_expect_str_eq(dtr_last_error(), want);
}

Test(version, another_major_or_a_newer_header_is_refused) {
    size_t sizes[32];
    int n = current_sizes(sizes, 32);
    cr_expect_eq(dtr_abi_check((DTR_VERSION_MAJOR + 1) * 10000, sizes, n), DTR_ERR_MISMATCH);
    cr_expect(strstr(dtr_last_error(), "major versions differ") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_abi_check(DTR_VERSION_CODE + 1, sizes, n), DTR_ERR_MISMATCH);
    cr_expect(strstr(dtr_last_error(), "load a library at least as new as the headers") != NULL,
              "%s", dtr_last_error());
}

Test(version, bad_arguments_are_named) {
    size_t sizes[32];
    int n = current_sizes(sizes, 32);
    cr_expect_eq(dtr_abi_check(DTR_VERSION_CODE, NULL, n), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_abi_check: sizes: must not be NULL");
    cr_expect_eq(dtr_abi_check(DTR_VERSION_CODE, sizes, 0), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_abi_check: count: 0, must be at least 1");
    cr_expect_eq(dtr_abi_check(-1, sizes, n), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_abi_check(DTR_VERSION_CODE, sizes, n + 1), DTR_ERR_MISMATCH);
    cr_expect(strstr(dtr_last_error(), "count: the headers list") != NULL, "%s", dtr_last_error());
}
