/*
 * The executor's error paths under MPI, on 4 ranks: bad arguments on one rank, specs that
 * differ between ranks, a collective that fails (a wrapper around the MPI backend that fails
 * the k-th operation, or its completion), a busy context, a released request, a bystander.
 * Deadlines: for every step kind, a rank whose backend fails to issue the operation (the
 * others time out naming the step), a rank late by less and by more than the deadline, a
 * rank that never calls, the group collectives; then the aborted context refuses calls.
 * Every check: the call returns the named error on the ranks that can know, nothing hangs
 * (every rank returns), and the input buffers compare equal to their copies.
 * Usage: mpirun -n 4 mpi_exec_errors_test. Ends with "N passed, N failed" on rank 0.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/common.h"
#include "dtr.h"
#include "tests/support/exec_job.h"
#include "tests/support/mpi_check.h"
#include "tests/support/mpi_paths.h"
#include "backends/mpi/dtr_mpi.h"
#include "pattern/pattern.h"
#include "tests/support/fake_device.h"
#include "tests/support/faulty_backend.h"

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
    /* dtr_mpi_groups: bad arguments named, *count untouched */
    int count = -7;
    dtr_mpi_group_info_t info;
    check(dtr_mpi_groups(&info, -1, &count) == DTR_ERR_INVALID_ARGUMENT &&
              has("cap: -1, negative") && count == -7,
          "dtr_mpi_groups: negative cap");
    check(dtr_mpi_groups(NULL, 2, &count) == DTR_ERR_INVALID_ARGUMENT &&
              has("out: NULL with cap 2") && count == -7,
          "dtr_mpi_groups: NULL out with a cap");
    check(dtr_mpi_groups(&info, 1, NULL) == DTR_ERR_INVALID_ARGUMENT, "dtr_mpi_groups: NULL count");
    check(dtr_mpi_groups(NULL, 0, &count) == DTR_OK && count >= 1,
          "dtr_mpi_groups: counting only, the context's groups are live");
    /* and then a good call on the same context works */
    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
    check(st == DTR_OK && verified(&j) && intact(&j), "a good call after rejected ones");
    /* a plan marked as the seed's own blocks with a step the seed has not: refused
     * locally, before any communication */
    job_t a2a;
    check(job_init(&a2a, "2x2", "8x8", "S(0),R", "S(1),R", DTR_F32, DTR_STRATEGY_OPTIMAL) == 0 &&
              a2a.plan.nsteps == 1 && a2a.plan.steps[0].kind == DTR_STEP_ALL_TO_ALL,
          "setup: one all_to_all");
    a2a.plan.seed_blocks = true;
    st = dtr_redistribute(ctx, &a2a.plan, a2a.in, a2a.in_bytes, a2a.out, a2a.out_bytes);
    check(st == DTR_ERR_INVALID_ARGUMENT &&
              strcmp(dtr_last_error(),
                     "dtr_redistribute: plan->steps[0]: kind all_to_all in a plan with "
                     "seed_blocks, which only the seed algorithm's step kinds can have") == 0,
          "seed_blocks with a step the seed has not");
    check(intact(&a2a), "seed_blocks refused: inputs intact");
    job_free(&a2a);
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
    /* another shard order on rank 1 alone (its plan's source as S(0)[1],S(0)[0], the same
     * steps and block sizes, other blocks) */
    check(job_init(&j, "2x2", "8x8", "S(0),S(0)", "R,R", DTR_F32, DTR_STRATEGY_OPTIMAL) == 0,
          "setup");
    if (rank == 1) {
        j.plan.src.placements[0].order = 1;
        j.plan.src.placements[1].order = 0;
    }
    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
    check(st == DTR_ERR_MISMATCH && has("different plans"),
          "another shard order on rank 1: MISMATCH everywhere");
    job_free(&j);
    /* a plan made again where the last one was (the call sizes the blocks anew) */
    for (int k = 0; k < 2; k++) {
        check(job_init(&j, "4", k == 0 ? "8x8" : "16x8", "S(0)", "R", DTR_F32,
                       DTR_STRATEGY_OPTIMAL) == 0,
              "setup");
        st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
        check(st == DTR_OK && verified(&j), "a plan made again at the same address: verified");
        st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes / 2, j.out, j.out_bytes);
        char want[96];
        snprintf(want, sizeof want, "in_bytes: %d, but this rank's source block is %d bytes",
                 k == 0 ? 32 : 64, k == 0 ? 64 : 128);
        check(st == DTR_ERR_INVALID_ARGUMENT && has(want),
              "the same plan, half the input: INVALID_ARGUMENT naming this plan's block");
        job_free(&j);
    }
    /* rank 1's context gathers in other slices: the gather would take another number of
     * operations there, so the ranks must refuse it, not hang */
    check(job_init(&j, "4", "8x8", "S(1)", "R", DTR_F32, DTR_STRATEGY_OPTIMAL) == 0, "setup");
    int64_t slice = dtr_context_slice_bytes(ctx);
    check(dtr_context_set_slice_bytes(ctx, rank == 1 ? 16 : slice) == DTR_OK, "set slices");
    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
    check(st == DTR_ERR_MISMATCH && has("slice sizes (DTR_SLICE_BYTES)"),
          "another slice size on rank 1: MISMATCH everywhere");
    check(intact(&j), "mismatched slices: inputs intact");
    check(dtr_context_set_slice_bytes(ctx, -1) == DTR_ERR_INVALID_ARGUMENT &&
              has("bytes: -1, must be >= 0"),
          "a negative slice size: INVALID_ARGUMENT naming bytes");
    check(dtr_context_set_slice_bytes(ctx, slice) == DTR_OK && dtr_context_slice_bytes(ctx) == slice,
          "slice size restored");
    st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
    check(st == DTR_OK && verified(&j) && intact(&j), "equal slice sizes again: verified");
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

