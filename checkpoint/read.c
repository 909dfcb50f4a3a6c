/* One rank's block of a tensor, read from its file by pread (dtr_checkpoint.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/internal.h"

static const char *const F = "dtr_checkpoint_read_block";

/* The spec against tensor t: same shape and dtype, nothing Partial. */
static dtr_status_t dtr__ck_spec_fits(const dtr__st_tensor_t *t, const dtr_spec_t *spec) {
    if (t->dtype == DTR_DTYPE_LAST)
        return dtr__error(DTR_ERR_UNSUPPORTED, F, "tensor '%s': dtype %s: dtr has none", t->name,
                          t->format_dtype);
    bool same = spec->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = spec->shape[d] == t->shape[d];
    if (!same) {
        char want[160] = "", got[160] = "";
        dtr_shape_format(t->shape, t->ndim, want, sizeof want);
        dtr_shape_format(spec->shape, spec->ndim, got, sizeof got);
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "spec->shape: %s, tensor '%s' is %s",
                          got, t->name, want);
    }
    if (spec->dtype != t->dtype)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "spec->dtype: %s, tensor '%s' is %s",
                          dtr_dtype_name(spec->dtype), t->name, dtr_dtype_name(t->dtype));
    for (int i = 0; i < dtr_mesh_ndims(spec->mesh); i++)
        if (spec->placements[i].kind == DTR_PARTIAL)
            return dtr__error(DTR_ERR_UNSUPPORTED, F,
                              "spec->placements[%d]: Partial: a checkpoint holds whole values, "
                              "not addends (tensor '%s')", i, t->name);
    return DTR_OK;
}

/* n bytes at off of fd into buf. */
static dtr_status_t dtr__ck_read(const dtr__ck_file_t *f, char *buf, int64_t n, int64_t off) {
    int64_t got = 0;
    while (got < n) {
        size_t want = (size_t)(n - got > (1 << 30) ? (1 << 30) : n - got);
        ssize_t r = pread(f->fd, buf + got, want, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return dtr__error(DTR_ERR_IO, F, "%s: read of %lld bytes at %lld: %s", f->path,
                              (long long)(n - got), (long long)(off + got),
                              r == 0 ? "end of file (shortened since it was opened?)"
                                     : strerror(errno));
        got += r;
    }
    return DTR_OK;
}

dtr_status_t dtr_checkpoint_read_block(const dtr_checkpoint_t *ck, int64_t index,
                                       const dtr_spec_t *spec, int rank, void *out,
                                       size_t out_bytes, dtr_checkpoint_read_stats_t *stats) {
    DTR_CHECK_PTR(ck, F);
    DTR_CHECK_PTR(spec, F);
    DTR_CHECK_PTR(spec->mesh, F);
    if (index < 0 || index >= ck->ntensors)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "index: %lld, not 0..%lld",
                          (long long)index, (long long)ck->ntensors - 1);
    const dtr__st_tensor_t *t = &ck->tensors[index];
    DTR_CHECK(dtr__ck_spec_fits(t, spec));
    dtr_layout_t lay;
    DTR_CHECK_AS(dtr_spec_layout(spec, rank, &lay), F);
    if (lay.bytes > 0) DTR_CHECK_PTR(out, F);
    if ((uint64_t)lay.bytes > out_bytes)
        return dtr__error(DTR_ERR_BUFFER_TOO_SMALL, F,
                          "out_bytes: %zu, rank %d's block of '%s' is %lld bytes", out_bytes,
                          rank, t->name, (long long)lay.bytes);
    const dtr__ck_file_t *f = &ck->files[t->file];
    struct stat sb;
    if (fstat(f->fd, &sb) != 0 || (int64_t)sb.st_size != f->size)
        return dtr__error(DTR_ERR_IO, F, "%s: changed since it was opened (%lld bytes then)",
                          f->path, (long long)f->size);
    /* Trailing dims the block spans whole merge into one contiguous run (k: the dims
     * before the run's; the run covers dim k's local length and everything after it). */
    int64_t item = dtr_dtype_info(t->dtype)->size, run = item;
    int k = t->ndim;
    while (k > 0 && lay.local_shape[k - 1] == t->shape[k - 1]) run *= t->shape[--k];
    int64_t stride[DTR_MAX_TENSOR_DIMS], base = f->data_start + t->begin; /* bytes per step */
    for (int d = t->ndim - 1; d >= 0; d--)
        stride[d] = d == t->ndim - 1 ? item : stride[d + 1] * t->shape[d + 1];
    if (k > 0) run *= lay.local_shape[--k]; /* dim k partly: its local length */
    int64_t reads = 0, idx[DTR_MAX_TENSOR_DIMS] = {0};
    char *dst = out;
    for (int64_t done = 0; done < lay.bytes; done += run) {
        int64_t off = base;
        for (int d = 0; d < t->ndim; d++) off += (lay.global_offset[d] + idx[d]) * stride[d];
        DTR_CHECK(dtr__ck_read(f, dst + done, run, off));
        reads++;
        for (int d = k - 1; d >= 0; d--) { /* the next run: the outer dims' odometer */
            if (++idx[d] < lay.local_shape[d]) break;
            idx[d] = 0;
        }
    }
    if (stats != NULL) *stats = (dtr_checkpoint_read_stats_t){lay.bytes, reads};
    return DTR_OK;
}
