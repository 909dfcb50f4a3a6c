/*
 * Following a seed plan's index ranges (compat), without touching data: does a plan whose
 * steps gather or split a tensor dim that a later mesh dim still shards put every element
 * where the target says, for this shape?
 *
 * A step does to a rank's block what PyTorch 2.1 did: an all-gather along mesh dim i
 * concatenates the group's blocks along d in coordinate order; a chunk (local, or after a
 * reduce-scatter) keeps the rank's positional chunk of its block (the chunk rule on the
 * block's length). Tensor dims are independent under both, so each dim d is followed alone,
 * as the sequence of global indices a rank holds along d (a list of runs). That sequence
 * depends only on the rank's coordinates on the mesh dims that shard d at some point of the
 * plan: one sequence per coordinate class of those dims.
 *
 * The plan is right for this shape when, after its last step, every class holds exactly the
 * target's chunk, in order. (A tensor without elements needs only the target's local shapes
 * at the end: the executor moves no byte on the way.) It is also run by dtr's executor, which sizes each block by the
 * canonical layout of the step's placements and places gathered pieces by the chunk rule; so
 * every step's blocks must also have those lengths, or the plan is refused as one the
 * executor cannot follow (and said so).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redistribute/planner/internal.h"

/* Beyond these, the plan is not followed and compat refuses it as before. */
#define DTR__FOLLOW_CLASSES_MAX 4096
#define DTR__FOLLOW_RUNS_MAX (1 << 20)

typedef struct {
    int64_t lo, hi;
} dtr__run_t;

/* The global indices a class holds along d, in order. */
typedef struct {
    dtr__run_t *run;
    int64_t n, cap;
} dtr__seq_t;

typedef struct {
    const dtr__ctx_t *ctx;
    int d;
    bool vary[DTR_MAX_MESH_DIMS];
    int64_t nclass;
    dtr__seq_t *cur, *next;
    int64_t runs; /* appended to next in this step, against DTR__FOLLOW_RUNS_MAX */
    bool nomem;   /* out of memory, or past DTR__FOLLOW_RUNS_MAX */
    bool empty;   /* the tensor has no element: only the final lengths matter */
} dtr__follow_t;

static int64_t dtr__seq_len(const dtr__seq_t *q) {
    int64_t len = 0;
    for (int64_t k = 0; k < q->n; k++) len += q->run[k].hi - q->run[k].lo;
    return len;
}

static void dtr__seq_push(dtr__follow_t *f, dtr__seq_t *q, int64_t lo, int64_t hi) {
    if (hi <= lo || f->nomem) return;
    if (q->n > 0 && q->run[q->n - 1].hi == lo) {
        q->run[q->n - 1].hi = hi;
        return;
    }
    if (q->n == q->cap) {
        int64_t cap = q->cap > 0 ? 2 * q->cap : 4;
        dtr__run_t *run = realloc(q->run, (size_t)cap * sizeof *run);
        if (run == NULL) {
            f->nomem = true;
            return;
        }
        q->run = run;
        q->cap = cap;
    }
    if (++f->runs > DTR__FOLLOW_RUNS_MAX) {
        f->nomem = true;
        return;
    }
    q->run[q->n++] = (dtr__run_t){lo, hi};
}

/* Appends positions [from, from + len) of src to dst. */
static void dtr__seq_take(dtr__follow_t *f, const dtr__seq_t *src, int64_t from, int64_t len,
                          dtr__seq_t *dst) {
    int64_t at = 0;
    for (int64_t k = 0; k < src->n && len > 0; k++) {
        int64_t rl = src->run[k].hi - src->run[k].lo;
        if (at + rl > from) {
            int64_t skip = from > at ? from - at : 0, take = rl - skip < len ? rl - skip : len;
            dtr__seq_push(f, dst, src->run[k].lo + skip, src->run[k].lo + skip + take);
            from += take;
            len -= take;
        }
        at += rl;
    }
}

static void dtr__coord_of(const dtr__follow_t *f, int64_t k, int64_t *coord) {
    for (int i = f->ctx->mdims - 1; i >= 0; i--) {
        coord[i] = 0;
        if (!f->vary[i]) continue;
        coord[i] = k % f->ctx->msize[i];
        k /= f->ctx->msize[i];
    }
}

static int64_t dtr__class_of(const dtr__follow_t *f, const int64_t *coord) {
    int64_t k = 0;
    for (int i = 0; i < f->ctx->mdims; i++)
        if (f->vary[i]) k = k * f->ctx->msize[i] + coord[i];
    return k;
}

