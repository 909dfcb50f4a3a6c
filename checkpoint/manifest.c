/*
 * A checkpoint dtr saved: dtr.manifest.json beside one safetensors file per rank (save.c
 * writes both). The manifest names the mesh, each tensor's dtype, shape and placements, and
 * its pieces: which file holds which box (offset, shape) and the piece's XXH3-64. Every
 * piece is checked against its file's header (the file must hold a tensor of that name,
 * dtype and shape, and nothing the manifest does not name) and the pieces of a tensor must
 * tile it.
 */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/internal.h"

static const char *const F = "dtr_checkpoint_open";

/* An array of n non-negative integers (n = its size) into v. */
static bool dtr__ck_ints(json_t *a, int n, int64_t *v) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) return false;
    for (int d = 0; d < n; d++) {
        json_t *x = json_array_get(a, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 0) return false;
        v[d] = (int64_t)json_integer_value(x);
    }
    return true;
}

/* The file's tensor named `name`; NULL where it has none. */
static dtr__st_tensor_t *dtr__ck_in_file(dtr__ck_file_t *f, const char *name) {
    for (int64_t i = 0; i < f->header.ntensors; i++)
        if (strcmp(f->header.tensors[i].name, name) == 0) return &f->header.tensors[i];
    return NULL;
}

/* One piece {"file", "offset", "shape", "xxh3"} of tensor t, against its file. */
static dtr_status_t dtr__ck_piece(dtr_checkpoint_t *ck, const char *path, dtr__ck_tensor_t *t,
                                  json_t *j, const int *file_of, int nfiles, bool *used,
                                  dtr__ck_piece_t *p) {
    json_t *fj = json_object_get(j, "file"), *hj = json_object_get(j, "xxh3");
    int64_t fi = -1;
    if (!json_is_integer(fj) || (fi = json_integer_value(fj)) < 0 || fi >= nfiles ||
        !dtr__ck_ints(json_object_get(j, "offset"), t->ndim, p->lo) ||
        !dtr__ck_ints(json_object_get(j, "shape"), t->ndim, p->ext) || !json_is_string(hj) ||
        strlen(json_string_value(hj)) != 16)
        return dtr__error(DTR_ERR_PARSE, F,
                          "%s: tensor '%s': a piece is not {\"file\": 0..%d, \"offset\", "
                          "\"shape\" (%d integers each), \"xxh3\" (16 hex digits)}",
                          path, t->name, nfiles - 1, t->ndim);
    for (int d = 0; d < t->ndim; d++)
        if (p->lo[d] + p->ext[d] > t->shape[d])
            return dtr__error(DTR_ERR_PARSE, F, "%s: tensor '%s': a piece past dim %d's %lld",
                              path, t->name, d, (long long)t->shape[d]);
    char *end = NULL;
    p->checksum = (uint64_t)strtoull(json_string_value(hj), &end, 16);
    p->has_checksum = end != NULL && *end == '\0';
    p->file = file_of[fi];
    dtr__ck_file_t *f = &ck->files[p->file];
    dtr__st_tensor_t *s = dtr__ck_in_file(f, t->name);
    bool same = s != NULL && s->dtype == t->dtype && s->ndim == t->ndim &&
                strcmp(s->format_dtype, t->format_dtype) == 0;
    for (int d = 0; same && d < t->ndim; d++) same = s->shape[d] == p->ext[d];
    if (!same)
        return dtr__error(DTR_ERR_PARSE, F,
                          "%s: tensor '%s': the manifest has a %s piece of it in %s, which %s",
                          path, t->name, t->format_dtype, f->path,
                          s == NULL ? "does not hold it" : "holds it in another shape or dtype");
    p->data = f->data_start + s->begin;
    if (used[s - f->header.tensors]) /* used: this file's tensors named so far */
        return dtr__error(DTR_ERR_PARSE, F, "%s: tensor '%s': two pieces in %s", path, t->name,
                          f->path);
    used[s - f->header.tensors] = true;
    return DTR_OK;
}

