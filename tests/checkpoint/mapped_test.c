/*
 * Blocks of short rows copied out of a mapping of the file (checkpoint/read.c): the rows'
 * bytes only, in one system call per 16 MiB window, every value where it belongs, across a
 * window's edge; long runs still by pread; DTR_CHECKPOINT_MMAP=0 back to preadv with the
 * gaps; and a saved checkpoint's pieces checked against their checksums on that path (a
 * flipped byte named).
 */
#include "tests/checkpoint/fixture.h"

#include "checkpoint/dtr_checkpoint.h"
#include "dtr.h"

#include <sys/stat.h>

/* A file of one f32 tensor "big" (rows x cols) whose element k is k * 0.25 - 100. */
static char *big_file(const char *dir, int64_t rows, int64_t cols) {
    int64_t n = rows * cols;
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t k = 0; k < n; k++) v[k] = (float)k * 0.25f - 100;
    char json[160];
    snprintf(json, sizeof json, "{\"big\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],"
                                "\"data_offsets\":[0,%lld]}}",
             (long long)rows, (long long)cols, (long long)(n * 4));
    char *p = fixture_file(dir, "big.safetensors", json, -1, v, (size_t)n * 4);
    free(v);
    return p;
}

typedef struct {
    int64_t reads, file_bytes, bytes;
} got_t;

/* Every rank's block of "big" under (mesh, placements), each value checked; the largest
 * reads and file bytes of a rank, and its bytes. */
static got_t check_blocks(dtr_checkpoint_t *ck, const char *mesh_text, const char *pl_text,
                          int64_t rows, int64_t cols) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse(mesh_text, NULL, 0, &mesh), DTR_OK);
    dtr_placement_t pl[DTR_MAX_MESH_DIMS];
    int n = 0;
    cr_assert_eq(dtr_placements_parse(pl_text, pl, DTR_MAX_MESH_DIMS, &n), DTR_OK);
    int64_t shape[2] = {rows, cols};
    dtr_spec_t spec;
    cr_assert_eq(dtr_spec_init(&spec, mesh, pl, n, shape, 2, DTR_F32), DTR_OK);
    got_t most = {0, 0, 0};
    for (int r = 0; r < dtr_mesh_nranks(mesh); r++) {
        dtr_layout_t lay;
        dtr_spec_layout(&spec, r, &lay);
        float *out = malloc((size_t)lay.bytes + 4);
        out[lay.numel] = 12345.0f;
        dtr_checkpoint_read_stats_t st;
        cr_assert_eq(dtr_checkpoint_read_block(ck, 0, &spec, r, out, (size_t)lay.bytes, &st),
                     DTR_OK, "%s %s rank %d: %s", mesh_text, pl_text, r, dtr_last_error());
        for (int64_t e = 0; e < lay.numel; e++) {
            int64_t row = lay.global_offset[0] + e / lay.local_shape[1];
            int64_t col = lay.global_offset[1] + e % lay.local_shape[1];
            cr_assert_eq(out[e], (float)(row * cols + col) * 0.25f - 100,
                         "%s %s rank %d element %lld", mesh_text, pl_text, r, (long long)e);
        }
        cr_assert_eq(out[lay.numel], 12345.0f, "rank %d: written past its block", r);
        cr_expect_eq(st.bytes, lay.bytes);
        if (st.reads > most.reads) most.reads = st.reads;
        if (st.file_bytes > most.file_bytes) most.file_bytes = st.file_bytes;
        if (lay.bytes > most.bytes) most.bytes = lay.bytes;
        free(out);
    }
    dtr_mesh_destroy(mesh);
    return most;
}

Test(mapped, short_rows_from_a_mapping_long_runs_by_pread) {
    char *dir = fixture_dir(), *p = big_file(dir, 900, 600);
    dtr_checkpoint_t *ck;
    cr_assert_eq(dtr_checkpoint_open(p, &ck), DTR_OK, "%s", dtr_last_error());
    static const char *const shortrows[][2] = {{"3", "S(1)"}, {"2x2", "S(0),S(1)"},
                                               {"2x2", "S(1),S(0)"}, {"2x3", "S(1),S(1)"}};
    for (size_t c = 0; c < 4; c++) {
        got_t g = check_blocks(ck, shortrows[c][0], shortrows[c][1], 900, 600);
        /* one window (the file is under 16 MiB), only the rows' bytes copied */
        cr_expect(g.reads == 1 && g.file_bytes == g.bytes, "%s %s: %lld reads, %lld file bytes "
                  "for %lld", shortrows[c][0], shortrows[c][1], (long long)g.reads,
                  (long long)g.file_bytes, (long long)g.bytes);
    }
    got_t g = check_blocks(ck, "4", "S(0)", 900, 600); /* one run: one pread */
    cr_expect(g.reads == 1 && g.file_bytes == g.bytes);
    dtr_checkpoint_close(ck);
    free(p);
    free(dir);
}

