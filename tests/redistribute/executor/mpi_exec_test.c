/*
 * The executor on real MPI, random cases: every rank draws the same case from the seed
 * (a mesh of 1 to 3 dims over up to the world's ranks, sometimes with an explicit shuffled
 * rank list and bystanders; a shape of 1 to 3 dims with uneven and zero lengths; random
 * placements of every kind; every dtype), plans it with both strategies, runs the plan and
 * checks every element on every rank, that the input is intact and that nothing is written
 * past the output. Even cases fill the source with the exact test pattern, odd ones with
 * random values (seed: the case's, printed as "fill random S"), where the reductions' order
 * and precision show and the check compares with pattern.h's tolerance. Cases alternate between the MPI backend as is
 * and with its v-collectives removed (the executor pads), and between the blocking and
 * the non-blocking calls. One case in three on a mesh of 2 or more dims is a reduction
 * blocked by a later shard of its dim (P -> S(d) on mesh dim i, S(d) on a later one, the rest
 * unchanged), planned with latency 0 so that the balanced reduce_exchange step wins where
 * it moves fewer bytes. Each case's contexts gather non-leading dims in slices of a drawn
 * size (0: none, 1 byte: one row of each piece at a time, 5, 48 or 4096 bytes; outputs
 * under 8 slices are gathered whole).
 *
 * With --memory fake, every buffer (the caller's and the context's scratch) lives in the
 * test's fake device space (tests/support/fake_device.h): the executor must do all its
 * local work through the space's table, and the MPI backend runs staged through host memory,
 * as in the shared-GPU mode. --memory cuda does the same on the GPU (the CUDA memory space;
 * ranks share GPU 0), and skips with the reason when no GPU is visible.
 *
 * --backend nccl (with --memory cuda) runs on the NCCL backend instead, one GPU per rank.
 *
 * Usage: mpirun -n N mpi_exec_test [--cases N] [--seed S] [--memory host|fake|cuda]
 *        [--backend mpi|nccl]
 * Prints one line per failing case (with the seed and case number to rerun it) and a
 * summary; exits non-zero on any failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "redistribute/mpi/dtr_mpi.h"
#include "tests/support/mpi_paths.h"
#include "tools/pattern/pattern.h"
#include "tests/support/fake_device.h"
#include "tests/support/plan_util.h"
#include "tests/support/rand_cases.h"
#if defined(DTR_HAVE_CUDA)
#include "redistribute/cuda/dtr_cuda.h"
#endif
#if defined(DTR_HAVE_NCCL)
#include "redistribute/nccl/dtr_nccl.h"
#endif

#define GUARD 64

typedef struct {
    int mdims;
    int64_t msize[3];
    int *ranks; /* NULL: row-major */
    int64_t nranks;
    int ndim;
    int64_t shape[3];
    dtr_placement_t src[3], dst[3];
    dtr_dtype_t dtype;
    bool blocked; /* a reduction blocked by a later shard of its dim */
    char text[512];
} test_case_t;


/* Every fifth case's target is in another dtype of the same family (a cast plan): floats
 * among f32 f64 f16 bf16, complex between c64 and c128; others keep theirs. */
static dtr_dtype_t cast_to(dtr_dtype_t t, int index) {
    static const dtr_dtype_t floats[] = {DTR_F32, DTR_F64, DTR_F16, DTR_BF16};
    if (index % 5 != 2) return t;
    if (t == DTR_C64 || t == DTR_C128) return t == DTR_C64 ? DTR_C128 : DTR_C64;
    for (int k = 0; k < 4; k++)
        if (floats[k] == t) return floats[(k + 1 + (index / 5) % 3) % 4];
    return t;
}