static int dtr__coord_text(const dtr__ctx_t *ctx, const int64_t *coord, char *out, size_t len) {
    int w = snprintf(out, len, "(");
    for (int i = 0; i < ctx->mdims && w < (int)len; i++)
        w += snprintf(out + w, len - (size_t)w, "%s%lld", i ? "," : "", (long long)coord[i]);
    if (w < (int)len) w += snprintf(out + w, len - (size_t)w, ")");
    return w;
}

static void dtr__seq_text(const dtr__seq_t *q, char *out, size_t len) {
    int w = 0;
    out[0] = '\0';
    for (int64_t k = 0; k < q->n && k < 3 && w < (int)len; k++)
        w += snprintf(out + w, len - (size_t)w, "%s%lld..%lld", k ? ", " : "",
                      (long long)q->run[k].lo, (long long)q->run[k].hi - 1);
    if (q->n > 3 && w < (int)len) snprintf(out + w, len - (size_t)w, ", ...");
    if (q->n == 0) snprintf(out, len, "none");
}

/* One step on dim d: next from cur. Sets *bad_class (if still < 0) to a class whose gathered
 * pieces are not the chunks the executor places them as. */
static void dtr__follow_step(dtr__follow_t *f, const dtr_step_t *s, int64_t *bad_class) {
    const dtr__ctx_t *ctx = f->ctx;
    int d = f->d, i = s->mesh_dim;
    const dtr__kind_t *kind = dtr__kind_of(s);
    bool gather = kind->gathers && s->tensor_dim == d;
    bool chunk = (kind->chunks && s->tensor_dim == d) || (kind->chunks2 && s->tensor_dim2 == d);
    f->runs = 0;
    for (int64_t k = 0; k < f->nclass; k++) {
        int64_t coord[DTR_MAX_MESH_DIMS];
        dtr__coord_of(f, k, coord);
        f->next[k].n = 0;
        if (gather) {
            int64_t n = ctx->msize[i], total = 0;
            for (coord[i] = 0; coord[i] < n; coord[i]++)
                total += dtr__seq_len(&f->cur[dtr__class_of(f, coord)]);
            for (coord[i] = 0; coord[i] < n; coord[i]++) {
                const dtr__seq_t *piece = &f->cur[dtr__class_of(f, coord)];
                int64_t size, off, len = dtr__seq_len(piece);
                dtr_chunk(total, n, coord[i], &size, &off);
                if (len != size && *bad_class < 0) *bad_class = k;
                dtr__seq_take(f, piece, 0, len, &f->next[k]);
            }
        } else if (chunk) {
            int64_t size, off;
            dtr_chunk(dtr__seq_len(&f->cur[k]), ctx->msize[i], coord[i], &size, &off);
            dtr__seq_take(f, &f->cur[k], off, size, &f->next[k]);
        } else {
            dtr__seq_take(f, &f->cur[k], 0, dtr__seq_len(&f->cur[k]), &f->next[k]);
        }
    }
    dtr__seq_t *t = f->cur;
    f->cur = f->next;
    f->next = t;
}

