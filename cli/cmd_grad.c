/* dtr grad: gradient reduction (DDP, FSDP, HSDP) on synthetic gradients with known means. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/mpi/dtr_mpi.h"
#include "cli/cli.h"

static void dtr__grad_help(FILE *out) {
    fputs(
        "usage: mpirun -n N dtr grad --mode ddp|fsdp|hsdp --mesh MESH [--dtype DTYPE]\n"
        "                 [--numel N | --shape SHAPE [--shard-dim D]] [--microbatches M]\n"
        "                 [--factor F] [--force-sum] [--base B] [--step S] [--ranks LIST]\n"
        "                 [--verify] [--json] [--backend mpi|gloo|nccl] [--device cpu|cuda]\n"
        "                 [--iters K] [--warmup W]\n"
        "       dtr grad --dry-run --world N [--mode MODE] [--mesh MESH] [--dtype DTYPE]\n"
        "                 [--factor F] [--force-sum] [--json]\n"
        "       mpirun -n N dtr grad --mode ddp|fsdp|hsdp --mesh MESH --model gpt2-small|FILE\n"
        "                 [--dtype DTYPE] [--microbatches M] [--iters K] [--warmup W] [--verify]\n"
        "                 [--json] [--backend mpi|gloo|nccl] [--device cpu|cuda]\n"
        "       tools/dtr_launch.sh -n N dtr grad ... --backend gloo   (no MPI)\n"
        "\n"
        "Reduces synthetic gradients to their mean over the data-parallel ranks, the way a\n"
        "training step does, and with --verify checks every element against the exact mean.\n"
        "Rank p's gradient for microbatch m (p its place on the mesh, m = 0..M-1) holds, at\n"
        "element k, (B + S * ((7k + 13p + 5m) mod 16 - 8)) / M: the division by M is the\n"
        "loss scaling of gradient accumulation, so the result is the mean over all ranks and\n"
        "all microbatches (with --factor F: their sum divided by F). Gradients are f32 (the\n"
        "parameter dtype); --dtype is the dtype the reduction runs in (on the wire).\n"
        "\n"
        "modes:\n"
        "  ddp    every rank holds the whole gradient; microbatches accumulate locally, then\n"
        "         one hook over the whole mesh: f32 the all-reduce hook (divide by N, SUM);\n"
        "         f16 / bf16 the compress hooks (cast down, divide, SUM, cast back)\n"
        "  fsdp   reduce-scatter over the whole mesh: each rank keeps its torch.chunk shard\n"
        "         of dim --shard-dim (uneven dims are padded for the collective)\n"
        "  hsdp   reduce-scatter over the last mesh dim (the shard group), then all-reduce\n"
        "         over the others (the replicate group; on a 2-D mesh dim 0); microbatches\n"
        "         before the last skip the all-reduce and keep their reduce-scatter output\n"
        "  fsdp and hsdp divide at run time: D = shard group x replicate group; f32 and bf16\n"
        "  reduce with AVG (MPI: SUM, then divide), f16 with SUM and the pre/post factors of D\n"
        "  (f = 1; while D % f == 0 and D / f > f: f *= 2; pre f, post D / f)\n"
        "\n"
        "  --mesh, --ranks       as for 'dtr layout'\n"
        "  --dtype DTYPE         f32 (default), bf16, f16 or f64\n"
        "  --numel N             a 1-D gradient of N elements (default 1000003)\n"
        "  --shape SHAPE         the gradient's shape instead, e.g. 6x1001\n"
        "  --shard-dim D         the tensor dim fsdp/hsdp shard (default 0)\n"
        "  --microbatches M      gradient accumulation over M microbatches (default 1)\n"
        "  --factor F            fsdp/hsdp: divide by F instead of D\n"
        "  --force-sum           fsdp/hsdp: SUM collectives and explicit divides, never AVG\n"
        "  --base B, --step S    the gradient values above (defaults 0 and 1); e.g. --base\n"
        "                        59904 --step 256 puts fp16 values near 60000\n"
        "  --verify              compare every element on every rank with the exact mean\n"
        "                        (after the first round; then the timed rounds)\n"
        "  --iters K             timed rounds after the checked one (default 5; 0: none):\n"
        "                        the median of the slowest rank, beside the same step's\n"
        "                        collectives alone (the baseline), as dtr run times\n"
        "  --warmup W            untimed rounds before them (default 1)\n"
        "  --json                one JSON object on rank 0\n"
        "  --backend B           mpi (default: Open MPI, under mpirun), gloo (no MPI: under\n"
        "                        tools/dtr_launch.sh or torchrun; CPU buffers) or nccl (one\n"
        "                        GPU per rank; implies\n"
        "                        --device cuda; a pre-divide is NCCL's pre-multiplied SUM)\n"
        "  --device D            cpu (default) or cuda: the gradients, the outputs and every\n"
        "                        buffer of the reduction are memory of GPU (rank mod the GPUs\n"
        "                        visible), with casts, divides and accumulation as kernels;\n"
        "                        with the MPI backend several ranks may share a GPU (each\n"
        "                        collective staged through host memory). Needs a dtr built\n"
        "                        with CUDA (and NCCL for nccl) and a visible GPU; --model\n"
        "                        too (its fills and checks copy through host memory)\n"
        "  --dry-run --world N   print the factors and collectives for N ranks; no MPI\n"
        "\n"
        "a model (--model): every parameter's gradient (f32, sharded on dim 0) reduced three\n"
        "ways, side by side in each of K timed rounds after W warm-up ones (medians printed):\n"
        "per tensor (one dtr_reducer per parameter), as parameter groups (one group per\n"
        "layer: one reduce-scatter into a fused 512-byte-aligned buffer, one all-reduce,\n"
        "pipelined in backward order: dtr_param_group_*, dtr_grad_pipeline_*), and the\n"
        "baseline: one bare reduce-scatter of all the elements per microbatch plus one\n"
        "all-reduce, the collectives alone. Element k of parameter i on rank p, microbatch m\n"
        "is ((7k + 13p + 5m + 3i) mod 16 - 8) / M (k, p, m, i taken mod 16 first); --verify\n"
        "checks both real ways against the exact mean over every rank and microbatch.\n"
        "  --model gpt2-small    GPT-2 124M: wte 50257x768, wpe 1024x768, 12 blocks (ln_1,\n"
        "                        attn 768x2304 + bias, proj 768x768 + bias, ln_2, mlp\n"
        "                        768x3072 + bias, 3072x768 + bias), ln_f; 148 tensors,\n"
        "                        124439808 elements; groups: root (wte, wpe, ln_f), h.0..h.11\n"
        "  --model FILE          a JSON list [{\"shape\": \"768x2304\", \"group\": \"h.0\"}, ...];\n"
        "                        group optional (alone without one); groups run last-first;\n"
        "                        a shape also as an array, [768, 2304]\n"
        "  --iters K             timed rounds (default 5; 0: none, the checked round only)\n"
        "  --warmup W            untimed rounds before them (default 1)\n"
        "  -h, --help            this help\n"
        "\n"
        "examples:\n"
        "  mpirun -n 8 dtr grad --mode hsdp --mesh 2x4 --dtype bf16 --microbatches 2 --verify\n"
        "  mpirun -n 8 dtr grad --mode ddp --mesh 8 --dtype f16 --base 59904 --step 256 --verify\n"
        "  mpirun -n 8 dtr grad --mode hsdp --mesh 2x4 --dtype bf16 --device cuda --verify\n"
        "  dtr grad --dry-run --world 12 --dtype f16\n"
        "  mpirun -n 8 dtr grad --mode hsdp --mesh 2x4 --model gpt2-small --dtype bf16 --verify\n"
        "\n"
        "Exit status: 0 done (and verified with --verify); 1 a wrong or non-finite element, or\n"
        "a rank's call failed; 2 bad arguments.\n",
        out);
}

typedef enum { DTR__DDP = 0, DTR__FSDP, DTR__HSDP } dtr__mode_t;
static const char *const dtr__mode_names[] = {"ddp", "fsdp", "hsdp"};

typedef struct {
    dtr__mode_t mode;
    dtr_dtype_t dtype;
    int ndim;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int shard_dim;
    int64_t microbatches, iters, warmup;
    double factor, base, step;
    bool force_sum, verify, json, dry_run;
    int64_t world; /* --world, for --dry-run */
    dtr_cli_spec_args_t spec;
    dtr_cli_engine_t eng; /* --backend, --device */
} dtr__grad_args_t;

