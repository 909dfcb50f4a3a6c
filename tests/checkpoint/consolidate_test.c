/* Consolidation (checkpoint/consolidate.c): the Python-written fixtures (one file, and a
 * directory with an index) into one file and into several with an index, each tensor
 * compared with its source byte for byte, the metadata carried over, total_size computed;
 * and the unhappy paths: arguments named, a non-empty target untouched, nothing left where
 * the source cannot be read. */
#include "tests/checkpoint/fixture.h" /* (first: it sets _POSIX_C_SOURCE) */

#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/dtr_checkpoint.h"

#ifndef DTR_TEST_DATA
#define DTR_TEST_DATA "tests/checkpoint/data"
#endif

/* Every tensor of `a` whole, the same name, dtype, shape and bytes in `b`. */
static void expect_same(const char *a_path, const char *b_path) {
    dtr_checkpoint_t *a = NULL, *b = NULL;
    cr_assert_eq(dtr_checkpoint_open(a_path, &a), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_checkpoint_open(b_path, &b), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_checkpoint_count(a), dtr_checkpoint_count(b));
    int64_t one = 1;
    dtr_mesh_t *mesh = NULL;
    cr_assert_eq(dtr_mesh_create(1, &one, NULL, 0, &mesh), DTR_OK);
    dtr_placement_t r = {.kind = DTR_REPLICATE};
    for (int64_t i = 0; i < dtr_checkpoint_count(a); i++) {
        dtr_checkpoint_tensor_t ta, tb;
        int64_t j = -1;
        dtr_checkpoint_tensor(a, i, &ta);
        cr_assert_eq(dtr_checkpoint_find(b, ta.name, &j), DTR_OK, "%s", ta.name);
        dtr_checkpoint_tensor(b, j, &tb);
        cr_assert_eq(ta.dtype, tb.dtype, "%s", ta.name);
        cr_assert_eq(ta.ndim, tb.ndim, "%s", ta.name);
        cr_assert_eq(ta.bytes, tb.bytes, "%s", ta.name);
        if (ta.dtype == DTR_DTYPE_LAST) continue;
        dtr_spec_t s;
        cr_assert_eq(dtr_spec_init(&s, mesh, &r, 1, ta.shape, ta.ndim, ta.dtype), DTR_OK);
        unsigned char *x = malloc((size_t)ta.bytes + 1), *y = malloc((size_t)ta.bytes + 1);
        cr_assert_eq(dtr_checkpoint_read_block(a, i, &s, 0, x, (size_t)ta.bytes, NULL), DTR_OK);
        cr_assert_eq(dtr_checkpoint_read_block(b, j, &s, 0, y, (size_t)ta.bytes, NULL), DTR_OK);
        cr_expect_eq(memcmp(x, y, (size_t)ta.bytes), 0, "tensor %s differs", ta.name);
        free(x);
        free(y);
    }
    dtr_mesh_destroy(mesh);
    dtr_checkpoint_close(a);
    dtr_checkpoint_close(b);
}

static bool exists(const char *dir, const char *name) {
    char p[512];
    struct stat st;
    return stat(fixture_path(p, sizeof p, dir, name), &st) == 0;
}

Test(consolidate, one_file) {
    char *d = fixture_dir(), to[512];
    fixture_path(to, sizeof to, d, "whole");
    cr_assert_eq(dtr_checkpoint_consolidate(DTR_TEST_DATA "/sharded", to, 0), DTR_OK, "%s",
                 dtr_last_error());
    cr_expect(exists(to, "model.safetensors"));
    cr_expect(!exists(to, "model.safetensors.index.json"));
    expect_same(DTR_TEST_DATA "/sharded", to);
    free(d);
}

