/*
 * Ragged shards' layouts (dtensor/ragged.c, dtr_spec_layout) against an independent
 * reference, on seeded random specs: 1-3 dim meshes of 2-8 ranks, shapes of 0-3 dims with
 * lengths 0-40 (empty shards, zeros in the sizes), ragged and chunked shards of one tensor
 * dim nested in random shard orders, R and P beside them, every dtype. And the specs
 * dtr_spec_init refuses: the wrong number of sizes, sizes that do not sum to the length they
 * split. DTR_TEST_SEED sets the seed (printed); a failure prints the spec.
 *
 * The reference does not split lengths: it asks, element by element, which coordinate owns
 * index x of tensor dim d at each level of d's shard order (chunk rule: the piece of
 * ceil(len / n) that x falls in; ragged: the running sums of the sizes), and a rank holds the
 * indices whose owners are its coordinates. Its block must be exactly those (contiguous,
 * from global_offset, local_shape long; an empty one at the dim's global length).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"

#define MAX_LEN 40

static uint64_t g_rng;

static uint64_t next(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static int64_t below(int64_t n) { return n <= 0 ? 0 : (int64_t)(next() % (uint64_t)n); }

static uint64_t seed_from_env(void) {
    const char *s = getenv("DTR_TEST_SEED");
    return s != NULL ? strtoull(s, NULL, 0) : 20261201ull;
}

typedef struct {
    int mdims;
    int64_t msize[DTR_MAX_MESH_DIMS];
    dtr_placement_t pl[DTR_MAX_MESH_DIMS];
    int ndim;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int64_t sizes[DTR_MAX_MESH_DIMS][8]; /* the ragged shards' sizes, before dtr copies them */
} draw_t;

/* The mesh dims sharding tensor dim d, in their order ((order, mesh dim) increasing). */
static int sequence(const dtr_placement_t *pl, int m, int d, int *seq) {
    int n = 0;
    for (int k = 0; k < DTR_MAX_MESH_DIMS && n < m; k++)
        for (int i = 0; i < m; i++)
            if (pl[i].kind == DTR_SHARD && pl[i].dim == d && pl[i].order == k) seq[n++] = i;
    return n;
}

/* The coordinate of mesh dim i that owns offset x of a piece of length len. */
static int64_t owner(dtr_placement_t p, int64_t n, int64_t len, int64_t x, int64_t *lo) {
    if (p.nsizes > 0) {
        int64_t at = 0;
        for (int64_t c = 0; c < n; c++) {
            if (x < at + p.sizes[c]) {
                *lo = at;
                return c;
            }
            at += p.sizes[c];
        }
        return -1;
    }
    int64_t size = (len + n - 1) / n;
    *lo = x / size * size;
    return x / size;
}

/* Does the rank at coord hold index x of tensor dim d? (At each level the piece shrinks to
 * the owner's, whose length the next level splits.) */
static bool holds(const draw_t *w, const int64_t *coord, int d, int64_t x) {
    int seq[DTR_MAX_MESH_DIMS], n = sequence(w->pl, w->mdims, d, seq);
    int64_t start = 0, len = w->shape[d];
    for (int k = 0; k < n; k++) {
        int i = seq[k];
        int64_t lo = 0, c = owner(w->pl[i], w->msize[i], len, x - start, &lo);
        if (c != coord[i]) return false;
        /* the owner's piece: from lo, its size */
        int64_t size = w->pl[i].nsizes > 0 ? w->pl[i].sizes[c]
                                           : ((len + w->msize[i] - 1) / w->msize[i]);
        if (lo + size > len) size = len - lo;
        start += lo;
        len = size;
    }
    return true;
}

/* The lengths the mesh dims before level k of d's order leave (all of them equal but the
 * empty ones: *len). */
