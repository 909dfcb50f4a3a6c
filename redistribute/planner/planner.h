/*
 * Redistribution planning: (source spec, target spec) -> plan.
 *
 * A plan is a value: an array of typed steps, each changing the placement of one mesh dim
 * (or, for an exchange, of several at once), with the bytes each rank receives and sends,
 * the local shapes before and after, and the modeled time. It can be printed, costed,
 * cached and compared without any communication; the executor (a later module) runs it.
 *
 * Strategies:
 *   DTR_STRATEGY_COMPAT   the seed algorithm exactly (PyTorch 2.1's _decompose_reshard and
 *                         "replicate then shard" sort). Where that algorithm gathers or
 *                         splits a tensor dim that a later mesh dim still shards, the plan
 *                         is followed for the shape at hand and run only if every element
 *                         lands right; otherwise DTR_ERR_UNSUPPORTED says why.
 *   DTR_STRATEGY_OPTIMAL  the default: the cheapest, under the cost model, of several plans
 *                         built in O(M^2 D) (M mesh dims, D tensor dims): compat, a safe
 *                         replicate-then-shard, a greedy plan using all-to-all where it is
 *                         valid and a general exchange where no per-mesh-dim collective is,
 *                         and reduce-then-exchange. Ties go to less peak memory.
 * See docs/planner.md for the cost model and the lower bound's derivation.
 */
#ifndef DTR_REDISTRIBUTE_PLANNER_PLANNER_H
#define DTR_REDISTRIBUTE_PLANNER_PLANNER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"
#include "placement/placement.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most steps in a plan (compat needs at most 2 per mesh dim). */
#define DTR_MAX_PLAN_STEPS 32

typedef enum {
    DTR_STEP_ALL_GATHER = 0, /* S(d) -> R on one mesh dim */
    DTR_STEP_REDUCE_SCATTER, /* P -> S(d) */
    DTR_STEP_ALL_REDUCE,     /* P -> R */
    DTR_STEP_ALL_TO_ALL,     /* S(a) -> S(b), a != b: gather a, scatter b */
    DTR_STEP_EXCHANGE,       /* any layout change: one all-to-all-v over the mesh's ranks */
    DTR_STEP_REDUCE_EXCHANGE, /* P -> S(d) while a later mesh dim shards d: a balanced
                                 reduce-scatter-v, then an all-to-all-v to the owners */
    DTR_STEP_LOCAL_CHUNK,    /* R -> S(d): keep this rank's chunk, no communication */
    DTR_STEP_LOCAL_SCALE,    /* R -> P(sum): divide by the mesh dim's size */
    DTR_STEP_LOCAL_RELABEL,  /* values and blocks kept, placement changes: R -> P(avg|max|min),
                                and any step over mesh dims of one rank */
    DTR_STEP_LOCAL_ZERO_FILL, /* S(d) -> P(sum): this rank's chunk in zeros of the whole
                                 extent it was cut from (PyTorch's Shard -> Partial) */
    DTR_STEP_KIND_LAST
} dtr_step_kind_t;

typedef struct {
    const char *name; /* "all_gather" */
    bool collective;  /* moves data between ranks */
    const char *desc;
} dtr_step_kind_info_t;

/* Table entry for a step kind; NULL out of range. */
DTR_API const dtr_step_kind_info_t *dtr_step_kind_info(dtr_step_kind_t kind);

typedef enum { DTR_STRATEGY_OPTIMAL = 0, DTR_STRATEGY_COMPAT, DTR_STRATEGY_LAST } dtr_strategy_t;

DTR_API const char *dtr_strategy_name(dtr_strategy_t strategy);
DTR_API dtr_status_t dtr_strategy_parse(const char *text, dtr_strategy_t *out);

/*
 * Alpha-beta cost model, per mesh dim. A collective over n ranks of mesh dim i costs
 * rounds * alpha_us[i] + (bytes a rank receives) / bandwidth_gbps[i]; rounds is n-1 for
 * all-gather and reduce-scatter, 2(n-1) for all-reduce, and the peers that send something
 * for all-to-all. An exchange costs (peers) * max alpha + bytes / min bandwidth over the
 * mesh dims it spans, plus its pack and unpack passes, (bytes sent + output and staging) /
 * local_gbps. Local steps cost (bytes written) / local_gbps.
 */
