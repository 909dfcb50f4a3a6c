// The executor's device kernels: box copies (pack and unpack of pieces; a range of a box is
// copied as boxes, cuda.c), AVG's divide, dtype casts and the add. Every launcher enqueues on the caller's stream and returns
// the launch's cudaError_t. Box copies work in the widest unit (16, 8, 4, 2 or 1 bytes)
// that divides the run, every stride and both base addresses, so a gather of f32 rows
// moves 16-byte vectors.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "backends/cuda/kernels.h"

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

// dtr_dtype_t values (dtensor/dtensor.h), repeated: this file is C++ and sees no dtr header.
enum { F32 = 0, F64, F16, BF16, I32, I64, U8, F8E4M3, F8E5M2, C64, C128 };

// A complex dtype as its parts with *count doubled (dtr__parts of numeric/numeric.h): its
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

// The divide of numeric/values.c's dtr__divide: floats and halves in f32 (rounded once),
// f64 in f64, integers truncate.
// x / n for a whole number n < 2^24, without a division: x times n's reciprocal, both in
// f64, rounded once to f32. The f64 product is within 2^-52 (relative) of x / n, and x / n
// is never nearer than 2^-25 / n >= 2^-49 to a midpoint between f32 values (x - n M, M such
// a midpoint, is a nonzero multiple of M's last bit), so the rounding lands where IEEE
// division's does, subnormals included. bench/cuda_bench.c checks it against the host.
__device__ inline float div_by_whole(float x, double rd) { return (float)((double)x * rd); }
struct DivF32 { float n; __device__ float operator()(float x) const { return x / n; } };
struct DivF32W {
    double rd;
    __device__ float operator()(float x) const { return div_by_whole(x, rd); }
};
struct DivF64 { double n; __device__ double operator()(double x) const { return x / n; } };
struct DivF16 {
    double rd;
    __device__ __half operator()(__half x) const {
        return __float2half_rn(div_by_whole(__half2float(x), rd));
    }
};
struct DivBF16 {
    double rd;
    __device__ __nv_bfloat16 operator()(__nv_bfloat16 x) const {
        return __float2bfloat16_rn(div_by_whole(__bfloat162float(x), rd));
    }
};
struct DivF16Slow {
    float n;
    __device__ __half operator()(__half x) const { return __float2half_rn(__half2float(x) / n); }
};
struct DivBF16Slow {
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

// One element cast, as the host's dtr__convert (numeric/values.c) and PyTorch do: to f64
// exactly; from f64 to a half through f32 (PyTorch's c10::Half and c10::BFloat16 are made
// from a float, so f64 -> f16 rounds twice there, on CPU and CUDA alike); between f32 and
// the halves through f32, rounded once.
template <typename S, typename D>
__device__ inline D cast_one(S x) {
    if constexpr (std::is_same<D, double>::value) {
        if constexpr (std::is_same<S, double>::value) return x;
        else return (double)to_f32(x);
    } else if constexpr (std::is_same<S, double>::value) {
        return from_value<D>((float)x);
    } else {
        return from_value<D>(to_f32(x));
    }
}

template <typename S, typename D>
__global__ void cast_kernel(const S *src, D *dst, int64_t count) {
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += (int64_t)gridDim.x * blockDim.x)
        dst[k] = cast_one<S, D>(src[k]);
}

// N elements a thread and step, N such that the wider side moves one 16-byte vector and the
// narrower one a smaller whole vector, so a warp's loads and stores each cover one
// contiguous span (8 elements a thread, 32 bytes of f32 stored in two halves, left every
// store instruction half its sectors: bf16 -> f32 ran at 0.57 of memcpy on an H200).
template <typename T, int N>
struct alignas(sizeof(T) * N) VecN {
    T v[N];
};

template <typename S, typename D>
__host__ __device__ constexpr int cast_per() { return 16 / (sizeof(S) > sizeof(D) ? sizeof(S) : sizeof(D)); }

template <typename S, typename D>
__global__ void cast_vec_kernel(const VecN<S, cast_per<S, D>()> *src,
                                VecN<D, cast_per<S, D>()> *dst, int64_t count) {
    constexpr int n = cast_per<S, D>();
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += (int64_t)gridDim.x * blockDim.x) {
        VecN<S, n> a = src[k];
        VecN<D, n> b;
#pragma unroll
        for (int i = 0; i < n; i++) b.v[i] = cast_one<S, D>(a.v[i]);
        dst[k] = b;
    }
}

