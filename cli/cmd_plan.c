/* dtr plan: the dry run. Builds the plan the executor would run and prints it. */
#include <stdlib.h>
#include <string.h>

#include "cli/change.h"
#include "cli/cli.h"

static void dtr__plan_help(FILE *out) {
    fputs(
        "usage: dtr plan --mesh MESH --shape SHAPE --from LIST --to LIST [--dtype DTYPE]\n"
        "                [--to-dtype DTYPE] [--ranks LIST] [--strategy optimal|compat]\n"
        "                [--compare] [--json] [--svg FILE] [--backward [--backward-dtype DTYPE]]\n"
        "                [--alpha-us A[,A...]] [--bandwidth-gbps B[,B...]] [--local-gbps G]\n"
        "                [--nodes-of DIMS [--inter-alpha-us A] [--inter-bandwidth-gbps B]]\n"
        "       dtr plan --mesh MESH --batch FILE [--ranks LIST] [--strategy S] [--json] [--svg FILE]\n"
        "                [--block-scale B] [cost flags]\n"
        "       dtr plan --mesh MESH [--ranks LIST] --shape SHAPE --from LIST\n"
        "                --to-mesh MESH [--to-ranks LIST] --to LIST [--dtype D] [--to-dtype D]\n"
        "                [--relabel] [--staging-cap BYTES] [--block-scale B] [--json]\n"
        "                [--svg FILE] [cost flags]\n"
        "       dtr plan --mesh MESH [--ranks LIST] --batch FILE --to-mesh MESH\n"
        "                [--to-ranks LIST] [--relabel] [--staging-cap BYTES] [--block-scale B]\n"
        "                [--json] [--svg FILE]\n"
        "\n"
        "Plans a redistribution from the --from placements to the --to placements and prints\n"
        "its steps (mesh dim, from -> to, kind, bytes each rank receives), the most bytes any\n"
        "rank receives, the lower bound on that, peak extra memory and the modeled time.\n"
        "Nothing is communicated.\n"
        "\n"
        "  --mesh, --shape, --dtype, --ranks   as for 'dtr layout'\n"
        "  --from LIST, --to LIST   placements, one per mesh dim, e.g. 'S(0),R' -> 'R,S(1)';\n"
        "                       a ragged shard (S(d){sizes}) kept as it is is planned as\n"
        "                       steps on the mesh; one the change moves, as a change between\n"
        "                       meshes onto the same mesh (--to-mesh)\n"
        "  --strategy S         optimal (default): the cheapest plan under the cost model,\n"
        "                       with all-to-all and exchange steps; compat: the seed algorithm\n"
        "                       (PyTorch 2.1's) exactly, refused where it would corrupt data\n"
        "  --to-dtype DTYPE     the result in another dtype (PyTorch's forward_dtype): the\n"
        "                       input is cast first and every step runs in DTYPE; between\n"
        "                       float dtypes (f32 f64 f16 bf16) or between c64 and c128\n"
        "  --compare            both strategies and the lower bound, side by side\n"
        "  --backward           the gradient's plan instead: a gradient arriving in the --to\n"
        "                       placements goes back to the --from ones, Partial there\n"
        "                       becoming Replicate where the gradient is not Partial, and\n"
        "                       R -> P a pass-through (autograd/README.md), in the --dtype\n"
        "                       (a --to-dtype gradient is cast back first); the forward\n"
        "                       change must itself be one dtr can plan\n"
        "  --backward-dtype DTYPE  with --backward: PyTorch's backward_dtype, the dtype the\n"
        "                       gradient's steps run in: cast to it first, back to the\n"
        "                       --dtype last (float or complex dtypes, as --to-dtype)\n"
        "  --batch FILE         plan many tensors together: FILE is a JSON list of\n"
        "                       {\"shape\": \"64x64\", \"dtype\": \"f32\", \"from\": \"S(0),R\",\n"
        "                       \"to\": \"R,S(1)\"} (dtype optional, f32; a shape also as an\n"
        "                       array, [64, 64]; \"to_dtype\": \"bf16\" casts that tensor,\n"
        "                       with --to-mesh only: within one mesh a batch does not\n"
        "                       cast, exit 3). Prints each tensor's\n"
        "                       change, the rounds (one coalesced collective each: kind, mesh\n"
        "                       dim, dtype and op for reductions, member tensor.step), the\n"
        "                       collectives against one plan at a time, bytes and the bound\n"
        "  --to-mesh MESH, --to-ranks LIST  a change between meshes: the destination mesh and\n"
        "                       its ranks (default 0..N-1), the source's being --mesh and\n"
        "                       --ranks; they may be disjoint, overlap or be the same ranks\n"
        "                       in another shape or order. Prints what the source mesh does\n"
        "                       first (a Partial reduced, a cast), then the boxes each rank\n"
        "                       sends to each other (the first 64), the most bytes a rank\n"
        "                       sends and receives and their lower bounds\n"
        "                       (docs/cross-mesh.md); --to is Shard or Replicate. With\n"
        "                       --batch, the file's tensors between the two meshes, moved\n"
        "                       together (small ones sharing each exchange)\n"
        "  --relabel            with --to-mesh: choose which of the destination ranks holds\n"
        "                       which coordinate so that the fewest bytes move (--json:\n"
        "                       \"relabel\", the rank of each coordinate, row-major; the\n"
        "                       bytes saved; \"permutation\" where nothing moves)\n"
        "  --staging-cap BYTES  with --to-mesh: at most BYTES of staging on a rank at once\n"
        "                       (sent and received together; K, M, G suffixes); larger moves\n"
        "                       go in chunks over rounds\n"
        "  --block-scale B      with --to-dtype f8e4m3 or f8e5m2: block-scaled fp8\n"
        "                       (DeepSeek-V3's weights): one f32 scale per B x B block of\n"
        "                       the last two dims (B elements of a 1-D tensor), scale =\n"
        "                       amax / 448 (57344 for e5m2), the values divided by it and\n"
        "                       rounded to nearest even; the scales a second tensor laid out\n"
        "                       by --to's placements. Prints the move of both (tensors\n"
        "                       0..n-1 the fp8 ones, n..2n-1 their scales; --json:\n"
        "                       \"block_scale\"); docs/cross-mesh.md, \"Block-scaled fp8\"\n"
        "  --json               one JSON object ({\"compat\":..,\"optimal\":..} with --compare)\n"
        "  --svg FILE           also draw the change into FILE (SVG; '-': to stdout, instead\n"
        "                       of the table): each side's layout, and the steps between\n"
        "                       them (the optimal plan's with --compare, the gradient's with\n"
        "                       --backward), or between meshes the message matrix\n"
        "  --alpha-us A         latency per collective round, us; one value or one per mesh\n"
        "                       dim (default 5; env DTR_ALPHA_US)\n"
        "  --bandwidth-gbps B   bandwidth per mesh dim, GB/s (default 10; env\n"
        "                       DTR_BANDWIDTH_GBPS)\n"
        "  --local-gbps G       local copy bandwidth, GB/s (default 50; env DTR_LOCAL_GBPS)\n"
        "  --nodes-of DIMS      the mesh dims whose groups span nodes, '0' or '0,2' (what\n"
        "                       'dtr run' learns from MPI): they are costed with the\n"
        "                       inter-node figures below, the others keep the ones above,\n"
        "                       and the steps that move data between nodes are marked\n"
        "  --inter-alpha-us A   with --nodes-of: latency between nodes, us (default 20; env\n"
        "                       DTR_INTER_ALPHA_US)\n"
        "  --inter-bandwidth-gbps B  with --nodes-of: bandwidth between nodes, GB/s\n"
        "                       (default 1.5; env DTR_INTER_BANDWIDTH_GBPS)\n"
        "  -h, --help           this help\n"
        "\n"
        "examples:\n"
        "  dtr plan --mesh 4 --shape 8x8 --from 'S(0)' --to 'S(1)'\n"
        "  dtr plan --mesh 2x2 --shape 8x8 --from 'S(0),S(1)' --to 'S(1),S(0)' --compare\n"
        "  dtr plan --mesh 2x2 --shape 1024x1024 --from 'S(0),S(0)' --to 'R,S(0)' --json\n"
        "  dtr plan --mesh 2x2 --batch tensors.json\n"
        "  dtr plan --mesh 2x4 --shape 1024x1024 --from 'S(0),S(1)' --to 'S(1),S(0)' --nodes-of 0\n"
        "  dtr plan --mesh 2x2 --ranks 0,1,2,3 --shape 1024x1000 --from 'S(0),P' --to-mesh 4\n"
        "           --to-ranks 4,5,6,7 --to 'S(1)'\n"
        "  dtr plan --mesh 2x3 --shape 33x17 --from 'S(1),S(0)' --to-mesh 3x2\n"
        "           --to-ranks 5,4,3,2,1,0 --to 'S(0),S(1)' --relabel\n"
        "\n"
        "Exit status: 0 planned; 2 bad arguments; 3 the change was refused: no plan for it\n"
        "(e.g. P(sum) -> P(avg), S -> P(max), or compat where the seed plan would misplace data).\n",
        out);
}