/* Follows dim d through the plan; fills why on a verdict other than RIGHT. */
static dtr__seed_verdict_t dtr__follow_dim(dtr__follow_t *f, const dtr_spec_t *src,
                                           const dtr_spec_t *dst, const dtr_plan_t *plan,
                                           char *why, size_t len) {
    const dtr__ctx_t *ctx = f->ctx;
    int d = f->d;
    int64_t coord[DTR_MAX_MESH_DIMS], sh[DTR_MAX_TENSOR_DIMS], off[DTR_MAX_TENSOR_DIMS];
    char at[96], held[160], uneven[320] = "";
    for (int64_t k = 0; k < f->nclass; k++) {
        dtr__coord_of(f, k, coord);
        dtr__layout(ctx, src->placements, coord, sh, off);
        dtr__seq_push(f, &f->cur[k], off[d], off[d] + sh[d]);
    }
    for (int j = 0; j < plan->nsteps; j++) {
        const dtr_step_t *s = &plan->steps[j];
        if (!dtr__kind_of(s)->follows) {
            snprintf(why, len, "step %d is an exchange, which the seed has not", j + 1);
            return DTR__SEED_UNDECIDED;
        }
        int64_t bad = -1;
        dtr__follow_step(f, s, &bad);
        if (f->nomem) break;
        for (int64_t k = 0; k < f->nclass && bad < 0; k++) {
            dtr__coord_of(f, k, coord);
            dtr__layout(ctx, s->after, coord, sh, off);
            if (dtr__seq_len(&f->cur[k]) != sh[d]) bad = k;
        }
        if (bad >= 0 && uneven[0] == '\0') {
            dtr__coord_of(f, bad, coord);
            dtr__coord_text(ctx, coord, at, sizeof at);
            snprintf(uneven, sizeof uneven,
                     "after step %d the rank at mesh coordinate %s holds a block of tensor dim %d "
                     "whose length is not the one the executor sizes it by",
                     j + 1, at, d);
        }
    }
    if (f->nomem) {
        snprintf(why, len, "more than %d runs of indices to follow", DTR__FOLLOW_RUNS_MAX);
        return DTR__SEED_UNDECIDED;
    }
    for (int64_t k = 0; k < f->nclass; k++) {
        dtr__coord_of(f, k, coord);
        dtr__layout(ctx, dst->placements, coord, sh, off);
        const dtr__seq_t *q = &f->cur[k];
        if (f->empty && dtr__seq_len(q) == sh[d]) continue; /* no element to misplace */
        if ((sh[d] == 0 && q->n == 0) ||
            (q->n == 1 && q->run[0].lo == off[d] && q->run[0].hi == off[d] + sh[d]))
            continue;
        dtr__coord_text(ctx, coord, at, sizeof at);
        dtr__seq_text(q, held, sizeof held);
        snprintf(why, len,
                 "for this shape the rank at mesh coordinate %s ends with elements %s of tensor "
                 "dim %d where the target places %lld..%lld there",
                 at, held, d, (long long)off[d], (long long)(off[d] + sh[d] - 1));
        return DTR__SEED_MISPLACES;
    }
    if (uneven[0] == '\0' || f->empty) return DTR__SEED_RIGHT;
    snprintf(why, len, "%s", uneven);
    return DTR__SEED_UNEVEN;
}

dtr__seed_verdict_t dtr__seed_follow(const dtr__ctx_t *ctx, const dtr_spec_t *src,
                                     const dtr_spec_t *dst, const dtr_plan_t *plan, char *why,
                                     size_t len) {
    dtr__seed_verdict_t verdict = DTR__SEED_RIGHT;
    bool empty = false;
    for (int d = 0; d < ctx->ndim; d++) empty = empty || ctx->shape[d] == 0;
    for (int d = 0; d < ctx->ndim; d++) {
        dtr__follow_t f;
        memset(&f, 0, sizeof f);
        f.ctx = ctx;
        f.d = d;
        f.nclass = 1;
        f.empty = empty;
        for (int i = 0; i < ctx->mdims; i++) {
            bool shards = src->placements[i].kind == DTR_SHARD && src->placements[i].dim == d;
            for (int j = 0; j < plan->nsteps && !shards; j++)
                shards = plan->steps[j].after[i].kind == DTR_SHARD &&
                         plan->steps[j].after[i].dim == d;
            f.vary[i] = shards && ctx->msize[i] > 1;
            if (f.vary[i]) f.nclass *= ctx->msize[i];
            if (f.nclass > DTR__FOLLOW_CLASSES_MAX) {
                snprintf(why, len, "more than %d mesh coordinate classes to follow",
                         DTR__FOLLOW_CLASSES_MAX);
                return DTR__SEED_UNDECIDED;
            }
        }
        f.cur = calloc((size_t)f.nclass, sizeof *f.cur);
        f.next = calloc((size_t)f.nclass, sizeof *f.next);
        char found[320] = "out of memory following the plan";
        dtr__seed_verdict_t v = DTR__SEED_UNDECIDED;
        if (f.cur != NULL && f.next != NULL)
            v = dtr__follow_dim(&f, src, dst, plan, found, sizeof found);
        for (int64_t k = 0; k < f.nclass; k++) {
            if (f.cur != NULL) free(f.cur[k].run);
            if (f.next != NULL) free(f.next[k].run);
        }
        free(f.cur);
        free(f.next);
        /* A misplaced element anywhere decides; then a dim not followed; then lengths. */
        if (v == DTR__SEED_MISPLACES) {
            snprintf(why, len, "%s", found);
            return v;
        }
        if (v != DTR__SEED_RIGHT && (verdict == DTR__SEED_RIGHT || v == DTR__SEED_UNDECIDED)) {
            verdict = v;
            snprintf(why, len, "%s", found);
        }
    }
    return verdict;
}
