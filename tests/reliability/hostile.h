/*
 * The hostile-input table's parts (test_hostile.c holds the table and runs it): the
 * fixtures its cases share, and every case declared from hostile_rows.inc. The cases are
 * hostile_api.c's (parsers, formatters, specs, layouts, planning) and hostile_exec.c's
 * (contexts, execution, autograd).
 */
#ifndef DTR_TESTS_RELIABILITY_HOSTILE_H
#define DTR_TESTS_RELIABILITY_HOSTILE_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <string.h>

#include "dtr.h"
#include "tests/support/solo_backend.h"
#include "tests/support/spec_fixture.h"
#include "pattern/pattern.h"

static inline void plan_of(dtr_plan_t *plan, const dtr_mesh_t *m, const char *from, const char *to,
                    const char *shape, dtr_dtype_t dtype) {
    dtr_spec_t a, b;
    spec_of(&a, m, from, shape, dtype);
    spec_of(&b, m, to, shape, dtype);
    cr_assert_eq(dtr_plan_create(&a, &b, NULL, plan), DTR_OK, "fixture plan");
}

static inline dtr_context_t *solo_context(void) {
    dtr_context_t *ctx = NULL;
    cr_assert_eq(dtr_context_create(&solo_backend_ops, NULL, &ctx), DTR_OK, "fixture context");
    return ctx;
}

#define SAME(a, b) (memcmp(&(a), &(b), sizeof(a)) == 0)
/* A row's call: the status into *st; true when it wrote no output and no input. */
#define CASE(name) bool name(dtr_status_t *st)

/* dtr_placements_parse(text) into room for cap placements: true when it wrote nothing. */
static inline bool placements_untouched(const char *text, int cap, dtr_status_t *st) {
    dtr_placement_t p[2], k[2];
    memset(p, 0x11, sizeof p), memcpy(k, p, sizeof p);
    int n = -9;
    *st = dtr_placements_parse(text, p, cap, &n);
    return SAME(p, k) && n == -9;
}

/* Every case, declared from the table's rows (one declaration of many functions: the rows
 * end in commas, so the list opens and closes with a name no file defines). */
#define ROW(fn, status, fragment) fn(dtr_status_t *st)
bool hostile_rows_begin(dtr_status_t *st),
#include "tests/reliability/hostile_rows.inc"
    hostile_rows_end(dtr_status_t *st);
#undef ROW

#endif