static void draw(test_case_t *c, int world) {
    memset(c, 0, sizeof *c);
    c->mdims = 1 + pick(3);
    int64_t total = 1;
    for (int i = 0; i < c->mdims; i++) {
        int64_t s = 1 + pick(4);
        while (total * s > world) s--;
        c->msize[i] = s;
        total *= s;
    }
    c->nranks = total;
    if (pick(3) == 0) { /* explicit ranks: a shuffled subset of the world */
        int *all = malloc((size_t)world * sizeof *all);
        for (int r = 0; r < world; r++) all[r] = r;
        for (int r = world - 1; r > 0; r--) {
            int j = pick(r + 1), t = all[r];
            all[r] = all[j];
            all[j] = t;
        }
        c->ranks = all;
    }
    c->ndim = 1 + pick(3);
    for (int d = 0; d < c->ndim; d++) c->shape[d] = pick(10) == 0 ? 0 : 1 + pick(9);
    if (pick(4) == 0) c->shape[pick(c->ndim)] *= 4;
    dtr_reduce_op_t op = (dtr_reduce_op_t)pick(DTR_REDUCE_OP_LAST);
    for (int i = 0; i < c->mdims; i++) {
        c->src[i] = random_placement(c->ndim, op);
        c->dst[i] = random_placement(c->ndim, op);
    }
    if (c->mdims >= 2 && pick(3) == 0) {
        int i = pick(c->mdims - 1), j = i + 1 + pick(c->mdims - 1 - i), d = pick(c->ndim);
        for (int k = 0; k < c->mdims; k++) c->dst[k] = c->src[k];
        c->src[i] = dtr_partial(op);
        c->dst[i] = c->src[j] = c->dst[j] = dtr_shard(d);
        c->blocked = true;
    }
    if (c->mdims >= 2 && !c->blocked && pick(2) == 0) /* shard orders */
        nest_in_orders(c->mdims, c->msize, c->ndim, pick(3), c->src, c->dst);
    if (world >= 8 && !c->blocked && pick(8) == 0) {
        /* a seed plan through blocks of other lengths than the canonical layout (compat
         * sizes them as the seed does: plan->seed_blocks): 2x2x2, 2, 6 or 10 rows */
        int d = pick(c->ndim), k = pick(2);
        c->mdims = 3;
        c->msize[0] = c->msize[1] = c->msize[2] = 2;
        c->nranks = 8;
        c->shape[d] = 2 + 4 * pick(3);
        c->src[2] = c->dst[2] = dtr_shard(d);
        c->src[k] = c->dst[1 - k] = dtr_shard(d);
        c->src[1 - k] = c->dst[k] = dtr_replicate();
    }
    c->dtype = (dtr_dtype_t)pick(DTR_DTYPE_LAST);
    char m[64], sh[64], a[128], b[128];
    dtr_placements_format(c->src, c->mdims, a, sizeof a);
    dtr_placements_format(c->dst, c->mdims, b, sizeof b);
    snprintf(m, sizeof m, "%lld", (long long)c->msize[0]);
    for (int i = 1; i < c->mdims; i++)
        snprintf(m + strlen(m), sizeof m - strlen(m), "x%lld", (long long)c->msize[i]);
    dtr_shape_format(c->shape, c->ndim, sh, sizeof sh);
    snprintf(c->text, sizeof c->text, "mesh %s%s shape %s %s -> %s %s", m,
             c->ranks ? " (shuffled ranks)" : "", sh, a, b, dtr_dtype_name(c->dtype));
}

/* The MPI backend without its v-collectives: the executor pads uneven pieces. */
static dtr_backend_ops_t padded_ops;

typedef struct {
    int plans, failures, skipped;
} tally_t;

static void report(int rank, uint64_t seed, int index, const char *strategy, const char *how,
                   const test_case_t *c, const char *what) {
    printf("FAIL seed %llu case %d (%s, %s): %s: rank %d: %s\n", (unsigned long long)seed, index,
           strategy, how, c->text, rank, what);
    fflush(stdout);
}

/* The memory space of this run: the test's own buffers (ops NULL: host memory). */
static const dtr_memory_ops_t *space_ops;
static void *space_state;