typedef struct {
    double alpha_us[DTR_MAX_MESH_DIMS];
    double bandwidth_gbps[DTR_MAX_MESH_DIMS];
    double local_gbps;
    /* Bit i set: mesh dim i's groups span nodes (dtr_cost_model_nodes sets it with the
     * inter-node figures). The plan's steps over such dims are marked "across nodes"
     * (dtr_step_across_nodes); the figures alone steer the planner. 0: not known. */
    uint32_t across_nodes;
} dtr_cost_model_t;

/* The defaults describe a link inside a node (shared memory under MPI). */
#define DTR_DEFAULT_ALPHA_US 5.0
#define DTR_DEFAULT_BANDWIDTH_GBPS 10.0
#define DTR_DEFAULT_LOCAL_GBPS 50.0
/* A link between nodes, as measured between simulated nodes on one machine (TCP over
 * loopback, docs/nodes.md): set your fabric's with DTR_INTER_ALPHA_US and
 * DTR_INTER_BANDWIDTH_GBPS or the arguments of dtr_cost_model_nodes. */
#define DTR_DEFAULT_INTER_ALPHA_US 20.0
#define DTR_DEFAULT_INTER_BANDWIDTH_GBPS 1.5

/* Defaults on every mesh dim. */
DTR_API void dtr_cost_model_default(dtr_cost_model_t *out);

/* Sets from text, each NULL to leave alone: alpha and bandwidth as one value for every mesh
 * dim or a comma list per mesh dim ("5,20"; a shorter list repeats its last value). Values
 * must be finite, alpha >= 0, bandwidths > 0. *model is written only on success. */
DTR_API dtr_status_t dtr_cost_model_set(dtr_cost_model_t *model, const char *alpha_us,
                                        const char *bandwidth_gbps, const char *local_gbps);

/* Defaults, overridden by DTR_ALPHA_US, DTR_BANDWIDTH_GBPS and DTR_LOCAL_GBPS. */
DTR_API dtr_status_t dtr_cost_model_from_env(dtr_cost_model_t *out);

/*
 * Node-aware figures: the mesh dims in `across` (bit i: mesh dim i's groups span nodes) take
 * the inter-node alpha and bandwidth, one value each as text ("40"; NULL: DTR_INTER_ALPHA_US
 * / DTR_INTER_BANDWIDTH_GBPS where set, else the DTR_DEFAULT_INTER_* values), and the
 * model records `across`; the other mesh dims keep what they have (the intra-node figures).
 * The planner then prefers moving bytes inside nodes wherever it has a choice. *model is
 * written only on success; a bad value names its argument or variable.
 */
DTR_API dtr_status_t dtr_cost_model_nodes(dtr_cost_model_t *model, uint32_t across,
                                          const char *inter_alpha_us,
                                          const char *inter_bandwidth_gbps);

/* Parses a list of mesh dims, "0" or "0,2" (each once, each below ndims; "" or "none" is no
 * dim), into a bit mask. DTR_ERR_INVALID_ARGUMENT naming the item otherwise; *out written
 * only on success. */
DTR_API dtr_status_t dtr_mesh_dims_parse(const char *text, int ndims, uint32_t *out);

