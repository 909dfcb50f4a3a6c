/* Opening a checkpoint: one file, or a directory with or without its index (internal.h). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/internal.h"

#define DTR__INDEX "model.safetensors.index.json"

static const char *const F = "dtr_checkpoint_open";

/* Every file's tensors as whole tensors, each one piece (plain safetensors files). */
static dtr_status_t dtr__ck_whole_tensors(dtr_checkpoint_t *ck) {
    int64_t n = 0;
    for (int i = 0; i < ck->nfiles; i++) n += ck->files[i].header.ntensors;
    ck->tensors = calloc((size_t)n + 1, sizeof *ck->tensors);
    if (ck->tensors == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "tensors");
    for (int i = 0; i < ck->nfiles; i++) {
        const dtr__st_header_t *h = &ck->files[i].header;
        for (int64_t k = 0; k < h->ntensors; k++) {
            const dtr__st_tensor_t *s = &h->tensors[k];
            dtr__ck_tensor_t *t = &ck->tensors[ck->ntensors];
            dtr__ck_piece_t *p = calloc(1, sizeof *p);
            if (p == NULL || (t->name = strdup(s->name)) == NULL) {
                free(p);
                return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "tensors");
            }
            ck->ntensors++;
            memcpy(t->format_dtype, s->format_dtype, sizeof t->format_dtype);
            t->dtype = s->dtype;
            t->ndim = s->ndim;
            memcpy(t->shape, s->shape, sizeof t->shape);
            t->bytes = s->end - s->begin;
            *p = (dtr__ck_piece_t){.file = i, .data = ck->files[i].data_start + s->begin};
            memcpy(p->ext, s->shape, sizeof p->ext);
            t->pieces = p;
            t->npieces = 1;
        }
    }
    if (ck->nfiles > 0 && ck->nmeta == 0) { /* the first file's metadata */
        ck->meta = ck->files[0].header.meta;
        ck->nmeta = ck->files[0].header.nmeta;
        ck->files[0].header.meta = NULL;
        ck->files[0].header.nmeta = 0;
    }
    return DTR_OK;
}

static int dtr__ck_by_name(const void *a, const void *b) {
    return strcmp(((const dtr__ck_tensor_t *)a)->name, ((const dtr__ck_tensor_t *)b)->name);
}

