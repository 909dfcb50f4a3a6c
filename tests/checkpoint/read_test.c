/*
 * Reading checkpoints: the files the Python `safetensors` package wrote
 * (tests/checkpoint/data, make_fixtures.py) listed and read value by value; every rank's
 * block of every tensor under many placements on 1-, 2- and 3-dim meshes compared with the
 * whole tensor, with the exact bytes and runs each took (and no more system calls than
 * runs); the argument errors.
 */
#include "tests/checkpoint/fixture.h"

#include "checkpoint/dtr_checkpoint.h"
#include "numeric/numeric.h"
#include "dtr.h"

#ifndef DTR_TEST_DATA
#define DTR_TEST_DATA "tests/checkpoint/data"
#endif

/* make_fixtures.py's values of tensor `name` at flat index k. */
static double want_value(const char *name, int64_t k) {
    switch (name[0]) {
    case 'w': return (double)k * 0.5 - 7;
    case 'b': return (double)k - 3;
    case 'e': return (double)k * 1000003 - 5;
    default: return 2.25;
    }
}

static dtr_checkpoint_t *open_ok(const char *path) {
    dtr_checkpoint_t *ck = NULL;
    cr_assert_eq(dtr_checkpoint_open(path, &ck), DTR_OK, "%s: %s", path, dtr_last_error());
    return ck;
}

/* The four tensors, in name order, with their shapes and dtypes. */
static void expect_listing(const dtr_checkpoint_t *ck) {
    static const struct {
        const char *name, *fmt;
        dtr_dtype_t dtype;
        int ndim;
        int64_t shape[3], bytes;
    } want[] = {{"b", "BF16", DTR_BF16, 1, {7}, 14},
                {"e", "I64", DTR_I64, 3, {3, 4, 2}, 192},
                {"s", "F32", DTR_F32, 0, {0}, 4},
                {"w", "F32", DTR_F32, 2, {6, 5}, 120}};
    cr_assert_eq(dtr_checkpoint_count(ck), 4);
    for (int i = 0; i < 4; i++) {
        dtr_checkpoint_tensor_t t;
        cr_assert_eq(dtr_checkpoint_tensor(ck, i, &t), DTR_OK);
        cr_expect_str_eq(t.name, want[i].name);
        cr_expect_str_eq(t.format_dtype, want[i].fmt);
        cr_expect(t.dtype == want[i].dtype && t.ndim == want[i].ndim && t.bytes == want[i].bytes,
                  "%s", t.name);
        for (int d = 0; d < t.ndim; d++) cr_expect_eq(t.shape[d], want[i].shape[d]);
        int64_t at = -1;
        cr_expect(dtr_checkpoint_find(ck, want[i].name, &at) == DTR_OK && at == i);
        /* the value at the tensor's offset in its file is its element 0 */
        FILE *f = fopen(t.file, "rb");
        unsigned char raw[8];
        cr_assert(f != NULL && fseek(f, (long)t.offset, SEEK_SET) == 0 && fread(raw, 1, 8, f) >= 2);
        fclose(f);
        cr_expect_eq(dtr__load(t.dtype, raw, 0), want_value(t.name, 0), "%s", t.name);
    }
}

