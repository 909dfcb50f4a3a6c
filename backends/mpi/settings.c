/* The MPI backend's switches from the environment (DTR_MPI_*), read when its state is made
 * and compared between a group's members when the group is made: each picks an operation's path (MPI's call, the segment,
 * the hierarchical form) on its own, so members launched with other values would wait in
 * different calls, or read the segment's rings with another geometry. */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "backends/mpi/error.h"
#include "backends/mpi/mpi_state.h"

/* An on/off variable: on where unset, empty or "1", off for "0", anything else refused by
 * name (a switch misspelt as "off" must not leave the path on unseen). */
static dtr_status_t dtr__env_on(const char *name, bool *on) {
    const char *v = getenv(name);
    *on = v == NULL || strcmp(v, "0") != 0;
    if (v == NULL || *v == '\0' || strcmp(v, "0") == 0 || strcmp(v, "1") == 0) return DTR_OK;
    return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_backend_mpi_state_create",
                      "%s: \"%.40s\" is not 0 or 1", name, v);
}

dtr_status_t dtr__mpi_settings_read(dtr__mpi_t *m) {
    bool gather, reduce, spans, hier;
    DTR_CHECK(dtr__env_on("DTR_MPI_STRIDED", &m->strided));
    DTR_CHECK(dtr__env_on("DTR_MPI_SHM", &m->shm));
    DTR_CHECK(dtr__env_on("DTR_MPI_SHM_GATHER", &gather));
    DTR_CHECK(dtr__env_on("DTR_MPI_SHM_REDUCE", &reduce));
    DTR_CHECK(dtr__env_on("DTR_MPI_SPANS", &spans));
    DTR_CHECK(dtr__env_on("DTR_MPI_HIER", &hier));
    m->shm_gather = m->shm && gather;
    m->shm_reduce = m->shm && reduce;
    m->spans = m->shm && spans;
    m->hier = m->shm_reduce && hier;
    const char *f = "dtr_backend_mpi_state_create";
    /* small chunks make tests wrap the rings */
    DTR_CHECK(dtr__env_bytes("DTR_MPI_SHM_CHUNK", f, DTR__SHM_CHUNK, 1, 1 << 24,
                             "a byte count from 1 to 16 MiB", &m->shm_chunk));
    DTR_CHECK(dtr__env_bytes("DTR_MPI_SHM_RING", f, DTR__SHM_RING, 4096, (int64_t)1 << 30,
                             "a byte count from 4 KiB to 1 GiB", &m->shm_ring));
    return dtr__env_bytes("DTR_MPI_HIER_MIN", f, DTR__HIER_MIN, 0, (int64_t)1 << 40,
                          "a byte count from 0 to 1 TiB", &m->hier_min);
}

dtr_status_t dtr__mpi_settings_agree(MPI_Comm comm, int n, const dtr__mpi_t *m) {
    enum { K = 9 };
    static const char *const names[K] = {
        "DTR_MPI_STRIDED", "DTR_MPI_SHM",      "DTR_MPI_SHM_GATHER", "DTR_MPI_SHM_REDUCE",
        "DTR_MPI_SPANS",   "DTR_MPI_HIER",     "DTR_MPI_SHM_CHUNK",  "DTR_MPI_SHM_RING",
        "DTR_MPI_HIER_MIN"};
    int64_t mine[K] = {m->strided, m->shm,       m->shm_gather, m->shm_reduce, m->spans,
                       m->hier,    m->shm_chunk, m->shm_ring,   m->hier_min};
    int64_t *all = malloc(sizeof mine * (size_t)n);
    if (all == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "mpi", "%d members' settings", n);
    int rc = MPI_Allgather(mine, K, MPI_INT64_T, all, K, MPI_INT64_T, comm);
    dtr_status_t st = rc == MPI_SUCCESS ? DTR_OK : dtr__mpi_error(rc, "MPI_Allgather (settings)");
    for (int k = 1; k < n && st == DTR_OK; k++)
        for (int v = 0; v < K && st == DTR_OK; v++)
            if (all[k * K + v] != all[v])
                st = dtr__error(DTR_ERR_INVALID_ARGUMENT, "mpi",
                                "%s differs between the group's members: %lld on member 0, "
                                "%lld on member %d (set it alike on every rank)",
                                names[v], (long long)all[v], (long long)all[k * K + v], k);
    free(all);
    return st;
}
