/*
 * Internals of the planner: what its files share. The parts other folders may read are in
 * narrower headers it includes: geometry.h (what the executor reads of a plan: layouts at a
 * coordinate, a seed plan's blocks, the balanced reduction's pieces, the hashes) and
 * testing.h (the planner's test hooks). Includes nothing of the executor or of any backend.
 */
#ifndef DTR_REDISTRIBUTE_PLANNER_INTERNAL_H
#define DTR_REDISTRIBUTE_PLANNER_INTERNAL_H

#include "core/common.h"
#include "dtensor/order.h"
#include "redistribute/planner/geometry.h"
#include "redistribute/planner/kinds.h"
#include "redistribute/planner/planner.h"
#include "redistribute/planner/testing.h"




/* What a reduction over n ranks moves to its busiest member when the group combines u
 * elements: the all-reduce bound 2u - 2u/n (to Replicate), the reduce-scatter one u - u/n.
 * (The lower bound's reduction term; it grows with u.) */
static inline __int128 dtr__reduce_moved(bool to_replicate, __int128 u, int64_t n) {
    __int128 v = to_replicate ? 2 * u : u;
    return v - (v >= 0 && v <= INT64_MAX ? (__int128)((int64_t)v / n) : v / n);
}
/* Elements of a block; of a block less tensor dims skip1 and skip2 (-1: none); elements two
 * blocks (shape, offset) share (layout.c). */
__int128 dtr__numel(const dtr__ctx_t *ctx, const int64_t *shape);
__int128 dtr__numel_except(const dtr__ctx_t *ctx, const int64_t *shape, int skip1, int skip2);
__int128 dtr__overlap(const dtr__ctx_t *ctx, const int64_t *as, const int64_t *ao,
                      const int64_t *bs, const int64_t *bo);

/* The blocks the lower bound compares (layout.c): the source's shards (cl) and the
 * target's (tl), Partial as Replicate; returns whether some Partial mesh dim is reduced. */
bool dtr__bound_layouts(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                        const dtr_placement_t *dst, dtr_placement_t *cl, dtr_placement_t *tl);


/* Over the cells of placements pl on tensor dim d reached with every `sub` mesh dim's
 * coordinate taken (the others at coord): the elements they share with [lo, lo+len) (*sum)
 * and how many share any (*hits) (cells.c, O(levels x mesh size)). */
void dtr__cells_of(const dtr__ctx_t *ctx, const dtr_placement_t *pl, int d, const bool *sub,
                   const int64_t *coord, int64_t lo, int64_t len, __int128 *sum, __int128 *hits);
/* The same with d's shard sequence (dims[0..k), dtr__shard_seq's) at hand, from level q of
 * the sequence, its block there [off, off+blen) given: the levels
 * above q must split no `sub` mesh dim (they only narrow the block to the coordinate's).
 * hits may be NULL (the sum alone, quicker). */
void dtr__cells_below(const dtr__ctx_t *ctx, const int *dims, int k, int q, const bool *sub,
                      const int64_t *coord, int64_t off, int64_t blen, int64_t lo, int64_t len,
                      __int128 *sum, __int128 *hits);




/* Appends a step changing mesh dim i to `to` (kind chosen from the pair of placements;
 * `reduce_scatter_ok` false turns P -> S into nothing: callers decide). Returns false when
 * the plan is full. Invalid steps are still appended (so compat's plan can be shown) and
 * mark the builder invalid. */
bool dtr__emit(dtr__builder_t *b, int i, dtr_placement_t to);


/* What following a seed plan's index ranges (seed_follow.c) found. */
typedef enum {
    DTR__SEED_RIGHT,     /* every element lands where the target places it */
    DTR__SEED_MISPLACES, /* some element does not */
    DTR__SEED_UNEVEN,    /* a step's blocks are not the lengths the executor moves */
    DTR__SEED_UNDECIDED, /* too large to follow */
} dtr__seed_verdict_t;

/* Follows a compat plan's steps as the seed runs them (concatenate, keep the positional
 * chunk), per tensor dim and mesh coordinate class; why says what was found otherwise. */