typedef struct {
    dtr_step_kind_t kind;
    int mesh_dim;                 /* -1 for an exchange */
    dtr_placement_t from, to;     /* the placement of mesh_dim before and after */
    int tensor_dim;               /* dim gathered, scattered or chunked; -1 if none */
    int tensor_dim2;              /* all_to_all: the dim scattered (tensor_dim is gathered) */
    dtr_reduce_op_t op;           /* reduce steps */
    double scale;                 /* local_scale: the factor (1/n) */
    int nplacements;              /* mesh dims */
    dtr_placement_t before[DTR_MAX_MESH_DIMS]; /* all placements before the step */
    dtr_placement_t after[DTR_MAX_MESH_DIMS];  /* and after */
    int64_t shape_before[DTR_MAX_TENSOR_DIMS]; /* largest local shape over ranks */
    int64_t shape_after[DTR_MAX_TENSOR_DIMS];
    int64_t recv_bytes_max;       /* most bytes any rank receives in this step (padding in) */
    int64_t send_bytes_max;
    int64_t extra_bytes_max;      /* output + receive staging, the most on any rank */
    int peers_max;                /* ranks one rank receives from (exchange) */
    /* With a node-aware cost model (dtr_cost_model_nodes): the most bytes this step brings
     * into one node from the others, over the node's ranks together (they share its link);
     * 0 where it moves nothing between nodes or the model knows no nodes. */
    int64_t node_recv_bytes_max;
    double time_us;               /* modeled */
} dtr_step_t;

typedef struct {
    dtr_strategy_t strategy;
    dtr_spec_t src, dst;
    dtr_cost_model_t cost;
    int nsteps;
    dtr_step_t steps[DTR_MAX_PLAN_STEPS];
    int count[DTR_STEP_KIND_LAST];  /* steps by kind */
    int64_t recv_bytes_max;         /* most bytes one rank receives over the whole plan */
    int64_t lower_bound_recv_bytes; /* no plan can make some rank receive less */
    int64_t peak_extra_bytes;       /* most extra memory one rank needs at any step */
    double time_us;                 /* modeled: the sum over steps */
    const char *chosen_by;          /* optimal: which candidate won ("greedy", ...) */
    bool backward;                  /* planned with opts->backward */
    /* compat only: the seed's steps hold blocks of other lengths than the canonical layout of
     * their placements on the way (every element still lands right; docs/planner.md), so the
     * executor sizes each block by following the steps: a gather concatenates the members'
     * blocks, a chunk keeps the positional chunk of the rank's block. Such a plan runs
     * alone, not in a batch. */
    bool seed_blocks;
    /* The dtype the steps run in: dst's, but for dtr_plan_create_in's op_dtype (PyTorch's
     * backward_dtype), where the result is cast to dst's dtype after the last step. */
    dtr_dtype_t op_dtype;
} dtr_plan_t;

typedef struct {
    dtr_strategy_t strategy;
    const dtr_cost_model_t *cost; /* NULL: dtr_cost_model_from_env() */
    /* A backward (gradient) plan: R -> P is a pass-through that keeps the values (no
     * division by the mesh dim size, as in PyTorch's backward), so it is also allowed for
     * integer dtypes and P(product). autograd/autograd.h builds such plans. */
    bool backward;
} dtr_plan_options_t;

/*
 * Plans src -> dst. The specs must share the mesh (equal contents) and shape. Their dtypes
 * may differ between float dtypes (f32 f64 f16 bf16) or between complex ones (c64 c128):
 * a cast, PyTorch's forward_dtype; the input is cast to dst's dtype first and every step
 * runs in it (and the figures count it). S(d) -> P(sum) zero-fills (docs/semantics.md).
 * Errors: a Partial changing its op, Shard -> P(avg|max|min|product), Replicate ->
 * P(product) (no partition exists), a reduction of a storage-only dtype, other casts, and
 * (compat) a seed plan that would corrupt data or a Shard -> Partial.
 * opts may be NULL (optimal, cost model from the environment). *out written only on success;
 * the plan borrows the specs' mesh. Pure: no communication, no global state.
 */
DTR_API dtr_status_t dtr_plan_create(const dtr_spec_t *src, const dtr_spec_t *dst,
                                     const dtr_plan_options_t *opts, dtr_plan_t *out);

/*
 * As dtr_plan_create, with the steps in op_dtype: the input is cast to op_dtype first (where
 * src's differs), every step runs in it, and the result is cast to dst's dtype last (where
 * it differs), each cast a local pass rounding to nearest even. This is PyTorch's
 * backward_dtype: its backward collectives run in it and the gradient comes back in the
 * input's dtype (autograd.h's dtr_plan_backward_in builds such a plan). op_dtype, src's and
 * dst's dtypes are all float (f32 f64 f16 bf16) or all complex (c64 c128) where they differ;
 * the checks of dtr_plan_create apply to op_dtype. The figures count both casts.
 */