/* What the reduction does: groups, factors, collectives. */
typedef struct {
    unsigned shard_dims, replicate_dims;
    dtr_grad_factors_t f; /* group sizes, factors and ops */
    const char *ops[2];
    int nops;
} dtr__grad_plan_t;

/* The groups of a mode on a mesh of nd dims (the sizes in sizes[]). */
static int dtr__grad_plan(const dtr__grad_args_t *a, int nd, const int64_t *sizes,
                          dtr__grad_plan_t *p) {
    memset(p, 0, sizeof *p);
    unsigned all = (1u << nd) - 1;
    if (a->mode == DTR__HSDP && nd < 2)
        return dtr_cli_usage_error("grad",
                                   "--mesh: hsdp needs a mesh of 2 or more dims (the last is "
                                   "the shard group, the others the replicate group)");
    if (a->mode == DTR__DDP && (a->factor > 0 || a->force_sum))
        return dtr_cli_usage_error("grad",
                                   "%s: the DDP hooks divide by the world size (use --mode fsdp "
                                   "or hsdp)",
                                   a->factor > 0 ? "--factor" : "--force-sum");
    if (a->mode == DTR__FSDP) p->shard_dims = all;
    if (a->mode == DTR__HSDP) p->shard_dims = 1u << (nd - 1);
    if (a->mode != DTR__FSDP) p->replicate_dims = all & ~p->shard_dims; /* ddp: every dim */
    int64_t rs = 1, ar = 1;
    for (int i = 0; i < nd; i++) {
        if (p->shard_dims & (1u << i)) rs *= sizes[i];
        if (p->replicate_dims & (1u << i)) ar *= sizes[i];
    }
    if (a->mode == DTR__DDP) {
        /* The DDP hooks: divide by N, then one SUM all-reduce. */
        p->f = (dtr_grad_factors_t){.rs_size = 1, .ar_size = ar, .world = ar,
                                    .factor = (double)ar, .pre = (double)ar, .post = 1,
                                    .rs_op = DTR_REDUCE_SUM, .ar_op = DTR_REDUCE_SUM};
    } else if (dtr_grad_factors(rs, ar, a->dtype, a->factor, a->force_sum, &p->f) != DTR_OK) {
        return dtr_cli_lib_error("grad", "--factor");
    }
    p->nops = dtr_grad_ops(&p->f, p->ops, 2);
    return DTR_EXIT_OK;
}

