/*
 * dtr_checkpoint_save, the collective save, on the job's backend (mpi under mpirun, gloo
 * under tools/dtr_launch.sh: tests/support/job.h). Random cases: every rank draws the same
 * case from the seed: a mesh of 1 to 3 dims over all or the first ranks of the job, 1 to 5
 * tensors of 0 to 3 dims (empty ones among them), every dtype a file holds, random Shard
 * and Replicate placements with random shard orders. Each element's bytes are a hash of
 * its tensor and its global index; after the save every rank of the job reads every tensor
 * back whole (a spec replicated on a one-rank mesh) and its own block in the saved layout,
 * and compares every byte. Then the unhappy paths, each followed by a save that must work
 * (the job stays in step): a directory that is not empty (every rank refuses, nothing
 * touched), one rank's bad argument (that rank INVALID_ARGUMENT, the others REMOTE naming
 * it, nothing written), one rank's fill failing mid-save (every file and the directory
 * taken back).
 *
 * Usage: mpirun -n N save_job_test [--cases N] [--seed S] [--backend mpi], or
 *        tools/dtr_launch.sh -n N save_job_test --backend gloo [--cases N] [--seed S]
 * Prints the seed, each failing case (seed and case number to rerun it) and
 * "save: N passed, N failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/dtr_checkpoint.h"
#include "dtr.h"
#include "tests/support/job.h"
#include "tests/support/rand_cases.h"

#define MAXT 5

typedef struct {
    dtr_mesh_t *mesh;
    int n;
    char names[MAXT][16];
    dtr_spec_t spec[MAXT];
    char text[512];
} scase_t;

static const dtr_dtype_t DTYPES[] = {DTR_F32, DTR_F64, DTR_F16, DTR_BF16, DTR_I32,
                                     DTR_I64, DTR_U8,  DTR_F8E4M3, DTR_F8E5M2};

/* Byte b of element `at` (global row-major index) of tensor t. */
static uint8_t byte_of(int t, int64_t at, int b) {
    uint64_t x = (uint64_t)at * 0x9e3779b97f4a7c15ull + (uint64_t)t * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return (uint8_t)(x >> (8 * (b % 8)));
}

/* The block of spec at layout l, filled with byte_of. */
static void fill_block(int t, const dtr_spec_t *s, const dtr_layout_t *l, uint8_t *out) {
    int64_t item = dtr_dtype_info(s->dtype)->size, idx[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t k = 0; k < l->numel; k++) {
        int64_t at = 0;
        for (int d = 0; d < s->ndim; d++) at = at * s->shape[d] + l->global_offset[d] + idx[d];
        for (int b = 0; b < item; b++) out[k * item + b] = byte_of(t, at, b);
        for (int d = s->ndim - 1; d >= 0; d--) {
            if (++idx[d] < l->local_shape[d]) break;
            idx[d] = 0;
        }
    }
}

/* A random case on `world` ranks; false where none fits. */
static bool draw(scase_t *c, int world) {
    int nranks = pick(3) == 0 && world > 1 ? 1 + pick(world) : world;
    int64_t sizes[3];
    int md = 1 + pick(3), left = nranks;
    for (int i = 0; i < md; i++) {
        int64_t f = 1;
        for (int64_t g = left; g >= 1; g--)
            if (left % g == 0 && (i == md - 1 || pick(2) == 0)) {
                f = i == md - 1 ? left : g;
                break;
            }
        sizes[i] = f;
        left /= (int)f;
    }
    if (dtr_mesh_create(md, sizes, NULL, nranks, &c->mesh) != DTR_OK) return false;
    c->n = 1 + pick(MAXT);
    int pos = snprintf(c->text, sizeof c->text, "mesh %lld", (long long)sizes[0]);
    for (int i = 1; i < md; i++) pos += snprintf(c->text + pos, sizeof c->text - (size_t)pos, "x%lld", (long long)sizes[i]);
    for (int t = 0; t < c->n; t++) {
        int ndim = pick(4);
        int64_t shape[3];
        for (int d = 0; d < ndim; d++) shape[d] = pick(8) == 0 ? 0 : 1 + pick(pick(3) == 0 ? 40 : 9);
        dtr_placement_t pl[3];
        for (int i = 0; i < md; i++) pl[i] = pick(3) == 0 || ndim == 0 ? dtr_replicate() : dtr_shard(pick(ndim));
        random_orders(md, pl);
        dtr_dtype_t dt = DTYPES[pick((int)(sizeof DTYPES / sizeof DTYPES[0]))];
        snprintf(c->names[t], sizeof c->names[t], "t%d.w", t);
        if (dtr_spec_init(&c->spec[t], c->mesh, pl, md, shape, ndim, dt) != DTR_OK) return false;
        char ps[64] = "", ss[64] = "";
        dtr_placements_format(pl, md, ps, sizeof ps);
        dtr_shape_format(shape, ndim, ss, sizeof ss);
        pos += snprintf(c->text + pos, sizeof c->text - (size_t)pos, "; %s %s %s %s", c->names[t],
                        ss, dtr_dtype_name(dt), ps);
    }
    return true;
}

