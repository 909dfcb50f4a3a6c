/* Where the communicator's ranks run: which mesh dims cross nodes (dtr_mpi_mesh_across_nodes,
 * dtr_mpi.h), and the shared-memory segment of a group on one node (dtr__mpi_shm_create). */
#include <stdlib.h>

#include "core/common.h"
#include "backends/mpi/dtr_mpi.h"
#include "backends/mpi/error.h"
#include "backends/mpi/mpi_state.h"

dtr_status_t dtr_mpi_mesh_across_nodes(MPI_Comm comm, const dtr_mesh_t *mesh, uint32_t *across) {
    DTR_CHECK_PTR(mesh, __func__);
    DTR_CHECK_PTR(across, __func__);
    if (comm == MPI_COMM_NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "comm: MPI_COMM_NULL");
    int size = 0, me = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &me);
    /* a node is named by its first rank in comm */
    MPI_Comm node;
    int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Comm_split_type");
    int leader = me;
    rc = MPI_Bcast(&leader, 1, MPI_INT, 0, node);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Bcast (node leader)");
    int *node_of = malloc((size_t)size * sizeof *node_of);
    if (node_of == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "%d ranks", size);
    rc = MPI_Allgather(&leader, 1, MPI_INT, node_of, 1, MPI_INT, comm);
    if (rc != MPI_SUCCESS) {
        free(node_of);
        return dtr__mpi_error(rc, "MPI_Allgather (node leaders)");
    }
    /* every position against the position with coordinate 0 on each mesh dim */
    int m = dtr_mesh_ndims(mesh);
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, base[DTR_MAX_MESH_DIMS];
    int64_t total = dtr_mesh_nranks(mesh);
    uint32_t mask = 0;
    dtr_status_t st = DTR_OK;
    for (int64_t p = 0; p < total && st == DTR_OK; p++) {
        int64_t rest = p;
        for (int i = m - 1; i >= 0; i--) {
            coord[i] = rest % dtr_mesh_size(mesh, i);
            rest /= dtr_mesh_size(mesh, i);
        }
        int r = -1, r0 = -1;
        st = dtr_mesh_rank_at(mesh, coord, &r);
        for (int i = 0; i < m && st == DTR_OK; i++) {
            if (mask & (1u << i) || coord[i] == 0) continue;
            for (int j = 0; j < m; j++) base[j] = j == i ? 0 : coord[j];
            st = dtr_mesh_rank_at(mesh, base, &r0);
            if (st != DTR_OK) break;
            if (r < 0 || r >= size || r0 < 0 || r0 >= size) {
                st = dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                                "mesh: rank %d is not a rank of comm (size %d)", r < 0 || r >= size ? r : r0,
                                size);
                break;
            }
            if (node_of[r] != node_of[r0]) mask |= 1u << i;
        }
    }
    free(node_of);
    if (st == DTR_OK) *across = mask;
    return st;
}

/* dtr__shm_create's exchange over a communicator (the arg). */
static dtr_status_t dtr__mpi_shm_exchange(void *arg, const void *mine, int64_t bytes, void *all) {
    MPI_Comm comm = *(MPI_Comm *)arg;
    int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, comm);
    return rc == MPI_SUCCESS ? DTR_OK : dtr__mpi_error(rc, "MPI_Allgather (shared-memory segment)");
}

dtr_status_t dtr__mpi_shm_create(MPI_Comm comm, int n, int me, int64_t chunk, int64_t ring,
                                 dtr__shm_t **out) {
    *out = NULL;
    if (n < 2 || n > DTR__SHM_MAX_MEMBERS) return DTR_OK;
    MPI_Comm node;
    int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Comm_split_type");
    int on_node = 0;
    MPI_Comm_size(node, &on_node);
    MPI_Comm_free(&node);
    if (on_node != n) return DTR_OK; /* every member sees the same: n only when all share it */
    return dtr__shm_create(dtr__mpi_shm_exchange, &comm, n, me, chunk, ring, out);
}