/* --nodes-of and the inter-node figures into the cost model. A --mesh that does not parse
 * is left for the spec's own check to name. */
static int dtr__plan_nodes(const char *mesh_text, const char *nodes_of, const char *alpha,
                           const char *bw, dtr_cost_model_t *cost) {
    if (nodes_of == NULL) {
        if (alpha != NULL || bw != NULL)
            return dtr_cli_usage_error("plan", "%s: goes with --nodes-of (the mesh dims that "
                                               "cross nodes)",
                                       alpha != NULL ? "--inter-alpha-us" : "--inter-bandwidth-gbps");
        return DTR_EXIT_OK;
    }
    dtr_mesh_t *mesh = NULL;
    if (mesh_text == NULL || dtr_mesh_parse(mesh_text, NULL, 0, &mesh) != DTR_OK)
        return DTR_EXIT_OK;
    uint32_t across = 0;
    dtr_status_t st = dtr_mesh_dims_parse(nodes_of, dtr_mesh_ndims(mesh), &across);
    dtr_mesh_destroy(mesh);
    if (st != DTR_OK) return dtr_cli_lib_error("plan", "--nodes-of");
    dtr_cli_cost_flags_t flags = {.inter_alpha = alpha, .inter_bandwidth = bw};
    return dtr_cli_inter_cost("plan", across, &flags, cost);
}

