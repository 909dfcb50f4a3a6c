/* Changes between meshes, planned, with relabeling, a staging cap and batches
 * (redistribute/planner/cross_relabel.c, cross_rounds.c, cross.c): the relabeled order moves
 * no more than the best of every permutation (and nothing where some permutation moves
 * nothing), on small meshes exactly and on large ones for pure permutations; every round
 * within the cap; a batch moving exactly what its tensors move alone. Seeded; failures print
 * the seed and the case. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/redistribute/planner/cross_fixture.h"

/* The mesh of m's sizes over m's ranks permuted by perm (row-major positions). */
static dtr_mesh_t *permuted(const dtr_mesh_t *m, const int *perm) {
    int64_t sizes[DTR_MAX_MESH_DIMS], coord[DTR_MAX_MESH_DIMS] = {0}, n = dtr_mesh_nranks(m);
    int ranks[64], out[64];
    for (int i = 0; i < dtr_mesh_ndims(m); i++) sizes[i] = dtr_mesh_size(m, i);
    for (int64_t k = 0; k < n; k++) {
        dtr_mesh_rank_at(m, coord, &ranks[k]);
        for (int i = dtr_mesh_ndims(m) - 1; i >= 0; i--) {
            if (++coord[i] < sizes[i]) break;
            coord[i] = 0;
        }
    }
    for (int64_t k = 0; k < n; k++) out[k] = ranks[perm[k]];
    dtr_mesh_t *r = NULL;
    cr_assert_eq(dtr_mesh_create(dtr_mesh_ndims(m), sizes, out, n, &r), DTR_OK);
    return r;
}

/* Steps perm to the next permutation (lexicographic); false after the last. */
static bool next_perm(int *perm, int n) {
    int i = n - 2;
    while (i >= 0 && perm[i] >= perm[i + 1]) i--;
    if (i < 0) return false;
    int j = n - 1;
    while (perm[j] <= perm[i]) j--;
    int t = perm[i];
    perm[i] = perm[j], perm[j] = t;
    for (int a = i + 1, b = n - 1; a < b; a++, b--) t = perm[a], perm[a] = perm[b], perm[b] = t;
    return true;
}

/* The fewest bytes any order of b's mesh moves (planned without relabeling). */
static int64_t best_of_every_order(const dtr_spec_t *a, const dtr_spec_t *b, const char *what) {
    int n = (int)dtr_mesh_nranks(b->mesh), perm[8];
    for (int k = 0; k < n; k++) perm[k] = k;
    int64_t best = INT64_MAX;
    do {
        dtr_mesh_t *m = permuted(b->mesh, perm);
        dtr_spec_t bb = *b;
        bb.mesh = m;
        dtr_cross_plan_t *p = NULL;
        cr_assert_eq(dtr_cross_plan_create(a, &bb, NULL, &p), DTR_OK, "%s: %s", what, dtr_last_error());
        dtr_cross_figures_t f;
        dtr_cross_plan_figures(p, &f);
        if (f.moved_bytes < best) best = f.moved_bytes;
        dtr_cross_plan_destroy(p);
        dtr_mesh_destroy(m);
    } while (next_perm(perm, n));
    return best;
}

/* A random case on up to 6 ranks with a destination mesh of at most 5; in one case of three
 * the destination is the source's own mesh and layout over its ranks in another order (so
 * an order that moves nothing exists). False where the draw makes no valid pair. */
