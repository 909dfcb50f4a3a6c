/* dtr run: a real redistribution under mpirun, verified and timed against its bare
 * collectives. The phases of one run (run.h): the flags (change.c), the specs and the plan,
 * the context and buffers, the first run, its check and the backward plan (run_check.c),
 * the timing, the report (run_report.c). */
#include <stdlib.h>
#include <string.h>

#include "cli/run.h"

static void dtr__run_help_more(FILE *out) {
    fputs(
        "  --alpha-us A, --bandwidth-gbps B, --local-gbps G  the cost model the plan is\n"
        "                       chosen under, as for 'dtr plan' (one value, or one per mesh\n"
        "                       dim; env DTR_ALPHA_US, DTR_BANDWIDTH_GBPS, DTR_LOCAL_GBPS)\n"
        "  --inter-alpha-us A, --inter-bandwidth-gbps B  latency and bandwidth between\n"
        "                       nodes, for the mesh dims --nodes-of names (auto: where the\n"
        "                       ranks run)\n"
        "  --json               one JSON object on rank 0\n"
        "                       (the last line, and \"groups\" in the JSON, count the MPI\n"
        "                       backend's groups over the job: those whose ranks share a node\n"
        "                       and their operations through shared memory and MPI, those\n"
        "                       across nodes and theirs through MPI and in the hierarchical\n"
        "                       form, over all runs: docs/nodes.md)\n"
        "  --backend B          mpi (default: Open MPI, under mpirun), gloo (no MPI: the\n"
        "                       ranks a launcher started, tools/dtr_launch.sh or torchrun,\n"
        "                       RANK, WORLD_SIZE, DTR_GLOO_STORE; CPU buffers; every form,\n"
        "                       --batch and --to-mesh too) or nccl (one GPU per rank;\n"
        "                       implies --device cuda)\n"
        "  --device D           cpu (default) or cuda: the buffers are device memory of GPU\n"
        "                       (rank mod GPUs) and every local step runs as a CUDA kernel; with\n"
        "                       --backend mpi several ranks may share one GPU (the operations\n"
        "                       stage through host memory). Needs a dtr built with CUDA (and\n"
        "                       NCCL for nccl) and a visible GPU.\n"
        "  --batch FILE         many tensors at once ('dtr plan --help' gives FILE's form):\n"
        "                       the batched plan runs (one coalesced collective per round),\n"
        "                       --verify checks every element of every tensor (tensor k\n"
        "                       filled with seed S + k), and the timing alternates the batch,\n"
        "                       the same tensors one plan at a time, and the batch's\n"
        "                       collectives alone (--json: batched_median_us,\n"
        "                       one_by_one_median_us, baseline_median_us). MPI on CPU buffers;\n"
        "                       planned for where the ranks run (as --nodes-of auto)\n"
        "  --to-mesh MESH, --to-ranks LIST  a change between meshes (dtr plan --help): the\n"
        "                       source ranks (--mesh, --ranks) and the destination ranks may\n"
        "                       be disjoint, overlap or be the same; --verify checks every\n"
        "                       element on every destination rank and every source rank's\n"
        "                       input; CPU buffers, --nonblocking as above (--json adds\n"
        "                       messages, send_bytes_per_rank_max and the lower bounds).\n"
        "                       --relabel and --staging-cap as for dtr plan; with --batch the\n"
        "                       file's tensors move together, timed beside one tensor at a\n"
        "                       time (--json: one_by_one_median_us, one_by_one_over_batched)\n"
        "  --buffers B          private (default: the heap) or shared: the source and result\n"
        "                       blocks come from dtr_context_alloc, which the MPI backend\n"
        "                       maps on every rank of the node, so that reductions read the\n"
        "                       members' blocks where they are (CPU buffers, MPI backend;\n"
        "                       the baseline keeps its own heap buffers)\n"
        "  --inject-mismatch R  flip a byte of rank R's output before checking (tests the\n"
        "                       checker: --verify must then fail)\n"
        "  -h, --help           this help\n"
        "\n"
        "examples:\n"
        "  mpirun -n 4 dtr run --mesh 2x2 --shape 64x64 --from 'S(0),R' --to 'R,S(1)' --verify\n"
        "  mpirun -n 4 dtr run --mesh 4 --shape 4096x1024 --from 'P' --to 'S(0)' --json\n"
        "\n"
        "Exit status: 0 done (and verified with --verify); 1 verification failed or a rank's\n"
        "call failed (the first mismatching rank and index are printed); 2 bad arguments;\n"
        "3 the change was refused (no plan for it, as dtr plan would say).\n"
        "As root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.\n",
        out);
}