DTR_API dtr_status_t dtr_plan_create_in(const dtr_spec_t *src, const dtr_spec_t *dst,
                                        dtr_dtype_t op_dtype, const dtr_plan_options_t *opts,
                                        dtr_plan_t *out);

/* Bytes one rank sends and receives in one step of a plan (exact, uneven shards and
 * padding included). DTR_ERR_NOT_IN_MESH for a rank outside the mesh. */
DTR_API dtr_status_t dtr_plan_step_bytes(const dtr_plan_t *plan, int step, int rank,
                                         int64_t *send, int64_t *recv);

/* The lower bound alone (see docs/planner.md). */
DTR_API dtr_status_t dtr_plan_lower_bound(const dtr_spec_t *src, const dtr_spec_t *dst,
                                          int64_t *bytes);

/* Prints the plan as a table (the CLI's text output), or as one JSON object. */
/* Whether a plan's step moves data over a mesh dim in `across` (bit i: mesh dim i's groups
 * span nodes; dtr_plan_print passes the plan's cost.across_nodes): a collective over such a
 * mesh dim; an exchange whose source shards such a mesh dim (its peers differ from a rank
 * only on the mesh dims the source shards: where the source is replicated, each rank reads
 * the copy on its own side); a reduce_exchange whose mesh dim, or a later mesh dim its
 * delivery serves, is one. Local steps never do; false for a step out of range. */
DTR_API bool dtr_step_across_nodes(const dtr_plan_t *plan, int step, uint32_t across);

DTR_API dtr_status_t dtr_plan_print(const dtr_plan_t *plan, FILE *out);
DTR_API dtr_status_t dtr_plan_print_json(const dtr_plan_t *plan, FILE *out);

/*
 * A plan cache keyed by mesh (sizes and ranks), both placement lists, shape, dtype,
 * strategy and cost model. Thread-safe: one cache may be shared by threads. Holds up to
 * `capacity` plans, evicting the least recently used.
 */
typedef struct dtr_plan_cache dtr_plan_cache_t;

DTR_API dtr_status_t dtr_plan_cache_create(int capacity, dtr_plan_cache_t **out);
DTR_API void dtr_plan_cache_destroy(dtr_plan_cache_t *cache);

/* As dtr_plan_create, through the cache. *hit (may be NULL) says whether it was cached.
 * The returned copy's specs borrow the caller's src/dst meshes. On a hit only the plan's
 * steps in use are written (out->steps[nsteps..] keep what they held). */
DTR_API dtr_status_t dtr_plan_cache_get(dtr_plan_cache_t *cache, const dtr_spec_t *src,
                                        const dtr_spec_t *dst, const dtr_plan_options_t *opts,
                                        dtr_plan_t *out, bool *hit);

/*
 * A batched plan: many tensors redistributed together on one mesh, each by its own plan
 * (the members), with their collectives coalesced. The members' steps are grouped into
 * rounds; a round is one collective of one kind on one mesh dim (or one exchange over the
 * mesh), for reductions also of one dtype and op, that moves every member step in it at
 * once over one packed buffer. A tensor's steps keep their order (a round takes only each
 * tensor's next collective step, local steps run before it), so every tensor gets exactly
 * its own plan's result; the rounds decide only how many collectives run. They are chosen
 * greedily: the next round is the key (kind, mesh dim, dtype and op) that most tensors'
 * next collective step has, ties to the key with more steps left in all tensors, then to the
 * smaller key ("majority merge", a shortest-common-supersequence heuristic). Tensors with the
 * same changes then share every round: a batch of N takes as many collectives as one of
 * them. docs/planner.md, "Batches".
 *
 * Steps that change nothing on this mesh (a mesh dim of one rank, a relabel, an exchange in
 * which no rank receives) are local; reduce_exchange steps run in rounds of their own kind
 * but member by member (coalesced = false): their two operations depend on each member's
 * balanced pieces.
 */
typedef struct {
    int tensor; /* the member */
    int step;   /* its step (0-based) */
} dtr_batch_item_t;

