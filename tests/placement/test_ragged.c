/* Ragged shards as placements (placement/placement.c): S(d){sizes} parsed, printed, compared
 * and refused where wrong. Their layouts: tests/dtensor/test_ragged.c. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"

static dtr_placement_t parsed(const char *text) {
    dtr_placement_t p;
    cr_assert_eq(dtr_placement_parse(text, &p), DTR_OK, "parse \"%s\": %s", text,
                 dtr_last_error());
    return p;
}

static void expect_text(const char *text, const char *canonical) {
    dtr_placement_t p = parsed(text);
    char buf[256];
    cr_assert_eq(dtr_placement_format(p, buf, sizeof buf), DTR_OK, "%s", dtr_last_error());
    cr_expect_str_eq(buf, canonical, "print(parse(\"%s\"))", text);
    cr_expect_eq(dtr_placement_text_len(p), (int64_t)strlen(canonical), "text_len of %s", text);
    dtr_placement_t again = parsed(buf);
    cr_expect(dtr_placement_equal(p, again), "parse(print(parse(\"%s\")))", text);
}

Test(ragged, sizes_parse_and_print_as_written) {
    expect_text("S(0){3,0,5,2}", "S(0){3,0,5,2}");
    expect_text(" s ( 1 ) { 4 , 4 } ", "S(1){4,4}");
    expect_text("Shard(dim=2){0}", "S(2){0}");
    expect_text("S(0)[1]{1,2,3}", "S(0)[1]{1,2,3}");
    expect_text("S(-1){7,0}", "S(-1){7,0}");
    dtr_placement_t p = parsed("S(0){3,0,5,2}");
    cr_expect_eq(p.kind, DTR_SHARD);
    cr_expect_eq(p.dim, 0);
    cr_assert_eq(p.nsizes, 4);
    int64_t want[] = {3, 0, 5, 2};
    cr_expect_arr_eq(p.sizes, want, sizeof want);
}

Test(ragged, equal_lists_share_one_copy_and_compare_by_value) {
    int64_t a[] = {3, 0, 5, 2}, b[] = {3, 0, 5, 2}, c[] = {3, 0, 2, 5};
    dtr_placement_t pa, pb, pc;
    cr_assert_eq(dtr_shard_sizes(0, a, 4, &pa), DTR_OK);
    cr_assert_eq(dtr_shard_sizes(0, b, 4, &pb), DTR_OK);
    cr_assert_eq(dtr_shard_sizes(0, c, 4, &pc), DTR_OK);
    cr_expect(pa.sizes != a, "the caller's array is copied");
    cr_expect_eq(pa.sizes, pb.sizes, "one copy per distinct list");
    a[0] = 99; /* the caller's array is its own */
    cr_expect_eq(pa.sizes[0], 3);
    cr_expect(dtr_placement_equal(pa, pb));
    cr_expect(!dtr_placement_equal(pa, pc), "other sizes");
    cr_expect(!dtr_placement_equal(pa, dtr_shard(0)), "ragged against chunked");
    cr_expect(dtr_placement_equal(pa, parsed("S(0){3,0,5,2}")));
    /* a hand-made value pointing at the caller's array compares by value too */
    dtr_placement_t own = dtr_shard(0);
    own.nsizes = 4;
    own.sizes = b;
    cr_expect(dtr_placement_equal(pa, own));
}