// Blocks for `work` items, at most 65,536 (the kernels stride over the rest).
inline unsigned grid_for(int64_t work) {
    int64_t blocks = (work + kThreads - 1) / kThreads;
    return (unsigned)(blocks > 65536 ? 65536 : blocks);
}

template <typename S, typename D>
cudaError_t launch_cast(cudaStream_t st, const void *src, void *dst, int64_t count) {
    constexpr int n = cast_per<S, D>();
    int64_t head = 0; /* elements done n at a time, where both ends are 16-byte aligned */
    if ((uintptr_t)src % 16 == 0 && (uintptr_t)dst % 16 == 0 && count >= n) {
        int64_t vecs = count / n;
        cast_vec_kernel<S, D><<<grid_for(vecs), kThreads, 0, st>>>(
            (const VecN<S, n> *)src, (VecN<D, n> *)dst, vecs);
        head = vecs * n;
    }
    if (count > head)
        cast_kernel<S, D><<<grid_for(count - head), kThreads, 0, st>>>(
            (const S *)src + head, (D *)dst + head, count - head);
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

extern "C" int dtr_cuda__divide(void *stream, int dtype, const void *src, void *dst,
                                int64_t count, int64_t n) {
    cudaStream_t st = (cudaStream_t)stream;
    bool whole = n > 0 && n < (1 << 24); // exact in f32: the reciprocal's path
    double rd = 1.0 / (double)n;
    float nf = (float)n;
    switch (parts(dtype, &count)) {
    case F32:
        if (whole) return launch_map<float>(st, src, dst, count, DivF32W{rd});
        return launch_map<float>(st, src, dst, count, DivF32{nf});
    case F64: return launch_map<double>(st, src, dst, count, DivF64{(double)n});
    case F16:
        if (whole) return launch_map<__half>(st, src, dst, count, DivF16{rd});
        return launch_map<__half>(st, src, dst, count, DivF16Slow{nf});
    case BF16:
        if (whole) return launch_map<__nv_bfloat16>(st, src, dst, count, DivBF16{rd});
        return launch_map<__nv_bfloat16>(st, src, dst, count, DivBF16Slow{nf});
    case I32: return launch_map<int32_t>(st, src, dst, count, DivI32{(int32_t)n});
    case I64: return launch_map<int64_t>(st, src, dst, count, DivI64{n});
    case U8: return launch_map<uint8_t>(st, src, dst, count, DivU8{n});
    default: return -1;
    }
}

// dst[k] += src[k]: floats and halves in f32 (rounded once), f64 in f64.
template <typename T>
__device__ inline T add_one(T d, T x) {
    if constexpr (std::is_same<T, double>::value) return d + x;
    else return from_value<T>(to_f32(d) + to_f32(x));
}

template <typename T>
__global__ void add_kernel(const T *src, T *dst, int64_t count) {
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += (int64_t)gridDim.x * blockDim.x)
        dst[k] = add_one(dst[k], src[k]);
}

template <typename T>
__global__ void add_vec_kernel(const Vec16<T> *src, Vec16<T> *dst, int64_t count) {
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += (int64_t)gridDim.x * blockDim.x) {
        Vec16<T> a = src[k], b = dst[k];
#pragma unroll
        for (int i = 0; i < (int)(16 / sizeof(T)); i++) b.v[i] = add_one(b.v[i], a.v[i]);
        dst[k] = b;
    }
}

template <typename T>
cudaError_t launch_add(cudaStream_t st, const void *src, void *dst, int64_t count) {
    int64_t head = 0, per = 16 / sizeof(T); /* 16-byte vectors where both ends are aligned */
    if ((uintptr_t)src % 16 == 0 && (uintptr_t)dst % 16 == 0 && count >= per) {
        int64_t vecs = count / per;
        add_vec_kernel<T><<<grid_for(vecs), kThreads, 0, st>>>((const Vec16<T> *)src,
                                                               (Vec16<T> *)dst, vecs);
        head = vecs * per;
    }
    if (count > head)
        add_kernel<T><<<grid_for(count - head), kThreads, 0, st>>>((const T *)src + head,
                                                                   (T *)dst + head, count - head);
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