typedef struct {
    dtr_step_kind_t kind;
    int mesh_dim;           /* -1: over the whole mesh */
    dtr_dtype_t dtype;      /* reductions: every member's dtype (moves: the first member's) */
    dtr_reduce_op_t op;     /* reductions: the op of every member step */
    bool reduces;           /* a reduction round (dtype and op are part of its key) */
    bool coalesced;         /* one backend collective for all its member steps */
    int first, count;       /* its member steps: items[first .. first + count) */
    int64_t recv_bytes_max; /* the sum of its member steps' */
    double time_us;         /* modeled: one latency term for a coalesced round */
} dtr_batch_round_t;

typedef struct {
    int ntensors;
    dtr_plan_t *plans; /* ntensors member plans */
    int nrounds;
    dtr_batch_round_t *rounds;
    int nitems;
    dtr_batch_item_t *items;
    int count[DTR_STEP_KIND_LAST];  /* collectives the batch runs, by kind */
    int member_count[DTR_STEP_KIND_LAST]; /* collectives the members would run one by one */
    int64_t recv_bytes_max;         /* most bytes one rank receives, the members' summed per rank */
    int64_t lower_bound_recv_bytes; /* no execution of these changes can make some rank
                                       receive less */
    int64_t peak_extra_bytes;       /* at most: every member's peak plus the largest round's
                                       packed buffers */
    double time_us;                 /* modeled, coalesced */
    double one_by_one_time_us;      /* modeled, the members' plans one after another */
    uint64_t hash;                  /* of the members' plans and the rounds: what the ranks'
                                       argument agreement compares (set by create) */
} dtr_batch_plan_t;

/*
 * Plans src[t] -> dst[t] for t < n, every spec on one mesh (equal contents), and groups the
 * steps into rounds. opts as for dtr_plan_create (one strategy and cost model for all);
 * cache (may be NULL) plans the members through a plan cache. Errors name the argument and
 * the member ("src[3]: ..."). *out (free with dtr_batch_plan_destroy) written on success;
 * the members borrow the specs' meshes.
 */
DTR_API dtr_status_t dtr_batch_plan_create(int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                           const dtr_plan_options_t *opts,
                                           dtr_plan_cache_t *cache, dtr_batch_plan_t **out);
DTR_API void dtr_batch_plan_destroy(dtr_batch_plan_t *plan);

/* Bytes one rank sends and receives over the whole batch: the sums of its members'. */
DTR_API dtr_status_t dtr_batch_plan_rank_bytes(const dtr_batch_plan_t *plan, int rank,
                                               int64_t *send, int64_t *recv);

/* Prints the batch: its rounds (kind, mesh dim, members, bytes) and totals, as a table or
 * one JSON object. */
DTR_API dtr_status_t dtr_batch_plan_print(const dtr_batch_plan_t *plan, FILE *out);
DTR_API dtr_status_t dtr_batch_plan_print_json(const dtr_batch_plan_t *plan, FILE *out);

/* ---- between meshes --------------------------------------------------------------- */

/*
 * A change between two meshes: src on mesh A (its ranks RA), dst on mesh B (RB), the same
 * global shape, every rank of both in one communicator. RA and RB may be disjoint, overlap,
 * or be the same ranks in another shape or order. Every destination rank ends with its block
 * of the tensor (for a Partial source, of the reduced tensor); every source rank's input
 * stays as it was; a rank in both lists plays both parts; a rank in neither takes no part.
 * docs/cross-mesh.md.
 *
 * The plan reduces Partial mesh dims (and casts to dst's dtype) on A first, with a
 * single-mesh plan, then moves boxes: each destination rank receives exactly its block
 * less what it holds as a source, each box from one holder, spread over the replicas where
 * the source has them. A Partial(sum) of a real float dtype, not cast and not under a
 * staging cap, may instead be summed at the receivers (one box per addend, summed in
 * addend order) where that puts fewer bytes on the busiest rank; DTR_CROSS_REDUCE=source,
 * receiver or auto (the default) forces the choice (docs/cross-mesh.md). dst's placements are Shard or Replicate (a Partial destination is
 * refused: reduce, then move). Opaque; it borrows both specs' meshes, which must outlive it.
 */
