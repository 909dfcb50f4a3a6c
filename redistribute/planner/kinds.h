/*
 * The planner's rules of each step kind: one row per kind (dtr__kind_t) in one table
 * (kinds.c, indexed by dtr_step_kind_t), each row defined in the kind's own file
 * (kind_all_gather.c, kind_reduce_scatter.c, kind_all_reduce.c, kind_all_to_all.c,
 * kind_exchange.c, kind_reduce_exchange.c, kind_local.c for the four local kinds). The rest
 * of the planner (the builder and figures in plan.c, the tables, the seed's blocks, batches,
 * printing, node costs) reads a kind only through its row: adding a kind is its enum value,
 * its row here and its file. The executor's side is one row of executor/steps.c and one
 * executor/step_<kind>.c. internal.h includes this header.
 */
#ifndef DTR_REDISTRIBUTE_PLANNER_KINDS_H
#define DTR_REDISTRIBUTE_PLANNER_KINDS_H

#include <stdbool.h>
#include <stdint.h>

#include "redistribute/planner/geometry.h"
#include "redistribute/planner/planner.h"

struct dtr__term; /* a rank's per-tensor-dim terms (internal.h, tables.c) */

/* A rank of a balanced reduction's group and its share of the foreign pieces, where the
 * caller walks the group (plan.c). */
typedef struct {
    const dtr__balance_t *bal;
    __int128 share;
} dtr__balance_member_t;

/* One rank's side of a step, for the byte counts of its kind. */
typedef struct {
    const int64_t *coord;
    const int64_t *bs, *bo; /* its block before the step: shape and global offset */
    const int64_t *as, *ao; /* and after */
    int64_t n;              /* the size of the step's mesh dim (1 for a whole-mesh step) */
    const dtr__balance_member_t *member; /* the rank's balanced group, or NULL */
} dtr__rank_view_t;

/* What the rank moves in the step, in elements (the caller turns them into bytes). */
typedef struct {
    __int128 recv, send;
    __int128 stage; /* receive staging beyond the output; -1: as much as recv */
    int peers;      /* ranks it receives from (all_to_all, exchange, reduce_exchange) */
} dtr__rank_moves_t;

typedef struct {
    dtr_step_kind_info_t info; /* name, collective, description (dtr_step_kind_info) */
    bool whole_mesh;  /* over the whole mesh at once (mesh_dim -1): printed with every
                         placement before and after */
    bool reduces;     /* reduces Partial contributions: a batch round's key holds the dtype
                         and op, and AVG reduces by SUM then a divide */
    bool coalesces;   /* a batch round of it is one collective for all its members (false:
                         they run one by one, as reduce_exchange's balanced pieces differ) */
    bool quiet_local; /* where no rank receives anything it runs as a local step */
    bool keeps_block; /* every rank's block and values stay (a relabel): writes no output */
    bool per_rank;    /* the busiest rank depends on the coordinate, not only on the block
                         sizes (coordinate 0 holds the largest blocks) */
    bool varies_even; /* ranks differ even on even layouts */
    /* compat: the seed emits it (seed), and how it changes a block along its tensor dims, as
     * the seed runs it (concatenates the members' blocks along tensor_dim; keeps the
     * positional chunk of tensor_dim, of tensor_dim2); follows: seed_follow.c can follow it */
    bool seed, gathers, chunks, chunks2, follows;
    /* One rank's moves (NULL: it moves nothing). */
    void (*moves)(const dtr__ctx_t *ctx, const dtr_step_t *s, const dtr__rank_view_t *v,
                  dtr__rank_moves_t *out);
    /* The elements one rank receives, alone (NULL: moves' recv). */
    __int128 (*recv)(const dtr__ctx_t *ctx, const dtr_step_t *s, const int64_t *coord);
    /* The step's figures (recv, send, extra, peers maxima) over the ranks, its shapes set and
     * the maxima zeroed by the caller (NULL: coordinate 0's, the largest blocks). */
    void (*figures)(const dtr__ctx_t *ctx, dtr_step_t *s);
    /* What the rank whose per-tensor-dim terms are t receives (tables.c; elements); NULL:
     * the kind's figures cannot come from the tables. */
    __int128 (*recv_terms)(const dtr__ctx_t *ctx, const dtr_step_t *s,
                           const struct dtr__term *const *t);
    /* The mesh dims whose offsets a rank's receive count reads (reps.c's positional mask). */
    unsigned (*positional)(const dtr__ctx_t *ctx, const dtr_step_t *s);
    /* Does the step move data between ranks that differ on mesh dim k (of more than one
     * rank)? NULL: k is its mesh dim (local kinds: never, as they are not collective). */
    bool (*crosses)(const dtr_step_t *s, int mdims, const int64_t *msize, int k);
    /* The most elements it brings into one node (across: the mesh dims crossing nodes);
     * false, or NULL: recv_bytes_max times the ranks of a node. */
    bool (*node_most)(const dtr__ctx_t *ctx, const dtr_step_t *s, unsigned across,
                      __int128 *elems);
    /* Modeled time from the figures and the mesh dims it crosses (NULL: 0), and its latency
     * part, which a coalesced batch round pays once (NULL: 0). */
    double (*time)(const dtr__ctx_t *ctx, const dtr_step_t *s, unsigned links);
    double (*alpha)(const dtr__ctx_t *ctx, const dtr_step_t *s);
    /* A seed plan's step k through its own blocks (seed_blocks.c): the elements the rank at
     * coord moves each way, its block before the step being bs (NULL: none). */
    __int128 (*seed_moved)(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int k,
                           const int64_t *coord, const int64_t *bs);
} dtr__kind_t;

/* The table (kinds.c): every kind has a row. */
extern const dtr__kind_t *const dtr__kinds[DTR_STEP_KIND_LAST];
extern const dtr__kind_t dtr__kind_all_gather, dtr__kind_reduce_scatter, dtr__kind_all_reduce,
    dtr__kind_all_to_all, dtr__kind_exchange, dtr__kind_reduce_exchange, dtr__kind_local_chunk,
    dtr__kind_local_scale, dtr__kind_local_relabel, dtr__kind_local_zero_fill;

static inline const dtr__kind_t *dtr__kind_of(const dtr_step_t *s) {
    return dtr__kinds[s->kind];
}

#endif
