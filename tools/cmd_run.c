/* dtr run: a real redistribution under mpirun, verified and timed against its bare
 * collectives. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "redistribute/mpi/dtr_mpi.h"
#include "tools/cli.h"
#include "tools/pattern/pattern.h"

static void dtr__run_help(FILE *out) {
    fputs(
        "usage: mpirun -n N dtr run --mesh MESH --shape SHAPE --from LIST --to LIST\n"
        "                [--dtype DTYPE] [--to-dtype DTYPE] [--ranks LIST]\n"
        "                [--strategy optimal|compat] [--iters N] [--warmup N] [--verify]\n"
        "                [--nonblocking] [--backward [--backward-dtype DTYPE]]\n"
        "                [--fill pattern|random] [--seed S] [--input DIR] [--dump DIR]\n"
        "                [--json] [--backend mpi|nccl] [--device cpu|cuda]\n"
        "                [--buffers private|shared]\n"
        "       mpirun -n N dtr run --mesh MESH --batch FILE [--ranks LIST] [--strategy S]\n"
        "                [--iters N] [--warmup N] [--verify] [--nonblocking] [--json]\n"
        "                [--fill pattern|random] [--seed S]\n"
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
        "                       precision show (tools/pattern/pattern.h says how they are drawn)\n"
        "  --seed S             the random fill's seed (default 1; printed with the result)\n"
        "  --input DIR          each rank reads its source block from DIR/rankR.in, raw bytes as\n"
        "                       --dump writes them (with --backward the gradient from\n"
        "                       DIR/rankR.grad_in); with --verify every rank reads every file\n"
        "  --nonblocking        use dtr_redistribute_start and dtr_request_test\n"
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
        "                       are those 'dtr layout' gives for R\n"
        "  --nodes-of DIMS      the mesh dims the plan's cost treats as spanning nodes\n"
        "                       (dtr plan --nodes-of): auto (default) asks MPI where the\n"
        "                       ranks run; none plans as on one node; or '0', '0,2'. The\n"
        "                       output says which mesh dims really cross nodes either way\n"
        "                       (inter-node figures: DTR_INTER_ALPHA_US,\n"
        "                       DTR_INTER_BANDWIDTH_GBPS; docs/nodes.md)\n"
        "  --json               one JSON object on rank 0\n"
        "                       (the last line, and \"groups\" in the JSON, count the MPI\n"
        "                       backend's groups over the job: those whose ranks share a node\n"
        "                       and their operations through shared memory and MPI, those\n"
        "                       across nodes and theirs through MPI and in the hierarchical\n"
        "                       form, over all runs: docs/nodes.md)\n"
        "  --backend B          mpi (default: Open MPI) or nccl (one GPU per rank; implies\n"
        "                       --device cuda)\n"
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

typedef struct {
    dtr_context_t *ctx;
    const dtr_plan_t *plan;
    const void *in;
    size_t in_bytes;
    void *out;
    size_t out_bytes;
    bool nonblocking;
} dtr__job_t;

/* One redistribution, complete (on a GPU: the stream synchronised). */
static dtr_status_t dtr__once(const dtr__job_t *j) {
    dtr_status_t st;
    if (!j->nonblocking) {
        st = dtr_redistribute(j->ctx, j->plan, j->in, j->in_bytes, j->out, j->out_bytes);
    } else {
        dtr_request_t *req = NULL;
        st = dtr_redistribute_start(j->ctx, j->plan, j->in, j->in_bytes, j->out, j->out_bytes,
                                    &req);
        bool done = false;
        while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
    }
    return st == DTR_OK ? dtr_context_sync(j->ctx) : st;
}

static dtr_status_t dtr__baseline(dtr_context_t *ctx, const dtr_plan_t *plan) {
    dtr_status_t st = dtr_redistribute_baseline(ctx, plan);
    return st == DTR_OK ? dtr_context_sync(ctx) : st;
}

/* --backend / --device: what the context runs on, and the command's GPU copies. */
static dtr_cli_engine_t dtr__eng;

/* --dump: writes bytes to DIR/rank<R>.<what>; prints the error and returns false on failure. */
static bool dtr__dump(const char *dir, int rank, const char *what, const void *p, size_t n) {
    if (dir == NULL) return true;
    char path[4096];
    int len = snprintf(path, sizeof path, "%s/rank%d.%s", dir, rank, what);
    if (len < 0 || (size_t)len >= sizeof path) {
        fprintf(stderr, "dtr run: rank %d: --dump: path too long\n", rank);
        return false;
    }
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL && (n == 0 || fwrite(p, 1, n, f) == n);
    int err = errno;
    if (f != NULL && fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok)
        fprintf(stderr, "dtr run: rank %d: --dump: cannot write '%s': %s\n", rank, path,
                strerror(err));
    return ok;
}

