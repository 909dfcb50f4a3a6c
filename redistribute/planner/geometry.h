/*
 * What the executor reads of a plan's geometry (the only planner internals it includes):
 * the planner's view of a spec (dtr__ctx_t), the layout at a mesh coordinate, a seed plan's
 * own blocks, the balanced reduction's groups and pieces, and the hashes the ranks' argument
 * agreement compares. internal.h includes it for the planner's own files.
 */
#ifndef DTR_REDISTRIBUTE_PLANNER_GEOMETRY_H
#define DTR_REDISTRIBUTE_PLANNER_GEOMETRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "dtensor/dtensor.h"
#include "redistribute/planner/planner.h"

/* What one optimal planning call keeps between its candidates: the exchange and balanced
 * steps already costed (they cost O(ranks) each), the large tables of layout pairs built
 * (tables.c: dtr__pair_init), and whether costly steps are only bounded (optimal.c). */
#define DTR__MEMO_SIZE 4
#define DTR__PAIR_CACHE 4
typedef struct {
    int n;
    dtr_step_t steps[DTR__MEMO_SIZE];
    /* Set while the optimal strategy bounds its candidates: exchange and balanced steps
     * get the figures of coordinate 0 alone, a lower bound of their time (plan.c). */
    bool defer;
    int npairs;
    struct dtr__cached_pair *pairs[DTR__PAIR_CACHE];
} dtr__plan_memo_t;

/* What every step computation needs about the tensor and the mesh. */
typedef struct {
    const dtr_mesh_t *mesh;
    int mdims;
    int64_t msize[DTR_MAX_MESH_DIMS];
    int ndim;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int64_t item; /* bytes per element */
    const dtr_cost_model_t *cost;
    dtr__plan_memo_t *memo; /* may be NULL */
    /* Set by the optimal strategy for the change at hand (partial_order.c): kept Partial
     * dims it must reduce and make Partial again, and whether the reductions' order
     * matters (mixed Partial ops). */
    unsigned partials_forced;
    bool partials_ordered;
    /* Partial dims whose contributions have disjoint supports (zero fills, zero_fill.c):
     * at each element one contribution is non-zero, so they commute with every op. */
    unsigned disjoint;
    /* The source or the target has a shard order other than mesh-dim order: a new shard
     * may then go last in its tensor dim's order wherever it is (plan.c records the order),
     * and compat does not plan. */
    bool ordered;
    /* A change with ragged shards (planner/ragged.c): planned on stand-ins of chunked shards,
     * with no step that changes these mesh dims or shards these tensor dims elsewhere. */
    unsigned ragged_mdims, ragged_tdims;
} dtr__ctx_t;

void dtr__ctx_init(dtr__ctx_t *ctx, const dtr_spec_t *spec, const dtr_cost_model_t *cost);

/* Saturating int64 from a wider product: sizes past 2^63 cannot be allocated anyway. */
static inline int64_t dtr__sat(__int128 v) { return v > INT64_MAX ? INT64_MAX : (int64_t)v; }

/* Steps through the coordinates of the mesh dims marked in vary (others keep their value);
 * false after the last. */
bool dtr__next_coord(const dtr__ctx_t *ctx, const bool *vary, int64_t *coord);

/* Splits [offset, offset+shape) of one tensor dim into n chunks and keeps chunk c (the
 * chunk rule, one level). */
static inline void dtr__split(int64_t n, int64_t c, int64_t *shape, int64_t *offset) {
    int64_t len = *shape, chunk = len / n + (len % n != 0), start = chunk * c;
    int64_t end = start + chunk < len ? start + chunk : len;
    *offset += start < len ? start : len;
    *shape = end > start ? end - start : 0;
}

/* Local shape and global offset at a coordinate for any placements (each tensor dim split
 * in its shard order). */
void dtr__layout(const dtr__ctx_t *ctx, const dtr_placement_t *pl, const int64_t *coord,
                 int64_t *shape, int64_t *offset);

/* A seed plan's own blocks (plan->seed_blocks, seed_blocks.c). The shape of the block the
 * rank at coord holds after the plan's first j steps, followed as the seed runs them from
 * the source layout; the lengths along step k's tensor dim of the blocks its group's
 * members hold before it (msize of its mesh dim of them: the pieces a gather concatenates);
 * the bytes one rank sends and receives in step k. */
bool dtr__seed_kind_ok(dtr_step_kind_t kind);
void dtr__seed_block(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int j, const int64_t *coord,
                     int64_t *shape);
void dtr__seed_pieces(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int k, const int64_t *coord,
                      int64_t *len);