static void dtr__print_plan(const dtr__grad_args_t *a, const dtr__grad_plan_t *p,
                            const char *mesh) {
    printf("dtr grad: %s on mesh %s: ", dtr__mode_names[a->mode], mesh);
    if (a->mode == DTR__DDP) printf("%lld ranks", (long long)p->f.world);
    else if (a->mode == DTR__FSDP) printf("shard group of %lld", (long long)p->f.rs_size);
    else
        printf("replicate group %lld x shard group %lld = %lld ranks", (long long)p->f.ar_size,
               (long long)p->f.rs_size, (long long)p->f.world);
    printf(", reduce dtype %s\n", dtr_dtype_name(a->dtype));
    printf("  divide by %.9g: pre %.9g, post %.9g; ops:", p->f.factor, p->f.pre, p->f.post);
    for (int k = 0; k < p->nops; k++) printf("%s %s", k ? "," : "", p->ops[k]);
    if (p->nops == 0) printf(" none (one rank)");
    printf("\n");
}

static void dtr__json_plan(const dtr__grad_args_t *a, const dtr__grad_plan_t *p,
                           const char *mesh) {
    dtr_cli_json_begin_text(stdout, "grad", mesh);
    printf(",\"mode\":\"%s\",\"world\":%lld,\"shard_group\":%lld,"
           "\"replicate_group\":%lld,\"dtype\":\"%s\",\"factor\":%.17g,\"pre_factor\":%.17g,"
           "\"post_factor\":%.17g,\"ops\":[",
           dtr__mode_names[a->mode], (long long)p->f.world, (long long)p->f.rs_size,
           (long long)p->f.ar_size, dtr_dtype_name(a->dtype), p->f.factor, p->f.pre, p->f.post);
    for (int k = 0; k < p->nops; k++) printf("%s\"%s\"", k ? "," : "", p->ops[k]);
    printf("]");
}

static int dtr__dry_run(const dtr__grad_args_t *a) {
    int64_t sizes[DTR_MAX_MESH_DIMS];
    int nd = 1;
    char meshtext[64];
    if (a->spec.ranks != NULL && a->spec.mesh == NULL)
        return dtr_cli_usage_error("grad", "--ranks: goes with --mesh (the mesh's ranks)");
    if (a->spec.mesh != NULL) {
        dtr_mesh_t *mesh = NULL;
        int rc = dtr_cli_build_mesh("grad", &a->spec, &mesh); /* --ranks checked as in a run */
        if (rc != DTR_EXIT_OK) return rc;
        nd = dtr_mesh_ndims(mesh);
        for (int i = 0; i < nd; i++) sizes[i] = dtr_mesh_size(mesh, i);
        dtr_mesh_format(mesh, meshtext, sizeof meshtext);
        int64_t n = dtr_mesh_nranks(mesh);
        dtr_mesh_destroy(mesh);
        if (a->world > 0 && a->world != n)
            return dtr_cli_usage_error("grad", "--world: %ld, but --mesh %s has %lld ranks",
                                       a->world, meshtext, (long long)n);
    } else {
        if (a->world <= 0)
            return dtr_cli_usage_error("grad", "--dry-run needs --world N (or --mesh)");
        if (a->mode == DTR__HSDP)
            return dtr_cli_usage_error("grad",
                                       "--mode hsdp: give --mesh RxS to split the ranks into "
                                       "replicate and shard groups");
        sizes[0] = a->world;
        snprintf(meshtext, sizeof meshtext, "%ld", a->world);
    }
    dtr__grad_plan_t p;
    int rc = dtr__grad_plan(a, nd, sizes, &p);
    if (rc != DTR_EXIT_OK) return rc;
    if (a->json) {
        dtr__json_plan(a, &p, meshtext);
        printf(",\"dry_run\":true}\n");
    } else {
        dtr__print_plan(a, &p, meshtext);
    }
    return DTR_EXIT_OK;
}

/* Rank p's gradient value at element k of microbatch m. */
static double dtr__value(const dtr__grad_args_t *a, int64_t p, long m, int64_t k) {
    int64_t j = (k % 16 * 7 + p % 16 * 13 + m % 16 * 5) % 16 - 8;
    return (a->base + a->step * (double)j) / (double)a->microbatches;
}

/* The exact result at element k (in double): the sum over every rank and microbatch,
 * divided by the factor (D, the ranks, unless the user set one). The values are already
 * divided by M, so with factor D this is the mean over ranks and microbatches. */
static double dtr__mean(const dtr__grad_args_t *a, int64_t n, int64_t k, double factor) {
    double s = 0;
    for (int64_t p = 0; p < n; p++)
        for (long m = 0; m < a->microbatches; m++) s += dtr__value(a, p, m, k);
    return s / factor;
}

static double dtr__eps(dtr_dtype_t t) {
    switch (t) {
    case DTR_F16: return ldexp(1, -11);
    case DTR_BF16: return ldexp(1, -8);
    case DTR_F64: return ldexp(1, -52);
    default: return ldexp(1, -23);
    }
}

/* A rank's buffers: the gradient and the result in host memory, what the calls see
 * (the same, or GPU copies), their bytes, the gradient's elements. */
typedef struct {
    float *grad, *out;
    void *dgrad, *dout;
    size_t gbytes, obytes;
    int64_t numel;
} dtr__bufs_t;

/* The microbatches' gradients of the rank at position pos reduced into b->out: through the
 * reducer (fsdp, hsdp), or summed locally and all-reduced by the DDP hook. */
