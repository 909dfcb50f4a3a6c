/* Export control and shared limits for every public dtr header. */
#ifndef DTR_CORE_API_H
#define DTR_CORE_API_H

#if defined(__GNUC__)
#define DTR_API __attribute__((visibility("default")))
#else
#define DTR_API
#endif

/* An internal (dtr__) function that the companion libraries, libdtr_cuda.so,
 * libdtr_nccl.so and libdtr_gloo.so, call in libdtr.so: exported so they can, yet no part of the API (not in
 * any installed header; docs/integration.md lists them). tests/dist checks the list. */
#if defined(__GNUC__)
#define DTR_INTERNAL_EXPORT __attribute__((visibility("default")))
#else
#define DTR_INTERNAL_EXPORT
#endif

/* Alignment of a public struct member, in a form C11 and C++11 both accept. */
#if defined(__cplusplus)
#define DTR_ALIGNAS(n) alignas(n)
#else
#define DTR_ALIGNAS(n) _Alignas(n)
#endif

/* Most mesh dims and most tensor dims a spec may have. */
#define DTR_MAX_MESH_DIMS 8
#define DTR_MAX_TENSOR_DIMS 8

#endif
