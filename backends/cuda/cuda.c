/*
 * The CUDA memory space (dtr_cuda.h): dtr_memory_ops_t over cudart and the kernels of
 * kernels.cu, all on one stream.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <sched.h>
#include <stdlib.h>

#include "core/common.h"
#include "backends/cuda/dtr_cuda.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/range_boxes.h"

typedef struct {
    int device;
    cudaStream_t stream;
    bool own_stream;
    cudaStream_t own; /* the stream the space made (own_stream), whichever it runs on now */
    double timeout_s; /* for waits on the stream; 0: forever */
    dtr_status_t (*poll)(void *arg);
    void *poll_arg;
} dtr__cuda_t;

static dtr_status_t dtr__cuda_fail(cudaError_t e, const char *what) {
    return dtr__error(DTR_ERR_BACKEND, "cuda", "%s: %s (%s)", what, cudaGetErrorString(e),
                      cudaGetErrorName(e));
}

/* A launcher's result: 0 ok, -1 a dtype without the operation, else a cudaError_t. */
static dtr_status_t dtr__cuda_launched(int e, const char *what) {
    if (e == 0) return DTR_OK;
    if (e < 0) return dtr__error(DTR_ERR_UNSUPPORTED, "cuda", "%s: not for this dtype", what);
    return dtr__cuda_fail((cudaError_t)e, what);
}

/* Waits for the stream: polls it (and the poll hook) under the deadline. */
static dtr_status_t dtr__cuda_wait(dtr__cuda_t *c) {
    double t0 = dtr__now();
    for (unsigned spin = 0;; spin++) {
        cudaError_t e = cudaStreamQuery(c->stream);
        if (e == cudaSuccess) return DTR_OK;
        if (e != cudaErrorNotReady) return dtr__cuda_fail(e, "stream");
        if (c->poll != NULL) DTR_CHECK(c->poll(c->poll_arg));
        if (c->timeout_s > 0 && dtr__now() - t0 > c->timeout_s)
            return dtr__error(DTR_ERR_TIMEOUT, "cuda",
                              "the stream did not finish within %g s (DTR_TIMEOUT_S): a peer "
                              "failed, stopped or never made the call",
                              c->timeout_s);
        if (spin >= 64) sched_yield();
    }
}

int dtr_cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        dtr__cuda_fail(e, "cudaGetDeviceCount");
        cudaGetLastError(); /* not sticky: clear it */
        return 0;
    }
    if (n == 0) dtr__error(DTR_ERR_UNSUPPORTED, "cuda", "cudaGetDeviceCount: 0 devices");
    return n;
}

static dtr_status_t dtr__cuda_alloc(void *state, int64_t bytes, void **p) {
    (void)state;
    cudaError_t e = cudaMalloc(p, (size_t)bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "cuda", "cudaMalloc(%lld): %s", (long long)bytes,
                          cudaGetErrorString(e));
    }
    return DTR_OK;
}

static void dtr__cuda_free(void *state, void *p) {
    (void)state;
    if (p != NULL) cudaFree(p);
}

static dtr_status_t dtr__cuda_copy(void *state, void *dst, const void *src, int64_t bytes,
                                   dtr_copy_kind_t kind) {
    dtr__cuda_t *c = state;
    if (bytes <= 0) return DTR_OK;
    enum cudaMemcpyKind k = kind == DTR_COPY_TO_HOST     ? cudaMemcpyDeviceToHost
                            : kind == DTR_COPY_FROM_HOST ? cudaMemcpyHostToDevice
                                                         : cudaMemcpyDeviceToDevice;
    cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)bytes, k, c->stream);
    if (e != cudaSuccess) return dtr__cuda_fail(e, "cudaMemcpyAsync");
    /* to host: the bytes must be there on return; from pageable host memory cudart has
     * copied the source out before it returns */
    return kind == DTR_COPY_TO_HOST ? dtr__cuda_wait(c) : DTR_OK;
}

static dtr_status_t dtr__cuda_zero(void *state, void *dst, int64_t bytes) {
    dtr__cuda_t *c = state;
    cudaError_t e = cudaMemsetAsync(dst, 0, (size_t)bytes, c->stream);
    return e == cudaSuccess ? DTR_OK : dtr__cuda_fail(e, "cudaMemsetAsync");
}

static dtr_status_t dtr__cuda_copy_box(void *state, int nd, int64_t item, const void *src,
                                       const int64_t *sshape, const int64_t *slo,
                                       const int64_t *ext, void *dst, const int64_t *dshape,
                                       const int64_t *dlo) {
    dtr__cuda_t *c = state;
    return dtr__cuda_launched(
        dtr_cuda__copy_box(c->stream, nd, item, src, sshape, slo, ext, dst, dshape, dlo),
        "copy_box kernel");
}

