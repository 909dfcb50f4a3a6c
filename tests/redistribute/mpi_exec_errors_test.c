/*
 * The executor's error paths under MPI, on 4 ranks: bad arguments on one rank, specs that
 * differ between ranks, a collective that fails (a wrapper around the MPI backend that fails
 * the k-th operation, or its completion), a busy context, a released request, a bystander.
 * Every check: the call returns the named error on the ranks that can know, nothing hangs
 * (every rank returns), and the input buffers compare equal to their copies.
 *
 * Usage: mpirun -n 4 mpi_exec_errors_test. Ends with "N passed, N failed" on rank 0.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "tests/mpi_check.h"
#include "redistribute/mpi/dtr_mpi.h"



/* ---- a fault-injecting wrapper around the MPI backend ------------------------------- */

static const dtr_backend_ops_t *inner;
static int fault_at;   /* fail the k-th collective operation issued (1-based); 0: never */
static int fault_wait; /* fail the k-th completion (after it really completed); 0: never */
static int ops_issued, ops_completed;

#define FAULT_CHECK()                                                                    \
    do {                                                                                 \
        if (++ops_issued == fault_at) return DTR_ERR_BACKEND;                            \
    } while (0)

static int w_rank(void *s) { return inner->rank(s); }
static dtr_status_t w_group_create(void *s, const int *r, int n, int tag, void **g) {
    return inner->group_create(s, r, n, tag, g);
}
static void w_group_destroy(void *s, void *g) { inner->group_destroy(s, g); }
static dtr_status_t w_all_gather(void *g, const void *s, int64_t b, void *r, dtr_backend_req_t *q) {
    FAULT_CHECK();
    return inner->all_gather(g, s, b, r, q);
}
static dtr_status_t w_all_gatherv(void *g, const void *s, int64_t b, void *r, const int64_t *c,
                                  const int64_t *d, dtr_backend_req_t *q) {
    FAULT_CHECK();
    return inner->all_gatherv(g, s, b, r, c, d, q);
}
static dtr_status_t w_reduce_scatter(void *g, const void *s, void *r, int64_t n, dtr_dtype_t t,
                                     dtr_reduce_op_t o, dtr_backend_req_t *q) {
    FAULT_CHECK();
    return inner->reduce_scatter(g, s, r, n, t, o, q);
}
static dtr_status_t w_reduce_scatterv(void *g, const void *s, void *r, const int64_t *c,
                                      dtr_dtype_t t, dtr_reduce_op_t o, dtr_backend_req_t *q) {
    FAULT_CHECK();
    return inner->reduce_scatterv(g, s, r, c, t, o, q);
}
static dtr_status_t w_all_reduce(void *g, const void *s, void *r, int64_t n, dtr_dtype_t t,
                                 dtr_reduce_op_t o, dtr_backend_req_t *q) {
    FAULT_CHECK();
    return inner->all_reduce(g, s, r, n, t, o, q);
}
static dtr_status_t w_all_to_all(void *g, const void *s, int64_t b, void *r, dtr_backend_req_t *q) {
    FAULT_CHECK();
    return inner->all_to_all(g, s, b, r, q);
}
static dtr_status_t w_all_to_allv(void *g, const void *s, const int64_t *sc, const int64_t *sd,
                                  void *r, const int64_t *rc, const int64_t *rd,
                                  dtr_backend_req_t *q) {
    FAULT_CHECK();
    return inner->all_to_allv(g, s, sc, sd, r, rc, rd, q);
}
static dtr_status_t w_test(void *g, dtr_backend_req_t *q, bool *done) {
    dtr_status_t st = inner->test(g, q, done);
    if (st == DTR_OK && *done && ++ops_completed == fault_wait) return DTR_ERR_BACKEND;
    return st;
}
static dtr_status_t w_wait(void *g, dtr_backend_req_t *q) {
    dtr_status_t st = inner->wait(g, q);
    if (st == DTR_OK && ++ops_completed == fault_wait) return DTR_ERR_BACKEND;
    return st;
}
static void w_destroy(void *s) { inner->destroy(s); }

static dtr_backend_ops_t faulty = {
    .name = "mpi-faulty",
    .rank = w_rank,
    .group_create = w_group_create,
    .group_destroy = w_group_destroy,
    .all_gather = w_all_gather,
    .all_gatherv = w_all_gatherv,
    .reduce_scatter = w_reduce_scatter,
    .reduce_scatterv = w_reduce_scatterv,
    .all_reduce = w_all_reduce,
    .all_to_all = w_all_to_all,
    .all_to_allv = w_all_to_allv,
    .test = w_test,
    .wait = w_wait,
    .destroy = w_destroy,
};

/* ---- helpers ---------------------------------------------------------------------- */