/* The balanced reduction of a reduce_exchange step (balance.c): group g of mesh dim i. */
#define DTR__BALANCE_CACHE 256
#define DTR__BALANCE_DISTINCT 16
typedef struct {
    const dtr__ctx_t *ctx;
    const dtr_placement_t *before, *after;
    int i;
    int64_t n;
    bool serve[DTR_MAX_MESH_DIMS];  /* mesh dims over which g's targets vary */
    int64_t g[DTR_MAX_MESH_DIMS];   /* the group's coordinates (g[i] = 0) */
    int64_t cs[DTR_MAX_TENSOR_DIMS], co[DTR_MAX_TENSOR_DIMS]; /* the block C it reduces */
    __int128 foreign;               /* elements of the foreign pieces */
    __int128 level;                 /* the most elements a member receives */
    int64_t ncached;                /* members whose target and home sizes are below */
    __int128 target[DTR__BALANCE_CACHE], home[DTR__BALANCE_CACHE];
    /* The distinct (target, home) sizes over all members and how many members have each
     * (the level and the bound depend on no member's index): ndistinct < 0 past
     * DTR__BALANCE_DISTINCT of them, and then every member is visited. */
    int ndistinct;
    __int128 dtarget[DTR__BALANCE_DISTINCT], dhome[DTR__BALANCE_DISTINCT];
    int64_t dcount[DTR__BALANCE_DISTINCT];
    /* A member's target differs from member 0's only along d = after[i].dim, from mesh dim
     * i's level of d's shard sequence down: d's block above that level, its chunk there,
     * what the levels below make of a full chunk or of the shorter one, and the other
     * tensor dims' factors of the target's and the home piece's sizes (dtr__member). */
    int64_t ts0[DTR_MAX_TENSOR_DIMS], to0[DTR_MAX_TENSOR_DIMS]; /* member 0's target */
    int64_t above_len, above_off, chunk_i;
    int64_t inner_len[2], inner_off[2]; /* the levels below i, for a full chunk and the rest */
    __int128 rest_target, rest_home;
} dtr__balance_t;

/* One foreign piece: its target, its box (corner relative to C in lo, to T(target) in tlo)
 * and where it starts in the foreign sequence. */
typedef struct {
    int64_t coord[DTR_MAX_MESH_DIMS];
    int64_t lo[DTR_MAX_TENSOR_DIMS], tlo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS];
    __int128 pos, count;
    bool started;
} dtr__piece_iter_t;

void dtr__balance_init(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                       const dtr_placement_t *after, int i, const int64_t *coord,
                       dtr__balance_t *b);

/* Member a's target block (shape and offset): its "after" layout. */
void dtr__balance_target(const dtr__balance_t *b, int64_t a, int64_t *shape, int64_t *offset);

/* Member a (coordinate a on mesh dim i): its home piece and what other groups deliver. */
void dtr__balance_member(const dtr__balance_t *b, int64_t a, __int128 *home, __int128 *delivered);

/* Member a's share of the foreign sequence; member m's when the members before it took
 * `at` of it (a walk over the members in order). */
void dtr__balance_share(const dtr__balance_t *b, int64_t a, __int128 *start, __int128 *count);
__int128 dtr__balance_next_share(const dtr__balance_t *b, int64_t m, __int128 at);

void dtr__pieces_begin(const dtr__balance_t *b, dtr__piece_iter_t *it);

bool dtr__pieces_next(const dtr__balance_t *b, dtr__piece_iter_t *it);

/* The next foreign piece that meets the share [start, start+count): the part that does is
 * [u, v) of the piece (row-major). */
bool dtr__pieces_in_share(const dtr__balance_t *b, dtr__piece_iter_t *it, __int128 start,
                          __int128 count, int64_t *u, int64_t *v);

/* A target's foreign piece in g: false when g holds none of it (or it is home in g). */
bool dtr__balance_find(const dtr__balance_t *b, const int64_t *target, __int128 *pos,
                       __int128 *count, int64_t *lo, int64_t *ext, int64_t *tlo);

/* A placement mixed into h, ragged sizes included (plan.c; the cross plans' hash too). */
uint64_t dtr__placement_hash(uint64_t h, dtr_placement_t p);
/* Hashes of what the ranks of a call must share (plan.c): a plan's specs, strategy and steps;
 * a batch's member plans and rounds (stored in it by dtr_batch_plan_create). */
uint64_t dtr__plan_hash(const dtr_plan_t *plan);
uint64_t dtr__batch_plan_hash(const dtr_batch_plan_t *p);

/* A change between meshes (cross*.c): per tensor, the plan run on the source mesh first
 * (src -> mid, where has_pre); then the messages of mid's boxes to dst's blocks, sorted by
 * round, sender, receiver, tensor (from == to: a box the rank keeps, copied locally in
 * the tensor's first round). The boxes are planned once per kind of tensor (cross_kinds.c)
 * and the messages made from them on demand: every rank's (dtr plan) or one rank's (a run:
 * dtr__xensure). */
typedef struct {
    int tensor, round;
    int from, to;
    int part; /* a Partial reduced at the receiver: which addend (dtr__xtensor_t.parts) */
    int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS]; /* the box, global */
    int64_t bytes;
} dtr__xmsg_t;