/* A fresh state of the run's memory space (for a context to own); NULL on host. */
static int space_new(const char *memory, const dtr_memory_ops_t **ops, void **state,
                     char *why, size_t len) {
    *ops = NULL;
    *state = NULL;
    if (strcmp(memory, "host") == 0) return 0;
    if (strcmp(memory, "fake") == 0) {
        *ops = fake_device_ops();
        *state = fake_device_state();
        return 0;
    }
#if defined(DTR_HAVE_CUDA)
    if (strcmp(memory, "cuda") == 0) {
        if (dtr_cuda_device_count() < 1) {
            snprintf(why, len, "no GPU visible (%s)", dtr_last_error());
            return 1;
        }
        if (dtr_memory_cuda_create(0, NULL, state) != DTR_OK) {
            snprintf(why, len, "CUDA memory: %s", dtr_last_error());
            return 2;
        }
        *ops = dtr_memory_cuda_ops();
        return 0;
    }
#else
    if (strcmp(memory, "cuda") == 0) {
        snprintf(why, len, "built without CUDA (nvcc was not found at build time)");
        return 1;
    }
#endif
    snprintf(why, len, "--memory %s: not host, fake or cuda", memory);
    return 2;
}

/* Buffers of the run's space: a copy of host bytes in the space, and back. */
static void *space_put(const void *host, size_t bytes) {
    if (space_ops == NULL) {
        void *p = malloc(bytes);
        memcpy(p, host, bytes);
        return p;
    }
    /* The copy runs on this space's own stream, the context's work on another: wait for it
     * before the call reads the buffer (as dtr run does). Without the wait, 4 ranks sharing
     * one H200 read inputs that had not landed (issue 25). */
    void *p = NULL;
    if (space_ops->alloc(space_state, (int64_t)bytes, &p) != DTR_OK ||
        space_ops->copy(space_state, p, host, (int64_t)bytes, DTR_COPY_FROM_HOST) != DTR_OK ||
        space_ops->sync(space_state) != DTR_OK) {
        fprintf(stderr, "space_put: %s\n", dtr_last_error());
        abort();
    }
    return p;
}

static void space_get(void *host, const void *p, size_t bytes) {
    if (space_ops == NULL) {
        memcpy(host, p, bytes);
    } else if (space_ops->copy(space_state, host, p, (int64_t)bytes, DTR_COPY_TO_HOST) != DTR_OK) {
        fprintf(stderr, "space_get: %s\n", dtr_last_error());
        abort();
    }
}

static void space_free(void *p) {
    if (space_ops == NULL) free(p);
    else space_ops->free(space_state, p);
}

static int run_plan(dtr_context_t *ctx, const dtr_plan_t *plan, const dtr_spec_t *src,
                    const dtr_spec_t *dst, const dtr_fill_t *fill, int rank, bool nonblocking,
                    char *why, size_t len) {
    dtr_layout_t sl = {0}, dl = {0};
    bool inside = dtr_spec_layout(src, rank, &sl) == DTR_OK;
    if (inside) dtr_spec_layout(dst, rank, &dl);
    size_t in_bytes = inside ? (size_t)sl.bytes : 24, out_bytes = inside ? (size_t)dl.bytes : 24;
    unsigned char *in = malloc(in_bytes + 1), *copy = malloc(in_bytes + 1);
    unsigned char *out = malloc(out_bytes + GUARD);
    memset(out, 0xab, out_bytes + GUARD);
    if (inside)
        dtr_fill(src, fill, rank, in, in_bytes);
    else
        for (size_t k = 0; k < in_bytes; k++) in[k] = (unsigned char)(k * 3 + 1);
    memcpy(copy, in, in_bytes);
    /* the buffers the call sees: these, or copies in the run's memory space */
    void *din = space_put(in, in_bytes + 1), *dout = space_put(out, out_bytes + GUARD);
    dtr_status_t st;
    if (nonblocking) {
        dtr_request_t *req = NULL;
        st = dtr_redistribute_start(ctx, plan, din, in_bytes, dout, out_bytes, &req);
        bool done = false;
        while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
    } else {
        st = dtr_redistribute(ctx, plan, din, in_bytes, dout, out_bytes);
    }
    if (st == DTR_OK) st = dtr_context_sync(ctx);
    space_get(in, din, in_bytes);
    space_get(out, dout, out_bytes + GUARD);
    space_free(din);
    space_free(dout);
    int bad = 0;
    if (st != DTR_OK) {
        snprintf(why, len, "%s: %s", dtr_status_name(st), dtr_last_error());
        bad = 1;
    } else if (memcmp(in, copy, in_bytes) != 0) {
        snprintf(why, len, "the input buffer was written");
        bad = 1;
    } else {
        for (int k = 0; k < GUARD && !bad; k++)
            if (out[out_bytes + k] != 0xab) {
                snprintf(why, len, "wrote past the end of the output (byte %d)", k);
                bad = 1;
            }
    }
    if (!bad && inside) {
        dtr_pattern_report_t rep;
        st = dtr_fill_check(src, dst, fill, rank, out, out_bytes, &rep);
        if (st != DTR_OK) {
            snprintf(why, len, "check: %s", dtr_last_error());
            bad = 1;
        } else if (rep.mismatches > 0) {
            snprintf(why, len, "%lld of %lld elements wrong; first at local %lld: got %.9g, want "
                     "%.9g (tolerance %g x scale)",
                     (long long)rep.mismatches, (long long)rep.checked, (long long)rep.first,
                     rep.got, rep.want, rep.tolerance);
            bad = 1;
        }
    } else if (!bad && memcmp(out, in, in_bytes) != 0) {
        snprintf(why, len, "a bystander's output is not its input");
        bad = 1;
    }
    free(in);
    free(copy);
    free(out);
    return bad;
}