Test(read, python_written_file_and_directory) {
    dtr_checkpoint_t *ck = open_ok(DTR_TEST_DATA "/py_model.safetensors");
    expect_listing(ck);
    cr_expect_str_eq(dtr_checkpoint_metadata(ck, "format"), "pt");
    cr_expect(dtr_checkpoint_metadata(ck, "none") == NULL);
    int64_t at = 7;
    cr_expect_eq(dtr_checkpoint_find(ck, "x", &at), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(at == 7 && strstr(dtr_last_error(), "name: no tensor 'x'"));
    dtr_checkpoint_close(ck);
    ck = open_ok(DTR_TEST_DATA "/sharded");
    expect_listing(ck);
    cr_expect_str_eq(dtr_checkpoint_metadata(ck, "total_size"), "330");
    dtr_checkpoint_tensor_t t;
    dtr_checkpoint_tensor(ck, 0, &t);
    cr_expect(strstr(t.file, "/sharded/model-00002-of-00002.safetensors") != NULL, "%s", t.file);
    dtr_checkpoint_close(ck);
}

/* Every rank's block of every tensor of the Python file under spec (mesh, placements) against
 * the formula; the bytes read are the block's, its contiguous runs counted, read in no more
 * system calls than runs (close ones share a preadv), the file bytes at least the block's. */
static void blocks_match(dtr_checkpoint_t *ck, const char *mesh_text, const char *pl_text) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse(mesh_text, NULL, 0, &mesh), DTR_OK);
    for (int64_t i = 0; i < dtr_checkpoint_count(ck); i++) {
        dtr_checkpoint_tensor_t t;
        dtr_checkpoint_tensor(ck, i, &t);
        dtr_placement_t pl[DTR_MAX_MESH_DIMS];
        int n = 0;
        cr_assert_eq(dtr_placements_parse(pl_text, pl, DTR_MAX_MESH_DIMS, &n), DTR_OK);
        dtr_spec_t spec;
        if (dtr_spec_init(&spec, mesh, pl, n, t.shape, t.ndim, t.dtype) != DTR_OK)
            continue; /* a shard dim the tensor lacks (the scalar, the 1-d one) */
        for (int r = 0; r < dtr_mesh_nranks(mesh); r++) {
            dtr_layout_t lay;
            cr_assert_eq(dtr_spec_layout(&spec, r, &lay), DTR_OK);
            size_t item = (size_t)dtr_dtype_info(t.dtype)->size;
            unsigned char *out = malloc((size_t)lay.bytes + 16);
            memset(out, 0xee, (size_t)lay.bytes + 16);
            dtr_checkpoint_read_stats_t stats = {-1, -1, -1, -1};
            cr_assert_eq(dtr_checkpoint_read_block(ck, i, &spec, r, out, (size_t)lay.bytes + 16,
                                                   &stats),
                         DTR_OK, "%s %s %s rank %d: %s", t.name, mesh_text, pl_text, r,
                         dtr_last_error());
            /* the runs: rows of the innermost dim the block does not span whole */
            int64_t runs = lay.numel > 0, k = t.ndim;
            while (k > 0 && lay.local_shape[k - 1] == t.shape[k - 1]) k--;
            for (int d = 0; d + 1 < k; d++) runs *= lay.local_shape[d];
            cr_expect(stats.bytes == lay.bytes && stats.runs == runs && stats.reads <= runs &&
                          (stats.reads >= 1) == (runs >= 1) && stats.file_bytes >= lay.bytes,
                      "%s %s %s rank %d: read %lld bytes in %lld runs, %lld calls, %lld file "
                      "bytes; want %lld in %lld", t.name, mesh_text, pl_text, r,
                      (long long)stats.bytes, (long long)stats.runs, (long long)stats.reads,
                      (long long)stats.file_bytes, (long long)lay.bytes, (long long)runs);
            for (int64_t e = 0; e < lay.numel; e++) {
                int64_t rem = e, g = 0, stride = 1, idx[DTR_MAX_TENSOR_DIMS];
                for (int d = t.ndim - 1; d >= 0; d--) {
                    idx[d] = rem % lay.local_shape[d];
                    rem /= lay.local_shape[d];
                }
                for (int d = t.ndim - 1; d >= 0; d--) {
                    g += (lay.global_offset[d] + idx[d]) * stride;
                    stride *= t.shape[d];
                }
                cr_assert_eq(dtr__load(t.dtype, out, e), want_value(t.name, g),
                             "%s %s %s rank %d element %lld", t.name, mesh_text, pl_text, r,
                             (long long)e);
            }
            cr_expect(out[lay.bytes] == 0xee, "%s rank %d: written past its block", t.name, r);
            (void)item;
            free(out);
        }
    }
    dtr_mesh_destroy(mesh);
}

