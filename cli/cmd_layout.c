/* dtr layout: every rank's coordinate, local shape, global offset and bytes for a spec. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void dtr__layout_help(FILE *out) {
    fputs(
        "usage: dtr layout --mesh MESH --shape SHAPE --placements LIST [--dtype DTYPE]\n"
        "                  [--ranks LIST] [--json] [--all] [--svg FILE]\n"
        "\n"
        "Prints what each rank of the mesh holds of a tensor: its mesh coordinate, local\n"
        "shape, global offset and bytes, with PyTorch DTensor's chunk semantics (uneven\n"
        "shards, empty shards, nested sharding of one dim over several mesh dims, in\n"
        "mesh-dim order or in a shard order).\n"
        "\n"
        "  --mesh MESH          mesh sizes, e.g. 8, 2x4 (1 to 8 dims)\n"
        "  --shape SHAPE        global tensor shape, e.g. 64x64; '' or scalar for 0-d\n"
        "  --placements LIST    one placement per mesh dim: S(d) shard tensor dim d,\n"
        "                       R replicate, P or P(op) partial with op sum|avg|max|min|product;\n"
        "                       S(d)[k]: the k-th mesh dim (from 0) to split d, a shard order;\n"
        "                       _S(d, sf): PyTorch's _StridedShard, read as its shard order;\n"
        "                       S(d){n0,n1,...}: a ragged shard, n_c rows of d at coordinate\n"
        "                       c (one size per rank of the mesh dim, summing to d's length)\n"
        "  --dtype DTYPE        f32 (default), or any of the library's dtypes:\n"
        "                       ",
        out);
    /* the list from the library's dtype table, so that a new dtype shows here */
    for (int d = 0; d < DTR_DTYPE_LAST; d++)
        fprintf(out, "%s%s", d ? ", " : "", dtr_dtype_name((dtr_dtype_t)d));
    fputs("\n"
        "  --ranks LIST         explicit ranks in row-major mesh order, e.g. 3,2,1,0\n"
        "                       (default 0..N-1)\n"
        "  --json               one JSON object instead of the table\n"
        "  --all                every rank, however many: the table lists the first 64\n"
        "                       (and sums them all up to a million ranks), --json refuses\n"
        "                       a mesh of more than a million ranks without it\n"
        "  --svg FILE           also draw the layout into FILE (SVG; '-': to stdout, instead\n"
        "                       of the table): the mesh's ranks, each rank's block in its\n"
        "                       colour\n"
        "  -h, --help           this help\n"
        "\n"
        "examples:\n"
        "  dtr layout --mesh 2x2 --shape 2x5 --placements 'S(1),S(1)'\n"
        "  dtr layout --mesh 4 --shape 5 --placements 'S(0)' --json\n"
        "  dtr layout --mesh 2x2 --shape 8x8 --placements 'S(0),P(avg)' --dtype bf16\n"
        "  dtr layout --mesh 2x4 --shape 16x8 --placements 'S(0)[1],S(0)[0]'  (tp first)\n"
        "  dtr layout --mesh 4 --shape 10x3 --placements 'S(0){3,0,5,2}'  (ragged)\n"
        "\n"
        "Bad arguments print one line naming the problem and exit with status 2.\n",
        out);
}

