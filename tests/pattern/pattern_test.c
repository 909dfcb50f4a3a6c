/*
 * The fills and the check of pattern: the random fill's draws (reproducible, in
 * range, different per seed and per contribution), the check's reference and tolerance at
 * their edges (a result one tolerance off passes, a little more fails; integers and moves
 * exact), given blocks loaded from files, and the errors.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "numeric/numeric.h"
#include "dtr.h"
#include "tests/support/spec_fixture.h"
#include "pattern/pattern.h"

static const dtr_fill_t random7 = {.kind = DTR_FILL_RANDOM, .seed = 7};

/* Every rank's contribution of a P(op) source on a 1-d mesh of n, as doubles. */
static void contributions(int n, dtr_reduce_op_t op, dtr_dtype_t dtype, const dtr_fill_t *fill,
                          int64_t numel, double *v /* [n][numel] */) {
    char mesh[16], shape[32], pl[16];
    snprintf(mesh, sizeof mesh, "%d", n);
    snprintf(shape, sizeof shape, "%lld", (long long)numel);
    snprintf(pl, sizeof pl, "P(%s)", dtr_reduce_op_name(op));
    dtr_mesh_t *m = mesh_of(mesh);
    dtr_spec_t s;
    spec_of(&s, m, pl, shape, dtype);
    unsigned char buf[8 * 256];
    for (int r = 0; r < n; r++) {
        size_t bytes = (size_t)numel * (size_t)dtr_dtype_info(dtype)->size;
        cr_assert_eq(dtr_fill(&s, fill, r, buf, bytes), DTR_OK, "%s", dtr_last_error());
        for (int64_t k = 0; k < numel; k++) v[r * numel + k] = dtr__load(dtype, buf, k);
    }
    dtr_mesh_destroy(m);
}

Test(fill, random_is_reproducible_and_seeded) {
    double a[4 * 64], b[4 * 64], c[4 * 64];
    contributions(4, DTR_REDUCE_SUM, DTR_F32, &random7, 64, a);
    contributions(4, DTR_REDUCE_SUM, DTR_F32, &random7, 64, b);
    dtr_fill_t other = {.kind = DTR_FILL_RANDOM, .seed = 8};
    contributions(4, DTR_REDUCE_SUM, DTR_F32, &other, 64, c);
    cr_assert(memcmp(a, b, sizeof a) == 0, "one seed, two fills: different values");
    int same = 0, same_rank = 0;
    for (int k = 0; k < 4 * 64; k++) same += a[k] == c[k];
    for (int k = 0; k < 64; k++) same_rank += a[k] == a[64 + k];
    cr_assert_lt(same, 4, "seeds 7 and 8 share %d of 256 values", same);
    cr_assert_lt(same_rank, 2, "ranks 0 and 1 share %d of 64 contributions", same_rank);
}

Test(fill, random_ranges) {
    /* floats: +-(1+f) 2^E, E in [-6, 6]; both signs; f16 with 8 contributions E <= 6 */
    double v[8 * 256];
    contributions(8, DTR_REDUCE_SUM, DTR_F16, &random7, 256, v);
    int neg = 0;
    for (int k = 0; k < 8 * 256; k++) {
        double a = fabs(v[k]);
        cr_assert(a >= 0x1p-6 && a <= 0x1p7, "f16 value %g out of range", v[k]);
        neg += v[k] < 0;
    }
    cr_assert(neg > 700 && neg < 1350, "%d of 2048 negative", neg);
    /* products: magnitudes 2^s, |s| <= 1 */
    contributions(4, DTR_REDUCE_PRODUCT, DTR_F32, &random7, 256, v);
    for (int k = 0; k < 4 * 256; k++)
        cr_assert(fabs(v[k]) >= 0.5 && fabs(v[k]) <= 2.0, "product factor %g", v[k]);
    /* u8 sums over 8: at most 255 / 8 each, so no sum wraps */
    contributions(8, DTR_REDUCE_SUM, DTR_U8, &random7, 256, v);
    int big = 0;
    for (int k = 0; k < 8 * 256; k++) {
        cr_assert(v[k] >= 0 && v[k] <= 31, "u8 contribution %g", v[k]);
        big += v[k] >= 24;
    }
    cr_assert_gt(big, 100, "the u8 draws do not reach the top of their range");
    /* i32 max: the whole range */
    contributions(2, DTR_REDUCE_MAX, DTR_I32, &random7, 256, v);
    int wide = 0;
    for (int k = 0; k < 2 * 256; k++) wide += fabs(v[k]) > 1e9;
    cr_assert_gt(wide, 100, "i32 max draws are not over the whole range");
}

