/*
 * Coordinates that stand for every rank (internal.h, dtr__reps_t), for the per-rank loops
 * over layouts that are not even.
 *
 * Under PyTorch's chunk rule a mesh dim's coordinate c gives, at each level of a tensor
 * dim's shard order, a chunk whose length depends only on c and the parent's length: full
 * chunks, one shorter, empty ones. Two coordinates that give the same length for every
 * parent length the level can see (its signature) give every rank the same block lengths
 * at every level below as well; only the blocks' offsets differ. A rank figure that reads
 * no offset along the tensor dims a mesh dim splits is then the same at both, so one
 * coordinate per signature stands for all (a handful: full, shorter, empty, per parent
 * length) instead of the mesh dim's size. Mesh dims whose offsets matter (the caller's
 * positional mask) keep every coordinate.
 */
#include <string.h>

#include "redistribute/planner/internal.h"

#define DTR__PARENTS_MAX 8  /* parent lengths one level can see, at most */
#define DTR__SIG_MAX 32     /* lengths in one coordinate's signature, at most */

/* Length of chunk c of a parent of length len split n ways. */
static int64_t dtr__chunk_len(int64_t len, int64_t n, int64_t c) {
    int64_t chunk = len / n + (len % n != 0), start = chunk * c;
    return start >= len ? 0 : (start + chunk < len ? chunk : len - start);
}

/* The signature parts of mesh dim i in one layout: for each tensor dim it splits, the
 * parent lengths its level can see (into par, *np of them). False when too many. */
static bool dtr__parents(const dtr__ctx_t *ctx, const dtr_placement_t *pl, int i, int64_t *par,
                         int *np) {
    *np = 0;
    if (pl[i].kind != DTR_SHARD) return true;
    int dims[DTR_MAX_MESH_DIMS], d = pl[i].dim;
    int k = dtr__shard_seq(pl, ctx->mdims, d, dims);
    int64_t lens[DTR__PARENTS_MAX] = {ctx->shape[d]};
    int nl = 1;
    for (int q = 0; q < k && dims[q] != i; q++) { /* the lengths each level below can see */
        int64_t n = ctx->msize[dims[q]], next[DTR__PARENTS_MAX];
        int nn = 0;
        for (int a = 0; a < nl; a++) {
            int64_t chunk = lens[a] / n + (lens[a] % n != 0);
            int64_t cand[2] = {chunk, chunk > 0 ? lens[a] - lens[a] / chunk * chunk : 0};
            for (int b = 0; b < 2; b++) {
                if (cand[b] == 0) continue;
                bool seen = false;
                for (int e = 0; e < nn; e++) seen = seen || next[e] == cand[b];
                if (seen) continue;
                if (nn == DTR__PARENTS_MAX) return false;
                next[nn++] = cand[b];
            }
        }
        memcpy(lens, next, sizeof next);
        nl = nn;
    }
    memcpy(par, lens, (size_t)nl * sizeof *lens);
    *np = nl;
    return true;
}

