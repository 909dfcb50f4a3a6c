#include <criterion/criterion.h>
#include <string.h>

#include "dtr.h"

Test(mesh, parse_and_row_major_coordinates) {
    dtr_mesh_t *m = NULL;
    cr_assert_eq(dtr_mesh_parse(" 2 x 3 x 4 ", NULL, 0, &m), DTR_OK, "%s", dtr_last_error());
    cr_expect_eq(dtr_mesh_ndims(m), 3);
    cr_expect_eq(dtr_mesh_size(m, 0), 2);
    cr_expect_eq(dtr_mesh_size(m, 2), 4);
    cr_expect_eq(dtr_mesh_size(m, 3), -1);
    cr_expect_eq(dtr_mesh_nranks(m), 24);
    int64_t c[3];
    cr_assert_eq(dtr_mesh_coord(m, 23, c), DTR_OK);
    cr_expect(c[0] == 1 && c[1] == 2 && c[2] == 3);
    cr_assert_eq(dtr_mesh_coord(m, 13, c), DTR_OK); /* 13 = 1*12 + 0*4 + 1 */
    cr_expect(c[0] == 1 && c[1] == 0 && c[2] == 1);
    int r = -1;
    cr_assert_eq(dtr_mesh_rank_at(m, c, &r), DTR_OK);
    cr_expect_eq(r, 13);
    char buf[32];
    cr_assert_eq(dtr_mesh_format(m, buf, sizeof buf), DTR_OK);
    cr_expect_str_eq(buf, "2x3x4");
    dtr_mesh_destroy(m);
}

