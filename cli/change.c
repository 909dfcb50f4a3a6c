/* The flags of dtr plan, dtr run and dtr run --batch: one table, one parser, one check
 * (change.h). */
#include "cli/change.h"

#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* getopt_long's codes past the characters the spec flags use ('m', 's', 'd', 'r'). */
enum {
    OPT_FROM = 256, OPT_TO, OPT_STRATEGY, OPT_JSON, OPT_BATCH, OPT_BACKWARD, OPT_TO_DTYPE,
    OPT_BACKWARD_DTYPE, OPT_NODES_OF, OPT_COMPARE, OPT_ALPHA, OPT_BANDWIDTH, OPT_LOCAL,
    OPT_INTER_ALPHA, OPT_INTER_BANDWIDTH, OPT_ITERS, OPT_WARMUP, OPT_VERIFY, OPT_NONBLOCKING,
    OPT_INJECT, OPT_DUMP, OPT_SVG, OPT_BACKEND, OPT_DEVICE, OPT_FILL, OPT_SEED, OPT_INPUT, OPT_BUFFERS,
    OPT_BLOCK_SCALE,
    OPT_TO_MESH, OPT_TO_RANKS, OPT_RELABEL, OPT_STAGING_CAP, OPT_DIGEST,
};

#define ALL (DTR_CLI_PLAN | DTR_CLI_RUN | DTR_CLI_RUN_BATCH)
#define RUNS (DTR_CLI_RUN | DTR_CLI_RUN_BATCH)
#define SINGLE (DTR_CLI_PLAN | DTR_CLI_RUN)

/* The table: each flag, and the commands that take it. */
static const struct {
    struct option opt;
    unsigned who;
} dtr__flags[] = {
    {{"mesh", required_argument, NULL, 'm'}, ALL},
    {{"ranks", required_argument, NULL, 'r'}, ALL},
    {{"shape", required_argument, NULL, 's'}, SINGLE}, /* (run --batch names why not) */
    {{"dtype", required_argument, NULL, 'd'}, SINGLE},
    {{"from", required_argument, NULL, OPT_FROM}, SINGLE},
    {{"to", required_argument, NULL, OPT_TO}, SINGLE},
    {{"to-dtype", required_argument, NULL, OPT_TO_DTYPE}, SINGLE},
    {{"to-mesh", required_argument, NULL, OPT_TO_MESH}, ALL},
    {{"to-ranks", required_argument, NULL, OPT_TO_RANKS}, ALL},
    {{"relabel", no_argument, NULL, OPT_RELABEL}, ALL},
    {{"staging-cap", required_argument, NULL, OPT_STAGING_CAP}, ALL},
    {{"block-scale", required_argument, NULL, OPT_BLOCK_SCALE}, ALL},
    {{"strategy", required_argument, NULL, OPT_STRATEGY}, ALL},
    {{"json", no_argument, NULL, OPT_JSON}, ALL},
    {{"batch", required_argument, NULL, OPT_BATCH}, ALL},
    {{"backward", no_argument, NULL, OPT_BACKWARD}, SINGLE},
    {{"backward-dtype", required_argument, NULL, OPT_BACKWARD_DTYPE}, SINGLE},
    {{"nodes-of", required_argument, NULL, OPT_NODES_OF}, SINGLE},
    {{"compare", no_argument, NULL, OPT_COMPARE}, DTR_CLI_PLAN},
    {{"svg", required_argument, NULL, OPT_SVG}, DTR_CLI_PLAN},
    {{"alpha-us", required_argument, NULL, OPT_ALPHA}, ALL},
    {{"bandwidth-gbps", required_argument, NULL, OPT_BANDWIDTH}, ALL},
    {{"local-gbps", required_argument, NULL, OPT_LOCAL}, ALL},
    {{"inter-alpha-us", required_argument, NULL, OPT_INTER_ALPHA}, ALL},
    {{"inter-bandwidth-gbps", required_argument, NULL, OPT_INTER_BANDWIDTH}, ALL},
    {{"iters", required_argument, NULL, OPT_ITERS}, RUNS},
    {{"warmup", required_argument, NULL, OPT_WARMUP}, RUNS},
    {{"verify", no_argument, NULL, OPT_VERIFY}, RUNS},
    {{"nonblocking", no_argument, NULL, OPT_NONBLOCKING}, RUNS},
    {{"digest", no_argument, NULL, OPT_DIGEST}, RUNS},
    {{"fill", required_argument, NULL, OPT_FILL}, RUNS},
    {{"seed", required_argument, NULL, OPT_SEED}, RUNS},
    {{"inject-mismatch", required_argument, NULL, OPT_INJECT}, DTR_CLI_RUN},
    {{"dump", required_argument, NULL, OPT_DUMP}, RUNS},
    {{"backend", required_argument, NULL, OPT_BACKEND}, RUNS},
    {{"device", required_argument, NULL, OPT_DEVICE}, DTR_CLI_RUN},
    {{"input", required_argument, NULL, OPT_INPUT}, DTR_CLI_RUN},
    {{"buffers", required_argument, NULL, OPT_BUFFERS}, DTR_CLI_RUN},
    {{"help", no_argument, NULL, 'h'}, ALL},
};
#define DTR__NFLAGS ((int)(sizeof dtr__flags / sizeof dtr__flags[0]))