typedef struct {
    dtr_mesh_t *mesh;
    dtr_spec_t src, dst;
    dtr_plan_t plan;
    unsigned char *in, *copy, *out;
    size_t in_bytes, out_bytes;
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

static void job_free(job_t *j) {
    free(j->in);
    free(j->copy);
    free(j->out);
    dtr_mesh_destroy(j->mesh);
}

static int intact(const job_t *j) { return memcmp(j->in, j->copy, j->in_bytes) == 0; }

static int verified(const job_t *j) {
    dtr_pattern_report_t rep;
    return dtr_pattern_check(&j->src, &j->dst, rank, j->out, j->out_bytes, &rep) == DTR_OK &&
           rep.mismatches == 0;
}

static int has(const char *text) { return strstr(dtr_last_error(), text) != NULL; }

/* ---- the checks --------------------------------------------------------------------- */

static void bad_arguments(dtr_context_t *ctx) {
    job_t j;
    check(job_init(&j, "2x2", "8x8", "S(0),R", "R,S(1)", DTR_F32, DTR_STRATEGY_OPTIMAL) == 0,
          "setup");
    /* rank 1: an input size that is not its block's */
    size_t in_bytes = rank == 1 ? j.in_bytes - 4 : j.in_bytes;
    dtr_status_t st = dtr_redistribute(ctx, &j.plan, j.in, in_bytes, j.out, j.out_bytes);
    check(rank == 1 ? st == DTR_ERR_INVALID_ARGUMENT && has("in_bytes: 124, but this rank's source block is 128 bytes")
                    : st == DTR_ERR_REMOTE && has("rank 1 rejected its arguments"),
          "wrong in_bytes on rank 1: INVALID_ARGUMENT there, REMOTE elsewhere");
    check(intact(&j), "wrong in_bytes: inputs intact");
    /* rank 2: no output buffer */
    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, rank == 2 ? NULL : j.out, j.out_bytes);
    check(rank == 2 ? st == DTR_ERR_INVALID_ARGUMENT && has("out: must not be NULL")
                    : st == DTR_ERR_REMOTE && has("rank 2"),
          "NULL out on rank 2");
    /* rank 3: output too small */
    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, rank == 3 ? 8 : j.out_bytes);
    check(rank == 3 ? st == DTR_ERR_BUFFER_TOO_SMALL && has("out_bytes: 8") : st == DTR_ERR_REMOTE,
          "small out on rank 3");
    /* output overlapping the input on rank 0 */
    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, rank == 0 ? j.in + 4 : j.out,
                          j.out_bytes);
    check(rank == 0 ? st == DTR_ERR_INVALID_ARGUMENT && has("overlaps") : st == DTR_ERR_REMOTE,
          "out overlapping in on rank 0");
    check(intact(&j), "after four rejected calls: inputs intact");
    /* and then a good call on the same context works */
    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
    check(st == DTR_OK && verified(&j) && intact(&j), "a good call after rejected ones");
    /* no context, no plan: refused locally, before any communication */
    check(dtr_redistribute(NULL, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes) ==
                  DTR_ERR_INVALID_ARGUMENT && has("ctx: must not be NULL"),
          "NULL ctx");
    check(dtr_redistribute(ctx, NULL, j.in, j.in_bytes, j.out, j.out_bytes) ==
                  DTR_ERR_INVALID_ARGUMENT && has("plan: must not be NULL"),
          "NULL plan");
    job_free(&j);
}

static void mismatched_specs(dtr_context_t *ctx) {
    job_t j;
    /* rank 3 has another shape (its own buffer sizes are right for it) */
    check(job_init(&j, "2x2", rank == 3 ? "8x9" : "8x8", "S(0),S(1)", "R,S(0)", DTR_F32,
                   DTR_STRATEGY_OPTIMAL) == 0,
          "setup");
    dtr_status_t st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
    check(st == DTR_ERR_MISMATCH && has("different plans"), "another shape on rank 3: MISMATCH everywhere");
    check(intact(&j), "mismatched shape: inputs intact");
    job_free(&j);
    /* rank 0 asks for compat where the others ask for optimal */
    check(job_init(&j, "4", "8x8", "S(0)", "S(1)", DTR_F32,
                   rank == 0 ? DTR_STRATEGY_COMPAT : DTR_STRATEGY_OPTIMAL) == 0,
          "setup");
    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
    check(st == DTR_ERR_MISMATCH, "another strategy on rank 0: MISMATCH everywhere");
    check(intact(&j), "mismatched strategy: inputs intact");
    job_free(&j);
    /* another dtype on rank 2 */
    check(job_init(&j, "4", "8x8", "P", "R", rank == 2 ? DTR_F64 : DTR_F32,
                   DTR_STRATEGY_OPTIMAL) == 0,
          "setup");
    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
    check(st == DTR_ERR_MISMATCH, "another dtype on rank 2: MISMATCH everywhere");
    job_free(&j);
}