static void dtr__compare_row(FILE *out, const char *what, const char *a, const char *b) {
    fprintf(out, "  %-34s %18s %18s\n", what, a, b);
}

static void dtr__print_compare(FILE *out, const dtr_plan_t *plans, const dtr_status_t *st,
                               const char *const *errors) {
    char a[64], b[64];
    fputs("compare:\n", out);
    dtr__compare_row(out, "", "compat", "optimal");
    const char *labels[] = {"steps", "collectives", "most bytes one rank receives",
                            "peak extra bytes per rank", "modeled time us"};
    for (int row = 0; row < 5; row++) {
        char *cells[2] = {a, b};
        for (int k = 0; k < 2; k++) {
            const dtr_plan_t *p = &plans[k];
            if (st[k] != DTR_OK) {
                snprintf(cells[k], 64, "refused");
                continue;
            }
            int coll = 0;
            for (int kind = 0; kind < DTR_STEP_KIND_LAST; kind++)
                if (dtr_step_kind_info((dtr_step_kind_t)kind)->collective) coll += p->count[kind];
            switch (row) {
            case 0: snprintf(cells[k], 64, "%d", p->nsteps); break;
            case 1: snprintf(cells[k], 64, "%d", coll); break;
            case 2: snprintf(cells[k], 64, "%lld", (long long)p->recv_bytes_max); break;
            case 3: snprintf(cells[k], 64, "%lld", (long long)p->peak_extra_bytes); break;
            default: snprintf(cells[k], 64, "%.2f", p->time_us); break;
            }
        }
        dtr__compare_row(out, labels[row], a, b);
    }
    const dtr_plan_t *any = st[1] == DTR_OK ? &plans[1] : &plans[0];
    fprintf(out, "  lower bound on the most bytes one rank receives: %lld\n",
            (long long)any->lower_bound_recv_bytes);
    for (int k = 0; k < 2; k++) {
        fputc('\n', out);
        if (st[k] == DTR_OK)
            dtr_plan_print(&plans[k], out);
        else
            fprintf(out, "plan %s: refused: %s\n", k == 0 ? "compat" : "optimal", errors[k]);
    }
}

