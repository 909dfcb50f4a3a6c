/*
 * Placements: how a tensor is laid out along one mesh dim.
 *
 *   Shard(d)     each rank of the mesh dim holds one chunk of tensor dim d (torch.chunk rule)
 *   Replicate    each rank holds the whole tensor
 *   Partial(op)  each rank holds a contribution; the tensor is their reduction by op
 *
 * Text form (parsed case-insensitively, whitespace anywhere between tokens):
 *   S(0)  Shard(0)  Shard(dim=0)         R  Replicate  Replicate()
 *   P  P(sum)  Partial(avg)  P(reduce_op=max)      (P alone means P(sum))
 *   S(0)[1]      a shard order (PyTorch's shard_order, printed as it prints it): this mesh
 *                dim is the second (index 1) of those sharding tensor dim 0 to split it
 *   S(0){3,0,5,2}  Shard(0){3,0,5,2}
 *                a ragged shard: tensor dim 0 split along this mesh dim into the given sizes,
 *                one per coordinate, in coordinate order (zeros allowed); with an order,
 *                S(0)[1]{3,0,5,2} (docs/semantics.md, "Ragged shards")
 *   _S(0, 2)  _StridedShard(dim=0, sf=2)  _StridedShard(0, split_factor=2)
 *                PyTorch's older spelling of a shard order; dtr_spec_init turns it into
 *                orders where it denotes the same layout (docs/semantics.md, "Shard orders")
 * Lists are comma-separated, optionally in [] or (): "S(0),R,P(avg)".
 * Printing gives the canonical short form, S(0) / S(0)[1] / S(0){3,0,5,2} / R / P(sum) (and
 * _S(0, 2) for a
 * split factor not yet turned into an order), so print(parse(x)) is canonical and
 * parse(print(p)) == p.
 */
#ifndef DTR_PLACEMENT_PLACEMENT_H
#define DTR_PLACEMENT_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/api.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DTR_SHARD = 0,
    DTR_REPLICATE,
    DTR_PARTIAL,
    DTR_PLACEMENT_KIND_LAST
} dtr_placement_kind_t;

typedef enum {
    DTR_REDUCE_SUM = 0,
    DTR_REDUCE_AVG,
    DTR_REDUCE_MAX,
    DTR_REDUCE_MIN,
    DTR_REDUCE_PRODUCT,
    DTR_REDUCE_OP_LAST
} dtr_reduce_op_t;

/* A plain value; compare with dtr_placement_equal. `dim` is meaningful for DTR_SHARD only
 * and may be negative (counted from the last tensor dim, as in PyTorch) until a spec
 * normalises it. `op` is meaningful for DTR_PARTIAL only.
 *
 * Shard orders (DTR_SHARD only; both 0 in a plain Shard, as every constructor and a
 * zero-initialised value leave them). The mesh dims that shard one tensor dim split it one
 * after another: by default in mesh-dim order, otherwise in increasing `order` (ties in
 * mesh-dim order). dtr_spec_init requires, per tensor dim, orders all 0 or exactly
 * 0..n-1 over its n sharding mesh dims, and stores them normalised (all 0 when the order
 * is mesh-dim order). `split_factor` > 1 is PyTorch's _StridedShard(dim, split_factor),
 * which dtr_spec_init turns into orders.
 *
 * Ragged shards (DTR_SHARD only): nsizes > 0 gives the size of each coordinate's piece along
 * the mesh dim instead of the chunk rule; dtr_spec_init requires nsizes to equal the mesh
 * dim's size and the sizes to sum to the length the shard splits. `sizes` points to a copy
 * dtr keeps until the process exits, one per distinct list (dtr_shard_sizes, the parsers
 * and dtr_spec_init make it), so a placement stays a plain value that copies freely; a
 * caller may point it at its own array for dtr_spec_init, which stores dtr's copy. */
typedef struct {
    dtr_placement_kind_t kind;
    int32_t dim;
    dtr_reduce_op_t op;
    int32_t order;        /* 0..DTR_MAX_MESH_DIMS-1 */
    int32_t split_factor; /* 0 or 1: none */
    int32_t nsizes;       /* 0: the chunk rule; else a ragged shard's sizes[0..nsizes) */
    const int64_t *sizes;
} dtr_placement_t;

/* Longest canonical text of one placement that is not a ragged shard
 * ("_S(-2147483648, 2147483647)") plus NUL; a ragged shard's is longer:
 * dtr_placement_text_len gives it. */
