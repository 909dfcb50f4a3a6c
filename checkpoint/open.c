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

/* pread of exactly n bytes at off; DTR_ERR_IO naming the path otherwise. */
static dtr_status_t dtr__ck_pread(int fd, const char *path, void *buf, size_t n, int64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return dtr__error(DTR_ERR_IO, F, "%s: read of %zu bytes at %lld: %s", path, n,
                              (long long)off, r == 0 ? "end of file" : strerror(errno));
        got += (size_t)r;
    }
    return DTR_OK;
}

/* Opens one file, parses its header, appends it and its tensors to ck. */
static dtr_status_t dtr__ck_add_file(dtr_checkpoint_t *ck, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dtr__error(DTR_ERR_IO, F, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return dtr__error(DTR_ERR_IO, F, "%s: not a regular file", path);
    }
    dtr__ck_file_t *files = realloc(ck->files, (size_t)(ck->nfiles + 1) * sizeof *files);
    char *p = strdup(path);
    if (files == NULL || p == NULL) {
        free(p);
        close(fd);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
    }
    ck->files = files;
    dtr__ck_file_t *f = &files[ck->nfiles++];
    *f = (dtr__ck_file_t){.path = p, .fd = fd, .size = (int64_t)sb.st_size};
    unsigned char len8[8];
    if (f->size < 8)
        return dtr__error(DTR_ERR_PARSE, F, "%s: %lld bytes, shorter than the 8-byte header "
                                            "length", path, (long long)f->size);
    DTR_CHECK(dtr__ck_pread(fd, path, len8, 8, 0));
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--) n = n << 8 | len8[k];
    if (n > (uint64_t)DTR__ST_MAX_HEADER || n > (uint64_t)(f->size - 8))
        return dtr__error(DTR_ERR_PARSE, F,
                          "%s: header length %llu past the end of the file (%lld bytes) or "
                          "over %lld", path, (unsigned long long)n, (long long)f->size,
                          DTR__ST_MAX_HEADER);
    char *json = malloc(n + 1);
    if (json == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s: header", path);
    dtr__st_header_t h = {0};
    dtr_status_t st = dtr__ck_pread(fd, path, json, (size_t)n, 8);
    if (st == DTR_OK) st = dtr__st_parse(F, path, json, (size_t)n, f->size - 8 - (int64_t)n, &h);
    free(json);
    if (st != DTR_OK) return st;
    f->data_start = 8 + (int64_t)n;
    dtr__st_tensor_t *all = realloc(ck->tensors, (size_t)(ck->ntensors + h.ntensors + 1) *
                                                     sizeof *all);
    if (all == NULL) {
        dtr__st_free(&h);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s: tensors", path);
    }
    ck->tensors = all;
    for (int64_t i = 0; i < h.ntensors; i++) {
        h.tensors[i].file = ck->nfiles - 1;
        all[ck->ntensors++] = h.tensors[i];
    }
    h.ntensors = 0; /* the names are ck's now */
    if (ck->nmeta == 0 && ck->nfiles == 1) {
        ck->meta = h.meta;
        ck->nmeta = h.nmeta;
        h.meta = NULL;
        h.nmeta = 0;
    }
    dtr__st_free(&h);
    return DTR_OK;
}

static int dtr__ck_by_name(const void *a, const void *b) {
    return strcmp(((const dtr__st_tensor_t *)a)->name, ((const dtr__st_tensor_t *)b)->name);
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
                          : dtr__ck_add_file(ck, path);
        free(path);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
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
        dtr_status_t st = dtr__ck_add_file(ck, p);
        free(p);
        DTR_CHECK(st);
    }
    for (int64_t i = 0; i < ck->ntensors; i++) {
        const dtr__st_tensor_t *t = &ck->tensors[i];
        json_t *f = json_object_get(map, t->name);
        if (f == NULL)
            return dtr__error(DTR_ERR_PARSE, F, "%s: tensor '%s' of %s is not in the index",
                              path, t->name, ck->files[t->file].path);
        if (dtr__ck_file_named(ck, dir, json_string_value(f)) != t->file)
            return dtr__error(DTR_ERR_PARSE, F,
                              "%s: the index puts tensor '%s' in %s; %s holds it", path,
                              t->name, json_string_value(f), ck->files[t->file].path);
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

dtr_status_t dtr_checkpoint_open(const char *path, dtr_checkpoint_t **out) {
    DTR_CHECK_PTR(path, __func__);
    DTR_CHECK_PTR(out, __func__);
    struct stat sb;
    if (stat(path, &sb) != 0) return dtr__error(DTR_ERR_IO, F, "%s: %s", path, strerror(errno));
    dtr_checkpoint_t *ck = calloc(1, sizeof *ck);
    if (ck == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
    dtr_status_t st;
    if (S_ISDIR(sb.st_mode)) {
        char *index = dtr__ck_join(path, DTR__INDEX);
        if (index == NULL) st = dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "%s", path);
        else if (access(index, F_OK) == 0) st = dtr__ck_add_index(ck, path, index);
        else st = dtr__ck_add_dir(ck, path);
        free(index);
    } else {
        st = dtr__ck_add_file(ck, path);
    }
    if (st == DTR_OK && ck->ntensors > 1) {
        qsort(ck->tensors, (size_t)ck->ntensors, sizeof *ck->tensors, dtr__ck_by_name);
        for (int64_t i = 1; i < ck->ntensors && st == DTR_OK; i++)
            if (strcmp(ck->tensors[i].name, ck->tensors[i - 1].name) == 0)
                st = dtr__error(DTR_ERR_PARSE, F, "%s: tensor '%s' is in %s and in %s", path,
                                ck->tensors[i].name, ck->files[ck->tensors[i - 1].file].path,
                                ck->files[ck->tensors[i].file].path);
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
    }
    for (int64_t i = 0; i < ck->ntensors; i++) free(ck->tensors[i].name);
    for (int64_t i = 0; i < 2 * ck->nmeta; i++) free(ck->meta[i]);
    free(ck->files);
    free(ck->tensors);
    free(ck->meta);
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
    const dtr__st_tensor_t *t = &ck->tensors[index];
    const dtr__ck_file_t *f = &ck->files[t->file];
    *out = (dtr_checkpoint_tensor_t){.name = t->name, .format_dtype = t->format_dtype,
                                     .dtype = t->dtype, .ndim = t->ndim,
                                     .bytes = t->end - t->begin, .file = f->path,
                                     .offset = f->data_start + t->begin};
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

const char *dtr_checkpoint_metadata(const dtr_checkpoint_t *ck, const char *key) {
    for (int64_t i = 0; ck != NULL && key != NULL && i < ck->nmeta; i++)
        if (strcmp(ck->meta[2 * i], key) == 0) return ck->meta[2 * i + 1];
    return NULL;
}
