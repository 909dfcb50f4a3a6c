/*
 * One redistribution of the multi-rank error tests: a mesh, the specs and their plan, this
 * rank's input (the pattern) with a copy to prove it intact, and its output; on the heap,
 * or moved into a context's shared allocations (job_share). Needs mpi_check.h's `rank`;
 * one translation unit per test binary includes it.
 */
#ifndef DTR_TESTS_EXEC_JOB_H
#define DTR_TESTS_EXEC_JOB_H

#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "pattern/pattern.h"
#include "tests/support/mpi_check.h"

typedef struct {
    dtr_mesh_t *mesh;
    dtr_spec_t src, dst;
    dtr_plan_t plan;
    unsigned char *in, *copy, *out;
    size_t in_bytes, out_bytes;
    dtr_context_t *shared; /* in and out from its dtr_context_alloc (job_share), else heap */
} job_t;

static int job_init(job_t *j, const char *mesh, const char *shape, const char *from,
                    const char *to, dtr_dtype_t dtype, dtr_strategy_t strategy) {
    memset(j, 0, sizeof *j);
    dtr_placement_t a[8], b[8];
    int na, nb, nd;
    int64_t sh[8];
    if (dtr_mesh_parse(mesh, NULL, 0, &j->mesh) != DTR_OK ||
        dtr_placements_parse(from, a, 8, &na) != DTR_OK ||
        dtr_placements_parse(to, b, 8, &nb) != DTR_OK || dtr_shape_parse(shape, sh, 8, &nd) != DTR_OK ||
        dtr_spec_init(&j->src, j->mesh, a, na, sh, nd, dtype) != DTR_OK ||
        dtr_spec_init(&j->dst, j->mesh, b, nb, sh, nd, dtype) != DTR_OK)
        return -1;
    dtr_plan_options_t opts = {.strategy = strategy, .cost = NULL};
    if (dtr_plan_create(&j->src, &j->dst, &opts, &j->plan) != DTR_OK) return -1;
    dtr_layout_t sl = {0}, dl = {0};
    if (dtr_spec_layout(&j->src, rank, &sl) == DTR_OK) dtr_spec_layout(&j->dst, rank, &dl);
    else sl.bytes = dl.bytes = 16;
    j->in_bytes = (size_t)sl.bytes;
    j->out_bytes = (size_t)dl.bytes;
    j->in = malloc(j->in_bytes + 1);
    j->copy = malloc(j->in_bytes + 1);
    j->out = malloc(j->out_bytes + 1);
    if (dtr_pattern_fill(&j->src, rank, j->in, j->in_bytes) != DTR_OK)
        for (size_t k = 0; k < j->in_bytes; k++) j->in[k] = (unsigned char)(k + 7);
    memcpy(j->copy, j->in, j->in_bytes);
    return 0;
}

/* Moves in and out into allocations of ctx (collective): its reductions read them in place. */
static int job_share(job_t *j, dtr_context_t *ctx) {
    void *in = NULL, *out = NULL;
    if (dtr_context_alloc(ctx, (int64_t)j->in_bytes + 1, &in) != DTR_OK ||
        dtr_context_alloc(ctx, (int64_t)j->out_bytes + 1, &out) != DTR_OK)
        return -1;
    memcpy(in, j->in, j->in_bytes);
    free(j->in);
    free(j->out);
    j->in = in;
    j->out = out;
    j->shared = ctx;
    return 0;
}

static void job_free(job_t *j) {
    if (j->shared != NULL) {
        dtr_context_free(j->shared, j->in);
        dtr_context_free(j->shared, j->out);
    } else {
        free(j->in);
        free(j->out);
    }
    free(j->copy);
    dtr_mesh_destroy(j->mesh);
}

static int intact(const job_t *j) { return memcmp(j->in, j->copy, j->in_bytes) == 0; }

static int verified(const job_t *j) {
    dtr_pattern_report_t rep;
    return dtr_pattern_check(&j->src, &j->dst, rank, j->out, j->out_bytes, &rep) == DTR_OK &&
           rep.mismatches == 0;
}

static int has(const char *text) { return strstr(dtr_last_error(), text) != NULL; }

#endif