typedef struct {
    dtr_spec_t src, mid, dst; /* dst on the plan's destination mesh (relabeled or the caller's) */
    bool has_pre;
    /* a cast alone (no Partial dims): no pre plan; the sender casts each box from src's
     * dtype into dst's as it packs it (mid: src's placements in dst's dtype) */
    bool wire_cast;
    /* a Partial(sum) source reduced at the receiver: no pre plan; mid is src with its
     * Partial dims as Replicate, and each box comes from one holder of each of the `parts`
     * addends (the coordinates over the Partial dims, row-major), which the receiver sums
     * in that order */
    bool at_receiver;
    int parts;
    dtr_plan_t *pre;          /* src -> mid on src's mesh, run before round `round` (has_pre;
                                 shared by the tensors of one choice, the plan's pres own it) */
    int kind;                 /* its kind (the plan's kinds): the boxes it moves */
    int turn;                 /* whose turn among a block's holders its first box is */
    int round, last;          /* the tensor's first and last rounds */
    int64_t mid_offset;       /* where its reduced block lies in the mids' scratch (has_pre) */
    int64_t mid_size;         /* and the room it takes there (its largest block, rounded up) */
} dtr__xtensor_t;

struct dtr_cross_plan {
    int ntensors;
    dtr__xtensor_t *t;
    dtr_mesh_t *relabeled;    /* the destination mesh relabeling chose (owned), or NULL */
    bool relabel;             /* asked for */
    int64_t cap;              /* the staging cap, 0: none */
    int nkinds;
    struct dtr__xkind *kinds; /* tensors that move alike (cross_kinds.c) */
    int npres;
    dtr_plan_t **pres;        /* the distinct plans of the tensors' reductions (owned) */
    /* the messages made so far (dtr__xensure): -2 none, -1 every rank's, else one rank's (its
     * sends and receives) */
    int msgs_for;
    pthread_mutex_t lock;     /* making the messages of a plan that threads share */
    int64_t nmsgs;
    dtr__xmsg_t *msgs;
    int64_t *by_to;           /* message indices by round, receiver, sender */
    int nrounds;
    int64_t *round_first;     /* round r's messages: [round_first[r], round_first[r + 1]) */
    int64_t mid_bytes;        /* the mids' scratch: the most reduced blocks alive at once */
    /* per round, the reductions on the source mesh of the tensors starting there that keep
     * their dtype (dtr__xcoalesced says which), as one batch; NULL where fewer than two */
    dtr_batch_plan_t **pre_batch;
    int nranks;
    int *ranks;               /* RA and RB together, ascending */
    int *pos;                 /* [ranks[nranks - 1] + 1]: a rank's position in ranks, or -1 */
    dtr_cross_figures_t fig;
    uint64_t hash;            /* what the ranks' argument agreement compares */
};

/* The position of rank r (of the plan's meshes) among the plan's ranks: the group's order. */
static inline int dtr__xpos(const dtr_cross_plan_t *p, int r) { return p->pos[r]; }

/* Whether tensor t's reduction on the source mesh runs in its round's pre_batch. */
bool dtr__xcoalesced(const dtr_cross_plan_t *p, int t);

/* Makes the plan's messages for `rank` (its sends and receives; -1: every rank's) where
 * they are not made yet (const: they are made once, under the plan's lock). */
dtr_status_t dtr__xensure(const dtr_cross_plan_t *p, int rank);
/* The messages made anew for `rank` (-1: every rank's), each in its tensor's first round,
 * and indexed; the old ones freed. Not under a cap (whose chunks are made at creation). */
dtr_status_t dtr__xmake(dtr_cross_plan_t *p, int rank);

/* The messages rank sends in a round (*first, *n into msgs) and receives (into by_to); the
 * rank's messages made (dtr__xensure). */
void dtr__cross_sends(const dtr_cross_plan_t *p, int round, int rank, int64_t *first, int64_t *n);
void dtr__cross_recvs(const dtr_cross_plan_t *p, int round, int rank, int64_t *first, int64_t *n);

/* A block-scaled change's parts (change_fp8.c; change_run.c runs them): the caller's n
 * sources, each one's amax specs and the batch all-reducing them on the source mesh. The
 * change's own plan is the move of 2n tensors (the quantized ones, then their scales). The
 * scratch belongs to the one run in flight (a change runs one call at a time). */
typedef struct {
    int n;
    int64_t block;
    dtr_spec_t *src;                /* [n] */
    dtr_dtype_t *to;                /* [n]: each one's fp8 dtype */
    dtr_spec_t *amax_src, *amax_dst; /* [n] */
    dtr_batch_plan_t *amax;         /* the all-reduce of the amax (a batch, of one too) */
    const void **qin;               /* [2n]: the move's inputs (kept for a non-blocking one) */
    size_t *qin_bytes;              /* [2n] */
    void *scratch;
    size_t scratch_bytes;
    bool sent; /* the last call succeeded (or started) on this rank (dtr_change_sent) */
} dtr__change_fp8_t;

/* NULL for a change without block scaling. */
dtr__change_fp8_t *dtr__change_fp8(const dtr_change_t *change);
dtr_status_t dtr__change_fp8_create(int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                    const dtr_change_options_t *o, dtr__change_fp8_t **out,
                                    dtr_spec_t **qsrc, dtr_spec_t **qdst);
void dtr__change_fp8_destroy(dtr__change_fp8_t *f);

#endif