/* The pieces of t tile it: their volumes sum to its elements, and (up to 256 pieces) no
 * two meet. */
static dtr_status_t dtr__ck_tiles(const char *path, const dtr__ck_tensor_t *t) {
    int64_t numel = 1, sum = 0;
    for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
    for (int64_t i = 0; i < t->npieces; i++) {
        int64_t v = 1;
        for (int d = 0; d < t->ndim; d++) v *= t->pieces[i].ext[d];
        sum += v;
        for (int64_t j = 0; i < 256 && j < i && v > 0; j++) {
            bool meet = true;
            for (int d = 0; d < t->ndim && meet; d++) {
                const dtr__ck_piece_t *a = &t->pieces[i], *b = &t->pieces[j];
                meet = a->lo[d] < b->lo[d] + b->ext[d] && b->lo[d] < a->lo[d] + a->ext[d];
            }
            if (meet)
                return dtr__error(DTR_ERR_PARSE, F, "%s: tensor '%s': pieces %lld and %lld "
                                                    "overlap", path, t->name, (long long)j,
                                  (long long)i);
        }
    }
    if (sum != numel)
        return dtr__error(DTR_ERR_PARSE, F, "%s: tensor '%s': its pieces hold %lld of its %lld "
                                            "elements", path, t->name, (long long)sum,
                          (long long)numel);
    return DTR_OK;
}

