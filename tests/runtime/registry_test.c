/* Backends and memory spaces by name (runtime/registry.c): a caller's own row registered,
 * found and replaced; bad rows and names refused by name; a name no library holds refused
 * with the loader's reason; the built-in "mpi" row registered by the MPI backend's code, its
 * context refused without MPI_Init; "gloo" found (registered or loaded) where Gloo is built. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dtr.h"
#include "backends/mpi/dtr_mpi.h"
#include "tests/support/fake_device.h"

static int made;

static dtr_status_t toy_env(dtr_context_t **out) {
    made++;
    *out = (dtr_context_t *)0x1234;
    return DTR_OK;
}

static dtr_status_t toy_env_fails(dtr_context_t **out) {
    (void)out;
    return DTR_ERR_BACKEND;
}

static void expect_bad(dtr_status_t st, const char *needle) {
    cr_expect_eq(st, DTR_ERR_INVALID_ARGUMENT, "status %s (%s)", dtr_status_name(st),
                 dtr_last_error());
    cr_expect(strstr(dtr_last_error(), needle) != NULL, "'%s' not in: %s", needle,
              dtr_last_error());
}

Test(registry, own_row_found_and_replaced) {
    char name[8] = "toy_1";
    dtr_backend_info_t row = {.name = name, .caps = DTR_BACKEND_CAP_AVG, .launch = "anything",
                              .create_env = toy_env};
    cr_assert_eq(dtr_backend_register(&row), DTR_OK, "%s", dtr_last_error());
    name[0] = 'X'; /* the name was copied */
    dtr_backend_info_t got;
    cr_assert_eq(dtr_backend_find("toy_1", &got), DTR_OK, "%s", dtr_last_error());
    cr_expect_str_eq(got.name, "toy_1");
    cr_expect_eq(got.caps, DTR_BACKEND_CAP_AVG);
    cr_expect_str_eq(got.memory, "host");
    cr_expect_str_eq(got.launch, "anything");
    dtr_context_t *ctx = NULL;
    cr_expect_eq(dtr_context_create_named("toy_1", &ctx), DTR_OK);
    cr_expect_eq(ctx, (dtr_context_t *)0x1234);
    cr_expect_eq(made, 1);
    row.name = "toy_1";
    row.memory = "cuda";
    row.create_env = toy_env_fails;
    cr_assert_eq(dtr_backend_register(&row), DTR_OK);
    cr_assert_eq(dtr_backend_find("toy_1", &got), DTR_OK);
    cr_expect_str_eq(got.memory, "cuda");
    ctx = NULL;
    cr_expect_eq(dtr_context_create_named("toy_1", &ctx), DTR_ERR_BACKEND);
    cr_expect_null(ctx, "*out written on failure");
}

Test(registry, bad_rows_and_names) {
    dtr_backend_info_t row = {.name = "ok", .create_env = toy_env};
    expect_bad(dtr_backend_register(NULL), "info: must not be NULL");
    row.name = NULL;
    expect_bad(dtr_backend_register(&row), "info->name: must not be NULL");
    row.name = "ok";
    row.create_env = NULL;
    expect_bad(dtr_backend_register(&row), "info->create_env: must not be NULL");
    row.create_env = toy_env;
    const char *bad[] = {"", "Gloo", "a/b", "../x", "a b", "abcdefghijklmnopqrstuvwxyz012345"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        row.name = bad[k];
        expect_bad(dtr_backend_register(&row), "info->name:");
        dtr_backend_info_t got;
        expect_bad(dtr_backend_find(bad[k], &got), "is not a backend name");
    }
    dtr_backend_info_t got;
    expect_bad(dtr_backend_find(NULL, &got), "name: must not be NULL");
    expect_bad(dtr_backend_find("mpi", NULL), "out: must not be NULL");
    expect_bad(dtr_context_create_named("mpi", NULL), "out: must not be NULL");
    /* 31 characters is the longest name */
    row.name = "abcdefghijklmnopqrstuvwxyz01234";
    cr_expect_eq(dtr_backend_register(&row), DTR_OK, "%s", dtr_last_error());
}

Test(registry, full_table) {
    int added = 0;
    dtr_status_t st = DTR_OK;
    for (int k = 0; k < 40 && st == DTR_OK; k++) {
        char name[16];
        snprintf(name, sizeof name, "row%d", k);
        dtr_backend_info_t row = {.name = name, .create_env = toy_env};
        st = dtr_backend_register(&row);
        added += st == DTR_OK;
    }
    expect_bad(st, "the table is full (16 backends)");
    dtr_backend_info_t got;
    cr_expect_eq(dtr_backend_find("row0", &got), DTR_OK);
    cr_expect_eq(dtr_backend_find("mpi", &got), DTR_OK, "the built-in rows stay");
    cr_expect_gt(added, 0);
}

