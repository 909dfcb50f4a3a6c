/*
 * Saving: each rank writes its blocks as a safetensors file of its own, then one rank
 * writes the manifest from every rank's record (dtr_checkpoint.h; manifest.c reads it).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "checkpoint/internal.h"
#include "runtime/runtime.h"

static const char *const S = "dtr_checkpoint_save_rank";

/* Whether rank holds the copy of its block that is saved: the one at coordinate 0 of every
 * mesh dim the tensor is replicated on. */
static bool dtr__ck_owner(const dtr_spec_t *spec, const int64_t *coord) {
    for (int d = 0; d < dtr_mesh_ndims(spec->mesh); d++)
        if (spec->placements[d].kind == DTR_REPLICATE && coord[d] != 0) return false;
    return true;
}

static dtr_status_t dtr__ck_write_all(int fd, const char *path, const void *buf, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return dtr__error(DTR_ERR_IO, S, "%s: write: %s", path, strerror(errno));
        done += (size_t)w;
    }
    return DTR_OK;
}

static json_t *dtr__ck_int_array(int n, const int64_t *v) {
    json_t *a = json_array();
    for (int d = 0; d < n; d++) json_array_append_new(a, json_integer((json_int_t)v[d]));
    return a;
}

/* The items' checks: names unique and non-empty, one mesh, nothing Partial, rank in it. */
dtr_status_t dtr__ck_save_args(int rank, int64_t nitems, const dtr_checkpoint_item_t *items,
                               int64_t *coord) {
    for (int64_t i = 0; i < nitems; i++) {
        const dtr_checkpoint_item_t *it = &items[i];
        if (it->name == NULL || *it->name == '\0' || it->spec == NULL || it->spec->mesh == NULL)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, S,
                              "items[%lld]: needs a name and a spec with a mesh", (long long)i);
        if (!dtr_mesh_equal(it->spec->mesh, items[0].spec->mesh))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, S,
                              "items[%lld] ('%s'): another mesh than items[0]'s", (long long)i,
                              it->name);
        if (dtr__st_dtype_name(it->spec->dtype) == NULL)
            return dtr__error(DTR_ERR_UNSUPPORTED, S, "items[%lld] ('%s'): dtype %s: "
                                                      "safetensors has none", (long long)i,
                              it->name, dtr_dtype_name(it->spec->dtype));
        for (int d = 0; d < dtr_mesh_ndims(it->spec->mesh); d++)
            if (it->spec->placements[d].kind == DTR_PARTIAL)
                return dtr__error(DTR_ERR_UNSUPPORTED, S,
                                  "items[%lld] ('%s'): placements[%d] Partial: reduce it first",
                                  (long long)i, it->name, d);
        for (int64_t j = 0; j < i; j++)
            if (strcmp(items[j].name, it->name) == 0)
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, S, "items[%lld]: name '%s' again",
                                  (long long)i, it->name);
    }
    if (nitems > 0) DTR_CHECK_AS(dtr_mesh_coord(items[0].spec->mesh, rank, coord), S);
    return DTR_OK;
}

static int dtr__ck_item_order(const void *a, const void *b, void *items) {
    const dtr_checkpoint_item_t *it = items;
    return strcmp(it[*(const int64_t *)a].name, it[*(const int64_t *)b].name);
}

/* "__metadata__" first in the header, from key, value, ..., NULL (NULL: none). */
static dtr_status_t dtr__ck_meta(const char *const *metadata, json_t *header) {
    if (metadata == NULL || metadata[0] == NULL) return DTR_OK;
    json_t *m = json_object();
    for (int64_t k = 0; metadata[k] != NULL; k += 2) {
        if (metadata[k + 1] == NULL || strcmp(metadata[k], "") == 0) {
            json_decref(m);
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, S,
                              "metadata[%lld]: '%s' %s", (long long)k, metadata[k],
                              metadata[k + 1] == NULL ? "has no value (key, value pairs, then "
                                                        "NULL)"
                                                      : "is not a key");
        }
        json_object_set_new(m, metadata[k], json_string(metadata[k + 1]));
    }
    json_object_set_new(header, "__metadata__", m);
    return DTR_OK;
}