static dtr_status_t dtr__grad_reduce(const dtr__grad_args_t *a, const dtr_cli_engine_t *eng,
                                     dtr_context_t *ctx, dtr_reducer_t *red,
                                     const dtr_mesh_t *mesh, unsigned replicate_dims,
                                     int64_t pos, const dtr__bufs_t *b, bool fill) {
    dtr_status_t st = DTR_OK;
    if (red == NULL) memset(b->out, 0, b->obytes);
    for (long m = 0; m < a->microbatches && st == DTR_OK; m++) {
        for (int64_t k = 0; fill && k < b->numel; k++) b->grad[k] = (float)dtr__value(a, pos, m, k);
        if (red != NULL) {
            bool sync = m == a->microbatches - 1;
            st = dtr_cli_dev_in(eng, b->dgrad, b->grad, b->gbytes);
            if (st == DTR_OK)
                st = dtr_reducer_reduce(red, b->dgrad, b->gbytes, sync, b->dout, b->obytes);
            /* the next microbatch's copy-in must not overwrite what this one reads */
            if (st == DTR_OK) st = dtr_context_sync(ctx);
        } else {
            for (int64_t k = 0; k < b->numel; k++) b->out[k] += b->grad[k]; /* ddp: local sum */
        }
    }
    if (st == DTR_OK && red == NULL) {
        dtr_grad_hook_fn hook = a->dtype == DTR_F16    ? dtr_hook_fp16_compress
                                : a->dtype == DTR_BF16 ? dtr_hook_bf16_compress
                                                       : dtr_hook_all_reduce;
        st = dtr_cli_dev_in(eng, b->dout, b->out, b->obytes);
        if (st == DTR_OK) st = hook(NULL, ctx, mesh, replicate_dims, b->dout, b->numel, DTR_F32);
    }
    if (st == DTR_OK) st = dtr_context_sync(ctx);
    if (st == DTR_OK) st = dtr_cli_dev_get(eng, b->out, b->dout, b->obytes);
    return st;
}

/* Where this rank's result sits: [outer, rows at row_off.., inner] of [outer, len, inner]. */
typedef struct {
    int64_t outer, rows, inner, len, row_off;
} dtr__shard_t;

/* Every element of the result out against the exact mean: the largest error into err[0],
 * the count of inf or NaN elements into err[1]. */
static void dtr__grad_check(const dtr__grad_args_t *a, int64_t n, double factor,
                            const dtr__shard_t *sh, const float *out, double *err) {
    for (int64_t o = 0; o < sh->outer; o++)
        for (int64_t r = 0; r < sh->rows; r++)
            for (int64_t i = 0; i < sh->inner; i++) {
                double got = out[(o * sh->rows + r) * sh->inner + i];
                double want = dtr__mean(a, n, (o * sh->len + sh->row_off + r) * sh->inner + i, factor);
                if (!isfinite(got))
                    err[1] += 1;
                else if (fabs(got - want) > err[0])
                    err[0] = fabs(got - want);
            }
}

/* What a reduction gave, for the report. */
typedef struct {
    int64_t numel, n;
    double tol, err; /* the tolerance and the largest error over every rank */
    bool nonfinite;  /* some element overflowed to inf or NaN */
    double seconds;  /* the slowest rank's, the first (checked) round */
    bool ok;
    double median, baseline; /* seconds: the timed rounds' medians, the slowest rank's */
} dtr__grad_result_t;

/* The report on rank 0: text or one JSON object, and a failed check on stderr. */
static void dtr__grad_report(const dtr__grad_args_t *a, const dtr__grad_plan_t *p,
                             const char *meshtext, const char *backend, const char *device,
                             const dtr__grad_result_t *r) {
    char shape[128];
    dtr_shape_format(a->shape, a->ndim, shape, sizeof shape);
    if (a->json) {
        dtr__json_plan(a, p, meshtext);
        printf(",\"shape\":");
        dtr_cli_json_i64_array(stdout, a->shape, a->ndim);
        printf(",\"numel\":%lld,\"shard_dim\":%d,\"microbatches\":%ld,"
               "\"backend\":\"%s\",\"device\":\"%s\","
               "\"verified\":%s,\"max_abs_err\":%.9g,\"nonfinite\":%s,\"abs_tolerance\":%.9g,"
               "\"seconds\":%.6f,\"iters\":%lld,\"warmup\":%lld,\"median_us\":%.3f,"
               "\"baseline_median_us\":%.3f,\"overhead_ratio\":%.4f}\n",
               (long long)r->numel, a->shard_dim, a->microbatches,
               backend, device,
               a->verify ? (r->ok ? "true" : "false") : "null", r->err,
               r->nonfinite ? "true" : "false", r->tol, r->seconds, (long long)a->iters,
               (long long)a->warmup, r->median * 1e6, r->baseline * 1e6,
               r->baseline > 0 ? r->median / r->baseline : 0.0);
    } else {
        dtr__print_plan(a, p, meshtext);
        printf("  gradient %s (%lld elements), %ld microbatch%s, %s on %s; %.3f ms\n",
               shape, (long long)r->numel, a->microbatches, a->microbatches == 1 ? "" : "es",
               backend, device, r->seconds * 1e3);
        if (a->iters > 0)
            printf("  median of %lld after %lld warm-up: %.3f ms; its collectives alone %.3f ms "
                   "(%.2fx)\n",
                   (long long)a->iters, (long long)a->warmup, r->median * 1e3,
                   r->baseline * 1e3, r->baseline > 0 ? r->median / r->baseline : 0.0);
        if (a->verify && r->ok && p->f.factor == (double)r->n)
            printf("  verified: every element on every rank is the mean over %lld ranks and "
                   "%ld microbatch%s; max abs error %.9g (tolerance %.9g)\n",
                   (long long)r->n, a->microbatches, a->microbatches == 1 ? "" : "es",
                   r->err, r->tol);
        else if (a->verify && r->ok)
            printf("  verified: every element on every rank is the sum over %lld ranks and "
                   "%ld microbatch%s divided by %.9g; max abs error %.9g (tolerance %.9g)\n",
                   (long long)r->n, a->microbatches, a->microbatches == 1 ? "" : "es",
                   p->f.factor, r->err, r->tol);
    }
    if (!r->ok)
        fprintf(stderr,
                "dtr grad: verification failed: %s; max abs error %.9g (tolerance %.9g)\n",
                r->nonfinite ? "elements overflowed to inf or NaN on some rank"
                              : "elements differ from the exact mean",
                r->err, r->tol);
}