/* Every tensor read back whole and as this rank's block; the count of bad bytes. */
static int64_t verify(const scase_t *c, const char *dir, int rank, char *why, size_t len) {
    dtr_checkpoint_t *ck = NULL;
    if (dtr_checkpoint_open(dir, &ck) != DTR_OK) {
        snprintf(why, len, "open: %s", dtr_last_error());
        return 1;
    }
    int64_t bad = dtr_checkpoint_count(ck) != c->n;
    dtr_mesh_t *one = NULL;
    int64_t one_size = 1;
    int me = rank;
    dtr_mesh_create(1, &one_size, &me, 1, &one);
    for (int t = 0; t < c->n && !bad; t++) {
        int64_t index = -1;
        const dtr_spec_t *s = &c->spec[t];
        dtr_placement_t r = dtr_replicate();
        dtr_spec_t whole;
        dtr_spec_init(&whole, one, &r, 1, s->shape, s->ndim, s->dtype);
        dtr_layout_t lw, lb;
        dtr_spec_layout(&whole, rank, &lw);
        bool on = dtr_spec_layout(s, rank, &lb) == DTR_OK;
        uint8_t *got = malloc((size_t)lw.bytes + 1), *want = malloc((size_t)lw.bytes + 1);
        if (dtr_checkpoint_find(ck, c->names[t], &index) != DTR_OK ||
            dtr_checkpoint_read_block(ck, index, &whole, rank, got, (size_t)lw.bytes, NULL) != DTR_OK) {
            snprintf(why, len, "%s: read whole: %s", c->names[t], dtr_last_error());
            bad++;
        } else {
            fill_block(t, s, &lw, want);
            for (int64_t b = 0; b < lw.bytes; b++) bad += got[b] != want[b];
            if (bad) snprintf(why, len, "%s: %lld bytes of the whole differ", c->names[t], (long long)bad);
        }
        if (!bad && on) {
            if (dtr_checkpoint_read_block(ck, index, s, rank, got, (size_t)lb.bytes, NULL) != DTR_OK) {
                snprintf(why, len, "%s: read block: %s", c->names[t], dtr_last_error());
                bad++;
            }
            fill_block(t, s, &lb, want);
            for (int64_t b = 0; b < lb.bytes && !bad; b++) bad += got[b] != want[b];
        }
        free(got);
        free(want);
    }
    dtr_mesh_destroy(one);
    dtr_checkpoint_close(ck);
    return bad;
}

/* This rank's blocks of c (NULL where off the mesh: the caller does not save). */
static uint8_t **blocks_of(const scase_t *c, int rank, dtr_checkpoint_item_t *items) {
    uint8_t **b = calloc(MAXT, sizeof *b);
    for (int t = 0; t < c->n; t++) {
        dtr_layout_t l;
        if (dtr_spec_layout(&c->spec[t], rank, &l) != DTR_OK) continue;
        b[t] = malloc((size_t)l.bytes + 1);
        fill_block(t, &c->spec[t], &l, b[t]);
        items[t] = (dtr_checkpoint_item_t){.name = c->names[t], .spec = &c->spec[t], .data = b[t]};
    }
    return b;
}

static void free_blocks(uint8_t **b) {
    for (int t = 0; t < MAXT; t++) free(b[t]);
    free(b);
}

static int fails_on_one(void *arg, int64_t item, void *block, size_t bytes) {
    (void)item;
    memset(block, 0, bytes);
    return *(int *)arg ? DTR_ERR_IO : DTR_OK;
}

static bool absent(const char *p) {
    struct stat s;
    return stat(p, &s) != 0;
}

/* A case's verdict over the job: printed where it failed, tallied once. */
#define TALLY(what)                                                                     \
    do {                                                                                \
        if (bad) printf("FAIL: rank %d: %s: %s\n", rank, what, why);                    \
        if (test_job_max(job, bad)) (*failed)++; else (*passed)++;                      \
    } while (0)