/*
 * The MPI backend starts a call's first operation beside the agreement and cancels it when
 * the agreement fails (request.c): for every kind that communicates, and an all-reduce
 * small enough for the one-exchange form, a mismatch and a rejected argument must leave the
 * groups' shared-memory counters as they were, so that the good calls after them (twice,
 * blocking and not) verify.
 */
/* shared: the buffers in allocations of ctx, which the reductions read in place */
static void cancelled_first_operations(dtr_context_t *ctx, bool shared) {
    static const char *const tiny[] = {"4", "2x2", "P", "R", "all_reduce"};
    for (size_t k = 0; k <= sizeof kinds / sizeof kinds[0]; k++) {
        bool last = k == sizeof kinds / sizeof kinds[0];
        const char *mesh = last ? tiny[0] : kinds[k].mesh, *shape = last ? tiny[1] : kinds[k].shape;
        const char *from = last ? tiny[2] : kinds[k].from, *to = last ? tiny[3] : kinds[k].to;
        char what[160];
        job_t bad, j;
        check(job_init(&bad, mesh, rank == 3 ? "8x7" : shape, from, to, DTR_F32,
                       DTR_STRATEGY_OPTIMAL) == 0 &&
                  job_init(&j, mesh, shape, from, to, DTR_F32, DTR_STRATEGY_OPTIMAL) == 0 &&
                  (!shared || (job_share(&bad, ctx) == 0 && job_share(&j, ctx) == 0)),
              "setup");
        /* other values than the good calls': a chunk left published would show in them */
        memset(bad.in, 0x3C, bad.in_bytes);
        memcpy(bad.copy, bad.in, bad.in_bytes);
        dtr_status_t st = dtr_redistribute(ctx, &bad.plan, bad.in, bad.in_bytes, bad.out,
                                           bad.out_bytes);
        snprintf(what, sizeof what, "%s -> %s%s: another shape on rank 3: MISMATCH everywhere",
                 from, to, shared ? " (shared buffers)" : "");
        check(st == DTR_ERR_MISMATCH && has("different plans") && intact(&bad), what);
        size_t in_bytes = rank == 1 ? j.in_bytes - 4 : j.in_bytes;
        st = dtr_redistribute(ctx, &j.plan, j.in, in_bytes, j.out, j.out_bytes);
        snprintf(what, sizeof what, "%s -> %s%s: wrong in_bytes on rank 1: REMOTE elsewhere", from,
                 to, shared ? " (shared buffers)" : "");
        check(rank == 1 ? st == DTR_ERR_INVALID_ARGUMENT : st == DTR_ERR_REMOTE && has("rank 1"),
              what);
        for (int round = 0; round < 2; round++) {
            memset(j.out, 0, j.out_bytes);
            if (round == 0) {
                st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
            } else {
                dtr_request_t *req = NULL;
                bool done = false;
                st = dtr_redistribute_start(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes,
                                            &req);
                while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
            }
            snprintf(what, sizeof what,
                     "%s -> %s%s: good call %d after the cancelled ones: verified", from, to,
                     shared ? " (shared buffers)" : "", round + 1);
            check(st == DTR_OK && verified(&j) && intact(&j), what);
        }
        job_free(&bad);
        job_free(&j);
    }
}