static void dtr__json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        if ((unsigned char)*s < 0x20) continue;
        fputc(*s, out);
    }
    fputc('"', out);
}

/* The library's JSON printers, for dtr_cli_json_splice. */
static dtr_status_t dtr__plan_json(const void *plan, FILE *f) { return dtr_plan_print_json(plan, f); }

static dtr_status_t dtr__change_svg(const void *change, FILE *f) {
    return dtr_change_print_svg(change, f);
}
static dtr_status_t dtr__change_json(const void *change, FILE *f) {
    return dtr_change_print_json(change, f);
}

/* What a block-scaled change's table is made of (its form prints 2n tensors). */
static void dtr__block_scale_line(FILE *f, int n, int64_t block) {
    fprintf(f, "block-scaled fp8: one f32 scale per %lld x %lld block (the blocks' amax "
               "all-reduced on the source mesh first); ",
            (long long)block, (long long)block);
    if (n == 1) fprintf(f, "tensor 0 below is the fp8 tensor, tensor 1 its scales\n");
    else fprintf(f, "tensors 0..%d below are the fp8 tensors, %d..%d their scales\n", n - 1, n,
                 2 * n - 1);
}

/* A change of many tensors (--batch) or between meshes (--to-mesh), specs made: one change
 * object (dtr_change_create) planned, printed as its form prints (text or JSON). */
static int dtr__plan_change(const dtr_cli_change_t *o, const dtr_mesh_t *mesh, int n,
                            const dtr_spec_t *src, const dtr_spec_t *dst,
                            const dtr_change_options_t *opts) {
    char what[512];
    snprintf(what, sizeof what, o->to_mesh == NULL ? (o->batch != NULL ? "--batch %s" : "--to")
                                : o->batch != NULL ? "--to-mesh --batch %s" : "--to-mesh",
             o->batch);
    dtr_change_t *change = NULL;
    if (dtr_change_create(n, src, dst, opts, &change) != DTR_OK)
        return dtr_cli_plan_error("plan", what);
    int rc = o->svg != NULL ? dtr_cli_write_svg("plan", o->svg, dtr__change_svg, change)
                            : DTR_EXIT_OK; /* (first: where it fails, nothing else prints) */
    if (rc != DTR_EXIT_OK || (o->svg != NULL && strcmp(o->svg, "-") == 0)) {
        /* (the error, or the picture alone on stdout) */
    } else if (o->json) {
        dtr_cli_json_begin(stdout, "plan", mesh);
        if (o->batch != NULL) dtr_cli_json_str(stdout, "batch", o->batch);
        if (opts->block_scale > 0) printf(",\"block_scale\":%lld", (long long)opts->block_scale);
        dtr_cli_json_splice(stdout, dtr__change_json, change);
        fputs("}\n", stdout);
    } else {
        if (opts->block_scale > 0) dtr__block_scale_line(stdout, n, opts->block_scale);
        dtr_change_print(change, 64, stdout);
    }
    dtr_change_destroy(change);
    return rc;
}

static dtr_status_t dtr__plan_svg(const void *plan, FILE *f) { return dtr_plan_print_svg(plan, f); }

/* --svg of one tensor's change: the plan the report prints (the optimal one of --compare,
 * the gradient's of --backward), drawn. */
static int dtr__plan_one_svg(const dtr_cli_change_t *o, const dtr_plan_t *plans,
                             const dtr_status_t *st) {
    int only = o->compare || o->strategy != DTR_STRATEGY_COMPAT ? 1 : 0;
    if (st[only] != DTR_OK) return dtr_cli_plan_error("plan", NULL); /* (as the report does) */
    return dtr_cli_write_svg("plan", o->svg, dtr__plan_svg, &plans[only]);
}