/* One plan per step kind that communicates. */
static const struct {
    const char *mesh, *shape, *from, *to, *kind;
} kinds[] = {
    {"4", "8x6", "S(0)", "R", "all_gather"},
    {"4", "8x6", "P", "S(1)", "reduce_scatter"},
    {"4", "8x6", "P(max)", "R", "all_reduce"},
    {"4", "8x6", "S(0)", "S(1)", "all_to_all"},
    {"2x2", "8x6", "S(0),S(0)", "R,S(0)", "exchange"},
};

static void faults(void) {
    void *state = NULL;
    inner = dtr_backend_mpi_ops();
    faulty.caps = inner->caps;
    dtr_context_t *ctx = NULL;
    check(dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state) == DTR_OK &&
              dtr_context_create(&faulty, state, &ctx) == DTR_OK,
          "faulty context");
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        job_t j;
        check(job_init(&j, kinds[k].mesh, kinds[k].shape, kinds[k].from, kinds[k].to, DTR_F32,
                       DTR_STRATEGY_OPTIMAL) == 0 &&
                  j.plan.nsteps == 1 &&
                  strcmp(dtr_step_kind_info(j.plan.steps[0].kind)->name, kinds[k].kind) == 0,
              "setup: a one-step plan of the kind");
        char what[160];
        /* operation 1 is the argument agreement, operation 2 the step's collective */
        for (int at = 1; at <= 2; at++) {
            for (int mode = 0; mode < 3; mode++) { /* fail issue, fail completion blocking/non */
                ops_issued = ops_completed = 0;
                fault_at = mode == 0 ? at : 0;
                fault_wait = mode == 0 ? 0 : at;
                dtr_status_t st;
                memset(j.out, 0, j.out_bytes);
                if (mode == 2) {
                    dtr_request_t *req = NULL;
                    bool done = false;
                    st = dtr_redistribute_start(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes,
                                                &req);
                    while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
                } else {
                    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
                }
                const char *where = at == 1 ? "argument agreement" : "step 1 (";
                snprintf(what, sizeof what, "%s: fault in operation %d (%s): BACKEND error naming %s",
                         kinds[k].kind, at, mode == 0 ? "issue" : mode == 1 ? "wait" : "test",
                         where);
                check(st == DTR_ERR_BACKEND && has(where) &&
                          (at == 1 || has(kinds[k].kind)),
                      what);
                snprintf(what, sizeof what, "%s: fault in operation %d: input intact", kinds[k].kind, at);
                check(intact(&j), what);
            }
        }
        /* the context still works after the faults */
        fault_at = fault_wait = 0;
        dtr_status_t st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
        snprintf(what, sizeof what, "%s: a good call after the faults", kinds[k].kind);
        check(st == DTR_OK && verified(&j) && intact(&j), what);
        job_free(&j);
    }
    dtr_context_destroy(ctx);
}

static void requests(dtr_context_t *ctx) {
    job_t j;
    check(job_init(&j, "4", "16", "S(0)", "R", DTR_I32, DTR_STRATEGY_OPTIMAL) == 0, "setup");
    dtr_request_t *req = NULL, *req2 = NULL;
    dtr_status_t st = dtr_redistribute_start(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes, &req);
    check(st == DTR_OK, "start");
    st = dtr_redistribute_start(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes, &req2);
    check(st == DTR_ERR_BUSY && req2 == NULL, "a second start on a busy context: BUSY");
    check(dtr_request_wait(req) == DTR_OK && verified(&j), "the first request completes");
    check(dtr_request_wait(req) == DTR_ERR_INVALID_ARGUMENT && has("not in flight"),
          "waiting on a released request");
    bool done = true;
    check(dtr_request_test(NULL, &done) == DTR_ERR_INVALID_ARGUMENT, "test(NULL)");
    job_free(&j);
}

static void bystander(dtr_context_t *ctx) {
    /* a mesh of ranks 0..2: rank 3 is outside and returns its input */
    job_t j;
    check(job_init(&j, "3", "7x2", "S(0)", "R", DTR_F32, DTR_STRATEGY_OPTIMAL) == 0, "setup");
    dtr_status_t st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out,
                                       rank == 3 ? j.in_bytes : j.out_bytes);
    check(st == DTR_OK && (rank == 3 ? memcmp(j.out, j.in, j.in_bytes) == 0 : verified(&j)),
          "a 3-rank mesh in a 4-rank job: members redistribute, the bystander keeps its input");
    job_free(&j);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 4) {
        if (rank == 0) fprintf(stderr, "mpi_exec_errors_test: run on 4 ranks\n");
        MPI_Finalize();
        return 2;
    }
    dtr_context_t *ctx = NULL;
    check(dtr_context_create_mpi(MPI_COMM_WORLD, &ctx) == DTR_OK, "context");
    bad_arguments(ctx);
    mismatched_specs(ctx);
    faults();
    requests(ctx);
    bystander(ctx);
    dtr_context_destroy(ctx);
    int rc = mpi_check_finish("mpi executor error paths");
    MPI_Finalize();
    return rc;
}