/* The owned items in name order (order), their layouts, the header and the largest block. */
static dtr_status_t dtr__ck_save_plan(int rank, int64_t nitems, const dtr_checkpoint_item_t *items,
                                      const int64_t *coord, int64_t *order, int64_t *nown,
                                      dtr_layout_t *lay, json_t *header, int64_t *largest) {
    *nown = 0;
    *largest = 0;
    for (int64_t i = 0; i < nitems; i++)
        if (dtr__ck_owner(items[i].spec, coord)) order[(*nown)++] = i;
    /* names in bytewise order, as readers list them (qsort_r is glibc's; a stable insertion
     * sort keeps this portable) */
    for (int64_t a = 1; a < *nown; a++)
        for (int64_t b = a; b > 0 && dtr__ck_item_order(&order[b - 1], &order[b], (void *)items) > 0; b--) {
            int64_t t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    int64_t at = 0;
    for (int64_t k = 0; k < *nown; k++) {
        const dtr_checkpoint_item_t *it = &items[order[k]];
        DTR_CHECK_AS(dtr_spec_layout(it->spec, rank, &lay[k]), S);
        json_t *e = json_object();
        json_object_set_new(e, "dtype", json_string(dtr__st_dtype_name(it->spec->dtype)));
        json_object_set_new(e, "shape", dtr__ck_int_array(lay[k].ndim, lay[k].local_shape));
        int64_t off[2] = {at, at + lay[k].bytes};
        json_object_set_new(e, "data_offsets", dtr__ck_int_array(2, off));
        json_object_set_new(header, it->name, e);
        at += lay[k].bytes;
        if (lay[k].bytes > *largest) *largest = lay[k].bytes;
    }
    return DTR_OK;
}

/* The file: the header (padded with spaces so the data starts 8-byte aligned), then each
 * block (items[].data, or fill into buf); the pieces' records into rec. */
static dtr_status_t dtr__ck_save_file(int fd, const char *path, json_t *header, int64_t nown,
                                      const int64_t *order, const dtr_layout_t *lay,
                                      const dtr_checkpoint_item_t *items,
                                      dtr_checkpoint_fill_fn fill, void *arg, char *buf,
                                      json_t *rec) {
    char *text = json_dumps(header, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, S, "%s: header", path);
    size_t n = strlen(text), padded = (n + 7) / 8 * 8;
    unsigned char len8[8];
    for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)padded >> (8 * k));
    dtr_status_t st = dtr__ck_write_all(fd, path, len8, 8);
    if (st == DTR_OK) st = dtr__ck_write_all(fd, path, text, n);
    if (st == DTR_OK && padded > n) st = dtr__ck_write_all(fd, path, "       ", padded - n);
    free(text);
    for (int64_t k = 0; st == DTR_OK && k < nown; k++) {
        const dtr_checkpoint_item_t *it = &items[order[k]];
        const void *block = it->data;
        if (block == NULL && lay[k].bytes > 0) {
            if (fill == NULL)
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, S,
                                  "items[%lld] ('%s'): no data and no fill", (long long)order[k],
                                  it->name);
            st = fill(arg, order[k], buf, (size_t)lay[k].bytes);
            block = buf;
        }
        if (st == DTR_OK) st = dtr__ck_write_all(fd, path, block, (size_t)lay[k].bytes);
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx",
                 (unsigned long long)XXH3_64bits(lay[k].bytes > 0 ? block : "", (size_t)lay[k].bytes));
        json_t *p = json_object();
        json_object_set_new(p, "offset", dtr__ck_int_array(lay[k].ndim, lay[k].global_offset));
        json_object_set_new(p, "shape", dtr__ck_int_array(lay[k].ndim, lay[k].local_shape));
        json_object_set_new(p, "xxh3", json_string(hex));
        json_object_set_new(rec, it->name, p);
    }
    return st;
}

/* Writes rank's owned blocks of the items to path (through path.partial, renamed once
 * complete; removed on failure), their pieces into `pieces`; *nown: how many. With
 * skip_empty, a rank that owns nothing writes no file. */
