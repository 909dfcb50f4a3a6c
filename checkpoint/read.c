/* One rank's block of a tensor, read from its file by pread (dtr_checkpoint.h). */
#define _DEFAULT_SOURCE /* preadv */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <xxhash.h>

#include "checkpoint/internal.h"
#include "numeric/numeric.h"

static const char *const F = "dtr_checkpoint_read_block";

/* The spec against tensor t: same shape and dtype, nothing Partial. */
static dtr_status_t dtr__ck_spec_fits(const dtr__ck_tensor_t *t, const dtr_spec_t *spec) {
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
    if (spec->dtype != t->dtype && !dtr__castable(t->dtype, spec->dtype))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F,
                          "spec->dtype: %s, tensor '%s' is %s (casts: between float dtypes)",
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

/* Runs close together in a file are read by one preadv, the gaps between them (at most
 * DTR__CK_GAP bytes each) into one scratch buffer: a block of short rows (a later dim's
 * shard) costs a few system calls instead of one per row, for the gaps' bytes. */
#define DTR__CK_GAP (64 << 10)
#define DTR__CK_IOV 512

typedef struct {
    const dtr__ck_file_t *f;
    struct iovec iov[DTR__CK_IOV];
    int n;
    int64_t start, end; /* the batch's bytes of the file */
    char *scratch;      /* DTR__CK_GAP bytes: where gaps go */
    XXH3_state_t *hs;   /* a whole piece's checksum, over its runs in order */
    dtr_checkpoint_read_stats_t *stats;
} dtr__ck_batch_t;

static dtr_status_t dtr__ck_flush(dtr__ck_batch_t *b) {
    if (b->n == 0) return DTR_OK;
    ssize_t r;
    do r = preadv(b->f->fd, b->iov, b->n, (off_t)b->start);
    while (r < 0 && errno == EINTR);
    b->stats->reads++;
    if (r != b->end - b->start) { /* short (or past 2 GiB): one iov at a time */
        int64_t at = b->start;
        for (int i = 0; i < b->n; i++) {
            DTR_CHECK(dtr__ck_read(b->f, b->iov[i].iov_base, (int64_t)b->iov[i].iov_len, at));
            at += (int64_t)b->iov[i].iov_len;
            b->stats->reads++;
        }
    }
    b->stats->file_bytes += b->end - b->start;
    for (int i = 0; b->hs != NULL && i < b->n; i++)
        if (b->iov[i].iov_base != b->scratch)
            XXH3_64bits_update(b->hs, b->iov[i].iov_base, b->iov[i].iov_len);
    b->n = 0;
    return DTR_OK;
}

/* run bytes of the file at `at` into dst, batched with the runs before it where close. */
static dtr_status_t dtr__ck_add(dtr__ck_batch_t *b, char *dst, int64_t run, int64_t at) {
    int64_t gap = at - b->end;
    if (b->n > 0 && (gap < 0 || gap > DTR__CK_GAP || b->n + 2 > DTR__CK_IOV))
        DTR_CHECK(dtr__ck_flush(b));
    if (b->n == 0) b->start = b->end = at;
    else if (gap > 0) b->iov[b->n++] = (struct iovec){b->scratch, (size_t)gap};
    b->iov[b->n++] = (struct iovec){dst, (size_t)run};
    b->end = at + run;
    b->stats->runs++;
    return DTR_OK;
}

/* Boxes of short rows (runs under DTR__CK_MAP_RUN, at least DTR__CK_MAP_MIN bytes in all)
 * are copied out of a read-only mapping of the file instead, DTR__CK_WINDOW bytes of it at a
 * time: only the rows' bytes are copied (no gaps), in a few system calls, and at most one
 * window is mapped (resident) at once. DTR_CHECKPOINT_MMAP=0 in the environment turns it off
 * (pread only); where mmap fails (a file system without it) the box goes on by preadv. */
#define DTR__CK_MAP_RUN (64 << 10)
#define DTR__CK_MAP_MIN (256 << 10)
#define DTR__CK_WINDOW ((int64_t)16 << 20)

static bool dtr__ck_map_enabled(void) {
    static int on = -1; /* read once (a benign race: every thread computes the same) */
    if (on < 0) {
        const char *e = getenv("DTR_CHECKPOINT_MMAP");
        on = e == NULL || strcmp(e, "0") != 0;
    }
    return on == 1;
}

typedef struct {
    char *base;
    int64_t lo, hi; /* the file's bytes [lo, hi) mapped at base */
} dtr__ck_window_t;

static void dtr__ck_unmap(dtr__ck_window_t *w) {
    if (w->base != NULL) munmap(w->base, (size_t)(w->hi - w->lo));
    w->base = NULL;
}

/* run bytes of the file at `at` into dst from the window, moving the window (up to `end`,
 * the box's last byte) where the run lies outside it; false where mmap fails. */
static bool dtr__ck_copy_mapped(const dtr__ck_file_t *f, dtr__ck_window_t *w, char *dst,
                                int64_t run, int64_t at, int64_t end,
                                dtr_checkpoint_read_stats_t *stats) {
    if (w->base == NULL || at < w->lo || at + run > w->hi) {
        dtr__ck_unmap(w);
        int64_t page = (int64_t)sysconf(_SC_PAGESIZE), lo = at / page * page;
        int64_t hi = lo + DTR__CK_WINDOW < end ? lo + DTR__CK_WINDOW : end;
        void *p = mmap(NULL, (size_t)(hi - lo), PROT_READ, MAP_SHARED, f->fd, (off_t)lo);
        if (p == MAP_FAILED) return false;
        madvise(p, (size_t)(hi - lo), MADV_WILLNEED); /* read ahead (cold), map (warm) */
        *w = (dtr__ck_window_t){p, lo, hi};
        stats->reads++;
    }
    memcpy(dst, w->base + (at - w->lo), (size_t)run);
    stats->runs++;
    stats->file_bytes += run;
    return true;
}

/* Where box (lo, ext) meets the piece: its corner and extents; false where they do not. */
static bool dtr__ck_meet(int nd, const int64_t *lo, const int64_t *ext, const dtr__ck_piece_t *p,
                         int64_t *mlo, int64_t *mext) {
    for (int d = 0; d < nd; d++) {
        int64_t a = lo[d] > p->lo[d] ? lo[d] : p->lo[d];
        int64_t b = lo[d] + ext[d] < p->lo[d] + p->ext[d] ? lo[d] + ext[d] : p->lo[d] + p->ext[d];
        if (b <= a) return false;
        mlo[d] = a;
        mext[d] = b - a;
    }
    return true;
}

/* The box (mlo, mext) of piece p into the block (lo, shape) at out, run by run (a run is
 * contiguous in both: trailing dims both span whole merge into it), in the piece's row-major
 * order: short runs copied from a mapped window, the others batched into preadv; a whole
 * piece with a checksum is checked against it. */
static dtr_status_t dtr__ck_read_box(const dtr_checkpoint_t *ck, const dtr__ck_tensor_t *t,
                                     const dtr__ck_piece_t *p, const int64_t *mlo,
                                     const int64_t *mext, const int64_t *lo,
                                     const int64_t *shape, char *out, char *scratch,
                                     dtr_checkpoint_read_stats_t *stats) {
    const dtr__ck_file_t *f = &ck->files[p->file];
    struct stat sb; /* a file cut short since open would fail mid-read: refuse it first */
    if (fstat(f->fd, &sb) != 0 || (int64_t)sb.st_size != f->size)
        return dtr__error(DTR_ERR_IO, F, "%s: changed since it was opened (%lld bytes then)",
                          f->path, (long long)f->size);
    int nd = t->ndim;
    int64_t item = dtr_dtype_info(t->dtype)->size, run = item, sst[DTR_MAX_TENSOR_DIMS],
            dst[DTR_MAX_TENSOR_DIMS];
    for (int d = nd - 1; d >= 0; d--) { /* strides in bytes: the piece's, the block's */
        sst[d] = d == nd - 1 ? item : sst[d + 1] * p->ext[d + 1];
        dst[d] = d == nd - 1 ? item : dst[d + 1] * shape[d + 1];
    }
    int k = nd;
    bool whole = true;
    while (k > 0 && mext[k - 1] == p->ext[k - 1] && mext[k - 1] == shape[k - 1])
        run *= mext[--k];
    if (k > 0) run *= mext[--k];
    for (int d = 0; d < nd; d++) whole = whole && mext[d] == p->ext[d];
    XXH3_state_t *hs = whole && p->has_checksum ? XXH3_createState() : NULL;
    if (hs != NULL) XXH3_64bits_reset(hs);
    int64_t idx[DTR_MAX_TENSOR_DIMS] = {0}, total = 1;
    for (int d = 0; d < nd; d++) total *= mext[d];
    dtr__ck_batch_t *b = malloc(sizeof *b);
    if (b == NULL) {
        XXH3_freeState(hs);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "a read batch");
    }
    *b = (dtr__ck_batch_t){.f = f, .scratch = scratch, .hs = hs, .stats = stats};
    dtr_status_t st = DTR_OK;
    dtr__ck_window_t w = {0};
    bool mapped = run < DTR__CK_MAP_RUN && total * item >= DTR__CK_MAP_MIN &&
                  dtr__ck_map_enabled();
    int64_t end = p->data; /* the box's last byte in the file, plus one */
    for (int d = 0; d < nd; d++) end += (mlo[d] - p->lo[d] + mext[d] - 1) * sst[d];
    end += item;
    for (int64_t done = 0; st == DTR_OK && done < total * item; done += run) {
        int64_t so = p->data, doff = 0;
        for (int d = 0; d < nd; d++) {
            so += (mlo[d] - p->lo[d] + idx[d]) * sst[d];
            doff += (mlo[d] - lo[d] + idx[d]) * dst[d];
        }
        if (mapped && dtr__ck_copy_mapped(f, &w, out + doff, run, so, end, stats)) {
            if (hs != NULL) XXH3_64bits_update(hs, out + doff, (size_t)run);
        } else {
            mapped = false;
            st = dtr__ck_add(b, out + doff, run, so);
        }
        for (int d = k - 1; d >= 0; d--) { /* the next run: the outer dims' odometer */
            if (++idx[d] < mext[d]) break;
            idx[d] = 0;
        }
    }
    dtr__ck_unmap(&w);
    if (st == DTR_OK) st = dtr__ck_flush(b);
    free(b);
    if (st == DTR_OK && hs != NULL && XXH3_64bits_digest(hs) != p->checksum)
        st = dtr__error(DTR_ERR_IO, F, "%s: tensor '%s': the piece at %lld fails its checksum "
                                       "(xxh3 %016llx, the manifest says %016llx)",
                        f->path, t->name, (long long)p->data,
                        (unsigned long long)XXH3_64bits_digest(hs),
                        (unsigned long long)p->checksum);
    XXH3_freeState(hs);
    return st;
}