/* The collectives of a step alone, on the gradient's bytes read as the reduce dtype (values
 * do not matter): fsdp/hsdp one reduce-scatter per microbatch into `base` (count elements),
 * ddp/hsdp one all-reduce (ddp into base, hsdp back into the gradient buffer). */
static dtr_status_t dtr__grad_bare(const dtr__grad_args_t *a, dtr_context_t *ctx,
                                   const dtr_mesh_t *mesh, const dtr__grad_plan_t *p,
                                   const dtr__bufs_t *b, void *base, int64_t count) {
    dtr_status_t st = DTR_OK;
    bool rs = p->f.rs_size > 1;
    for (long m = 0; rs && m < a->microbatches && st == DTR_OK; m++)
        st = dtr_reduce_scatter(ctx, mesh, p->shard_dims, b->dgrad, base, count, a->dtype,
                                DTR_REDUCE_SUM);
    if (st == DTR_OK && p->f.ar_size > 1)
        st = dtr_all_reduce(ctx, mesh, p->replicate_dims, rs ? base : b->dgrad,
                            rs ? b->dgrad : base, count, a->dtype, DTR_REDUCE_SUM);
    if (st == DTR_OK) st = dtr_context_sync(ctx);
    return st;
}

/* What the timed rounds need. */
typedef struct {
    const dtr__grad_args_t *a;
    const dtr_cli_engine_t *eng;
    dtr_context_t *ctx;
    dtr_reducer_t *red;
    const dtr_mesh_t *mesh;
    const dtr__grad_plan_t *p;
    int64_t pos;
    const dtr__bufs_t *b;
    bool inside;
    int rank;
} dtr__grad_time_t;

/* --warmup untimed rounds, then --iters timed ones, each the reduction and then its
 * collectives alone, between barriers; med[0], med[1] the slowest rank's medians (seconds).
 * Progress on stderr for long runs. Collective; false where a rank failed (it said why). */
static bool dtr__grad_time(const dtr__grad_time_t *g, double *med) {
    const dtr__grad_args_t *a = g->a;
    int64_t item = dtr_dtype_info(a->dtype)->size, rs = g->p->f.rs_size;
    int64_t count = (g->b->numel + rs - 1) / rs;
    if (count * rs * item > (int64_t)g->b->gbytes) count = (int64_t)g->b->gbytes / item / rs;
    int64_t total = a->iters > 0 ? a->warmup + a->iters : 0;
    double *t = calloc((size_t)(4 * a->iters + 1), sizeof *t), *tmax = t + 2 * a->iters;
    /* the baseline's own output (in the run's memory) */
    void *hbase = calloc((size_t)(count * item + 1), 1), *base = NULL;
    dtr_status_t st = t != NULL && hbase != NULL ? DTR_OK : DTR_ERR_OUT_OF_MEMORY;
    if (st == DTR_OK) st = dtr_cli_dev_put(g->eng, hbase, (size_t)(count * item), &base);
    bool ok = dtr_cli_all_ok("grad", st, g->rank, "timing buffers");
    dtr_cli_progress_t prog = {0};
    for (int64_t it = 0; it < total && ok; it++) {
        for (int w = 0; w < 2 && ok; w++) {
            dtr_cli_job_barrier();
            double t0 = dtr_cli_job_now();
            if (g->inside && w == 0)
                st = dtr__grad_reduce(a, g->eng, g->ctx, g->red, g->mesh, g->p->replicate_dims,
                                      g->pos, g->b, false);
            else if (g->inside)
                st = dtr__grad_bare(a, g->ctx, g->mesh, g->p, g->b, base, count);
            if (it >= a->warmup) t[w * a->iters + it - a->warmup] = dtr_cli_job_now() - t0;
            ok = dtr_cli_all_ok("grad", st, g->rank, w == 0 ? "timing" : "baseline");
        }
        if (ok && g->rank == 0) dtr_cli_progress(&prog, "grad", "timed rounds", it + 1, total);
    }
    if (ok && a->iters > 0) {
        dtr_cli_job_max(t, tmax, (int)(2 * a->iters));
        med[0] = dtr_cli_median(tmax, (int)a->iters);
        med[1] = dtr_cli_median(tmax + a->iters, (int)a->iters);
    }
    if (base != NULL) dtr_cli_dev_free(g->eng, base, hbase);
    free(hbase);
    free(t);
    return ok;
}