void dtr__reps_init(const dtr__ctx_t *ctx, const dtr_placement_t *const *layouts, int nlayouts,
                    unsigned positional, dtr__reps_t *r) {
    memset(r, 0, sizeof *r);
    for (int i = 0; i < ctx->mdims; i++) {
        int64_t n = ctx->msize[i];
        r->all[i] = true;
        if (positional >> i & 1 || n == 1 || dtr__even_off) continue;
        /* The parent lengths of every layout's level at i: the signature's positions. */
        int64_t par[DTR__SIG_MAX], split[DTR__SIG_MAX];
        int nsig = 0;
        bool ok = true;
        for (int l = 0; l < nlayouts && ok; l++) {
            int64_t p[DTR__PARENTS_MAX];
            int np;
            ok = dtr__parents(ctx, layouts[l], i, p, &np) && nsig + np <= DTR__SIG_MAX;
            for (int a = 0; ok && a < np; a++) {
                par[nsig] = p[a];
                split[nsig++] = n;
            }
        }
        if (!ok) continue;
        /* A signature changes only where some parent's full chunks end: at full and
         * full + 1 (its shorter chunk, then the empty ones). */
        int64_t starts[2 * DTR__SIG_MAX + 1] = {0};
        int ns = 1;
        for (int a = 0; a < nsig; a++) {
            if (par[a] == 0) continue; /* (every chunk empty) */
            int64_t chunk = par[a] / n + (par[a] % n != 0), full = par[a] / chunk;
            for (int64_t b = full; b <= full + 1; b++) {
                if (b >= n) continue;
                int e = ns;
                while (e > 0 && starts[e - 1] > b) e--;
                if (e > 0 && starts[e - 1] == b) continue;
                memmove(starts + e + 1, starts + e, (size_t)(ns - e) * sizeof *starts);
                starts[e] = b;
                ns++;
            }
        }
        /* One coordinate per distinct signature, the first that has it. */
        int64_t sig[DTR__REPS_MAX][DTR__SIG_MAX];
        int nrep = 0;
        for (int x = 0; x < ns && ok; x++) {
            int64_t c = starts[x];
            int64_t mine[DTR__SIG_MAX];
            for (int a = 0; a < nsig; a++) mine[a] = dtr__chunk_len(par[a], split[a], c);
            bool seen = false;
            for (int e = 0; e < nrep && !seen; e++)
                seen = memcmp(sig[e], mine, (size_t)nsig * sizeof *mine) == 0;
            if (seen) continue;
            if (nrep == DTR__REPS_MAX) {
                ok = false;
                break;
            }
            memcpy(sig[nrep], mine, (size_t)nsig * sizeof *mine);
            r->c[i][nrep++] = c;
        }
        if (!ok) continue;
        r->all[i] = false;
        r->n[i] = nrep;
    }
}

void dtr__reps_first(const dtr__ctx_t *ctx, const dtr__reps_t *r, int64_t *coord) {
    for (int i = 0; i < ctx->mdims; i++) coord[i] = r->all[i] ? 0 : r->c[i][0];
}

bool dtr__reps_next(const dtr__ctx_t *ctx, const dtr__reps_t *r, const bool *vary,
                    int64_t *coord, int64_t *at) {
    for (int i = ctx->mdims - 1; i >= 0; i--) {
        if (!vary[i]) continue;
        if (r->all[i]) {
            if (++coord[i] < ctx->msize[i]) return true;
            coord[i] = 0;
        } else {
            if (++at[i] < r->n[i]) {
                coord[i] = r->c[i][at[i]];
                return true;
            }
            at[i] = 0;
            coord[i] = r->c[i][0];
        }
    }
    return false;
}

/* The mesh dims (of more than one rank) splitting tensor dim d, in its shard order. */
static int dtr__splits(const dtr__ctx_t *ctx, const dtr_placement_t *pl, int d, int *dims) {
    int all[DTR_MAX_MESH_DIMS], k = dtr__shard_seq(pl, ctx->mdims, d, all), n = 0;
    for (int q = 0; q < k; q++)
        if (ctx->msize[all[q]] > 1) dims[n++] = all[q];
    return n;
}

unsigned dtr__both_split(const dtr__ctx_t *ctx, const dtr_placement_t *a, const dtr_placement_t *b) {
    unsigned mask = 0;
    for (int d = 0; d < ctx->ndim; d++) {
        int da[DTR_MAX_MESH_DIMS], db[DTR_MAX_MESH_DIMS];
        int ka = dtr__splits(ctx, a, d, da), kb = dtr__splits(ctx, b, d, db);
        /* Split the same way: every rank's two blocks coincide along d. */
        if (ka == 0 || kb == 0 || (ka == kb && memcmp(da, db, (size_t)ka * sizeof *da) == 0))
            continue;
        for (int q = 0; q < ka; q++) mask |= 1u << da[q];
        for (int q = 0; q < kb; q++) mask |= 1u << db[q];
    }
    return mask;
}
