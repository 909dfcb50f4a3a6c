/*
 * Reading a block into a memory space through host staging (dtr_checkpoint_read_block_to):
 * on the fake device (tests/support/fake_device.h: tagged addresses the library must never
 * touch itself), or on CUDA memory with DTR_TEST_SPACE=cuda (tests/support/test_space.h; a
 * CUDA build on a GPU machine: skipped where none is visible), every rank's block of every
 * tensor of the Python-written file under many layouts and staging sizes (one element up to
 * the whole block), byte for byte what the host read gives; the exact number of chunks
 * handed to the space; casts staged on both sides; and the errors: staging smaller than an
 * element, a space without a copy, a copy that fails.
 */
#include "tests/checkpoint/fixture.h"

#include "checkpoint/dtr_checkpoint.h"
#include "core/common.h"
#include "numeric/numeric.h"
#include "dtr.h"
#include "tests/support/fake_device.h"
#include "tests/support/test_space.h"

#ifndef DTR_TEST_DATA
#define DTR_TEST_DATA "tests/checkpoint/data"
#endif

/* The space of DTR_TEST_SPACE (fake by default); false: skip (no GPU visible). */
static bool space_open(test_space_t *sp) {
    int rc = test_space_open("space_test", 0, sp);
    cr_assert(rc != 2, "DTR_TEST_SPACE is not usable in this build");
    return rc == 0;
}

/* A buffer of the space of n bytes (and one more), every byte 0x5a. */
static void *space_buffer(const test_space_t *sp, size_t n) {
    unsigned char *h = malloc(n + 1);
    memset(h, 0x5a, n + 1);
    void *d = test_space_in(sp, h, n + 1);
    free(h);
    return d;
}

static dtr_checkpoint_t *open_ok(const char *path) {
    dtr_checkpoint_t *ck = NULL;
    cr_assert_eq(dtr_checkpoint_open(path, &ck), DTR_OK, "%s: %s", path, dtr_last_error());
    return ck;
}

/* The fixture opened, a mesh, and the index of its 6x5 f32 tensor "w". */
static int64_t open_w(dtr_checkpoint_t **ck, dtr_mesh_t **mesh, const char *mesh_text) {
    *ck = open_ok(DTR_TEST_DATA "/py_model.safetensors");
    cr_assert_eq(dtr_mesh_parse(mesh_text, NULL, 0, mesh), DTR_OK);
    int64_t w = -1;
    cr_assert_eq(dtr_checkpoint_find(*ck, "w", &w), DTR_OK);
    return w;
}

static dtr_spec_t spec_of(dtr_mesh_t *mesh, const char *pl_text, const int64_t *shape, int nd,
                          dtr_dtype_t dtype, bool *ok) {
    dtr_placement_t pl[DTR_MAX_MESH_DIMS];
    int n = 0;
    cr_assert_eq(dtr_placements_parse(pl_text, pl, DTR_MAX_MESH_DIMS, &n), DTR_OK);
    dtr_spec_t spec;
    *ok = dtr_spec_init(&spec, mesh, pl, n, shape, nd, dtype) == DTR_OK;
    return spec;
}

/* Rank r's block of tensor i under spec into the fake device with `staging` bytes, equal to
 * the host read of the same block. */
static void same_as_host(const test_space_t *sp, dtr_checkpoint_t *ck, int64_t i,
                         const dtr_spec_t *spec, int r, size_t staging, const char *what) {
    dtr_layout_t lay;
    cr_assert_eq(dtr_spec_layout(spec, r, &lay), DTR_OK);
    size_t n = (size_t)lay.bytes;
    unsigned char *host = malloc(n + 1), *got = malloc(n + 1);
    cr_assert_eq(dtr_checkpoint_read_block(ck, i, spec, r, host, n, NULL), DTR_OK, "%s: %s",
                 what, dtr_last_error());
    void *dev = space_buffer(sp, n);
    dtr_checkpoint_read_stats_t stats = {-1, -1, -1, -1};
    int64_t refused = fake_device_counts().refused;
    cr_assert_eq(dtr_checkpoint_read_block_to(ck, i, spec, r, sp->ops, sp->state, dev, n,
                                              staging, &stats),
                 DTR_OK, "%s rank %d staging %zu: %s", what, r, staging, dtr_last_error());
    cr_expect_eq(fake_device_counts().refused, refused, "%s: a host address passed", what);
    test_space_out(sp, got, dev, n + 1);
    cr_expect(memcmp(got, host, n) == 0, "%s rank %d staging %zu: differs from the host read",
              what, r, staging);
    cr_expect_eq(got[n], 0x5a, "%s rank %d: written past the block", what, r);
    cr_expect_eq(stats.bytes, lay.bytes, "%s rank %d: %lld bytes read", what, r,
                 (long long)stats.bytes);
    free(host);
    free(got);
}

