/*
 * dtr_context_alloc and dtr_context_free (runtime/runtime.h) on a 1-rank context: the host heap
 * where the backend has no allocator, the backend's where it has one, and the refusals, each
 * naming its argument and leaving *p alone. The MPI backend's shared allocations run under
 * mpirun: tests/backends/mpi/mpi_shm_reduce_test.sh (--shared, and dtr run --buffers shared).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "dtr.h"
#include "tests/support/solo_backend.h"

static dtr_context_t *solo(const dtr_backend_ops_t *ops) {
    dtr_context_t *ctx = NULL;
    cr_assert_eq(dtr_context_create(ops, NULL, &ctx), DTR_OK, "%s", dtr_last_error());
    return ctx;
}

static void expect_error(dtr_status_t st, dtr_status_t want, const char *detail) {
    cr_expect_eq(st, want, "status %s, want %s", dtr_status_name(st), dtr_status_name(want));
    cr_expect_str_eq(dtr_last_error(), detail);
}

Test(context_alloc, host_heap_without_a_backend_allocator) {
    dtr_context_t *ctx = solo(&solo_backend_ops);
    void *a = NULL, *b = NULL;
    cr_assert_eq(dtr_context_alloc(ctx, 100, &a), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_context_alloc(ctx, 1, &b), DTR_OK, "%s", dtr_last_error());
    cr_expect_neq(a, b);
    cr_expect_eq((uintptr_t)a % 64, 0u, "not 64-byte aligned: %p", a);
    cr_expect_eq((uintptr_t)b % 64, 0u, "not 64-byte aligned: %p", b);
    memset(a, 0x7f, 100); /* writable, all of it (asan checks the bounds) */
    cr_expect_eq(dtr_context_free(ctx, a), DTR_OK, "%s", dtr_last_error());
    char text[160];
    snprintf(text, sizeof text,
             "dtr_context_free: p: %p was not returned by dtr_context_alloc on this context (or "
             "was freed already)",
             a);
    expect_error(dtr_context_free(ctx, a), DTR_ERR_INVALID_ARGUMENT, text);
    cr_expect_eq(dtr_context_free(ctx, NULL), DTR_OK);
    dtr_context_destroy(ctx); /* frees b: no leak under asan */
}

Test(context_alloc, refusals_name_the_argument) {
    dtr_context_t *ctx = solo(&solo_backend_ops);
    void *p = (void *)(uintptr_t)0x5e;
    expect_error(dtr_context_alloc(NULL, 8, &p), DTR_ERR_INVALID_ARGUMENT,
                 "dtr_context_alloc: ctx: must not be NULL");
    expect_error(dtr_context_alloc(ctx, 8, NULL), DTR_ERR_INVALID_ARGUMENT,
                 "dtr_context_alloc: p: must not be NULL");
    expect_error(dtr_context_alloc(ctx, 0, &p), DTR_ERR_INVALID_ARGUMENT,
                 "dtr_context_alloc: bytes: 0, must be at least 1");
    expect_error(dtr_context_alloc(ctx, -5, &p), DTR_ERR_INVALID_ARGUMENT,
                 "dtr_context_alloc: bytes: -5, must be at least 1");
    cr_expect_eq(p, (void *)(uintptr_t)0x5e, "*p written on a refusal");
    expect_error(dtr_context_free(NULL, p), DTR_ERR_INVALID_ARGUMENT,
                 "dtr_context_free: ctx: must not be NULL");
    int local = 0;
    char text[160];
    snprintf(text, sizeof text,
             "dtr_context_free: p: %p was not returned by dtr_context_alloc on this context (or "
             "was freed already)",
             (void *)&local);
    expect_error(dtr_context_free(ctx, &local), DTR_ERR_INVALID_ARGUMENT, text);
    dtr_context_destroy(ctx);
}

/* A backend allocator that hands out slots of a static arena and records the calls. */
static char arena[4][256];
static int taken[4], allocs, frees;

static dtr_status_t arena_alloc(void *state, int64_t bytes, void **p) {
    (void)state;
    allocs++;
    for (int k = 0; k < 4; k++)
        if (!taken[k] && bytes <= 256) {
            taken[k] = 1;
            *p = arena[k];
            return DTR_OK;
        }
    return DTR_ERR_OUT_OF_MEMORY;
}

static bool arena_free(void *state, void *p) {
    (void)state;
    for (int k = 0; k < 4; k++)
        if (p == arena[k] && taken[k]) {
            taken[k] = 0;
            frees++;
            return true;
        }
    return false;
}

Test(context_alloc, the_backend_allocator_when_it_has_one) {
    dtr_backend_ops_t ops = solo_backend_ops;
    ops.mem_alloc = arena_alloc;
    ops.mem_free = arena_free;
    dtr_context_t *ctx = solo(&ops);
    void *a = NULL, *b = NULL, *c = (void *)(uintptr_t)0x5e;
    cr_assert_eq(dtr_context_alloc(ctx, 200, &a), DTR_OK);
    cr_assert_eq(dtr_context_alloc(ctx, 10, &b), DTR_OK);
    cr_expect(a == arena[0] && b == arena[1], "not the backend's memory: %p %p", a, b);
    /* the backend's own error comes back as it is, *p untouched */
    cr_expect_eq(dtr_context_alloc(ctx, 1000, &c), DTR_ERR_OUT_OF_MEMORY);
    cr_expect_eq(c, (void *)(uintptr_t)0x5e);
    cr_expect_eq(dtr_context_free(ctx, a), DTR_OK);
    cr_expect_eq(dtr_context_free(ctx, a), DTR_ERR_INVALID_ARGUMENT, "freed twice");
    cr_expect_eq(dtr_context_free(ctx, b), DTR_OK);
    cr_expect_eq(allocs, 3);
    cr_expect_eq(frees, 2);
    dtr_context_destroy(ctx);
}