typedef struct dtr_cross_plan dtr_cross_plan_t;

typedef struct {
    const dtr_cost_model_t *cost; /* NULL: dtr_cost_model_from_env() */
    /* Relabeling: choose which rank of dst's mesh holds which coordinate (the same ranks,
     * another order) so that the fewest bytes move; dtr_cross_plan_dst gives the mesh
     * chosen. Where no order moves fewer bytes, dst's own order stays. */
    bool relabel;
    /* The most bytes of staging one rank holds at once for the moves (sent and received
     * together); larger moves go in chunks over several rounds. 0: no cap (a tensor's
     * messages in one round). */
    int64_t staging_cap_bytes;
} dtr_cross_options_t;

/* A cross plan's figures (bytes per rank: the most over ranks). */
typedef struct {
    int64_t send_bytes_max, recv_bytes_max;     /* between distinct ranks */
    int64_t lower_bound_send_bytes;             /* no plan of these boxes sends less from its
                                                   busiest source rank */
    int64_t lower_bound_recv_bytes;             /* nor receives less on its busiest rank (for
                                                   the destination order the plan uses) */
    int64_t messages;                           /* point-to-point messages (chunks under a
                                                   cap), the boxes kept out */
    int64_t moved_bytes;                        /* their bytes, summed */
    int64_t peak_extra_bytes;                   /* staging and the reduced source blocks */
    int pre_steps;                              /* steps run on the source mesh first, over
                                                   the tensors */
    double time_us;                             /* modeled, the plans on A included */
    int64_t rounds;                             /* rounds of messages (> 1 under a cap) */
    int64_t staging_bytes_max;                  /* the most staging one rank holds in a round */
    int64_t relabel_saved_bytes;                /* bytes the relabeling kept from moving */
    bool permutation;                           /* nothing moves and nothing is reduced: the
                                                   destination is the source, relabeled */
} dtr_cross_figures_t;

/* Plans src -> dst between their meshes. opts may be NULL. Errors name the argument: specs
 * not initialised, shapes that differ, dtypes that do not cast, a Partial in dst, a change
 * on A the single-mesh planner refuses, a staging cap smaller than one element. *out (free
 * with dtr_cross_plan_destroy) is written only on success. Pure: no communication. */
DTR_API dtr_status_t dtr_cross_plan_create(const dtr_spec_t *src, const dtr_spec_t *dst,
                                           const dtr_cross_options_t *opts,
                                           dtr_cross_plan_t **out);
/* Many tensors between the same two meshes (a model's parameters, a refit): src[i] ->
 * dst[i] for i < n, every src on one mesh and every dst on one other (or the same), moved
 * together: rounds of whole tensors, each one exchange between the ranks, a round holding
 * the next tensors while a rank stages at most 1 MiB (a larger tensor alone; under a
 * staging cap, chunks), each round's reductions on the source mesh coalesced. Relabeling
 * chooses one order of dst's mesh for all of them. Errors as for one tensor, naming
 * src[i] / dst[i]. */
DTR_API dtr_status_t dtr_cross_plan_create_batch(int n, const dtr_spec_t *src,
                                                 const dtr_spec_t *dst,
                                                 const dtr_cross_options_t *opts,
                                                 dtr_cross_plan_t **out);
DTR_API void dtr_cross_plan_destroy(dtr_cross_plan_t *plan);
DTR_API dtr_status_t dtr_cross_plan_figures(const dtr_cross_plan_t *plan,
                                            dtr_cross_figures_t *out);
/* The tensors of the plan (1 for dtr_cross_plan_create). */
DTR_API int dtr_cross_plan_tensors(const dtr_cross_plan_t *plan);
/* How many addends of tensor i's Partial(sum) source the plan sums at the receivers (the
 * product of its Partial dims' sizes); 0 where it reduces on the source mesh first or has
 * no Partial, and for a NULL plan or an i out of range. */
