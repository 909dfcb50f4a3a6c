/* The process's live groups of the MPI backend and which path their operations took:
 * dtr_mpi_groups (dtr_mpi.h); and the check of dtr_mpi.h's struct against the library. Groups come and go with their contexts, on any thread, so the
 * list is under a lock; the operation counts are atomic, bumped where each operation runs. */
#include <pthread.h>
#include <stddef.h>

#include "core/common.h"
#include "backends/mpi/dtr_mpi.h"
#include "backends/mpi/mpi_state.h"

static pthread_mutex_t dtr__groups_lock = PTHREAD_MUTEX_INITIALIZER;
static dtr__mpi_group_t *dtr__groups; /* newest first */

void dtr__mpi_groups_add(dtr__mpi_group_t *g) {
    pthread_mutex_lock(&dtr__groups_lock);
    g->prev = NULL;
    g->next = dtr__groups;
    if (dtr__groups != NULL) dtr__groups->prev = g;
    dtr__groups = g;
    pthread_mutex_unlock(&dtr__groups_lock);
}

void dtr__mpi_groups_remove(dtr__mpi_group_t *g) {
    pthread_mutex_lock(&dtr__groups_lock);
    if (g->prev != NULL)
        g->prev->next = g->next;
    else if (dtr__groups == g)
        dtr__groups = g->next;
    if (g->next != NULL) g->next->prev = g->prev;
    g->prev = g->next = NULL;
    pthread_mutex_unlock(&dtr__groups_lock);
}

dtr_status_t dtr_mpi_groups(dtr_mpi_group_info_t *out, int cap, int *count) {
    DTR_CHECK_PTR(count, __func__);
    if (cap < 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "cap: %d, negative", cap);
    if (cap > 0 && out == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "out: NULL with cap %d", cap);
    pthread_mutex_lock(&dtr__groups_lock);
    int n = 0;
    /* oldest first: the order the groups were made in */
    const dtr__mpi_group_t *last = dtr__groups;
    while (last != NULL && last->next != NULL) last = last->next;
    for (const dtr__mpi_group_t *g = last; g != NULL; g = g->prev, n++) {
        if (n >= cap) continue;
        out[n] = (dtr_mpi_group_info_t){
            .ranks = g->ranks,
            .members = g->n,
            .shared_memory = g->shm != NULL,
            .shm_ops = __atomic_load_n(&g->shm_ops, __ATOMIC_RELAXED),
            .mpi_ops = __atomic_load_n(&g->mpi_ops, __ATOMIC_RELAXED),
            .nodes = dtr__hier_nodes(g->hier),
            .hier_ops = __atomic_load_n(&g->hier_ops, __ATOMIC_RELAXED),
            .direct_ops = dtr__shm_direct_ops(g->shm),
        };
    }
    pthread_mutex_unlock(&dtr__groups_lock);
    *count = n;
    return DTR_OK;
}

/* The library's own sizes of the MPI backend's public structs (DTR_MPI_ABI_STRUCTS). */
#define DTR__MPI_ABI_ENTRY(type) {#type, sizeof(type)},
static const dtr__abi_struct_t dtr__mpi_abi_structs[] = {DTR_MPI_ABI_STRUCTS(DTR__MPI_ABI_ENTRY)};

dtr_status_t dtr_mpi_abi_check(int header_code, const size_t *sizes, int count) {
    return dtr__abi_compare(__func__, header_code, sizes, count, dtr__mpi_abi_structs,
                            (int)(sizeof dtr__mpi_abi_structs / sizeof dtr__mpi_abi_structs[0]));
}