Test(space, every_block_every_staging_size) {
    test_space_t sp;
    if (!space_open(&sp)) return;
    dtr_checkpoint_t *ck = open_ok(DTR_TEST_DATA "/py_model.safetensors");
    static const char *const cases[][2] = {
        {"1", "R"},       {"4", "S(0)"},        {"3", "S(-1)"},       {"2x2", "S(0),S(1)"},
        {"2x2", "S(1),S(0)"}, {"2x3", "R,S(0)"}, {"2x2x2", "S(0),S(1),S(2)"}, {"5", "S(0)"},
    };
    static const size_t staging[] = {8, 12, 20, 24, 44, 64, 100, 0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        dtr_mesh_t *mesh;
        cr_assert_eq(dtr_mesh_parse(cases[c][0], NULL, 0, &mesh), DTR_OK);
        for (int64_t i = 0; i < dtr_checkpoint_count(ck); i++) {
            dtr_checkpoint_tensor_t t;
            dtr_checkpoint_tensor(ck, i, &t);
            bool ok;
            dtr_spec_t spec = spec_of(mesh, cases[c][1], t.shape, t.ndim, t.dtype, &ok);
            if (!ok) continue; /* a shard dim the tensor lacks */
            char what[96];
            snprintf(what, sizeof what, "%s on %s as %s", t.name, cases[c][0], cases[c][1]);
            for (size_t s = 0; s < sizeof staging / sizeof staging[0]; s++)
                for (int r = 0; r < dtr_mesh_nranks(mesh); r++)
                    if (staging[s] == 0 || staging[s] >= (size_t)dtr_dtype_info(t.dtype)->size)
                        same_as_host(&sp, ck, i, &spec, r, staging[s], what);
        }
        dtr_mesh_destroy(mesh);
    }
    dtr_checkpoint_close(ck);
    test_space_close(&sp);
}

/* w is 6x5 f32: the chunks are whole rows where one fits, else pieces of a row. */
Test(space, chunks_are_whole_rows_where_they_fit) {
    dtr_checkpoint_t *ck;
    dtr_mesh_t *mesh;
    int64_t shape[2] = {6, 5}, w = open_w(&ck, &mesh, "1");
    bool ok;
    dtr_spec_t spec = spec_of(mesh, "R", shape, 2, DTR_F32, &ok);
    static const struct {
        size_t staging;
        int64_t copies;
    } want[] = {{4, 30}, {8, 18}, {16, 12}, {20, 6}, {40, 3}, {44, 3}, {60, 2}, {100, 2},
                {120, 1}, {0, 1}};
    test_space_t sp;
    if (!space_open(&sp)) return;
    void *dev = space_buffer(&sp, 120);
    for (size_t c = 0; c < sizeof want / sizeof want[0]; c++) {
        int64_t before = fake_device_counts().from_host;
        dtr_checkpoint_read_stats_t stats;
        cr_assert_eq(dtr_checkpoint_read_block_to(ck, w, &spec, 0, sp.ops, sp.state, dev, 120,
                                                  want[c].staging, &stats),
                     DTR_OK, "%s", dtr_last_error());
        int64_t copies = fake_device_counts().from_host - before;
        cr_expect(test_space_counted(&sp, copies == want[c].copies),
                  "staging %zu: %lld copies, want %lld", want[c].staging, (long long)copies,
                  (long long)want[c].copies);
        cr_expect_eq(stats.bytes, 120);
        float f[30];
        test_space_get(&sp, f, dev, sizeof f);
        for (int k = 0; k < 30; k++) cr_assert_eq(f[k], (float)k * 0.5f - 7, "element %d", k);
    }
    sp.ops->free(sp.state, dev);
    test_space_close(&sp);
    dtr_mesh_destroy(mesh);
    dtr_checkpoint_close(ck);
}