static bool one_length(const draw_t *w, int d, int k, int64_t *len) {
    int seq[DTR_MAX_MESH_DIMS];
    sequence(w->pl, w->mdims, d, seq);
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, found = -1;
    for (;;) {
        int64_t count = 0;
        /* the indices held at this coordinate after k levels: count them */
        draw_t cut = *w;
        for (int q = k; q < w->mdims; q++)
            if (q < w->mdims) {
                for (int i = 0; i < w->mdims; i++)
                    if (cut.pl[i].kind == DTR_SHARD && cut.pl[i].dim == d && cut.pl[i].order >= k)
                        cut.pl[i] = dtr_replicate();
            }
        for (int64_t x = 0; x < w->shape[d]; x++) count += holds(&cut, coord, d, x);
        if (count > 0 && found > 0 && count != found) return false; /* (empty pieces: any) */
        if (count > 0 || found < 0) found = count;
        int q = k - 1;
        for (; q >= 0; q--) {
            if (++coord[seq[q]] < w->msize[seq[q]]) break;
            coord[seq[q]] = 0;
        }
        if (q < 0) break;
    }
    *len = found;
    return true;
}

static void random_sizes(int64_t *out, int64_t n, int64_t sum) {
    for (int64_t c = 0; c < n; c++) out[c] = 0;
    for (int64_t x = 0; x < sum; x++) out[below(n)]++;
    if (below(3) == 0 && n > 1) { /* a run of zeros, all on one rank */
        out[0] += out[n - 1];
        out[n - 1] = 0;
    }
}

/* A random spec; shard orders random among the mesh dims sharding one tensor dim; a shard
 * ragged with probability 1/2 where the pieces it splits have one length. */
static void draw(draw_t *w) {
    memset(w, 0, sizeof *w);
    int64_t ranks;
    do {
        w->mdims = 1 + (int)below(3);
        ranks = 1;
        for (int i = 0; i < w->mdims; i++) ranks *= (w->msize[i] = 1 + below(4));
    } while (ranks < 2 || ranks > 8);
    w->ndim = (int)below(4);
    for (int d = 0; d < w->ndim; d++) w->shape[d] = below(3) == 0 ? below(3) : below(MAX_LEN + 1);
    for (int i = 0; i < w->mdims; i++) {
        int64_t r = below(6);
        w->pl[i] = w->ndim > 0 && r < 4 ? dtr_shard((int32_t)below(w->ndim))
                   : r == 4             ? dtr_replicate()
                                        : dtr_partial((dtr_reduce_op_t)below(DTR_REDUCE_OP_LAST));
    }
    for (int d = 0; d < w->ndim; d++) { /* a random order of d's mesh dims */
        int dims[DTR_MAX_MESH_DIMS], n = 0;
        for (int i = 0; i < w->mdims; i++)
            if (w->pl[i].kind == DTR_SHARD && w->pl[i].dim == d) dims[n++] = i;
        for (int k = n - 1; k > 0; k--) {
            int j = (int)below(k + 1), t = dims[k];
            dims[k] = dims[j];
            dims[j] = t;
        }
        for (int k = 0; k < n; k++) w->pl[dims[k]].order = n > 1 ? k : 0;
        for (int k = 0; k < n; k++) {
            int64_t len;
            if (below(2) == 0 || !one_length(w, d, k, &len)) continue;
            random_sizes(w->sizes[dims[k]], w->msize[dims[k]], len);
            w->pl[dims[k]].nsizes = (int32_t)w->msize[dims[k]];
            w->pl[dims[k]].sizes = w->sizes[dims[k]];
        }
    }
}

static void describe(const draw_t *w, char *buf, size_t len) {
    char pl[512] = "?", shape[128] = "?";
    dtr_placements_format(w->pl, w->mdims, pl, sizeof pl);
    dtr_shape_format(w->shape, w->ndim, shape, sizeof shape);
    int at = snprintf(buf, len, "mesh ");
    for (int i = 0; i < w->mdims; i++)
        at += snprintf(buf + at, len - (size_t)at, "%s%lld", i ? "x" : "", (long long)w->msize[i]);
    snprintf(buf + at, len - (size_t)at, " shape %s placements %s", shape, pl);
}

