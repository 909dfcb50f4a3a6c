// The executor's device kernels: box copies (pack and unpack of pieces), ranges of a box,
// AVG's divide and dtype casts. Every launcher enqueues on the caller's stream and returns
// the launch's cudaError_t. Box copies work in the widest unit (16, 8, 4, 2 or 1 bytes)
// that divides the run, every stride and both base addresses, so a gather of f32 rows
// moves 16-byte vectors.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "redistribute/cuda/kernels.h"

namespace {

constexpr int kMaxDims = 9;  // 8 tensor dims and the item
constexpr int kThreads = 256;
constexpr int kSpanPerThread = 16;  // units of a row one thread of box_rows copies, at most

// A box copy in units of W bytes: rows over the outer dims, `run` units per row.
struct Box {
    int outer;                 // dims before the run
    int64_t ext[kMaxDims];     // extents of the outer dims
    int64_t sst[kMaxDims];     // their strides in units, source
    int64_t dst_st[kMaxDims];  // and destination
    int64_t rows, run;
};

__device__ inline void row_offsets(const Box &b, int64_t row, int64_t *so, int64_t *dof) {
    int64_t s = 0, d = 0;
    for (int k = b.outer - 1; k >= 0; k--) {
        int64_t i = row % b.ext[k];
        row /= b.ext[k];
        s += i * b.sst[k];
        d += i * b.dst_st[k];
    }
    *so = s;
    *dof = d;
}

// Long rows: a block per piece of `span` units of a row (grid-stride over the pieces),
// threads over its units. A row longer than a span is cut in several, so a few long rows
// (a leading-dim copy is one row) still spread over the whole GPU.
template <typename U>
__global__ void box_rows(Box b, int64_t pieces, int64_t span, const U *__restrict__ src,
                         U *__restrict__ dst) {
    for (int64_t w = blockIdx.x; w < b.rows * pieces; w += gridDim.x) {
        int64_t row = pieces == 1 ? w : w / pieces, lo = (w - row * pieces) * span;
        int64_t hi = lo + span < b.run ? lo + span : b.run;
        int64_t so, dof;
        row_offsets(b, row, &so, &dof);
        for (int64_t u = lo + threadIdx.x; u < hi; u += blockDim.x) dst[dof + u] = src[so + u];
    }
}

// Short rows: a thread per unit.
template <typename U>
__global__ void box_flat(Box b, const U *__restrict__ src, U *__restrict__ dst) {
    int64_t total = b.rows * b.run;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = t / b.run, u = t - row * b.run, so, dof;
        row_offsets(b, row, &so, &dof);
        dst[dof + u] = src[so + u];
    }
}

template <typename U>
cudaError_t launch_box(cudaStream_t st, const Box &b, const void *src, void *dst) {
    const U *s = (const U *)src;
    U *d = (U *)dst;
    if (b.run >= 64) {
        int64_t span = kThreads * kSpanPerThread, pieces = (b.run + span - 1) / span;
        int64_t work = b.rows * pieces, blocks = work < 65536 ? work : 65536;
        int threads = b.run >= kThreads ? kThreads : (int)((b.run + 31) / 32 * 32);
        box_rows<U><<<(unsigned)blocks, threads, 0, st>>>(b, pieces, span, s, d);
    } else {
        int64_t total = b.rows * b.run, blocks = (total + kThreads - 1) / kThreads;
        if (blocks > 65536) blocks = 65536;
        box_flat<U><<<(unsigned)blocks, kThreads, 0, st>>>(b, s, d);
    }
    return cudaGetLastError();
}

int64_t unit_for(int64_t g) {
    for (int64_t w = 16; w > 1; w /= 2)
        if (g % w == 0) return w;
    return 1;
}

// Elements [u, v) of a box, one thread per element, in units of W bytes (W divides item).
struct Range {
    int nd;
    int64_t ext[kMaxDims], bst[kMaxDims];  // box extents; block strides in units
    int64_t base;                          // block offset of the box's corner, in units
    int64_t u, count, per;                 // first element, elements, units per element
};

template <typename U>
__global__ void range_kernel(Range r, U *block, U *flat, int to_block) {
    int64_t total = r.count * r.per;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t e = t / r.per, part = t - e * r.per, f = r.u + e, off = r.base;
        for (int k = r.nd - 1; k >= 0; k--) {
            off += (f % r.ext[k]) * r.bst[k];
            f /= r.ext[k];
        }
        U *b = block + off + part, *c = flat + e * r.per + part;
        if (to_block) *b = *c;
        else *c = *b;
    }
}