dtr__seed_verdict_t dtr__seed_follow(const dtr__ctx_t *ctx, const dtr_spec_t *src,
                                     const dtr_spec_t *dst, const dtr_plan_t *plan, char *why,
                                     size_t len);

void dtr__seed_step_bytes(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int k,
                          const int64_t *coord, int64_t *send, int64_t *recv);
/* Sets seed_blocks and the step and plan figures (bytes, shapes, memory, time, the most one
 * rank receives) from those blocks; false, changing nothing, when there are too many mesh
 * coordinates to follow. */
bool dtr__seed_figures(const dtr__ctx_t *ctx, dtr_plan_t *plan);

/* The mesh dims (bits) whose coordinates differ between the ranks a step moves data between
 * (kinds.c): a collective's own mesh dim; for an exchange, the dims "before" shards (a
 * rank's peers agree with it everywhere else, so replicas serve their own side) unless
 * "after" splits that tensor dim the same way down to them; for a
 * reduce_exchange, its mesh dim and the later shards of d its delivery serves. Mesh dims of
 * one rank never count; local steps move nothing. */
unsigned dtr__step_links(const dtr_step_t *s, int mdims, const int64_t *msize);

/* The first coordinate, and the next over the mesh dims marked in vary (at: the index into
 * c per mesh dim, zeroed by the caller with the first); false after the last. */
void dtr__reps_first(const dtr__ctx_t *ctx, const dtr__reps_t *r, int64_t *coord);
bool dtr__reps_next(const dtr__ctx_t *ctx, const dtr__reps_t *r, const bool *vary,
                    int64_t *coord, int64_t *at);
/* Per-tensor-dim terms of a pair of layouts (tables.c): for each tensor dim d, a table over
 * the coordinates (reps') of the mesh dims splitting d in either layout of the rank's
 * block lengths before and after along d, their overlap, and (with cells, for an exchange)
 * the sum over its peers' cells and the sources' cells met. */
/* (32 bits: lengths along one tensor dim, and rank counts. dtr__pair_init declines tensor
 * dims of 2^31 elements or more, which the per-rank loops then visit rank by rank.) */
typedef struct dtr__term {
    int32_t alen, blen, meet;
} dtr__term_t;
typedef struct {
    int32_t sum, hits; /* (at most the tensor dim's length, and the ranks) */
} dtr__cell_sums_t;
typedef struct {
    int k;
    int dims[DTR_MAX_MESH_DIMS];
    int64_t radix[DTR_MAX_MESH_DIMS];
    int64_t stride[DTR_MAX_MESH_DIMS]; /* per mesh dim (0: not one of dims) */
    dtr__term_t *terms;
    dtr__cell_sums_t *sums; /* (with cells only) */
} dtr__table_t;
typedef struct {
    dtr__table_t t[DTR_MAX_TENSOR_DIMS];
    int64_t cur[DTR_MAX_TENSOR_DIMS]; /* each table's entry at the rank loop's coordinate */
    dtr__term_t *store;
    dtr__cell_sums_t *sums_store;
    bool borrowed; /* the stores belong to ctx->memo's cache */
} dtr__pair_t;
/* False (nothing to free) where the tables would be too large, out of memory, or with
 * dtr__even_off: the caller then visits every rank. */
bool dtr__pair_init(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                    const dtr_placement_t *after, bool cells, const dtr__reps_t *r,
                    dtr__pair_t *p);
void dtr__pair_free(dtr__pair_t *p);
/* Frees the tables a planning call cached in its memo. */
void dtr__pair_cache_free(dtr__plan_memo_t *memo);
/* The rank loop over the coordinates r stands for (those of dtr__reps_first and
 * dtr__reps_next over the mesh dims in vary), keeping the current entries (cur) of the np
 * pairs at p in step: only the entries, not the coordinates, which the loops' figures do
 * not read. The innermost mesh dim's step is inline. */