static void faults(void) {
    void *state = NULL;
    dtr_context_t *ctx = NULL;
    check(dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state) == DTR_OK &&
              dtr_context_create(faulty_ops(dtr_backend_mpi_ops()), state, &ctx) == DTR_OK,
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
                faulty_reset();
                faulty.fail_issue = mode == 0 ? at : 0;
                faulty.fail_complete = mode == 0 ? 0 : at;
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
        /* through the wrapper too, the step starts beside the agreement: a mismatch (rank 3
         * plans another shape) cancels the started step on the ranks that planned this one */
        job_t bad;
        check(job_init(&bad, kinds[k].mesh, rank == 3 ? "8x7" : kinds[k].shape, kinds[k].from,
                       kinds[k].to, DTR_F32, DTR_STRATEGY_OPTIMAL) == 0,
              "setup: the mismatched job");
        faulty_reset();
        dtr_status_t bst = dtr_redistribute(ctx, &bad.plan, bad.in, bad.in_bytes, bad.out,
                                            bad.out_bytes);
        snprintf(what, sizeof what, "%s: a mismatch through the wrapper: MISMATCH, step cancelled",
                 kinds[k].kind);
        check(bst == DTR_ERR_MISMATCH && (rank == 3 || faulty.cancelled == 1), what);
        job_free(&bad);
        /* the context still works after the faults */
        faulty_reset();
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

/* ---- memory spaces ------------------------------------------------------------------- */

/* The fake device with a divide that fails (on every rank) after `divide_ok` good ones. */
static dtr_memory_ops_t failing_mem;
static int divide_calls, divide_ok = 1 << 30;

static dtr_status_t failing_divide(void *state, dtr_dtype_t dtype, const void *src, void *dst,
                                   int64_t count, int64_t n) {
    if (divide_calls++ >= divide_ok)
        return dtr__error(DTR_ERR_INTERNAL, "failing_divide", "injected kernel failure");
    return fake_device_ops()->divide(state, dtype, src, dst, count, n);
}

/* Runs j on the fake device: copies in, runs, copies back into j->out (and j->in, which the
 * check then compares with j->copy). */
static dtr_status_t run_on_device(dtr_context_t *ctx, job_t *j) {
    const dtr_memory_ops_t *m = fake_device_ops();
    void *din = NULL, *dout = NULL;
    m->alloc(NULL, (int64_t)j->in_bytes + 1, &din);
    m->alloc(NULL, (int64_t)j->out_bytes + 1, &dout);
    m->copy(NULL, din, j->in, (int64_t)j->in_bytes, DTR_COPY_FROM_HOST);
    dtr_status_t st = dtr_redistribute(ctx, &j->plan, din, j->in_bytes, dout, j->out_bytes);
    m->copy(NULL, j->in, din, (int64_t)j->in_bytes, DTR_COPY_TO_HOST);
    m->copy(NULL, j->out, dout, (int64_t)j->out_bytes, DTR_COPY_TO_HOST);
    m->free(NULL, din);
    m->free(NULL, dout);
    return st;
}

/* The group collectives on device buffers (ctx on the fake device, j's 2x2 mesh): AVG over
 * the mesh's row through the space, then the DDP hook on the same buffer. */
static void device_collectives(dtr_context_t *ctx, const job_t *j) {
    const dtr_memory_ops_t *m = fake_device_ops();
    float h[3] = {(float)rank, 2.0f * rank, 8.0f}, r[3] = {0, 0, 0};
    void *d = NULL;
    m->alloc(NULL, sizeof h, &d);
    m->copy(NULL, d, h, sizeof h, DTR_COPY_FROM_HOST);
    int64_t idx = -1;
    dtr_mesh_group_index(j->mesh, 0x2, rank, &idx);
    dtr_status_t st0 = dtr_all_reduce(ctx, j->mesh, 0x2, d, d, 3, DTR_F32, DTR_REDUCE_AVG);
    m->copy(NULL, r, d, sizeof r, DTR_COPY_TO_HOST);
    /* the row of rank r on a 2x2 mesh: ranks r - idx and r - idx + 1 */
    float mean = (float)(2 * (rank - idx) + 1) / 2;
    check(st0 == DTR_OK && r[0] == mean && r[1] == 2 * mean && r[2] == 8.0f,
          "dtr_all_reduce(AVG) in place on fake-device buffers: the row's mean");
    /* the DDP hook on the same device buffer: its divide and all-reduce through the
     * space (the gradient reduction's device path; tests/grad/grad_mpi_test.c has the rest) */
    fake_device_counts_t before = fake_device_counts();
    m->copy(NULL, d, h, sizeof h, DTR_COPY_FROM_HOST);
    st0 = dtr_hook_all_reduce(NULL, ctx, j->mesh, 0x2, d, 3, DTR_F32);
    m->copy(NULL, r, d, sizeof r, DTR_COPY_TO_HOST);
    check(st0 == DTR_OK && r[0] == mean && r[1] == 2 * mean && r[2] == 8.0f &&
              fake_device_counts().divide > before.divide,
          "a gradient hook on a device context: the row's mean, divided by the space");
    m->free(NULL, d);
}

static void memory_spaces(void) {
    dtr_context_t *ctx = NULL;
    check(dtr_context_create_mpi(MPI_COMM_WORLD, &ctx) == DTR_OK, "context");
    check(strcmp(dtr_context_memory(ctx), "host") == 0, "a new context is on host memory");
    check(dtr_context_set_memory(NULL, fake_device_ops(), fake_device_state()) ==
                  DTR_ERR_INVALID_ARGUMENT && has("ctx"),
          "set_memory(NULL ctx): INVALID_ARGUMENT naming ctx");
    check(dtr_context_set_memory(ctx, NULL, NULL) == DTR_ERR_INVALID_ARGUMENT && has("ops"),
          "set_memory(NULL ops): INVALID_ARGUMENT naming ops");
    dtr_memory_ops_t holed = *fake_device_ops();
    holed.copy_box = NULL;
    check(dtr_context_set_memory(ctx, &holed, fake_device_state()) == DTR_ERR_INVALID_ARGUMENT &&
              has("copy_box"),
          "a table without copy_box: INVALID_ARGUMENT listing the required slots");
    check(dtr_context_set_memory(ctx, fake_device_ops(), fake_device_state()) == DTR_OK &&
              strcmp(dtr_context_memory(ctx), "fake-device") == 0,
          "set_memory on a fresh context");
    check(dtr_context_set_memory(ctx, fake_device_ops(), fake_device_state()) ==
                  DTR_ERR_INVALID_ARGUMENT && has("already has"),
          "a second set_memory: INVALID_ARGUMENT");
    job_t j;
    check(job_init(&j, "2x2", "9x7", "S(0),P(avg)", "R,S(1)", DTR_F32, DTR_STRATEGY_OPTIMAL) == 0,
          "setup");
    check(run_on_device(ctx, &j) == DTR_OK && verified(&j) && intact(&j),
          "a plan on the fake device (MPI staged): verified, input intact");
    check(dtr_context_sync(ctx) == DTR_OK, "sync");
    device_collectives(ctx, &j);
    /* host buffers on a device context: the space refuses them (the executor passes them on) */
    dtr_status_t st = dtr_redistribute(ctx, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
    check(st != DTR_OK && intact(&j), "host buffers on a fake-device context: an error, input intact");
    dtr_context_destroy(ctx);

    dtr_context_t *used = NULL;
    check(dtr_context_create_mpi(MPI_COMM_WORLD, &used) == DTR_OK, "context");
    check(dtr_redistribute(used, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes) == DTR_OK,
          "a host run");
    check(dtr_context_set_memory(used, fake_device_ops(), fake_device_state()) ==
                  DTR_ERR_INVALID_ARGUMENT && has("already used"),
          "set_memory after the first call: INVALID_ARGUMENT");
    dtr_context_destroy(used);

    /* a device-only backend on host memory is refused before anything moves */
    static dtr_backend_ops_t device_only;
    device_only = *dtr_backend_mpi_ops();
    device_only.name = "device-only";
    device_only.caps |= DTR_BACKEND_CAP_DEVICE;
    void *state = NULL;
    dtr_context_t *dev = NULL;
    check(dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state) == DTR_OK &&
              dtr_context_create(&device_only, state, &dev) == DTR_OK,
          "a context over a device-only backend");
    st = dtr_redistribute(dev, &j.plan, j.in, j.in_bytes, j.out, j.out_bytes);
    check(st == DTR_ERR_INVALID_ARGUMENT && has("works on device memory") && intact(&j),
          "a device-only backend on host memory: INVALID_ARGUMENT, input intact");
    dtr_context_destroy(dev);

    /* a local operation of the space that fails: every rank returns its error */
    dtr_context_t *fail = NULL;
    failing_mem = *fake_device_ops();
    failing_mem.name = "failing";
    failing_mem.divide = failing_divide;
    divide_calls = 0;
    divide_ok = 0;
    check(dtr_context_create_mpi(MPI_COMM_WORLD, &fail) == DTR_OK &&
              dtr_context_set_memory(fail, &failing_mem, fake_device_state()) == DTR_OK,
          "a context on a space whose divide fails");
    job_t a;
    check(job_init(&a, "4", "8x6", "P(avg)", "R", DTR_F32, DTR_STRATEGY_OPTIMAL) == 0, "setup");
    st = run_on_device(fail, &a);
    check(st == DTR_ERR_INTERNAL && has("failing memory: divide failed") &&
              has("injected kernel failure") && intact(&a),
          "a failing divide kernel: its error on every rank, input intact");
    divide_ok = 1 << 30;
    check(run_on_device(fail, &a) == DTR_OK && verified(&a), "the context works again");
    job_free(&a);
    dtr_context_destroy(fail);

    /* a backend fault under staging: the error, and the input intact */
    state = NULL;
    dtr_context_t *staged = NULL;
    check(dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state) == DTR_OK &&
              dtr_context_create(faulty_ops(dtr_backend_mpi_ops()), state, &staged) == DTR_OK &&
              dtr_context_set_memory(staged, fake_device_ops(), fake_device_state()) == DTR_OK,
          "a staged faulty context");
    faulty_reset();
    faulty.fail_complete = 2;
    st = run_on_device(staged, &j);
    check(st == DTR_ERR_BACKEND && has("step 1 (") && intact(&j),
          "a failing collective under staging: BACKEND naming the step, input intact");
    faulty_reset();
    check(run_on_device(staged, &j) == DTR_OK && verified(&j), "and a good call after it");
    dtr_context_destroy(staged);
    job_free(&j);
    fake_device_counts_t fc = fake_device_counts();
    check(fc.refused >= 1, "the fake device counted the host addresses it refused");
}