bool dtr_cli_change_is_batch(int argc, char **argv) {
    bool batch = false, help = false;
    for (int k = 1; k < argc; k++) {
        batch = batch || strcmp(argv[k], "--batch") == 0 || strncmp(argv[k], "--batch=", 8) == 0;
        help = help || strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0;
    }
    return batch && !help;
}

/* Stores a flag's value (the spec flags through dtr_cli_spec_option). */
static void change_store(dtr_cli_change_t *o, int c, const char *v) {
    switch (c) {
    case OPT_FROM: o->spec.placements = v; break;
    case OPT_TO: o->to = v; break;
    case OPT_TO_DTYPE: o->to_dtype = v; break;
    case OPT_TO_MESH: o->to_mesh = v; break;
    case OPT_TO_RANKS: o->to_ranks = v; break;
    case OPT_RELABEL: o->relabel = true; break;
    case OPT_STAGING_CAP: o->staging_cap_text = v; break;
    case OPT_BLOCK_SCALE: o->block_scale_text = v; break;
    case OPT_STRATEGY: o->strategy_text = v; break;
    case OPT_JSON: o->json = true; break;
    case OPT_BATCH: o->batch = v; break;
    case OPT_BACKWARD: o->backward = true; break;
    case OPT_BACKWARD_DTYPE: o->backward_dtype_text = v; break;
    case OPT_NODES_OF: o->nodes_of = v; break;
    case OPT_COMPARE: o->compare = true; break;
    case OPT_ALPHA: o->alpha = v; break;
    case OPT_BANDWIDTH: o->bandwidth = v; break;
    case OPT_LOCAL: o->local = v; break;
    case OPT_INTER_ALPHA: o->inter_alpha = v; break;
    case OPT_INTER_BANDWIDTH: o->inter_bandwidth = v; break;
    case OPT_ITERS: o->iters_text = v; break;
    case OPT_WARMUP: o->warmup_text = v; break;
    case OPT_VERIFY: o->verify = true; break;
    case OPT_NONBLOCKING: o->nonblocking = true; break;
    case OPT_DIGEST: o->digest = true; break;
    case OPT_INJECT: o->inject_text = v; break;
    case OPT_DUMP: o->dump = v; break;
    case OPT_SVG: o->svg = v; break;
    case OPT_BACKEND: o->backend = v; break;
    case OPT_DEVICE: o->device = v; break;
    case OPT_FILL: o->fill_text = v; break;
    case OPT_SEED: o->seed_text = v; break;
    case OPT_INPUT: o->input = v; break;
    case OPT_BUFFERS: o->buffers = v; break;
    case 'h': o->help = true; break;
    default: dtr_cli_spec_option(c, v, &o->spec); break;
    }
}

/* A flag the table knows that `who` does not take: run --batch names what it takes. */
static int dtr__not_here(const char *cmd, unsigned who, int c, const char *name) {
    if (who == DTR_CLI_RUN_BATCH && (c == 's' || c == 'd'))
        return dtr_cli_usage_error(cmd, "--%s: not with --batch (the file gives each tensor's "
                                        "shape, dtype and to_dtype)", name);
    if (who == DTR_CLI_RUN_BATCH)
        return dtr_cli_usage_error(cmd, "--%s: not with --batch (supported with it: --mesh, "
                                        "--ranks, --strategy, --iters, --warmup, --verify, "
                                        "--nonblocking, --digest, --json, --fill, --seed, --backend, "
                                        "--dump, --to-mesh, --to-ranks, --relabel, "
                                        "--staging-cap, --block-scale)", name);
    return dtr_cli_usage_error(cmd, "unknown option '--%s' (see 'dtr %s --help')", name, cmd);
}