/* P(sum) -> R on a mesh of 4: the check's tolerance is (n + 1) u sum|x|, n = 4. */
Test(check, tolerance_edges) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t src, dst;
    spec_of(&src, m, "P", "64", DTR_F32);
    spec_of(&dst, m, "R", "64", DTR_F32);
    double v[4 * 64];
    contributions(4, DTR_REDUCE_SUM, DTR_F32, &random7, 64, v);
    float out[64];
    long double sums[64], mags[64];
    for (int k = 0; k < 64; k++) {
        sums[k] = mags[k] = 0;
        for (int r = 0; r < 4; r++) {
            sums[k] += v[r * 64 + k];
            mags[k] += fabsl((long double)v[r * 64 + k]);
        }
        out[k] = (float)sums[k];
    }
    dtr_pattern_report_t rep;
    cr_assert_eq(dtr_fill_check(&src, &dst, &random7, 1, out, sizeof out, &rep), DTR_OK);
    cr_assert_eq(rep.mismatches, 0);
    cr_assert_eq(rep.checked, 64);
    cr_assert_eq(rep.tolerance, 5 * 0x1p-24);
    cr_assert_eq(rep.unit, 0x1p-24);
    cr_assert(rep.sum_scale);
    cr_assert_leq(rep.worst, 0x1p-24, "a correctly rounded sum is off %g u", rep.worst / 0x1p-24);
    /* off by 4.9 u sum|x| passes; off by 6 u sum|x| fails, on that element alone */
    out[3] = (float)(sums[3] + 4.9L * 0x1p-24L * mags[3]);
    cr_assert_eq(dtr_fill_check(&src, &dst, &random7, 1, out, sizeof out, &rep), DTR_OK);
    cr_assert_eq(rep.mismatches, 0, "4.9 u sum|x| refused (worst %g u)", rep.worst / 0x1p-24);
    out[3] = (float)(sums[3] + 6.5L * 0x1p-24L * mags[3]);
    cr_assert_eq(dtr_fill_check(&src, &dst, &random7, 1, out, sizeof out, &rep), DTR_OK);
    cr_assert_eq(rep.mismatches, 1);
    cr_assert_eq(rep.first, 3);
    cr_assert_eq(rep.want, (double)sums[3]);
    /* the same sum rounded through bf16 on the way (a precision lost) fails */
    for (int k = 0; k < 64; k++) out[k] = (float)sums[k];
    uint16_t h = dtr__f32_to_bf16(out[10]);
    out[10] = dtr__bf16_to_f32(h) + (dtr__bf16_to_f32(h) == out[10] ? 0x1p-10f * out[10] : 0);
    cr_assert_eq(dtr_fill_check(&src, &dst, &random7, 1, out, sizeof out, &rep), DTR_OK);
    cr_assert_eq(rep.mismatches, 1);
    dtr_mesh_destroy(m);
}

/* Integer sums and moves compare exactly: one unit off fails. */
Test(check, integers_and_moves_exact) {
    dtr_mesh_t *m = mesh_of("2");
    dtr_spec_t src, dst, sh;
    spec_of(&src, m, "P", "16", DTR_I64);
    spec_of(&dst, m, "R", "16", DTR_I64);
    int64_t in[2][16], out[16];
    for (int r = 0; r < 2; r++) cr_assert_eq(dtr_fill(&src, &random7, r, in[r], sizeof in[r]), DTR_OK);
    for (int k = 0; k < 16; k++) out[k] = in[0][k] + in[1][k];
    dtr_pattern_report_t rep;
    cr_assert_eq(dtr_fill_check(&src, &dst, &random7, 0, out, sizeof out, &rep), DTR_OK);
    cr_assert_eq(rep.mismatches, 0);
    cr_assert_eq(rep.tolerance, 0);
    out[5] += 1;
    cr_assert_eq(dtr_fill_check(&src, &dst, &random7, 0, out, sizeof out, &rep), DTR_OK);
    cr_assert_eq(rep.mismatches, 1);
    /* a move of f32 values: exact, one ulp off fails */
    spec_of(&sh, m, "S(0)", "16", DTR_F32);
    spec_of(&dst, m, "R", "16", DTR_F32);
    float piece[2][8], all[16];
    for (int r = 0; r < 2; r++) cr_assert_eq(dtr_fill(&sh, &random7, r, piece[r], sizeof piece[r]), DTR_OK);
    memcpy(all, piece[0], sizeof piece[0]);
    memcpy(all + 8, piece[1], sizeof piece[1]);
    cr_assert_eq(dtr_fill_check(&sh, &dst, &random7, 1, all, sizeof all, &rep), DTR_OK);
    cr_assert_eq(rep.mismatches, 0);
    cr_assert_eq(rep.tolerance, 0);
    all[9] = nextafterf(all[9], INFINITY);
    cr_assert_eq(dtr_fill_check(&sh, &dst, &random7, 1, all, sizeof all, &rep), DTR_OK);
    cr_assert_eq(rep.mismatches, 1);
    cr_assert_eq(rep.first, 9);
    dtr_mesh_destroy(m);
}

