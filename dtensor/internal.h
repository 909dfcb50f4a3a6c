/* Internals of dtensor/ that other modules use. */
#ifndef DTR_DTENSOR_INTERNAL_H
#define DTR_DTENSOR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "dtensor/dtensor.h"

/* FNV-1a over the mesh's sizes and rank list: equal meshes hash equal. */
uint64_t dtr__mesh_hash(const dtr_mesh_t *mesh);

/* ---- shard orders (order.c) -------------------------------------------------------------
 * The mesh dims sharding tensor dim d in the order they split it ((order, mesh dim)
 * increasing), into dims; returns how many. */
int dtr__shard_seq(const dtr_placement_t *pl, int m, int d, int *dims);
/* Orders in normal form: 0 for mesh-dim order (and on every non-Shard), else each mesh
 * dim's index in its tensor dim's sequence; split factors cleared. With msize (may be NULL),
 * mesh dims of one rank, which split nothing, do not count against mesh-dim order. */
void dtr__orders_normalize(dtr_placement_t *pl, int m, const int64_t *msize);
/* All orders 0 (mesh-dim order everywhere)? Normalised placements only. */
bool dtr__orders_default(const dtr_placement_t *pl, int m);
/* Per tensor dim, orders all 0 or exactly 0..n-1. Errors name func and the placement. */
dtr_status_t dtr__orders_check(const dtr_placement_t *pl, int m, const char *func);
/* _StridedShard placements (split_factor > 1) turned into orders, as PyTorch decodes them,
 * where that is the same layout for this shape; an error naming func otherwise. pl is
 * written only on success. */
dtr_status_t dtr__orders_from_strided(const dtr_mesh_t *mesh, dtr_placement_t *pl, int m,
                                      const int64_t *shape, int ndim, const char *func);

/* ---- element values (dtype.c) ----------------------------------------------------------
 * Half types are converted with round-to-nearest-even, NaN kept NaN; fp8 types are storage
 * only and have no value helpers. */
float dtr__f16_to_f32(uint16_t h);
uint16_t dtr__f32_to_f16(float f);
float dtr__bf16_to_f32(uint16_t h);
uint16_t dtr__f32_to_bf16(float f);

/* A complex dtype as its parts (c64: f32, c128: f64) with *count doubled; any other dtype
 * as it is. Sum, avg and divides of complex values are those of their parts, so every loop
 * below (and every engine) reduces complex buffers as twice as many real ones. */
static inline dtr_dtype_t dtr__parts(dtr_dtype_t dtype, int64_t *count) {
    if (dtype != DTR_C64 && dtype != DTR_C128) return dtype;
    *count *= 2;
    return dtype == DTR_C64 ? DTR_F32 : DTR_F64;
}

/* Can a redistribution cast a into b? Float to float or complex to complex; not integers
 * (their casts truncate and wrap), not the storage-only fp8 types, not complex to real. */
static inline bool dtr__castable(dtr_dtype_t a, dtr_dtype_t b) {
    const dtr_dtype_info_t *x = dtr_dtype_info(a), *y = dtr_dtype_info(b);
    return x != NULL && y != NULL &&
           (a == b || (x->is_float && y->is_float && !x->storage_only && !y->storage_only &&
                       x->is_complex == y->is_complex));
}

/* Element k of a buffer of dtype as a double (integers and halves exactly), and back
 * (rounded to the dtype; integers are truncated toward zero and wrapped as C casts do). */
double dtr__load(dtr_dtype_t dtype, const void *buf, int64_t k); /* not complex: see parts */
/* exported for libdtr_nccl.so (NCCL's pre-multiply scalar in the collective's dtype) */
DTR_INTERNAL_EXPORT void dtr__store(dtr_dtype_t dtype, void *buf, int64_t k, double v);

/* dst[k] = src[k] / n for count elements, in the dtype's own arithmetic (halves through
 * f32; integers truncate, as C division does). src may equal dst. */
void dtr__divide(dtr_dtype_t dtype, const void *src, void *dst, int64_t count, int64_t n);

/* buf[k] /= d for count elements of a float dtype (d may be fractional: 1.5), in the
 * dtype's own arithmetic as dtr__divide: f32 and halves divide in f32 and round once. */
void dtr__divide_by(dtr_dtype_t dtype, void *buf, int64_t count, double d);

/* dst[k] = src[k] converted between dtypes (float dtypes; halves rounded to nearest even). src and dst must not overlap, unless the
 * dtypes are equal. */
void dtr__convert(dtr_dtype_t src_dtype, const void *src, dtr_dtype_t dst_dtype, void *dst,
                  int64_t count);

/* inout[k] = inout[k] op in[k], the way a backend without native half types reduces:
 * halves combine in f32 and round once per combination. */
void dtr__combine(dtr_dtype_t dtype, dtr_reduce_op_t op, const void *in, void *inout,
                  int64_t count);

/*
 * out[k] = ((in[0][k] op in[1][k]) op in[2][k]) ... op in[n-1][k] for count elements, in
 * exactly that order whatever the CPU (reduce.c): the kernel of the shared-memory
 * reductions. Halves are widened to f32, combined there and rounded once; integers wrap.
 * AVG is not an op here (callers sum, then divide). out may be one of the inputs.
 */
DTR_INTERNAL_EXPORT void dtr__reduce_n(dtr_dtype_t dtype, dtr_reduce_op_t op,
                                       const void *const *in, int n,
                                       void *out, int64_t count);

/* The vector forms of the element loops (values.c, reduce.c) this CPU runs, asked once:
 * 0 none (or not x86-64), 1 AVX2, 2 AVX2 and F16C. */
int dtr__simd_level(void);

/* The loops dtr__reduce_n can run on this CPU: 0 the generic build, 1 also AVX2 (with
 * F16C), 2 also AVX-512 (F, BW, VL). It runs the best one, up to what dtr__reduce_simd
 * allows. */
int dtr__reduce_levels(void);

/* Tests and benchmarks: the most dtr__reduce_n may use (0 generic, 1 AVX2, 2 AVX-512);
 * a negative level returns to the CPU's best. */
void dtr__reduce_simd(int most);

/* The ranks of meshes a and b together, ascending and each once, into a new array *out
 * (free it) of *n; errors name `func`. The group a change between two meshes agrees over
 * (redistribute/executor/refuse.c) and its plan's ranks (redistribute/planner/cross.c). */
dtr_status_t dtr__mesh_union(const dtr_mesh_t *a, const dtr_mesh_t *b, const char *func,
                             int **out, int *n);

/* qsort's and bsearch's comparison of two ints. */
int dtr__int_cmp(const void *a, const void *b);

/* dtr_shape_bytes with errors naming `func` (shape.c; dtr_spec_init checks with it). */
dtr_status_t dtr__shape_bytes(const int64_t *shape, int ndim, dtr_dtype_t dtype,
                              const char *func, int64_t *bytes);

#endif