Test(ragged, lists_split_at_commas_outside_the_braces) {
    dtr_placement_t pl[DTR_MAX_MESH_DIMS];
    int n = 0;
    cr_assert_eq(dtr_placements_parse("[S(0){1,2},R,S(1){0,0,3}]", pl, DTR_MAX_MESH_DIMS, &n),
                 DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(n, 3);
    cr_expect_eq(pl[0].nsizes, 2);
    cr_expect_eq(pl[1].kind, DTR_REPLICATE);
    cr_expect_eq(pl[2].nsizes, 3);
    char buf[128];
    cr_assert_eq(dtr_placements_format(pl, n, buf, sizeof buf), DTR_OK);
    cr_expect_str_eq(buf, "S(0){1,2},R,S(1){0,0,3}");
    cr_expect_geq(dtr_placements_text_len(pl, n), (int64_t)strlen(buf));
    /* an order shown on every mesh dim of the tensor dim, before the sizes */
    cr_assert_eq(dtr_placements_parse("S(0){2,3},S(0)[0]{1,1}", pl, DTR_MAX_MESH_DIMS, &n), DTR_OK);
    pl[0].order = 1;
    cr_assert_eq(dtr_placements_format(pl, n, buf, sizeof buf), DTR_OK);
    cr_expect_str_eq(buf, "S(0)[1]{2,3},S(0)[0]{1,1}");
}

Test(ragged, a_long_list_prints_whole_where_it_fits) {
    int64_t sizes[1000];
    for (int i = 0; i < 1000; i++) sizes[i] = i;
    dtr_placement_t p;
    cr_assert_eq(dtr_shard_sizes(0, sizes, 1000, &p), DTR_OK);
    int64_t len = dtr_placement_text_len(p);
    cr_assert_gt(len, DTR_PLACEMENT_TEXT_MAX);
    char *buf = malloc((size_t)len + 1);
    cr_assert_eq(dtr_placement_format(p, buf, (size_t)len + 1), DTR_OK, "%s", dtr_last_error());
    cr_expect_eq((int64_t)strlen(buf), len);
    cr_expect(strncmp(buf, "S(0){0,1,2,", 11) == 0);
    cr_expect(dtr_placement_equal(parsed(buf), p));
    /* one byte short: refused, the buffer untouched */
    memset(buf, '#', (size_t)len + 1);
    cr_expect_eq(dtr_placement_format(p, buf, (size_t)len), DTR_ERR_BUFFER_TOO_SMALL);
    cr_expect_eq(buf[0], '#');
    free(buf);
}

static void expect_refused(const char *text, const char *words) {
    dtr_placement_t p = dtr_replicate();
    cr_expect_eq(dtr_placement_parse(text, &p), DTR_ERR_PARSE, "\"%s\" parsed", text);
    cr_expect(strstr(dtr_last_error(), words) != NULL, "\"%s\": error \"%s\" lacks \"%s\"", text,
              dtr_last_error(), words);
    cr_expect_eq(p.kind, DTR_REPLICATE, "\"%s\": out written on failure", text);
}

Test(ragged, bad_sizes_are_refused_by_name) {
    expect_refused("S(0){}", "expected a size");
    expect_refused("S(0){3,-1}", "size out of range");
    expect_refused("S(0){3,x}", "expected a size");
    expect_refused("S(0){3,4", "expected ',' or '}'");
    expect_refused("S(0){1099511627777}", "size out of range");
    expect_refused("R{2,2}", "R takes no sizes");
    expect_refused("Replicate(){2}", "R takes no sizes");
    expect_refused("P(sum){1,1}", "P takes no sizes");
    expect_refused("_S(0, 2){1,1}", "expected end of text");
    int64_t bad[] = {1, -2};
    dtr_placement_t p = dtr_replicate();
    cr_expect_eq(dtr_shard_sizes(0, bad, 2, &p), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "sizes[1]: -2") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_shard_sizes(0, bad, 0, &p), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_shard_sizes(0, NULL, 2, &p), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(p.kind, DTR_REPLICATE, "out written on failure");
    /* a hand-made value: sizes on a Replicate, sizes with a split factor */
    dtr_placement_t r = dtr_replicate();
    int64_t two[] = {1, 1};
    r.nsizes = 2;
    r.sizes = two;
    cr_expect_eq(dtr_placement_validate(r), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "only a Shard takes sizes") != NULL, "%s", dtr_last_error());
    dtr_placement_t s = dtr_shard(0);
    s.nsizes = 2;
    s.sizes = two;
    s.split_factor = 2;
    cr_expect_eq(dtr_placement_validate(s), DTR_ERR_INVALID_ARGUMENT);
    s.split_factor = 0;
    s.sizes = NULL;
    cr_expect_eq(dtr_placement_validate(s), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_placement_text_len(s), -1);
}