/* Given blocks: written as --dump writes them, loaded back, checked; and their errors. */
Test(given, load_check_and_errors) {
    char dir[] = "/tmp/dtr_pattern_test_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    dtr_mesh_t *m = mesh_of("2x2");
    dtr_spec_t src, dst;
    spec_of(&src, m, "P,S(0)", "6x2", DTR_F64);
    spec_of(&dst, m, "R,R", "6x2", DTR_F64);
    double blocks[4][6];
    char path[128];
    for (int r = 0; r < 4; r++) {
        cr_assert_eq(dtr_fill(&src, &random7, r, blocks[r], sizeof blocks[r]), DTR_OK);
        snprintf(path, sizeof path, "%s/rank%d.in", dir, r);
        FILE *f = fopen(path, "wb");
        cr_assert_eq(fwrite(blocks[r], 1, sizeof blocks[r], f), sizeof blocks[r]);
        fclose(f);
    }
    dtr_fill_blocks_t *b = NULL;
    cr_assert_eq(dtr_fill_load(&src, dir, "in", &b), DTR_OK, "%s", dtr_last_error());
    dtr_fill_t given = {.kind = DTR_FILL_GIVEN, .given = b};
    double one[6];
    cr_assert_eq(dtr_fill(&src, &given, 3, one, sizeof one), DTR_OK);
    cr_assert(memcmp(one, blocks[3], sizeof one) == 0, "the given fill is not rank 3's file");
    double out[12];
    for (int k = 0; k < 12; k++) out[k] = blocks[k / 6][k % 6] + blocks[2 + k / 6][k % 6];
    dtr_pattern_report_t rep;
    cr_assert_eq(dtr_fill_check(&src, &dst, &given, 2, out, sizeof out, &rep), DTR_OK);
    cr_assert_eq(rep.mismatches, 0, "first %lld: got %g want %g", (long long)rep.first, rep.got, rep.want);
    /* a spec of another shape: refused, naming the fill */
    dtr_spec_t other;
    spec_of(&other, m, "P,S(0)", "8x2", DTR_F64);
    double big[8];
    cr_assert_eq(dtr_fill(&other, &given, 0, big, sizeof big), DTR_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(dtr_last_error(), "dtr_fill: fill: the given blocks were loaded for another shape or dtype"),
              "%s", dtr_last_error());
    dtr_fill_blocks_destroy(b);
    /* a file one element short */
    snprintf(path, sizeof path, "%s/rank1.in", dir);
    cr_assert_eq(truncate(path, 40), 0);
    b = (dtr_fill_blocks_t *)1;
    cr_assert_eq(dtr_fill_load(&src, dir, "in", &b), DTR_ERR_INVALID_ARGUMENT);
    cr_assert_null(b);
    cr_assert(strstr(dtr_last_error(), "rank1.in' holds 40 bytes, but rank 1's block is 48 bytes"),
              "%s", dtr_last_error());
    cr_assert_eq(dtr_fill_read(dir, "in", 1, one, sizeof one), DTR_ERR_INVALID_ARGUMENT);
    unlink(path);
    cr_assert_eq(dtr_fill_load(&src, dir, "in", &b), DTR_ERR_IO);
    cr_assert(strstr(dtr_last_error(), "rank1.in': No such file or directory"), "%s", dtr_last_error());
    /* a directory where the file should be: named so, not "holds 9223372036854775807 bytes" */
    cr_assert_eq(mkdir(path, 0700), 0);
    cr_assert_eq(dtr_fill_read(dir, "in", 1, one, sizeof one), DTR_ERR_IO);
    cr_assert(strstr(dtr_last_error(), "rank1.in' is a directory, not a block file"), "%s",
              dtr_last_error());
    rmdir(path);
    for (int r = 0; r < 4; r++) {
        snprintf(path, sizeof path, "%s/rank%d.in", dir, r);
        unlink(path);
    }
    rmdir(dir);
    dtr_mesh_destroy(m);
}

Test(fill, bad_arguments) {
    dtr_mesh_t *m = mesh_of("2");
    dtr_spec_t s;
    spec_of(&s, m, "S(0)", "4", DTR_F32);
    float buf[2] = {-1, -1};
    dtr_fill_t bad = {.kind = (dtr_fill_kind_t)9};
    cr_assert_eq(dtr_fill(&s, &bad, 0, buf, sizeof buf), DTR_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(dtr_last_error(), "dtr_fill: fill: kind 9 is not a fill"), "%s", dtr_last_error());
    dtr_fill_t none = {.kind = DTR_FILL_GIVEN};
    cr_assert_eq(dtr_fill(&s, &none, 0, buf, sizeof buf), DTR_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(dtr_last_error(), "dtr_fill: fill: given blocks are NULL"), "%s", dtr_last_error());
    cr_assert(buf[0] == -1 && buf[1] == -1, "a refused fill wrote the buffer");
    dtr_pattern_report_t rep;
    cr_assert_eq(dtr_fill_check(&s, &s, &random7, 0, buf, sizeof buf, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(dtr_last_error(), "dtr_fill_check: report: must not be NULL"), "%s", dtr_last_error());
    cr_assert_eq(dtr_fill_check(&s, &s, &random7, 0, buf, 4, &rep), DTR_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(dtr_last_error(), "dtr_fill_check: bytes: 4, but rank 0's block is 8 bytes"), "%s", dtr_last_error());
    dtr_fill_blocks_t *b = NULL;
    cr_assert_eq(dtr_fill_load(&s, NULL, "in", &b), DTR_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(dtr_last_error(), "dtr_fill_load: dir: must not be NULL"), "%s", dtr_last_error());
    dtr_mesh_destroy(m);
}
