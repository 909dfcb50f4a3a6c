#include <criterion/criterion.h>
#include <string.h>

#include "dtr.h"

/* Builds a spec from text; asserts success. The caller destroys *mesh. */
static dtr_spec_t make_spec(const char *mesh_text, const char *shape_text,
                            const char *placements_text, dtr_dtype_t dtype, dtr_mesh_t **mesh) {
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim, np;
    dtr_placement_t p[DTR_MAX_MESH_DIMS];
    dtr_spec_t spec;
    cr_assert_eq(dtr_mesh_parse(mesh_text, NULL, 0, mesh), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_shape_parse(shape_text, shape, DTR_MAX_TENSOR_DIMS, &ndim), DTR_OK);
    cr_assert_eq(dtr_placements_parse(placements_text, p, DTR_MAX_MESH_DIMS, &np), DTR_OK);
    cr_assert_eq(dtr_spec_init(&spec, *mesh, p, np, shape, ndim, dtype), DTR_OK, "%s",
                 dtr_last_error());
    return spec;
}

/* expected: per rank, local shape then global offset (ndim each) then bytes */
static void expect_layouts(const dtr_spec_t *spec, const int64_t *expected) {
    int ndim = spec->ndim;
    for (int64_t r = 0; r < dtr_mesh_nranks(spec->mesh); r++) {
        dtr_layout_t l;
        cr_assert_eq(dtr_spec_layout(spec, (int)r, &l), DTR_OK, "%s", dtr_last_error());
        const int64_t *e = expected + r * (2 * ndim + 1);
        cr_expect_eq(l.ndim, ndim);
        for (int d = 0; d < ndim; d++) {
            cr_expect_eq(l.local_shape[d], e[d], "rank %lld dim %d shape", (long long)r, d);
            cr_expect_eq(l.global_offset[d], e[ndim + d], "rank %lld dim %d offset",
                         (long long)r, d);
        }
        cr_expect_eq(l.bytes, e[2 * ndim], "rank %lld bytes", (long long)r);
    }
}

Test(layout, design_example_nested_shard_of_dim_1) {
    dtr_mesh_t *m;
    dtr_spec_t s = make_spec("2x2", "2x5", "S(1),S(1)", DTR_F32, &m);
    const int64_t want[] = {
        2, 2, 0, 0, 16, /* (2,2)@(0,0) */
        2, 1, 0, 2, 8,  /* (2,1)@(0,2) */
        2, 1, 0, 3, 8,  /* (2,1)@(0,3) */
        2, 1, 0, 4, 8,  /* (2,1)@(0,4) */
    };
    expect_layouts(&s, want);
    dtr_mesh_destroy(m);
}

Test(layout, design_example_nested_shard_of_dim_0) {
    dtr_mesh_t *m;
    dtr_spec_t s = make_spec("2x2", "9", "S(0),S(0)", DTR_F64, &m);
    const int64_t want[] = {3, 0, 24, 2, 3, 16, 2, 5, 16, 2, 7, 16};
    expect_layouts(&s, want);
    dtr_mesh_destroy(m);
}

Test(layout, uneven_and_empty_shards) {
    dtr_mesh_t *m;
    /* L=5 over 4: sizes 2,2,1,0; the empty one's offset is L. */
    dtr_spec_t s = make_spec("4", "5", "S(0)", DTR_F32, &m);
    const int64_t want[] = {2, 0, 8, 2, 2, 8, 1, 4, 4, 0, 5, 0};
    expect_layouts(&s, want);
    dtr_mesh_destroy(m);
    /* L=6 over 4: torch.chunk gives 3 chunks of 2; the 4th rank is empty at 6. */
    s = make_spec("4", "6x3", "S(0)", DTR_BF16, &m);
    const int64_t want6[] = {2, 3, 0, 0, 12, 2, 3, 2, 0, 12, 2, 3, 4, 0, 12, 0, 3, 6, 0, 0};
    expect_layouts(&s, want6);
    dtr_mesh_destroy(m);
    /* A zero-length dim: every shard is empty at offset 0. */
    s = make_spec("3", "0x4", "S(0)", DTR_F32, &m);
    const int64_t want0[] = {0, 4, 0, 0, 0, 0, 4, 0, 0, 0, 0, 4, 0, 0, 0};
    expect_layouts(&s, want0);
    dtr_mesh_destroy(m);
}