/* --batch: the tensors of FILE planned together. */
static int dtr__plan_batch(const dtr_cli_change_t *o, const dtr_change_options_t *opts) {
    dtr_mesh_t *mesh = NULL;
    int rc = dtr_cli_build_mesh("plan", &o->spec, &mesh);
    if (rc != DTR_EXIT_OK) return rc;
    dtr_spec_t *src = NULL, *dst = NULL;
    int n = 0;
    rc = dtr_cli_batch_load("plan", o->batch, mesh, NULL, &src, &dst, &n);
    if (rc == DTR_EXIT_OK) rc = dtr__plan_change(o, mesh, n, src, dst, opts);
    free(src);
    free(dst);
    dtr_mesh_destroy(mesh);
    return rc;
}

/* The cost model from the environment and the cost flags, each checked on its own so that
 * an error names its flag. */
static int dtr__plan_cost(const dtr_cli_change_t *o, dtr_cost_model_t *cost) {
    dtr_cli_cost_flags_t flags = {o->alpha, o->bandwidth, o->local, o->inter_alpha,
                                  o->inter_bandwidth};
    int rc = dtr_cli_cost_flags("plan", &flags, cost);
    if (rc != DTR_EXIT_OK) return rc;
    return dtr__plan_nodes(o->spec.mesh, o->nodes_of, o->inter_alpha, o->inter_bandwidth, cost);
}

/* --batch with the flags of one change: refused by name. */
static int dtr__plan_batch_flags(const dtr_cli_change_t *o) {
    const char *extra = o->spec.shape != NULL ? "--shape" : o->spec.placements != NULL ? "--from"
                        : o->to != NULL ? "--to" : o->spec.dtype != NULL ? "--dtype"
                        : o->to_dtype != NULL ? "--to-dtype"
                        : o->compare ? "--compare" : NULL;
    if (extra != NULL)
        return dtr_cli_usage_error("plan", "%s: not with --batch (the file gives each "
                                           "tensor's shape, dtype, change and to_dtype)", extra);
    if (o->backward)
        return dtr_cli_usage_error("plan", "--backward: not with --batch (plan one tensor's "
                                           "gradient with --shape, --from and --to)");
    return DTR_EXIT_OK;
}

/* The plans asked for into plans[0] (compat) and plans[1] (optimal), their statuses and
 * errors; DTR_EXIT_OK, or the refusal of a --backward whose forward change is refused. */
static int dtr__plan_make(const dtr_cli_change_t *o, const dtr_spec_t *src, const dtr_spec_t *dst,
                          const dtr_cost_model_t *cost, dtr_plan_t *plans, dtr_status_t *st,
                          char (*errors)[600]) {
    /* --backward: no gradient plan for a forward change no strategy plans (S -> P(max) has
     * no backward, though P(max) -> S would plan) */
    dtr_plan_options_t forward = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = cost};
    if (o->backward && dtr_plan_create(src, dst, &forward, &plans[1]) != DTR_OK)
        return dtr_cli_plan_error("plan", "--backward: the forward change is refused");
    for (int k = 0; k < 2; k++) {
        dtr_strategy_t s = k == 0 ? DTR_STRATEGY_COMPAT : DTR_STRATEGY_OPTIMAL;
        st[k] = DTR_OK;
        errors[k][0] = '\0';
        if (!o->compare && s != o->strategy) continue;
        dtr_plan_options_t opts = {.strategy = s, .cost = cost};
        if (o->backward_dtype_text != NULL)
            st[k] = dtr_plan_backward_in(src, dst, o->backward_dtype, &opts, &plans[k]);
        else if (o->backward)
            st[k] = dtr_plan_backward(src, dst, &opts, &plans[k]);
        else
            st[k] = dtr_plan_create(src, dst, &opts, &plans[k]);
        if (st[k] != DTR_OK) snprintf(errors[k], 600, "%s", dtr_last_error());
    }
    return DTR_EXIT_OK;
}