static bool draw_pair(int world, dtr_mesh_t **ma, dtr_mesh_t **mb, dtr_spec_t *a, dtr_spec_t *b) {
    int ndim = 1 + (int)pick(3);
    int64_t shape[3];
    for (int d = 0; d < ndim; d++) shape[d] = (int64_t)pick(11);
    *ma = random_mesh(world, 1 + (int)pick((uint64_t)(world < 5 ? world : 5)));
    bool same = pick(3) == 0;
    int perm[8];
    for (int k = 0; k < 8; k++) perm[k] = k;
    for (int k = (int)dtr_mesh_nranks(*ma) - 1; k > 0; k--) {
        int j = (int)pick((uint64_t)k + 1), t = perm[k];
        perm[k] = perm[j], perm[j] = t;
    }
    *mb = same ? permuted(*ma, perm) : random_mesh(world, 1 + (int)pick(5 < world ? 5 : (uint64_t)world));
    dtr_placement_t pa[3], pb[3];
    for (int i = 0; i < dtr_mesh_ndims(*ma); i++) pa[i] = random_placement(ndim, pick(4) == 0);
    for (int i = 0; i < dtr_mesh_ndims(*mb); i++) pb[i] = same ? pa[i] : random_placement(ndim, false);
    for (int i = 0; same && i < dtr_mesh_ndims(*mb); i++)
        if (pb[i].kind == DTR_PARTIAL) pa[i] = pb[i] = dtr_replicate();
    if (dtr_spec_init(a, *ma, pa, dtr_mesh_ndims(*ma), shape, ndim, DTR_F32) == DTR_OK &&
        dtr_spec_init(b, *mb, pb, dtr_mesh_ndims(*mb), shape, ndim, DTR_F32) == DTR_OK)
        return true;
    dtr_mesh_destroy(*ma);
    dtr_mesh_destroy(*mb);
    return false;
}

Test(cross_relabel, no_order_moves_less_and_a_free_one_is_found) {
    const uint64_t seed = 5826;
    int cases = 0, free_found = 0, saved = 0;
    for (int k = 0; k < 300; k++) {
        rng = seed * 1000003u + (uint64_t)k;
        dtr_mesh_t *ma, *mb;
        dtr_spec_t a, b;
        if (!draw_pair(2 + (int)pick(5), &ma, &mb, &a, &b)) continue;
        char what[512];
        describe(&a, &b, seed, k, what, sizeof what);
        int64_t best = best_of_every_order(&a, &b, what);
        dtr_cross_options_t opts = {.relabel = true};
        dtr_cross_plan_t *p = NULL, *plain = NULL;
        cr_assert_eq(dtr_cross_plan_create(&a, &b, &opts, &p), DTR_OK, "%s: %s", what, dtr_last_error());
        setenv("DTR_CROSS_REDUCE", "source", 1); /* (as a cap plans: no sums at the receivers) */
        cr_assert_eq(dtr_cross_plan_create(&a, &b, NULL, &plain), DTR_OK, "%s", what);
        unsetenv("DTR_CROSS_REDUCE");
        check_tiling(p, what);
        dtr_cross_figures_t f, g;
        dtr_cross_plan_figures(p, &f);
        dtr_cross_plan_figures(plain, &g);
        cr_assert_eq(f.moved_bytes, best, "%s: relabeled moves %lld, the best order %lld", what,
                     (long long)f.moved_bytes, (long long)best);
        cr_assert_eq(f.relabel_saved_bytes, g.moved_bytes - best, "%s", what);
        cr_assert_eq(f.permutation, best == 0 && f.pre_steps == 0 && !p->t[0].has_pre, "%s", what);
        dtr_spec_t got;
        cr_assert_eq(dtr_cross_plan_dst(p, 0, &got), DTR_OK);
        cr_assert_eq(dtr_mesh_nranks(got.mesh), dtr_mesh_nranks(b.mesh), "%s", what);
        free_found += best == 0 && g.moved_bytes > 0;
        saved += f.relabel_saved_bytes > 0;
        cases++;
        dtr_cross_plan_destroy(p);
        dtr_cross_plan_destroy(plain);
        dtr_mesh_destroy(ma);
        dtr_mesh_destroy(mb);
    }
    cr_assert_geq(cases, 200, "only %d cases drawn", cases);
    cr_assert_geq(free_found, 20, "only %d cases where relabeling frees every byte", free_found);
    cr_assert_geq(saved, 40, "only %d cases where relabeling saves bytes", saved);
}

/* Above the exact solver's size: a pure permutation of a 2-d layout, reshaped and shuffled,
 * is found by the greedy order (512 and 1024 ranks). */