int dtr_cli_change_parse(const char *cmd, unsigned who, int argc, char **argv,
                         dtr_cli_change_t *o) {
    memset(o, 0, sizeof *o);
    o->spec.placements_flag = "--from";
    if (who & RUNS) {
        o->iters_text = "20";
        o->warmup_text = "3";
        o->fill_text = "pattern";
        o->backend = "mpi";
        o->buffers = "private";
        o->nodes_of = "auto";
    }
    struct option options[DTR__NFLAGS + 1];
    for (int k = 0; k < DTR__NFLAGS; k++) options[k] = dtr__flags[k].opt;
    options[DTR__NFLAGS] = (struct option){NULL, 0, NULL, 0};
    opterr = 0;
    unsigned char seen[DTR_CLI_SEEN] = {0};
    for (;;) {
        int index = -1;
        int c = getopt_long(argc, argv, ":h", options, &index);
        if (c == -1) break;
        int once = dtr_cli_once(cmd, options, c, seen);
        if (once != DTR_EXIT_OK) return once;
        if (c == ':' || c == '?') {
            if (who == DTR_CLI_RUN_BATCH && c == '?' && optopt == 0)
                return dtr_cli_usage_error(cmd, "%s: not with --batch (supported with it: "
                                                "--mesh, --ranks, --strategy, --iters, "
                                                "--warmup, --verify, --nonblocking, --digest, --json, "
                                                "--fill, --seed, --backend, --dump, --to-mesh, "
                                                "--to-ranks, --relabel, --staging-cap, "
                                                "--block-scale)",
                                       argv[optind - 1]);
            return dtr_cli_option_error(cmd, c, argv);
        }
        if (index < 0) /* (-h) */
            for (index = 0; dtr__flags[index].opt.val != c; index++) continue;
        if (!(dtr__flags[index].who & who))
            return dtr__not_here(cmd, who, c, dtr__flags[index].opt.name);
        change_store(o, c, optarg);
        if (o->help) return DTR_EXIT_OK;
    }
    if (optind < argc) return dtr_cli_option_error(cmd, 0, argv);
    /* A ragged shard (S(d){sizes}) that the change moves goes between meshes, box by box,
     * onto the same mesh where no --to-mesh is given: the commands ask the change object
     * (dtr_cli_ragged_onto_mesh) once the specs are made; the flags only a change between
     * meshes takes send it there at once. */
    o->ragged = o->to_mesh == NULL && o->batch == NULL &&
                ((o->spec.placements != NULL && strchr(o->spec.placements, '{') != NULL) ||
                 (o->to != NULL && strchr(o->to, '{') != NULL));
    if (o->ragged && (o->relabel || o->staging_cap_text != NULL || o->block_scale_text != NULL))
        dtr_cli_ragged_onto_mesh(o);
    return DTR_EXIT_OK;
}

/* --fill and --seed, and where they meet --input. */
static int dtr__fill_check(const char *cmd, unsigned who, dtr_cli_change_t *o) {
    o->fill = (dtr_fill_t){.kind = DTR_FILL_PATTERN, .seed = 1};
    if (o->seed_text != NULL) {
        int64_t seed;
        int rc = dtr_cli_parse_int(cmd, "--seed", o->seed_text, 0, INT64_MAX, "a seed 0..2^63-1",
                                   &seed);
        if (rc != DTR_EXIT_OK) return rc;
        o->fill.seed = (uint64_t)seed;
    }
    if (strcmp(o->fill_text, "random") == 0)
        o->fill.kind = DTR_FILL_RANDOM;
    else if (strcmp(o->fill_text, "pattern") != 0)
        return dtr_cli_usage_error(cmd, "--fill: '%s' is not pattern or random", o->fill_text);
    if (who != DTR_CLI_RUN) return DTR_EXIT_OK; /* (a batch seeds tensor k's pattern with S + k) */
    if (o->seed_text != NULL && o->fill.kind != DTR_FILL_RANDOM)
        return dtr_cli_usage_error(cmd, "--seed: seeds the random fill only (add --fill "
                                        "random)");
    if (o->input != NULL && o->fill.kind == DTR_FILL_RANDOM)
        return dtr_cli_usage_error(cmd, "--input: reads the source blocks; --fill random "
                                        "fills them: pick one");
    if (o->input != NULL) o->fill.kind = DTR_FILL_GIVEN;
    return DTR_EXIT_OK;
}