static void dtr__run_help(FILE *out) {
    fputs(
        "usage: mpirun -n N dtr run --mesh MESH --shape SHAPE --from LIST --to LIST\n"
        "                [--dtype DTYPE] [--to-dtype DTYPE] [--ranks LIST]\n"
        "                [--strategy optimal|compat] [--iters N] [--warmup N] [--verify]\n"
        "                [--nonblocking] [--digest] [--backward [--backward-dtype DTYPE]]\n"
        "                [--fill pattern|random] [--seed S] [--input DIR] [--dump DIR]\n"
        "                [--json] [--backend mpi|gloo|nccl] [--device cpu|cuda]\n"
        "                [--buffers private|shared]\n"
        "       mpirun -n N dtr run --mesh MESH [--ranks LIST] --shape SHAPE --from LIST\n"
        "                --to-mesh MESH [--to-ranks LIST] --to LIST [--dtype D] [--to-dtype D]\n"
        "                [--relabel] [--staging-cap BYTES] [--iters N] [--warmup N] [--verify]\n"
        "                [--fill pattern|random] [--seed S] [--inject-mismatch R] [--json]\n"
        "                [--nonblocking] [--digest] [--dump DIR] [--backend mpi|gloo]\n"
        "                [--block-scale B]\n"
        "       mpirun -n N dtr run --mesh MESH [--ranks LIST] --batch FILE --to-mesh MESH\n"
        "                [--to-ranks LIST] [--relabel] [--staging-cap BYTES] [--block-scale B]\n"
        "                [--iters N]\n"
        "                [--warmup N] [--verify] [--nonblocking] [--digest]\n"
        "                [--fill pattern|random] [--seed S] [--json] [--dump DIR]\n"
        "                [--backend mpi|gloo]\n"
        "       mpirun -n N dtr run --mesh MESH --batch FILE [--ranks LIST] [--strategy S]\n"
        "                [--iters N] [--warmup N] [--verify] [--nonblocking] [--digest]\n"
        "                [--json] [--fill pattern|random] [--seed S] [--dump DIR]\n"
        "                [--backend mpi|gloo]\n"
        "       tools/dtr_launch.sh -n N dtr run ... --backend gloo   (no MPI)\n"
        "       every form also takes dtr plan's cost flags: [--alpha-us A] [--bandwidth-gbps B]\n"
        "                [--local-gbps G] [--inter-alpha-us A] [--inter-bandwidth-gbps B]\n"
        "\n"
        "Runs the redistribution on the ranks of the MPI job. Each rank fills its source\n"
        "block (--fill, or reads it with --input), runs the plan, and with --verify checks\n"
        "every element on every rank against a reference computed from every rank's source\n"
        "values: reductions in long double (floats) or exactly (integers). It then times\n"
        "the redistribution over --iters iterations, alternating with the baseline: the same\n"
        "plan's collectives called bare on preallocated contiguous buffers of the same sizes,\n"
        "so the executor's overhead shows as a ratio. Times are the slowest rank's, medians\n"
        "over the iterations. Ranks of the job beyond the mesh take no part.\n"
        "\n"
        "  --mesh, --shape, --dtype, --ranks   as for 'dtr layout' (dtype default f32)\n"
        "  --from LIST, --to LIST   placements, one per mesh dim\n"
        "  --to-dtype DTYPE     the result in DTYPE, cast first, as for 'dtr plan' (the\n"
        "                       check rounds each source value to DTYPE; --backward casts\n"
        "                       the gradient back to --dtype first)\n"
        "  --strategy S         optimal (default) or compat, as for 'dtr plan'\n"
        "  --iters N            timed iterations (default 20; 0 skips timing)\n"
        "  --warmup N           untimed iterations first (default 3)\n"
        "  --verify             check every element on every rank after the first run: moves,\n"
        "                       max, min and integers exactly; float sums, averages, products\n"
        "                       and divisions within |got - want| <= K u scale, K = n + d + 1\n"
        "                       (n contributions reduced, d divisions), u the dtype's unit\n"
        "                       roundoff (f64 2^-53, f32 2^-24, f16 2^-11, bf16 2^-8), scale\n"
        "                       the sum of the contributions' magnitudes (sum, avg) or |want|;\n"
        "                       the output prints K, u and the largest error seen\n"
        "  --fill F             pattern (default): small integers exact in every dtype and\n"
        "                       order (for Partial sources, contributions reducing to them);\n"
        "                       random: random values over the dtype's useful range, Partial\n"
        "                       sources as random contributions, so that reduction order and\n"
        "                       precision show (pattern/pattern.h says how they are drawn)\n"
        "  --seed S             the random fill's seed (default 1; printed with the result)\n"
        "  --input DIR          each rank reads its source block from DIR/rankR.in, raw bytes as\n"
        "                       --dump writes them (with --backward the gradient from\n"
        "                       DIR/rankR.grad_in); with --verify every rank reads every file\n"
        "  --nonblocking        use dtr_redistribute_start and dtr_request_test\n"
        "  --digest             proof of delivery: the source's and the result's 64-bit\n"
        "                       digests (dtr_digest: the same for any layout of the same\n"
        "                       values, no gather), printed and compared: a result whose\n"
        "                       digest differs fails the run (exit 1); not for a Partial\n"
        "                       --to; a Partial source has none (--json: digest_src null;\n"
        "                       with --batch, \"digests\": one pair a tensor)\n"
        "  --block-scale B      with --to-mesh and an fp8 --to-dtype (f8e4m3, f8e5m2; with\n"
        "                       --batch each entry's to_dtype): block-scaled fp8, one f32\n"
        "                       scale per B x B block, only fp8 bytes and scales moving, as\n"
        "                       for 'dtr plan'; --verify checks every byte and scale against\n"
        "                       a reference quantizer (--json: \"block_scale\"); --digest\n"
        "                       compares each fp8 tensor and its scales as the source ranks\n"
        "                       quantized them with what arrived (\"digests\": the n tensors,\n"
        "                       then their scales); --dump writes each destination rank's\n"
        "                       scales as rankR.scales (rankR.K.scales) beside rankR.out\n"
        "  --backward           also run the backward plan: a gradient arriving in the --to\n"
        "                       placements goes back to --from's (Partial becomes R); with\n"
        "                       --verify its values are checked too\n"
        "  --backward-dtype DTYPE  with --backward: PyTorch's backward_dtype, the dtype its\n"
        "                       steps run in, as for 'dtr plan' (the check rounds each\n"
        "                       gradient value to DTYPE, then to --dtype)\n"
        "  --dump DIR           each rank writes its buffers to the existing directory DIR,\n"
        "                       raw bytes in native order: rankR.in (its source block),\n"
        "                       rankR.out (the result, after --inject-mismatch), and with\n"
        "                       --backward rankR.grad_in and rankR.grad_out; their shapes\n"
        "                       are those 'dtr layout' gives for R (with --to-mesh: a\n"
        "                       source rank's rankR.in, a destination rank's rankR.out;\n"
        "                       with --batch rankR.K.in and rankR.K.out for tensor K)\n"
        "  --nodes-of DIMS      the mesh dims the plan's cost treats as spanning nodes\n"
        "                       (dtr plan --nodes-of): auto (default) asks MPI where the\n"
        "                       ranks run; none plans as on one node; or '0', '0,2'. The\n"
        "                       output says which mesh dims really cross nodes either way\n"
        "                       (inter-node figures: DTR_INTER_ALPHA_US,\n"
        "                       DTR_INTER_BANDWIDTH_GBPS; docs/nodes.md)\n",
        out);
    dtr__run_help_more(out);
}