/* Whether ok holds on every rank (collective). */
static bool dtr__all_true(bool ok) {
    int mine = ok, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all != 0;
}

/* One rank's check: its report, and whether its input was written. */
typedef struct {
    dtr_pattern_report_t rep;
    int64_t input_changed;
} dtr__verdict_t;

/* Where the source values come from: --fill, or --input (every rank's block loaded for
 * --verify). */
typedef struct {
    dtr_fill_t fill;
    const char *input;       /* --input DIR, or NULL */
    dtr_fill_blocks_t *blocks; /* every rank's block, for --verify with --input */
} dtr__data_t;

/* Fills this rank's block of spec (the forward source, or the gradient with suffix
 * "grad_in"), and with verify loads what the check needs. */
static dtr_status_t dtr__source_fill(dtr__data_t *d, const dtr_spec_t *spec, const char *suffix,
                                     int rank, bool verify, void *buf, size_t bytes) {
    if (d->input == NULL) return dtr_fill(spec, &d->fill, rank, buf, bytes);
    dtr_status_t st = dtr_fill_read(d->input, suffix, rank, buf, bytes);
    if (st != DTR_OK || !verify) return st;
    dtr_fill_blocks_destroy(d->blocks);
    d->blocks = NULL;
    st = dtr_fill_load(spec, d->input, suffix, &d->blocks);
    d->fill.given = d->blocks;
    return st;
}

/* "verified: ..." for a check that passed: how close, against what tolerance. */
static void dtr__print_tolerance(FILE *out, const dtr_pattern_report_t *r, dtr_dtype_t dtype) {
    if (r->tolerance == 0) {
        fprintf(out, "exactly");
        return;
    }
    const char *scale = r->sum_scale ? "sum|x|" : "|want|";
    fprintf(out, "within |got - want| <= %.0f u %s (u = 2^%d for %s); largest error %.3g u %s",
            r->tolerance / r->unit, scale, (int)log2(r->unit), dtr_dtype_name(dtype),
            r->worst / r->unit, scale);
}

static void dtr__json_tolerance(FILE *out, const dtr_pattern_report_t *r) {
    double u = r->unit > 0 ? r->unit : 1;
    fprintf(out, "{\"exact\":%s,\"factor\":%.0f,\"u\":%.9g,\"scale\":\"%s\",\"worst_u\":%.6g}",
            r->tolerance == 0 ? "true" : "false", r->tolerance / u, r->unit,
            r->tolerance == 0 ? "none" : r->sum_scale ? "sum|x|" : "|want|", r->worst / u);
}

/* The verdicts of every rank folded into one: counts summed, tolerances the largest. */
static void dtr__fold(dtr__verdict_t *sum, const dtr__verdict_t *v) {
    sum->rep.mismatches += v->rep.mismatches;
    sum->rep.checked += v->rep.checked;
    sum->input_changed += v->input_changed;
    if (v->rep.tolerance > sum->rep.tolerance) sum->rep.tolerance = v->rep.tolerance;
    if (v->rep.unit > sum->rep.unit) sum->rep.unit = v->rep.unit;
    if (v->rep.worst > sum->rep.worst || isnan(v->rep.worst)) sum->rep.worst = v->rep.worst;
    sum->rep.sum_scale |= v->rep.sum_scale;
}