/* ---- deadlines: a rank that fails, stops or is late ----------------------------------- */

#define T_S 0.4 /* the deadline these checks run under; a timed-out call returns by T_LATEST, */
#define T_LATEST (T_S + 60) /* which shows it did not wait (ASan on a loaded CI: seconds) */

/* Every step kind, the local ones included (their only operation is the agreement). */
static const struct {
    const char *mesh, *shape, *from, *to, *kind, *where;
    int op; /* the operation that carries the step: 1 is the argument agreement */
} steps[] = {
    {"4", "8x6", "S(0)", "R", "all_gather", "step 1 (all_gather, mesh dim 0)", 2},
    {"4", "8x6", "P", "S(1)", "reduce_scatter", "step 1 (reduce_scatter, mesh dim 0)", 2},
    {"4", "8x6", "P(max)", "R", "all_reduce", "step 1 (all_reduce, mesh dim 0)", 2},
    {"4", "8x8", "S(0)", "S(1)", "all_to_all", "step 1 (all_to_all, mesh dim 0)", 2},
    {"2x2", "8x6", "S(0),S(0)", "R,S(0)", "exchange", "step 1 (exchange, over the whole mesh)", 2},
    {"2x2", "8x6", "S(1),R", "S(1),S(0)", "local_chunk", "argument agreement", 1},
    {"4", "8x6", "R", "P", "local_scale", "argument agreement", 1},
    {"4", "8x6", "R", "P(max)", "local_relabel", "argument agreement", 1},
    {"4", "8x6", "S(1)", "P", "local_zero_fill", "argument agreement", 1},
};