static dtr_status_t dtr__ck_write(const char *path, int rank, int64_t nitems,
                                  const dtr_checkpoint_item_t *items, dtr_checkpoint_fill_fn fill,
                                  void *arg, const char *const *metadata, bool skip_empty,
                                  json_t *pieces, int64_t *nown) {
    if (nitems < 0 || (nitems > 0 && items == NULL))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, S, "nitems: %lld with items %s",
                          (long long)nitems, items == NULL ? "NULL" : "given");
    int64_t coord[DTR_MAX_MESH_DIMS];
    DTR_CHECK(dtr__ck_save_args(rank, nitems, items, coord));
    int64_t *order = calloc((size_t)nitems + 1, sizeof *order), largest = 0;
    dtr_layout_t *lay = calloc((size_t)nitems + 1, sizeof *lay);
    json_t *header = json_object();
    dtr_status_t st = order == NULL || lay == NULL || header == NULL
                          ? dtr__error(DTR_ERR_OUT_OF_MEMORY, S, "%s", path)
                          : dtr__ck_meta(metadata, header);
    if (st == DTR_OK)
        st = dtr__ck_save_plan(rank, nitems, items, coord, order, nown, lay, header, &largest);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    char *buf = NULL;
    if (st == DTR_OK && (*nown > 0 || !skip_empty)) {
        buf = malloc((size_t)largest + 1);
        int fd = buf == NULL ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            st = dtr__error(buf == NULL ? DTR_ERR_OUT_OF_MEMORY : DTR_ERR_IO, S, "%s: %s", tmp,
                            buf == NULL ? "buffer" : strerror(errno));
        } else {
            st = dtr__ck_save_file(fd, path, header, *nown, order, lay, items, fill, arg, buf,
                                   pieces);
            if (close(fd) != 0 && st == DTR_OK)
                st = dtr__error(DTR_ERR_IO, S, "%s: close: %s", tmp, strerror(errno));
            if (st == DTR_OK && rename(tmp, path) != 0)
                st = dtr__error(DTR_ERR_IO, S, "%s: rename: %s", path, strerror(errno));
            if (st != DTR_OK) unlink(tmp);
        }
    }
    json_decref(header);
    free(buf);
    free(order);
    free(lay);
    return st;
}

dtr_status_t dtr_checkpoint_save_rank(const char *dir, int rank, int64_t nitems,
                                      const dtr_checkpoint_item_t *items,
                                      dtr_checkpoint_fill_fn fill, void *arg, char **record) {
    return dtr_checkpoint_save_rank_meta(dir, rank, nitems, items, fill, arg, NULL, record);
}

dtr_status_t dtr_checkpoint_save_rank_meta(const char *dir, int rank, int64_t nitems,
                                           const dtr_checkpoint_item_t *items,
                                           dtr_checkpoint_fill_fn fill, void *arg,
                                           const char *const *metadata, char **record) {
    DTR_CHECK_PTR(dir, S);
    DTR_CHECK_PTR(record, S);
    char name[64], path[4096];
    const dtr_mesh_t *mesh = nitems > 0 && items != NULL && items[0].spec != NULL
                                 ? items[0].spec->mesh : NULL;
    int64_t nranks = mesh != NULL ? dtr_mesh_nranks(mesh) : 1, index = rank;
    if (mesh != NULL) /* its place on the mesh (a rank off it is refused below) */
        (void)dtr_mesh_group_index(mesh, (1u << dtr_mesh_ndims(mesh)) - 1u, rank, &index);
    snprintf(name, sizeof name, "rank-%05lld-of-%05lld.safetensors", (long long)index,
             (long long)nranks);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_t *pieces = json_object();
    int64_t nown = 0;
    dtr_status_t st = pieces == NULL ? dtr__error(DTR_ERR_OUT_OF_MEMORY, S, "%s", dir)
                                     : dtr__ck_write(path, rank, nitems, items, fill, arg,
                                                     metadata, true, pieces, &nown);
    if (st == DTR_OK) {
        json_t *rec = json_object();
        if (nown > 0) json_object_set_new(rec, "file", json_string(name));
        json_object_set(rec, "pieces", pieces);
        *record = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(rec);
        if (*record == NULL) st = dtr__error(DTR_ERR_OUT_OF_MEMORY, S, "record");
    }
    json_decref(pieces);
    return st;
}

dtr_status_t dtr_checkpoint_write_file(const char *path, int rank, int64_t nitems,
                                       const dtr_checkpoint_item_t *items,
                                       dtr_checkpoint_fill_fn fill, void *arg) {
    return dtr_checkpoint_write_file_meta(path, rank, nitems, items, fill, arg, NULL);
}

dtr_status_t dtr_checkpoint_write_file_meta(const char *path, int rank, int64_t nitems,
                                            const dtr_checkpoint_item_t *items,
                                            dtr_checkpoint_fill_fn fill, void *arg,
                                            const char *const *metadata) {
    DTR_CHECK_PTR(path, S);
    json_t *pieces = json_object();
    int64_t nown = 0;
    dtr_status_t st = pieces == NULL ? dtr__error(DTR_ERR_OUT_OF_MEMORY, S, "%s", path)
                                     : dtr__ck_write(path, rank, nitems, items, fill, arg,
                                                     metadata, false, pieces, &nown);
    json_decref(pieces);
    return st == DTR_OK ? DTR_OK : dtr__error_as(st, "dtr_checkpoint_write_file");
}

