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
 * The context bootstrapped without MPI, as a framework's job makes it: --backend nccl-id
 * (rank 0's ncclUniqueId handed round, here by MPI_Bcast, then dtr_context_create_nccl_id)
 * and --backend nccl-comm (the test's own ncclComm_t, adopted: dtr_context_create_nccl_comm);
 * both call dtr_nccl_split_mesh on every rank for each case's mesh.
 *
 * Usage: mpirun -n N mpi_exec_test [--cases N] [--seed S] [--memory host|fake|cuda]
 *        [--backend mpi|nccl|nccl-id|nccl-comm]
 * Prints one line per failing case (with the seed and case number to rerun it) and a
 * summary; exits non-zero on any failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "backends/mpi/dtr_mpi.h"
#include "tests/support/exec_cases.h"
#include "tests/support/mpi_paths.h"
#include "tests/support/plan_util.h"
#if defined(DTR_HAVE_NCCL)
#include <nccl.h>

#include "backends/cuda/dtr_cuda.h"
#include "backends/nccl/dtr_nccl.h"
#endif

/* The MPI backend without its v-collectives: the executor pads uneven pieces. */
static dtr_backend_ops_t padded_ops;

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
    int ragged;     /* plans keeping a ragged shard (ragged_keep) */
} coverage_t;

/* The run's settings and contexts: [0] the backend as it is, [1] without the v-forms (MPI:
 * pieces padded; NCCL: the same context). */
typedef struct {
    int rank, world, cases;
    uint64_t seed;
    const char *memory, *backend;
    bool nccl, verbose;
    bool split;    /* nccl-id, nccl-comm: each case's mesh split from the whole communicator */
    void *adopted; /* nccl-comm: the test's ncclComm_t, destroyed after the context */
    dtr_context_t *ctx[2];
} run_t;

#if defined(DTR_HAVE_NCCL)
/* The NCCL context made without MPI's help inside dtr (nccl-id, nccl-comm). */
static dtr_status_t nccl_bootstrap(run_t *r) {
    ncclUniqueId id;
    if (r->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) memset(&id, 0, sizeof id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD); /* the job's own means */
    int gpus = dtr_cuda_device_count(), dev = gpus > 0 ? r->rank % gpus : 0;
    if (strcmp(r->backend, "nccl-id") == 0)
        return dtr_context_create_nccl_id(&id, sizeof id, r->rank, r->world, dev, NULL,
                                          &r->ctx[0]);
    ncclComm_t comm;
    if (cudaSetDevice(dev) != cudaSuccess ||
        ncclCommInitRank(&comm, r->world, id, r->rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: ncclCommInitRank failed\n", r->rank);
        return DTR_ERR_BACKEND;
    }
    r->adopted = comm;
    return dtr_context_create_nccl_comm(comm, dev, NULL, &r->ctx[0]);
}
#endif

/* dtr_nccl_split_mesh where the build has NCCL (r->split is never set without it). */
static dtr_status_t dtr_nccl_split_mesh_any(dtr_context_t *ctx, const dtr_mesh_t *mesh) {
#if defined(DTR_HAVE_NCCL)
    return dtr_nccl_split_mesh(ctx, mesh);
#else
    (void)ctx;
    (void)mesh;
    return DTR_ERR_UNSUPPORTED;
#endif
}

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
    r->split = strcmp(r->backend, "nccl-id") == 0 || strcmp(r->backend, "nccl-comm") == 0;
    r->nccl = strcmp(r->backend, "nccl") == 0 || r->split;
    if (!r->nccl && strcmp(r->backend, "mpi") != 0) {
        if (rank == 0)
            printf("mpi exec: FAIL: --backend %s: not mpi, nccl, nccl-id or nccl-comm\n",
                   r->backend);
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
        dtr_status_t st = r->split ? nccl_bootstrap(r)
                                   : dtr_context_create_nccl(MPI_COMM_WORLD, 0, NULL, &r->ctx[0]);
        if (st != DTR_OK) {
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
    cv->ragged += c->ragged;
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
    printf("\n  plans keeping a ragged shard: %d", cv->ragged);
    need(t, !many || r->world < 2 || cv->ragged > 0, "no plan keeping a ragged shard ran");
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
        need(t, fc.refused == 0, "the fake device refused an address");
        /* (on one rank every mesh dim has size 1: no step runs, only the copies of a plan
         * without steps) */
        need(t, !many || r->world < 2 ||
                    (fc.copy_box > 0 && fc.divide > 0 && fc.zero > 0 && fc.copy_within > 0),
             "some local operation never ran on the fake device");
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
        test_case_t c;
        dtr_mesh_t *mesh = NULL;
        dtr_spec_t src, dst;
        if (case_specs(r.seed, index, r.world, &c, &mesh, &src, &dst) != DTR_OK) {
            if (r.rank == 0) printf("FAIL seed %llu case %d: setup: %s\n", (unsigned long long)r.seed, index, dtr_last_error());
            t.failures++;
        } else if (r.split && dtr_nccl_split_mesh_any(r.ctx[0], mesh) != DTR_OK) {
            if (r.rank == 0) printf("FAIL seed %llu case %d: dtr_nccl_split_mesh: %s\n", (unsigned long long)r.seed, index, dtr_last_error());
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
#if defined(DTR_HAVE_NCCL)
    if (r.adopted != NULL) ncclCommDestroy((ncclComm_t)r.adopted); /* after its context */
#endif
    if (space_ops != NULL) space_ops->destroy(space_state);
    MPI_Finalize();
    return t.failures > 0 ? 1 : 0;
}