/* Whether the mesh's groups agree through shared memory: all ranks on one node (not spread
 * over several by tools/mpirun_nodes.sh) and the path not turned off. */
static bool shm_agree;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* How many ranks timed out. */
static int timeouts(bool mine) {
    int one = mine, all = 0;
    MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

/* A context over the fault-injecting wrapper, with the deadline set. */
static dtr_context_t *fresh_context(double timeout) {
    void *state = NULL;
    dtr_context_t *ctx = NULL;
    if (dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state) != DTR_OK ||
        dtr_context_create(faulty_ops(dtr_backend_mpi_ops()), state, &ctx) != DTR_OK ||
        dtr_context_set_timeout(ctx, timeout) != DTR_OK)
        return NULL;
    return ctx;
}

static dtr_status_t run(dtr_context_t *ctx, job_t *j, bool nonblocking, double *secs) {
    double t0 = now_s();
    dtr_status_t st;
    if (nonblocking) {
        dtr_request_t *req = NULL;
        bool done = false;
        st = dtr_redistribute_start(ctx, &j->plan, j->in, j->in_bytes, j->out, j->out_bytes, &req);
        while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
    } else {
        st = dtr_redistribute(ctx, &j->plan, j->in, j->in_bytes, j->out, j->out_bytes);
    }
    *secs = now_s() - t0;
    return st;
}

