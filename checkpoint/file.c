/* One safetensors file of a checkpoint: opened, its header read and checked (internal.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/internal.h"

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

dtr_status_t dtr__ck_add_file(dtr_checkpoint_t *ck, const char *path, int *file) {
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
    f->header = h;
    if (file != NULL) *file = ck->nfiles - 1;
    return DTR_OK;
}

