/*
 * Fixtures of the Criterion tests that build meshes and specs from their text forms: a
 * text that does not parse fails the test where it is used.
 */
#ifndef DTR_TESTS_SPEC_FIXTURE_H
#define DTR_TESTS_SPEC_FIXTURE_H

#include <criterion/criterion.h>

#include "dtr.h"

static inline dtr_mesh_t *mesh_of(const char *text) {
    dtr_mesh_t *m = NULL;
    cr_assert_eq(dtr_mesh_parse(text, NULL, 0, &m), DTR_OK, "fixture mesh %s: %s", text,
                 dtr_last_error());
    return m;
}

static inline void spec_of(dtr_spec_t *s, const dtr_mesh_t *m, const char *placements,
                           const char *shape, dtr_dtype_t dtype) {
    dtr_placement_t p[DTR_MAX_MESH_DIMS];
    int np = 0, nd = 0;
    int64_t sh[DTR_MAX_TENSOR_DIMS];
    cr_assert_eq(dtr_placements_parse(placements, p, DTR_MAX_MESH_DIMS, &np), DTR_OK,
                 "fixture placements %s", placements);
    cr_assert_eq(dtr_shape_parse(shape, sh, DTR_MAX_TENSOR_DIMS, &nd), DTR_OK,
                 "fixture shape %s", shape);
    cr_assert_eq(dtr_spec_init(s, m, p, np, sh, nd, dtype), DTR_OK, "fixture spec: %s",
                 dtr_last_error());
}

#endif