/* A cast staged: the file's f32 read, cast, copied; on the host the same through staging. */
Test(space, casts_through_staging) {
    dtr_checkpoint_t *ck;
    dtr_mesh_t *mesh;
    int64_t shape[2] = {6, 5}, w = open_w(&ck, &mesh, "2x2");
    static const dtr_dtype_t to[] = {DTR_F64, DTR_BF16, DTR_F16};
    test_space_t sp;
    if (!space_open(&sp)) return;
    for (int c = 0; c < 3; c++) {
        bool ok;
        dtr_spec_t spec = spec_of(mesh, "S(1),S(0)", shape, 2, to[c], &ok);
        int64_t item = dtr_dtype_info(to[c])->size;
        for (int r = 0; r < 4; r++) {
            dtr_layout_t lay;
            dtr_spec_layout(&spec, r, &lay);
            _Alignas(16) char host[256];
            _Alignas(16) char small[256], got[256];
            void *dev = space_buffer(&sp, 256);
            cr_assert_eq(dtr_checkpoint_read_block(ck, w, &spec, r, host, 256, NULL), DTR_OK);
            /* one element per chunk: 4 bytes read + item cast */
            cr_assert_eq(dtr_checkpoint_read_block_to(ck, w, &spec, r, sp.ops, sp.state, dev,
                                                      256, (size_t)(4 + item), NULL),
                         DTR_OK, "%s", dtr_last_error());
            test_space_out(&sp, got, dev, 256);
            cr_assert_eq(dtr_checkpoint_read_block_to(ck, w, &spec, r, NULL, NULL, small, 256, 4,
                                                      NULL),
                         DTR_OK, "%s", dtr_last_error());
            for (int64_t e = 0; e < lay.numel; e++) {
                int64_t row = lay.global_offset[0] + e / lay.local_shape[1];
                int64_t col = lay.global_offset[1] + e % lay.local_shape[1];
                double want = (double)(row * 5 + col) * 0.5 - 7;
                cr_assert_eq(dtr__load(to[c], host, e), want, "host %lld", (long long)e);
                cr_assert_eq(dtr__load(to[c], small, e), want, "staged host %lld", (long long)e);
                cr_assert_eq(dtr__load(to[c], got, e), want,
                             "%s rank %d device element %lld", dtr_dtype_name(to[c]), r,
                             (long long)e);
            }
        }
    }
    test_space_close(&sp);
    dtr_mesh_destroy(mesh);
    dtr_checkpoint_close(ck);
}

static dtr_status_t failing_copy(void *state, void *dst, const void *src, int64_t bytes,
                                 dtr_copy_kind_t kind) {
    (void)state, (void)dst, (void)src, (void)bytes, (void)kind;
    return dtr__error(DTR_ERR_BACKEND, "test", "device lost");
}

static dtr_status_t noop_sync(void *state) {
    (void)state;
    return DTR_OK;
}

Test(space, errors) {
    dtr_checkpoint_t *ck;
    dtr_mesh_t *mesh;
    int64_t shape[2] = {6, 5}, w = open_w(&ck, &mesh, "1");
    bool ok;
    dtr_spec_t spec = spec_of(mesh, "R", shape, 2, DTR_F32, &ok);
    dtr_spec_t half = spec_of(mesh, "R", shape, 2, DTR_BF16, &ok);
    dtr_memory_ops_t failing = {.name = "flaky", .copy = failing_copy, .sync = noop_sync};
    dtr_memory_ops_t nocopy = {.name = "nocopy"};
    test_space_t sp;
    if (!space_open(&sp)) return;
    const dtr_memory_ops_t *space = sp.ops;
    void *state = sp.state, *dev = space_buffer(&sp, 120);
    unsigned char host[120];
    memset(host, 0x77, sizeof host);
    dtr_checkpoint_read_stats_t stats = {-5, -5, -5, -5};
    const struct {
        const dtr_memory_ops_t *ops;
        const dtr_spec_t *spec;
        size_t staging;
        dtr_status_t status;
        const char *detail;
    } bad[] = {
        {space, &spec, 3, DTR_ERR_INVALID_ARGUMENT,
         "staging_bytes: 3, less than one element (4 bytes staged)"},
        {space, &half, 5, DTR_ERR_INVALID_ARGUMENT,
         "staging_bytes: 5, less than one element (6 bytes staged)"},
        {NULL, &half, 3, DTR_ERR_INVALID_ARGUMENT,
         "staging_bytes: 3, less than one element (4 bytes staged)"},
        {&nocopy, &spec, 0, DTR_ERR_INVALID_ARGUMENT, "space: no copy"},
        {&failing, &spec, 0, DTR_ERR_BACKEND, "space 'flaky': copy of 120 bytes to out: "
                                              "test: device lost"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *out = bad[i].ops == NULL ? (void *)host : dev;
        dtr_status_t st = dtr_checkpoint_read_block_to(ck, w, bad[i].spec, 0, bad[i].ops, state,
                                                       out, 120, bad[i].staging, &stats);
        cr_expect(st == bad[i].status && strstr(dtr_last_error(), bad[i].detail) != NULL,
                  "case %zu: %s '%s' (want '%s')", i, dtr_status_name(st), dtr_last_error(),
                  bad[i].detail);
    }
    for (size_t k = 0; k < sizeof host; k++) cr_assert_eq(host[k], 0x77, "host[%zu] written", k);
    unsigned char d[120];
    test_space_out(&sp, d, dev, 120);
    for (size_t k = 0; k < 120; k++) cr_assert_eq(d[k], 0x5a, "device[%zu] written", k);
    cr_expect(stats.bytes == -5 && stats.reads == -5, "stats written on failure");
    test_space_close(&sp);
    dtr_mesh_destroy(mesh);
    dtr_checkpoint_close(ck);
}