static int dtr__grad(int rank, int world, const dtr__grad_args_t *a) {
    dtr_mesh_t *mesh = NULL;
    int rc = dtr_cli_build_mesh("grad", &a->spec, &mesh);
    if (rc != DTR_EXIT_OK) return rc;
    rc = dtr_cli_mesh_fits("grad", "--mesh", mesh, world);
    if (rc != DTR_EXIT_OK) goto done_mesh;
    int nd = dtr_mesh_ndims(mesh);
    int64_t sizes[DTR_MAX_MESH_DIMS], n = dtr_mesh_nranks(mesh);
    for (int i = 0; i < nd; i++) sizes[i] = dtr_mesh_size(mesh, i);
    dtr__grad_plan_t p;
    rc = dtr__grad_plan(a, nd, sizes, &p);
    if (rc != DTR_EXIT_OK) goto done_mesh;
    rc = dtr_cli_agree_args("grad", rc, rank); /* (before the first collective) */
    if (rc == DTR_EXIT_OK) rc = dtr_cli_agree_engine("grad", &a->eng);
    if (rc != DTR_EXIT_OK) goto done_mesh;
    char meshtext[64];
    dtr_mesh_format(mesh, meshtext, sizeof meshtext);

    /* From here on errors are per rank. */
    dtr_cli_restore_stderr();
    rc = DTR_EXIT_FAIL;
    int64_t numel = 1;
    for (int i = 0; i < a->ndim; i++) numel *= a->shape[i];
    int64_t coord[DTR_MAX_MESH_DIMS];
    bool inside = dtr_mesh_coord(mesh, rank, coord) == DTR_OK;
    int64_t pos = 0;
    for (int i = 0; i < nd && inside; i++) pos = pos * sizes[i] + coord[i];
    dtr_context_t *ctx = NULL;
    dtr_reducer_t *red = NULL;
    dtr_cli_engine_t eng = a->eng;
    size_t gbytes = (size_t)numel * sizeof(float);
    float *grad = dtr_cli_host_alloc(gbytes + sizeof(float)), *out = NULL;
    void *dgrad = NULL, *dout = NULL; /* what the calls see: grad and out, or GPU copies */
    char why[160];
    snprintf(why, sizeof why, "the gradient: out of memory for %zu bytes", gbytes + sizeof(float));
    dtr_status_t st = DTR_OK;
    if (!dtr_cli_all_ok_msg("grad", grad == NULL, rank, why)) goto done;
    st = dtr_cli_engine_context(&eng, rank, &ctx);
    if (!dtr_cli_all_ok("grad", st, rank, "context")) goto done;
    if (inside && a->mode != DTR__DDP) {
        dtr_reducer_desc_t d = {.mesh = mesh, .shard_dims = p.shard_dims,
                                .replicate_dims = p.replicate_dims, .ndim = a->ndim,
                                .shard_dim = a->shard_dim, .param_dtype = DTR_F32,
                                .reduce_dtype = a->dtype, .factor = a->factor,
                                .force_sum = a->force_sum};
        memcpy(d.shape, a->shape, sizeof d.shape);
        st = dtr_reducer_create(ctx, &d, &red);
    }
    if (!dtr_cli_all_ok("grad", st, rank, "reducer")) goto done;

    /* The result: the whole gradient (ddp) or this rank's shard of it, with where the shard
     * sits: [outer, rows at row_off.., inner] of [outer, len, inner]. */
    int64_t outer = 1, inner = 1, len = a->shape[a->shard_dim], rows = len, row_off = 0;
    for (int i = 0; i < a->shard_dim; i++) outer *= a->shape[i];
    for (int i = a->shard_dim + 1; i < a->ndim; i++) inner *= a->shape[i];
    int64_t out_numel = numel;
    if (red != NULL) {
        int64_t index, shard_shape[DTR_MAX_TENSOR_DIMS];
        dtr_reducer_info(red, NULL, &out_numel, shard_shape);
        dtr_mesh_group_index(mesh, p.shard_dims, rank, &index);
        dtr_chunk(len, p.f.rs_size, index, &rows, &row_off);
    }
    size_t obytes = (size_t)out_numel * sizeof(float);
    out = dtr_cli_host_alloc(obytes + sizeof(float));
    st = out != NULL ? DTR_OK : DTR_ERR_OUT_OF_MEMORY;
    if (st == DTR_OK) st = dtr_cli_dev_put(&eng, grad, gbytes, &dgrad);
    if (st == DTR_OK) st = dtr_cli_dev_put(&eng, out, obytes, &dout);
    if (!dtr_cli_all_ok("grad", st, rank, "output")) goto done_out;
    double t0 = dtr_cli_job_now();
    if (inside) {
        dtr__bufs_t bufs = {grad, out, dgrad, dout, gbytes, obytes, numel};
        st = dtr__grad_reduce(a, &eng, ctx, red, mesh, p.replicate_dims, pos, &bufs, true);
    }
    double secs = dtr_cli_job_now() - t0;
    if (!dtr_cli_all_ok("grad", st, rank, "reduce")) goto done_out;

    /* Check: every element against the exact mean. */
    double amax = (fabs(a->base) + 8 * fabs(a->step)) / (double)a->microbatches;
    double levels = ceil(log2((double)(n * a->microbatches))) + 3;
    double tol = dtr__eps(a->dtype) * amax * levels * ((double)n / p.f.factor);
    double err[2] = {0, 0}, allerr[2]; /* max abs error, non-finite count */
    if (a->verify && inside) {
        dtr__shard_t shard = {outer, rows, inner, len, row_off};
        dtr__grad_check(a, n, p.f.factor, &shard, out, err);
    }
    /* then (the result checked) timed as dtr run times: warm-up rounds, the median of --iters, the baseline */
    double med[2] = {0, 0};
    dtr__bufs_t tb = {grad, out, dgrad, dout, gbytes, obytes, numel};
    dtr__grad_time_t tm = {a, &eng, ctx, red, mesh, &p, pos, &tb, inside, rank};
    if (!dtr__grad_time(&tm, med)) goto done_out;
    dtr_cli_job_max(err, allerr, 2);
    double tmax;
    dtr_cli_job_max(&secs, &tmax, 1);
    bool ok = !a->verify || (allerr[1] == 0 && allerr[0] <= tol);
    if (rank == 0) {
        dtr__grad_result_t res = {numel, n, tol, allerr[0], allerr[1] > 0, tmax, ok, med[0], med[1]};
        dtr__grad_report(a, &p, meshtext, dtr_context_backend(ctx), eng.device, &res);
    }
    rc = ok ? DTR_EXIT_OK : DTR_EXIT_FAIL;
done_out:
    dtr_cli_dev_free(&eng, dgrad, grad);
    dtr_cli_dev_free(&eng, dout, out);
    free(out);
done:
    dtr_reducer_destroy(red);
    dtr_context_destroy(ctx);
    dtr_cli_engine_end(&eng);
    free(grad);
done_mesh:
    dtr_mesh_destroy(mesh);
    return rc;
}