Test(cross_relabel, large_pure_permutations_move_nothing) {
    const struct {
        const char *ma, *mb, *from, *to, *shape;
        int n;
    } cases[] = {
        {"16x32", "32x16", "S(0),S(1)", "S(1),S(0)", "64x96", 512},
        {"1024", "32x32", "S(0)", "S(0),S(0)", "3072x2", 1024},
        {"8x64", "64x8", "S(1),R", "R,S(1)", "5x640", 512},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = cases[c].n, *ra = malloc(sizeof *ra * (size_t)n), *rb = malloc(sizeof *rb * (size_t)n);
        rng = 77 + c;
        for (int k = 0; k < n; k++) ra[k] = k;
        for (int k = n - 1; k > 0; k--) {
            int j = (int)pick((uint64_t)k + 1), t = ra[k];
            ra[k] = ra[j], ra[j] = t;
        }
        for (int k = 0; k < n; k++) rb[k] = ra[(k * 7 + 3) % n]; /* another order of the same */
        dtr_mesh_t *a = mesh_of(cases[c].ma, ra, n), *b = mesh_of(cases[c].mb, rb, n);
        dtr_spec_t src = spec_on(a, cases[c].from, cases[c].shape, DTR_BF16);
        dtr_spec_t dst = spec_on(b, cases[c].to, cases[c].shape, DTR_BF16);
        dtr_cross_options_t opts = {.relabel = true};
        dtr_cross_plan_t *p = NULL;
        cr_assert_eq(dtr_cross_plan_create(&src, &dst, &opts, &p), DTR_OK, "%s", dtr_last_error());
        dtr_cross_figures_t f;
        dtr_cross_plan_figures(p, &f);
        cr_expect(f.permutation && f.moved_bytes == 0, "case %zu: %lld bytes move", c, (long long)f.moved_bytes);
        cr_expect_gt(f.relabel_saved_bytes, 0, "case %zu", c);
        dtr_cross_plan_destroy(p);
        dtr_mesh_destroy(a);
        dtr_mesh_destroy(b);
        free(ra);
        free(rb);
    }
}

/* Under a cap: the chunks tile the targets (check_tiling), no rank stages more than the cap
 * in any round, and the bytes and bounds are the uncapped plan's. */
Test(cross_cap, every_round_within_the_cap) {
    const uint64_t seed = 4417;
    int capped = 0;
    for (int k = 0; k < 200; k++) {
        rng = seed * 1000003u + (uint64_t)k;
        dtr_mesh_t *ma, *mb;
        dtr_spec_t a, b;
        if (!draw_pair(2 + (int)pick(5), &ma, &mb, &a, &b)) continue;
        char what[600];
        describe(&a, &b, seed, k, what, sizeof what);
        dtr_cross_options_t opts = {.staging_cap_bytes = 4 + (int64_t)pick(64)};
        snprintf(what + strlen(what), sizeof what - strlen(what), " --staging-cap %lld",
                 (long long)opts.staging_cap_bytes);
        dtr_cross_plan_t *p = NULL, *plain = NULL;
        cr_assert_eq(dtr_cross_plan_create(&a, &b, &opts, &p), DTR_OK, "%s: %s", what, dtr_last_error());
        setenv("DTR_CROSS_REDUCE", "source", 1); /* (as a cap plans: no sums at the receivers) */
        cr_assert_eq(dtr_cross_plan_create(&a, &b, NULL, &plain), DTR_OK, "%s", what);
        unsetenv("DTR_CROSS_REDUCE");
        check_tiling(p, what);
        int64_t load[64];
        for (int r = 0; r < p->nrounds; r++) {
            memset(load, 0, sizeof load);
            for (int64_t j = p->round_first[r]; j < p->round_first[r + 1]; j++) {
                const dtr__xmsg_t *m = &p->msgs[j];
                cr_assert_eq(m->round, r, "%s", what);
                if (m->from == m->to) continue;
                load[m->from] += m->bytes, load[m->to] += m->bytes;
            }
            for (int q = 0; q < 64; q++)
                cr_assert_leq(load[q], opts.staging_cap_bytes, "%s: rank %d stages %lld in round %d",
                              what, q, (long long)load[q], r);
        }
        dtr_cross_figures_t f, g;
        dtr_cross_plan_figures(p, &f);
        dtr_cross_plan_figures(plain, &g);
        cr_assert_eq(f.moved_bytes, g.moved_bytes, "%s", what);
        cr_assert_eq(f.recv_bytes_max, g.recv_bytes_max, "%s", what);
        cr_assert_eq(f.lower_bound_recv_bytes, g.lower_bound_recv_bytes, "%s", what);
        cr_assert_leq(f.staging_bytes_max, opts.staging_cap_bytes, "%s", what);
        cr_assert_eq(f.rounds, p->nrounds, "%s", what);
        capped += f.rounds > 1;
        dtr_cross_plan_destroy(p);
        dtr_cross_plan_destroy(plain);
        dtr_mesh_destroy(ma);
        dtr_mesh_destroy(mb);
    }
    cr_assert_geq(capped, 50, "only %d cases needed more than one round", capped);
}

