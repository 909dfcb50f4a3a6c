/*
 * Shared allocations: the MPI backend's mem_alloc (dtr_context_alloc). One allocation is one
 * POSIX shared-memory segment per node, holding a part for each of the node's ranks; every
 * rank maps the whole segment, so a group whose members share the node can read a member's
 * buffer in its part where it is (shm_direct.c). Allocations are collective over the
 * context's communicator and numbered in the order they are made, the same on every rank.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "backends/mpi/error.h"
#include "backends/mpi/mpi_state.h"
#include "backends/shm/shm_state.h"

typedef struct dtr__mpi_shared {
    int64_t serial;
    char *base;     /* the whole segment: part k at base + k * stride */
    size_t size;
    int64_t stride; /* each part's bytes (the largest request on the node, page-rounded) */
    int me;         /* this rank's part */
    struct dtr__mpi_shared *next;
} dtr__mpi_shared_t;

/* The node's communicator and each world rank's index on it, made once (collective). */
static dtr_status_t dtr__mpi_node(dtr__mpi_t *m) {
    if (m->node_index != NULL) return DTR_OK;
    int world = 0, rc = MPI_Comm_size(m->world, &world);
    if (rc == MPI_SUCCESS && m->node == MPI_COMM_NULL)
        rc = MPI_Comm_split_type(m->world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &m->node);
    if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Comm_split_type (shared allocation)");
    int n = 0;
    MPI_Comm_size(m->node, &n);
    int *index = malloc(sizeof *index * (size_t)world), *ranks = malloc(sizeof *ranks * (size_t)n);
    if (index == NULL || ranks == NULL) {
        free(index);
        free(ranks);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "mpi", "node map of %d ranks", world);
    }
    rc = MPI_Allgather(&m->rank, 1, MPI_INT, ranks, 1, MPI_INT, m->node);
    if (rc != MPI_SUCCESS) {
        free(index);
        free(ranks);
        return dtr__mpi_error(rc, "MPI_Allgather (shared allocation)");
    }
    for (int r = 0; r < world; r++) index[r] = -1;
    for (int k = 0; k < n; k++) index[ranks[k]] = k;
    free(ranks);
    m->node_index = index;
    return DTR_OK;
}

dtr_status_t dtr__mpi_mem_alloc(void *state, int64_t bytes, void **p) {
    dtr__mpi_t *m = state;
    DTR_CHECK(dtr__mpi_node(m));
    int n = 0, me = 0;
    MPI_Comm_size(m->node, &n);
    MPI_Comm_rank(m->node, &me);
    int64_t serial = m->shared_made++; /* every rank counts every call, failed or not */
    int64_t most = 0;
    int rc = MPI_Allreduce(&bytes, &most, 1, MPI_INT64_T, MPI_MAX, m->node);
    if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Allreduce (shared allocation size)");
    int64_t stride = (most + 4095) & ~(int64_t)4095;
    size_t size = (size_t)stride * (size_t)n;
    char name[64] = "";
    char *base = NULL;
    if (me == 0) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        snprintf(name, sizeof name, "/dtr-mem-%ld-%lld-%ld", (long)getpid(), (long long)serial,
                 (long)t.tv_nsec);
        base = dtr__shm_map(name, size, true);
        if (base == NULL) name[0] = '\0';
    }
    rc = MPI_Bcast(name, (int)sizeof name, MPI_CHAR, 0, m->node);
    if (rc == MPI_SUCCESS && me != 0 && name[0] != '\0') base = dtr__shm_map(name, size, false);
    int mapped = base != NULL, all = 0;
    /* over the whole world: every rank fails or succeeds together */
    if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&mapped, &all, 1, MPI_INT, MPI_MIN, m->world);
    if (me == 0 && name[0] != '\0') shm_unlink(name); /* it goes with the last mapping */
    dtr__mpi_shared_t *a = NULL;
    if (rc == MPI_SUCCESS && all) a = malloc(sizeof *a);
    if (a == NULL) {
        if (base != NULL) munmap(base, size);
        if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Allreduce (shared allocation)");
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_context_alloc",
                          "bytes: %lld per rank of shared memory (%lld on this node's /dev/shm "
                          "in all) could not be %s on some rank",
                          (long long)bytes, (long long)size, all ? "recorded" : "mapped");
    }
    *a = (dtr__mpi_shared_t){.serial = serial, .base = base, .size = size, .stride = stride,
                             .me = me, .next = m->shared};
    m->shared = a;
    *p = base + (int64_t)me * stride;
    return DTR_OK;
}

bool dtr__mpi_mem_free(void *state, void *p) {
    dtr__mpi_t *m = state;
    for (dtr__mpi_shared_t **at = &m->shared; *at != NULL; at = &(*at)->next) {
        dtr__mpi_shared_t *a = *at;
        if ((char *)p != a->base + (int64_t)a->me * a->stride) continue;
        *at = a->next;
        munmap(a->base, a->size); /* the others' mappings keep the segment */
        free(a);
        return true;
    }
    return false;
}

void dtr__mpi_shared_find(const dtr__mpi_t *m, const int *ranks, int n, const void *buf,
                          int64_t bytes, int side, dtr__shm_shared_t *out) {
    out->serial[side] = -1;
    if (buf == NULL || n > DTR__SHM_MAX_MEMBERS) return;
    const char *b = buf;
    for (const dtr__mpi_shared_t *a = m->shared; a != NULL; a = a->next) {
        const char *part = a->base + (int64_t)a->me * a->stride;
        if (b < part || b + bytes > part + a->stride) continue;
        for (int k = 0; k < n; k++) {
            int at = m->node_index[ranks[k]];
            if (at < 0) return; /* a member on another node */
            out->part[side][k] = a->base + (int64_t)at * a->stride;
        }
        out->serial[side] = a->serial;
        out->off[side] = b - part;
        out->part_bytes[side] = a->stride;
        return;
    }
}

void dtr__mpi_shared_destroy(dtr__mpi_t *m, bool finalized) {
    while (m->shared != NULL) {
        dtr__mpi_shared_t *a = m->shared;
        m->shared = a->next;
        munmap(a->base, a->size);
        free(a);
    }
    free(m->node_index);
    m->node_index = NULL;
    if (!finalized && m->node != MPI_COMM_NULL) MPI_Comm_free(&m->node);
}
