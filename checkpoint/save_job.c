/*
 * Saving on a mesh as one collective call (dtr_checkpoint_save): the arguments agreed, each
 * rank's file (save.c), the records gathered, the manifest written by the mesh's first
 * rank, and on any failure every file taken back. The collectives are dtr_all_reduce over
 * every dim of the mesh, on the context's backend.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/internal.h"
#include "runtime/runtime.h"

static const char *const F = "dtr_checkpoint_save";

/* One save in progress on this rank. */
typedef struct {
    dtr_context_t *ctx;
    const dtr_mesh_t *mesh;
    unsigned dims;  /* every dim of the mesh */
    int rank;       /* in the job */
    int64_t index;  /* in the mesh */
    int64_t nranks; /* of the mesh */
    const char *dir;
    bool made; /* this rank made dir */
} dtr__ck_job_t;

/* Every rank's verdict: v[0] any failed, v[1] the first failing mesh index (as nranks - it),
 * v[2..] what the caller adds (the largest); one all-reduce MAX over the mesh. */
static dtr_status_t dtr__ck_agree(dtr__ck_job_t *j, bool bad, int64_t *v, int n) {
    v[0] = bad;
    v[1] = bad ? j->nranks - j->index : 0;
    DTR_CHECK_AS(dtr_all_reduce(j->ctx, j->mesh, j->dims, v, v, n, DTR_I64, DTR_REDUCE_MAX), F);
    return DTR_OK;
}

/* The status of a rank that did its part while another failed. */
static dtr_status_t dtr__ck_remote(const dtr__ck_job_t *j, const int64_t *v, const char *what) {
    int64_t at = j->nranks - v[1], coord[DTR_MAX_MESH_DIMS] = {0};
    int rank = -1;
    for (int d = dtr_mesh_ndims(j->mesh) - 1, k = (int)at; d >= 0; d--) {
        coord[d] = k % dtr_mesh_size(j->mesh, d);
        k /= (int)dtr_mesh_size(j->mesh, d);
    }
    (void)dtr_mesh_rank_at(j->mesh, coord, &rank);
    return dtr__error(DTR_ERR_REMOTE, F, "rank %d of the mesh failed %s (its own error says why); "
                      "nothing was saved", rank, what);
}

/* This rank's arguments: dir a directory that is empty or absent (then made), items on the
 * mesh. Writes nothing. */
static dtr_status_t dtr__ck_job_args(const dtr__ck_job_t *j, int64_t nitems,
                                     const dtr_checkpoint_item_t *items) {
    if (j->dir == NULL || j->dir[0] == '\0')
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "dir: must be a directory's path");
    if (nitems < 1 || items == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "nitems: %lld (1 or more, with items)",
                          (long long)nitems);
    for (int64_t i = 0; i < nitems; i++)
        if (items[i].name == NULL || items[i].spec == NULL || items[i].spec->mesh == NULL ||
            !dtr_mesh_equal(items[i].spec->mesh, j->mesh))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "items[%lld]: %s", (long long)i,
                              items[i].name == NULL ? "name is NULL"
                              : items[i].spec == NULL ? "spec is NULL"
                                                      : "its spec is not on the mesh saved on");
    int64_t coord[DTR_MAX_MESH_DIMS]; /* (what save_rank refuses, refused before anything) */
    dtr_status_t st = dtr__ck_save_args(j->rank, nitems, items, coord);
    if (st != DTR_OK) return dtr__error_as(st, F);
    struct stat s;
    if (stat(j->dir, &s) != 0)
        return errno == ENOENT ? DTR_OK
                               : dtr__error(DTR_ERR_IO, F, "dir: %s: %s", j->dir, strerror(errno));
    if (!S_ISDIR(s.st_mode))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "dir: %s is not a directory", j->dir);
    DIR *d = opendir(j->dir);
    if (d == NULL) return dtr__error(DTR_ERR_IO, F, "dir: %s: %s", j->dir, strerror(errno));
    bool empty = true;
    for (struct dirent *e; empty && (e = readdir(d)) != NULL;)
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty ? DTR_OK
                 : dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "dir: %s is not empty (a checkpoint "
                              "is saved into a new or empty directory)", j->dir);
}

/* Takes this rank's file back (and the manifest on the first rank), then, once every rank
 * has, the directory where this rank made it. */
static void dtr__ck_job_undo(dtr__ck_job_t *j) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%05lld-of-%05lld.safetensors", j->dir,
             (long long)j->index, (long long)j->nranks);
    unlink(path);
    if (j->index == 0) {
        snprintf(path, sizeof path, "%s/" DTR__CK_MANIFEST, j->dir);
        unlink(path);
    }
    int64_t v[2];
    (void)dtr__ck_agree(j, false, v, 2); /* every file gone before any rmdir */
    if (j->made) rmdir(j->dir);
}

/* Every rank's record (JSON text, NULL for none) into one buffer of nranks slots of `slot`
 * bytes, NUL padded: an all-reduce SUM of int64 words where only the owner's are not 0. */
static dtr_status_t dtr__ck_gather(dtr__ck_job_t *j, const char *record, int64_t slot,
                                   char **all) {
    int64_t words = j->nranks * (slot / 8);
    int64_t *buf = calloc((size_t)words, sizeof *buf);
    if (buf == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "the records: %lld bytes",
                          (long long)(words * 8));
    if (record != NULL) memcpy((char *)buf + j->index * slot, record, strlen(record));
    dtr_status_t st = dtr_all_reduce(j->ctx, j->mesh, j->dims, buf, buf, words, DTR_I64,
                                     DTR_REDUCE_SUM);
    if (st != DTR_OK) {
        free(buf);
        return dtr__error_as(st, F);
    }
    *all = (char *)buf;
    return DTR_OK;
}