Test(cross_cap, a_cap_below_one_element_is_refused) {
    dtr_mesh_t *a = mesh_of("2", NULL, 0), *b = mesh_of("2", (int[]){2, 3}, 2);
    dtr_spec_t src = spec_on(a, "S(0)", "8", DTR_F64), dst = spec_on(b, "R", "8", DTR_F64);
    dtr_cross_plan_t *p = (dtr_cross_plan_t *)0x1;
    dtr_cross_options_t opts = {.staging_cap_bytes = 7};
    cr_expect_eq(dtr_cross_plan_create(&src, &dst, &opts, &p), DTR_ERR_UNSUPPORTED);
    cr_expect_str_eq(dtr_last_error(), "dtr_cross_plan_create: opts->staging_cap_bytes: 7, less "
                                       "than one element: nothing could move");
    opts.staging_cap_bytes = -1;
    cr_expect_eq(dtr_cross_plan_create(&src, &dst, &opts, &p), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_cross_plan_create: opts->staging_cap_bytes: -1, must "
                                       "be >= 0 (0: no cap)");
    cr_expect_eq(p, (dtr_cross_plan_t *)0x1, "out written on failure");
    opts.staging_cap_bytes = 8; /* one element: every chunk one element, 16 rounds */
    cr_assert_eq(dtr_cross_plan_create(&src, &dst, &opts, &p), DTR_OK, "%s", dtr_last_error());
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(p, &f);
    cr_expect_eq(f.messages, 16);
    cr_expect_eq(f.rounds, 8, "each sender sends one element a round, to each receiver in turn");
    cr_expect_eq(f.staging_bytes_max, 8);
    dtr_cross_plan_destroy(p);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}

/* The reduced blocks of tensors alive in the same round do not share scratch, and all lie
 * within the plan's mid_bytes. */
static void check_mids(const dtr_cross_plan_t *p, const char *what) {
    for (int a = 0; a < p->ntensors; a++) {
        const dtr__xtensor_t *x = &p->t[a];
        if (!x->has_pre) continue;
        dtr_layout_t la;
        int64_t zero[DTR_MAX_MESH_DIMS] = {0};
        dtr_spec_layout_at(&x->mid, zero, &la);
        cr_assert_leq(x->mid_offset + la.bytes, p->mid_bytes, "%s: tensor %d's block", what, a);
        for (int b = 0; b < a; b++) {
            const dtr__xtensor_t *y = &p->t[b];
            dtr_layout_t lb;
            if (!y->has_pre || x->last < y->round || y->last < x->round) continue;
            dtr_spec_layout_at(&y->mid, zero, &lb);
            cr_assert(x->mid_offset >= y->mid_offset + lb.bytes || y->mid_offset >= x->mid_offset + la.bytes,
                      "%s: tensors %d and %d (rounds %d..%d, %d..%d) share scratch", what, a, b,
                      x->round, x->last, y->round, y->last);
        }
    }
}

/* A batch moves exactly its tensors' bytes and messages, each target at its bound; with a
 * cap (every other batch) its chunks tile the targets and its reduced blocks never share
 * scratch while alive. */