/* Prints what was planned: one plan or both, as text or JSON. */
static int dtr__plan_report(const dtr_cli_change_t *o, const dtr_spec_t *src,
                            const dtr_spec_t *dst, const dtr_plan_t *plans,
                            const dtr_status_t *st, char (*errors)[600]) {
    int only = o->strategy == DTR_STRATEGY_COMPAT ? 0 : 1;
    /* the plan reported is the last one made (compat alone, or optimal after compat), so
     * the library's last error is its own */
    if ((!o->compare && st[only] != DTR_OK) || (o->compare && st[1] != DTR_OK))
        return dtr_cli_plan_error("plan", NULL);
    if (o->json) {
        dtr_cli_json_begin(stdout, "plan", src->mesh);
        dtr_cli_json_change(stdout, src, dst);
    }
    if (o->json && o->compare) {
        fputs(",\"compat\":", stdout);
        if (st[0] == DTR_OK) {
            dtr_plan_print_json(&plans[0], stdout);
        } else {
            fputs("{\"error\":", stdout);
            dtr__json_string(stdout, errors[0]);
            fputc('}', stdout);
        }
        fputs(",\"optimal\":", stdout);
        dtr_plan_print_json(&plans[1], stdout);
        fputs("}\n", stdout);
    } else if (o->json) {
        dtr_cli_json_splice(stdout, dtr__plan_json, &plans[only]);
        fputs("}\n", stdout);
    } else if (o->compare) {
        const char *errs[2] = {errors[0], errors[1]};
        dtr__print_compare(stdout, plans, st, errs);
    } else {
        dtr_plan_print(&plans[only], stdout);
    }
    return DTR_EXIT_OK;
}

/* The specs of a change between meshes: one (--shape, --from, --to) or a --batch file's;
 * *mesh and *mesh_b made (the caller destroys them), *src and *dst malloc'd. */
static int dtr__cross_specs(const dtr_cli_change_t *o, dtr_mesh_t **mesh, dtr_mesh_t **mesh_b,
                            dtr_spec_t **src, dtr_spec_t **dst, int *n) {
    *mesh = *mesh_b = NULL;
    *src = *dst = NULL;
    *n = 0;
    int rc;
    if (o->batch != NULL) {
        rc = dtr_cli_build_mesh("plan", &o->spec, mesh);
        if (rc == DTR_EXIT_OK) rc = dtr_cli_target_mesh("plan", o->to_mesh, o->to_ranks, mesh_b);
        if (rc == DTR_EXIT_OK) rc = dtr_cli_batch_load("plan", o->batch, *mesh, *mesh_b, src, dst, n);
        return rc;
    }
    *src = malloc(sizeof **src);
    *dst = malloc(sizeof **dst);
    if (*src == NULL || *dst == NULL) return dtr_cli_usage_error("plan", "out of memory");
    rc = dtr_cli_build_spec("plan", &o->spec, mesh, *src);
    if (rc == DTR_EXIT_OK)
        rc = dtr_cli_target_spec("plan", o->to, o->to_mesh, o->to_ranks, o->to_dtype, *src,
                                 mesh_b, *dst);
    *n = 1;
    return rc;
}

/* A change between meshes (--to-mesh), of one tensor or a --batch: the cross plan, the
 * report. */
static int dtr__plan_cross(const dtr_cli_change_t *o, const dtr_cost_model_t *cost) {
    const char *other = o->compare ? "--compare" : o->backward ? "--backward"
                        : o->nodes_of != NULL ? "--nodes-of"
                        : o->strategy == DTR_STRATEGY_COMPAT ? "--strategy compat" : NULL;
    if (other != NULL)
        return dtr_cli_usage_error("plan", "%s: not with %s yet (docs/cross-mesh.md, "
                                           "\"Not yet\", lists what a change between meshes "
                                           "lacks)", other,
                                   o->ragged ? "a ragged shard (its change runs as one between "
                                               "meshes, onto --mesh)"
                                             : "--to-mesh");
    int rc = o->batch != NULL ? dtr__plan_batch_flags(o) : DTR_EXIT_OK;
    if (rc != DTR_EXIT_OK) return rc;
    dtr_mesh_t *mesh, *mesh_b;
    dtr_spec_t *src, *dst;
    int n;
    rc = dtr__cross_specs(o, &mesh, &mesh_b, &src, &dst, &n);
    dtr_change_options_t opts = {.cost = cost, .relabel = o->relabel,
                                 .staging_cap_bytes = o->staging_cap, .between_meshes = true,
                                 .many = o->batch != NULL, .block_scale = o->block_scale};
    if (rc == DTR_EXIT_OK) rc = dtr__plan_change(o, mesh, n, src, dst, &opts);
    free(src);
    free(dst);
    dtr_mesh_destroy(mesh_b);
    dtr_mesh_destroy(mesh);
    return rc;
}