typedef struct {
    dtr__pair_t *p;
    int np, ndim;
    int nv;                        /* mesh dims walked, outermost first */
    int dims[DTR_MAX_MESH_DIMS];
    int64_t lim[DTR_MAX_MESH_DIMS], pos[DTR_MAX_MESH_DIMS];
    int64_t inner[DTR_MAX_PLAN_STEPS + DTR_MAX_MESH_DIMS][DTR_MAX_TENSOR_DIMS]; /* strides */
} dtr__cursor_t;
void dtr__cursor_init(const dtr__ctx_t *ctx, const dtr__reps_t *r, const bool *vary,
                      dtr__pair_t *p, int np, dtr__cursor_t *c);
bool dtr__cursor_carry(dtr__cursor_t *c);
static inline bool dtr__cursor_next(dtr__cursor_t *c) {
    int j = c->nv - 1;
    if (j < 0) return false;
    if (++c->pos[j] == c->lim[j]) return dtr__cursor_carry(c);
    for (int k = 0; k < c->np; k++)
        for (int d = 0; d < c->ndim; d++) c->p[k].cur[d] += c->inner[k][d];
    return true;
}
/* An exchange step's figures (recv, send, peers, extra) over the ranks r stands for (vary:
 * the mesh dims to walk), and the most bytes one rank receives over a whole plan (without
 * balanced reductions), from the tables; false where dtr__pair_init is. */
bool dtr__exchange_figures_tables(const dtr__ctx_t *ctx, dtr_step_t *s, const dtr__reps_t *r,
                                  const bool *vary);
bool dtr__plan_recv_tables(const dtr__ctx_t *ctx, const dtr_plan_t *plan, const dtr__reps_t *r,
                           const bool *vary, __int128 *best);

/* Node-aware cost (nodes.c): the ranks of one node (the mesh dims not in across), and a
 * step's node_recv_bytes_max: the most bytes it brings into one node from the others (0
 * where it crosses no mesh dim in ctx->cost->across_nodes). */
int64_t dtr__node_ranks(const dtr__ctx_t *ctx, unsigned across);
void dtr__step_node_bytes(const dtr__ctx_t *ctx, dtr_step_t *s);

/* The modeled time of a step from its figures (node_recv_bytes_max set first). */
void dtr__step_time(const dtr__ctx_t *ctx, dtr_step_t *s);

/* For the kinds' figures (plan.c): folds the rank at coord (member: its balanced group, or
 * NULL) into the step's figures; and folds in every rank through the representatives of
 * reps.c (positional: the mesh dims whose offsets the figures read), first trying the
 * exchange's tables where `tables` is set. */
void dtr__step_figures_at(const dtr__ctx_t *ctx, dtr_step_t *s, const int64_t *coord,
                          const dtr__balance_member_t *member);
void dtr__step_figures_each(const dtr__ctx_t *ctx, dtr_step_t *s, unsigned positional,
                            bool tables);
/* What all_gather and reduce_scatter share (kind_all_gather.c): n - 1 rounds over the mesh
 * dim's link, the time and its latency part. */
double dtr__ring_time(const dtr__ctx_t *ctx, const dtr_step_t *s, unsigned links);
double dtr__ring_alpha(const dtr__ctx_t *ctx, const dtr_step_t *s);
/* And what such a step's rank receives from its terms: n - 1 chunks of the block after
 * (a gather's) or before (a reduce-scatter's) the step. */
__int128 dtr__ring_recv_terms(const dtr__ctx_t *ctx, const dtr_step_t *s,
                              const dtr__term_t *const *t, bool after);


/* Fills the totals candidates are compared on: counts by kind, peak memory, time (bytes
 * and the lower bound are left at -1). */
void dtr__plan_summarize(const dtr__ctx_t *ctx, const dtr_spec_t *src, const dtr_spec_t *dst,
                         dtr_plan_t *plan);

/* All the totals: the above, the most bytes one rank receives, and the lower bound. */
void dtr__plan_finish(const dtr__ctx_t *ctx, const dtr_spec_t *src, const dtr_spec_t *dst,
                      dtr_plan_t *plan);

/* Bytes one rank (by coordinate) sends and receives in a step. */
void dtr__step_rank_bytes(const dtr__ctx_t *ctx, const dtr_step_t *s, const int64_t *coord,
                          int64_t *send, int64_t *recv);




