/*
 * The executor's device kernels (kernels.cu, built by nvcc): plain C entry points that
 * enqueue one kernel on a stream and return the CUDA error of the launch (0: cudaSuccess).
 * Shapes, corners and extents as in runtime/memory.h; dtypes as dtr_dtype_t values.
 */
#ifndef DTR_BACKENDS_CUDA_KERNELS_H
#define DTR_BACKENDS_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The box ext of src (shape sshape, corner slo) to dst (shape dshape, corner dlo). */
int dtr_cuda__copy_box(void *stream, int nd, int64_t item, const void *src,
                       const int64_t *sshape, const int64_t *slo, const int64_t *ext, void *dst,
                       const int64_t *dshape, const int64_t *dlo);

/* dst[k] = src[k] / n in the dtype's arithmetic; -1 for a dtype that has none (fp8).
 * Exported from libdtr_cuda.so for libdtr_nccl.so (DTR_INTERNAL_EXPORT in core/api.h, which
 * nvcc's sandbox does not see). */
__attribute__((visibility("default"))) int dtr_cuda__divide(void *stream, int dtype, const void *src, void *dst, int64_t count,
                     int64_t n);

/* dst[k] += src[k] for f32, f64, f16 and bf16 (halves in f32); -1 for another dtype. */
int dtr_cuda__add(void *stream, int dtype, const void *src, void *dst, int64_t count);

/* dst[k] = src[k] converted between f32, f64, f16 and bf16; -1 for another dtype. */
int dtr_cuda__cast(void *stream, int src_dtype, const void *src, int dst_dtype, void *dst,
                   int64_t count);

#ifdef __cplusplus
}
#endif

#endif