static int dtr__ck_strcmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dir/name into a new string. */
static char *dtr__ck_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p != NULL) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Every *.safetensors file of dir, in name order. */
static dtr_status_t dtr__ck_add_dir(dtr_checkpoint_t *ck, const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return dtr__error(DTR_ERR_IO, F, "%s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    dtr_status_t st = DTR_OK;
    for (struct dirent *e; st == DTR_OK && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len <= 12 || strcmp(e->d_name + len - 12, ".safetensors") != 0) continue;
        char **more = realloc(names, (n + 1) * sizeof *names);
        if (more == NULL || (more[n] = strdup(e->d_name)) == NULL) st = DTR_ERR_OUT_OF_MEMORY;
        if (more != NULL) names = more;
        if (st == DTR_OK) n++;
    }
    closedir(d);
    if (st != DTR_OK) st = dtr__error(st, F, "%s: listing", dir);
    if (st == DTR_OK && n == 0)
        st = dtr__error(DTR_ERR_IO, F, "%s: no .safetensors file and no " DTR__INDEX, dir);
    if (n > 0) qsort(names, n, sizeof *names, dtr__ck_strcmp);
    for (size_t i = 0; st == DTR_OK && i < n; i++) {
        char *path = dtr__ck_join(dir, names[i]);
        st = path == NULL ? dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", dir)
                          : dtr__ck_add_file(ck, path, NULL);
        free(path);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st == DTR_OK ? dtr__ck_whole_tensors(ck) : st;
}

/* The index's "metadata": strings as they are, other values as JSON text. */
static dtr_status_t dtr__ck_index_meta(dtr_checkpoint_t *ck, json_t *meta, const char *path) {
    if (meta == NULL) return DTR_OK;
    if (!json_is_object(meta))
        return dtr__error(DTR_ERR_PARSE, F, "%s: \"metadata\" is not an object", path);
    ck->meta = calloc(2 * json_object_size(meta) + 1, sizeof *ck->meta);
    if (ck->meta == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v) {
        char *val = json_is_string(v) ? strdup(json_string_value(v))
                                      : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        ck->meta[2 * ck->nmeta] = strdup(key);
        ck->meta[2 * ck->nmeta + 1] = val;
        ck->nmeta++;
        if (ck->meta[2 * ck->nmeta - 2] == NULL || val == NULL)
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
    }
    return DTR_OK;
}

/* The file index i of the checkpoint whose path ends in /name; -1 where none. */
static int dtr__ck_file_named(const dtr_checkpoint_t *ck, const char *dir, const char *name) {
    size_t dl = strlen(dir);
    for (int i = 0; i < ck->nfiles; i++)
        if (strncmp(ck->files[i].path, dir, dl) == 0 && ck->files[i].path[dl] == '/' &&
            strcmp(ck->files[i].path + dl + 1, name) == 0)
            return i;
    return -1;
}

/* The files the index's weight_map names (each once), then the map against their headers. */
static dtr_status_t dtr__ck_index_files(dtr_checkpoint_t *ck, const char *dir, json_t *map,
                                        const char *path) {
    const char *name;
    json_t *v;
    json_object_foreach(map, name, v) {
        const char *file = json_string_value(v);
        if (file == NULL || *file == '\0' || strchr(file, '/') != NULL ||
            strcmp(file, "..") == 0 || strcmp(file, ".") == 0)
            return dtr__error(DTR_ERR_PARSE, F,
                              "%s: weight_map: tensor '%s': not a file name of this directory",
                              path, name);
        if (dtr__ck_file_named(ck, dir, file) >= 0) continue;
        char *p = dtr__ck_join(dir, file);
        if (p == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
        dtr_status_t st = dtr__ck_add_file(ck, p, NULL);
        free(p);
        DTR_CHECK(st);
    }
    DTR_CHECK(dtr__ck_whole_tensors(ck));
    for (int64_t i = 0; i < ck->ntensors; i++) {
        const dtr__ck_tensor_t *t = &ck->tensors[i];
        int file = t->pieces[0].file;
        json_t *f = json_object_get(map, t->name);
        if (f == NULL)
            return dtr__error(DTR_ERR_PARSE, F, "%s: tensor '%s' of %s is not in the index",
                              path, t->name, ck->files[file].path);
        if (dtr__ck_file_named(ck, dir, json_string_value(f)) != file)
            return dtr__error(DTR_ERR_PARSE, F,
                              "%s: the index puts tensor '%s' in %s; %s holds it", path,
                              t->name, json_string_value(f), ck->files[file].path);
    }
    if ((int64_t)json_object_size(map) != ck->ntensors) /* a name no file holds */
        json_object_foreach(map, name, v) {
            bool held = false;
            for (int64_t i = 0; i < ck->ntensors && !held; i++)
                held = strcmp(ck->tensors[i].name, name) == 0;
            if (!held)
                return dtr__error(DTR_ERR_PARSE, F, "%s: tensor '%s': %s does not hold it",
                                  path, name, json_string_value(v));
        }
    return DTR_OK;
}

static dtr_status_t dtr__ck_add_index(dtr_checkpoint_t *ck, const char *dir, const char *path) {
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        return dtr__error(DTR_ERR_PARSE, F, "%s: line %d, column %d: %s", path, err.line,
                          err.column, err.text);
    json_t *map = json_object_get(root, "weight_map");
    dtr_status_t st = DTR_OK;
    if (!json_is_object(root) || !json_is_object(map))
        st = dtr__error(DTR_ERR_PARSE, F, "%s: no \"weight_map\" object", path);
    if (st == DTR_OK) st = dtr__ck_index_meta(ck, json_object_get(root, "metadata"), path);
    if (st == DTR_OK) st = dtr__ck_index_files(ck, dir, map, path);
    json_decref(root);
    return st;
}

/* Adds the first file's "__metadata__" pairs whose keys the checkpoint's metadata (an
 * index's) lacks. */
static dtr_status_t dtr__ck_merge_meta(dtr_checkpoint_t *ck) {
    if (ck->nfiles == 0 || ck->files[0].header.nmeta == 0) return DTR_OK;
    const dtr__st_header_t *h = &ck->files[0].header;
    char **m = realloc(ck->meta, (size_t)(2 * (ck->nmeta + h->nmeta) + 1) * sizeof *m);
    if (m == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "metadata");
    ck->meta = m;
    for (int64_t i = 0; i < h->nmeta; i++) {
        if (dtr_checkpoint_metadata(ck, h->meta[2 * i]) != NULL) continue;
        char *k = strdup(h->meta[2 * i]), *v = strdup(h->meta[2 * i + 1]);
        if (k == NULL || v == NULL) {
            free(k);
            free(v);
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "metadata");
        }
        ck->meta[2 * ck->nmeta] = k;
        ck->meta[2 * ck->nmeta + 1] = v;
        ck->nmeta++;
    }
    return DTR_OK;
}

dtr_status_t dtr_checkpoint_open(const char *path, dtr_checkpoint_t **out) {
    DTR_CHECK_PTR(path, __func__);
    DTR_CHECK_PTR(out, __func__);
    struct stat sb;
    if (stat(path, &sb) != 0) return dtr__error(DTR_ERR_IO, F, "%s: %s", path, strerror(errno));
    dtr_checkpoint_t *ck = calloc(1, sizeof *ck);
    if (ck == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
    dtr_status_t st = DTR_OK;
    if (S_ISDIR(sb.st_mode)) {
        char *index = dtr__ck_join(path, DTR__INDEX), *man = dtr__ck_join(path, DTR__CK_MANIFEST);
        if (index == NULL || man == NULL) st = dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
        else if (access(man, F_OK) == 0) st = dtr__ck_add_manifest(ck, path, man);
        else if (access(index, F_OK) == 0) st = dtr__ck_add_index(ck, path, index);
        else st = dtr__ck_add_dir(ck, path);
        /* the first file's "__metadata__" too (a saved checkpoint's every file has the
         * same; beside an index, the shards' own, e.g. {"format": "pt"}) */
        if (st == DTR_OK) st = dtr__ck_merge_meta(ck);
        free(index);
        free(man);
    } else {
        st = dtr__ck_add_file(ck, path, NULL);
        if (st == DTR_OK) st = dtr__ck_whole_tensors(ck);
    }
    if (st == DTR_OK && ck->ntensors > 1) {
        qsort(ck->tensors, (size_t)ck->ntensors, sizeof *ck->tensors, dtr__ck_by_name);
        for (int64_t i = 1; i < ck->ntensors && st == DTR_OK; i++)
            if (strcmp(ck->tensors[i].name, ck->tensors[i - 1].name) == 0)
                st = dtr__error(DTR_ERR_PARSE, F, "%s: tensor '%s' is in %s and in %s", path,
                                ck->tensors[i].name,
                                ck->files[ck->tensors[i - 1].pieces[0].file].path,
                                ck->files[ck->tensors[i].pieces[0].file].path);
    }
    if (st != DTR_OK) {
        dtr_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return DTR_OK;
}

void dtr_checkpoint_close(dtr_checkpoint_t *ck) {
    if (ck == NULL) return;
    for (int i = 0; i < ck->nfiles; i++) {
        close(ck->files[i].fd);
        free(ck->files[i].path);
        dtr__st_free(&ck->files[i].header);
    }
    for (int64_t i = 0; i < ck->ntensors; i++) {
        free(ck->tensors[i].name);
        free(ck->tensors[i].pieces);
        free(ck->tensors[i].placements);
    }
    for (int64_t i = 0; i < 2 * ck->nmeta; i++) free(ck->meta[i]);
    free(ck->files);
    free(ck->tensors);
    free(ck->meta);
    free(ck->mesh);
    free(ck);
}

int64_t dtr_checkpoint_count(const dtr_checkpoint_t *ck) { return ck == NULL ? 0 : ck->ntensors; }

dtr_status_t dtr_checkpoint_tensor(const dtr_checkpoint_t *ck, int64_t index,
                                   dtr_checkpoint_tensor_t *out) {
    DTR_CHECK_PTR(ck, __func__);
    DTR_CHECK_PTR(out, __func__);
    if (index < 0 || index >= ck->ntensors)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "index: %lld, not 0..%lld",
                          (long long)index, (long long)ck->ntensors - 1);
    const dtr__ck_tensor_t *t = &ck->tensors[index];
    *out = (dtr_checkpoint_tensor_t){.name = t->name, .format_dtype = t->format_dtype,
                                     .dtype = t->dtype, .ndim = t->ndim, .bytes = t->bytes,
                                     .file = ck->files[t->pieces[0].file].path,
                                     .offset = t->pieces[0].data, .npieces = t->npieces,
                                     .placements = t->placements};
    memcpy(out->shape, t->shape, sizeof out->shape);
    return DTR_OK;
}

dtr_status_t dtr_checkpoint_find(const dtr_checkpoint_t *ck, const char *name, int64_t *index) {
    DTR_CHECK_PTR(ck, __func__);
    DTR_CHECK_PTR(name, __func__);
    DTR_CHECK_PTR(index, __func__);
    int64_t lo = 0, hi = ck->ntensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ck->tensors[mid].name, name);
        if (c == 0) {
            *index = mid;
            return DTR_OK;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "name: no tensor '%s'", name);
}

const char *dtr_checkpoint_mesh(const dtr_checkpoint_t *ck) {
    return ck == NULL ? NULL : ck->mesh;
}

int64_t dtr_checkpoint_metadata_count(const dtr_checkpoint_t *ck) {
    return ck == NULL ? 0 : ck->nmeta;
}

dtr_status_t dtr_checkpoint_metadata_at(const dtr_checkpoint_t *ck, int64_t i, const char **key,
                                        const char **value) {
    DTR_CHECK_PTR(ck, __func__);
    DTR_CHECK_PTR(key, __func__);
    DTR_CHECK_PTR(value, __func__);
    if (i < 0 || i >= ck->nmeta)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "i: %lld, the metadata has %lld "
                          "pairs", (long long)i, (long long)ck->nmeta);
    *key = ck->meta[2 * i];
    *value = ck->meta[2 * i + 1];
    return DTR_OK;
}

const char *dtr_checkpoint_metadata(const dtr_checkpoint_t *ck, const char *key) {
    for (int64_t i = 0; ck != NULL && key != NULL && i < ck->nmeta; i++)
        if (strcmp(ck->meta[2 * i], key) == 0) return ck->meta[2 * i + 1];
    return NULL;
}