static dtr_status_t dtr__cuda_copy_range(void *state, int nd, int64_t item, void *block,
                                         const int64_t *bshape, const int64_t *blo,
                                         const int64_t *ext, int64_t u, int64_t v, void *flat,
                                         bool to_block) {
    dtr__cuda_t *c = state;
    /* as box copies (range_boxes.h): whole rows in the box kernels' widest units */
    dtr_range_box_t boxes[DTR_RANGE_BOXES_MAX];
    int n = dtr_range_boxes(nd, ext, u, v, boxes);
    for (int i = 0; i < n; i++) {
        int64_t corner[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
        for (int d = 0; d < nd; d++) corner[d] = blo[d] + boxes[i].lo[d];
        char *f = (char *)flat + boxes[i].at * item;
        const int64_t *be = boxes[i].ext;
        int rc = to_block ? dtr_cuda__copy_box(c->stream, nd, item, f, be, zero, be, block,
                                               bshape, corner)
                          : dtr_cuda__copy_box(c->stream, nd, item, block, bshape, corner, be,
                                               f, be, zero);
        dtr_status_t st = dtr__cuda_launched(rc, "copy_range kernel");
        if (st != DTR_OK) return st;
    }
    return DTR_OK;
}

static dtr_status_t dtr__cuda_divide(void *state, dtr_dtype_t dtype, const void *src, void *dst,
                                     int64_t count, int64_t n) {
    dtr__cuda_t *c = state;
    return dtr__cuda_launched(dtr_cuda__divide(c->stream, (int)dtype, src, dst, count, n),
                              "divide kernel");
}

static dtr_status_t dtr__cuda_cast(void *state, dtr_dtype_t sd, const void *src,
                                   dtr_dtype_t dd, void *dst, int64_t count) {
    dtr__cuda_t *c = state;
    if (sd == dd) return dtr__cuda_copy(state, dst, src, count * dtr_dtype_info(sd)->size,
                                        DTR_COPY_WITHIN);
    return dtr__cuda_launched(dtr_cuda__cast(c->stream, (int)sd, src, (int)dd, dst, count),
                              "cast kernel");
}

static dtr_status_t dtr__cuda_add(void *state, dtr_dtype_t dtype, const void *src, void *dst,
                                  int64_t count) {
    dtr__cuda_t *c = state;
    return dtr__cuda_launched(dtr_cuda__add(c->stream, (int)dtype, src, dst, count),
                              "add kernel");
}

static dtr_status_t dtr__cuda_sync(void *state) { return dtr__cuda_wait(state); }

static void dtr__cuda_destroy(void *state) {
    dtr__cuda_t *c = state;
    if (c == NULL) return;
    if (c->own_stream) cudaStreamDestroy(c->own);
    free(c);
}

static const dtr_memory_ops_t dtr__cuda_ops = {
    .name = "cuda",
    .alloc = dtr__cuda_alloc,
    .free = dtr__cuda_free,
    .copy = dtr__cuda_copy,
    .zero = dtr__cuda_zero,
    .copy_box = dtr__cuda_copy_box,
    .copy_range = dtr__cuda_copy_range,
    .divide = dtr__cuda_divide,
    .cast = dtr__cuda_cast,
    .add = dtr__cuda_add,
    .sync = dtr__cuda_sync,
    .destroy = dtr__cuda_destroy,
};

const dtr_memory_ops_t *dtr_memory_cuda_ops(void) { return &dtr__cuda_ops; }

dtr_status_t dtr_memory_cuda_create(int device, void *stream, void **state) {
    DTR_CHECK_PTR(state, __func__);
    int n = dtr_cuda_device_count();
    if (n < 1)
        return dtr__error(DTR_ERR_UNSUPPORTED, __func__, "no GPU visible (%s)", dtr_last_error());
    if (device < 0 || device >= n)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "device: %d, but this process sees %d GPU(s)", device, n);
    double timeout;
    DTR_CHECK(dtr__env_timeout(__func__, &timeout));
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) return dtr__cuda_fail(e, "cudaSetDevice");
    dtr__cuda_t *c = calloc(1, sizeof *c);
    if (c == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "state");
    c->device = device;
    c->timeout_s = timeout;
    c->stream = (cudaStream_t)stream;
    if (c->stream == NULL) {
        e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            free(c);
            return dtr__cuda_fail(e, "cudaStreamCreateWithFlags");
        }
        c->own_stream = true;
        c->own = c->stream;
    }
    *state = c;
    return DTR_OK;
}

dtr_status_t dtr_memory_cuda_set_stream(void *state, void *stream) {
    DTR_CHECK_PTR(state, __func__);
    dtr__cuda_t *c = state;
    if (stream == NULL && !c->own_stream)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "stream: NULL, and the space has no stream of its own to return to");
    c->stream = stream != NULL ? (cudaStream_t)stream : c->own;
    return DTR_OK;
}

void *dtr_memory_cuda_stream(void *state) {
    return state != NULL ? (void *)((dtr__cuda_t *)state)->stream : NULL;
}

void dtr_memory_cuda_set_poll(void *state, dtr_status_t (*poll)(void *arg), void *arg) {
    if (state == NULL) return;
    ((dtr__cuda_t *)state)->poll = poll;
    ((dtr__cuda_t *)state)->poll_arg = arg;
}

dtr_status_t dtr_memory_cuda_wait_stream(void *state, void *stream) {
    DTR_CHECK_PTR(state, __func__);
    dtr__cuda_t *c = state;
    if (stream == NULL || (cudaStream_t)stream == c->stream) return DTR_OK;
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess) return dtr__cuda_fail(e, "cudaEventCreateWithFlags");
    e = cudaEventRecord(ev, (cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(c->stream, ev, 0);
    cudaEventDestroy(ev); /* (freed once the wait is met) */
    return e == cudaSuccess ? DTR_OK : dtr__cuda_fail(e, "cudaStreamWaitEvent");
}

/* The space's row, so a front end finds it by name (dtr_memory_find("cuda")). */
__attribute__((constructor)) static void dtr__cuda_register(void) {
    dtr_memory_info_t row = {
        .name = "cuda",
        .ops = &dtr__cuda_ops,
        .create = dtr_memory_cuda_create,
        .device_count = dtr_cuda_device_count,
        .set_stream = dtr_memory_cuda_set_stream,
        .wait_stream = dtr_memory_cuda_wait_stream,
    };
    (void)dtr_memory_register(&row);
}