/* The bound's per-rank part: bytes the rank at coord must receive in any plan, from its own
 * blocks alone (the balanced reduction's term is per group, not per rank). */
int64_t dtr__need_bytes_at(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                           const dtr_placement_t *dst, const int64_t *coord);
/* Bytes the rank at coord receives over a whole plan. */
int64_t dtr__plan_rank_recv(const dtr__ctx_t *ctx, const dtr_plan_t *plan, const int64_t *coord);
/* Does some step's busiest rank depend on the coordinate (all-to-all, exchanges)? Without
 * such steps coordinate 0 receives the most in every step. */
bool dtr__plan_per_coord(const dtr_plan_t *plan);

/* Do two of the reductions (forced ones included) not commute? Then their order matters. */
bool dtr__partials_mixed(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                         const dtr_placement_t *dst);
/* Does the target keep the value under mixed ops? A new P(sum) (a division) must not sit
 * outside a P(product); forced dims must be able to become Partial again: not P(product),
 * not in a backward plan (its R -> P steps do not divide). False with why (naming the mesh
 * dims) otherwise. Either strategy. */
bool dtr__partials_ok(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_placement_t *dst, bool backward, char *why, size_t len);
/* Does the plan reduce mixed Partial ops innermost mesh dim first, counting the Partial dims
 * it leaves as reduced after it? If not, why (may be NULL) says which two it swaps. */
bool dtr__reduction_order_ok(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_plan_t *plan, char *why, size_t len);

/* Shard -> Partial(sum) (zero_fill.c). The mesh dims that do it, as bits. */
unsigned dtr__zero_fill_dims(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_placement_t *dst);
/* The steps every plan of such a change starts with (gathers behind them, then the
 * local_zero_fill steps, innermost mesh dim first), into plan; mid gets the placements
 * after them. False when the plan is full. */
bool dtr__plan_zero_fill(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                         const dtr_placement_t *dst, dtr_plan_t *plan, dtr_placement_t *mid);
/* The optimal plan of such a change: those steps, then the optimal plan from mid. */
dtr_status_t dtr__plan_from_zero_fill(const dtr__ctx_t *ctx, const dtr_spec_t *src,
                                      const dtr_spec_t *dst, dtr_plan_t *plan);
/* For the bound: elements of the box (shape, offset) that the rank at coord keeps non-zero
 * (it holds the other ones as zeros, which no plan needs to move); -1 when the change
 * zero-fills nothing. */
__int128 dtr__zero_fill_kept(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_placement_t *dst, const int64_t *coord,
                             const int64_t *shape, const int64_t *offset);

/* a better than b under the model: less time; on a tie, less peak memory, then fewer steps
 * (plan.c; optimal keeps the better candidate). */
bool dtr__plan_better(const dtr_plan_t *a, const dtr_plan_t *b);
/* Classes of mesh coordinates (classes.c): the distinct values of a few linear forms of a
 * rank's coordinates, sum_i coord[i] * w[i], over every rank of the mesh. A windowed form
 * matters only inside [lo, hi]: outside it reads DTR__DEAD (and with kill, the rank is
 * dropped); with a plateau, values in [plo, phi] (inside the window) all read DTR__PLATEAU;
 * with a period, values in [rlo, rhi] matter only modulo it (the value is then that residue,
 * and dtr__classes_residue says so); a form with mod > 0 matters only modulo mod. */
#define DTR__FORMS_MAX 16
#define DTR__DEAD INT64_MIN
#define DTR__PLATEAU (INT64_MIN + 1)
typedef struct {
    int64_t w[DTR_MAX_MESH_DIMS];
    bool windowed, kill, plateau;
    int64_t lo, hi, plo, phi;
    int64_t period, rlo, rhi;
    int64_t mod;
} dtr__form_t;
typedef struct {
    int nforms;
    dtr__form_t form[DTR__FORMS_MAX];
    int64_t n;  /* classes found */
    int64_t *v; /* n states: nforms values, then a bit per form for a residue */
} dtr__classes_t;
static inline const int64_t *dtr__classes_state(const dtr__classes_t *cl, int64_t k) {
    return cl->v + k * (cl->nforms + 1);
}
static inline bool dtr__classes_residue(const dtr__classes_t *cl, const int64_t *v, int f) {
    return v[cl->nforms] >> f & 1;
}
/* Fills n and v; false (nothing to free) past max_states classes or out of memory. */
bool dtr__classes_run(const dtr__ctx_t *ctx, dtr__classes_t *cl, int64_t max_states);
void dtr__classes_free(dtr__classes_t *cl);