/* Arguments that differ between ranks (one rank's item named otherwise, its directory or
 * its metadata): every rank refuses alike, and nothing is written. */
static void differing(const test_job_t *job, const char *base, const dtr_mesh_t *mesh,
                      const scase_t *c, dtr_checkpoint_item_t *items, const void *block, int odd,
                      int *passed, int *failed) {
    int rank = job->rank, world = job->world, bad;
    char dir[600], why[512] = "";
    dtr_status_t st;
    /* the ranks' items differ (one rank names its tensor otherwise), or their directories or
     * metadata do: every rank refuses */
    snprintf(dir, sizeof dir, "%s/differ", base);
    dtr_checkpoint_item_t renamed = {.name = "v", .spec = &c->spec[0], .data = block};
    st = dtr_checkpoint_save(job->ctx, mesh, dir, 1, rank == odd ? &renamed : items, NULL, NULL,
                             NULL);
    bad = world > 1 && (st != DTR_ERR_INVALID_ARGUMENT ||
                        strstr(dtr_last_error(), "the ranks' arguments differ") == NULL);
    bad |= world == 1 && st != DTR_OK;
    snprintf(why, sizeof why, "status %s: %s", dtr_status_name(st), dtr_last_error());
    test_job_max(job, 0);
    bad |= world > 1 && !absent(dir);
    TALLY("items that differ between ranks fail every rank before anything is written");

    /* one rank's directory or metadata otherwise: every rank refuses, nothing written */
    char dir2[640];
    snprintf(dir, sizeof dir, "%s/dir_differs", base);
    snprintf(dir2, sizeof dir2, "%s/dir_differs_too", base);
    const char *meta_a[] = {"k", "a", NULL}, *meta_b[] = {"k", "b", NULL};
    for (int what = 0; what < 2; what++) {
        st = dtr_checkpoint_save(job->ctx, mesh, what == 0 && rank == odd ? dir2 : dir, 1, items,
                                 NULL, NULL, what == 1 && rank == odd ? meta_b : meta_a);
        bad = world > 1 && (st != DTR_ERR_INVALID_ARGUMENT ||
                            strstr(dtr_last_error(), "the ranks' arguments differ") == NULL);
        bad |= world == 1 && st != DTR_OK;
        snprintf(why, sizeof why, "status %s: %s", dtr_status_name(st), dtr_last_error());
        test_job_max(job, 0);
        bad |= world > 1 && (!absent(dir) || !absent(dir2));
        TALLY(what == 0 ? "a directory that differs between ranks fails every rank"
                        : "metadata that differs between ranks fails every rank");
        if (world == 1) { /* (one rank saved: clear for the next) */
            char cmd[1400];
            snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, dir2);
            if (system(cmd) != 0) printf("cannot remove %s\n", dir);
        }
    }

}

