/*
 * What dtensor/ lends the planner, the runtime and the executor about meshes (mesh.c): a hash that
 * equal meshes share (plan caches, communicator caches) and the ranks of two meshes
 * together (the group a change between meshes agrees over). Not installed.
 */
#ifndef DTR_DTENSOR_MESH_H
#define DTR_DTENSOR_MESH_H

#include <stdint.h>

#include "dtensor/dtensor.h"

/* The hash of the mesh's sizes and rank list, made at creation: equal meshes hash equal. */
uint64_t dtr__mesh_hash(const dtr_mesh_t *mesh);

/* The ranks of meshes a and b together, ascending and each once, into a new array *out
 * (free it) of *n; errors name `func`. The group a change between two meshes agrees over
 * (runtime/refuse.c) and its plan's ranks (redistribute/planner/cross.c). */
dtr_status_t dtr__mesh_union(const dtr_mesh_t *a, const dtr_mesh_t *b, const char *func,
                             int **out, int *n);

/* qsort's and bsearch's comparison of two ints. */
int dtr__int_cmp(const void *a, const void *b);

#endif
