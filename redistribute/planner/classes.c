/*
 * Classes of mesh coordinates: the distinct values that a few linear forms of a rank's
 * coordinates take over the whole mesh, found without visiting every rank.
 *
 * On even layouts (even.c) a rank's block has the same shape everywhere and its offset along
 * each tensor dim is a linear form of its coordinates, so what the planner asks about every
 * rank (how much of its target it already holds, how many pieces it needs) depends on a few
 * such forms: differences of offsets, each of which only matters inside a window (two blocks
 * further apart than their lengths do not meet) or modulo a block length.
 *
 * The search walks the mesh dims that move some form, largest weight first, keeping the set
 * of distinct partial values. A form whose value can no longer reach its window, whatever the
 * remaining dims add, becomes DEAD; the coordinates of one dim that leave every moving form
 * dead or unchanged give one state, not one per coordinate. Largest weight first, a form's
 * window is a few coordinates wide at the dim that moves it, so the states stay few: the
 * work is about the sum of the mesh dims' sizes, not their product.
 *
 * A form with a plateau (values over which the caller's function is flat, one block inside
 * the other) becomes PLATEAU once every completion lands there, likewise; a form with a
 * period (a strided pattern that overhangs the block on both sides) is kept modulo it once
 * every completion lands in its periodic range.
 *
 * Exact: every rank's values are one of the states, and every state is some rank's. Its cost
 * is bounded by `cap` states; past it the caller visits every rank instead.
 */
#include <stdlib.h>
#include <string.h>

#include "redistribute/planner/internal.h"

typedef struct {
    int nforms;
    int64_t n, cap; /* states held, room */
    int64_t *v;     /* n x nforms */
    int64_t *slot;  /* hash slots: index + 1, 0 empty */
    int64_t nslots;
} dtr__set_t;

static uint64_t dtr__hash_state(const int64_t *v, int nforms) {
    uint64_t h = 1469598103934665603ull;
    for (int f = 0; f < nforms; f++) h = (h ^ (uint64_t)v[f]) * 1099511628211ull;
    return h ^ h >> 29;
}

static bool dtr__set_grow(dtr__set_t *s) {
    int64_t cap = s->cap ? 2 * s->cap : 64, nslots = 2 * cap;
    int64_t *v = realloc(s->v, (size_t)(cap * s->nforms) * sizeof *v);
    if (v == NULL) return false;
    s->v = v;
    int64_t *slot = calloc((size_t)nslots, sizeof *slot);
    if (slot == NULL) return false;
    free(s->slot);
    s->slot = slot;
    s->nslots = nslots;
    s->cap = cap;
    for (int64_t k = 0; k < s->n; k++) {
        uint64_t h = dtr__hash_state(s->v + k * s->nforms, s->nforms);
        int64_t j = (int64_t)(h % (uint64_t)nslots);
        while (slot[j] != 0) j = (j + 1) % nslots;
        slot[j] = k + 1;
    }
    return true;
}

/* Adds a state unless it is there; false when out of memory or past max states. */
static bool dtr__set_add(dtr__set_t *s, const int64_t *v, int64_t max) {
    if (s->cap > 0) {
        uint64_t h = dtr__hash_state(v, s->nforms);
        int64_t j = (int64_t)(h % (uint64_t)s->nslots);
        for (; s->slot[j] != 0; j = (j + 1) % s->nslots)
            if (memcmp(s->v + (s->slot[j] - 1) * s->nforms, v,
                       (size_t)s->nforms * sizeof *v) == 0)
                return true;
    }
    if (s->n == max) return false;
    if (s->n == s->cap && !dtr__set_grow(s)) return false;
    memcpy(s->v + s->n * s->nforms, v, (size_t)s->nforms * sizeof *v);
    uint64_t h = dtr__hash_state(v, s->nforms);
    int64_t j = (int64_t)(h % (uint64_t)s->nslots);
    while (s->slot[j] != 0) j = (j + 1) % s->nslots;
    s->slot[j] = ++s->n;
    return true;
}

static void dtr__set_clear(dtr__set_t *s) {
    s->n = 0;
    if (s->slot != NULL) memset(s->slot, 0, (size_t)s->nslots * sizeof *s->slot);
}

static int64_t dtr__floor_div(int64_t a, int64_t b) { /* b > 0 */
    return a / b - (a % b != 0 && a < 0);
}

static int64_t dtr__mod(int64_t a, int64_t m) {
    int64_t r = a % m;
    return r < 0 ? r + m : r;
}

/* The c in [0, n) with lo <= v + c*w <= hi (w != 0), as [*a, *b]; empty when *a > *b. */
static void dtr__alive_range(int64_t v, int64_t w, int64_t lo, int64_t hi, int64_t n, int64_t *a,
                             int64_t *b) {
    int64_t x, y;
    if (w > 0) {
        x = -dtr__floor_div(-(lo - v), w); /* ceil */
        y = dtr__floor_div(hi - v, w);
    } else {
        x = -dtr__floor_div(hi - v, -w); /* c >= ceil((v - hi) / -w) */
        y = dtr__floor_div(v - lo, -w);
    }
    *a = x < 0 ? 0 : x;
    *b = y > n - 1 ? n - 1 : y;
}