bool dtr__even(const dtr__ctx_t *ctx, const dtr_placement_t *pl);
/* An exchange step's figures (recv, send, peers, extra) from classes; false where the step's
 * layouts are not even (or too many classes): the caller visits every rank. */
bool dtr__exchange_figures_even(const dtr__ctx_t *ctx, dtr_step_t *s);
/* The lower bound's per-rank terms, max over ranks (dtr__need_at), from classes; false where
 * not even or zero fills are involved. */
bool dtr__need_max_even(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                        const dtr_placement_t *dst, __int128 *need);
/* A balanced reduction's figures (a reduce_exchange step), and the lower bound's balanced
 * term for mesh dim k (the most over groups, into *best where larger), from the groups'
 * classes; false where not even or shard orders are in play (then every group is visited). */
bool dtr__balance_figures_even(const dtr__ctx_t *ctx, dtr_step_t *s);
bool dtr__balance_bound_even(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_placement_t *dst, int k, __int128 *best);

/* The optimal plan (see optimal.c). */
dtr_status_t dtr__plan_optimal(const dtr__ctx_t *ctx, const dtr_spec_t *src,
                               const dtr_spec_t *dst, dtr_plan_t *plan);




/* ---- between meshes (cross*.c) --------------------------------------------------------- */

/* The blocks of a layout without Partial dims: the per-dim intervals of its blocks and,
 * per distinct block (a class: the mixed-radix index of its intervals), its holders. */
typedef struct {
    int ndim;
    int64_t n[DTR_MAX_TENSOR_DIMS];                              /* intervals along each dim */
    int64_t *lo[DTR_MAX_TENSOR_DIMS], *len[DTR_MAX_TENSOR_DIMS]; /* sorted by lo */
    int64_t nclasses;                                            /* product of n[] */
    int64_t *first; /* per class: its holders' start in holder[] (nclasses + 1) */
    int *holder;    /* ranks, grouped by class, ascending within each */
} dtr__xblocks_t;

/* A box of a target block that one holder sends (or, from = to, keeps). */
typedef struct {
    int tensor, from, to;
    int part;    /* a Partial reduced at the receiver: the addend (0 otherwise) */
    int64_t cls; /* the source block it comes from (with part: cls * parts + part) */
    int64_t numel;
    int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS];
} dtr__xpiece_t;

typedef struct {
    dtr__xpiece_t *v;
    int64_t n, cap;
} dtr__xpieces_t;

/* cross_blocks.c: every distinct block of spec and its holders; freeing them; stepping a
 * coordinate through a mesh row-major (false after the last); the boxes of target block t
 * (on rank `to`, of tensor `tensor`) that the blocks meet, one per block, appended to out;
 * whether `rank` holds class cls; int comparison for qsort and bsearch. */
dtr_status_t dtr__xblocks(const dtr_spec_t *spec, dtr__xblocks_t *b);
void dtr__xblocks_free(dtr__xblocks_t *b);
bool dtr__xcoord_next(const dtr_mesh_t *mesh, int64_t *coord);
dtr_status_t dtr__xtarget_pieces(const dtr__xblocks_t *b, int tensor, int to,
                                 const dtr_layout_t *t, dtr__xpieces_t *out);
bool dtr__xholds(const dtr__xblocks_t *b, int64_t cls, int rank);
/* A Partial source reduced at the receiver: b (the blocks of src with its Partial dims as
 * Replicate) regrouped so that class c * parts + k holds c's holders of addend k, the
 * coordinate over src's Partial dims (row-major); *parts their number. */
dtr_status_t dtr__xblocks_part(const dtr_spec_t *src, dtr__xblocks_t *b, int *parts);
/* The pieces from index `from` on (of one target, from unparted blocks) as one per addend:
 * each one's class made c * parts + k, with copies for addends 1..parts-1 appended. */