Test(layout, nested_empty_shard_sits_at_the_global_length) {
    /* Found by the PyTorch comparison (bench/pytorch): DTensor puts an empty shard at the
     * dim's global length however deeply it is nested, not where its parent piece ends.
     * (6,) on 2x4 with S(0),S(0): the halves of 3 split 1,1,1,0; ranks 3 and 7 are empty. */
    dtr_mesh_t *m;
    dtr_spec_t s = make_spec("2x4", "6", "S(0),S(0)", DTR_F32, &m);
    const int64_t want[] = {1, 0, 4, 1, 1, 4, 1, 2, 4, 0, 6, 0,
                            1, 3, 4, 1, 4, 4, 1, 5, 4, 0, 6, 0};
    expect_layouts(&s, want);
    dtr_mesh_destroy(m);
    /* (2,5) on 2x4 with S(0),S(0): the first level already leaves 1 row each, so three of
     * four second-level pieces are empty, at 2; dim 1 is whole. */
    s = make_spec("2x4", "2x5", "S(0),S(0)", DTR_F32, &m);
    const int64_t want2[] = {1, 5, 0, 0, 20, 0, 5, 2, 0, 0, 0, 5, 2, 0, 0, 0, 5, 2, 0, 0,
                             1, 5, 1, 0, 20, 0, 5, 2, 0, 0, 0, 5, 2, 0, 0, 0, 5, 2, 0, 0};
    expect_layouts(&s, want2);
    dtr_mesh_destroy(m);
}

Test(layout, replicate_and_partial_keep_the_whole_dim) {
    dtr_mesh_t *m;
    dtr_spec_t s = make_spec("2x3", "4x6", "P(avg),S(-1)", DTR_I64, &m);
    cr_expect_eq(s.placements[1].dim, 1, "negative shard dim normalised");
    const int64_t want[] = {
        4, 2, 0, 0, 64, 4, 2, 0, 2, 64, 4, 2, 0, 4, 64,
        4, 2, 0, 0, 64, 4, 2, 0, 2, 64, 4, 2, 0, 4, 64,
    };
    expect_layouts(&s, want);
    dtr_mesh_destroy(m);
    s = make_spec("2", "scalar", "R", DTR_U8, &m);
    dtr_layout_t l;
    cr_assert_eq(dtr_spec_layout(&s, 1, &l), DTR_OK);
    cr_expect_eq(l.ndim, 0);
    cr_expect_eq(l.numel, 1);
    cr_expect_eq(l.bytes, 1);
    dtr_mesh_destroy(m);
}