/* The records gathered and the manifest written on the mesh's first rank; v[2] the
 * longest record. */
static dtr_status_t dtr__ck_job_manifest(dtr__ck_job_t *j, const char *record, int64_t longest,
                                         int64_t nitems, const dtr_checkpoint_item_t *items) {
    int64_t slot = (longest + 1 + 7) / 8 * 8;
    char *all = NULL;
    DTR_CHECK(dtr__ck_gather(j, record, slot, &all));
    dtr_status_t st = DTR_OK;
    if (j->index == 0) {
        const char **recs = calloc((size_t)j->nranks, sizeof *recs);
        if (recs == NULL) st = dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "the records");
        for (int64_t r = 0; recs != NULL && r < j->nranks; r++)
            recs[r] = all[r * slot] != '\0' ? all + r * slot : NULL;
        if (st == DTR_OK)
            st = dtr_checkpoint_save_manifest(j->dir, nitems, items, recs, (int)j->nranks);
        if (st != DTR_OK) st = dtr__error_as(st, F);
        free(recs);
    }
    free(all);
    return st;
}

/* FNV-1a over a string's bytes and its end. */
static uint64_t dtr__ck_text_hash(uint64_t h, const char *s) {
    for (; *s != '\0'; s++) h = dtr__fnv(h, (unsigned char)*s);
    return dtr__fnv(h, -1);
}

/* What every rank must pass alike: the directory, the items' names and specs (not their
 * blocks) and the metadata. */
static int64_t dtr__ck_items_hash(const char *dir, int64_t nitems,
                                  const dtr_checkpoint_item_t *items,
                                  const char *const *metadata) {
    uint64_t h = dtr__ck_text_hash(dtr__fnv(0xcbf29ce484222325ull, nitems), dir);
    for (int k = 0; metadata != NULL && metadata[k] != NULL; k++)
        h = dtr__ck_text_hash(h, metadata[k]);
    for (int64_t i = 0; i < nitems; i++) {
        h = dtr__ck_text_hash(h, items[i].name);
        const dtr_spec_t *s = items[i].spec;
        h = dtr__fnv(dtr__fnv(h, s->dtype), s->ndim);
        for (int d = 0; d < s->ndim; d++) h = dtr__fnv(h, s->shape[d]);
        for (int k = 0; k < dtr_mesh_ndims(s->mesh); k++)
            h = dtr__fnv(dtr__fnv(dtr__fnv(h, s->placements[k].kind), s->placements[k].dim),
                         s->placements[k].order);
    }
    return (int64_t)(h >> 2); /* (its negation fits) */
}

dtr_status_t dtr_checkpoint_save(dtr_context_t *ctx, const dtr_mesh_t *mesh, const char *dir,
                                 int64_t nitems, const dtr_checkpoint_item_t *items,
                                 dtr_checkpoint_fill_fn fill, void *arg,
                                 const char *const *metadata) {
    DTR_CHECK_PTR(ctx, F);
    DTR_CHECK_PTR(mesh, F);
    dtr__ck_job_t j = {.ctx = ctx, .mesh = mesh, .rank = dtr_context_rank(ctx), .dir = dir,
                       .nranks = dtr_mesh_nranks(mesh),
                       .dims = (1u << dtr_mesh_ndims(mesh)) - 1u};
    if (dtr_mesh_group_index(mesh, j.dims, j.rank, &j.index) != DTR_OK)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "mesh: rank %d of the context is not on "
                          "it (only the mesh's ranks call)", j.rank);
    /* 1. the arguments, agreed before anything is written */
    dtr_status_t mine = dtr__ck_job_args(&j, nitems, items);
    int64_t h = mine == DTR_OK ? dtr__ck_items_hash(dir, nitems, items, metadata) : 0;
    int64_t v[4] = {0, 0, h, -h};
    DTR_CHECK(dtr__ck_agree(&j, mine != DTR_OK, v, 4));
    if (mine != DTR_OK) return mine;
    if (v[0]) return dtr__ck_remote(&j, v, "its arguments");
    if (v[2] != h || v[3] != -h)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "the ranks' arguments differ (dir, the "
                          "items' names, shapes, dtypes or placements, or the metadata); "
                          "nothing was saved");
    /* 2. each rank's file */
    if (mkdir(dir, 0777) == 0) j.made = true;
    else if (errno != EEXIST) mine = dtr__error(DTR_ERR_IO, F, "dir: %s: %s", dir, strerror(errno));
    char *record = NULL;
    if (mine == DTR_OK)
        mine = dtr_checkpoint_save_rank_meta(dir, j.rank, nitems, items, fill, arg, metadata,
                                             &record);
    if (mine != DTR_OK) mine = dtr__error_as(mine, F);
    v[2] = record != NULL ? (int64_t)strlen(record) : 0;
    dtr_status_t st = dtr__ck_agree(&j, mine != DTR_OK, v, 3);
    if (st == DTR_OK && !v[0]) {
        /* 3. the manifest, from every rank's record */
        mine = dtr__ck_job_manifest(&j, record, v[2], nitems, items);
        st = dtr__ck_agree(&j, mine != DTR_OK, v, 2);
    }
    free(record);
    if (st != DTR_OK) return st; /* the job's backend failed: nothing is in step to undo */
    if (v[0]) dtr__ck_job_undo(&j);
    if (mine != DTR_OK) return mine;
    return v[0] ? dtr__ck_remote(&j, v, "writing its file or the manifest") : DTR_OK;
}