/* Every rank's block against the reference; returns false after the first difference. */
static bool check(const draw_t *w, dtr_dtype_t dtype, const char *what) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_create(w->mdims, w->msize, NULL, 0, &mesh), DTR_OK);
    dtr_spec_t spec;
    if (dtr_spec_init(&spec, mesh, w->pl, w->mdims, w->shape, w->ndim, dtype) != DTR_OK) {
        cr_expect_fail("%s: dtr_spec_init: %s", what, dtr_last_error());
        dtr_mesh_destroy(mesh);
        return false;
    }
    int64_t item = dtr_dtype_info(dtype)->size;
    bool ok = true;
    for (int r = 0; ok && r < dtr_mesh_nranks(mesh); r++) {
        int64_t coord[DTR_MAX_MESH_DIMS];
        dtr_mesh_coord(mesh, r, coord);
        dtr_layout_t l;
        cr_assert_eq(dtr_spec_layout(&spec, r, &l), DTR_OK);
        int64_t numel = 1;
        for (int d = 0; ok && d < w->ndim; d++) {
            int seq[DTR_MAX_MESH_DIMS];
            bool sharded = sequence(w->pl, w->mdims, d, seq) > 0;
            int64_t first = -1, count = 0, last = -1;
            for (int64_t x = 0; x < w->shape[d]; x++)
                if (holds(w, coord, d, x)) {
                    if (first < 0) first = x;
                    count++;
                    last = x;
                }
            int64_t off = count == 0 ? (sharded ? w->shape[d] : 0) : first;
            if (count > 0 && last - first + 1 != count) {
                cr_expect_fail("%s: rank %d dim %d: the reference's indices are not one run", what, r, d);
                ok = false;
            }
            if (l.local_shape[d] != count || l.global_offset[d] != off) {
                cr_expect_fail("%s: rank %d dim %d: local %lld at %lld, want %lld at %lld", what, r,
                               d, (long long)l.local_shape[d], (long long)l.global_offset[d],
                               (long long)count, (long long)off);
                ok = false;
            }
            numel *= count;
        }
        if (ok && (l.numel != numel || l.bytes != numel * item)) {
            cr_expect_fail("%s: rank %d: numel %lld bytes %lld, want %lld, %lld", what, r,
                           (long long)l.numel, (long long)l.bytes, (long long)numel,
                           (long long)(numel * item));
            ok = false;
        }
    }
    dtr_mesh_destroy(mesh);
    return ok;
}

Test(ragged_layout, random_specs_hold_what_the_reference_says) {
    uint64_t seed = seed_from_env();
    g_rng = seed | 1;
    printf("ragged_layout: seed %llu (DTR_TEST_SEED)\n", (unsigned long long)seed);
    int cases = 3000, ragged = 0, nested = 0;
    for (int k = 0; k < cases; k++) {
        draw_t w;
        draw(&w);
        int here = 0;
        for (int i = 0; i < w.mdims; i++) here += w.pl[i].nsizes > 0;
        ragged += here > 0;
        for (int i = 0; i < w.mdims; i++)
            nested += w.pl[i].nsizes > 0 && w.pl[i].order > 0;
        char what[768];
        describe(&w, what, sizeof what);
        dtr_dtype_t dtype = (dtr_dtype_t)below(DTR_DTYPE_LAST);
        if (!check(&w, dtype, what)) {
            cr_log_error("seed %llu case %d: %s", (unsigned long long)seed, k, what);
            return;
        }
    }
    printf("ragged_layout: %d specs, %d with ragged shards, %d ragged shards nested after "
           "another\n", cases, ragged, nested);
    cr_expect_gt(ragged, cases / 4, "the draw gives ragged shards");
    cr_expect_gt(nested, 20, "and nested ones");
}

static void expect_refused(const char *mesh_text, const char *shape_text, const char *pl_text,
                           const char *words) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse(mesh_text, NULL, 0, &mesh), DTR_OK);
    dtr_placement_t pl[DTR_MAX_MESH_DIMS];
    int n, ndim;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    cr_assert_eq(dtr_placements_parse(pl_text, pl, DTR_MAX_MESH_DIMS, &n), DTR_OK, "%s",
                 dtr_last_error());
    cr_assert_eq(dtr_shape_parse(shape_text, shape, DTR_MAX_TENSOR_DIMS, &ndim), DTR_OK);
    dtr_spec_t spec;
    memset(&spec, 0x5a, sizeof spec);
    cr_expect_eq(dtr_spec_init(&spec, mesh, pl, n, shape, ndim, DTR_F32),
                 DTR_ERR_INVALID_ARGUMENT, "%s on %s accepted", pl_text, mesh_text);
    cr_expect(strstr(dtr_last_error(), words) != NULL, "%s: error \"%s\" lacks \"%s\"", pl_text,
              dtr_last_error(), words);
    cr_expect_eq(((unsigned char *)&spec)[0], 0x5a, "out written on failure");
    dtr_mesh_destroy(mesh);
}