/* One redistribution, complete (on a GPU: the stream synchronised). */
static dtr_status_t dtr__once(const dtr_cli_run_t *r) {
    dtr_status_t st;
    const void *in[1] = {r->din};
    void *out[1] = {r->dout};
    if (!r->o->nonblocking) {
        st = dtr_change_run(r->ctx, r->change, in, &r->in_bytes, out, &r->out_bytes);
    } else {
        dtr_request_t *req = NULL;
        st = dtr_change_start(r->ctx, r->change, in, &r->in_bytes, out, &r->out_bytes, &req);
        bool done = false;
        while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
    }
    return st == DTR_OK ? dtr_context_sync(r->ctx) : st;
}

static dtr_status_t dtr__baseline(const dtr_cli_run_t *r) {
    dtr_status_t st = dtr_redistribute_baseline(r->ctx, r->plan);
    return st == DTR_OK ? dtr_context_sync(r->ctx) : st;
}

/* dtr__setup_plan's answer for a change that runs between meshes (dtr_cli_ragged_route). */
#define DTR__BETWEEN (-1)

/* The specs, where the mesh dims run, and the plan: an exit code (each error printed once,
 * the same on every rank), or DTR__BETWEEN. */
static int dtr__setup_plan(dtr_cli_run_t *r) {
    const dtr_cli_change_t *o = r->o;
    int rc = dtr_cli_build_spec("run", &o->spec, &r->mesh, &r->src);
    if (rc != DTR_EXIT_OK) return rc;
    dtr_mesh_t *none = NULL;
    rc = dtr_cli_target_spec("run", o->to, NULL, o->to_ranks, o->to_dtype, &r->src, &none, &r->dst);
    /* (before any collective: every rank decides alike; a change that fails to plan is
     * reported below, as any is) */
    if (rc == DTR_EXIT_OK &&
        dtr_cli_ragged_route(1, &r->src, &r->dst, false) == DTR_CLI_ROUTE_BETWEEN)
        return DTR__BETWEEN;
    if (rc == DTR_EXIT_OK) rc = dtr_cli_mesh_fits("run", "--mesh", r->mesh, r->world);
    if (rc == DTR_EXIT_OK && o->digest) rc = dtr_cli_digest_refuse(1, &r->dst);
    rc = dtr_cli_agree_args("run", rc, r->rank); /* (before the first collective) */
    if (rc == DTR_EXIT_OK) rc = dtr_cli_agree_engine("run", &r->eng);
    /* where the mesh dims run (reported), and which the plan's cost treats as crossing
     * nodes: by default (auto) where they run; none plans as on one node */
    dtr_cli_cost_flags_t flags = {o->alpha, o->bandwidth, o->local, o->inter_alpha,
                                  o->inter_bandwidth};
    if (rc == DTR_EXIT_OK)
        rc = dtr_cli_node_cost("run", r->mesh, o->nodes_of, &flags, &r->cost, &r->across,
                               &r->planned_across);
    if (rc != DTR_EXIT_OK) return rc;
    r->opts = (dtr_plan_options_t){.strategy = o->strategy, .cost = &r->cost};
    dtr_change_options_t copts = {.strategy = o->strategy, .cost = &r->cost};
    if (dtr_change_create(1, &r->src, &r->dst, &copts, &r->change) != DTR_OK)
        return dtr_cli_plan_error("run", "--to");
    r->plan = dtr_change_plan(r->change);
    return DTR_EXIT_OK;
}