Test(mesh, groups_along_each_dim) {
    dtr_mesh_t *m;
    cr_assert_eq(dtr_mesh_parse("2x3x4", NULL, 0, &m), DTR_OK);
    int g[8];
    int64_t n = 0;
    cr_assert_eq(dtr_mesh_group(m, 13, 0, g, 8, &n), DTR_OK);
    cr_expect_eq(n, 2);
    cr_expect(g[0] == 1 && g[1] == 13);
    cr_assert_eq(dtr_mesh_group(m, 13, 1, g, 8, &n), DTR_OK);
    cr_expect_eq(n, 3);
    cr_expect(g[0] == 13 && g[1] == 17 && g[2] == 21);
    cr_assert_eq(dtr_mesh_group(m, 13, 2, g, 8, &n), DTR_OK);
    cr_expect_eq(n, 4);
    cr_expect(g[0] == 12 && g[1] == 13 && g[2] == 14 && g[3] == 15);
    /* errors leave outputs alone */
    int keep[2] = {-7, -7};
    n = -7;
    cr_expect_eq(dtr_mesh_group(m, 13, 2, keep, 2, &n), DTR_ERR_BUFFER_TOO_SMALL);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_mesh_group: cap: 2, the group along mesh dim 2 has 4 ranks");
    cr_expect_eq(dtr_mesh_group(m, 24, 0, keep, 2, &n), DTR_ERR_NOT_IN_MESH);
    cr_expect_str_eq(dtr_last_error(), "dtr_mesh_group: rank: 24 is not in the mesh");
    cr_expect_eq(dtr_mesh_group(m, 0, 3, keep, 2, &n), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_mesh_group: dim: 3, must be 0..2 for a 3-d mesh");
    cr_expect(keep[0] == -7 && keep[1] == -7 && n == -7);
    dtr_mesh_destroy(m);
}

Test(mesh, explicit_rank_list) {
    /* 2x2 over world ranks 7, 3, 5, 1 (row-major). */
    int ranks[] = {7, 3, 5, 1};
    dtr_mesh_t *m;
    cr_assert_eq(dtr_mesh_parse("2x2", ranks, 4, &m), DTR_OK);
    ranks[0] = 99; /* the mesh keeps its own copy */
    int64_t c[2];
    cr_assert_eq(dtr_mesh_coord(m, 5, c), DTR_OK);
    cr_expect(c[0] == 1 && c[1] == 0);
    cr_assert_eq(dtr_mesh_coord(m, 7, c), DTR_OK);
    cr_expect(c[0] == 0 && c[1] == 0);
    cr_expect_eq(dtr_mesh_coord(m, 0, c), DTR_ERR_NOT_IN_MESH);
    cr_expect_eq(dtr_mesh_coord(m, 99, c), DTR_ERR_NOT_IN_MESH);
    int g[2];
    int64_t n;
    cr_assert_eq(dtr_mesh_group(m, 1, 0, g, 2, &n), DTR_OK);
    cr_expect(g[0] == 3 && g[1] == 1);
    cr_assert_eq(dtr_mesh_group(m, 1, 1, g, 2, &n), DTR_OK);
    cr_expect(g[0] == 5 && g[1] == 1);

    dtr_mesh_t *same, *identity;
    int again[] = {7, 3, 5, 1};
    cr_assert_eq(dtr_mesh_parse("2x2", again, 4, &same), DTR_OK);
    cr_assert_eq(dtr_mesh_parse("2x2", NULL, 0, &identity), DTR_OK);
    cr_expect(dtr_mesh_equal(m, same));
    cr_expect_not(dtr_mesh_equal(m, identity));
    int listed[] = {0, 1, 2, 3};
    dtr_mesh_t *listed_identity;
    cr_assert_eq(dtr_mesh_parse("2x2", listed, 4, &listed_identity), DTR_OK);
    cr_expect(dtr_mesh_equal(identity, listed_identity));
    dtr_mesh_destroy(m);
    dtr_mesh_destroy(same);
    dtr_mesh_destroy(identity);
    dtr_mesh_destroy(listed_identity);
}

Test(mesh, bad_arguments) {
    dtr_mesh_t *sentinel = (dtr_mesh_t *)(uintptr_t)0x5e5e;
    dtr_mesh_t *m = sentinel;
    int64_t sizes[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2};
    cr_expect_eq(dtr_mesh_create(0, sizes, NULL, 0, &m), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_mesh_create: ndims: 0, must be 1..8");
    cr_expect_eq(dtr_mesh_create(9, sizes, NULL, 0, &m), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_mesh_create(2, NULL, NULL, 0, &m), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_mesh_create: sizes: must not be NULL");
    cr_expect_eq(dtr_mesh_create(2, sizes, NULL, 0, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_mesh_create: out: must not be NULL");
    int64_t zero[2] = {2, 0};
    cr_expect_eq(dtr_mesh_create(2, zero, NULL, 0, &m), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_mesh_create: sizes[1]: 0, a mesh dim must have at least 1 rank");
    int64_t huge[3] = {1 << 20, 1 << 20, 4};
    cr_expect_eq(dtr_mesh_create(3, huge, NULL, 0, &m), DTR_ERR_OVERFLOW);
    int64_t overflow[2] = {INT64_MAX, 2};
    cr_expect_eq(dtr_mesh_create(2, overflow, NULL, 0, &m), DTR_ERR_OVERFLOW);
    cr_expect_eq(dtr_mesh_parse(NULL, NULL, 0, &m), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(m, sentinel, "out written on error");

    int64_t c[2] = {-9, -9};
    int r = -9;
    cr_expect_eq(dtr_mesh_coord(NULL, 0, c), DTR_ERR_INVALID_ARGUMENT);
    cr_assert_eq(dtr_mesh_parse("2x2", NULL, 0, &m), DTR_OK);
    cr_expect_eq(dtr_mesh_coord(m, -1, c), DTR_ERR_NOT_IN_MESH);
    cr_expect_eq(dtr_mesh_coord(m, 4, c), DTR_ERR_NOT_IN_MESH);
    cr_expect(c[0] == -9 && c[1] == -9);
    int64_t bad[2] = {0, 2};
    cr_expect_eq(dtr_mesh_rank_at(m, bad, &r), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_mesh_rank_at: coord[1]: 2, must be 0..1");
    cr_expect_eq(r, -9);
    char buf[3] = {'#', '#', '#'};
    cr_expect_eq(dtr_mesh_format(m, buf, sizeof buf), DTR_ERR_BUFFER_TOO_SMALL);
    cr_expect(buf[0] == '#' && buf[2] == '#');
    cr_expect_eq(dtr_mesh_ndims(NULL), -1);
    cr_expect_eq(dtr_mesh_nranks(NULL), -1);
    cr_expect_eq(dtr_mesh_size(m, -1), -1);
    dtr_mesh_destroy(m);
    dtr_mesh_destroy(NULL);
}