typedef struct {
    const dtr__classes_t *c;
    int order[DTR_MAX_MESH_DIMS], ndims; /* the dims that move some form, in walk order */
    int64_t remlo[DTR_MAX_MESH_DIMS + 1][DTR__FORMS_MAX], remhi[DTR_MAX_MESH_DIMS + 1][DTR__FORMS_MAX];
    const int64_t *msize;
    int64_t n; /* the size of the dim at hand */
} dtr__walk_t;

/* A value that no longer moves: DEAD or PLATEAU. */
static bool dtr__settled(int64_t x) { return x == DTR__DEAD || x == DTR__PLATEAU; }

/* Where a live value x of form f stands once the dims from walk position p on are added:
 * DEAD (no completion reaches the window), PLATEAU (every one lands on the plateau), a
 * residue (every one lands in the periodic range: *residue set) or x itself. */
static int64_t dtr__settle(const dtr__walk_t *wk, int p, int f, int64_t x, bool *residue) {
    const dtr__form_t *fm = &wk->c->form[f];
    int64_t lo = x + wk->remlo[p][f], hi = x + wk->remhi[p][f];
    if (fm->windowed && (hi < fm->lo || lo > fm->hi)) return DTR__DEAD;
    if (fm->windowed && fm->plateau && lo >= fm->plo && hi <= fm->phi) return DTR__PLATEAU;
    if (fm->period > 0 && lo >= fm->rlo && hi <= fm->rhi) {
        *residue = true;
        return dtr__mod(x, fm->period);
    }
    return x;
}

/* A form's value after adding c*w at walk position p (DEAD when it can no longer reach its
 * window; a killed state returns false). */
static bool dtr__step_state(const dtr__walk_t *wk, int p, const int64_t *v, int64_t c,
                            int64_t *out) {
    const dtr__classes_t *cl = wk->c;
    int i = wk->order[p];
    int64_t bits = v[cl->nforms];
    for (int f = 0; f < cl->nforms; f++) {
        const dtr__form_t *fm = &cl->form[f];
        int64_t x = v[f];
        if (bits >> f & 1) {
            x = dtr__mod(x + dtr__mod(c * (fm->w[i] % fm->period), fm->period), fm->period);
        } else if (!dtr__settled(x) && fm->w[i] != 0) {
            x += c * fm->w[i];
            if (fm->mod > 0) x = dtr__mod(x, fm->mod);
            bool residue = false;
            x = dtr__settle(wk, p + 1, f, x, &residue);
            if (residue) bits |= (int64_t)1 << f;
        }
        if (x == DTR__DEAD && fm->kill) return false;
        out[f] = x;
    }
    out[cl->nforms] = bits;
    return true;
}

/* Cuts [0, n) of walk position p's dim where a moving form of state v reaches its window,
 * its plateau or its periodic range; returns how many cuts (sorted, 0 and n included). */
static int dtr__cuts(const dtr__walk_t *wk, int p, const int64_t *v, int64_t *cut) {
    const dtr__classes_t *cl = wk->c;
    int i = wk->order[p], nc = 0;
    int64_t n = wk->n;
    cut[nc++] = 0;
    cut[nc++] = n;
    for (int f = 0; f < cl->nforms; f++) {
        const dtr__form_t *fm = &cl->form[f];
        if (dtr__settled(v[f]) || dtr__classes_residue(cl, v, f) || fm->w[i] == 0) continue;
        const int64_t *lo = wk->remlo[p + 1], *hi = wk->remhi[p + 1];
        int64_t ranges[3][2] = {{fm->lo - hi[f], fm->hi - lo[f]},
                                {fm->plo - lo[f], fm->phi - hi[f]},
                                {fm->rlo - lo[f], fm->rhi - hi[f]}};
        bool used[3] = {fm->windowed, fm->windowed && fm->plateau, fm->period > 0};
        for (int r = 0; r < 3; r++) {
            if (!used[r]) continue;
            int64_t a, b;
            dtr__alive_range(v[f], fm->w[i], ranges[r][0], ranges[r][1], n, &a, &b);
            if (a <= b && a > 0) cut[nc++] = a;
            if (a <= b && b + 1 < n) cut[nc++] = b + 1;
        }
    }
    for (int x = 1; x < nc; x++) /* (a few: insertion sort) */
        for (int y = x; y > 0 && cut[y - 1] > cut[y]; y--) {
            int64_t t = cut[y];
            cut[y] = cut[y - 1];
            cut[y - 1] = t;
        }
    return nc;
}

/* Does a form of state v still move when coordinate lo of walk position p's dim is added
 * (the same for the whole segment from lo to the next cut)? */
