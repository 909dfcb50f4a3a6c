/*
 * Consolidation: a checkpoint (any form dtr_checkpoint_open reads) into whole tensors as
 * plain safetensors files, the layout `from_pretrained` and the safetensors package load:
 * model.safetensors, or model-0000K-of-0000N.safetensors past a size with
 * model.safetensors.index.json beside them. The files are split in the checkpoint's
 * (name) order; each tensor is read whole, one at a time; the source's metadata is carried
 * over (an index's total_size computed anew).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/internal.h"

#define DTR__C "dtr_checkpoint_consolidate"

dtr_status_t dtr_checkpoint_consolidate_plan(const dtr_checkpoint_t *ck, int64_t max_file_bytes,
                                             int *file_of, int *nfiles) {
    if (ck == NULL || file_of == NULL || nfiles == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_checkpoint_consolidate_plan",
                          "%s: must not be NULL",
                          ck == NULL ? "ck" : file_of == NULL ? "file_of" : "nfiles");
    if (max_file_bytes < 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_checkpoint_consolidate_plan",
                          "max_file_bytes: %lld is negative (0: one file)",
                          (long long)max_file_bytes);
    int files = 1;
    int64_t in_file = 0;
    for (int64_t i = 0; i < dtr_checkpoint_count(ck); i++) {
        dtr_checkpoint_tensor_t t;
        dtr_checkpoint_tensor(ck, i, &t);
        if (max_file_bytes > 0 && in_file > 0 && in_file + t.bytes > max_file_bytes) {
            files++;
            in_file = 0;
        }
        in_file += t.bytes;
        file_of[i] = files - 1;
    }
    *nfiles = files;
    return DTR_OK;
}

/* The name of file k of n in dir. */
static void dtr__c_path(const char *dir, int k, int n, char *path, size_t len) {
    if (n == 1) snprintf(path, len, "%s/model.safetensors", dir);
    else snprintf(path, len, "%s/model-%05d-of-%05d.safetensors", dir, k + 1, n);
}

const char **dtr_checkpoint_metadata_carried(const dtr_checkpoint_t *ck) {
    if (ck == NULL) return NULL;
    int64_t n = dtr_checkpoint_metadata_count(ck), m = 0;
    const char **kv = n > 0 ? calloc((size_t)(2 * n + 1), sizeof *kv) : NULL;
    for (int64_t i = 0; kv != NULL && i < n; i++) {
        const char *k, *v;
        if (dtr_checkpoint_metadata_at(ck, i, &k, &v) != DTR_OK || strcmp(k, "total_size") == 0)
            continue;
        kv[m++] = k;
        kv[m++] = v;
    }
    return kv;
}

/* What the fill callback reads: item m is tensor src[m], whole, on a one-rank mesh. */
typedef struct {
    const dtr_checkpoint_t *ck;
    const int64_t *src;
    const dtr_checkpoint_item_t *items;
} dtr__c_fill_t;

static dtr_status_t dtr__c_fill(void *arg, int64_t item, void *block, size_t bytes) {
    dtr__c_fill_t *f = arg;
    return dtr_checkpoint_read_block(f->ck, f->src[item], f->items[item].spec, 0, block, bytes,
                                     NULL);
}

dtr_status_t dtr_checkpoint_consolidate_file(const dtr_checkpoint_t *ck, const char *dir,
                                             const int *file_of, int nfiles, int k) {
    const char *func = "dtr_checkpoint_consolidate_file";
    if (ck == NULL || dir == NULL || file_of == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: must not be NULL",
                          ck == NULL ? "ck" : dir == NULL ? "dir" : "file_of");
    if (nfiles < 1 || k < 0 || k >= nfiles)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "k: file %d of %d (0 <= k < nfiles)",
                          k, nfiles);
    int64_t n = dtr_checkpoint_count(ck), m = 0;
    int64_t one = 1;
    dtr_mesh_t *mesh = NULL;
    dtr_spec_t *specs = calloc((size_t)n + 1, sizeof *specs);
    dtr_checkpoint_item_t *items = calloc((size_t)n + 1, sizeof *items);
    int64_t *src = calloc((size_t)n + 1, sizeof *src);
    dtr_status_t st = specs && items && src ? dtr_mesh_create(1, &one, NULL, 0, &mesh)
                                            : dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%lld tensors",
                                                         (long long)n);
    dtr_placement_t r = {.kind = DTR_REPLICATE};
    for (int64_t i = 0; st == DTR_OK && i < n; i++) {
        if (file_of[i] != k) continue;
        dtr_checkpoint_tensor_t t;
        dtr_checkpoint_tensor(ck, i, &t);
        if (t.dtype == DTR_DTYPE_LAST ||
            dtr_spec_init(&specs[m], mesh, &r, 1, t.shape, t.ndim, t.dtype) != DTR_OK) {
            st = dtr__error(DTR_ERR_UNSUPPORTED, func, "tensor '%s': dtype %s: dtr cannot move it",
                            t.name, t.format_dtype);
            break;
        }
        items[m] = (dtr_checkpoint_item_t){t.name, &specs[m], NULL};
        src[m++] = i;
    }
    char path[4096];
    dtr__c_path(dir, k, nfiles, path, sizeof path);
    const char **meta = st == DTR_OK ? dtr_checkpoint_metadata_carried(ck) : NULL;
    dtr__c_fill_t f = {ck, src, items};
    if (st == DTR_OK) st = dtr_checkpoint_write_file_meta(path, 0, m, items, dtr__c_fill, &f, meta);
    free(meta);
    free(specs);
    free(items);
    free(src);
    dtr_mesh_destroy(mesh);
    return st;
}