DTR_API int dtr_cross_plan_addends(const dtr_cross_plan_t *plan, int i);
/* The destination spec of tensor i as the plan delivers it: dst[i], on the relabeled mesh
 * where the plan relabeled (the mesh is the plan's: valid until dtr_cross_plan_destroy).
 * Each rank's block is dtr_spec_layout of it. */
DTR_API dtr_status_t dtr_cross_plan_dst(const dtr_cross_plan_t *plan, int i, dtr_spec_t *out);
/* Bytes one rank sends to and receives from other ranks over the whole plan (0 for a rank in
 * neither mesh). */
DTR_API dtr_status_t dtr_cross_plan_rank_bytes(const dtr_cross_plan_t *plan, int rank,
                                               int64_t *send, int64_t *recv);
/* The messages one rank sends and receives (the boxes it keeps included) into *count, made
 * as a run on that rank makes them: that rank's alone, not every rank's (the plan holds
 * only the boxes of each kind of tensor until a rank, or a print, asks; 0 for a rank in
 * neither mesh). OUT_OF_MEMORY where they do not fit. */
DTR_API dtr_status_t dtr_cross_plan_rank_messages(const dtr_cross_plan_t *plan, int rank,
                                                  int64_t *count);
/* The plan as a table (its messages, at most `max_messages` of them; -1: all), or as one
 * JSON object. */
DTR_API dtr_status_t dtr_cross_plan_print(const dtr_cross_plan_t *plan, int64_t max_messages,
                                          FILE *out);
DTR_API dtr_status_t dtr_cross_plan_print_json(const dtr_cross_plan_t *plan, FILE *out);

/* ---- one change, any form (change.c) ------------------------------------------------
 *
 * A change is one tensor or many, on one mesh or between two: one create call with every
 * option, one print, one JSON, one run and one start (executor.h), whatever its form. The
 * form follows from the specs: dst on src's mesh (equal contents) is a plan (n 1) or a batch
 * (n > 1 or opts->many) on that mesh, unless opts->between_meshes; dst on another mesh is a
 * change between meshes (one tensor, or many in rounds). The options a form does not take are refused by name: relabel and
 * staging_cap_bytes within one mesh (INVALID_ARGUMENT), a compat strategy or backward
 * between meshes (UNSUPPORTED). The calls above stay; this one object is the way every
 * front end (the CLI, Python) reaches them.
 */
typedef struct dtr_change dtr_change_t;

typedef enum {
    DTR_CHANGE_ONE = 0,     /* one tensor on one mesh: dtr_change_plan */
    DTR_CHANGE_BATCH,       /* many tensors on one mesh: dtr_change_batch_plan */
    DTR_CHANGE_CROSS,       /* one tensor between meshes: dtr_change_cross_plan */
    DTR_CHANGE_CROSS_BATCH, /* many tensors between meshes: dtr_change_cross_plan */
    DTR_CHANGE_FORM_LAST
} dtr_change_form_t;

typedef struct {
    dtr_strategy_t strategy;      /* within one mesh; between meshes optimal only */
    const dtr_cost_model_t *cost; /* NULL: dtr_cost_model_from_env() */
    bool backward;                /* a gradient plan (dtr_plan_options_t), within one mesh */
    bool relabel;                 /* between meshes (dtr_cross_options_t) */
    int64_t staging_cap_bytes;    /* between meshes; 0: no cap */
    dtr_plan_cache_t *cache;      /* within one mesh, may be NULL: plan through this cache */
    bool between_meshes;          /* plan as a change between meshes even where dst's mesh
                                     equals src's (as dtr_cross_plan_create does: what a front
                                     end's explicit second mesh asks for) */
    bool many;                    /* plan the form of many tensors even for n 1 (a batch, or
                                     rounds between meshes: what a front end's list asks for) */
    int64_t block_scale;          /* > 0: block-scaled fp8 (below); 0: none */
} dtr_change_options_t;