static bool dtr__is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* dtr run's own flags after the counts and the fill: the engine, the buffers, the
 * directories. */
static int dtr__run_flags(const char *cmd, dtr_cli_change_t *o, dtr_cli_engine_t *engine) {
    int rc = dtr_cli_engine_args(cmd, o->backend, o->device, engine);
    if (rc != DTR_EXIT_OK) return rc;
    o->device = engine->device;
    o->shared = strcmp(o->buffers, "shared") == 0;
    if (!o->shared && strcmp(o->buffers, "private") != 0)
        return dtr_cli_usage_error(cmd, "--buffers: '%s' is not private or shared", o->buffers);
    if (o->shared && (engine->cuda || engine->nccl || engine->gloo))
        return dtr_cli_usage_error(cmd, "--buffers shared: the MPI backend on CPU buffers "
                                        "only (--backend mpi --device cpu)");
    if (o->dump != NULL && !dtr__is_dir(o->dump))
        return dtr_cli_usage_error(cmd, "--dump: '%s' is not an existing directory", o->dump);
    if (o->digest && engine->cuda)
        return dtr_cli_usage_error(cmd, "--digest: reads CPU buffers (--device cpu)");
    if (o->input != NULL && !dtr__is_dir(o->input))
        return dtr_cli_usage_error(cmd, "--input: '%s' is not an existing directory", o->input);
    return DTR_EXIT_OK;
}

/* --iters, --warmup and --inject-mismatch. */
static int dtr__counts_check(const char *cmd, int world, dtr_cli_change_t *o) {
    int rc = dtr_cli_parse_int(cmd, "--iters", o->iters_text, 0, 1000000, "a count 0..1000000",
                               &o->iters);
    if (rc == DTR_EXIT_OK)
        rc = dtr_cli_parse_int(cmd, "--warmup", o->warmup_text, 0, 1000000, "a count 0..1000000",
                               &o->warmup);
    o->inject = -1;
    if (rc == DTR_EXIT_OK && o->inject_text != NULL) {
        char what[48];
        snprintf(what, sizeof what, "a rank 0..%d", world - 1);
        rc = dtr_cli_parse_int(cmd, "--inject-mismatch", o->inject_text, 0, world - 1, what,
                               &o->inject);
    }
    return rc;
}

/* --to-mesh's companions: --to-ranks, --relabel and --staging-cap (bytes, or with a K, M
 * or G suffix: binary units). */
static int dtr__cross_check(const char *cmd, dtr_cli_change_t *o) {
    const char *lone = o->to_ranks ? "--to-ranks: goes with --to-mesh (the destination mesh's ranks)"
                       : o->relabel ? "--relabel: goes with --to-mesh (it orders the destination "
                                      "mesh's ranks)"
                       : o->staging_cap_text ? "--staging-cap: goes with --to-mesh (it caps the "
                                               "moves between meshes)"
                                             : NULL;
    if (o->to_mesh == NULL && lone != NULL) return dtr_cli_usage_error(cmd, "%s", lone);
    o->staging_cap = 0;
    if (o->staging_cap_text == NULL) return DTR_EXIT_OK;
    char digits[32];
    size_t len = strlen(o->staging_cap_text);
    int shift = 0;
    char last = len > 0 ? o->staging_cap_text[len - 1] : '\0';
    if (last == 'K' || last == 'M' || last == 'G') shift = last == 'K' ? 10 : last == 'M' ? 20 : 30;
    if (len - (shift > 0) >= sizeof digits || len - (shift > 0) == 0)
        return dtr_cli_usage_error(cmd, "--staging-cap: '%s' is not a byte count (like 65536, "
                                        "64K, 16M or 1G)", o->staging_cap_text);
    memcpy(digits, o->staging_cap_text, len - (shift > 0));
    digits[len - (shift > 0)] = '\0';
    int rc = dtr_cli_parse_int(cmd, "--staging-cap", digits, 1, INT64_MAX >> 30,
                               "a byte count 1..8589934591 (like 65536, 64K, 16M or 1G)",
                               &o->staging_cap);
    o->staging_cap <<= shift;
    return rc;
}