/* The unhappy paths on a mesh of every rank, each followed by a save that works. */
static void unhappy(const test_job_t *job, const char *base, int *passed, int *failed) {
    int rank = job->rank, world = job->world;
    int64_t n = world;
    dtr_mesh_t *mesh = NULL, *other = NULL;
    dtr_mesh_create(1, &n, NULL, n, &mesh);
    int64_t one = 1;
    int past = world; /* a mesh of a rank past the job's: never the mesh saved on */
    dtr_mesh_create(1, &one, &past, 1, &other);
    int64_t shape[2] = {2 * n + 1, 3};
    dtr_placement_t s0 = dtr_shard(0), r = dtr_replicate();
    scase_t c = {.mesh = mesh, .n = 1};
    snprintf(c.names[0], sizeof c.names[0], "w");
    dtr_spec_init(&c.spec[0], mesh, &s0, 1, shape, 2, DTR_F32);
    dtr_spec_t elsewhere;
    dtr_spec_init(&elsewhere, other, &r, 1, shape, 2, DTR_F32);
    dtr_checkpoint_item_t items[MAXT];
    uint8_t **b = blocks_of(&c, rank, items);
    char dir[600], why[512] = "", stray[700];
    int bad;

    /* a directory that is not empty: every rank refuses it, and it is left as it was */
    snprintf(dir, sizeof dir, "%s/full", base);
    snprintf(stray, sizeof stray, "%s/keep.txt", dir);
    if (rank == 0) {
        mkdir(dir, 0777);
        FILE *f = fopen(stray, "w");
        if (f) fputs("mine\n", f), fclose(f);
    }
    test_job_max(job, 0);
    dtr_status_t st = dtr_checkpoint_save(job->ctx, mesh, dir, 1, items, NULL, NULL, NULL);
    bad = st != DTR_ERR_INVALID_ARGUMENT || strstr(dtr_last_error(), "is not empty") == NULL;
    snprintf(why, sizeof why, "status %s: %s", dtr_status_name(st), dtr_last_error());
    test_job_max(job, 0);
    char rank0[700];
    snprintf(rank0, sizeof rank0, "%s/rank-00000-of-%05d.safetensors", dir, world);
    bad |= absent(stray) || !absent(rank0);
    TALLY("a directory that is not empty is refused on every rank and left as it was");

    /* one rank's item on another mesh: it fails INVALID_ARGUMENT, the others REMOTE naming
     * it; nothing is written */
    int odd = world > 1 ? 1 : 0;
    snprintf(dir, sizeof dir, "%s/one_bad", base);
    dtr_checkpoint_item_t wrong = {.name = "w", .spec = &elsewhere, .data = b[0]};
    st = dtr_checkpoint_save(job->ctx, mesh, dir, 1, rank == odd ? &wrong : items, NULL, NULL, NULL);
    char named[64];
    snprintf(named, sizeof named, "rank %d of the mesh failed its arguments", odd);
    bad = rank == odd ? st != DTR_ERR_INVALID_ARGUMENT || strstr(dtr_last_error(), "items[0]") == NULL
                      : st != DTR_ERR_REMOTE || strstr(dtr_last_error(), named) == NULL;
    snprintf(why, sizeof why, "status %s: %s", dtr_status_name(st), dtr_last_error());
    test_job_max(job, 0);
    bad |= !absent(dir);
    TALLY("one rank's item on another mesh fails every rank before anything is written");

    differing(job, base, mesh, &c, items, b[0], odd, passed, failed);

    /* one rank's fill failing mid-save: every file and the directory taken back */
    snprintf(dir, sizeof dir, "%s/fill_fails", base);
    dtr_checkpoint_item_t by_fill[1] = {{.name = "w", .spec = &c.spec[0], .data = NULL}};
    int mine = rank == 0; /* (the last rank may own an empty block, which no fill writes) */
    st = dtr_checkpoint_save(job->ctx, mesh, dir, 1, by_fill, fails_on_one, &mine, NULL);
    bad = mine ? st == DTR_OK : st != DTR_ERR_REMOTE || strstr(dtr_last_error(), "writing its file") == NULL;
    snprintf(why, sizeof why, "status %s: %s", dtr_status_name(st), dtr_last_error());
    test_job_max(job, 0);
    bad |= !absent(dir);
    TALLY("one rank's fill failing takes back every file and the directory");

    /* and the job is in step: a save with metadata works and reads back */
    snprintf(dir, sizeof dir, "%s/after", base);
    const char *meta[] = {"format", "pt", NULL};
    st = dtr_checkpoint_save(job->ctx, mesh, dir, 1, items, NULL, NULL, meta);
    bad = st != DTR_OK;
    snprintf(why, sizeof why, "%s", dtr_last_error());
    if (!bad) {
        test_job_max(job, 0);
        bad = verify(&c, dir, rank, why, sizeof why) != 0;
        dtr_checkpoint_t *ck = NULL;
        if (!bad && dtr_checkpoint_open(dir, &ck) == DTR_OK) {
            const char *v = dtr_checkpoint_metadata(ck, "format");
            bad = v == NULL || strcmp(v, "pt") != 0;
            snprintf(why, sizeof why, "metadata format: %s", v ? v : "(none)");
            dtr_checkpoint_close(ck);
        }
    }
    TALLY("after them a save with metadata works and reads back byte for byte");
    free_blocks(b);
    dtr_mesh_destroy(mesh);
    dtr_mesh_destroy(other);
}

/* On a mesh of the job's ranks from 1 (the last first), each file is named by its rank's
 * place on the mesh: rank-00000-of-NNNNN is the mesh's first rank's. */