static bool dtr__moves(const dtr__walk_t *wk, int p, const int64_t *v, int64_t lo) {
    const dtr__classes_t *cl = wk->c;
    int i = wk->order[p];
    for (int f = 0; f < cl->nforms; f++) {
        const dtr__form_t *fm = &cl->form[f];
        if (fm->w[i] == 0) continue;
        if (dtr__classes_residue(cl, v, f)) {
            if (fm->w[i] % fm->period != 0) return true;
            continue;
        }
        if (dtr__settled(v[f])) continue;
        if (fm->mod > 0) {
            if (fm->w[i] % fm->mod != 0) return true;
            continue;
        }
        bool residue = false;
        int64_t x = dtr__settle(wk, p + 1, f, v[f] + lo * fm->w[i], &residue);
        if (residue ? fm->w[i] % fm->period != 0 : !dtr__settled(x)) return true;
    }
    return false;
}

/* State v through walk position p's dim, into next: one state per segment between cuts
 * where nothing moves, one per coordinate where something does. */
static bool dtr__expand(dtr__walk_t *wk, int p, const int64_t *v, dtr__set_t *next, int64_t max) {
    int64_t cut[6 * DTR__FORMS_MAX + 2], st[DTR__FORMS_MAX + 1];
    wk->n = wk->msize[wk->order[p]];
    int nc = dtr__cuts(wk, p, v, cut);
    for (int s = 0; s + 1 < nc; s++) {
        int64_t lo = cut[s], hi = cut[s + 1];
        if (lo >= hi) continue;
        int64_t end = dtr__moves(wk, p, v, lo) ? hi : lo + 1;
        for (int64_t c = lo; c < end; c++)
            if (dtr__step_state(wk, p, v, c, st) && !dtr__set_add(next, st, max)) return false;
    }
    return true;
}

bool dtr__classes_run(const dtr__ctx_t *ctx, dtr__classes_t *cl, int64_t max_states) {
    dtr__walk_t wk;
    memset(&wk, 0, sizeof wk);
    wk.c = cl;
    wk.msize = ctx->msize;
    cl->n = 0;
    cl->v = NULL;
    /* The dims that move forms, largest weight first, each weight relative to its form's
     * window (or modulus), summed over the forms: the dims that settle forms soonest go
     * first (ties: mesh order). */
    double big[DTR_MAX_MESH_DIMS];
    for (int i = 0; i < ctx->mdims; i++) {
        big[i] = 0;
        for (int f = 0; f < cl->nforms; f++) {
            const dtr__form_t *fm = &cl->form[f];
            int64_t w = fm->w[i] < 0 ? -fm->w[i] : fm->w[i];
            if (fm->mod > 0 && w % fm->mod == 0) w = 0;
            double scale = fm->windowed && fm->hi >= fm->lo ? (double)fm->hi - (double)fm->lo + 1
                           : fm->mod > 0                    ? (double)fm->mod
                                                            : 1;
            big[i] += (double)w / scale;
        }
        if (big[i] == 0 || ctx->msize[i] == 1) continue;
        int p = wk.ndims++;
        while (p > 0 && big[wk.order[p - 1]] < big[i]) {
            wk.order[p] = wk.order[p - 1];
            p--;
        }
        wk.order[p] = i;
    }
    for (int p = wk.ndims - 1; p >= 0; p--) {
        int i = wk.order[p];
        for (int f = 0; f < cl->nforms; f++) {
            int64_t span = (ctx->msize[i] - 1) * cl->form[f].w[i];
            wk.remlo[p][f] = wk.remlo[p + 1][f] + (span < 0 ? span : 0);
            wk.remhi[p][f] = wk.remhi[p + 1][f] + (span > 0 ? span : 0);
        }
    }
    int width = cl->nforms + 1; /* the values, then the residue bits */
    dtr__set_t cur = {.nforms = width}, next = {.nforms = width};
    bool ok = true;
    int64_t start[DTR__FORMS_MAX + 1];
    start[cl->nforms] = 0;
    for (int f = 0; f < cl->nforms; f++) {
        const dtr__form_t *fm = &cl->form[f];
        start[f] = 0;
        bool residue = false;
        start[f] = dtr__settle(&wk, 0, f, 0, &residue);
        if (residue) start[cl->nforms] |= (int64_t)1 << f;
        if (start[f] == DTR__DEAD) {
            if (fm->kill) {
                cl->n = 0;
                return true; /* no rank survives */
            }
        }
    }
    ok = dtr__set_add(&cur, start, max_states);
    for (int p = 0; ok && p < wk.ndims; p++) {
        dtr__set_clear(&next);
        for (int64_t k = 0; ok && k < cur.n; k++)
            ok = dtr__expand(&wk, p, cur.v + k * width, &next, max_states);
        dtr__set_t t = cur;
        cur = next;
        next = t;
    }
    free(next.v);
    free(next.slot);
    free(cur.slot);
    if (!ok) {
        free(cur.v);
        return false;
    }
    cl->n = cur.n;
    cl->v = cur.v;
    return true;
}

void dtr__classes_free(dtr__classes_t *cl) {
    free(cl->v);
    cl->v = NULL;
    cl->n = 0;
}