/* The context after its call timed out: aborted, and says so on the next call. */
static int refuses(dtr_context_t *ctx, job_t *j) {
    return dtr_context_aborted(ctx) &&
           dtr_redistribute(ctx, &j->plan, j->in, j->in_bytes, j->out, j->out_bytes) ==
               DTR_ERR_ABORTED &&
           has("aborted by an earlier timeout");
}

/* A rank that never makes the call (the argument agreement times out), and a rank whose
 * group collective fails to issue after the agreement. */
static void deadlines_absent(void) {
    char what[200];
    /* Rank 3 never makes the call (its communicators exist from a first good call). */
    job_t j;
    check(job_init(&j, "4", "8x6", "S(0)", "R", DTR_F32, DTR_STRATEGY_OPTIMAL) == 0, "setup");
    dtr_context_t *ctx = fresh_context(T_S);
    double secs;
    check(run(ctx, &j, false, &secs) == DTR_OK && verified(&j), "a first good call");
    dtr_status_t st = rank == 3 ? DTR_OK : run(ctx, &j, false, &secs);
    check(rank == 3 || (st == DTR_ERR_TIMEOUT && has("argument agreement over the mesh") &&
                        secs < T_LATEST && intact(&j) && refuses(ctx, &j)),
          "rank 3 never calls: the others time out in the argument agreement, then refuse");
    dtr_context_destroy(ctx);

    /* The group collectives: rank 2 fails to issue the reduction after the agreement. */
    for (int scatter = 0; scatter < 2; scatter++) {
        const char *func = scatter ? "dtr_reduce_scatter" : "dtr_all_reduce";
        ctx = fresh_context(T_S);
        float send[8] = {1, 2, 3, 4, 5, 6, 7, 8}, keep[8], recv[8];
        memcpy(keep, send, sizeof send);
        faulty_reset();
        if (rank == 2) faulty.fail_issue = 2;
        st = scatter ? dtr_reduce_scatter(ctx, j.mesh, 1, send, recv, 2, DTR_F32, DTR_REDUCE_SUM)
                     : dtr_all_reduce(ctx, j.mesh, 1, send, recv, 8, DTR_F32, DTR_REDUCE_SUM);
        snprintf(what, sizeof what, "%s: rank 2 fails to issue: BACKEND there, TIMEOUT elsewhere",
                 func);
        check(rank == 2 ? st == DTR_ERR_BACKEND
                        : st == DTR_ERR_TIMEOUT && has(func) && has("no completion within"),
              what);
        snprintf(what, sizeof what, "%s: send intact; a timed-out context refuses the next call",
                 func);
        check(memcmp(send, keep, sizeof send) == 0 &&
                  (rank == 2 || (dtr_all_reduce(ctx, j.mesh, 1, send, recv, 8, DTR_F32,
                                                DTR_REDUCE_SUM) == DTR_ERR_ABORTED)),
              what);
        faulty_reset();
        dtr_context_destroy(ctx);
    }
    job_free(&j);
}

