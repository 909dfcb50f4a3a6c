/*
 * Meshes, dtypes, specs and per-rank layouts.
 *
 * A mesh is an N-D grid (1..DTR_MAX_MESH_DIMS dims) of process ranks, row-major by default
 * or from an explicit rank list. A spec is a mesh, one placement per mesh dim, a global
 * shape (0..DTR_MAX_TENSOR_DIMS dims, each 0..2^40) and a dtype. A layout is what one rank
 * holds of the tensor: its local shape, its global offset and its byte size, following
 * PyTorch DTensor exactly (torch.chunk semantics, nested sharding in mesh-dim order or in a
 * shard order).
 */
#ifndef DTR_DTENSOR_DTENSOR_H
#define DTR_DTENSOR_DTENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "placement/placement.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest length of one tensor dim. */
#define DTR_MAX_DIM_SIZE ((int64_t)1 << 40)

/* ---- dtypes ------------------------------------------------------------------------ */

typedef enum {
    DTR_F32 = 0,
    DTR_F64,
    DTR_F16,
    DTR_BF16,
    DTR_I32,
    DTR_I64,
    DTR_U8,
    DTR_F8E4M3,
    DTR_F8E5M2,
    DTR_C64,  /* complex64: an f32 real part, then an f32 imaginary part */
    DTR_C128, /* complex128: two f64 */
    DTR_DTYPE_LAST
} dtr_dtype_t;

typedef struct {
    const char *name;    /* canonical text: "f32" */
    const char *aliases; /* other accepted names, space-separated: "float32 float" */
    int size;            /* bytes per element */
    bool is_float;
    bool storage_only;   /* moved, never reduced (the fp8 types) */
    const char *desc;
    bool is_complex;     /* (real, imag) pairs: reduced by sum and avg only, part by part */
} dtr_dtype_info_t;

/* The table entry of a dtype; NULL for a value out of range. Static storage. */
DTR_API const dtr_dtype_info_t *dtr_dtype_info(dtr_dtype_t dtype);

/* Canonical name, or NULL for a value out of range. */
DTR_API const char *dtr_dtype_name(dtr_dtype_t dtype);

/* Parses a canonical name or an alias (case-insensitive). *out written only on success. */
DTR_API dtr_status_t dtr_dtype_parse(const char *text, dtr_dtype_t *out);

/* ---- shapes as text ---------------------------------------------------------------- */

/* Parses "64x64" (dims separated by 'x', whitespace allowed), or the same as a JSON array
 * "[64, 64]" or a Python tuple "(64, 64)" / "(64,)", into out[0..cap); "", "scalar", "[]"
 * and "()" are a 0-d shape. Each dim must be 0..DTR_MAX_DIM_SIZE. *ndim and out are written
 * only on success. */
DTR_API dtr_status_t dtr_shape_parse(const char *text, int64_t *out, int cap, int *ndim);

/* The bytes of a tensor of `shape` in `dtype`, checked: every dim 0..DTR_MAX_DIM_SIZE
 * (OVERFLOW past it), and the size, with zero dims counted as one, within int64 (OVERFLOW:
 * no block of it could be sized). What every reader of shapes (the CLI's flags and files,
 * the Python package) checks with before it allocates. *bytes (0 with a zero dim) written
 * on success. */
DTR_API dtr_status_t dtr_shape_bytes(const int64_t *shape, int ndim, dtr_dtype_t dtype,
                                     int64_t *bytes);

/* Writes "2x5" ("scalar" for 0 dims) into buf[0..len); buf untouched on error. */
DTR_API dtr_status_t dtr_shape_format(const int64_t *shape, int ndim, char *buf, size_t len);

/* ---- meshes ------------------------------------------------------------------------ */

/* Opaque; created by dtr_mesh_create/dtr_mesh_parse, freed by dtr_mesh_destroy. Immutable
 * after creation, so it may be shared between threads. */
typedef struct dtr_mesh dtr_mesh_t;

/* Creates a mesh of ndims (1..DTR_MAX_MESH_DIMS) dims of sizes[i] >= 1 ranks each, at most
 * INT32_MAX ranks in all. ranks: NULL for row-major 0..N-1, or nranks distinct ranks >= 0 in
 * row-major mesh order (nranks must equal the product of sizes; it is ignored when ranks is
 * NULL). The mesh copies what it needs; the caller keeps its arrays. *out is written only
 * on success; the caller owns the mesh. */
DTR_API dtr_status_t dtr_mesh_create(int ndims, const int64_t *sizes, const int *ranks,
                                     int64_t nranks, dtr_mesh_t **out);

/* As dtr_mesh_create, with the sizes written as text: "2x4", "8". */
DTR_API dtr_status_t dtr_mesh_parse(const char *text, const int *ranks, int64_t nranks,
                                    dtr_mesh_t **out);

/* Frees a mesh; NULL is a no-op. Specs that borrowed it must not be used afterwards. */
DTR_API void dtr_mesh_destroy(dtr_mesh_t *mesh);