/* This rank's context and buffers, its source filled (or read), copies in the command's
 * device space or the context's shared allocations. Collective; false where a rank failed
 * (each prints its own error). */
static bool dtr__setup_buffers(dtr_cli_run_t *r) {
    const dtr_cli_change_t *o = r->o;
    dtr_layout_t sl = {0}, dl = {0};
    r->inside = dtr_spec_layout(&r->src, r->rank, &sl) == DTR_OK;
    if (r->inside) dtr_spec_layout(&r->dst, r->rank, &dl);
    r->in_bytes = (size_t)sl.bytes;
    r->out_bytes = (size_t)dl.bytes;
    r->in = dtr_cli_host_alloc(r->in_bytes + 1);
    r->copy = dtr_cli_host_alloc(r->in_bytes + 1);
    r->out = dtr_cli_host_alloc(r->out_bytes + 1);
    r->times = malloc(2 * (size_t)(o->iters + 1) * sizeof *r->times);
    bool oom = !(r->in && r->copy && r->out && r->times);
    char why[192];
    snprintf(why, sizeof why, "buffers: out of memory for %zu bytes (the source block twice, "
             "the target block once)", 2 * r->in_bytes + r->out_bytes + 3);
    if (!dtr_cli_all_ok_msg("run", oom, r->rank, why)) return false;
    dtr_status_t st = dtr_cli_engine_context(&r->eng, r->rank, &r->ctx);
    if (!dtr_cli_all_ok("run", st, r->rank, "context")) return false;
    if (r->inside)
        st = dtr_cli_source_fill(&r->data, &r->src, "in", r->rank, o->verify, r->in, r->in_bytes);
    r->fail_code = dtr_cli_all_code("run", st, r->rank, o->input != NULL ? "--input" : "fill");
    if (r->fail_code != DTR_EXIT_OK) return false; /* (an unreadable --input: exit 2) */
    memcpy(r->copy, r->in, r->in_bytes);
    st = dtr_cli_dev_put(&r->eng, r->in, r->in_bytes, &r->din);
    if (st == DTR_OK) st = dtr_cli_dev_put(&r->eng, r->out, r->out_bytes, &r->dout);
    if (!dtr_cli_all_ok("run", st, r->rank, "device buffers")) return false;
    if (!o->shared) return true;
    /* collective: every rank of the context allocates, outside the mesh too */
    st = dtr_context_alloc(r->ctx, (int64_t)r->in_bytes + 1, &r->sin);
    if (st == DTR_OK) st = dtr_context_alloc(r->ctx, (int64_t)r->out_bytes + 1, &r->sout);
    if (!dtr_cli_all_ok("run", st, r->rank, "--buffers shared")) return false;
    memcpy(r->sin, r->in, r->in_bytes);
    r->din = r->sin;
    r->dout = r->sout;
    return true;
}