/* What the run covered, counted over the plans (the summary checks each was reached). */
typedef struct {
    int kinds[DTR_STEP_KIND_LAST], dtypes[DTR_DTYPE_LAST], mdims[4];
    int partial_ops[DTR_REDUCE_OP_LAST];
    int fills[2];   /* plans run on the pattern, on random values */
    int sliced;     /* plans with a gather along a non-leading dim, run in slices on rank 0 */
    int casts;      /* plans that cast (dst in another dtype: cast_to) */
    int ordered;    /* plans from or to a shard order other than mesh-dim order */
    int own_blocks; /* compat plans through the seed's own block lengths (seed_blocks) */
    int node_aware; /* plans made knowing which mesh dims cross nodes (some did) */
} coverage_t;

/* The run's settings and contexts: [0] the backend as it is, [1] without the v-forms (MPI:
 * pieces padded; NCCL: the same context). */
typedef struct {
    int rank, world, cases;
    uint64_t seed;
    const char *memory, *backend;
    bool nccl, verbose;
    dtr_context_t *ctx[2];
} run_t;

/* Reads the flags and makes the contexts. 0, or the exit status to finish with (2: bad
 * flags; 0: skipped, having printed why). */
static int setup(run_t *r, int argc, char **argv) {
    r->cases = 100;
    r->seed = 20261121;
    r->memory = "host";
    r->backend = "mpi";
    for (int k = 1; k + 1 < argc; k += 2) {
        if (strcmp(argv[k], "--cases") == 0) r->cases = atoi(argv[k + 1]);
        if (strcmp(argv[k], "--seed") == 0) r->seed = strtoull(argv[k + 1], NULL, 10);
        if (strcmp(argv[k], "--memory") == 0) r->memory = argv[k + 1];
        if (strcmp(argv[k], "--backend") == 0) r->backend = argv[k + 1];
    }
    int rank = r->rank;
    r->nccl = strcmp(r->backend, "nccl") == 0;
    if (!r->nccl && strcmp(r->backend, "mpi") != 0) {
        if (rank == 0) printf("mpi exec: FAIL: --backend %s: not mpi or nccl\n", r->backend);
        return 2;
    }
    if (r->nccl && strcmp(r->memory, "cuda") != 0) {
        if (rank == 0) printf("mpi exec: FAIL: --backend nccl needs --memory cuda\n");
        return 2;
    }
    char why[512] = "";
    int sp = space_new(r->memory, &space_ops, &space_state, why, sizeof why);
    if (sp != 0) {
        if (rank == 0) printf("mpi exec (memory %s): %s: %s\n", r->memory,
                              sp == 1 ? "skipped" : "FAIL", why);
        if (rank == 0 && sp == 1) printf("  plans on %d ranks: 0 passed, 0 failed, skipped\n", r->world);
        return sp == 1 ? 0 : 2;
    }
    r->verbose = getenv("DTR_TEST_VERBOSE") != NULL;
    padded_ops = *dtr_backend_mpi_ops();
    padded_ops.name = "mpi-padded";
    padded_ops.all_gatherv = NULL;
    padded_ops.reduce_scatterv = NULL;
    void *state = NULL;
    if (r->nccl) {
#if defined(DTR_HAVE_NCCL)
        /* no padded variant: both kinds of case run on the one NCCL context */
        if (dtr_context_create_nccl(MPI_COMM_WORLD, 0, NULL, &r->ctx[0]) != DTR_OK) {
            fprintf(stderr, "rank %d: NCCL context: %s\n", rank, dtr_last_error());
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        r->ctx[1] = r->ctx[0];
#else
        if (rank == 0) printf("mpi exec (backend nccl): skipped: built without NCCL\n");
        return 0;
#endif
    } else if (dtr_context_create_mpi(MPI_COMM_WORLD, &r->ctx[0]) != DTR_OK ||
        dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state) != DTR_OK ||
        dtr_context_create(&padded_ops, state, &r->ctx[1]) != DTR_OK) {
        fprintf(stderr, "rank %d: context: %s\n", rank, dtr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int k = 0; k < 2 && space_ops != NULL && !r->nccl; k++) {
        const dtr_memory_ops_t *ops;
        void *st;
        if (space_new(r->memory, &ops, &st, why, sizeof why) != 0 ||
            dtr_context_set_memory(r->ctx[k], ops, st) != DTR_OK) {
            fprintf(stderr, "rank %d: memory %s: %s %s\n", rank, r->memory, why, dtr_last_error());
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    return -1;
}

/* Counts what a plan covers (rank 0's view of its gathers in slices). */
static void cover(coverage_t *cv, const test_case_t *c, const dtr_plan_t *plan,
                  const dtr_spec_t *src, const dtr_spec_t *dst, const dtr_mesh_t *mesh,
                  uint32_t across, int64_t slice) {
    for (int k = 0; k < plan->nsteps; k++) cv->kinds[plan->steps[k].kind]++;
    cv->node_aware += across != 0;
    cv->dtypes[c->dtype]++;
    cv->casts += dst->dtype != src->dtype;
    cv->own_blocks += plan->seed_blocks;
    for (int i = 0, any = 0; i < c->mdims && !any; i++)
        if ((src->placements[i].kind == DTR_SHARD && src->placements[i].order != 0) ||
            (dst->placements[i].kind == DTR_SHARD && dst->placements[i].order != 0))
            cv->ordered += any = 1;
    cv->mdims[c->mdims]++;
    for (int i = 0; i < c->mdims; i++)
        if (c->src[i].kind == DTR_PARTIAL) {
            cv->partial_ops[c->src[i].op]++;
            break;
        }
    for (int k = 0; k < plan->nsteps; k++) {
        /* rank 0's view: a gather along a non-leading dim whose output holds the executor's
         * minimum of 8 slices */
        const dtr_step_t *step = &plan->steps[k];
        dtr_spec_t after;
        dtr_layout_t lay;
        if (slice > 0 && step->kind == DTR_STEP_ALL_GATHER && step->tensor_dim > 0 &&
            dtr_spec_init(&after, mesh, step->after, c->mdims, c->shape, c->ndim, c->dtype) ==
                DTR_OK &&
            dtr_spec_layout(&after, 0, &lay) == DTR_OK && lay.bytes >= 8 * slice) {
            cv->sliced++;
            break;
        }
    }
}

/* Case `index` with strategy s (0 optimal, 1 compat): planned, run and checked on every
 * rank; the tally and the coverage updated. */
static void run_strategy(const run_t *r, int index, int s, const test_case_t *c,
                         const dtr_mesh_t *mesh, const dtr_spec_t *src, const dtr_spec_t *dst,
                         tally_t *t, coverage_t *cv) {
    int rank = r->rank;
    dtr_strategy_t strategy = s == 0 ? DTR_STRATEGY_OPTIMAL : DTR_STRATEGY_COMPAT;
    dtr_cost_model_t bytes_only, nodes;
    cost_bytes_only(&bytes_only);
    dtr_plan_options_t opts = {.strategy = strategy, .cost = c->blocked ? &bytes_only : NULL};
    /* every other optimal plan knows where the mesh dims run (collective: every rank draws
     * the same case), as `dtr run` plans by default */
    uint32_t across = 0;
    if (s == 0 && !c->blocked && index % 2 == 1) {
        dtr_cost_model_default(&nodes);
        if (dtr_mpi_mesh_across_nodes(MPI_COMM_WORLD, mesh, &across) != DTR_OK ||
            dtr_cost_model_nodes(&nodes, across, NULL, NULL) != DTR_OK) {
            if (rank == 0)
                printf("FAIL seed %llu case %d: node-aware cost: %s\n",
                       (unsigned long long)r->seed, index, dtr_last_error());
            t->failures++;
        }
        opts.cost = &nodes;
    }
    dtr_plan_t *plan = malloc(sizeof *plan);
    if (dtr_plan_create(src, dst, &opts, plan) != DTR_OK) {
        t->skipped++; /* an invalid change, or compat refusing an unsafe plan */
        free(plan);
        return;
    }
    int variant = (index + s) % 4;
    if (r->verbose && rank == 0) {
        printf("case %d %s variant %d: %s\n", index, dtr_strategy_name(strategy), variant, c->text);
        fflush(stdout);
    }
    bool padded = variant & 1, nonblocking = variant & 2;
    static const int64_t slices[] = {0, 1, 5, 48, 4096};
    int64_t slice = slices[pick(5)];
    if (dtr_context_set_slice_bytes(r->ctx[padded], slice) != DTR_OK) t->failures++;
    cover(cv, c, plan, src, dst, mesh, across, slice);
    char why[512] = "";
    dtr_fill_t fill = {.kind = index % 2 ? DTR_FILL_RANDOM : DTR_FILL_PATTERN,
                       .seed = r->seed * 1000003ull + (uint64_t)index};
    cv->fills[fill.kind]++;
    int bad = run_plan(r->ctx[padded], plan, src, dst, &fill, rank, nonblocking, why, sizeof why);
    char how[96];
    snprintf(how, sizeof how, "%s, %s, fill %s", padded ? "padded" : "mpi",
             nonblocking ? "non-blocking" : "blocking",
             fill.kind == DTR_FILL_RANDOM ? "random" : "pattern");
    if (bad) report(rank, r->seed, index, dtr_strategy_name(strategy), how, c, why);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    t->plans++;
    t->failures += any;
    free(plan);
}

/* "FAIL: what" (counted) where something the run must reach was not reached. */
static void need(tally_t *t, bool reached, const char *what) {
    if (reached) return;
    printf("\n  FAIL: %s", what);
    t->failures++;
}

/* Rank 0's summary: what ran, by kind, dtype and form, and what a large run must reach. */
static void summary(const run_t *r, const coverage_t *cv, tally_t *t) {
    bool many = r->cases >= 100;
    printf("mpi exec on %d ranks (%s, memory %s): %d cases, %d plans run, %d skipped (invalid or refused), "
           "seed %llu\n  steps run by kind:",
           r->world, r->backend, r->memory, r->cases, t->plans, t->skipped,
           (unsigned long long)r->seed);
    for (int k = 0; k < DTR_STEP_KIND_LAST; k++)
        printf(" %s %d", dtr_step_kind_info((dtr_step_kind_t)k)->name, cv->kinds[k]);
    printf("\n  plans by dtype:");
    for (int k = 0; k < DTR_DTYPE_LAST; k++) printf(" %s %d", dtr_dtype_name((dtr_dtype_t)k), cv->dtypes[k]);
    printf("\n  plans by mesh dims: 1-d %d, 2-d %d, 3-d %d; Partial sources by op:", cv->mdims[1],
           cv->mdims[2], cv->mdims[3]);
    for (int k = 0; k < DTR_REDUCE_OP_LAST; k++)
        printf(" %s %d", dtr_reduce_op_name((dtr_reduce_op_t)k), cv->partial_ops[k]);
    printf("\n  plans with a non-leading gather run in slices: %d; casting plans: %d",
           cv->sliced, cv->casts);
    need(t, !many || cv->casts > 0, "no casting plan ran");
    printf("\n  plans with shard orders: %d", cv->ordered);
    need(t, !many || r->world < 4 || cv->ordered > 0, "no plan with a shard order ran");
    printf("\n  plans made node-aware with some mesh dim across nodes: %d", cv->node_aware);
    printf("\n  compat plans through the seed's own block lengths: %d", cv->own_blocks);
    need(t, !many || r->world < 8 || cv->own_blocks > 0,
         "no plan through the seed's own block lengths ran");
    printf("\n  plans on the pattern %d, on random values %d", cv->fills[0], cv->fills[1]);
    need(t, !many || (cv->fills[0] > 0 && cv->fills[1] > 0), "one of the fills never ran");
    if (strcmp(r->memory, "fake") == 0) {
        fake_device_counts_t fc = fake_device_counts();
        printf("\n  fake device (rank 0): %lld copy_box, %lld copy_range, %lld divide, %lld "
               "zero, %lld copies within, %lld to host, %lld from host, %lld refused",
               (long long)fc.copy_box, (long long)fc.copy_range, (long long)fc.divide,
               (long long)fc.zero, (long long)fc.copy_within, (long long)fc.to_host,
               (long long)fc.from_host, (long long)fc.refused);
        need(t, fc.refused == 0 && (!many || (fc.copy_box > 0 && fc.divide > 0 && fc.zero > 0 &&
                                              fc.copy_within > 0)),
             "the fake device refused an address, or some local operation never ran on it");
    }
    need(t, r->world < 2 || !many || cv->sliced > 0, "no gather ran in slices");
    need(t, r->world < 4 || !many || cv->kinds[DTR_STEP_REDUCE_EXCHANGE] > 0,
         "no reduce_exchange step ran");
    printf("\n  plans on %d ranks: %d passed, %d failed\n", r->world, t->plans - t->failures,
           t->failures);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    run_t r = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.world);
    int rc = setup(&r, argc, argv);
    if (rc >= 0) {
        MPI_Finalize();
        return rc;
    }
    tally_t t = {0};
    coverage_t cv = {0};
    for (int index = 0; index < r.cases; index++) {
        rng_state = r.seed * 1000003ull + (uint64_t)index;
        test_case_t c;
        draw(&c, r.world);
        dtr_mesh_t *mesh = NULL;
        dtr_spec_t src, dst;
        if (dtr_mesh_create(c.mdims, c.msize, c.ranks, c.ranks ? c.nranks : 0, &mesh) != DTR_OK ||
            dtr_spec_init(&src, mesh, c.src, c.mdims, c.shape, c.ndim, c.dtype) != DTR_OK ||
            dtr_spec_init(&dst, mesh, c.dst, c.mdims, c.shape, c.ndim, cast_to(c.dtype, index)) !=
                DTR_OK) {
            if (r.rank == 0) printf("FAIL seed %llu case %d: setup: %s\n", (unsigned long long)r.seed, index, dtr_last_error());
            t.failures++;
        } else {
            for (int s = 0; s < 2; s++) run_strategy(&r, index, s, &c, mesh, &src, &dst, &t, &cv);
        }
        dtr_mesh_destroy(mesh);
        free(c.ranks);
    }
    /* shared memory inside a node, MPI across nodes (tools/mpirun_nodes.sh) */
    if (mpi_paths_check("executor plans") > 0 && r.rank == 0) {
        printf("FAIL: a group took the wrong path\n");
        t.failures++;
    }
    /* which mesh dims cross nodes (node-aware cost) */
    if (mpi_paths_mesh_check() > 0 && r.rank == 0) t.failures++;
    if (r.rank == 0) summary(&r, &cv, &t);
    dtr_context_destroy(r.ctx[0]);
    if (r.ctx[1] != r.ctx[0]) dtr_context_destroy(r.ctx[1]);
    if (space_ops != NULL) space_ops->destroy(space_state);
    MPI_Finalize();
    return t.failures > 0 ? 1 : 0;
}