static void deadlines(void) {
    char what[200];
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        job_t j;
        check(job_init(&j, steps[k].mesh, steps[k].shape, steps[k].from, steps[k].to, DTR_F32,
                       DTR_STRATEGY_OPTIMAL) == 0 &&
                  j.plan.nsteps == 1 &&
                  strcmp(dtr_step_kind_info(j.plan.steps[0].kind)->name, steps[k].kind) == 0,
              "setup: a one-step plan of the kind");
        /* Rank 2's backend fails to issue the operation: rank 2 knows at once, the others
         * wait for it and give up at the deadline. Blocking, then the non-blocking form. */
        for (int nb = 0; nb < 2; nb++) {
            dtr_context_t *ctx = fresh_context(T_S);
            faulty_reset();
            if (rank == 2) faulty.fail_issue = steps[k].op;
            double secs;
            dtr_status_t st = run(ctx, &j, nb, &secs);
            /* A rank that needs nothing from rank 2 (the exchange's rank 0) completes. */
            bool timed_out = st == DTR_ERR_TIMEOUT;
            snprintf(what, sizeof what,
                     "%s (%s): rank 2 fails to issue it: BACKEND there, TIMEOUT naming '%s' "
                     "within the deadline elsewhere (got %s after %.2f s)",
                     steps[k].kind, nb ? "test" : "wait", steps[k].where, dtr_status_name(st), secs);
            check(rank == 2 ? st == DTR_ERR_BACKEND && has(steps[k].where) &&
                                  !dtr_context_aborted(ctx)
                            : (timed_out && has(steps[k].where) &&
                               has("no completion within 0.4 s") && secs >= T_S &&
                               secs < T_LATEST) ||
                                  (st == DTR_OK && verified(&j)),
                  what);
            snprintf(what, sizeof what, "%s: rank 2's peers that need its data time out",
                     steps[k].kind);
            check(timeouts(timed_out) >= (steps[k].op == 1 || k < 4 ? 3 : 2), what);
            snprintf(what, sizeof what, "%s: after the timeout the context refuses calls (ABORTED)",
                     steps[k].kind);
            check(!timed_out || refuses(ctx, &j), what);
            snprintf(what, sizeof what, "%s: inputs intact after the timeout", steps[k].kind);
            check(intact(&j), what);
            faulty_reset();
            dtr_context_destroy(ctx);
        }
        if (steps[k].op == 2) {
            /* Rank 1 is late by less than the deadline: nothing fails. */
            dtr_context_t *ctx = fresh_context(5.0);
            faulty_reset();
            if (rank == 1) {
                faulty.delay_at = 2;
                faulty.delay_s = 0.2;
            }
            double secs;
            dtr_status_t st = run(ctx, &j, false, &secs);
            snprintf(what, sizeof what, "%s: rank 1 late by 0.2 s of a 5 s deadline: verified",
                     steps[k].kind);
            check(st == DTR_OK && verified(&j) && intact(&j), what);
            faulty_reset();
            dtr_context_destroy(ctx);
            /* Rank 1 is late by more: the others time out; rank 1 completes against their
             * still-posted operations or times out itself. */
            ctx = fresh_context(T_S);
            if (rank == 1) {
                faulty.delay_at = 2;
                faulty.delay_s = 1.0;
            }
            st = run(ctx, &j, false, &secs);
            snprintf(what, sizeof what,
                     "%s: rank 1 late by 1 s of a 0.4 s deadline: TIMEOUT naming the step (or "
                     "a verified result), inputs intact",
                     steps[k].kind);
            /* Through shared memory the argument agreement completes without rank 1; over
             * MPI (a mesh across nodes) it waits for rank 1's next call, and the others may
             * time out in it instead of in the step. */
            bool named = has(steps[k].where) || (!shm_agree && has("argument agreement"));
            check(((st == DTR_ERR_TIMEOUT && (rank == 1 || (named && secs < T_LATEST))) ||
                   (st == DTR_OK && verified(&j))) &&
                      intact(&j),
                  what);
            snprintf(what, sizeof what, "%s: rank 1 late: its peers that need its data time out",
                     steps[k].kind);
            check(timeouts(rank != 1 && st == DTR_ERR_TIMEOUT) >= (k < 4 ? 3 : 2), what);
            faulty_reset();
            dtr_context_destroy(ctx);
        }
        job_free(&j);
    }

    deadlines_absent();
}