/* The first run, its result and input back in host memory. */
static bool dtr__first_run(dtr_cli_run_t *r) {
    dtr_status_t st = dtr__once(r);
    if (st == DTR_OK) st = dtr_cli_dev_get(&r->eng, r->out, r->dout, r->out_bytes);
    if (st == DTR_OK) st = dtr_cli_dev_get(&r->eng, r->in, r->din, r->in_bytes);
    if (st == DTR_OK && r->o->shared) {
        memcpy(r->out, r->sout, r->out_bytes);
        memcpy(r->in, r->sin, r->in_bytes);
    }
    return dtr_cli_all_ok("run", st, r->rank, "redistribute");
}

/* Warm-up, then --iters iterations alternating the run and its baseline (which goes first
 * alternates too); the slowest rank's times, medians into r->med and r->base. */
static bool dtr__timing(dtr_cli_run_t *r) {
    const dtr_cli_change_t *o = r->o;
    dtr_status_t st;
    for (long k = 0; k < o->warmup; k++) {
        st = dtr__once(r);
        if (st == DTR_OK) st = dtr__baseline(r);
        if (!dtr_cli_all_ok("run", st, r->rank, "warm-up")) return false;
    }
    dtr_cli_progress_t prog = {0};
    for (long k = 0; k < o->iters; k++) {
        double t[2];
        for (int bb = 0; bb < 2; bb++) {
            int b = (k % 2) ? 1 - bb : bb;
            dtr_cli_job_barrier();
            double t0 = dtr_cli_job_now();
            st = b == 0 ? dtr__once(r) : dtr__baseline(r);
            t[b] = (dtr_cli_job_now() - t0) * 1e6;
            if (!dtr_cli_all_ok("run", st, r->rank, b == 0 ? "redistribute" : "baseline"))
                return false;
        }
        dtr_cli_job_reduce(t, 2, DTR_F64, DTR_REDUCE_MAX);
        r->times[k] = t[0];
        r->times[o->iters + k] = t[1];
        if (r->rank == 0) dtr_cli_progress(&prog, "run", "timed iterations", k + 1, o->iters);
    }
    r->med = dtr_cli_median(r->times, (int)o->iters);
    r->base = dtr_cli_median(r->times + o->iters, (int)o->iters);
    return true;
}

/* After the set-up: run, check, the backward plan, time, report. An exit code, the same on
 * every rank. */
