/* The MPI backend's state, groups and requests (mpi.c). */
#ifndef DTR_BACKENDS_MPI_MPI_STATE_H
#define DTR_BACKENDS_MPI_MPI_STATE_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/backend.h"
#include "backends/mpi/hier.h"
#include "backends/shm/shm.h"

/* Units for byte counts past INT_MAX: a contiguous type of 2^k bytes dividing every count. */
#define DTR__MPI_UNITS 13
/* The least bytes per member a reduction over nodes needs to take the hierarchical form
 * (DTR_MPI_HIER_MIN; docs/nodes.md has the measurements behind it). */
#define DTR__HIER_MIN (1 << 20)
/* Reductions exact in any order up to this many bytes per member keep MPI's calls. */
#define DTR__SHM_REDUCE_EXACT_MAX 1024

typedef struct {
    MPI_Comm world;
    int rank;
    MPI_Datatype half[2];       /* f16, bf16: 2 opaque bytes each */
    MPI_Op u8_op[2];            /* u8 max, min through dtr's loop, where the MPI compares u8
                                   as signed (MPICH 4.0.2: pmodels/mpich#6083); else NULL */
    MPI_Op half_op[2][4];       /* [f16|bf16][sum, max, min, product] */
    MPI_Datatype unit[DTR__MPI_UNITS];
    bool strided; /* derived datatypes for strided pieces (DTR_MPI_STRIDED=0: staging) */
    bool shm; /* the strided all-to-all through shared memory where it can (DTR_MPI_SHM=0) */
    bool shm_gather; /* the strided all-gather too (DTR_MPI_SHM_GATHER=0: datatypes) */
    bool shm_reduce; /* reductions through it too (DTR_MPI_SHM_REDUCE=0: MPI's calls) */
    bool spans; /* span lists through it (DTR_MPI_SPANS=0: the executor packs) */
    int64_t shm_chunk; /* its chunk bytes (DTR_MPI_SHM_CHUNK) */
    int64_t shm_ring;  /* its reduction ring's bytes per member (DTR_MPI_SHM_RING) */
    bool hier;         /* reductions of groups over nodes in the hierarchical form
                          (DTR_MPI_HIER=0: MPI's flat calls) */
    int64_t hier_min;  /* from this many bytes per member (DTR_MPI_HIER_MIN) */
    /* shared allocations (shared.c): this node's ranks (made by the first allocation), each
     * world rank's index among them (-1: another node), the allocations made so far (the
     * same count on every rank) and the live ones */
    MPI_Comm node;
    int *node_index;
    int64_t shared_made;
    struct dtr__mpi_shared *shared;
} dtr__mpi_t;

/* shared.c: the backend's mem_alloc and mem_free; where buf (bytes long) sits in a shared
 * allocation, as the group's members see it (side 0 send, 1 receive; serial -1 if not);
 * frees the state's allocations and node communicator (at destroy). */
dtr_status_t dtr__mpi_mem_alloc(void *state, int64_t bytes, void **p);
bool dtr__mpi_mem_free(void *state, void *p);
void dtr__mpi_shared_find(const dtr__mpi_t *m, const int *ranks, int n, const void *buf,
                          int64_t bytes, int side, dtr__shm_shared_t *out);
void dtr__mpi_shared_destroy(dtr__mpi_t *m, bool finalized);

/* The DTR_MPI_* switches into m, or INVALID_ARGUMENT naming a malformed one (settings.c). */
dtr_status_t dtr__mpi_settings_read(dtr__mpi_t *m);

/* The members' DTR_MPI_* switches all alike, or INVALID_ARGUMENT naming the first that
 * differs (collective over the group's comm of n members; settings.c). */
dtr_status_t dtr__mpi_settings_agree(MPI_Comm comm, int n, const dtr__mpi_t *m);

/* dtr__shm_create over comm, after MPI's own test that every member shares a node (nodes.c). */
dtr_status_t dtr__mpi_shm_create(MPI_Comm comm, int n, int me, int64_t chunk, int64_t ring,
                                 dtr__shm_t **out);

typedef struct dtr__mpi_group {
    dtr__mpi_t *mpi;
    MPI_Comm comm;
    int n, me;
    int *ints; /* 4n: counts and displacements as MPI wants them, alive while an op runs */
    MPI_Datatype *types; /* 2n: MPI_Alltoallw's send and receive types, likewise */
    dtr__shm_t *shm; /* the strided forms' segment, where all members share a node */
    dtr__hier_t *hier; /* where they span nodes, several on each: the hierarchical form */
    int *ranks;      /* n: the members' ranks in the backend's world (dtr_mpi_groups) */
    int64_t shm_ops, mpi_ops, hier_ops; /* operations run through each path (atomic) */
    struct dtr__mpi_group *prev, *next; /* the process's live groups (groups.c) */
} dtr__mpi_group_t;

/* The process's list of live groups, for dtr_mpi_groups (groups.c). */
void dtr__mpi_groups_add(dtr__mpi_group_t *g);
void dtr__mpi_groups_remove(dtr__mpi_group_t *g);

typedef enum {
    DTR__OP_ALLGATHER = 1,
    DTR__OP_ALLGATHERV,
    DTR__OP_REDUCE_SCATTER_BLOCK,
    DTR__OP_REDUCE_SCATTER,
    DTR__OP_ALLREDUCE,
    DTR__OP_ALLTOALL,
    DTR__OP_ALLTOALLV,
    DTR__OP_ALLGATHER_STRIDED,
    DTR__OP_ALLTOALL_STRIDED,
    DTR__OP_SHM, /* the group's shm path: its state holds the operation */
    DTR__OP_AGREE, /* the argument agreement on the group's segment: number `agreement` */
    DTR__OP_HIER,  /* a reduction over nodes in the hierarchical form: `hier` */
} dtr__mpi_kind_t;

/* One operation, recorded when issued and run at the first test (non-blocking) or wait
 * (blocking). */
typedef struct {
    dtr__mpi_kind_t kind;
    bool started;
    MPI_Request req;
    const void *send;
    void *recv;
    int scount, rcount;
    MPI_Datatype type;
    MPI_Datatype stype, rtype; /* strided forms: freed once the operation is issued */
    MPI_Op op;
    int *scounts, *sdispls, *rcounts, *rdispls;
    uint64_t agreement;
    dtr__hier_op_t hier;
} dtr__mpi_req_t;

_Static_assert(sizeof(dtr__mpi_req_t) <= sizeof(dtr_backend_req_t),
               "dtr_backend_req_t too small for the MPI backend's request");

#endif