/* One change: its specs, its plans, the report (--block-scale: the change object's). */
static int dtr__plan_one(const dtr_cli_change_t *o, const dtr_cost_model_t *cost) {
    dtr_mesh_t *mesh;
    dtr_spec_t src, dst;
    int rc = dtr_cli_build_spec("plan", &o->spec, &mesh, &src);
    if (rc != DTR_EXIT_OK) return rc;
    dtr_mesh_t *none = NULL;
    rc = dtr_cli_target_spec("plan", o->to, NULL, o->to_ranks, o->to_dtype, &src, &none, &dst);
    dtr_cli_route_t route = rc == DTR_EXIT_OK ? dtr_cli_ragged_route(1, &src, &dst, false)
                                              : DTR_CLI_ROUTE_WITHIN;
    if (route == DTR_CLI_ROUTE_BETWEEN) { /* a ragged shard that moves: onto --mesh */
        dtr_mesh_destroy(mesh);
        dtr_cli_change_t onto = *o;
        dtr_cli_ragged_onto_mesh(&onto);
        return dtr__plan_cross(&onto, cost);
    }
    if (rc == DTR_EXIT_OK && (o->block_scale > 0 || route == DTR_CLI_ROUTE_FAILED)) {
        dtr_change_options_t opts = {.strategy = o->strategy, .cost = cost,
                                     .block_scale = o->block_scale};
        rc = dtr__plan_change(o, mesh, 1, &src, &dst, &opts);
        dtr_mesh_destroy(mesh);
        return rc;
    }
    dtr_plan_t *plans = NULL; /* [0] compat, [1] optimal */
    if (rc == DTR_EXIT_OK && (plans = malloc(2 * sizeof *plans)) == NULL)
        rc = dtr_cli_usage_error("plan", "out of memory");
    dtr_status_t st[2];
    char errors[2][600];
    if (rc == DTR_EXIT_OK) rc = dtr__plan_make(o, &src, &dst, cost, plans, st, errors);
    /* (the picture first: where it cannot be written, nothing is printed but the error) */
    if (rc == DTR_EXIT_OK && o->svg != NULL) rc = dtr__plan_one_svg(o, plans, st);
    bool svg_only = o->svg != NULL && strcmp(o->svg, "-") == 0;
    if (rc == DTR_EXIT_OK && !svg_only) rc = dtr__plan_report(o, &src, &dst, plans, st, errors);
    free(plans);
    dtr_mesh_destroy(mesh);
    return rc;
}

static int dtr__plan_main(int argc, char **argv) {
    dtr_cli_change_t o;
    int rc = dtr_cli_change_parse("plan", DTR_CLI_PLAN, argc, argv, &o);
    if (rc != DTR_EXIT_OK) return rc;
    if (o.help) {
        dtr__plan_help(stdout);
        return DTR_EXIT_OK;
    }
    rc = dtr_cli_change_check("plan", DTR_CLI_PLAN, 1, &o, NULL);
    dtr_cost_model_t cost;
    if (rc == DTR_EXIT_OK) rc = dtr__plan_cost(&o, &cost);
    if (rc != DTR_EXIT_OK) return rc;
    if (o.to_mesh != NULL) return dtr__plan_cross(&o, &cost);
    if (o.batch == NULL) return dtr__plan_one(&o, &cost);
    rc = dtr__plan_batch_flags(&o);
    dtr_change_options_t opts = {.strategy = o.strategy, .cost = &cost, .many = true,
                                 .block_scale = o.block_scale};
    return rc != DTR_EXIT_OK ? rc : dtr__plan_batch(&o, &opts);
}

const dtr_cli_command_t dtr_cli_plan = {
    .name = "plan",
    .summary = "plan a redistribution and print its steps, bytes and cost (dry run)",
    .main = dtr__plan_main,
    .help = dtr__plan_help,
};