/* Parses the flags; *help set for --help. */
/* The numeric flags' texts, parsed by dtr__grad_numbers. */
typedef struct {
    const char *shard, *mb, *factor, *base, *step, *iters, *warmup;
} dtr__grad_nums_t;

/* --shard-dim, --microbatches, --factor, --base, --step, --iters, --warmup into a. */
static int dtr__grad_numbers(dtr__grad_args_t *a, const dtr__grad_nums_t *t) {
    const char *shard = t->shard, *mb = t->mb, *factor = t->factor, *base = t->base,
               *step = t->step, *iters = t->iters, *warmup = t->warmup;
    int rc;
    int64_t sd;
    if ((rc = dtr_cli_parse_int("grad", "--shard-dim", shard, 0, DTR_MAX_TENSOR_DIMS - 1,
                                "a tensor dim", &sd)) != DTR_EXIT_OK)
        return rc;
    a->shard_dim = (int)sd;
    if (a->shard_dim >= a->ndim)
        return dtr_cli_usage_error("grad", "--shard-dim: %d, the gradient has dims 0..%d",
                                   a->shard_dim, a->ndim - 1);
    if ((rc = dtr_cli_parse_int("grad", "--microbatches", mb, 1, 1000000, "a count 1..1000000",
                                &a->microbatches)) != DTR_EXIT_OK ||
        (factor != NULL && (rc = dtr_cli_parse_number("grad", "--factor", factor, true,
                                                      "a number > 0", &a->factor)) != DTR_EXIT_OK) ||
        (rc = dtr_cli_parse_number("grad", "--base", base, false, "a number", &a->base)) !=
            DTR_EXIT_OK ||
        (rc = dtr_cli_parse_number("grad", "--step", step, false, "a number", &a->step)) !=
            DTR_EXIT_OK ||
        (rc = dtr_cli_parse_int("grad", "--iters", iters, 0, 100000, "a count 0..100000",
                                &a->iters)) != DTR_EXIT_OK ||
        (rc = dtr_cli_parse_int("grad", "--warmup", warmup, 0, 100000, "a count 0..100000",
                                &a->warmup)) != DTR_EXIT_OK)
        return rc;
    return DTR_EXIT_OK;
}