/* The box (lo, ext) of tensor t into buf (row-major, that box's shape): the pieces that meet
 * it, each by dtr__ck_read_box. */
static dtr_status_t dtr__ck_read_sub(const dtr_checkpoint_t *ck, const dtr__ck_tensor_t *t,
                                     const int64_t *lo, const int64_t *ext, char *buf,
                                     char *scratch, dtr_checkpoint_read_stats_t *stats) {
    int64_t mlo[DTR_MAX_TENSOR_DIMS], mext[DTR_MAX_TENSOR_DIMS];
    for (int64_t i = 0; i < t->npieces; i++)
        if (dtr__ck_meet(t->ndim, lo, ext, &t->pieces[i], mlo, mext))
            DTR_CHECK(dtr__ck_read_box(ck, t, &t->pieces[i], mlo, mext, lo, ext, buf, scratch,
                                       stats));
    return DTR_OK;
}

/* A block read through host staging: chunks of the block that are contiguous in it (an
 * odometer over the dims before `k`, `rows` of dim k at a time, the dims after it whole),
 * each read into `stage`, cast where the dtypes differ, and handed to the space (or, on
 * host memory, converted straight into out). */
typedef struct {
    const dtr_checkpoint_t *ck;
    const dtr__ck_tensor_t *t;
    const dtr_layout_t *lay;
    dtr_dtype_t dtype; /* out's */
    const dtr_memory_ops_t *space;
    void *state;
    char *out, *stage, *conv, *scratch;
    int64_t stage_elems;
} dtr__ck_chunks_t;

