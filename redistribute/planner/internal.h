/*
 * Internals of the planner: what its files share, and what the executor reads of a plan's
 * geometry (the layouts at a coordinate, the balanced reduction's pieces). Includes nothing
 * of the executor or of any backend.
 */
#ifndef DTR_REDISTRIBUTE_PLANNER_INTERNAL_H
#define DTR_REDISTRIBUTE_PLANNER_INTERNAL_H

#include "core/internal.h"
#include "dtensor/internal.h"
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
} dtr__ctx_t;

/* A plan under construction. Steps are checked as they are added: one whose inputs are not
 * the canonical layout its collective assumes (a gather of a tensor dim that a later mesh
 * dim still shards, say) marks the plan invalid, with the reason. */
typedef struct {
    const dtr__ctx_t *ctx;
    dtr_placement_t cur[DTR_MAX_MESH_DIMS];
    dtr_plan_t *plan;
    bool valid;
    bool misaligned_only; /* invalid only because steps work on non-canonical layouts */
    char why[256];
    int scaled_at; /* the first R -> P(sum) scale step (1-based), 0 if none yet */
} dtr__builder_t;

void dtr__ctx_init(dtr__ctx_t *ctx, const dtr_spec_t *spec, const dtr_cost_model_t *cost);

/* Saturating int64 from a wider product: sizes past 2^63 cannot be allocated anyway. */
static inline int64_t dtr__sat(__int128 v) { return v > INT64_MAX ? INT64_MAX : (int64_t)v; }
/* What a reduction over n ranks moves to its busiest member when the group combines u
 * elements: the all-reduce bound 2u - 2u/n (to Replicate), the reduce-scatter one u - u/n.
 * (The lower bound's reduction term; it grows with u.) */
static inline __int128 dtr__reduce_moved(bool to_replicate, __int128 u, int64_t n) {
    __int128 v = to_replicate ? 2 * u : u;
    return v - (v >= 0 && v <= INT64_MAX ? (__int128)((int64_t)v / n) : v / n);
}
/* Elements of a block; elements two blocks (shape, offset) share (layout.c). */
__int128 dtr__numel(const dtr__ctx_t *ctx, const int64_t *shape);
__int128 dtr__overlap(const dtr__ctx_t *ctx, const int64_t *as, const int64_t *ao,
                      const int64_t *bs, const int64_t *bo);

/* The blocks the lower bound compares (layout.c): the source's shards (cl) and the
 * target's (tl), Partial as Replicate; returns whether some Partial mesh dim is reduced. */
bool dtr__bound_layouts(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                        const dtr_placement_t *dst, dtr_placement_t *cl, dtr_placement_t *tl);

/* Steps through the coordinates of the mesh dims marked in vary (others keep their value);
 * false after the last. */
bool dtr__next_coord(const dtr__ctx_t *ctx, const bool *vary, int64_t *coord);

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

void dtr__builder_init(dtr__builder_t *b, const dtr__ctx_t *ctx, const dtr_placement_t *start,
                       dtr_plan_t *plan);

/* Appends a step changing mesh dim i to `to` (kind chosen from the pair of placements;
 * `reduce_scatter_ok` false turns P -> S into nothing: callers decide). Returns false when
 * the plan is full. Invalid steps are still appended (so compat's plan can be shown) and
 * mark the builder invalid. */
bool dtr__emit(dtr__builder_t *b, int i, dtr_placement_t to);

/* Appends one exchange from the current placements to `to` (same Partial dims). */
bool dtr__emit_exchange(dtr__builder_t *b, const dtr_placement_t *to);

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

/* Coordinates standing for every rank in a per-rank loop (reps.c): on each mesh dim, all
 * of them (all[i]: where the caller's figure reads offsets along what it splits, the
 * `positional` mesh dims, or where there are too many kinds), else one per distinct
 * signature, the chunk lengths the coordinate gives at its level in each of the layouts
 * for every parent length (c[i][0..n[i]), c[i][0] = 0). A figure that depends on such a
 * mesh dim's coordinate only through block lengths takes its largest value over every
 * rank at one of these. */