Test(read, every_rank_block_under_many_layouts) {
    dtr_checkpoint_t *ck = open_ok(DTR_TEST_DATA "/py_model.safetensors");
    static const char *const cases[][2] = {
        {"1", "R"},           {"4", "S(0)"},        {"4", "S(1)"},       {"4", "S(2)"},
        {"3", "S(-1)"},       {"2x2", "R,R"},       {"2x2", "S(0),S(1)"}, {"2x2", "S(1),S(0)"},
        {"2x2", "S(0),S(0)"}, {"2x2", "S(0)[1],S(0)[0]"}, {"2x3", "R,S(0)"}, {"2x3", "S(1),R"},
        {"2x2x2", "S(0),S(1),S(2)"}, {"2x2x2", "S(2),R,S(0)"}, {"5", "S(0)"}, {"7", "S(0)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        blocks_match(ck, cases[c][0], cases[c][1]);
    dtr_checkpoint_close(ck);
}

Test(read, argument_errors_leave_out_untouched) {
    dtr_checkpoint_t *ck = open_ok(DTR_TEST_DATA "/py_model.safetensors");
    dtr_mesh_t *mesh;
    dtr_mesh_parse("2", NULL, 0, &mesh);
    int64_t w;
    dtr_checkpoint_find(ck, "w", &w);
    dtr_placement_t pl[1];
    int n;
    dtr_placements_parse("S(0)", pl, 1, &n);
    int64_t shape[2] = {6, 5}, other[2] = {5, 6};
    dtr_spec_t spec, bad_shape, bad_dtype, partial;
    dtr_spec_init(&spec, mesh, pl, 1, shape, 2, DTR_F32);
    dtr_spec_init(&bad_shape, mesh, pl, 1, other, 2, DTR_F32);
    dtr_spec_init(&bad_dtype, mesh, pl, 1, shape, 2, DTR_I32);
    dtr_placements_parse("P", pl, 1, &n);
    dtr_spec_init(&partial, mesh, pl, 1, shape, 2, DTR_F32);
    unsigned char out[256];
    memset(out, 0x77, sizeof out);
    dtr_checkpoint_read_stats_t stats = {-5, -5, -5, -5};
    const struct {
        const dtr_spec_t *spec;
        int64_t index;
        int rank;
        size_t bytes;
        dtr_status_t status;
        const char *detail;
    } bad[] = {
        {&bad_shape, 0, 0, 256, DTR_ERR_INVALID_ARGUMENT, "spec->shape: 5x6, tensor 'w' is 6x5"},
        {&bad_dtype, 0, 0, 256, DTR_ERR_INVALID_ARGUMENT,
         "spec->dtype: i32, tensor 'w' is f32 (casts: between float dtypes)"},
        {&partial, 0, 0, 256, DTR_ERR_UNSUPPORTED, "spec->placements[0]: Partial"},
        {&spec, 0, 0, 59, DTR_ERR_BUFFER_TOO_SMALL, "out_bytes: 59, rank 0's block of 'w' is 60"},
        {&spec, 0, 2, 256, DTR_ERR_NOT_IN_MESH, "dtr_checkpoint_read_block"},
        {&spec, 9, 0, 256, DTR_ERR_INVALID_ARGUMENT, "index: 9, not 0..3"},
        {&spec, -1, 0, 256, DTR_ERR_INVALID_ARGUMENT, "index: -1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t index = bad[i].index == 0 ? w : bad[i].index;
        dtr_status_t st = dtr_checkpoint_read_block(ck, index, bad[i].spec, bad[i].rank, out,
                                                    bad[i].bytes, &stats);
        cr_expect(st == bad[i].status && strstr(dtr_last_error(), bad[i].detail) != NULL,
                  "case %zu: %s '%s' (want '%s')", i, dtr_status_name(st), dtr_last_error(),
                  bad[i].detail);
    }
    for (size_t k = 0; k < sizeof out; k++) cr_assert_eq(out[k], 0x77, "out[%zu] written", k);
    cr_expect(stats.bytes == -5 && stats.reads == -5);
    dtr_mesh_destroy(mesh);
    dtr_checkpoint_close(ck);
}

/* A float tensor read in another float dtype: every rank's block, converted on the way. */
Test(read, cast_on_read) {
    dtr_checkpoint_t *ck = open_ok(DTR_TEST_DATA "/py_model.safetensors");
    dtr_mesh_t *mesh;
    dtr_mesh_parse("2x2", NULL, 0, &mesh);
    dtr_placement_t pl[2];
    int n;
    dtr_placements_parse("S(1),S(0)", pl, 2, &n);
    int64_t w, shape[2] = {6, 5};
    dtr_checkpoint_find(ck, "w", &w);
    static const dtr_dtype_t to[] = {DTR_F64, DTR_BF16, DTR_F16};
    for (int c = 0; c < 3; c++) {
        dtr_spec_t spec;
        dtr_spec_init(&spec, mesh, pl, 2, shape, 2, to[c]);
        for (int r = 0; r < 4; r++) {
            dtr_layout_t lay;
            dtr_spec_layout(&spec, r, &lay);
            char out[256];
            dtr_checkpoint_read_stats_t stats;
            cr_assert_eq(dtr_checkpoint_read_block(ck, w, &spec, r, out, sizeof out, &stats),
                         DTR_OK, "%s", dtr_last_error());
            cr_expect_eq(stats.bytes, lay.numel * 4, "the file's f32 bytes are what is read");
            for (int64_t e = 0; e < lay.numel; e++) {
                int64_t row = lay.global_offset[0] + e / lay.local_shape[1];
                int64_t col = lay.global_offset[1] + e % lay.local_shape[1];
                cr_assert_eq(dtr__load(to[c], out, e), want_value("w", row * 5 + col),
                             "%s rank %d element %lld", dtr_dtype_name(to[c]), r, (long long)e);
            }
        }
    }
    dtr_mesh_destroy(mesh);
    dtr_checkpoint_close(ck);
}

/* A dtype the format has and dtr lacks: listed, refused by name when read. */
Test(read, dtype_dtr_lacks) {
    char *dir = fixture_dir();
    char *p = fixture_file(dir, "i16.safetensors",
                           "{\"h\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,4]}}",
                           -1, NULL, 4);
    dtr_checkpoint_t *ck = open_ok(p);
    dtr_checkpoint_tensor_t t;
    cr_assert_eq(dtr_checkpoint_tensor(ck, 0, &t), DTR_OK);
    cr_expect(t.dtype == DTR_DTYPE_LAST && strcmp(t.format_dtype, "I16") == 0);
    dtr_mesh_t *mesh;
    dtr_mesh_parse("1", NULL, 0, &mesh);
    dtr_placement_t r = {0};
    int n;
    dtr_placements_parse("R", &r, 1, &n);
    int64_t shape[1] = {2};
    dtr_spec_t spec;
    dtr_spec_init(&spec, mesh, &r, 1, shape, 1, DTR_I32);
    char out[8];
    cr_expect_eq(dtr_checkpoint_read_block(ck, 0, &spec, 0, out, sizeof out, NULL),
                 DTR_ERR_UNSUPPORTED);
    cr_expect(strstr(dtr_last_error(), "tensor 'h': dtype I16: dtr has none"), "%s",
              dtr_last_error());
    dtr_mesh_destroy(mesh);
    dtr_checkpoint_close(ck);
    free(p);
}