/*
 * Block-scaled fp8 (opts->block_scale = B > 0), the format inference engines load weights in
 * (DeepSeek-V3's): each src[i] (f32, f64, f16 or bf16; no Partial) arrives as dst[i] of dtype
 * f8e4m3 or f8e5m2 (no Partial) with one f32 scale per B x B block of its last two dims (B
 * elements of a 1-D tensor; a block of one along leading dims): amax = the block's largest
 * |x| in f32, scale = amax / 448 (f8e4m3) or / 57344 (f8e5m2), element = x / scale rounded to
 * nearest even and saturated (numeric/fp8.c; a block of zeros has scale 0). The scales are a
 * second tensor of shape dtr_change_scales gives, laid out by dst[i]'s placements on that
 * shape. Blocks that cross shard boundaries are exact: the source ranks all-reduce the
 * blocks' amax over the source mesh before quantizing, and only fp8 bytes and the scales
 * move. The form is a batch (one mesh) or rounds (two) of 2n tensors: the change's own plan
 * holds the quantized tensors at 0..n-1 and their scales at n..2n-1, and dtr_change_run takes
 * 2n outputs in that order. Refused by name: B < 0, another dst dtype, an integer, complex or
 * fp8 source, a Partial src or dst, backward.
 */

/* Plans src[i] -> dst[i] for i < n (opts may be NULL: every option 0, optimal). Errors name
 * the option or the spec ("src[2]: ...") under dtr_change_create. *out (free with
 * dtr_change_destroy) written only on success; it borrows the specs' meshes (and the
 * cache). Pure: no communication. */
DTR_API dtr_status_t dtr_change_create(int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                       const dtr_change_options_t *opts, dtr_change_t **out);
DTR_API void dtr_change_destroy(dtr_change_t *change); /* NULL is a no-op */
DTR_API dtr_change_form_t dtr_change_form(const dtr_change_t *change);
DTR_API int dtr_change_tensors(const dtr_change_t *change);
/* The form's own plan: NULL where the change has another form. */
DTR_API const dtr_plan_t *dtr_change_plan(const dtr_change_t *change);
DTR_API const dtr_batch_plan_t *dtr_change_batch_plan(const dtr_change_t *change);
DTR_API const dtr_cross_plan_t *dtr_change_cross_plan(const dtr_change_t *change);
/* Tensor i's destination spec as the change delivers it (relabeled between meshes). */
DTR_API dtr_status_t dtr_change_dst(const dtr_change_t *change, int i, dtr_spec_t *out);
/* A block-scaled change's block edge (opts->block_scale; 0 for another change), and tensor
 * i's scales as the change delivers them (f32; INVALID_ARGUMENT for another change). */
DTR_API int64_t dtr_change_block_scale(const dtr_change_t *change);
DTR_API dtr_status_t dtr_change_scales(const dtr_change_t *change, int i, dtr_spec_t *out);
/* Bytes one rank sends to and receives from others over the whole change. */
DTR_API dtr_status_t dtr_change_rank_bytes(const dtr_change_t *change, int rank, int64_t *send,
                                           int64_t *recv);
/* The form's table (between meshes at most max_messages messages; -1: all) or JSON. */
DTR_API dtr_status_t dtr_change_print(const dtr_change_t *change, int64_t max_messages,
                                      FILE *out);
DTR_API dtr_status_t dtr_change_print_json(const dtr_change_t *change, FILE *out);
/* The change as a picture (SVG, redistribute/planner/svg.c): each side's layout (the mesh's
 * ranks and the tensor's blocks in their colours) and, within one mesh, the steps between
 * them (a batch: its first 4 tensors), or between meshes the message matrix, one mark per
 * message (class "msg"; per pair of ranks, class "pair", past 4096 messages). */
DTR_API dtr_status_t dtr_change_print_svg(const dtr_change_t *change, FILE *out);
/* One plan within one mesh as a picture (what dtr_change_print_svg draws of one tensor): a
 * gradient's plan (dtr_plan_backward), a compat plan, any plan made. */
DTR_API dtr_status_t dtr_plan_print_svg(const dtr_plan_t *plan, FILE *out);
/* One spec's layout as a picture: the mesh's ranks and each rank's block in its colour. */
DTR_API dtr_status_t dtr_layout_print_svg(const dtr_spec_t *spec, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