Test(layout, chunk_rule_table) {
    /* length, n, r -> size, offset (docs/design.md's formula, checked by hand) */
    const int64_t rows[][5] = {
        {5, 4, 0, 2, 0}, {5, 4, 3, 0, 5}, {4, 3, 2, 0, 4}, {7, 3, 2, 1, 6},
        {0, 5, 4, 0, 0}, {1, 1, 0, 1, 0}, {8, 8, 7, 1, 7}, {3, 8, 2, 1, 2},
        {3, 8, 3, 0, 3}, {(int64_t)1 << 40, 3, 2, 366503875924, 733007751852},
        {(int64_t)1 << 40, 3, 0, 366503875926, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t size = -1, offset = -1;
        cr_assert_eq(dtr_chunk(rows[i][0], rows[i][1], rows[i][2], &size, &offset), DTR_OK);
        cr_expect_eq(size, rows[i][3], "row %zu size", i);
        cr_expect_eq(offset, rows[i][4], "row %zu offset", i);
    }
    int64_t size = -1, offset = -1;
    cr_expect_eq(dtr_chunk(5, 0, 0, &size, &offset), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_chunk(5, 2, 2, &size, &offset), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_chunk(-1, 2, 0, &size, &offset), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_chunk: length -1, n 2, r 0: need length >= 0, n >= 1, 0 <= r < n");
    cr_expect(size == -1 && offset == -1);
}

Test(layout, largest_sizes_do_not_overflow) {
    dtr_mesh_t *m;
    dtr_spec_t s = make_spec("3", "1099511627776x1", "S(0)", DTR_U8, &m);
    dtr_layout_t l;
    cr_assert_eq(dtr_spec_layout(&s, 2, &l), DTR_OK);
    cr_expect_eq(l.local_shape[0], 366503875924);
    cr_expect_eq(l.global_offset[0], 733007751852);
    dtr_mesh_destroy(m);
    /* 2^40 x 2^20 x 2 elements of 2 bytes = 2^62 bytes fits; 2^40 x 2^20 x 4 of 8 bytes = 2^65
     * does not. */
    s = make_spec("1", "1099511627776x1048576x2", "R", DTR_F16, &m);
    int64_t shape[3] = {(int64_t)1 << 40, 1 << 20, 4};
    dtr_placement_t r = dtr_replicate();
    dtr_spec_t keep = s;
    cr_expect_eq(dtr_spec_init(&s, m, &r, 1, shape, 3, DTR_F64), DTR_ERR_OVERFLOW);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_spec_init: shape: the tensor's byte size (f64, 3 dims) overflows int64");
    cr_expect_eq(memcmp(&s, &keep, sizeof s), 0, "spec written on error");
    dtr_mesh_destroy(m);
}

Test(layout, bad_calls_leave_outputs_untouched) {
    dtr_mesh_t *m;
    dtr_spec_t s = make_spec("2x2", "4x4", "S(0),R", DTR_F32, &m);
    dtr_layout_t l, keep;
    memset(&l, 0xab, sizeof l);
    keep = l;
    int64_t coord[2] = {0, 2};
    cr_expect_eq(dtr_spec_layout_at(&s, coord, &l), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_spec_layout_at: coord[1]: 2, must be 0..1");
    cr_expect_eq(dtr_spec_layout(&s, 4, &l), DTR_ERR_NOT_IN_MESH);
    cr_expect_str_eq(dtr_last_error(), "dtr_spec_layout: rank: 4 is not in the mesh");
    cr_expect_eq(dtr_spec_layout(NULL, 0, &l), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_spec_layout(&s, 0, NULL), DTR_ERR_INVALID_ARGUMENT);
    dtr_spec_t broken = s;
    broken.dtype = (dtr_dtype_t)99;
    cr_expect_eq(dtr_spec_layout(&broken, 0, &l), DTR_ERR_INVALID_ARGUMENT);
    broken = s;
    broken.placements[0] = dtr_shard(5);
    cr_expect_eq(dtr_spec_layout(&broken, 0, &l), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_spec_layout_at: spec: placements[0] S(5) not normalised by "
                     "dtr_spec_init");
    cr_expect_eq(memcmp(&l, &keep, sizeof l), 0, "layout written on error");

    /* dtr_spec_init argument checks that text cannot reach */
    dtr_spec_t out, out_keep;
    memset(&out, 0x5a, sizeof out);
    out_keep = out;
    int64_t shape[2] = {4, 4};
    dtr_placement_t p[2] = {dtr_shard(0), dtr_replicate()};
    cr_expect_eq(dtr_spec_init(NULL, m, p, 2, shape, 2, DTR_F32), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_spec_init(&out, NULL, p, 2, shape, 2, DTR_F32), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_spec_init: mesh: must not be NULL");
    cr_expect_eq(dtr_spec_init(&out, m, NULL, 2, shape, 2, DTR_F32), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_spec_init(&out, m, p, 2, NULL, 2, DTR_F32), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_spec_init: shape: must not be NULL");
    cr_expect_eq(dtr_spec_init(&out, m, p, 2, shape, 9, DTR_F32), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_spec_init: ndim: 9, must be 0..8");
    cr_expect_eq(dtr_spec_init(&out, m, p, 2, shape, -1, DTR_F32), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_spec_init(&out, m, p, 2, shape, 2, (dtr_dtype_t)-1),
                 DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_spec_init: dtype: -1 is not a dtype");
    int64_t negative[2] = {4, -4};
    cr_expect_eq(dtr_spec_init(&out, m, p, 2, negative, 2, DTR_F32), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_spec_init: shape[1]: -4, must be >= 0");
    int64_t too_long[2] = {4, ((int64_t)1 << 40) + 1};
    cr_expect_eq(dtr_spec_init(&out, m, p, 2, too_long, 2, DTR_F32), DTR_ERR_OVERFLOW);
    dtr_placement_t bad_kind[2] = {dtr_shard(0), {.kind = (dtr_placement_kind_t)3}};
    cr_expect_eq(dtr_spec_init(&out, m, bad_kind, 2, shape, 2, DTR_F32),
                 DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_spec_init: placements[1]: kind 3 / op 0 is not a valid placement");
    dtr_placement_t bad_op[2] = {dtr_partial((dtr_reduce_op_t)5), dtr_replicate()};
    cr_expect_eq(dtr_spec_init(&out, m, bad_op, 2, shape, 2, DTR_F32), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(memcmp(&out, &out_keep, sizeof out), 0, "spec written on error");
    dtr_mesh_destroy(m);
}

Test(dtype, table_and_names) {
    const char *names[][2] = {{"f32", "float32"}, {"f64", "double"}, {"f16", "half"},
                              {"bf16", "bfloat16"}, {"i32", "int32"}, {"i64", "int64"},
                              {"u8", "uint8"}, {"f8e4m3", "float8_e4m3fn"},
                              {"f8e5m2", "float8_e5m2"}, {"c64", "complex64"},
                              {"c128", "complex128"}};
    const int sizes[] = {4, 8, 2, 2, 4, 8, 1, 1, 1, 8, 16};
    cr_assert_eq(sizeof sizes / sizeof *sizes, DTR_DTYPE_LAST, "a dtype without a row here");
    for (int d = 0; d < DTR_DTYPE_LAST; d++) {
        dtr_dtype_t t = DTR_DTYPE_LAST;
        cr_expect_str_eq(dtr_dtype_name((dtr_dtype_t)d), names[d][0]);
        cr_expect_eq(dtr_dtype_info((dtr_dtype_t)d)->size, sizes[d]);
        cr_expect_eq(dtr_dtype_parse(names[d][0], &t), DTR_OK);
        cr_expect_eq(t, d);
        t = DTR_DTYPE_LAST;
        cr_expect_eq(dtr_dtype_parse(names[d][1], &t), DTR_OK, "%s", names[d][1]);
        cr_expect_eq(t, d);
    }
    cr_expect(dtr_dtype_info(DTR_F8E4M3)->storage_only);
    cr_expect_not(dtr_dtype_info(DTR_BF16)->storage_only);
    for (int d = 0; d < DTR_DTYPE_LAST; d++)
        cr_expect_eq(dtr_dtype_info((dtr_dtype_t)d)->is_complex, d == DTR_C64 || d == DTR_C128,
                     "%s", dtr_dtype_name((dtr_dtype_t)d));
    dtr_dtype_t t = DTR_F64;
    cr_expect_eq(dtr_dtype_parse("cdouble", &t), DTR_OK);
    cr_expect_eq(t, DTR_C128);
    cr_expect_eq(dtr_dtype_parse(" BF16 ", &t), DTR_OK);
    cr_expect_eq(t, DTR_BF16);
    cr_expect_eq(dtr_dtype_parse("float3", &t), DTR_ERR_PARSE);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_dtype_parse: text \"float3\": not a dtype (f32, f64, f16, bf16, i32, "
                     "i64, u8, f8e4m3, f8e5m2, c64, c128)");
    cr_expect_eq(dtr_dtype_parse("f", &t), DTR_ERR_PARSE);
    cr_expect_eq(t, DTR_BF16);
    cr_expect_null(dtr_dtype_info(DTR_DTYPE_LAST));
    cr_expect_null(dtr_dtype_name((dtr_dtype_t)-1));
}

Test(shape, parse_and_format) {
    int64_t s[DTR_MAX_TENSOR_DIMS];
    int n = -1;
    cr_assert_eq(dtr_shape_parse("64 x 0x1099511627776", s, DTR_MAX_TENSOR_DIMS, &n), DTR_OK);
    cr_expect(n == 3 && s[0] == 64 && s[1] == 0 && s[2] == (int64_t)1 << 40);
    char buf[64];
    cr_assert_eq(dtr_shape_format(s, n, buf, sizeof buf), DTR_OK);
    cr_expect_str_eq(buf, "64x0x1099511627776");
    cr_assert_eq(dtr_shape_parse("", s, DTR_MAX_TENSOR_DIMS, &n), DTR_OK);
    cr_expect_eq(n, 0);
    cr_assert_eq(dtr_shape_parse(" Scalar ", s, DTR_MAX_TENSOR_DIMS, &n), DTR_OK);
    cr_expect_eq(n, 0);
    cr_assert_eq(dtr_shape_format(s, 0, buf, sizeof buf), DTR_OK);
    cr_expect_str_eq(buf, "scalar");
    cr_assert_eq(dtr_shape_parse("3x4", s, 1, &n), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_shape_parse: text \"3x4\": more than 1 dims");
    cr_expect_eq(dtr_shape_parse("3", s, -1, &n), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(n, 0);
}

/* Shapes as the JSON output prints them and as Python writes tuples. */
Test(shape, parse_arrays_and_tuples) {
    int64_t s[DTR_MAX_TENSOR_DIMS];
    int n = -1;
    cr_assert_eq(dtr_shape_parse(" [768, 2304] ", s, DTR_MAX_TENSOR_DIMS, &n), DTR_OK);
    cr_expect(n == 2 && s[0] == 768 && s[1] == 2304);
    cr_assert_eq(dtr_shape_parse("(5,)", s, DTR_MAX_TENSOR_DIMS, &n), DTR_OK);
    cr_expect(n == 1 && s[0] == 5);
    cr_assert_eq(dtr_shape_parse("(2, 0, 3)", s, DTR_MAX_TENSOR_DIMS, &n), DTR_OK);
    cr_expect(n == 3 && s[1] == 0 && s[2] == 3);
    cr_assert_eq(dtr_shape_parse("[]", s, DTR_MAX_TENSOR_DIMS, &n), DTR_OK);
    cr_expect_eq(n, 0);
    n = -1;
    cr_assert_eq(dtr_shape_parse("( )", s, DTR_MAX_TENSOR_DIMS, &n), DTR_OK);
    cr_expect_eq(n, 0);
    static const struct {
        const char *text, *msg;
        dtr_status_t st;
    } bad[] = {
        {"[4, 6", "dtr_shape_parse: text \"[4, 6\": ']' missing at the end", DTR_ERR_PARSE},
        {"[4; 6]", "dtr_shape_parse: text \"[4; 6]\": at offset 2: expected ',' between sizes, "
                   "found ';'", DTR_ERR_PARSE},
        {"[4,]", "dtr_shape_parse: text \"[4,]\": at offset 3: expected a size (an integer) "
                 "after ','", DTR_ERR_PARSE},
        {"[4, -1]", "dtr_shape_parse: text \"[4, -1]\": dim 1: -1, must be >= 0",
         DTR_ERR_INVALID_ARGUMENT},
        {"[4] x", "dtr_shape_parse: text \"[4] x\": text after ']'", DTR_ERR_PARSE},
        {"[4x4]", "dtr_shape_parse: text \"[4x4]\": at offset 2: expected ',' between sizes, "
                  "found 'x'", DTR_ERR_PARSE},
        {"(4, 4]", "dtr_shape_parse: text \"(4, 4]\": at offset 5: expected ',' between sizes, "
                   "found ']'", DTR_ERR_PARSE},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = -1;
        cr_expect_eq(dtr_shape_parse(bad[i].text, s, DTR_MAX_TENSOR_DIMS, &n), bad[i].st, "%s",
                     bad[i].text);
        cr_expect_str_eq(dtr_last_error(), bad[i].msg);
        cr_expect_eq(n, -1, "%s: ndim written on failure", bad[i].text);
    }
    /* a mesh stays "2x4" only */
    dtr_mesh_t *mesh = NULL;
    cr_expect_eq(dtr_mesh_parse("[2, 4]", NULL, 0, &mesh), DTR_ERR_PARSE);
    cr_expect_null(mesh);
}

/* PyTorch's _StridedShard docstring (placement_types.py): FSDP2 + TP on dim 0 of 8x8 over
 * dp x tp = 2x2 puts rows 0-1, 4-5, 2-3, 6-7 on ranks 0..3; and the example of
 * _convert_shard_order_to_StridedShard: on a 4x3x2 mesh, (_S(0,2), _S(0,2), S(0)) is the
 * order (2, 0, 1). */
Test(layout, strided_shards_are_shard_orders) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse("2x2", NULL, 0, &mesh), DTR_OK);
    dtr_placement_t pl[3];
    int n;
    cr_assert_eq(dtr_placements_parse("_StridedShard(dim=0, sf=2), Shard(dim=0)", pl, 3, &n),
                 DTR_OK);
    int64_t shape[2] = {8, 8};
    dtr_spec_t spec;
    cr_assert_eq(dtr_spec_init(&spec, mesh, pl, n, shape, 2, DTR_F32), DTR_OK, "%s",
                 dtr_last_error());
    cr_expect(spec.placements[0].order == 1 && spec.placements[1].order == 0 &&
              spec.placements[0].split_factor == 0);
    const int64_t rows[4] = {0, 4, 2, 6};
    for (int r = 0; r < 4; r++) {
        dtr_layout_t l;
        cr_assert_eq(dtr_spec_layout(&spec, r, &l), DTR_OK);
        cr_expect(l.local_shape[0] == 2 && l.global_offset[0] == rows[r], "rank %d: %lld@%lld", r,
                  (long long)l.local_shape[0], (long long)l.global_offset[0]);
    }
    dtr_mesh_destroy(mesh);
    cr_assert_eq(dtr_mesh_parse("4x3x2", NULL, 0, &mesh), DTR_OK);
    cr_assert_eq(dtr_placements_parse("_S(0, 2), _S(0, 2), S(0)", pl, 3, &n), DTR_OK);
    int64_t len = 24;
    cr_assert_eq(dtr_spec_init(&spec, mesh, pl, n, &len, 1, DTR_F32), DTR_OK, "%s",
                 dtr_last_error());
    char text[128];
    dtr_placements_format(spec.placements, 3, text, sizeof text);
    cr_expect_str_eq(text, "S(0)[1],S(0)[2],S(0)[0]");
    /* The same layout written as the order. */
    dtr_spec_t ordered;
    cr_assert_eq(dtr_placements_parse("S(0)[1],S(0)[2],S(0)[0]", pl, 3, &n), DTR_OK);
    cr_assert_eq(dtr_spec_init(&ordered, mesh, pl, n, &len, 1, DTR_F32), DTR_OK);
    for (int r = 0; r < 24; r++) {
        dtr_layout_t a, b;
        dtr_spec_layout(&spec, r, &a);
        dtr_spec_layout(&ordered, r, &b);
        cr_expect(a.local_shape[0] == b.local_shape[0] && a.global_offset[0] == b.global_offset[0]);
        /* Order (2, 0, 1): coordinate (x, y, z) holds chunk z of 2, then x of 4, then y of 3. */
        int64_t x = r / 6, y = r / 2 % 3, z = r % 2;
        cr_expect_eq(a.global_offset[0], z * 12 + x * 3 + y, "rank %d", r);
    }
    dtr_mesh_destroy(mesh);
}
