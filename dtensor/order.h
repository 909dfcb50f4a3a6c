/*
 * Shard orders (order.c): the sequence of mesh dims that split one tensor dim, and the
 * normal form of a placement's orders, which the planner's tables and geometry read and
 * dtensor/spec.c checks. Not installed.
 */
#ifndef DTR_DTENSOR_ORDER_H
#define DTR_DTENSOR_ORDER_H

#include <stdbool.h>
#include <stdint.h>

#include "dtensor/dtensor.h"

/* The mesh dims sharding tensor dim d in the order they split it ((order, mesh dim)
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

/* How placement p (on a mesh dim of n ranks) splits a piece of `length` at coordinate c: a
 * ragged shard's sizes (ragged.c; an empty piece gives nothing), else the chunk rule. p
 * must come from a spec. */
void dtr__split_piece(dtr_placement_t p, int64_t length, int64_t n, int64_t c, int64_t *size,
                int64_t *offset);
/* A spec's ragged shards: one size per rank of their mesh dim, summing to every length they
 * split but 0. Errors name func and the placement. */
dtr_status_t dtr__ragged_check(const dtr_spec_t *spec, const char *func);

#endif