dtr_status_t dtr__xsplit_parts(dtr__xpieces_t *ps, int64_t from, int parts);
/* Where a block has two holders or more, each box a target lacks cut along its first dim of
 * two or more into as many pieces as its part of what the block's targets lack makes of
 * the holders' shares (more holders than boxes: each box into holders / boxes; one box of
 * three times another's: it in more pieces), each at least min_bytes (a piece must pay for
 * its message), so that the holders share the sends and the busiest sends about its share
 * of the block (the lower bound), not a whole box. */
dtr_status_t dtr__xshare(const dtr__xblocks_t *b, dtr__xpieces_t *ps, int64_t item,
                         int64_t min_bytes);
/* How many boxes the blocks of b cut non-empty target block t into (without making them). */
int64_t dtr__xcount_pieces(const dtr__xblocks_t *b, const dtr_layout_t *t);

/* A kind of tensor in a change between meshes: the tensors whose boxes are alike (equal
 * src, mid and dst specs, and where they are summed). Its boxes are planned once, on its
 * first tensor, each with the slot of its sender among its block's holders for turn 0:
 * tensor t of the kind sends box i from holder (slot[i] + t's shift) mod |holders|, the
 * shift its turn times the block's boxes sent per tensor (dtr__xshift). */
typedef struct dtr__xkind {
    int rep, count;       /* its first tensor; its tensors */
    int64_t item;         /* dst's element size */
    dtr__xblocks_t b;     /* rep's mid's blocks (per addend where summed at the receivers) */
    int64_t n;            /* its boxes, */
    dtr__xpiece_t *v;     /* by the receiver's position in the plan's ranks (tensor: rep) */
    int *slot;            /* [n]: the sender's holder slot at turn 0; -1: kept (from = to) */
    int64_t *recv_first;  /* [nranks + 1]: by position, the boxes a rank receives or keeps */
    int64_t *send;        /* box indices by holder entry (b.first[cls] + slot) */
    int64_t *send_first;  /* [holders + 1]: per holder entry, its boxes in send[] */
    int64_t *hold;        /* [nranks]: by position, the rank's holder entry, or -1 */
    int64_t *lack;        /* [b.nclasses]: per block, the bytes its targets lack */
    /* the turns after which its tensors send alike again (the lcm of its blocks' holder
     * counts; 0 where over DTR__XPERIOD_MAX): tensor t's variant is turn % period, and per
     * variant its first tensor, its tensors, and the latency of a round of it alone (-1:
     * not yet known) */
    int64_t period;
    int *vrep;
    int64_t *vcount, *vlatency;
    struct dtr__xstage **vstage; /* per variant, the bytes each rank stages (NULL: not yet) */
    int64_t *vnstage;
} dtr__xkind_t;

/* Bytes one rank (its position) sends and receives of one tensor (cross_rounds.c). */
typedef struct dtr__xstage {
    int pos;
    int64_t bytes;
} dtr__xstage_t;

#define DTR__XPERIOD_MAX 4096

/* cross_kinds.c: the plan's kinds (each tensor's kind and turn, each kind's blocks), after
 * the tensors' mids; their boxes and senders, after the plan's ranks; the sender of box i
 * of tensor t; the bytes rank sends and receives (between distinct ranks); freeing. */
dtr_status_t dtr__xkinds(dtr_cross_plan_t *p);
dtr_status_t dtr__xkind_boxes(dtr_cross_plan_t *p, const dtr_cost_model_t *cost);
/* The op of a spec's first Partial dim (SUM where it has none): what the receivers combine
 * its addends with where they do (cross_blocks.c). */
dtr_reduce_op_t dtr__xpartial_op(const dtr_spec_t *spec);
/* How many slots a tensor of turn `turn` moves the senders of block cls on: its turn times
 * the block's boxes sent per tensor (so consecutive turns take the next holders, not the
 * same ones shifted by one), modulo the block's holders. */
