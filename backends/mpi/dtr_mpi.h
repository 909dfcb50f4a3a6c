/*
 * The MPI backend: dtr's embedded default engine (Open MPI on CPUs).
 *
 * Mesh ranks are ranks of the communicator given here. Each mesh gets one communicator per
 * mesh dim and one over the whole mesh, built the first time a context runs a plan on it
 * (MPI_Comm_create_group, collective over each group's ranks only, so ranks outside the mesh
 * take no part) and kept with the context. Errors come back as DTR_ERR_BACKEND with the MPI
 * error text: the backend's communicators use MPI_ERRORS_RETURN, and nothing aborts.
 *
 * Open MPI has no half types and no AVG: f16 and bf16 reduce through user MPI_Ops that
 * combine in f32 and round once per combination (as NCCL does), and P(avg) is reduced as
 * SUM, then divided by the executor.
 *
 * Operations are issued lazily: a blocking dtr_redistribute runs the plain blocking MPI
 * collectives (Open MPI's tuned algorithms), and the non-blocking form starts the MPI_I*
 * collectives at its first dtr_request_test. Open MPI progresses non-blocking collectives
 * only inside MPI calls, so call dtr_request_test now and then while computing.
 *
 * Where every member of a group (2 to 16) runs on one node, the group's strided all-to-all
 * and all-gather (a non-leading dim's pieces), reduce-scatters and all-reduces bypass MPI:
 * they move through a POSIX shared-memory segment of about 6 MiB per member, mapped when the
 * group is created and unlinked at once (docs/executor.md). The reductions combine in member
 * order (halves in f32, rounded once), so a result does not depend on timing and every
 * member of an all-reduce holds the same bits. DTR_MPI_SHM=0 turns that off,
 * DTR_MPI_SHM_GATHER=0 for the gather only, DTR_MPI_SHM_REDUCE=0 for the reductions only;
 * DTR_MPI_SHM_CHUNK sets its chunk bytes (default 32 KiB), DTR_MPI_SHM_RING the reduction
 * ring's bytes per member (default 4 MiB).
 *
 * dtr_context_alloc on an MPI context is collective over its communicator and returns this
 * rank's part of a POSIX shared-memory segment that every rank of the node maps (one
 * segment per allocation and node). Where every member's send buffer of a reduce-scatter or
 * all-reduce (and, for an all-reduce, every receive buffer) lies in one such allocation, the
 * reduction skips the rings: each member reduces its piece straight from the members'
 * buffers, in the same member order, and the members of an all-reduce copy each other's
 * results from their receive buffers. The members decide this together from what each posts
 * at the start (any member's buffer elsewhere: the rings for all). Likewise a strided
 * all-to-all (S(a) -> S(b), even pieces) whose members' send buffers all lie in one
 * allocation: each member copies its pieces straight out of the others' buffers.
 * dtr_mpi_group_info_t's direct_ops counts these reductions and all-to-alls.
 *
 * Where a group's members span nodes with the same number (2 to 16) on each, its
 * reduce-scatters (equal pieces) and all-reduces (a multiple of the members) of at least
 * DTR_MPI_HIER_MIN bytes per member (default 1 MiB) take a hierarchical form: reduced inside
 * each node through a segment of that node's members, exchanged across nodes between the
 * members of the same local index, reduced there in dtr's kernel, and for an all-reduce
 * gathered back (docs/nodes.md). The order is fixed: inside each node in member order, then
 * over the nodes. DTR_MPI_HIER=0 keeps MPI's flat calls for them.
 */
#ifndef DTR_BACKENDS_MPI_DTR_MPI_H
#define DTR_BACKENDS_MPI_DTR_MPI_H

#include <mpi.h>

#include "dtr_version.h"
#include "runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A context over comm (which the context duplicates: collective over comm; MPI must be
 * initialised). Destroy it before MPI_Finalize. *out written only on success. */
DTR_API dtr_status_t dtr_context_create_mpi(MPI_Comm comm, dtr_context_t **out);

/* The backend's table and a fresh state over comm (duplicated, collective over comm), for
 * callers that wrap the backend (tests that inject faults, tracing). The state is handed to
 * dtr_context_create, which owns it from then on. */
DTR_API const dtr_backend_ops_t *dtr_backend_mpi_ops(void);
DTR_API dtr_status_t dtr_backend_mpi_state_create(MPI_Comm comm, void **state);

/* One live group of the MPI backend, as dtr_mpi_groups lists it. */
typedef struct {
    const int *ranks;   /* its members' ranks in the communicator the context was made over,
                           in group order; valid while the group lives (until its context is
                           destroyed) */
    int members;        /* how many */
    bool shared_memory; /* all members on one node (MPI_COMM_TYPE_SHARED) and its segment
                           mapped: its strided forms and reductions can bypass MPI */
    int64_t shm_ops;    /* operations run through the segment so far */
    int64_t mpi_ops;    /* operations run through MPI's collectives so far */
    int nodes;          /* nodes the members span where the group has the hierarchical form
                           (several members on each node), else 0 */
    int64_t hier_ops;   /* reductions run in that form so far: a segment inside each node,
                           MPI across */
    int64_t direct_ops; /* of the shm_ops, the reductions and all-to-alls that read the
                           members' buffers where they are: every member's in one
                           dtr_context_alloc allocation */
} dtr_mpi_group_info_t;

/* The MPI backend's live groups in this process, oldest first, with the path each took: where
 * ranks run on several nodes, the groups inside a node go through shared memory and the ones
 * across nodes through MPI; this says which did what (`dtr run` prints the sums). Writes up
 * to cap entries to out and the number of live groups to *count (out may be NULL with cap 0,
 * to count them). The counts are read without stopping operations that are running. */
DTR_API dtr_status_t dtr_mpi_groups(dtr_mpi_group_info_t *out, int cap, int *count);

/* X(type) for the MPI backend's public structs, as DTR_ABI_STRUCTS for dtr.h's (append
 * only), and the check of the headers this translation unit includes against the loaded
 * library: dtr_abi_check's rules for this list (dtr_mpi_check_headers calls it). A program
 * that includes dtr_mpi.h calls both dtr_check_headers and dtr_mpi_check_headers once at
 * start-up. */
#define DTR_MPI_ABI_STRUCTS(X) X(dtr_mpi_group_info_t)
DTR_API dtr_status_t dtr_mpi_abi_check(int header_code, const size_t *sizes, int count);

#define DTR_MPI__ABI_SIZEOF(type) sizeof(type),
static inline dtr_status_t dtr_mpi_check_headers(void) {
    const size_t sizes[] = {DTR_MPI_ABI_STRUCTS(DTR_MPI__ABI_SIZEOF)};
    return dtr_mpi_abi_check(DTR_VERSION_CODE, sizes, (int)(sizeof sizes / sizeof sizes[0]));
}

/* Which mesh dims cross nodes: bit i of *across is set where some group along mesh dim i
 * has members on two nodes (MPI_COMM_TYPE_SHARED over comm, whose ranks the mesh names).
 * For dtr_cost_model_nodes: a node-aware plan moves its bytes inside nodes where it can.
 * Collective over comm; *across is written only on success. */
DTR_API dtr_status_t dtr_mpi_mesh_across_nodes(MPI_Comm comm, const dtr_mesh_t *mesh,
                                               uint32_t *across);

#ifdef __cplusplus
}
#endif

#endif
