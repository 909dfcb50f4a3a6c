/* Helpers for the planner tests: specs from text, a plan's steps as text. */
#ifndef DTR_TESTS_PLAN_UTIL_H
#define DTR_TESTS_PLAN_UTIL_H

#include <stdio.h>
#include <string.h>

#include "dtr.h"

/* A spec from text on an existing mesh; returns the status (the test asserts). */
static inline dtr_status_t spec_from(const dtr_mesh_t *mesh, const char *shape_text,
                                     const char *placements, dtr_dtype_t dtype, dtr_spec_t *out) {
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim, n;
    dtr_placement_t p[DTR_MAX_MESH_DIMS];
    dtr_status_t st = dtr_shape_parse(shape_text, shape, DTR_MAX_TENSOR_DIMS, &ndim);
    if (st == DTR_OK) st = dtr_placements_parse(placements, p, DTR_MAX_MESH_DIMS, &n);
    if (st == DTR_OK) st = dtr_spec_init(out, mesh, p, n, shape, ndim, dtype);
    return st;
}

/* A mesh from text and two specs on it, for a change from -> to. */
static inline dtr_status_t change_from(const char *mesh_text, const char *shape, const char *from,
                                       const char *to, dtr_dtype_t dtype, dtr_mesh_t **mesh,
                                       dtr_spec_t *src, dtr_spec_t *dst) {
    dtr_status_t st = dtr_mesh_parse(mesh_text, NULL, 0, mesh);
    if (st == DTR_OK) st = spec_from(*mesh, shape, from, dtype, src);
    if (st == DTR_OK) st = spec_from(*mesh, shape, to, dtype, dst);
    return st;
}

/* The default cost model with no latency: plans are chosen by bytes. */
static inline void cost_bytes_only(dtr_cost_model_t *cost) {
    dtr_cost_model_default(cost);
    for (int i = 0; i < DTR_MAX_MESH_DIMS; i++) cost->alpha_us[i] = 0;
}

/* "mesh_dim:from->to:kind; ..." for every step. */
static inline void steps_text(const dtr_plan_t *plan, char *buf, size_t len) {
    size_t pos = 0;
    buf[0] = '\0';
    for (int k = 0; k < plan->nsteps && pos < len; k++) {
        const dtr_step_t *s = &plan->steps[k];
        char a[128], b[128];
        if (s->kind == DTR_STEP_EXCHANGE) {
            dtr_placements_format(s->before, s->nplacements, a, sizeof a);
            dtr_placements_format(s->after, s->nplacements, b, sizeof b);
        } else {
            dtr_placement_format(s->from, a, sizeof a);
            dtr_placement_format(s->to, b, sizeof b);
        }
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%d:%s->%s:%s", k ? "; " : "",
                                s->mesh_dim, a, b, dtr_step_kind_info(s->kind)->name);
    }
}

#endif