static int dtr__grad_args(int argc, char **argv, dtr__grad_args_t *a, bool *help) {
    static const struct option options[] = {
        DTR_CLI_SPEC_OPTIONS,
        {"mode", required_argument, NULL, 'M'},
        {"numel", required_argument, NULL, 'N'},
        {"shard-dim", required_argument, NULL, 'D'},
        {"microbatches", required_argument, NULL, 'b'},
        {"factor", required_argument, NULL, 'F'},
        {"force-sum", no_argument, NULL, 'u'},
        {"base", required_argument, NULL, 'B'},
        {"step", required_argument, NULL, 'T'},
        {"verify", no_argument, NULL, 'v'},
        {"json", no_argument, NULL, 'j'},
        {"dry-run", no_argument, NULL, 'y'},
        {"iters", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'},
        {"world", required_argument, NULL, 'W'},
        {"backend", required_argument, NULL, 'E'},
        {"device", required_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *mode = NULL, *numel = NULL, *shard = "0", *mb = "1", *factor = NULL;
    const char *base = "0", *step = "1", *worldtext = NULL, *backend = "mpi", *device = NULL;
    const char *iters = "5", *warmup = "1";
    memset(a, 0, sizeof *a);
    *help = false;
    optind = 1;
    opterr = 0;
    unsigned char seen[DTR_CLI_SEEN] = {0};
    for (;;) {
        int c = getopt_long(argc, argv, ":h", options, NULL);
        if (c == -1) break;
        if (dtr_cli_once("grad", options, c, seen) != DTR_EXIT_OK) return DTR_EXIT_USAGE;
        switch (c) {
        case 'M': mode = optarg; break;
        case 'N': numel = optarg; break;
        case 'D': shard = optarg; break;
        case 'b': mb = optarg; break;
        case 'F': factor = optarg; break;
        case 'u': a->force_sum = true; break;
        case 'B': base = optarg; break;
        case 'T': step = optarg; break;
        case 'v': a->verify = true; break;
        case 'j': a->json = true; break;
        case 'y': a->dry_run = true; break;
        case 'i': iters = optarg; break;
        case 'w': warmup = optarg; break;
        case 'W': worldtext = optarg; break;
        case 'E': backend = optarg; break;
        case 'V': device = optarg; break;
        case 'h': *help = true; return DTR_EXIT_OK;
        default:
            if (c != 'm' && c != 's' && c != 'd' && c != 'r')
                return dtr_cli_option_error("grad", c, argv);
            dtr_cli_spec_option(c, optarg, &a->spec);
            break;
        }
    }
    if (optind < argc) return dtr_cli_option_error("grad", 0, argv);
    a->mode = a->dry_run ? DTR__FSDP : DTR__DDP;
    if (mode == NULL && !a->dry_run)
        return dtr_cli_usage_error("grad", "--mode: missing (ddp, fsdp or hsdp)");
    if (mode != NULL) {
        int k = 0;
        while (k < 3 && strcmp(mode, dtr__mode_names[k]) != 0) k++;
        if (k == 3)
            return dtr_cli_usage_error("grad", "--mode: '%s' is not ddp, fsdp or hsdp", mode);
        a->mode = (dtr__mode_t)k;
    }
    if (!a->dry_run && a->spec.mesh == NULL) return dtr_cli_usage_error("grad", "--mesh: missing");
    int erc = dtr_cli_engine_args("grad", backend, device, &a->eng);
    if (erc != DTR_EXIT_OK) return erc;
    if (worldtext != NULL && !a->dry_run)
        return dtr_cli_usage_error("grad", "--world: only with --dry-run (mpirun sets the ranks)");
    int rc = DTR_EXIT_OK;
    dtr__grad_nums_t nums = {shard, mb, factor, base, step, iters, warmup};
    if (worldtext != NULL &&
        (rc = dtr_cli_parse_int("grad", "--world", worldtext, 1, INT32_MAX,
                                "a rank count >= 1", &a->world)) != DTR_EXIT_OK)
        return rc;
    a->dtype = DTR_F32;
    if (a->spec.dtype != NULL) {
        if (dtr_dtype_parse(a->spec.dtype, &a->dtype) != DTR_OK)
            return dtr_cli_lib_error("grad", "--dtype");
        if (a->dtype != DTR_F32 && a->dtype != DTR_BF16 && a->dtype != DTR_F16 &&
            a->dtype != DTR_F64)
            return dtr_cli_usage_error("grad", "--dtype: %s, must be f32, bf16, f16 or f64",
                                       a->spec.dtype);
    }
    if (a->mode == DTR__DDP && a->dtype == DTR_F64)
        return dtr_cli_usage_error("grad", "--dtype: f64 in ddp mode: the hooks are f32 "
                                           "(allreduce) or f16/bf16 (compress)");
    if (numel != NULL && a->spec.shape != NULL)
        return dtr_cli_usage_error("grad", "--numel and --shape: give one");
    if (a->spec.shape != NULL) {
        int64_t bytes;
        if (dtr_shape_parse(a->spec.shape, a->shape, DTR_MAX_TENSOR_DIMS, &a->ndim) != DTR_OK ||
            dtr_shape_bytes(a->shape, a->ndim, DTR_F32, &bytes) != DTR_OK)
            return dtr_cli_lib_error("grad", "--shape");
        if (a->ndim == 0)
            return dtr_cli_usage_error("grad", "--shape: '%s' is a scalar; a gradient has 1 "
                                               "or more dims", a->spec.shape);
    } else {
        a->ndim = 1;
        a->shape[0] = 1000003;
        if (numel != NULL &&
            (rc = dtr_cli_parse_int("grad", "--numel", numel, 0, (int64_t)1 << 40,
                                    "a count 0..2^40", &a->shape[0])) != DTR_EXIT_OK)
            return rc;
    }
    return dtr__grad_numbers(a, &nums);
}

static int dtr__grad_body(int argc, char **argv, int rank, int world) {
    dtr__grad_args_t a;
    bool help;
    int rc = dtr__grad_args(argc, argv, &a, &help);
    if (rc != DTR_EXIT_OK) return rc;
    if (help) {
        if (rank == 0) dtr__grad_help(stdout);
        return DTR_EXIT_OK;
    }
    return dtr__grad(rank, world, &a);
}

static int dtr__grad_main(int argc, char **argv) {
    /* --help and --dry-run need no MPI: parse first, start MPI only to run. */
    dtr__grad_args_t a;
    bool help;
    bool local = false;
    /* --help answers whatever else the line holds (--model's flags are not the parser's) */
    for (int k = 1; k < argc; k++)
        if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
            dtr__grad_help(stdout);
            return DTR_EXIT_OK;
        }
    for (int k = 1; k < argc; k++)
        if (strcmp(argv[k], "--dry-run") == 0) local = true;
    if (local) {
        int rc = dtr__grad_args(argc, argv, &a, &help);
        if (rc != DTR_EXIT_OK) return rc;
        return dtr__dry_run(&a);
    }
    for (int k = 1; k < argc; k++)
        if (strcmp(argv[k], "--model") == 0 || strncmp(argv[k], "--model=", 8) == 0)
            return dtr_cli_job_main("grad", dtr_cli_grad_model, argc, argv);
    return dtr_cli_job_main("grad", dtr__grad_body, argc, argv);
}

const dtr_cli_command_t dtr_cli_grad = {
    .name = "grad",
    .summary = "reduce gradients DDP/FSDP/HSDP style under mpirun, checked against exact means",
    .main = dtr__grad_main,
    .help = dtr__grad_help,
};