/* 2600 x 2048 f32 (21.3 MB): a rank's rows of S(1) span two 16 MiB windows. */
Test(mapped, across_a_window_edge) {
    char *dir = fixture_dir(), *p = big_file(dir, 2600, 2048);
    dtr_checkpoint_t *ck;
    cr_assert_eq(dtr_checkpoint_open(p, &ck), DTR_OK, "%s", dtr_last_error());
    got_t g = check_blocks(ck, "2", "S(1)", 2600, 2048);
    cr_expect(g.reads == 2 && g.file_bytes == g.bytes, "%lld windows, %lld file bytes",
              (long long)g.reads, (long long)g.file_bytes);
    g = check_blocks(ck, "2x2", "S(1),S(0)", 2600, 2048);
    cr_expect(g.reads <= 2 && g.file_bytes == g.bytes);
    dtr_checkpoint_close(ck);
    remove(p);
    free(p);
    free(dir);
}

Test(mapped, turned_off_by_the_environment) {
    setenv("DTR_CHECKPOINT_MMAP", "0", 1); /* (each test runs in its own process) */
    char *dir = fixture_dir(), *p = big_file(dir, 900, 600);
    dtr_checkpoint_t *ck;
    cr_assert_eq(dtr_checkpoint_open(p, &ck), DTR_OK, "%s", dtr_last_error());
    got_t g = check_blocks(ck, "3", "S(1)", 900, 600);
    /* preadv batches: the gaps between a rank's rows are read too */
    cr_expect(g.reads >= 2 && g.file_bytes > g.bytes, "%lld reads, %lld file bytes for %lld",
              (long long)g.reads, (long long)g.file_bytes, (long long)g.bytes);
    dtr_checkpoint_close(ck);
    free(p);
    free(dir);
}

/* Saved as S(1) on 2 ranks, read whole (R on 1): each piece's short rows come through the
 * mapping and are checked against the manifest's checksum; a flipped byte is named. */
Test(mapped, saved_pieces_checked_on_the_mapped_path) {
    char *dir = fixture_dir(), *p = big_file(dir, 900, 600);
    dtr_checkpoint_t *ck;
    cr_assert_eq(dtr_checkpoint_open(p, &ck), DTR_OK);
    dtr_mesh_t *m2, *m1;
    dtr_mesh_parse("2", NULL, 0, &m2);
    dtr_mesh_parse("1", NULL, 0, &m1);
    dtr_placement_t s1, r;
    int n;
    dtr_placements_parse("S(1)", &s1, 1, &n);
    dtr_placements_parse("R", &r, 1, &n);
    int64_t shape[2] = {900, 600};
    dtr_spec_t saved, whole;
    dtr_spec_init(&saved, m2, &s1, 1, shape, 2, DTR_F32);
    dtr_spec_init(&whole, m1, &r, 1, shape, 2, DTR_F32);
    char out_dir[512];
    snprintf(out_dir, sizeof out_dir, "%s/saved", dir);
    cr_assert_eq(mkdir(out_dir, 0755), 0);
    char *records[2];
    for (int rank = 0; rank < 2; rank++) {
        dtr_layout_t lay;
        dtr_spec_layout(&saved, rank, &lay);
        void *blk = malloc((size_t)lay.bytes);
        cr_assert_eq(dtr_checkpoint_read_block(ck, 0, &saved, rank, blk, (size_t)lay.bytes,
                                               NULL), DTR_OK);
        dtr_checkpoint_item_t item = {"big", &saved, blk};
        cr_assert_eq(dtr_checkpoint_save_rank(out_dir, rank, 1, &item, NULL, NULL,
                                              &records[rank]),
                     DTR_OK, "%s", dtr_last_error());
        free(blk);
    }
    dtr_checkpoint_item_t item = {"big", &saved, NULL};
    cr_assert_eq(dtr_checkpoint_save_manifest(out_dir, 1, &item, (const char *const *)records,
                                              2), DTR_OK, "%s", dtr_last_error());
    dtr_checkpoint_close(ck);
    cr_assert_eq(dtr_checkpoint_open(out_dir, &ck), DTR_OK, "%s", dtr_last_error());
    got_t g = check_blocks(ck, "1", "R", 900, 600);
    cr_expect(g.reads == 2 && g.file_bytes == g.bytes, "%lld windows", (long long)g.reads);
    dtr_checkpoint_close(ck);
    /* one byte of rank 1's data flipped (the file's last byte: its last element) */
    char path[600];
    snprintf(path, sizeof path, "%s/rank-00001-of-00002.safetensors", out_dir);
    FILE *f = fopen(path, "r+b");
    cr_assert(f != NULL && fseek(f, -1, SEEK_END) == 0);
    int c = fgetc(f);
    fseek(f, -1, SEEK_END);
    fputc(c ^ 0x40, f);
    fclose(f);
    cr_assert_eq(dtr_checkpoint_open(out_dir, &ck), DTR_OK, "%s", dtr_last_error());
    float *out = malloc(900 * 600 * 4);
    cr_expect_eq(dtr_checkpoint_read_block(ck, 0, &whole, 0, out, 900 * 600 * 4, NULL),
                 DTR_ERR_IO);
    cr_expect(strstr(dtr_last_error(), "rank-00001-of-00002.safetensors: tensor 'big': the "
                                       "piece at") != NULL &&
                  strstr(dtr_last_error(), "fails its checksum") != NULL,
              "%s", dtr_last_error());
    free(out);
    dtr_checkpoint_close(ck);
    free(records[0]);
    free(records[1]);
    dtr_mesh_destroy(m1);
    dtr_mesh_destroy(m2);
    free(p);
    free(dir);
}