Test(cross_batch, a_batch_moves_what_its_tensors_move) {
    const uint64_t seed = 9013;
    int batches = 0;
    for (int k = 0; k < 120; k++) {
        rng = seed * 1000003u + (uint64_t)k;
        int world = 2 + (int)pick(6), n = 1 + (int)pick(5);
        dtr_mesh_t *ma = random_mesh(world, 1 + (int)pick((uint64_t)world));
        dtr_mesh_t *mb = random_mesh(world, 1 + (int)pick((uint64_t)world));
        dtr_spec_t a[5], b[5];
        int got = 0;
        int64_t moved = 0, messages = 0;
        /* (a batch under a cap, every other one, reduces every Partial on the source mesh) */
        if (k % 2) setenv("DTR_CROSS_REDUCE", "source", 1);
        for (int t = 0; t < 8 && got < n; t++) {
            int ndim = (int)pick(3);
            int64_t shape[2] = {(int64_t)pick(9), (int64_t)pick(9)};
            dtr_placement_t pa[3], pb[3];
            for (int i = 0; i < dtr_mesh_ndims(ma); i++) pa[i] = random_placement(ndim, true);
            for (int i = 0; i < dtr_mesh_ndims(mb); i++) pb[i] = random_placement(ndim, false);
            dtr_dtype_t dt = pick(2) ? DTR_F32 : DTR_BF16;
            if (dtr_spec_init(&a[got], ma, pa, dtr_mesh_ndims(ma), shape, ndim, dt) != DTR_OK ||
                dtr_spec_init(&b[got], mb, pb, dtr_mesh_ndims(mb), shape, ndim, dt) != DTR_OK)
                continue;
            dtr_cross_plan_t *one = NULL;
            if (dtr_cross_plan_create(&a[got], &b[got], NULL, &one) != DTR_OK) continue;
            dtr_cross_figures_t f;
            dtr_cross_plan_figures(one, &f);
            moved += f.moved_bytes, messages += f.messages;
            dtr_cross_plan_destroy(one);
            got++;
        }
        unsetenv("DTR_CROSS_REDUCE");
        char what[128];
        snprintf(what, sizeof what, "seed %llu case %d (%d tensors)", (unsigned long long)seed, k, got);
        if (got > 0) {
            dtr_cross_plan_t *p = NULL;
            dtr_cross_options_t opts = {.staging_cap_bytes = k % 2 ? 8 + (int64_t)pick(120) : 0};
            cr_assert_eq(dtr_cross_plan_create_batch(got, a, b, &opts, &p), DTR_OK, "%s: %s", what,
                         dtr_last_error());
            check_tiling(p, what);
            check_mids(p, what);
            dtr_cross_figures_t f;
            dtr_cross_plan_figures(p, &f);
            cr_assert_eq(dtr_cross_plan_tensors(p), got, "%s", what);
            cr_assert_eq(f.moved_bytes, moved, "%s", what);
            if (opts.staging_cap_bytes == 0) cr_assert_eq(f.messages, messages, "%s", what);
            cr_assert_eq(f.recv_bytes_max, f.lower_bound_recv_bytes, "%s", what);
            cr_assert_geq(f.send_bytes_max, f.lower_bound_send_bytes, "%s", what);
            dtr_cross_plan_destroy(p);
            batches++;
        }
        dtr_mesh_destroy(ma);
        dtr_mesh_destroy(mb);
    }
    cr_assert_geq(batches, 100, "only %d batches planned", batches);
}

Test(cross_batch, refusals_name_the_entry) {
    dtr_mesh_t *a = mesh_of("2", NULL, 0), *a2 = mesh_of("2", (int[]){1, 0}, 2);
    dtr_mesh_t *b = mesh_of("2", (int[]){2, 3}, 2);
    dtr_spec_t src[2] = {spec_on(a, "S(0)", "4", DTR_F32), spec_on(a2, "S(0)", "4", DTR_F32)};
    dtr_spec_t dst[2] = {spec_on(b, "R", "4", DTR_F32), spec_on(b, "R", "4", DTR_F32)};
    dtr_cross_plan_t *p = (dtr_cross_plan_t *)0x1;
    cr_expect_eq(dtr_cross_plan_create_batch(2, src, dst, NULL, &p), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_cross_plan_create_batch: src[1]: on another mesh than "
                                       "src[0]: a batch moves tensors between the same two meshes");
    src[1] = spec_on(a, "S(0)", "4", DTR_F32);
    dst[1] = spec_on(b, "R", "5", DTR_F32);
    cr_expect_eq(dtr_cross_plan_create_batch(2, src, dst, NULL, &p), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_cross_plan_create_batch: dst[1]: shape 5 differs from "
                                       "src[1]'s 4");
    cr_expect_eq(dtr_cross_plan_create_batch(0, src, dst, NULL, &p), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_cross_plan_create_batch: n: 0, must be 1..16777216");
    cr_expect_eq(p, (dtr_cross_plan_t *)0x1, "out written on failure");
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(a2);
    dtr_mesh_destroy(b);
}

/* Tensor k's line of a cross plan's text ("tensor k: ..."), without its index. */
static void tensor_line(const dtr_cross_plan_t *p, int k, char *out, size_t cap) {
    char *text = NULL, want[32];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_eq(dtr_cross_plan_print(p, 0, f), DTR_OK, "%s", dtr_last_error());
    fclose(f);
    snprintf(want, sizeof want, "  tensor %d: ", k);
    const char *at = strstr(text, want);
    cr_assert_not_null(at, "no '%s' in:\n%s", want, text);
    at += strlen(want);
    size_t n = strcspn(at, "\n");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), at);
    free(text);
}