/* One tensor's entry of the manifest into t. */
static dtr_status_t dtr__ck_entry(dtr_checkpoint_t *ck, const char *path, const char *name,
                                  json_t *j, const int *file_of, int nfiles, bool **used,
                                  dtr__ck_tensor_t *t) {
    json_t *dt = json_object_get(j, "dtype"), *pl = json_object_get(j, "placements");
    json_t *pieces = json_object_get(j, "pieces"), *sh = json_object_get(j, "shape");
    if ((t->name = strdup(name)) == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
    if (!json_is_string(dt) || !dtr__st_dtype_parse(json_string_value(dt), &t->dtype) ||
        !json_is_string(pl) || !json_is_array(pieces) || !json_is_array(sh) ||
        json_array_size(sh) > DTR_MAX_TENSOR_DIMS ||
        !dtr__ck_ints(sh, (int)json_array_size(sh), t->shape))
        return dtr__error(DTR_ERR_PARSE, F,
                          "%s: tensor '%s': not {\"dtype\", \"shape\", \"placements\", "
                          "\"pieces\"} with a known dtype and at most %d dims",
                          path, name, DTR_MAX_TENSOR_DIMS);
    snprintf(t->format_dtype, sizeof t->format_dtype, "%s", json_string_value(dt));
    t->ndim = (int)json_array_size(sh);
    t->bytes = t->dtype == DTR_DTYPE_LAST ? 0 : dtr_dtype_info(t->dtype)->size;
    for (int d = 0; d < t->ndim; d++) t->bytes *= t->shape[d];
    t->placements = strdup(json_string_value(pl));
    t->npieces = (int64_t)json_array_size(pieces);
    t->pieces = calloc((size_t)t->npieces + 1, sizeof *t->pieces);
    if (t->placements == NULL || t->pieces == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
    for (int64_t i = 0; i < t->npieces; i++) {
        json_t *pj = json_array_get(pieces, (size_t)i);
        int64_t fi = json_integer_value(json_object_get(pj, "file"));
        bool *u = fi >= 0 && fi < nfiles ? used[fi] : used[0];
        DTR_CHECK(dtr__ck_piece(ck, path, t, pj, file_of, nfiles, u, &t->pieces[i]));
    }
    return dtr__ck_tiles(path, t);
}

/* The files the manifest lists, each opened (header checked); file_of maps its indices. */
static dtr_status_t dtr__ck_manifest_files(dtr_checkpoint_t *ck, const char *dir,
                                           const char *path, json_t *files, int *file_of) {
    for (size_t i = 0; i < json_array_size(files); i++) {
        const char *name = json_string_value(json_array_get(files, i));
        if (name == NULL || *name == '\0' || strchr(name, '/') != NULL ||
            strcmp(name, "..") == 0 || strcmp(name, ".") == 0)
            return dtr__error(DTR_ERR_PARSE, F, "%s: files[%zu]: not a file name of this "
                                                "directory", path, i);
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", dir, name);
        DTR_CHECK(dtr__ck_add_file(ck, full, &file_of[i]));
    }
    return DTR_OK;
}

static dtr_status_t dtr__ck_manifest(dtr_checkpoint_t *ck, const char *dir, const char *path,
                                     json_t *root) {
    json_t *files = json_object_get(root, "files"), *tensors = json_object_get(root, "tensors");
    json_t *mesh = json_object_get(root, "mesh");
    if (!json_is_object(root) ||
        strcmp(json_string_value(json_object_get(root, "format")) != NULL
                   ? json_string_value(json_object_get(root, "format")) : "",
               "dtr-checkpoint") != 0 ||
        json_integer_value(json_object_get(root, "version")) != 1 || !json_is_array(files) ||
        json_array_size(files) == 0 || !json_is_object(tensors) || !json_is_string(mesh))
        return dtr__error(DTR_ERR_PARSE, F,
                          "%s: not a dtr checkpoint manifest, version 1 ({\"format\": "
                          "\"dtr-checkpoint\", \"version\": 1, \"mesh\", \"files\", "
                          "\"tensors\"})", path);
    dtr_mesh_t *m = NULL; /* sizes as dtr_mesh_format writes them: "2x4" */
    if (dtr_mesh_parse(json_string_value(mesh), NULL, 0, &m) != DTR_OK)
        return dtr__error(DTR_ERR_PARSE, F, "%s: mesh '%s': %s", path, json_string_value(mesh),
                          dtr__last_detail());
    dtr_mesh_destroy(m);
    int nfiles = (int)json_array_size(files);
    int *file_of = calloc((size_t)nfiles, sizeof *file_of);
    bool **used = calloc((size_t)nfiles, sizeof *used);
    dtr_status_t st = file_of == NULL || used == NULL
                          ? dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path)
                          : dtr__ck_manifest_files(ck, dir, path, files, file_of);
    for (int i = 0; st == DTR_OK && i < nfiles; i++) {
        used[i] = calloc((size_t)ck->files[file_of[i]].header.ntensors + 1, sizeof **used);
        if (used[i] == NULL) st = dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
    }
    if (st == DTR_OK) {
        ck->mesh = strdup(json_string_value(mesh));
        ck->tensors = calloc(json_object_size(tensors) + 1, sizeof *ck->tensors);
        if (ck->mesh == NULL || ck->tensors == NULL)
            st = dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
    }
    const char *name;
    json_t *v;
    if (st == DTR_OK)
        json_object_foreach(tensors, name, v) {
            st = dtr__ck_entry(ck, path, name, v, file_of, nfiles, used,
                               &ck->tensors[ck->ntensors++]);
            if (st != DTR_OK) break;
        }
    for (int i = 0; st == DTR_OK && i < nfiles; i++) /* nothing the manifest does not name */
        for (int64_t k = 0; st == DTR_OK && k < ck->files[file_of[i]].header.ntensors; k++)
            if (!used[i][k])
                st = dtr__error(DTR_ERR_PARSE, F, "%s: tensor '%s' of %s is not in the manifest",
                                path, ck->files[file_of[i]].header.tensors[k].name,
                                ck->files[file_of[i]].path);
    for (int i = 0; used != NULL && i < nfiles; i++) free(used[i]);
    free(used);
    free(file_of);
    return st;
}

dtr_status_t dtr__ck_add_manifest(dtr_checkpoint_t *ck, const char *dir, const char *path) {
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        return dtr__error(DTR_ERR_PARSE, F, "%s: line %d, column %d: %s", path, err.line,
                          err.column, err.text);
    dtr_status_t st = dtr__ck_manifest(ck, dir, path, root);
    json_decref(root);
    return st;
}