static void names_on_a_part(const test_job_t *job, const char *base, int *passed, int *failed) {
    int rank = job->rank, world = job->world, n = world > 1 ? world - 1 : 1, ranks[64];
    for (int k = 0; k < n; k++) ranks[k] = world > 1 ? world - 1 - k : 0;
    int64_t size = n;
    dtr_mesh_t *mesh = NULL;
    dtr_mesh_create(1, &size, ranks, n, &mesh);
    int64_t shape[1] = {3 * n};
    dtr_placement_t s0 = dtr_shard(0);
    scase_t c = {.mesh = mesh, .n = 1};
    snprintf(c.names[0], sizeof c.names[0], "w");
    dtr_spec_init(&c.spec[0], mesh, &s0, 1, shape, 1, DTR_I32);
    dtr_checkpoint_item_t items[MAXT];
    uint8_t **b = blocks_of(&c, rank, items);
    char dir[600], why[512] = "", path[700];
    snprintf(dir, sizeof dir, "%s/names", base);
    int64_t at = -1;
    int bad = 0;
    if (dtr_mesh_group_index(mesh, 1u, rank, &at) == DTR_OK &&
        dtr_checkpoint_save(job->ctx, mesh, dir, 1, items, NULL, NULL, NULL) != DTR_OK) {
        snprintf(why, sizeof why, "save: %s", dtr_last_error());
        bad = 1;
    }
    test_job_max(job, 0);
    for (int k = 0; k < n && !bad; k++) { /* the mesh's k-th rank's file */
        snprintf(path, sizeof path, "%s/rank-%05d-of-%05d.safetensors", dir, k, n);
        if (absent(path)) snprintf(why, sizeof why, "no %s", path), bad = 1;
    }
    if (!bad) bad = verify(&c, dir, rank, why, sizeof why) != 0;
    if (bad) printf("FAIL: rank %d: file names on a part of the job: %s\n", rank, why);
    if (test_job_max(job, bad)) (*failed)++;
    else (*passed)++;
    free_blocks(b);
    dtr_mesh_destroy(mesh);
}

int main(int argc, char **argv) {
    test_job_t job;
    test_job_start(&argc, &argv, &job);
    int rank = job.rank, world = job.world, cases = 40, passed = 0, failed = 0;
    uint64_t seed = 20261129;
    for (int k = 1; k + 1 < argc; k += 2) {
        if (strcmp(argv[k], "--cases") == 0) cases = atoi(argv[k + 1]);
        if (strcmp(argv[k], "--seed") == 0) seed = strtoull(argv[k + 1], NULL, 10);
    }
    if (rank == 0) printf("seed %llu, %d ranks, backend %s\n", (unsigned long long)seed, world, job.backend);
    /* one directory every rank names alike: under TEST_TMPDIR (Bazel's), fresh */
    char base[512];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(base, sizeof base, "%s/dtr_save_job_%llu_%d_%s", tmp ? tmp : "/tmp",
             (unsigned long long)seed, world, job.backend);
    if (rank == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", base, base);
        if (system(cmd) != 0) printf("cannot make %s\n", base);
    }
    test_job_max(&job, 0);
    for (int k = 0; k < cases; k++) {
        rng_state = seed * 1000003ull + (uint64_t)k;
        scase_t c = {0};
        if (!draw(&c, world)) {
            dtr_mesh_destroy(c.mesh);
            continue;
        }
        char dir[600], why[512] = "";
        snprintf(dir, sizeof dir, "%s/case-%d", base, k);
        dtr_checkpoint_item_t items[MAXT];
        uint8_t **b = blocks_of(&c, rank, items);
        int64_t at = -1;
        bool on = dtr_mesh_group_index(c.mesh, (1u << dtr_mesh_ndims(c.mesh)) - 1u, rank, &at) == DTR_OK;
        int bad = 0;
        if (on && dtr_checkpoint_save(job.ctx, c.mesh, dir, c.n, items, NULL, NULL, NULL) != DTR_OK) {
            snprintf(why, sizeof why, "save: %s", dtr_last_error());
            bad = 1;
        }
        if (!test_job_max(&job, bad)) bad = verify(&c, dir, rank, why, sizeof why) != 0;
        if (bad) printf("FAIL seed %llu case %d: %s: rank %d: %s\n", (unsigned long long)seed, k, c.text, rank, why);
        if (test_job_max(&job, bad))
            failed++;
        else
            passed++;
        free_blocks(b);
        dtr_mesh_destroy(c.mesh);
    }
    names_on_a_part(&job, base, &passed, &failed);
    unhappy(&job, base, &passed, &failed);
    if (rank == 0) printf("save: %d passed, %d failed\n", passed, failed);
    test_job_end(&job);
    return failed > 0;
}