/* The manifest's entry of item it: dtype, shape, placements and, from the records, pieces. */
static json_t *dtr__ck_manifest_entry(const dtr_checkpoint_item_t *it, json_t *const *recs,
                                      const int *file_index, int nrecords) {
    char pl[256] = "";
    dtr_placements_format(it->spec->placements, dtr_mesh_ndims(it->spec->mesh), pl, sizeof pl);
    json_t *e = json_object(), *pieces = json_array();
    json_object_set_new(e, "dtype", json_string(dtr__st_dtype_name(it->spec->dtype)));
    json_object_set_new(e, "shape", dtr__ck_int_array(it->spec->ndim, it->spec->shape));
    json_object_set_new(e, "placements", json_string(pl));
    for (int r = 0; r < nrecords; r++) {
        json_t *p = recs[r] != NULL ? json_object_get(json_object_get(recs[r], "pieces"), it->name)
                                    : NULL;
        if (p == NULL || file_index[r] < 0) continue;
        json_t *q = json_deep_copy(p);
        json_object_set_new(q, "file", json_integer(file_index[r]));
        json_array_append_new(pieces, q);
    }
    json_object_set_new(e, "pieces", pieces);
    return e;
}

dtr_status_t dtr_checkpoint_save_manifest(const char *dir, int64_t nitems,
                                          const dtr_checkpoint_item_t *items,
                                          const char *const *records, int nrecords) {
    static const char *const M = "dtr_checkpoint_save_manifest";
    DTR_CHECK_PTR(dir, M);
    DTR_CHECK_PTR(records, M);
    if (nitems < 1 || items == NULL || items[0].spec == NULL || nrecords < 1)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, M, "nitems: %lld, nrecords: %d (1 or more "
                                                       "each)", (long long)nitems, nrecords);
    json_t **recs = calloc((size_t)nrecords, sizeof *recs), *files = json_array();
    int *file_index = calloc((size_t)nrecords, sizeof *file_index);
    dtr_status_t st = recs == NULL || file_index == NULL
                          ? dtr__error(DTR_ERR_OUT_OF_MEMORY, M, "%s", dir) : DTR_OK;
    for (int r = 0; st == DTR_OK && r < nrecords; r++) {
        file_index[r] = -1;
        if (records[r] == NULL) continue;
        json_error_t err;
        recs[r] = json_loads(records[r], JSON_REJECT_DUPLICATES, &err);
        if (recs[r] == NULL || !json_is_object(json_object_get(recs[r], "pieces")))
            st = dtr__error(DTR_ERR_INVALID_ARGUMENT, M, "records[%d]: not a record of "
                                                         "dtr_checkpoint_save_rank", r);
        else if (json_is_string(json_object_get(recs[r], "file"))) {
            file_index[r] = (int)json_array_size(files);
            json_array_append(files, json_object_get(recs[r], "file"));
        }
    }
    char mesh[128] = "";
    json_t *root = json_object(), *tensors = json_object();
    if (st == DTR_OK) {
        dtr_mesh_format(items[0].spec->mesh, mesh, sizeof mesh);
        for (int64_t i = 0; i < nitems; i++)
            json_object_set_new(tensors, items[i].name,
                                dtr__ck_manifest_entry(&items[i], recs, file_index, nrecords));
        json_object_set_new(root, "format", json_string("dtr-checkpoint"));
        json_object_set_new(root, "version", json_integer(1));
        json_object_set_new(root, "mesh", json_string(mesh));
        json_object_set(root, "files", files);
        json_object_set(root, "tensors", tensors);
        char path[4096], tmp[4200];
        snprintf(path, sizeof path, "%s/" DTR__CK_MANIFEST, dir);
        snprintf(tmp, sizeof tmp, "%s.partial", path);
        if (json_dump_file(root, tmp, JSON_INDENT(1) | JSON_PRESERVE_ORDER) != 0)
            st = dtr__error(DTR_ERR_IO, M, "%s: could not write it", tmp);
        else if (rename(tmp, path) != 0)
            st = dtr__error(DTR_ERR_IO, M, "%s: rename: %s", path, strerror(errno));
        if (st != DTR_OK) unlink(tmp);
    }
    for (int r = 0; recs != NULL && r < nrecords; r++) json_decref(recs[r]);
    json_decref(root);
    json_decref(tensors);
    json_decref(files);
    free(recs);
    free(file_index);
    return st;
}
