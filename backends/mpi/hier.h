/*
 * The MPI backend's hierarchical reductions, for a group whose members span nodes with
 * several on each (docs/nodes.md): a reduction inside every node through a shared-memory
 * segment of that node's members, an exchange across nodes between the members of the same
 * local index (one per node, all local indices in parallel), a reduction of what arrived in
 * dtr's own kernel, and for an all-reduce the way back. Every byte crosses nodes once (twice
 * for an all-reduce, as its result comes back), where MPI's flat call moves the members'
 * full contributions over the slow link.
 *
 * Order of combination, fixed whatever the timing: first inside each node in local order
 * (dtr__reduce_n over the node's members, halves widened and rounded once), then the k node
 * results in the order of the nodes' positions in the cross group (dtr__reduce_n again, the
 * half rounded a second time). An all-reduce's piece is reduced by one member and copied to
 * the others: every member holds the same bits.
 *
 * Taken for reduce-scatter (equal pieces) and all-reduce (count a multiple of the members),
 * SUM, MAX, MIN and PRODUCT, of at least DTR_MPI_HIER_MIN bytes per member (the tunable in
 * dtr_mpi.h); DTR_MPI_HIER=0 turns it off. Everything else keeps MPI's call.
 */
#ifndef DTR_BACKENDS_MPI_HIER_H
#define DTR_BACKENDS_MPI_HIER_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "dtensor/dtensor.h"

typedef struct dtr__hier dtr__hier_t;

/* A hierarchical reduction in flight: lives in the backend's request bytes. */
typedef struct {
    int stage; /* 0: not started; then the stages of hier.c; -1: complete */
    bool all_reduce;
    const void *send;
    void *recv;
    int64_t count; /* per member (reduce-scatter) or in all (all-reduce) */
    dtr_dtype_t dtype;
    dtr_reduce_op_t op;
    MPI_Request req;
} dtr__hier_op_t;

/*
 * Collective over comm (the group's communicator: n members, this one `me`): where the
 * members span 2 or more nodes with the same number L (2..16) on each, makes a
 * shared-memory segment per node (chunk and ring as dtr__shm_create) and a communicator of
 * each local index across the nodes. *out is NULL, with DTR_OK, where that does not hold or
 * any node could not map its segment (every member then gets NULL). min_bytes: the least
 * bytes per member a reduction needs to take this path. Errors are MPI's or memory.
 */
dtr_status_t dtr__hier_create(MPI_Comm comm, int n, int me, int64_t chunk, int64_t ring,
                              int64_t min_bytes, dtr__hier_t **out);

/* Frees the segment, the communicator and the scratch (local). NULL is a no-op. */
void dtr__hier_destroy(dtr__hier_t *h);

/* Whether a reduce-scatter of count elements per member (all_reduce false) or an all-reduce
 * of count elements takes the hierarchical form. */
bool dtr__hier_takes(const dtr__hier_t *h, bool all_reduce, int64_t count, dtr_dtype_t dtype,
                     dtr_reduce_op_t op);

/* Runs the operation: to completion (blocking), or as far as it goes without waiting, *done
 * saying whether it completed. The first call starts it; later ones continue it. */
dtr_status_t dtr__hier_progress(dtr__hier_t *h, dtr__hier_op_t *o, bool blocking, bool *done);

/* The nodes the group spans (for dtr_mpi_groups); 0 for NULL. */
int dtr__hier_nodes(const dtr__hier_t *h);

#endif