/* --block-scale: a block edge; dtr run takes it with --to-mesh only (the run between meshes
 * reports and checks the quantized tensors and their scales). */
static int dtr__block_scale_check(const char *cmd, unsigned who, dtr_cli_change_t *o) {
    o->block_scale = 0;
    if (o->block_scale_text == NULL) return DTR_EXIT_OK;
    int rc = dtr_cli_parse_int(cmd, "--block-scale", o->block_scale_text, 1, INT64_C(1) << 30,
                               "a block edge 1..1073741824 (128: DeepSeek-V3's blocks)",
                               &o->block_scale);
    if (rc == DTR_EXIT_OK && (who & RUNS) && o->to_mesh == NULL)
        rc = dtr_cli_usage_error(cmd, "--block-scale: with --to-mesh (a change between meshes; "
                                      "give the same mesh and ranks to quantize within one)");
    if (rc == DTR_EXIT_OK && o->backward)
        rc = dtr_cli_usage_error(cmd, "--backward: not with --block-scale (a block-scaled "
                                      "change has no backward plan)");
    if (rc == DTR_EXIT_OK && o->compare)
        rc = dtr_cli_usage_error(cmd, "--compare: not with --block-scale (a block-scaled "
                                      "change plans with the optimal strategy alone)");
    return rc;
}

int dtr_cli_change_check(const char *cmd, unsigned who, int world, dtr_cli_change_t *o,
                         dtr_cli_engine_t *engine) {
    o->backward_dtype = DTR_F32;
    int rc = dtr_cli_backward_dtype(cmd, o->backward_dtype_text, o->backward, &o->backward_dtype);
    if (rc == DTR_EXIT_OK && (who & RUNS)) rc = dtr__counts_check(cmd, world, o);
    if (rc == DTR_EXIT_OK && (who & RUNS)) rc = dtr__fill_check(cmd, who, o);
    if (rc == DTR_EXIT_OK && who == DTR_CLI_RUN) rc = dtr__run_flags(cmd, o, engine);
    if (rc == DTR_EXIT_OK && who == DTR_CLI_RUN_BATCH && strcmp(o->backend, "mpi") != 0 &&
        strcmp(o->backend, "gloo") != 0)
        rc = dtr_cli_usage_error(cmd, "--backend: '%s' is not mpi or gloo (--batch runs on "
                                      "CPU buffers)", o->backend);
    if (rc == DTR_EXIT_OK && who == DTR_CLI_RUN_BATCH && o->dump != NULL && !dtr__is_dir(o->dump))
        rc = dtr_cli_usage_error(cmd, "--dump: '%s' is not an existing directory", o->dump);
    if (rc == DTR_EXIT_OK) rc = dtr__cross_check(cmd, o);
    if (rc == DTR_EXIT_OK) rc = dtr__block_scale_check(cmd, who, o);
    if (rc != DTR_EXIT_OK) return rc;
    o->strategy = DTR_STRATEGY_OPTIMAL;
    if (o->strategy_text != NULL && dtr_strategy_parse(o->strategy_text, &o->strategy) != DTR_OK)
        return dtr_cli_lib_error(cmd, "--strategy");
    if (o->compare && o->strategy_text != NULL)
        return dtr_cli_usage_error(cmd, "--compare shows both strategies; drop --strategy");
    return DTR_EXIT_OK;
}

void dtr_cli_ragged_onto_mesh(dtr_cli_change_t *o) {
    o->to_mesh = o->spec.mesh;
    o->to_ranks = o->spec.ranks;
}

dtr_cli_route_t dtr_cli_ragged_route(int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                     bool many) {
    bool ragged = false;
    for (int k = 0; k < n; k++) ragged = ragged || dtr_spec_ragged(&src[k]) || dtr_spec_ragged(&dst[k]);
    if (!ragged) return DTR_CLI_ROUTE_WITHIN;
    dtr_change_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL, .many = many};
    dtr_change_t *c = NULL;
    if (dtr_change_create(n, src, dst, &opts, &c) != DTR_OK) return DTR_CLI_ROUTE_FAILED;
    dtr_change_form_t form = dtr_change_form(c);
    dtr_change_destroy(c);
    return form == DTR_CHANGE_ONE || form == DTR_CHANGE_BATCH ? DTR_CLI_ROUTE_WITHIN
                                                              : DTR_CLI_ROUTE_BETWEEN;
}