template <typename U>
cudaError_t launch_range(cudaStream_t st, const Range &r, void *block, void *flat, int to_block) {
    int64_t total = r.count * r.per, blocks = (total + kThreads - 1) / kThreads;
    if (blocks > 65536) blocks = 65536;
    range_kernel<U><<<(unsigned)blocks, kThreads, 0, st>>>(r, (U *)block, (U *)flat, to_block);
    return cudaGetLastError();
}

// dtr_dtype_t values (dtensor/dtensor.h), repeated: this file is C++ and sees no dtr header.
enum { F32 = 0, F64, F16, BF16, I32, I64, U8, F8E4M3, F8E5M2, C64, C128 };

// A complex dtype as its parts with *count doubled (dtr__parts of dtensor/internal.h): its
// divides, adds and casts are those of its real and imaginary parts.
static int parts(int dtype, int64_t *count) {
    if (dtype != C64 && dtype != C128) return dtype;
    *count *= 2;
    return dtype == C64 ? F32 : F64;
}

template <typename T, typename Op>
__global__ void map_kernel(const T *src, T *dst, int64_t count, Op op) {
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += (int64_t)gridDim.x * blockDim.x)
        dst[k] = op(src[k]);
}

// 16 bytes of T at a time: one vector load and store per thread and step, as cudaMemcpy
// moves them (scalar 4-byte accesses reached half the memory's bandwidth on an H200).
template <typename T>
struct alignas(16) Vec16 {
    T v[16 / sizeof(T)];
};

template <typename T, typename Op>
__global__ void map_vec_kernel(const Vec16<T> *src, Vec16<T> *dst, int64_t count, Op op) {
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += (int64_t)gridDim.x * blockDim.x) {
        Vec16<T> x = src[k];
#pragma unroll
        for (int i = 0; i < (int)(16 / sizeof(T)); i++) x.v[i] = op(x.v[i]);
        dst[k] = x;
    }
}

template <typename T, typename Op>
cudaError_t launch_map(cudaStream_t st, const void *src, void *dst, int64_t count, Op op) {
    int64_t head = 0; /* elements done in 16-byte vectors, where both ends are aligned */
    if (16 % sizeof(T) == 0 && (uintptr_t)src % 16 == 0 && (uintptr_t)dst % 16 == 0) {
        int64_t per = 16 / sizeof(T), vecs = count / per, blocks = (vecs + kThreads - 1) / kThreads;
        if (blocks > 65536) blocks = 65536;
        if (blocks >= 1) {
            map_vec_kernel<T, Op><<<(unsigned)blocks, kThreads, 0, st>>>(
                (const Vec16<T> *)src, (Vec16<T> *)dst, vecs, op);
            head = vecs * per;
        }
    }
    int64_t rest = count - head, blocks = (rest + kThreads - 1) / kThreads;
    if (blocks > 65536) blocks = 65536;
    if (blocks >= 1)
        map_kernel<T, Op><<<(unsigned)blocks, kThreads, 0, st>>>((const T *)src + head,
                                                                 (T *)dst + head, rest, op);
    return cudaGetLastError();
}

// The divide of dtensor/dtype.c's dtr__divide: floats and halves in f32 (rounded once),
// f64 in f64, integers truncate.
struct DivF32 { float n; __device__ float operator()(float x) const { return x / n; } };
struct DivF64 { double n; __device__ double operator()(double x) const { return x / n; } };
struct DivF16 {
    float n;
    __device__ __half operator()(__half x) const { return __float2half_rn(__half2float(x) / n); }
};
struct DivBF16 {
    float n;
    __device__ __nv_bfloat16 operator()(__nv_bfloat16 x) const {
        return __float2bfloat16_rn(__bfloat162float(x) / n);
    }
};
struct DivI32 { int32_t n; __device__ int32_t operator()(int32_t x) const { return x / n; } };
struct DivI64 { int64_t n; __device__ int64_t operator()(int64_t x) const { return x / n; } };
struct DivU8 {
    int64_t n;
    __device__ uint8_t operator()(uint8_t x) const { return (uint8_t)((int64_t)x / n); }
};

__device__ inline float to_f32(float x) { return x; }
__device__ inline float to_f32(__half x) { return __half2float(x); }
__device__ inline float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename D> __device__ D from_value(float x);
template <> __device__ float from_value<float>(float x) { return x; }
template <> __device__ __half from_value<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __nv_bfloat16 from_value<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