/* Accessors; on a NULL mesh or a dim out of range they return -1. */
DTR_API int dtr_mesh_ndims(const dtr_mesh_t *mesh);
DTR_API int64_t dtr_mesh_size(const dtr_mesh_t *mesh, int dim);
DTR_API int64_t dtr_mesh_nranks(const dtr_mesh_t *mesh);

/* True when both meshes have the same sizes and the same rank at every position. */
DTR_API bool dtr_mesh_equal(const dtr_mesh_t *a, const dtr_mesh_t *b);

/* The rank at a coordinate (coord[i] in 0..size(i)-1). */
DTR_API dtr_status_t dtr_mesh_rank_at(const dtr_mesh_t *mesh, const int64_t *coord,
                                      int *rank);

/* A rank's coordinate, into coord[0..ndims). DTR_ERR_NOT_IN_MESH for a rank the mesh lacks
 * (callers treat such a rank as a bystander). */
DTR_API dtr_status_t dtr_mesh_coord(const dtr_mesh_t *mesh, int rank, int64_t *coord);

/* The ranks of `rank`'s group along mesh dim `dim` (same coordinate on every other dim),
 * ordered by their coordinate on `dim`, into ranks[0..cap); *count = size(dim). */
DTR_API dtr_status_t dtr_mesh_group(const dtr_mesh_t *mesh, int rank, int dim, int *ranks,
                                    int64_t cap, int64_t *count);

/* Writes the sizes as "2x4" into buf[0..len); buf untouched on error. */
DTR_API dtr_status_t dtr_mesh_format(const dtr_mesh_t *mesh, char *buf, size_t len);

/* ---- specs and layouts ------------------------------------------------------------- */

/* A value the caller owns; fill it with dtr_spec_init. It borrows the mesh, which must
 * outlive it. Shard dims are stored normalised (0..ndim-1). */
typedef struct {
    const dtr_mesh_t *mesh;
    dtr_placement_t placements[DTR_MAX_MESH_DIMS]; /* one per mesh dim */
    int ndim;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    dtr_dtype_t dtype;
} dtr_spec_t;

/* Checks and stores a spec. nplacements must equal the mesh's dims; a negative shard dim d
 * means ndim + d. The whole tensor's byte size must fit in int64. Shard orders (S(d)[k]) must
 * be, per tensor dim, all 0 or exactly 0..n-1; _StridedShard placements (split_factor > 1)
 * are turned into orders as PyTorch decodes them, and refused (DTR_ERR_UNSUPPORTED) where
 * for this shape they hold strided pieces rather than the order's one block per rank. Orders
 * are stored normalised: all 0 for mesh-dim order. A ragged shard (S(d){sizes}) needs one size
 * per rank of its mesh dim, summing to the length it splits (the tensor dim's, or where
 * another mesh dim splits d before it, every piece's); the spec stores dtr's own copy of
 * the sizes. *out is written only on success. */
DTR_API dtr_status_t dtr_spec_init(dtr_spec_t *out, const dtr_mesh_t *mesh,
                                   const dtr_placement_t *placements, int nplacements,
                                   const int64_t *shape, int ndim, dtr_dtype_t dtype);

/* True when a placement of the spec is a ragged shard (S(d){sizes}). */
DTR_API bool dtr_spec_ragged(const dtr_spec_t *spec);

/* What one rank holds. */
typedef struct {
    int ndim;
    int64_t local_shape[DTR_MAX_TENSOR_DIMS];
    int64_t global_offset[DTR_MAX_TENSOR_DIMS];
    int64_t numel; /* product of local_shape */
    int64_t bytes; /* numel * dtype size */
} dtr_layout_t;

/* The layout at a mesh coordinate. Shard(d) on mesh dim i splits the current local length
 * of d by the chunk rule (a ragged shard: into its sizes, coordinate c taking sizes[c] after
 * the sum of sizes[0..c)), in d's shard order (mesh-dim order by default); Replicate and
 * Partial keep it whole. */
DTR_API dtr_status_t dtr_spec_layout_at(const dtr_spec_t *spec, const int64_t *coord,
                                        dtr_layout_t *out);

/* The layout of a rank; DTR_ERR_NOT_IN_MESH (out untouched) for a rank outside the mesh. */
DTR_API dtr_status_t dtr_spec_layout(const dtr_spec_t *spec, int rank, dtr_layout_t *out);

/* The chunk rule (torch.chunk, padded with empty chunks as DTensor does): length L split n
 * ways, chunk r. c = ceil(L / n); offset = min(c*r, L); size = max(0, min(L, c*r + c) - c*r).
 * Needs L >= 0, n >= 1, 0 <= r < n; returns DTR_ERR_INVALID_ARGUMENT otherwise. */
DTR_API dtr_status_t dtr_chunk(int64_t length, int64_t n, int64_t r, int64_t *size,
                               int64_t *offset);

#ifdef __cplusplus
}
#endif

#endif