/* The deadline's settings: DTR_TIMEOUT_S at creation, dtr_context_set_timeout after. */
static void timeout_settings(void) {
    dtr_context_t *ctx = NULL;
    unsetenv("DTR_TIMEOUT_S");
    check(dtr_context_create_mpi(MPI_COMM_WORLD, &ctx) == DTR_OK &&
              dtr_context_timeout(ctx) == 600.0,
          "no DTR_TIMEOUT_S: a 600 s deadline");
    check(dtr_context_set_timeout(ctx, -1) == DTR_ERR_INVALID_ARGUMENT && has("seconds: -1") &&
              dtr_context_set_timeout(ctx, 0.0 / 0.0) == DTR_ERR_INVALID_ARGUMENT &&
              dtr_context_set_timeout(ctx, 1.0 / 0.0) == DTR_ERR_INVALID_ARGUMENT &&
              dtr_context_set_timeout(NULL, 1) == DTR_ERR_INVALID_ARGUMENT &&
              dtr_context_timeout(ctx) == 600.0,
          "dtr_context_set_timeout refuses negative, NaN, infinite and a NULL context");
    check(dtr_context_set_timeout(ctx, 0) == DTR_OK && dtr_context_timeout(ctx) == 0,
          "timeout 0: no deadline");
    dtr_context_destroy(ctx);
    setenv("DTR_TIMEOUT_S", "2.5", 1);
    ctx = NULL;
    check(dtr_context_create_mpi(MPI_COMM_WORLD, &ctx) == DTR_OK &&
              dtr_context_timeout(ctx) == 2.5,
          "DTR_TIMEOUT_S=2.5");
    dtr_context_destroy(ctx);
    const char *bad[] = {"abc", "-1", "5s", "", "inf", "nan"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        setenv("DTR_TIMEOUT_S", bad[k], 1);
        ctx = NULL;
        dtr_status_t st = dtr_context_create_mpi(MPI_COMM_WORLD, &ctx);
        char what[96];
        snprintf(what, sizeof what, "DTR_TIMEOUT_S=\"%s\": %s", bad[k],
                 bad[k][0] ? "INVALID_ARGUMENT naming it, no context" : "the default");
        if (bad[k][0])
            check(st == DTR_ERR_INVALID_ARGUMENT && has("DTR_TIMEOUT_S") && ctx == NULL, what);
        else
            check(st == DTR_OK && dtr_context_timeout(ctx) == 600.0, what);
        dtr_context_destroy(ctx);
    }
    unsetenv("DTR_TIMEOUT_S");
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
    shm_agree = mpi_paths_one_node() && mpi_paths_env_on("DTR_MPI_SHM") &&
                mpi_paths_env_on("DTR_MPI_STRIDED");
    dtr_context_t *ctx = NULL;
    check(dtr_context_create_mpi(MPI_COMM_WORLD, &ctx) == DTR_OK, "context");
    bad_arguments(ctx);
    mismatched_specs(ctx);
    cancelled_first_operations(ctx, false);
    cancelled_first_operations(ctx, true);
    faults();
    requests(ctx);
    bystander(ctx);
    check(mpi_paths_check("executor error paths") == 0,
          "each group's path: shared memory inside a node, MPI across nodes");
    dtr_context_destroy(ctx);
    memory_spaces();
    timeout_settings();
    deadlines(); /* last: timed-out operations stay pending on their communicators */
    int rc = mpi_check_finish("mpi executor error paths");
    MPI_Finalize();
    return rc;
}