// f64 goes through double so nothing is rounded twice.
template <typename S, typename D>
__global__ void cast_kernel(const S *src, D *dst, int64_t count) {
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += (int64_t)gridDim.x * blockDim.x) {
        if constexpr (std::is_same<D, double>::value) {
            if constexpr (std::is_same<S, double>::value) dst[k] = src[k];
            else dst[k] = (double)to_f32(src[k]);
        } else if constexpr (std::is_same<S, double>::value) {
            if constexpr (std::is_same<D, float>::value) dst[k] = (float)src[k];
            else if constexpr (std::is_same<D, __half>::value) dst[k] = __double2half(src[k]);
            else dst[k] = __double2bfloat16(src[k]);
        } else {
            dst[k] = from_value<D>(to_f32(src[k]));
        }
    }
}

template <typename S, typename D>
cudaError_t launch_cast(cudaStream_t st, const void *src, void *dst, int64_t count) {
    int64_t blocks = (count + kThreads - 1) / kThreads;
    if (blocks > 65536) blocks = 65536;
    if (blocks < 1) return cudaSuccess;
    cast_kernel<S, D><<<(unsigned)blocks, kThreads, 0, st>>>((const S *)src, (D *)dst, count);
    return cudaGetLastError();
}

template <typename S>
int cast_from(cudaStream_t st, int dd, const void *src, void *dst, int64_t count) {
    switch (dd) {
    case F32: return launch_cast<S, float>(st, src, dst, count);
    case F64: return launch_cast<S, double>(st, src, dst, count);
    case F16: return launch_cast<S, __half>(st, src, dst, count);
    case BF16: return launch_cast<S, __nv_bfloat16>(st, src, dst, count);
    default: return -1;
    }
}

}  // namespace

extern "C" int dtr_cuda__copy_box(void *stream, int nd, int64_t item, const void *src,
                                  const int64_t *sshape, const int64_t *slo, const int64_t *ext,
                                  void *dst, const int64_t *dshape, const int64_t *dlo) {
    // Byte dims: the tensor dims, then the item; trailing dims both blocks span whole merge
    // into the run.
    int64_t e[kMaxDims], ss[kMaxDims], ds[kMaxDims], sl[kMaxDims], dl[kMaxDims];
    int k = 0;
    for (int d = 0; d < nd; d++, k++) {
        e[k] = ext[d];
        ss[k] = sshape[d];
        ds[k] = dshape[d];
        sl[k] = slo[d];
        dl[k] = dlo[d];
        if (e[k] == 0) return cudaSuccess;
    }
    e[k] = ss[k] = ds[k] = item;
    sl[k] = dl[k] = 0;
    k++;
    while (k > 1 && e[k - 1] == ss[k - 1] && e[k - 1] == ds[k - 1]) {
        e[k - 2] *= e[k - 1];
        sl[k - 2] *= ss[k - 1];
        dl[k - 2] *= ds[k - 1];
        ss[k - 2] *= ss[k - 1];
        ds[k - 2] *= ds[k - 1];
        k--;
    }
    // strides in bytes, and the corners' byte offsets
    int64_t sst[kMaxDims], dst_st[kMaxDims], so = 0, dof = 0, s = 1, t = 1;
    for (int d = k - 1; d >= 0; d--) {
        sst[d] = s;
        dst_st[d] = t;
        so += sl[d] * s;
        dof += dl[d] * t;
        s *= ss[d];
        t *= ds[d];
    }
    const char *sp = (const char *)src + so;
    char *dp = (char *)dst + dof;
    int64_t g = e[k - 1] | (int64_t)(uintptr_t)sp | (int64_t)(uintptr_t)dp;
    for (int d = 0; d < k - 1; d++) g |= sst[d] | dst_st[d];
    int64_t w = unit_for(g);
    Box b;
    b.outer = k - 1;
    b.rows = 1;
    for (int d = 0; d < k - 1; d++) {
        b.ext[d] = e[d];
        b.sst[d] = sst[d] / w;
        b.dst_st[d] = dst_st[d] / w;
        b.rows *= e[d];
    }
    b.run = e[k - 1] / w;
    cudaStream_t st = (cudaStream_t)stream;
    switch (w) {
    case 16: return launch_box<uint4>(st, b, sp, dp);
    case 8: return launch_box<uint2>(st, b, sp, dp);
    case 4: return launch_box<uint32_t>(st, b, sp, dp);
    case 2: return launch_box<uint16_t>(st, b, sp, dp);
    default: return launch_box<uint8_t>(st, b, sp, dp);
    }
}