static dtr_status_t dtr__ck_chunk(const dtr__ck_chunks_t *c, const int64_t *lo,
                                  const int64_t *ext, int64_t at, int64_t n,
                                  dtr_checkpoint_read_stats_t *stats) {
    DTR_CHECK(dtr__ck_read_sub(c->ck, c->t, lo, ext, c->stage, c->scratch, stats));
    int64_t item = dtr_dtype_info(c->dtype)->size;
    if (c->space == NULL) { /* host: a cast is the only reason to stage */
        dtr__convert(c->t->dtype, c->stage, c->dtype, c->out + at * item, n);
        return DTR_OK;
    }
    const char *src = c->stage;
    if (c->dtype != c->t->dtype) {
        dtr__convert(c->t->dtype, c->stage, c->dtype, c->conv, n);
        src = c->conv;
    }
    dtr_status_t st = c->space->copy(c->state, c->out + at * item, src, n * item,
                                     DTR_COPY_FROM_HOST);
    return st == DTR_OK ? DTR_OK
                        : dtr__error(st, F, "space '%s': copy of %lld bytes to out: %s",
                                     c->space->name, (long long)(n * item), dtr__last_detail());
}

static dtr_status_t dtr__ck_chunks(const dtr__ck_chunks_t *c, dtr_checkpoint_read_stats_t *st) {
    int nd = c->t->ndim;
    const int64_t *shape = c->lay->local_shape, *glo = c->lay->global_offset;
    if (nd == 0) return dtr__ck_chunk(c, glo, shape, 0, 1, st); /* a scalar: one chunk */
    int k = nd - 1;
    int64_t inner = 1; /* elements of one index of dim k */
    while (k > 0 && inner * shape[k] <= c->stage_elems) inner *= shape[k--];
    int64_t rows = c->stage_elems / inner, idx[DTR_MAX_TENSOR_DIMS] = {0};
    if (rows > shape[k]) rows = shape[k];
    for (int64_t at = 0; at < c->lay->numel;) {
        int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS];
        for (int d = 0; d < nd; d++) {
            lo[d] = glo[d] + (d <= k ? idx[d] : 0);
            ext[d] = d < k ? 1 : d > k ? shape[d] : 0;
        }
        ext[k] = shape[k] - idx[k] < rows ? shape[k] - idx[k] : rows;
        DTR_CHECK(dtr__ck_chunk(c, lo, ext, at, ext[k] * inner, st));
        at += ext[k] * inner;
        idx[k] += ext[k];
        for (int d = k; d > 0 && idx[d] == shape[d]; d--) { /* the odometer */
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
    return DTR_OK;
}

dtr_status_t dtr_checkpoint_read_block_to(const dtr_checkpoint_t *ck, int64_t index,
                                          const dtr_spec_t *spec, int rank,
                                          const dtr_memory_ops_t *space, void *state, void *out,
                                          size_t out_bytes, size_t staging_bytes,
                                          dtr_checkpoint_read_stats_t *stats) {
    DTR_CHECK_PTR(ck, F);
    DTR_CHECK_PTR(spec, F);
    DTR_CHECK_PTR(spec->mesh, F);
    if (index < 0 || index >= ck->ntensors)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "index: %lld, not 0..%lld",
                          (long long)index, (long long)ck->ntensors - 1);
    if (space != NULL && (space->copy == NULL || space->name == NULL))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "space: no copy (a dtr_memory_ops_t "
                                                       "with every required slot)");
    const dtr__ck_tensor_t *t = &ck->tensors[index];
    DTR_CHECK(dtr__ck_spec_fits(t, spec));
    dtr_layout_t lay;
    DTR_CHECK_AS(dtr_spec_layout(spec, rank, &lay), F);
    if (lay.bytes > 0) DTR_CHECK_PTR(out, F);
    if ((uint64_t)lay.bytes > out_bytes)
        return dtr__error(DTR_ERR_BUFFER_TOO_SMALL, F,
                          "out_bytes: %zu, rank %d's block of '%s' is %lld bytes", out_bytes,
                          rank, t->name, (long long)lay.bytes);
    int64_t src_item = dtr_dtype_info(t->dtype)->size, item = dtr_dtype_info(spec->dtype)->size;
    bool cast = spec->dtype != t->dtype;
    /* a staged element: its bytes as read, and as cast for a space */
    int64_t per = (space != NULL || cast ? src_item : 0) + (space != NULL && cast ? item : 0);
    if (staging_bytes == 0) staging_bytes = DTR_CHECKPOINT_STAGING;
    if (per > 0 && staging_bytes < (size_t)per)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "staging_bytes: %zu, less than one "
                                                       "element (%lld bytes staged)",
                          staging_bytes, (long long)per);
    dtr_checkpoint_read_stats_t got = {.bytes = lay.numel * src_item};
    dtr__ck_chunks_t c = {.ck = ck, .t = t, .lay = &lay, .dtype = spec->dtype, .space = space,
                          .state = state, .out = out};
    if (per > 0) {
        c.stage_elems = (int64_t)(staging_bytes / (size_t)per);
        if (c.stage_elems > lay.numel) c.stage_elems = lay.numel;
    }
    int64_t read_part = (c.stage_elems * src_item + 15) / 16 * 16; /* the cast part aligned */
    c.scratch = malloc(DTR__CK_GAP + (size_t)(read_part + c.stage_elems * (per - src_item)));
    if (c.scratch == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "staging");
    c.stage = c.scratch + DTR__CK_GAP;
    c.conv = c.stage + read_part;
    dtr_status_t st = DTR_OK;
    if (lay.numel > 0 && per == 0) /* host, same dtype: straight into out */
        st = dtr__ck_read_sub(ck, t, lay.global_offset, lay.local_shape, out, c.scratch, &got);
    else if (lay.numel > 0)
        st = dtr__ck_chunks(&c, &got);
    if (st == DTR_OK && space != NULL && space->sync != NULL) {
        st = space->sync(state);
        if (st != DTR_OK)
            st = dtr__error(st, F, "space '%s': %s", space->name, dtr__last_detail());
    }
    free(c.scratch);
    if (st == DTR_OK && stats != NULL) *stats = got;
    return st;
}

dtr_status_t dtr_checkpoint_read_block(const dtr_checkpoint_t *ck, int64_t index,
                                       const dtr_spec_t *spec, int rank, void *out,
                                       size_t out_bytes, dtr_checkpoint_read_stats_t *stats) {
    return dtr_checkpoint_read_block_to(ck, index, spec, rank, NULL, NULL, out, out_bytes, 0,
                                        stats);
}