dtr_status_t dtr_checkpoint_write_index(const dtr_checkpoint_t *ck, const char *dir,
                                        const int *file_of, int nfiles) {
    const char *func = "dtr_checkpoint_write_index";
    if (ck == NULL || dir == NULL || file_of == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: must not be NULL",
                          ck == NULL ? "ck" : dir == NULL ? "dir" : "file_of");
    json_t *root = json_object(), *meta = json_object(), *map = json_object();
    const char **kv = dtr_checkpoint_metadata_carried(ck);
    for (int k = 0; kv != NULL && kv[k] != NULL; k += 2)
        json_object_set_new(meta, kv[k], json_string(kv[k + 1]));
    free(kv);
    int64_t total = 0;
    for (int64_t i = 0; i < dtr_checkpoint_count(ck); i++) {
        dtr_checkpoint_tensor_t t;
        dtr_checkpoint_tensor(ck, i, &t);
        char name[64];
        dtr__c_path("", file_of[i], nfiles, name, sizeof name);
        json_object_set_new(map, t.name, json_string(name + 1)); /* (without the "/") */
        total += t.bytes;
    }
    json_object_set_new(meta, "total_size", json_integer((json_int_t)total));
    json_object_set_new(root, "metadata", meta);
    json_object_set_new(root, "weight_map", map);
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    int bad = json_dump_file(root, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0;
    int err = errno;
    if (!bad && rename(tmp, path) != 0) bad = 1, err = errno;
    json_decref(root);
    if (!bad) return DTR_OK;
    unlink(tmp);
    return dtr__error(DTR_ERR_IO, func, "%s: %s", path, strerror(err));
}

/* dir made (missing) or checked empty; *made set where this call made it. */
static dtr_status_t dtr__c_target(const char *dir, bool *made) {
    *made = false;
    DIR *d = opendir(dir);
    if (d == NULL && errno == ENOENT) {
        if (mkdir(dir, 0755) != 0)
            return dtr__error(DTR_ERR_IO, DTR__C, "to: %s: %s", dir, strerror(errno));
        *made = true;
        return DTR_OK;
    }
    if (d == NULL) return dtr__error(DTR_ERR_IO, DTR__C, "to: %s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) break;
    closedir(d);
    if (e != NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, DTR__C, "to: %s exists and is not empty",
                          dir);
    return DTR_OK;
}

/* What a failed consolidation wrote, removed (dir too where it was made). */
static void dtr__c_undo(const char *dir, int nfiles, bool made) {
    char path[4096];
    for (int k = 0; k < nfiles; k++) {
        dtr__c_path(dir, k, nfiles, path, sizeof path);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    unlink(path);
    if (made) rmdir(dir);
}

dtr_status_t dtr_checkpoint_consolidate(const char *from, const char *to,
                                        int64_t max_file_bytes) {
    if (from == NULL || to == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, DTR__C, "%s: must not be NULL",
                          from == NULL ? "from" : "to");
    if (max_file_bytes < 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, DTR__C,
                          "max_file_bytes: %lld is negative (0: one file)",
                          (long long)max_file_bytes);
    dtr_checkpoint_t *ck = NULL;
    DTR_CHECK(dtr_checkpoint_open(from, &ck));
    int64_t n = dtr_checkpoint_count(ck);
    int *file_of = calloc((size_t)n + 1, sizeof *file_of), nfiles = 0;
    bool made = false;
    dtr_status_t st = file_of == NULL ? dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__C, "%lld tensors",
                                                   (long long)n)
                      : n == 0 ? dtr__error(DTR_ERR_INVALID_ARGUMENT, DTR__C,
                                            "from: '%s' holds no tensors", from)
                               : dtr_checkpoint_consolidate_plan(ck, max_file_bytes, file_of,
                                                                 &nfiles);
    if (st == DTR_OK) st = dtr__c_target(to, &made);
    bool wrote = st == DTR_OK;
    for (int k = 0; st == DTR_OK && k < nfiles; k++)
        st = dtr_checkpoint_consolidate_file(ck, to, file_of, nfiles, k);
    if (st == DTR_OK && nfiles > 1) st = dtr_checkpoint_write_index(ck, to, file_of, nfiles);
    if (st != DTR_OK && wrote) dtr__c_undo(to, nfiles, made);
    free(file_of);
    dtr_checkpoint_close(ck);
    return st;
}