#define DTR_PLACEMENT_TEXT_MAX 32

/* The most sizes of a ragged shard (a mesh dim of more ranks takes the chunk rule only). */
#define DTR_MAX_RAGGED_SIZES 65536

DTR_API dtr_placement_t dtr_shard(int32_t dim);
DTR_API dtr_placement_t dtr_replicate(void);
DTR_API dtr_placement_t dtr_partial(dtr_reduce_op_t op);

/* A ragged shard of tensor dim `dim`: n (1..DTR_MAX_RAGGED_SIZES) sizes >= 0, one per
 * coordinate of the mesh dim it is placed on. dtr keeps a copy of the sizes (the caller
 * keeps its array). *out is written only on success; DTR_ERR_INVALID_ARGUMENT names the
 * size at fault. */
DTR_API dtr_status_t dtr_shard_sizes(int32_t dim, const int64_t *sizes, int n,
                                     dtr_placement_t *out);

/* Equal kinds, and equal dim, order, split factor and sizes (Shard; split factors 0 and 1
 * are equal; a ragged shard's sizes compare by value) or op (Partial); other fields are
 * ignored. Orders compare as stored: compare the
 * placements of specs (normalised), not hand-written values. */
DTR_API bool dtr_placement_equal(dtr_placement_t a, dtr_placement_t b);

/* "sum", "avg", "max", "min", "product"; NULL for a value out of range. */
DTR_API const char *dtr_reduce_op_name(dtr_reduce_op_t op);

/* Parses a reduce op name (case-insensitive). DTR_ERR_PARSE names the text. */
DTR_API dtr_status_t dtr_reduce_op_parse(const char *text, dtr_reduce_op_t *out);

/* Checks a placement value's fields (kind and op in range; a Shard's order in
 * 0..DTR_MAX_MESH_DIMS-1, its split factor >= 0, not both an order and a split factor;
 * sizes only on a Shard without a split factor, 0..DTR_MAX_RAGGED_SIZES of them, each
 * 0..DTR_MAX_DIM_SIZE). */
DTR_API dtr_status_t dtr_placement_validate(dtr_placement_t placement);

/* Parses exactly one placement. *out is written only on success. */
DTR_API dtr_status_t dtr_placement_parse(const char *text, dtr_placement_t *out);

/* Parses a comma-separated list into out[0..cap). *count and out are written only on
 * success. An empty list, a trailing comma, or more than cap (or DTR_MAX_MESH_DIMS) items is
 * an error. */
DTR_API dtr_status_t dtr_placements_parse(const char *text, dtr_placement_t *out, int cap,
                                          int *count);

/* Writes the canonical text ("S(0)") and a NUL into buf[0..len). DTR_ERR_BUFFER_TOO_SMALL,
 * buf untouched, if it does not fit. */
DTR_API dtr_status_t dtr_placement_format(dtr_placement_t placement, char *buf, size_t len);

/* The length of a placement's canonical text, without the NUL; -1 for an invalid value. */
DTR_API int64_t dtr_placement_text_len(dtr_placement_t placement);

/* At least the length of dtr_placements_format's text for these placements, without the
 * NUL (a buffer of this plus one always fits); -1 for invalid arguments. */
DTR_API int64_t dtr_placements_text_len(const dtr_placement_t *placements, int count);

/* Writes "S(0),R,P(sum)" for count (0..DTR_MAX_MESH_DIMS) placements: no spaces, no
 * brackets. buf is untouched on any error. */
DTR_API dtr_status_t dtr_placements_format(const dtr_placement_t *placements, int count,
                                           char *buf, size_t len);

/* For messages and tables: dtr_placements_format into a fixed buffer that always gets a
 * text. Where the exact one does not fit, each ragged shard's sizes show as "{N sizes}",
 * and "?" where even that does not (or the placements are invalid). Not for parsing back. */
DTR_API void dtr_placements_describe(const dtr_placement_t *placements, int count, char *buf,
                                     size_t len);

/* The placements as a JSON list of their texts, one item per mesh dim:
 * ["S(0){3,0,5,2}","R"] ([] for none or invalid ones). */
DTR_API void dtr_placements_print_json(FILE *out, const dtr_placement_t *placements,
                                       int count);

#ifdef __cplusplus
}
#endif

#endif