Test(ragged_layout, specs_with_wrong_sizes_are_refused_naming_the_placement) {
    expect_refused("4", "10x3", "S(0){3,0,5}", "placements[0]: S(0){3,0,5}: 3 sizes for mesh dim 0 of 4 ranks");
    expect_refused("4", "10x3", "S(0){3,0,5,3}", "placements[0]: S(0){3,0,5,3}: sizes sum to 11, but tensor dim 0 has length 10");
    expect_refused("2x2", "10x3", "R,S(1){1,1}", "placements[1]: S(1){1,1}: sizes sum to 2, but tensor dim 1 has length 3");
    /* nested: the second shard splits the first's pieces (5 and 5), not the dim */
    expect_refused("2x2", "10x3", "S(0),S(0){4,2}", "sizes sum to 6, but it splits pieces of length 5");
    /* pieces of two lengths (chunks of 11: 6 and 5) have no one sum */
    expect_refused("2x2", "11x3", "S(0),S(0){3,3}", "but it splits pieces of length 5");
    /* in another order the ragged shard comes first and splits the dim */
    expect_refused("2x2", "10x3", "S(0)[1],S(0)[0]{5,4}", "sizes sum to 9, but tensor dim 0 has length 10");
}

/* An empty piece holds nothing whatever a ragged shard under it says: 10 rows as 10 and 0,
 * then each piece as 7 and 3 (the empty one as nothing). */
Test(ragged_layout, an_empty_piece_takes_any_sizes) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse("2x2", NULL, 0, &mesh), DTR_OK);
    dtr_placement_t pl[2];
    int n;
    cr_assert_eq(dtr_placements_parse("S(0){10,0},S(0){7,3}", pl, 2, &n), DTR_OK);
    int64_t shape[] = {10};
    dtr_spec_t spec;
    cr_assert_eq(dtr_spec_init(&spec, mesh, pl, 2, shape, 1, DTR_F32), DTR_OK, "%s", dtr_last_error());
    int64_t want_size[] = {7, 3, 0, 0}, want_off[] = {0, 7, 10, 10};
    for (int r = 0; r < 4; r++) {
        dtr_layout_t l;
        cr_assert_eq(dtr_spec_layout(&spec, r, &l), DTR_OK);
        cr_expect_eq(l.local_shape[0], want_size[r], "rank %d", r);
        cr_expect_eq(l.global_offset[0], want_off[r], "rank %d", r);
    }
    dtr_mesh_destroy(mesh);
}

Test(ragged_layout, the_spec_keeps_its_own_copy) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse("3", NULL, 0, &mesh), DTR_OK);
    int64_t sizes[] = {4, 0, 6}, shape[] = {10};
    dtr_placement_t p = dtr_shard(0);
    p.nsizes = 3;
    p.sizes = sizes;
    dtr_spec_t spec;
    cr_assert_eq(dtr_spec_init(&spec, mesh, &p, 1, shape, 1, DTR_F32), DTR_OK, "%s",
                 dtr_last_error());
    sizes[0] = 99;
    cr_expect_neq(spec.placements[0].sizes, sizes);
    dtr_layout_t l;
    cr_assert_eq(dtr_spec_layout(&spec, 2, &l), DTR_OK);
    cr_expect_eq(l.local_shape[0], 6);
    cr_expect_eq(l.global_offset[0], 4);
    cr_assert_eq(dtr_spec_layout(&spec, 1, &l), DTR_OK);
    cr_expect_eq(l.local_shape[0], 0);
    cr_expect_eq(l.global_offset[0], 10, "an empty shard sits at the dim's length");
    cr_expect(dtr_spec_ragged(&spec));
    dtr_mesh_destroy(mesh);
}
