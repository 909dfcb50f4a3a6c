/*
 * The flags of the commands that plan or run one change of layout, or a batch of them:
 * `dtr plan`, `dtr run` and `dtr run --batch` read one options struct with one option
 * table and one parser (change.c); each command takes the flags its mask names and
 * refuses the others as unknown (`run --batch`: as not with --batch).
 */
#ifndef DTR_CLI_CHANGE_H
#define DTR_CLI_CHANGE_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/cli.h"
#include "pattern/pattern.h"

/* Which command parses: an option table entry names the commands that take it. */
enum {
    DTR_CLI_PLAN = 1u,      /* dtr plan, and dtr plan --batch */
    DTR_CLI_RUN = 2u,       /* dtr run */
    DTR_CLI_RUN_BATCH = 4u, /* dtr run --batch */
};

typedef struct {
    /* the flags as given (NULL or false where absent; run's defaults filled in) */
    dtr_cli_spec_args_t spec; /* --mesh --shape --from --dtype --ranks */
    const char *to, *to_dtype, *strategy_text, *batch, *nodes_of;
    const char *to_mesh, *to_ranks; /* a change between meshes: the destination's */
    const char *staging_cap_text;   /* --staging-cap */
    const char *block_scale_text;   /* --block-scale */
    bool relabel;                   /* --relabel */
    const char *backward_dtype_text;
    bool json, backward, help;
    /* dtr plan: --compare, --svg FILE and the cost flags */
    bool compare;
    const char *svg;
    const char *alpha, *bandwidth, *local, *inter_alpha, *inter_bandwidth;
    /* dtr run */
    const char *iters_text, *warmup_text, *inject_text, *dump, *backend, *device;
    const char *fill_text, *seed_text, *input, *buffers;
    bool verify, nonblocking, digest;
    bool ragged; /* a ragged shard in --from or --to, without --to-mesh or --batch */
    /* what dtr_cli_change_check derives from them */
    dtr_strategy_t strategy;
    dtr_dtype_t backward_dtype;
    int64_t iters, warmup, inject; /* inject -1: none */
    dtr_fill_t fill;
    bool shared;         /* --buffers shared */
    int64_t staging_cap; /* --staging-cap in bytes, 0: none */
    int64_t block_scale; /* --block-scale, 0: none */
} dtr_cli_change_t;

/* True when argv holds --batch (or --batch=FILE) and no --help: `dtr run` runs its batch
 * form then. */
bool dtr_cli_change_is_batch(int argc, char **argv);

/* Reads the flags of command `who` (one of the DTR_CLI_* values) from argv into *o (zeroed
 * first; run's defaults: --iters 20, --warmup 3, --fill pattern, --backend mpi,
 * --buffers private, --nodes-of auto). A flag of another command, an unknown one, a
 * missing value or an operand: the one-line error, DTR_EXIT_USAGE. --help sets o->help. */
int dtr_cli_change_parse(const char *cmd, unsigned who, int argc, char **argv,
                         dtr_cli_change_t *o);

/* Checks the values and how the flags go together, in the order the errors are reported:
 * --backward-dtype; for run and run --batch, --iters, --warmup, --inject-mismatch (a rank
 * below world), --seed, --fill, --input, --backend and --device (run: into *engine),
 * --buffers, --dump's and --input's directories; --to-ranks, --relabel and --staging-cap
 * (with --to-mesh only); --block-scale (run: with --to-mesh only); then --strategy (plan: not with
 * --compare). The one-line error and DTR_EXIT_USAGE, or DTR_EXIT_OK with the derived
 * fields set. */
int dtr_cli_change_check(const char *cmd, unsigned who, int world, dtr_cli_change_t *o,
                         dtr_cli_engine_t *engine);

/* A ragged shard that the change moves: planned and run between meshes, onto --mesh (which
 * dtr_cli_ragged_onto_mesh makes --to-mesh). dtr_cli_ragged_route: where the change object
 * of the n tensors (the form of many where many) plans them: within the mesh (also where
 * none is ragged), between meshes, or nowhere (dtr_change_create failed: the command
 * reports its error as it reports its own planning's). */
typedef enum { DTR_CLI_ROUTE_WITHIN, DTR_CLI_ROUTE_BETWEEN, DTR_CLI_ROUTE_FAILED } dtr_cli_route_t;
void dtr_cli_ragged_onto_mesh(dtr_cli_change_t *o);
dtr_cli_route_t dtr_cli_ragged_route(int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                     bool many);

#endif