extern "C" int dtr_cuda__copy_range(void *stream, int nd, int64_t item, void *block,
                                    const int64_t *bshape, const int64_t *blo,
                                    const int64_t *ext, int64_t u, int64_t v, void *flat,
                                    int to_block) {
    if (v <= u) return cudaSuccess;
    int64_t g = item | (int64_t)(uintptr_t)block | (int64_t)(uintptr_t)flat;
    int64_t w = unit_for(g);
    Range r;
    r.nd = nd;
    r.u = u;
    r.count = v - u;
    r.per = item / w;
    r.base = 0;
    int64_t s = item / w;
    for (int d = nd - 1; d >= 0; d--) {
        r.ext[d] = ext[d];
        r.bst[d] = s;
        r.base += blo[d] * s;
        s *= bshape[d];
    }
    cudaStream_t st = (cudaStream_t)stream;
    switch (w) {
    case 16: return launch_range<uint4>(st, r, block, flat, to_block);
    case 8: return launch_range<uint2>(st, r, block, flat, to_block);
    case 4: return launch_range<uint32_t>(st, r, block, flat, to_block);
    case 2: return launch_range<uint16_t>(st, r, block, flat, to_block);
    default: return launch_range<uint8_t>(st, r, block, flat, to_block);
    }
}

extern "C" int dtr_cuda__divide(void *stream, int dtype, const void *src, void *dst,
                                int64_t count, int64_t n) {
    cudaStream_t st = (cudaStream_t)stream;
    switch (parts(dtype, &count)) {
    case F32: return launch_map<float>(st, src, dst, count, DivF32{(float)n});
    case F64: return launch_map<double>(st, src, dst, count, DivF64{(double)n});
    case F16: return launch_map<__half>(st, src, dst, count, DivF16{(float)n});
    case BF16: return launch_map<__nv_bfloat16>(st, src, dst, count, DivBF16{(float)n});
    case I32: return launch_map<int32_t>(st, src, dst, count, DivI32{(int32_t)n});
    case I64: return launch_map<int64_t>(st, src, dst, count, DivI64{n});
    case U8: return launch_map<uint8_t>(st, src, dst, count, DivU8{n});
    default: return -1;
    }
}

// dst[k] += src[k]: floats and halves in f32 (rounded once), f64 in f64.
template <typename T>
__global__ void add_kernel(const T *src, T *dst, int64_t count) {
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += (int64_t)gridDim.x * blockDim.x) {
        if constexpr (std::is_same<T, double>::value) dst[k] = dst[k] + src[k];
        else dst[k] = from_value<T>(to_f32(dst[k]) + to_f32(src[k]));
    }
}

template <typename T>
cudaError_t launch_add(cudaStream_t st, const void *src, void *dst, int64_t count) {
    int64_t blocks = (count + kThreads - 1) / kThreads;
    if (blocks > 65536) blocks = 65536;
    if (blocks < 1) return cudaSuccess;
    add_kernel<T><<<(unsigned)blocks, kThreads, 0, st>>>((const T *)src, (T *)dst, count);
    return cudaGetLastError();
}

extern "C" int dtr_cuda__add(void *stream, int dtype, const void *src, void *dst,
                             int64_t count) {
    cudaStream_t st = (cudaStream_t)stream;
    switch (parts(dtype, &count)) {
    case F32: return launch_add<float>(st, src, dst, count);
    case F64: return launch_add<double>(st, src, dst, count);
    case F16: return launch_add<__half>(st, src, dst, count);
    case BF16: return launch_add<__nv_bfloat16>(st, src, dst, count);
    default: return -1;
    }
}

extern "C" int dtr_cuda__cast(void *stream, int sd, const void *src, int dd, void *dst,
                              int64_t count) {
    cudaStream_t st = (cudaStream_t)stream;
    if ((sd == C64 || sd == C128) != (dd == C64 || dd == C128)) return -1;
    int64_t n = count;
    sd = parts(sd, &n);
    dd = parts(dd, &count);
    switch (sd) {
    case F32: return cast_from<float>(st, dd, src, dst, count);
    case F64: return cast_from<double>(st, dd, src, dst, count);
    case F16: return cast_from<__half>(st, dd, src, dst, count);
    case BF16: return cast_from<__nv_bfloat16>(st, dd, src, dst, count);
    default: return -1;
    }
}
