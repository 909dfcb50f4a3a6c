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

Test(version, an_older_header_of_the_same_minor_is_accepted) {
    size_t sizes[32];
    int n = current_sizes(sizes, 32);
    int same_minor = DTR_VERSION_MAJOR * 10000 + DTR_VERSION_MINOR * 100;
    cr_expect_eq(dtr_abi_check(same_minor, sizes, n), DTR_OK);
    /* and one that lists fewer structs (an older list is a prefix) */
    cr_expect_eq(dtr_abi_check(DTR_VERSION_CODE, sizes, 3), DTR_OK);
}

/* Before 1.0 a minor version may change any struct: only the same MAJOR.MINOR passes, even
 * with every size equal. */
Test(version, another_minor_is_refused_before_1_0) {
    size_t sizes[32];
    int n = current_sizes(sizes, 32);
    cr_assert_eq(DTR_VERSION_MAJOR, 0, "this test is for 0.x; from 1.0 on minors are compatible");
    cr_assert_gt(DTR_VERSION_MINOR, 0);
    int older = DTR_VERSION_MINOR * 100 - 100 + 99; /* 0.(m-1).99 */
    cr_expect_eq(dtr_abi_check(older, sizes, n), DTR_ERR_MISMATCH);
    char want[256];
    snprintf(want, sizeof want,
             "dtr_abi_check: headers are dtr 0.%d.99 and the library is %s: before 1.0 the "
             "minor versions must agree, rebuild against this library's headers",
             DTR_VERSION_MINOR - 1, DTR_VERSION_STRING);
    cr_expect_str_eq(dtr_last_error(), want);
    cr_expect_eq(dtr_abi_check(DTR_VERSION_CODE + 100, sizes, n), DTR_ERR_MISMATCH);
}

/* Every struct of the list is compared: one larger anywhere, the last included, is named. */
Test(version, every_listed_struct_is_compared) {
    static const char *const names[] = {
#define NAME_OF(type) #type,
        DTR_ABI_STRUCTS(NAME_OF)
#undef NAME_OF
    };
    size_t sizes[32];
    int n = current_sizes(sizes, 32);
    cr_expect_eq(n, 27);
    cr_expect_str_eq(names[n - 1], "dtr_change_options_t");
    for (int i = 0; i < n; i++) {
        sizes[i] += 4;
        cr_expect_eq(dtr_abi_check(DTR_VERSION_CODE, sizes, n), DTR_ERR_MISMATCH, "%s", names[i]);
        char want[96];
        snprintf(want, sizeof want, "sizeof(%s) is %zu in the headers", names[i], sizes[i]);
        cr_expect(strstr(dtr_last_error(), want) != NULL, "%s", dtr_last_error());
        sizes[i] -= 4;
    }
    cr_expect_eq(dtr_abi_check(DTR_VERSION_CODE, sizes, n), DTR_OK);
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