Test(consolidate, several_files_and_an_index) {
    char *d = fixture_dir(), to[512];
    fixture_path(to, sizeof to, d, "split");
    cr_assert_eq(dtr_checkpoint_consolidate(DTR_TEST_DATA "/py_model.safetensors", to, 100),
                 DTR_OK, "%s", dtr_last_error());
    cr_expect(exists(to, "model.safetensors.index.json"));
    cr_expect(exists(to, "model-00001-of-00002.safetensors") ||
              !exists(to, "model.safetensors"), "the split files are named k-of-n");
    expect_same(DTR_TEST_DATA "/py_model.safetensors", to);
    dtr_checkpoint_t *src = NULL, *out = NULL;
    cr_assert_eq(dtr_checkpoint_open(DTR_TEST_DATA "/py_model.safetensors", &src), DTR_OK);
    cr_assert_eq(dtr_checkpoint_open(to, &out), DTR_OK);
    int64_t total = 0;
    for (int64_t i = 0; i < dtr_checkpoint_count(src); i++) {
        dtr_checkpoint_tensor_t t;
        dtr_checkpoint_tensor(src, i, &t);
        total += t.bytes;
    }
    char want[32];
    snprintf(want, sizeof want, "%lld", (long long)total);
    const char *got = dtr_checkpoint_metadata(out, "total_size");
    cr_expect(got != NULL && strcmp(got, want) == 0, "total_size %s, want %s", got, want);
    const char *fmt = dtr_checkpoint_metadata(src, "format");
    if (fmt != NULL) cr_expect_str_eq(dtr_checkpoint_metadata(out, "format"), fmt);
    int file_of[64], nfiles = 0;
    cr_assert_eq(dtr_checkpoint_consolidate_plan(src, 100, file_of, &nfiles), DTR_OK);
    cr_expect_gt(nfiles, 1);
    for (int64_t i = 1; i < dtr_checkpoint_count(src); i++)
        cr_expect(file_of[i] == file_of[i - 1] || file_of[i] == file_of[i - 1] + 1,
                  "files in order");
    dtr_checkpoint_close(src);
    dtr_checkpoint_close(out);
    free(d);
}

Test(consolidate, unhappy_paths) {
    char *d = fixture_dir(), to[512], keep[512];
    cr_expect_eq(dtr_checkpoint_consolidate(NULL, d, 0), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "from: must not be NULL") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_checkpoint_consolidate(DTR_TEST_DATA "/sharded", d, -1),
                 DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "max_file_bytes: -1 is negative") != NULL, "%s",
              dtr_last_error());
    /* a non-empty target: refused by name, its file untouched */
    char *k = fixture_raw(d, "keep.txt", "mine", 4);
    cr_expect_eq(dtr_checkpoint_consolidate(DTR_TEST_DATA "/sharded", d, 0),
                 DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "exists and is not empty") != NULL, "%s", dtr_last_error());
    FILE *f = fopen(fixture_path(keep, sizeof keep, d, "keep.txt"), "rb");
    char buf[8] = "";
    cr_assert(f != NULL && fread(buf, 1, 8, f) == 4);
    fclose(f);
    cr_expect_eq(memcmp(buf, "mine", 4), 0);
    cr_expect(!exists(d, "model.safetensors"));
    /* a source that cannot be read: the target is not made */
    fixture_path(to, sizeof to, d, "never");
    cr_expect_eq(dtr_checkpoint_consolidate("/nonexistent/x.safetensors", to, 0), DTR_ERR_IO);
    cr_expect(!exists(d, "never"));
    int file_of[4], n = 0;
    cr_expect_eq(dtr_checkpoint_consolidate_plan(NULL, 0, file_of, &n), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_checkpoint_consolidate_file(NULL, d, file_of, 1, 0), DTR_ERR_INVALID_ARGUMENT);
    dtr_checkpoint_t *ck = NULL;
    cr_assert_eq(dtr_checkpoint_open(DTR_TEST_DATA "/sharded", &ck), DTR_OK);
    cr_expect_eq(dtr_checkpoint_consolidate_file(ck, d, file_of, 2, 2), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "k: file 2 of 2") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_checkpoint_write_index(ck, NULL, file_of, 1), DTR_ERR_INVALID_ARGUMENT);
    dtr_checkpoint_close(ck);
    free(k);
    free(d);
}