static inline int64_t dtr__xshift(const dtr__xkind_t *k, int64_t cls, int64_t turn) {
    int64_t f = k->b.first[cls], h = k->b.first[cls + 1] - f;
    int64_t sent = k->send_first[f + h] - k->send_first[f];
    return (turn % h) * (sent % h) % h;
}
static inline int dtr__xsender(const dtr_cross_plan_t *p, int t, int64_t i) {
    const dtr__xkind_t *k = &p->kinds[p->t[t].kind];
    if (k->slot[i] < 0) return k->v[i].to;
    int64_t f = k->b.first[k->v[i].cls], h = k->b.first[k->v[i].cls + 1] - f;
    return k->b.holder[f + (k->slot[i] + dtr__xshift(k, k->v[i].cls, p->t[t].turn)) % h];
}
void dtr__xrank_bytes(const dtr_cross_plan_t *p, int rank, int64_t *send, int64_t *recv);
void dtr__xkinds_free(dtr_cross_plan_t *p);
/* Two specs that plan alike (equal meshes, dtype, shape and placements), and a
 * hash of what that compares (the mesh by its sizes), chained from h. */
bool dtr__xspec_alike(const dtr_spec_t *a, const dtr_spec_t *b);
uint64_t dtr__xspec_key(const dtr_spec_t *a, uint64_t h);
/* The messages (made) sorted by round, sender, receiver, tensor and corner; by_to and
 * round_first. */
dtr_status_t dtr__xindex(dtr_cross_plan_t *p);

/* cross_relabel.c: the rank of dst's mesh for each of its coordinates (row-major) into
 * ranks[], the order keeping the most bytes where they are over the plan's tensors (their
 * mids and dsts set, b their mids' blocks), dst's own order on ties. */
dtr_status_t dtr__xrelabel(const dtr_cross_plan_t *p, const dtr__xblocks_t *b, int *ranks);

/* cross_rounds.c: the rounds: without a cap, whole tensors grouped while a round stays
 * small (from the kinds; no messages made); under a cap, every message made (round 0) and
 * split into chunks of at most the cap (half of it where it holds an element) in rounds in
 * which no rank stages more than the cap, p->msgs replaced. Either sets each tensor's first
 * and last rounds and the mids' scratch. */
dtr_status_t dtr__xrounds(dtr_cross_plan_t *p);

/* A spec the caller says was made by dtr_spec_init: its mesh, dtype, dims and placements in
 * range (planner.c); the error names it as `name`, under func. */
dtr_status_t dtr__check_spec(const dtr_spec_t *spec, const char *name, const char *func);

/* Ragged shards within one mesh (ragged.c). */
typedef struct {
    dtr_spec_t src, dst;             /* the caller's */
    dtr_spec_t proxy_src, proxy_dst; /* each ragged shard a chunked one of its longest slice */
    unsigned mdims, tdims;           /* the ragged shards' mesh dims and tensor dims, as bits */
} dtr__ragged_t;
/* Does src or dst hold a ragged shard? */
bool dtr__ragged_pair(const dtr_spec_t *src, const dtr_spec_t *dst);
/* Can the steps within one mesh plan the pair: every ragged shard the same in src and dst and
 * the only shard of its tensor dim in both? If not, why (may be NULL) says which is not. */
bool dtr__ragged_kept(const dtr_spec_t *src, const dtr_spec_t *dst, char *why, size_t len);
/* The stand-ins the steps are planned on (a pair dtr__ragged_kept takes). */
dtr_status_t dtr__ragged_stand_in(const dtr_spec_t *src, const dtr_spec_t *dst,
                                  dtr__ragged_t *r);
/* Does a candidate plan keep ctx's ragged mesh dims as they are and shard their tensor dims
 * nowhere else? (True without ragged shards.) */
bool dtr__ragged_respects(const dtr__ctx_t *ctx, const dtr_plan_t *plan);
/* The stand-in's plan made the caller's: its specs, and the ragged placements in its steps. */
void dtr__ragged_restore(const dtr__ragged_t *r, dtr_plan_t *plan);
/* The largest block's shape along ragged shards (shape: a block's, from dtr__layout). */
void dtr__ragged_largest(const dtr__ctx_t *ctx, const dtr_placement_t *pl, int64_t *shape);

#endif