#define DTR__REPS_MAX 64
typedef struct {
    bool all[DTR_MAX_MESH_DIMS];
    int64_t n[DTR_MAX_MESH_DIMS];
    int64_t c[DTR_MAX_MESH_DIMS][DTR__REPS_MAX];
} dtr__reps_t;
void dtr__reps_init(const dtr__ctx_t *ctx, const dtr_placement_t *const *layouts, int nlayouts,
                    unsigned positional, dtr__reps_t *r);
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
typedef struct {
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
/* The mesh dims that split a tensor dim both layouts split, unless they split it the same
 * way (then a rank's two blocks coincide along it): where two blocks' offsets meet (the
 * positional mask of an exchange or of the bound's overlaps). */
unsigned dtr__both_split(const dtr__ctx_t *ctx, const dtr_placement_t *a, const dtr_placement_t *b);

/* Node-aware cost (nodes.c): the ranks of one node (the mesh dims not in across), and a
 * step's node_recv_bytes_max: the most bytes it brings into one node from the others (0
 * where it crosses no mesh dim in ctx->cost->across_nodes). */
int64_t dtr__node_ranks(const dtr__ctx_t *ctx, unsigned across);
void dtr__step_node_bytes(const dtr__ctx_t *ctx, dtr_step_t *s);

/* The modeled time of a step from its figures (node_recv_bytes_max set first). */
void dtr__step_time(const dtr__ctx_t *ctx, dtr_step_t *s);

/* Would a step at mesh dim i that gathers or splits tensor dim d read a canonical layout?
 * A gather: i is the last mesh dim (of more than one rank) in d's shard order. A new shard
 * of d at i: no mesh dim after i shards d (so the order stays mesh-dim order). */
bool dtr__innermost(const dtr__ctx_t *ctx, const dtr_placement_t *pl, int i, int d);

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

/* Does a step from `before` to `after` need the balanced reduction at mesh dim i? (Only i
 * changes, P -> S(d), and a later mesh dim of more than one rank shards d.) */
bool dtr__balance_applies(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                          const dtr_placement_t *after, int i);
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
/* The least elements g's busiest member can receive under the step's model (plan.c's bound). */
__int128 dtr__balance_bound(const dtr__balance_t *b);

/* Appends a reduce_exchange step: mesh dim i, P -> `to` (see balance.c). */
bool dtr__emit_reduce_exchange(dtr__builder_t *b, int i, dtr_placement_t to);

int64_t dtr__lower_bound(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                         const dtr_placement_t *dst);
/* The bound's per-rank part: bytes the rank at coord must receive in any plan, from its own
 * blocks alone (the balanced reduction's term is per group, not per rank). */
int64_t dtr__need_bytes_at(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                           const dtr_placement_t *dst, const int64_t *coord);
/* Bytes the rank at coord receives over a whole plan. */
int64_t dtr__plan_rank_recv(const dtr__ctx_t *ctx, const dtr_plan_t *plan, const int64_t *coord);
/* Does some step's busiest rank depend on the coordinate (all-to-all, exchanges)? Without
 * such steps coordinate 0 receives the most in every step. */
bool dtr__plan_per_coord(const dtr_plan_t *plan);

/* Mixed Partial ops (partial_order.c). Do ops a and b give the same result in either order? */
bool dtr__ops_commute(dtr_reduce_op_t a, dtr_reduce_op_t b);
/* Partial dims the target keeps that must still be reduced (and made Partial again) so that
 * the value holds: a mesh dim before them is reduced with an op that does not commute. */
unsigned dtr__partials_forced(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                              const dtr_placement_t *dst);
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

/* The seed plan, steps and totals, even where it is unsafe; returns whether it is safe
 * (and why not, into why). With follow, a plan whose steps work on layouts that are not
 * canonical is followed (seed_follow.c) and safe when every element lands right; without,
 * it is unsafe. With beat (optimal's best candidate so far), such a plan is followed only
 * where it is better than beat (else: false, why untouched). Records no error. */
bool dtr__plan_compat(const dtr__ctx_t *ctx, const dtr_spec_t *src, const dtr_spec_t *dst,
                      bool follow, const dtr_plan_t *beat, dtr_plan_t *plan, char *why,
                      size_t why_len);
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

/* Even layouts (even.c): every tensor dim splits exactly at every level of its shard order,
 * so every rank's block has one shape and offsets linear in its coordinates. Test hook:
 * with dtr__even_off set, the planner visits every rank as it did before even.c (no
 * classes, no reps.c coordinates, no tables.c tables). */
extern bool dtr__even_off;
/* Test hook: the optimal strategy bounds its candidates before costing them exactly on
 * meshes of at least this many ranks (optimal.c). */
extern int64_t dtr__bound_ranks;
/* Candidates skipped so far, over all threads (tests count them). Atomic rather than
 * thread-local: a TLS variable lands in libdtr.so's dynamic symbol table. */
extern _Atomic int64_t dtr__bound_skips;
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

/* Test hook: compat's plan even where it is unsafe, so tests can show it corrupts data.
 * Checks its arguments as dtr_plan_create does. */
dtr_status_t dtr__plan_compat_unchecked(const dtr_spec_t *src, const dtr_spec_t *dst,
                                        dtr_plan_t *out, bool *safe);


/* Hashes of what the ranks of a call must share (plan.c): a plan's specs, strategy and steps;
 * a batch's member plans and rounds (stored in it by dtr_batch_plan_create). */
uint64_t dtr__plan_hash(const dtr_plan_t *plan);
uint64_t dtr__batch_plan_hash(const dtr_batch_plan_t *p);

#endif