/* A batch of a few distinct tensors repeated in any order (a model's layers): every tensor
 * makes the choice it makes alone (its reduction on the source mesh, its cast), shared by its
 * repeats, and the batch moves what its tensors move alone. */
Test(cross_batch, repeated_tensors_share_their_choice) {
    dtr_mesh_t *a = mesh_of("2x2", NULL, 0), *b = mesh_of("3", (int[]){5, 4, 3}, 3);
    const char *from[5] = {"S(0),P", "P,P", "R,S(1)", "S(0),P", "P,S(0)"};
    const char *to[5] = {"S(1)", "S(0)", "R", "S(1)", "S(1)"};
    const char *shape[5] = {"12x8", "9x5", "4x4", "12x8", "7x3"};
    dtr_dtype_t from_dt[5] = {DTR_F32, DTR_F64, DTR_BF16, DTR_F32, DTR_F32};
    dtr_dtype_t to_dt[5] = {DTR_F32, DTR_F32, DTR_BF16, DTR_BF16, DTR_F64};
    enum { N = 37 };
    dtr_spec_t src[N], dst[N];
    int kind[N];
    int64_t moved = 0;
    uint64_t seed = 11;
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        kind[i] = (int)((seed >> 33) % 5);
        src[i] = spec_on(a, from[kind[i]], shape[kind[i]], from_dt[kind[i]]);
        dst[i] = spec_on(b, to[kind[i]], shape[kind[i]], to_dt[kind[i]]);
    }
    dtr_cross_plan_t *p = NULL;
    cr_assert_eq(dtr_cross_plan_create_batch(N, src, dst, NULL, &p), DTR_OK, "%s", dtr_last_error());
    /* alone: beside a tensor of another kind (a batch of one prints no tensor lines) */
    dtr_spec_t pair_src[2] = {src[0], spec_on(a, "R,R", "2", DTR_F32)};
    dtr_spec_t pair_dst[2] = {dst[0], spec_on(b, "R", "2", DTR_F32)};
    for (int i = 0; i < N; i++) {
        dtr_cross_plan_t *one = NULL, *pair = NULL;
        cr_assert_eq(dtr_cross_plan_create(&src[i], &dst[i], NULL, &one), DTR_OK, "%s",
                     dtr_last_error());
        dtr_cross_figures_t f;
        dtr_cross_plan_figures(one, &f);
        moved += f.moved_bytes;
        pair_src[0] = src[i], pair_dst[0] = dst[i];
        cr_assert_eq(dtr_cross_plan_create_batch(2, pair_src, pair_dst, NULL, &pair), DTR_OK,
                     "%s", dtr_last_error());
        char alone[512], in_batch[512];
        tensor_line(pair, 0, alone, sizeof alone);
        tensor_line(p, i, in_batch, sizeof in_batch);
        cr_expect_str_eq(in_batch, alone, "tensor %d (kind %d)", i, kind[i]);
        dtr_cross_plan_destroy(one);
        dtr_cross_plan_destroy(pair);
    }
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(p, &f);
    cr_expect_eq(f.moved_bytes, moved);
    check_mids(p, "repeated tensors");
    dtr_cross_plan_destroy(p);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}