Test(registry, unknown_name_says_what_was_tried) {
    dtr_context_t *ctx = (dtr_context_t *)0x5a5a;
    expect_bad(dtr_context_create_named("nosuch", &ctx), "no backend 'nosuch'");
    cr_expect(strstr(dtr_last_error(), "libdtr_nosuch.so.0") != NULL, "%s", dtr_last_error());
    cr_expect(strstr(dtr_last_error(), "registered: mpi") != NULL, "%s", dtr_last_error());
    cr_expect_eq(ctx, (dtr_context_t *)0x5a5a, "*out written on failure");
}

Test(registry, mpi_row_needs_mpi_init) {
    dtr_backend_info_t got;
    cr_assert_eq(dtr_backend_find("mpi", &got), DTR_OK, "%s", dtr_last_error());
    cr_expect_str_eq(got.memory, "host");
    cr_expect_eq(got.caps, dtr_backend_mpi_ops()->caps);
    cr_expect(strstr(got.launch, "mpirun") != NULL, "%s", got.launch);
    dtr_context_t *ctx = (dtr_context_t *)0x5a5a;
    expect_bad(dtr_context_create_named("mpi", &ctx), "backend mpi: MPI is not initialised");
    cr_expect_eq(ctx, (dtr_context_t *)0x5a5a);
}

/* ---- memory spaces by name (dtr_memory_register, dtr_memory_find) ---- */

static dtr_status_t toy_space_create(int device, void *stream, void **state) {
    *state = (void *)(uintptr_t)(0x100 + device + (stream != NULL));
    return DTR_OK;
}

Test(registry, space_found_and_replaced) {
    char name[8] = "toy_sp";
    dtr_memory_info_t row = {.name = name, .ops = fake_device_ops(), .create = toy_space_create};
    cr_assert_eq(dtr_memory_register(&row), DTR_OK, "%s", dtr_last_error());
    name[0] = 'X'; /* the name was copied */
    dtr_memory_info_t got;
    cr_assert_eq(dtr_memory_find("toy_sp", &got), DTR_OK, "%s", dtr_last_error());
    cr_expect_str_eq(got.name, "toy_sp");
    cr_expect_eq(got.ops, fake_device_ops());
    cr_expect_null(got.device_count);
    cr_expect_null(got.set_stream);
    void *state = NULL;
    cr_expect_eq(got.create(3, NULL, &state), DTR_OK);
    cr_expect_eq(state, (void *)0x103);
    row.name = "toy_sp";
    row.device_count = dtr_version; /* (any int (*)(void)) */
    cr_assert_eq(dtr_memory_register(&row), DTR_OK);
    cr_assert_eq(dtr_memory_find("toy_sp", &got), DTR_OK);
    cr_expect_eq(got.device_count, dtr_version);
    dtr_backend_info_t b;
    expect_bad(dtr_backend_find("toy_sp", &b), "no backend 'toy_sp'"); /* tables apart */
}

Test(registry, space_bad_rows_and_names) {
    dtr_memory_info_t row = {.name = "ok", .ops = fake_device_ops(), .create = toy_space_create};
    expect_bad(dtr_memory_register(NULL), "info: must not be NULL");
    row.ops = NULL;
    expect_bad(dtr_memory_register(&row), "info->ops: must not be NULL");
    row.ops = fake_device_ops();
    row.create = NULL;
    expect_bad(dtr_memory_register(&row), "info->create: must not be NULL");
    row.create = toy_space_create;
    row.name = "host";
    expect_bad(dtr_memory_register(&row), "'host' is every context's own memory");
    row.name = "a/b";
    expect_bad(dtr_memory_register(&row), "info->name: 'a/b' is not 1 to 31");
    dtr_memory_info_t got = {.name = "untouched"};
    expect_bad(dtr_memory_find("host", &got), "'host' is every context's own memory");
    expect_bad(dtr_memory_find("../x", &got), "is not a memory space name");
    expect_bad(dtr_memory_find(NULL, &got), "name: must not be NULL");
    expect_bad(dtr_memory_find("ok", NULL), "out: must not be NULL");
    cr_expect_str_eq(got.name, "untouched", "*out written on failure");
}

Test(registry, space_unknown_name_says_what_was_tried) {
    dtr_memory_info_t got = {.name = "untouched"};
    expect_bad(dtr_memory_find("nosuch", &got), "no memory space 'nosuch'");
    cr_expect(strstr(dtr_last_error(), "libdtr_nosuch.so.0") != NULL, "%s", dtr_last_error());
    cr_expect(strstr(dtr_last_error(), "registered: ") != NULL, "%s", dtr_last_error());
    cr_expect_str_eq(got.name, "untouched");
}