static void dtr__print_tuple(FILE *out, const int64_t *v, int n, char *buf, size_t len) {
    size_t pos = 0;
    pos += (size_t)snprintf(buf + pos, len - pos, "(");
    for (int i = 0; i < n && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%lld", i ? "," : "", (long long)v[i]);
    if (pos < len) snprintf(buf + pos, len - pos, ")");
    (void)out;
}

/* Rows the table lists without --all; ranks it sums without --all. */
#define DTR__LAYOUT_ROWS 64
#define DTR__LAYOUT_SUM ((int64_t)1 << 20)

static void dtr__print_table(FILE *out, const dtr_spec_t *spec, const char *mesh_text,
                             const char *shape_text, const char *placement_text, bool all) {
    const dtr_mesh_t *mesh = spec->mesh;
    int mdims = dtr_mesh_ndims(mesh);
    int64_t nranks = dtr_mesh_nranks(mesh);
    fprintf(out, "mesh %s  shape %s  dtype %s  placements %s\n\n", mesh_text, shape_text,
            dtr_dtype_name(spec->dtype), placement_text);
    fprintf(out, "%6s  %-17s  %-20s  %-24s  %s\n", "rank", "coord", "local_shape",
            "global_offset", "bytes");
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    int64_t total = 0;
    bool sum = all || nranks <= DTR__LAYOUT_SUM;
    for (int64_t p = 0; p < nranks && (sum || p < DTR__LAYOUT_ROWS); p++) {
        int rank;
        dtr_layout_t l;
        dtr_mesh_rank_at(mesh, coord, &rank);
        dtr_spec_layout_at(spec, coord, &l);
        char c[DTR_MAX_MESH_DIMS * 12 + 4], s[DTR_MAX_TENSOR_DIMS * 21 + 8],
            o[DTR_MAX_TENSOR_DIMS * 21 + 4];
        dtr__print_tuple(out, coord, mdims, c, sizeof c);
        dtr_shape_format(l.local_shape, l.ndim, s, sizeof s);
        dtr__print_tuple(out, l.global_offset, l.ndim, o, sizeof o);
        if (all || p < DTR__LAYOUT_ROWS)
            fprintf(out, "%6d  %-17s  %-20s  %-24s  %lld\n", rank, c, s, o, (long long)l.bytes);
        total += l.bytes;
        for (int i = mdims - 1; i >= 0; i--) { /* next coordinate, row-major */
            if (++coord[i] < dtr_mesh_size(mesh, i)) break;
            coord[i] = 0;
        }
    }
    int64_t tensor = dtr_dtype_info(spec->dtype)->size;
    for (int d = 0; d < spec->ndim; d++) tensor *= spec->shape[d];
    if (!all && nranks > DTR__LAYOUT_ROWS)
        fprintf(out, "%6s  (%lld more rank%s: --all lists every rank)\n", "...",
                (long long)(nranks - DTR__LAYOUT_ROWS), nranks - DTR__LAYOUT_ROWS > 1 ? "s" : "");
    if (sum)
        fprintf(out, "\n%lld bytes held over %lld ranks; the tensor is %lld bytes\n",
                (long long)total, (long long)nranks, (long long)tensor);
    else
        fprintf(out, "\n%lld ranks; the tensor is %lld bytes (--all sums what they hold)\n",
                (long long)nranks, (long long)tensor);
}

static void dtr__print_json(FILE *out, const dtr_spec_t *spec) {
    const dtr_mesh_t *mesh = spec->mesh;
    int mdims = dtr_mesh_ndims(mesh);
    dtr_cli_json_begin(out, "layout", mesh);
    fputs(",\"shape\":", out);
    dtr_cli_json_i64_array(out, spec->shape, spec->ndim);
    fprintf(out, ",\"dtype\":\"%s\",\"placements\":", dtr_dtype_name(spec->dtype));
    dtr_cli_json_placements(out, spec->placements, mdims);
    fputs(",\"blocks\":[", out);
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    int64_t nranks = dtr_mesh_nranks(mesh);
    for (int64_t p = 0; p < nranks; p++) {
        int rank;
        dtr_layout_t l;
        dtr_mesh_rank_at(mesh, coord, &rank);
        dtr_spec_layout_at(spec, coord, &l);
        fprintf(out, "%s{\"rank\":%d,\"coord\":", p ? "," : "", rank);
        dtr_cli_json_i64_array(out, coord, mdims);
        fputs(",\"local_shape\":", out);
        dtr_cli_json_i64_array(out, l.local_shape, l.ndim);
        fputs(",\"global_offset\":", out);
        dtr_cli_json_i64_array(out, l.global_offset, l.ndim);
        fprintf(out, ",\"bytes\":%lld}", (long long)l.bytes);
        for (int i = mdims - 1; i >= 0; i--) {
            if (++coord[i] < dtr_mesh_size(mesh, i)) break;
            coord[i] = 0;
        }
    }
    fputs("]}\n", out);
}

static dtr_status_t dtr__layout_svg(const void *spec, FILE *f) {
    return dtr_layout_print_svg(spec, f);
}

static int dtr__layout_main(int argc, char **argv) {
    static const struct option options[] = {
        DTR_CLI_SPEC_OPTIONS,
        {"placements", required_argument, NULL, 'p'},
        {"json", no_argument, NULL, 'j'},
        {"all", no_argument, NULL, 'a'},
        {"svg", required_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    dtr_cli_spec_args_t args = {0};
    int json = 0;
    bool all = false;
    const char *svg = NULL;
    opterr = 0;
    unsigned char seen[DTR_CLI_SEEN] = {0};
    for (;;) {
        int c = getopt_long(argc, argv, ":h", options, NULL);
        if (c == -1) break;
        if (dtr_cli_once("layout", options, c, seen) != DTR_EXIT_OK) return DTR_EXIT_USAGE;
        switch (c) {
        case 'p': args.placements = optarg; break;
        case 'j': json = 1; break;
        case 'a': all = true; break;
        case 'g': svg = optarg; break;
        case 'h': dtr__layout_help(stdout); return DTR_EXIT_OK;
        default: /* a spec flag, or ':' / '?' */
            if (dtr_cli_spec_option(c, optarg, &args)) break;
            return dtr_cli_option_error("layout", c, argv);
        }
    }
    if (optind < argc) return dtr_cli_option_error("layout", 0, argv);

    dtr_mesh_t *mesh;
    dtr_spec_t spec;
    int rc = dtr_cli_build_spec("layout", &args, &mesh, &spec);
    if (rc != DTR_EXIT_OK) return rc;
    if (json && !all && dtr_mesh_nranks(mesh) > DTR__LAYOUT_SUM) {
        rc = dtr_cli_usage_error("layout", "--json: %lld blocks, more than %lld; --all prints "
                                            "them all", (long long)dtr_mesh_nranks(mesh),
                                 (long long)DTR__LAYOUT_SUM);
        dtr_mesh_destroy(mesh);
        return rc;
    }
    /* the picture first: where it cannot be written, nothing prints but the error */
    rc = svg != NULL ? dtr_cli_write_svg("layout", svg, dtr__layout_svg, &spec) : DTR_EXIT_OK;
    if (rc != DTR_EXIT_OK || (svg != NULL && strcmp(svg, "-") == 0)) {
        /* (the error, or the picture alone on stdout) */
    } else if (json) {
        dtr__print_json(stdout, &spec);
    } else {
        char mesh_text[256], shape_text[256], placement_text[1024];
        dtr_mesh_format(mesh, mesh_text, sizeof mesh_text);
        dtr_shape_format(spec.shape, spec.ndim, shape_text, sizeof shape_text);
        dtr_placements_describe(spec.placements, dtr_mesh_ndims(mesh), placement_text,
                             sizeof placement_text);
        dtr__print_table(stdout, &spec, mesh_text, shape_text, placement_text, all);
    }
    dtr_mesh_destroy(mesh);
    return rc;
}

const dtr_cli_command_t dtr_cli_layout = {
    .name = "layout",
    .summary = "show each rank's local shape, global offset and bytes for a spec",
    .main = dtr__layout_main,
    .help = dtr__layout_help,
};