static int dtr__run_phases(dtr_cli_run_t *r) {
    const dtr_cli_change_t *o = r->o;
    if (!dtr__setup_buffers(r) || !dtr__first_run(r) || !dtr_cli_run_check(r))
        return r->fail_code != DTR_EXIT_OK ? r->fail_code : DTR_EXIT_FAIL;
    if (o->backward && !dtr_cli_run_backward(r)) return DTR_EXIT_FAIL;
    if (!dtr__timing(r)) return DTR_EXIT_FAIL;
    r->ok = !o->verify || (r->fwd.rep.mismatches == 0 && r->fwd.input_changed == 0 &&
                           r->bwd.rep.mismatches == 0);
    if (o->digest && dtr_cli_digest_failed(1, &r->digest, &r->src, &r->dst, false)) r->ok = false;
    /* which groups went through shared memory (inside a node) and which through MPI */
    r->mpi = strcmp(dtr_context_backend(r->ctx), "mpi") == 0;
    for (int k = 0; k < r->plan->nsteps; k++)
        r->steps_across += dtr_step_across_nodes(r->plan, k, r->across);
    if (r->mpi) dtr_cli_mpi_paths(r->paths);
    if (r->rank == 0) dtr_cli_run_report(r);
    int ok = r->ok;
    dtr_cli_job_bcast(&ok, sizeof ok, 0);
    return ok ? DTR_EXIT_OK : DTR_EXIT_FAIL;
}

static void dtr__run_free(dtr_cli_run_t *r) {
    free(r->all);
    free(r->bplan);
    dtr_fill_blocks_destroy(r->data.blocks);
    if (r->ctx != NULL) {
        dtr_context_free(r->ctx, r->sin);
        dtr_context_free(r->ctx, r->sout);
    }
    dtr_context_destroy(r->ctx);
    dtr_cli_dev_free(&r->eng, r->din, r->in);
    dtr_cli_dev_free(&r->eng, r->dout, r->out);
    dtr_cli_engine_end(&r->eng);
    free(r->in);
    free(r->copy);
    free(r->out);
    free(r->times);
    dtr_change_destroy(r->change);
    dtr_mesh_destroy(r->mesh);
}

static int dtr__run(int argc, char **argv, int rank, int world) {
    if (dtr_cli_change_is_batch(argc, argv)) return dtr_cli_run_batch(argc, argv, rank, world);
    dtr_cli_change_t o;
    int rc = dtr_cli_change_parse("run", DTR_CLI_RUN, argc, argv, &o);
    if (rc != DTR_EXIT_OK || o.help) {
        if (o.help && rank == 0) dtr__run_help(stdout);
        return rc;
    }
    dtr_cli_run_t r = {.o = &o, .rank = rank, .world = world, .first_bad = -1};
    rc = dtr_cli_change_check("run", DTR_CLI_RUN, world, &o, &r.eng);
    if (rc == DTR_EXIT_OK && o.to_mesh != NULL) {
        rc = dtr_cli_run_cross(&o, rank, world);
        dtr__run_free(&r);
        return rc;
    }
    r.data = (dtr_cli_source_t){.fill = o.fill, .input = o.input};
    if (rc == DTR_EXIT_OK) rc = dtr__setup_plan(&r);
    if (rc == DTR__BETWEEN) { /* a ragged shard that moves: between meshes, onto --mesh */
        dtr_cli_ragged_onto_mesh(&o);
        rc = dtr_cli_run_cross(&o, rank, world);
        dtr__run_free(&r);
        return rc;
    }
    if (rc == DTR_EXIT_OK) {
        /* from here on errors are per rank (each prints its own); every rank learns whether
         * any failed */
        dtr_cli_restore_stderr();
        rc = dtr__run_phases(&r);
    }
    dtr__run_free(&r);
    return rc;
}

static int dtr__run_main(int argc, char **argv) {
    return dtr_cli_job_main("run", dtr__run, argc, argv);
}

const dtr_cli_command_t dtr_cli_run = {
    .name = "run",
    .summary = "run a redistribution under mpirun: verify it and time it against its collectives",
    .main = dtr__run_main,
    .help = dtr__run_help,
};