static int dtr__run(int argc, char **argv, int rank, int world) {
    /* the batch form has its own flags (cmd_run_batch.c); --help is this one's */
    bool batch = false, help = false;
    for (int k = 1; k < argc; k++) {
        batch = batch || strcmp(argv[k], "--batch") == 0 || strncmp(argv[k], "--batch=", 8) == 0;
        help = help || strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0;
    }
    if (batch && !help) return dtr_cli_run_batch(argc, argv, rank, world);
    static const struct option options[] = {
        DTR_CLI_SPEC_OPTIONS,
        {"from", required_argument, NULL, 'f'},
        {"to", required_argument, NULL, 't'},
        {"strategy", required_argument, NULL, 'S'},
        {"iters", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'},
        {"verify", no_argument, NULL, 'v'},
        {"nonblocking", no_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"inject-mismatch", required_argument, NULL, 'x'},
        {"backward", no_argument, NULL, 'b'},
        {"dump", required_argument, NULL, 'D'},
        {"backend", required_argument, NULL, 'B'},
        {"device", required_argument, NULL, 'V'},
        {"fill", required_argument, NULL, 'F'},
        {"seed", required_argument, NULL, 'E'},
        {"input", required_argument, NULL, 'I'},
        {"to-dtype", required_argument, NULL, 'T'},
        {"backward-dtype", required_argument, NULL, 'K'},
        {"nodes-of", required_argument, NULL, 'N'},
        {"buffers", required_argument, NULL, 'U'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    dtr_cli_spec_args_t args = {.placements_flag = "--from"};
    const char *to = NULL, *strategy_text = NULL, *iters_text = "20", *warmup_text = "3";
    const char *inject_text = NULL, *dump = NULL, *backend = "mpi", *device = NULL;
    const char *fill_text = "pattern", *seed_text = NULL, *input = NULL, *to_dtype = NULL;
    const char *backward_dtype_text = NULL, *nodes_of = "auto", *buffers = "private";
    int json = 0, verify = 0, nonblocking = 0, backward = 0;
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, ":h", options, NULL);
        if (c == -1) break;
        switch (c) {
        case 'f': args.placements = optarg; break;
        case 't': to = optarg; break;
        case 'S': strategy_text = optarg; break;
        case 'i': iters_text = optarg; break;
        case 'w': warmup_text = optarg; break;
        case 'v': verify = 1; break;
        case 'n': nonblocking = 1; break;
        case 'j': json = 1; break;
        case 'x': inject_text = optarg; break;
        case 'b': backward = 1; break;
        case 'D': dump = optarg; break;
        case 'B': backend = optarg; break;
        case 'V': device = optarg; break;
        case 'F': fill_text = optarg; break;
        case 'E': seed_text = optarg; break;
        case 'I': input = optarg; break;
        case 'T': to_dtype = optarg; break;
        case 'K': backward_dtype_text = optarg; break;
        case 'N': nodes_of = optarg; break;
        case 'U': buffers = optarg; break;
        case 'h':
            if (rank == 0) dtr__run_help(stdout);
            return DTR_EXIT_OK;
        default: /* a spec flag, or ':' / '?' */
            if (dtr_cli_spec_option(c, optarg, &args)) break;
            return dtr_cli_option_error("run", c, argv);
        }
    }
    if (optind < argc) return dtr_cli_option_error("run", 0, argv);
    dtr_dtype_t backward_dtype = DTR_F32;
    int brc = dtr_cli_backward_dtype("run", backward_dtype_text, backward, &backward_dtype);
    if (brc != DTR_EXIT_OK) return brc;
    int64_t iters, warmup, inject = -1;
    int rc = dtr_cli_parse_int("run", "--iters", iters_text, 0, 1000000, "a count 0..1000000",
                               &iters);
    if (rc == DTR_EXIT_OK)
        rc = dtr_cli_parse_int("run", "--warmup", warmup_text, 0, 1000000,
                               "a count 0..1000000", &warmup);
    if (rc == DTR_EXIT_OK && inject_text != NULL) {
        char what[48];
        snprintf(what, sizeof what, "a rank 0..%d", world - 1);
        rc = dtr_cli_parse_int("run", "--inject-mismatch", inject_text, 0, world - 1, what,
                               &inject);
    }
    dtr__data_t data = {.fill = {.kind = DTR_FILL_PATTERN, .seed = 1}, .input = input};
    if (rc == DTR_EXIT_OK && seed_text != NULL) {
        int64_t seed;
        rc = dtr_cli_parse_int("run", "--seed", seed_text, 0, INT64_MAX, "a seed 0..2^63-1",
                               &seed);
        data.fill.seed = (uint64_t)seed;
    }
    if (rc != DTR_EXIT_OK) return rc;
    if (strcmp(fill_text, "random") == 0)
        data.fill.kind = DTR_FILL_RANDOM;
    else if (strcmp(fill_text, "pattern") != 0)
        return dtr_cli_usage_error("run", "--fill: '%s' is not pattern or random", fill_text);
    if (seed_text != NULL && data.fill.kind != DTR_FILL_RANDOM)
        return dtr_cli_usage_error("run", "--seed: seeds the random fill only (add --fill "
                                          "random)");
    if (input != NULL && data.fill.kind == DTR_FILL_RANDOM)
        return dtr_cli_usage_error("run", "--input: reads the source blocks; --fill random "
                                          "fills them: pick one");
    if (input != NULL) data.fill.kind = DTR_FILL_GIVEN;
    if ((rc = dtr_cli_engine_args("run", backend, device, &dtr__eng)) != DTR_EXIT_OK) return rc;
    device = dtr__eng.device;
    bool shared = strcmp(buffers, "shared") == 0;
    if (!shared && strcmp(buffers, "private") != 0)
        return dtr_cli_usage_error("run", "--buffers: '%s' is not private or shared", buffers);
    if (shared && (dtr__eng.cuda || dtr__eng.nccl))
        return dtr_cli_usage_error("run", "--buffers shared: the MPI backend on CPU buffers "
                                          "only (--backend mpi --device cpu)");
    struct stat dump_st;
    if (dump != NULL && (stat(dump, &dump_st) != 0 || !S_ISDIR(dump_st.st_mode)))
        return dtr_cli_usage_error("run", "--dump: '%s' is not an existing directory", dump);
    if (input != NULL && (stat(input, &dump_st) != 0 || !S_ISDIR(dump_st.st_mode)))
        return dtr_cli_usage_error("run", "--input: '%s' is not an existing directory", input);
    dtr_strategy_t strategy = DTR_STRATEGY_OPTIMAL;
    if (strategy_text != NULL && dtr_strategy_parse(strategy_text, &strategy) != DTR_OK)
        return dtr_cli_lib_error("run", "--strategy");

    dtr_mesh_t *mesh = NULL;
    dtr_spec_t src, dst;
    rc = dtr_cli_build_spec("run", &args, &mesh, &src);
    if (rc != DTR_EXIT_OK) return rc;
    rc = dtr_cli_other_spec("run", "--to", to, &src, &dst);
    if (rc == DTR_EXIT_OK) rc = dtr_cli_cast_spec("run", to_dtype, &dst);
    if (rc != DTR_EXIT_OK) goto done_mesh;
    rc = dtr_cli_mesh_fits("run", mesh, world);
    if (rc != DTR_EXIT_OK) goto done_mesh;
    /* where the mesh dims run (reported), and which the plan's cost treats as crossing
     * nodes: by default (auto) where they run; none plans as on one node */
    dtr_cost_model_t cost;
    uint32_t across, planned_across;
    rc = dtr_cli_node_cost("run", mesh, nodes_of, &cost, &across, &planned_across);
    if (rc != DTR_EXIT_OK) goto done_mesh;
    dtr_plan_options_t opts = {.strategy = strategy, .cost = &cost};
    dtr_plan_t *plan = malloc(sizeof *plan);
    if (plan == NULL || dtr_plan_create(&src, &dst, &opts, plan) != DTR_OK) {
        rc = plan == NULL ? dtr_cli_usage_error("run", "out of memory")
                          : dtr_cli_plan_error("run", "--to");
        free(plan);
        goto done_mesh;
    }
    /* From here on errors are per rank (each prints its own); every rank learns whether any
     * failed. */
    dtr_cli_restore_stderr();
    rc = DTR_EXIT_FAIL;
    dtr_context_t *ctx = NULL;
    unsigned char *in = NULL, *copy = NULL, *out = NULL;
    void *din = NULL, *dout = NULL, *sin = NULL, *sout = NULL;
    double *times = NULL;
    dtr_layout_t sl = {0}, dl = {0};
    bool inside = dtr_spec_layout(&src, rank, &sl) == DTR_OK;
    if (inside) dtr_spec_layout(&dst, rank, &dl);
    size_t in_bytes = (size_t)sl.bytes, out_bytes = (size_t)dl.bytes;
    in = malloc(in_bytes + 1);
    copy = malloc(in_bytes + 1);
    out = malloc(out_bytes + 1);
    times = malloc(2 * (size_t)(iters + 1) * sizeof *times);
    dtr_status_t st = in && copy && out && times ? DTR_OK : DTR_ERR_OUT_OF_MEMORY;
    if (st != DTR_OK) fprintf(stderr, "dtr run: rank %d: out of memory\n", rank);
    if (st == DTR_OK) st = dtr_cli_engine_context(&dtr__eng, rank, &ctx);
    if (!dtr_cli_all_ok("run", st, rank, "context")) goto done;
    if (inside) st = dtr__source_fill(&data, &src, "in", rank, verify, in, in_bytes);
    if (!dtr_cli_all_ok("run", st, rank, input != NULL ? "--input" : "fill")) goto done;
    memcpy(copy, in, in_bytes);
    st = dtr_cli_dev_put(&dtr__eng, in, in_bytes, &din);
    if (st == DTR_OK) st = dtr_cli_dev_put(&dtr__eng, out, out_bytes, &dout);
    if (!dtr_cli_all_ok("run", st, rank, "device buffers")) goto done;
    if (shared) { /* collective: every rank of the context allocates, outside the mesh too */
        st = dtr_context_alloc(ctx, (int64_t)in_bytes + 1, &sin);
        if (st == DTR_OK) st = dtr_context_alloc(ctx, (int64_t)out_bytes + 1, &sout);
        if (!dtr_cli_all_ok("run", st, rank, "--buffers shared")) goto done;
        memcpy(sin, in, in_bytes);
        din = sin;
        dout = sout;
    }
    dtr__job_t job = {ctx, plan, din, in_bytes, dout, out_bytes, nonblocking != 0};
    st = dtr__once(&job);
    if (st == DTR_OK) st = dtr_cli_dev_get(&dtr__eng, out, dout, out_bytes);
    if (st == DTR_OK) st = dtr_cli_dev_get(&dtr__eng, in, din, in_bytes);
    if (st == DTR_OK && shared) {
        memcpy(out, sout, out_bytes);
        memcpy(in, sin, in_bytes);
    }
    if (!dtr_cli_all_ok("run", st, rank, "redistribute")) goto done;

    dtr__verdict_t v = {0};
    v.rep.first = -1;
    if (inject == rank && out_bytes > 0) out[out_bytes - 1] ^= 0x5a; /* the checker's own test */
    if (!dtr__all_true(!inside || (dtr__dump(dump, rank, "in", in, in_bytes) &&
                                   dtr__dump(dump, rank, "out", out, out_bytes))))
        goto done;
    if (verify && inside) {
        st = dtr_fill_check(&src, &dst, &data.fill, rank, out, out_bytes, &v.rep);
        v.input_changed = memcmp(in, copy, in_bytes) != 0;
    }
    if (!dtr_cli_all_ok("run", st, rank, "check")) goto done;
    /* Rank 0 gathers the verdicts to name the first failing rank. */
    dtr__verdict_t *all = rank == 0 ? calloc((size_t)world, sizeof *all) : NULL;
    MPI_Gather(&v, (int)sizeof v, MPI_BYTE, all, (int)sizeof v, MPI_BYTE, 0, MPI_COMM_WORLD);
    dtr__verdict_t fwd = {0};
    int first_bad = -1;
    if (rank == 0) {
        for (int r = 0; r < world; r++) {
            dtr__fold(&fwd, &all[r]);
            if (first_bad < 0 && (all[r].rep.mismatches > 0 || all[r].input_changed)) first_bad = r;
        }
    }
    int64_t mismatches = fwd.rep.mismatches, checked = fwd.rep.checked, changed = fwd.input_changed;

    /* The backward plan: a gradient in dst's placements goes back to src's (autograd.h). */
    dtr_plan_t *bplan = NULL;
    int64_t bwd_bad = 0, bwd_checked = 0;
    dtr__verdict_t bwd = {0};
    if (backward) {
        bplan = malloc(sizeof *bplan);
        st = bplan == NULL ? DTR_ERR_OUT_OF_MEMORY
             : backward_dtype_text != NULL
                 ? dtr_plan_backward_in(&src, &dst, backward_dtype, &opts, bplan)
                 : dtr_plan_backward(&src, &dst, &opts, bplan);
        if (!dtr_cli_all_ok("run", st, rank, "backward plan")) goto done_all;
        /* the gradient's values: other random values than the forward's, or the files' */
        dtr__data_t grad = {.fill = data.fill, .input = input};
        grad.fill.seed ^= 0x5bd1e995u;
        dtr_layout_t gl = {0}, tl = {0};
        if (inside) {
            dtr_spec_layout(&dst, rank, &gl);
            dtr_spec_layout(&bplan->dst, rank, &tl);
        }
        unsigned char *gin = malloc((size_t)gl.bytes + 1), *gcopy = malloc((size_t)gl.bytes + 1);
        unsigned char *gout = malloc((size_t)tl.bytes + 1);
        st = gin && gcopy && gout ? DTR_OK : DTR_ERR_OUT_OF_MEMORY;
        if (st == DTR_OK && inside)
            st = dtr__source_fill(&grad, &dst, "grad_in", rank, verify, gin, (size_t)gl.bytes);
        void *dgin = NULL, *dgout = NULL;
        if (st == DTR_OK) {
            memcpy(gcopy, gin, (size_t)gl.bytes);
            st = dtr_cli_dev_put(&dtr__eng, gin, (size_t)gl.bytes, &dgin);
            if (st == DTR_OK) st = dtr_cli_dev_put(&dtr__eng, gout, (size_t)tl.bytes, &dgout);
            if (st == DTR_OK)
                st = dtr_redistribute(ctx, bplan, dgin, (size_t)gl.bytes, dgout, (size_t)tl.bytes);
            if (st == DTR_OK) st = dtr_context_sync(ctx);
            if (st == DTR_OK) st = dtr_cli_dev_get(&dtr__eng, gout, dgout, (size_t)tl.bytes);
            if (st == DTR_OK) st = dtr_cli_dev_get(&dtr__eng, gin, dgin, (size_t)gl.bytes);
        }
        dtr_cli_dev_free(&dtr__eng, dgin, gin);
        dtr_cli_dev_free(&dtr__eng, dgout, gout);
        bool dumped = st != DTR_OK || !inside ||
                      (dtr__dump(dump, rank, "grad_in", gin, (size_t)gl.bytes) &&
                       dtr__dump(dump, rank, "grad_out", gout, (size_t)tl.bytes));
        dtr__verdict_t bv = {0};
        if (st == DTR_OK && verify && inside) {
            st = dtr_fill_check_via(&dst, &bplan->dst, bplan->op_dtype, &grad.fill, rank, gout,
                                    (size_t)tl.bytes, &bv.rep);
            bv.rep.mismatches += memcmp(gin, gcopy, (size_t)gl.bytes) != 0;
        }
        free(gin);
        free(gcopy);
        free(gout);
        dtr_fill_blocks_destroy(grad.blocks);
        if (!dtr_cli_all_ok("run", st, rank, "backward") || !dtr__all_true(dumped)) goto done_all;
        dtr__verdict_t *ball = rank == 0 ? calloc((size_t)world, sizeof *ball) : NULL;
        MPI_Gather(&bv, (int)sizeof bv, MPI_BYTE, ball, (int)sizeof bv, MPI_BYTE, 0,
                   MPI_COMM_WORLD);
        for (int r = 0; rank == 0 && r < world; r++) dtr__fold(&bwd, &ball[r]);
        free(ball);
        bwd_bad = bwd.rep.mismatches;
        bwd_checked = bwd.rep.checked;
    }

    for (long k = 0; k < warmup; k++) {
        st = dtr__once(&job);
        if (st == DTR_OK) st = dtr__baseline(ctx, plan);
        if (!dtr_cli_all_ok("run", st, rank, "warm-up")) goto done_all;
    }
    for (long k = 0; k < iters; k++) {
        double t[2], tmax[2];
        for (int bb = 0; bb < 2; bb++) {
            int b = (k % 2) ? 1 - bb : bb; /* alternate which goes first */
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            st = b == 0 ? dtr__once(&job) : dtr__baseline(ctx, plan);
            t[b] = (MPI_Wtime() - t0) * 1e6;
            if (!dtr_cli_all_ok("run", st, rank, b == 0 ? "redistribute" : "baseline")) goto done_all;
        }
        MPI_Allreduce(t, tmax, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        times[k] = tmax[0];
        times[iters + k] = tmax[1];
    }
    double med = dtr_cli_median(times, (int)iters), base = dtr_cli_median(times + iters, (int)iters);
    bool fwd_ok = !verify || (mismatches == 0 && changed == 0);
    bool ok = fwd_ok && (!verify || bwd_bad == 0);
    /* which groups went through shared memory (inside a node) and which through MPI */
    long long paths[7] = {0, 0, 0, 0, 0, 0, 0};
    bool mpi = strcmp(dtr_context_backend(ctx), "nccl") != 0;
    int steps_across = 0;
    for (int k = 0; k < plan->nsteps; k++) steps_across += dtr_step_across_nodes(plan, k, across);
    if (mpi) dtr_cli_mpi_paths(paths);
    if (rank == 0) {
        char shape[128], from[128], tostr[128], meshtext[64];
        dtr_shape_format(src.shape, src.ndim, shape, sizeof shape);
        dtr_placements_format(src.placements, dtr_mesh_ndims(mesh), from, sizeof from);
        dtr_placements_format(dst.placements, dtr_mesh_ndims(mesh), tostr, sizeof tostr);
        dtr_mesh_format(mesh, meshtext, sizeof meshtext);
        /* the checks count values: a complex element is two */
        const char *unit = dtr_dtype_info(src.dtype)->is_complex ? "values (real, imaginary)"
                                                                  : "elements";
        if (json) {
            printf("{\"verified\":%s,\"mismatches\":%lld,\"checked\":%lld,\"input_intact\":%s,",
                   verify ? (ok ? "true" : "false") : "null", (long long)mismatches,
                   (long long)checked, changed == 0 ? "true" : "false");
            printf("\"fill\":\"%s\",", fill_text);
            if (data.fill.kind == DTR_FILL_RANDOM)
                printf("\"seed\":%llu,", (unsigned long long)data.fill.seed);
            if (verify) {
                printf("\"tolerance\":");
                dtr__json_tolerance(stdout, &fwd.rep);
                printf(",");
            }
            printf("\"median_us\":%.3f,\"baseline_median_us\":%.3f,\"overhead_ratio\":%.4f,", med,
                   base, base > 0 ? med / base : 0.0);
            printf("\"iters\":%ld,\"recv_bytes_per_rank_max\":%lld,\"collectives\":", iters,
                   (long long)plan->recv_bytes_max);
            dtr_cli_json_collectives(stdout, plan);
            printf(",\"steps\":%d,\"strategy\":\"%s\",\"backend\":\"%s\",\"device\":\"%s\","
                   "\"buffers\":\"%s\",\"ranks\":%d,\"mesh\":\"%s\",\"shape\":\"%s\","
                   "\"dtype\":\"%s\",\"to_dtype\":\"%s\",\"from\":\"%s\",\"to\":\"%s\"",
                   plan->nsteps, dtr_strategy_name(strategy), dtr_context_backend(ctx), device,
                   buffers,
                   world, meshtext, shape, dtr_dtype_name(src.dtype), dtr_dtype_name(dst.dtype),
                   from, tostr);
            printf(",\"mesh_dims_across_nodes\":[");
            for (int i = 0, first = 1; i < dtr_mesh_ndims(mesh); i++)
                if (across & (1u << i)) {
                    printf("%s%d", first ? "" : ",", i);
                    first = 0;
                }
            printf("],\"steps_across_nodes\":%d,\"node_aware\":%s", steps_across,
                   planned_across != 0 ? "true" : "false");
            if (mpi)
                printf(",\"groups\":{\"shared_memory\":%lld,\"shm_ops\":%lld,\"mpi_ops\":%lld,"
                       "\"mpi_only\":%lld,\"mpi_only_ops\":%lld,\"hier_ops\":%lld,"
                       "\"direct_ops\":%lld}",
                       paths[0], paths[1], paths[2], paths[3], paths[4], paths[5], paths[6]);
            if (bplan != NULL) {
                printf(",\"backward\":{\"placements\":");
                dtr_cli_json_placements(stdout, bplan->dst.placements, dtr_mesh_ndims(mesh));
                printf(",\"verified\":%s,\"mismatches\":%lld,\"checked\":%lld,\"steps\":%d,"
                       "\"collectives\":",
                       verify ? (bwd_bad == 0 ? "true" : "false") : "null", (long long)bwd_bad,
                       (long long)bwd_checked, bplan->nsteps);
                dtr_cli_json_collectives(stdout, bplan);
                if (verify) {
                    printf(",\"tolerance\":");
                    dtr__json_tolerance(stdout, &bwd.rep);
                }
                printf(",\"op_dtype\":\"%s\"}", dtr_dtype_name(bplan->op_dtype));
            }
            if (first_bad >= 0)
                printf(",\"first_mismatch\":{\"rank\":%d,\"index\":%lld,\"got\":%.9g,\"want\":%.9g}",
                       first_bad, (long long)all[first_bad].rep.first, all[first_bad].rep.got,
                       all[first_bad].rep.want);
            printf("}\n");
        } else {
            char cast[32] = "";
            if (dst.dtype != src.dtype)
                snprintf(cast, sizeof cast, " (to %s)", dtr_dtype_name(dst.dtype));
            printf("dtr run: mesh %s, shape %s %s%s, %s -> %s, %s plan, %d ranks (%s backend, "
                   "%s buffers)\n",
                   meshtext, shape, dtr_dtype_name(src.dtype), cast, from, tostr,
                   dtr_strategy_name(strategy), world, dtr_context_backend(ctx), device);
            printf("  %d step%s:", plan->nsteps, plan->nsteps == 1 ? "" : "s");
            for (int k = 0; k < plan->nsteps; k++)
                printf("%s %s", k ? "," : "", dtr_step_kind_info(plan->steps[k].kind)->name);
            printf("; most bytes one rank receives: %lld\n", (long long)plan->recv_bytes_max);
            if (across != 0) {
                bool one = (across & (across - 1)) == 0;
                printf("  nodes: mesh dim%s", one ? "" : "s");
                for (int i = 0, first = 1; i < dtr_mesh_ndims(mesh); i++)
                    if (across & (1u << i)) {
                        printf("%s%d", first ? " " : ",", i);
                        first = 0;
                    }
                printf(" cross%s nodes; %d of the %d steps move data between nodes (planned %s)\n",
                       one ? "es" : "", steps_across, plan->nsteps,
                       planned_across != 0 ? "node-aware, --nodes-of" : "as on one node");
            }
            if (data.fill.kind == DTR_FILL_RANDOM)
                printf("  fill: random, seed %llu\n", (unsigned long long)data.fill.seed);
            else
                printf("  fill: %s\n", input != NULL ? input : "pattern");
            if (verify && fwd_ok) {
                printf("  verified: all %lld %s on every rank match ", (long long)checked, unit);
                dtr__print_tolerance(stdout, &fwd.rep, dst.dtype);
                printf("; inputs intact\n");
            }
            if (bplan != NULL) {
                char bp[128], gp[128];
                dtr_placements_format(bplan->dst.placements, dtr_mesh_ndims(mesh), bp, sizeof bp);
                dtr_placements_format(dst.placements, dtr_mesh_ndims(mesh), gp, sizeof gp);
                printf("  backward: gradient %s -> %s, %d step%s", gp, bp, bplan->nsteps,
                       bplan->nsteps == 1 ? "" : "s");
                if (bplan->op_dtype != bplan->dst.dtype)
                    printf(" in %s", dtr_dtype_name(bplan->op_dtype));
                if (verify && bwd_bad == 0) {
                    printf("; verified: all %lld %s match ", (long long)bwd_checked, unit);
                    /* (rounded to the coarser of the gradient's steps' and result's dtypes) */
                    dtr_dtype_t op = bplan->op_dtype;
                    bool coarser = dtr_dtype_info(op)->size < dtr_dtype_info(src.dtype)->size ||
                                   (op == DTR_BF16 && src.dtype == DTR_F16);
                    dtr__print_tolerance(stdout, &bwd.rep, coarser ? op : src.dtype);
                }
                printf("\n");
            }
            if (iters > 0)
                printf("  median of %ld iterations: %.1f us; baseline (the plan's collectives "
                       "alone) %.1f us; overhead ratio %.3f\n",
                       iters, med, base, base > 0 ? med / base : 0.0);
            if (mpi)
                printf("  groups: %lld on one node, through shared memory (%lld operations; "
                       "%lld through MPI), %lld across nodes (%lld operations through MPI, "
                       "%lld hierarchical)\n",
                       paths[0], paths[1], paths[2], paths[3], paths[4], paths[5]);
            if (mpi && paths[6] > 0)
                printf("  reductions reading the members' shared buffers where they are: "
                       "%lld\n",
                       paths[6]);
        }
        if (fwd_ok && !ok)
            fprintf(stderr, "dtr run: backward verification failed: %lld %s wrong or "
                            "inputs written\n",
                    (long long)bwd_bad, unit);
        if (!fwd_ok) {
            const dtr__verdict_t *b = &all[first_bad];
            char held[96] = "compared exactly";
            if (fwd.rep.tolerance > 0)
                snprintf(held, sizeof held, "allowed: |got - want| <= %.0f u %s",
                         fwd.rep.tolerance / fwd.rep.unit, fwd.rep.sum_scale ? "sum|x|" : "|want|");
            if (b->rep.mismatches > 0)
                fprintf(stderr,
                        "dtr run: verification failed: %lld of %lld %s wrong; first on "
                        "rank %d at local index %lld: got %.9g, want %.9g (%s)\n",
                        (long long)mismatches, (long long)checked, unit, first_bad,
                        (long long)b->rep.first, b->rep.got, b->rep.want, held);
            else
                fprintf(stderr, "dtr run: verification failed: rank %d's input was written\n",
                        first_bad);
        }
    }
    int okint = ok;
    MPI_Bcast(&okint, 1, MPI_INT, 0, MPI_COMM_WORLD);
    rc = okint ? DTR_EXIT_OK : DTR_EXIT_FAIL;
done_all:
    free(all);
    free(bplan);
done:
    dtr_fill_blocks_destroy(data.blocks);
    if (ctx != NULL) {
        dtr_context_free(ctx, sin);
        dtr_context_free(ctx, sout);
    }
    dtr_context_destroy(ctx);
    dtr_cli_dev_free(&dtr__eng, din, in);
    dtr_cli_dev_free(&dtr__eng, dout, out);
    dtr_cli_engine_end(&dtr__eng);
    free(in);
    free(copy);
    free(out);
    free(times);
    free(plan);
done_mesh:
    dtr_mesh_destroy(mesh);
    return rc;
}

static int dtr__run_main(int argc, char **argv) {
    return dtr_cli_mpi_main("run", dtr__run, argc, argv);
}

const dtr_cli_command_t dtr_cli_run = {
    .name = "run",
    .summary = "run a redistribution under mpirun: verify it and time it against its collectives",
    .main = dtr__run_main,
    .help = dtr__run_help,
};
