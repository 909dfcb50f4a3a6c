/* The MPI backend behind dtr_backend_ops_t (see dtr_mpi.h). */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "dtensor/dtensor.h"
#include "backends/mpi/dtr_mpi.h"
#include "backends/mpi/error.h"
#include "backends/mpi/mpi_state.h"
#include "backends/mpi/user_ops.h"

#define DTR__MPI(call, name)                                                             \
    do {                                                                                 \
        int dtr__rc = (call);                                                            \
        if (dtr__rc != MPI_SUCCESS) return dtr__mpi_error(dtr__rc, name);               \
    } while (0)

/* ---- half-type reductions --------------------------------------------------------- */

/* The MPI type and op for a reduction; DTR_ERR_UNSUPPORTED for what MPI cannot reduce. */
static dtr_status_t dtr__mpi_reduction(dtr__mpi_t *m, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                       MPI_Datatype *type, MPI_Op *mop) {
    int slot;
    switch (op) {
    case DTR_REDUCE_SUM: slot = 0; *mop = MPI_SUM; break;
    case DTR_REDUCE_MAX: slot = 1; *mop = MPI_MAX; break;
    case DTR_REDUCE_MIN: slot = 2; *mop = MPI_MIN; break;
    case DTR_REDUCE_PRODUCT: slot = 3; *mop = MPI_PROD; break;
    default:
        return dtr__error(DTR_ERR_UNSUPPORTED, "mpi",
                          "reduce op %s: MPI has no AVG (the executor reduces it as SUM)",
                          dtr_reduce_op_name(op) != NULL ? dtr_reduce_op_name(op) : "?");
    }
    switch (dtype) {
    case DTR_F32: *type = MPI_FLOAT; break;
    case DTR_F64: *type = MPI_DOUBLE; break;
    case DTR_I32: *type = MPI_INT32_T; break;
    case DTR_I64: *type = MPI_INT64_T; break;
    case DTR_C64: *type = MPI_C_FLOAT_COMPLEX; break;
    case DTR_C128: *type = MPI_C_DOUBLE_COMPLEX; break;
    case DTR_U8:
        *type = MPI_UINT8_T;
        if ((slot == 1 || slot == 2) && m->u8_op[slot - 1] != MPI_OP_NULL) *mop = m->u8_op[slot - 1];
        break;
    case DTR_F16:
    case DTR_BF16: {
        int h = dtype == DTR_BF16;
        *type = m->half[h];
        *mop = m->half_op[h][slot];
        break;
    }
    default:
        return dtr__error(DTR_ERR_UNSUPPORTED, "mpi", "dtype %s is storage only: never reduced",
                          dtr_dtype_name(dtype) != NULL ? dtr_dtype_name(dtype) : "?");
    }
    return DTR_OK;
}

/* ---- state and groups ------------------------------------------------------------- */

/* Asks this MPI whether it orders u8 as unsigned under MAX and MIN (MPI_Reduce_local runs
 * the same op code as the collectives); where it does not, u8 max and min go through dtr's
 * own loop as user ops. Every rank runs the same library, so all pick the same op. */
static dtr_status_t dtr__mpi_u8_ops(dtr__mpi_t *m) {
    MPI_User_function *const fns[2] = {dtr__mpi_user_fn(DTR_U8, 1), dtr__mpi_user_fn(DTR_U8, 2)};
    const MPI_Op ops[2] = {MPI_MAX, MPI_MIN};
    for (int k = 0; k < 2; k++) {
        uint8_t in = k == 0 ? 238 : 9, inout = k == 0 ? 9 : 238;
        int rc = MPI_Reduce_local(&in, &inout, 1, MPI_UINT8_T, ops[k]);
        if (rc == MPI_SUCCESS && inout == in) continue;
        rc = MPI_Op_create(fns[k], 1, &m->u8_op[k]);
        if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Op_create (u8 max, min)");
        DTR_INFO("mpi: this MPI orders MPI_UINT8_T as signed under %s; u8 %s runs as a user op",
                 k == 0 ? "MPI_MAX" : "MPI_MIN", k == 0 ? "max" : "min");
    }
    return DTR_OK;
}

static void dtr__mpi_destroy(void *state) {
    dtr__mpi_t *m = state;
    if (m == NULL) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        for (int h = 0; h < 2; h++) {
            if (m->half[h] != MPI_DATATYPE_NULL) MPI_Type_free(&m->half[h]);
            for (int k = 0; k < 4; k++)
                if (m->half_op[h][k] != MPI_OP_NULL) MPI_Op_free(&m->half_op[h][k]);
        }
        for (int u = 0; u < DTR__MPI_UNITS; u++)
            if (m->unit[u] != MPI_DATATYPE_NULL) MPI_Type_free(&m->unit[u]);
        for (int k = 0; k < 2; k++)
            if (m->u8_op[k] != MPI_OP_NULL) MPI_Op_free(&m->u8_op[k]);
    }
    dtr__mpi_shared_destroy(m, finalized);
    if (!finalized && m->world != MPI_COMM_NULL) MPI_Comm_free(&m->world);
    free(m);
}

dtr_status_t dtr_backend_mpi_state_create(MPI_Comm comm, void **state) {
    DTR_CHECK_PTR(state, __func__);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "MPI is %s: call MPI_Init first", fin ? "finalized" : "not initialised");
    if (comm == MPI_COMM_NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "comm: MPI_COMM_NULL");
    dtr__mpi_t *m = calloc(1, sizeof *m);
    if (m == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "backend state");
    m->world = MPI_COMM_NULL;
    m->node = MPI_COMM_NULL;
    for (int h = 0; h < 2; h++) {
        m->half[h] = MPI_DATATYPE_NULL;
        for (int k = 0; k < 4; k++) m->half_op[h][k] = MPI_OP_NULL;
    }
    for (int u = 0; u < DTR__MPI_UNITS; u++) m->unit[u] = MPI_DATATYPE_NULL;
    m->u8_op[0] = m->u8_op[1] = MPI_OP_NULL;
    dtr_status_t st = DTR_OK;
    int rc = MPI_Comm_dup(comm, &m->world);
    if (rc != MPI_SUCCESS) {
        st = dtr__mpi_error(rc, "MPI_Comm_dup");
        goto fail;
    }
    MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->world, &m->rank);
    st = dtr__mpi_settings_read(m);
    for (int h = 0; h < 2 && st == DTR_OK; h++) {
        rc = MPI_Type_contiguous(2, MPI_BYTE, &m->half[h]);
        if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&m->half[h]);
        for (int k = 0; k < 4 && rc == MPI_SUCCESS; k++)
            rc = MPI_Op_create(dtr__mpi_user_fn(h == 0 ? DTR_F16 : DTR_BF16, k), 1, &m->half_op[h][k]);
        if (rc != MPI_SUCCESS) st = dtr__mpi_error(rc, "MPI_Op_create (half types)");
    }
    if (st == DTR_OK) st = dtr__mpi_u8_ops(m);
    for (int u = 1; u < DTR__MPI_UNITS && st == DTR_OK; u++) {
        rc = MPI_Type_contiguous(1 << u, MPI_BYTE, &m->unit[u]);
        if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&m->unit[u]);
        if (rc != MPI_SUCCESS) st = dtr__mpi_error(rc, "MPI_Type_contiguous");
    }
    if (st != DTR_OK) goto fail;
    m->unit[0] = MPI_DATATYPE_NULL; /* unit 1 byte is MPI_BYTE */
    *state = m;
    return DTR_OK;
fail:
    dtr__mpi_destroy(m);
    return st;
}

static int dtr__mpi_rank(void *state) { return ((dtr__mpi_t *)state)->rank; }

static void dtr__mpi_group_destroy(void *state, void *group) {
    (void)state;
    dtr__mpi_group_t *g = group;
    if (g == NULL) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && g->comm != MPI_COMM_NULL) MPI_Comm_free(&g->comm);
    dtr__mpi_groups_remove(g);
    dtr__shm_destroy(g->shm);
    dtr__hier_destroy(g->hier);
    free(g->ranks);
    free(g->ints);
    free(g->types);
    free(g);
}

static dtr_status_t dtr__mpi_group_create(void *state, const int *ranks, int n, int tag,
                                          void **out) {
    dtr__mpi_t *m = state;
    int size = 0;
    MPI_Comm_size(m->world, &size);
    for (int k = 0; k < n; k++) /* (every member finds it: none waits) */
        if (ranks[k] < 0 || ranks[k] >= size)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, "mpi",
                              "the mesh's rank %d is not in the context's communicator of %d "
                              "ranks", ranks[k], size);
    dtr__mpi_group_t *g = calloc(1, sizeof *g);
    int *ints = malloc((size_t)n * 4 * sizeof *ints);
    MPI_Datatype *types = malloc((size_t)n * 2 * sizeof *types);
    int *members = malloc((size_t)n * sizeof *members);
    int rc = MPI_ERR_NO_MEM;
    MPI_Group world_group = MPI_GROUP_NULL, sub = MPI_GROUP_NULL;
    if (g != NULL && ints != NULL && types != NULL && members != NULL) {
        memcpy(members, ranks, (size_t)n * sizeof *members);
        rc = MPI_Comm_group(m->world, &world_group);
        if (rc == MPI_SUCCESS) rc = MPI_Group_incl(world_group, n, ranks, &sub);
        if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(m->world, sub, tag, &g->comm);
        if (sub != MPI_GROUP_NULL) MPI_Group_free(&sub);
        if (world_group != MPI_GROUP_NULL) MPI_Group_free(&world_group);
    }
    if (rc != MPI_SUCCESS) {
        int oom = g == NULL || ints == NULL || types == NULL || members == NULL;
        free(g);
        free(ints);
        free(types);
        free(members);
        if (oom) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "mpi", "group of %d ranks", n);
        return dtr__error(DTR_ERR_BACKEND, "mpi",
                          "MPI_Comm_create_group of %d ranks (the mesh needs ranks 0..%d of a "
                          "communicator of %d): error %d",
                          n, n - 1, size, rc);
    }
    MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    g->mpi = m;
    g->n = n;
    MPI_Comm_rank(g->comm, &g->me);
    g->ints = ints;
    g->types = types;
    g->ranks = members;
    dtr__mpi_groups_add(g);
    /* Here, not at the first all-to-all: this call is the one every member surely makes
     * (a member that fails to issue an operation must not leave the others in a setup
     * collective with no deadline). */
    dtr_status_t st = n > 1 ? dtr__mpi_settings_agree(g->comm, n, m) : DTR_OK;
    if (st == DTR_OK && m->strided && m->shm) {
        st = dtr__mpi_shm_create(g->comm, n, g->me, m->shm_chunk, m->shm_ring, &g->shm);
        /* (every member sees the same segment or none, so all take this branch or none) */
        if (st == DTR_OK && g->shm == NULL && m->shm_reduce && m->hier)
            st = dtr__hier_create(g->comm, n, g->me, m->shm_chunk, m->shm_ring, m->hier_min,
                                  &g->hier);
    }
    if (st != DTR_OK) {
        dtr__mpi_group_destroy(state, g);
        return st;
    }
    *out = g;
    return DTR_OK;
}

/* ---- byte counts -------------------------------------------------------------------- */

/* The type whose size divides every count and displacement, so that all fit in int. */
static dtr_status_t dtr__mpi_unit(dtr__mpi_t *m, const int64_t *const *arrays, int narrays,
                                  int n, const int64_t *scalars, int nscalars,
                                  MPI_Datatype *type, int64_t *unit) {
    int64_t big = 0, all = 0;
    for (int a = 0; a < narrays; a++)
        for (int k = 0; k < n; k++) {
            all |= arrays[a][k];
            if (arrays[a][k] > big) big = arrays[a][k];
        }
    for (int s = 0; s < nscalars; s++) {
        all |= scalars[s];
        if (scalars[s] > big) big = scalars[s];
    }
    int u = 0;
    while (big / ((int64_t)1 << u) > INT_MAX && u + 1 < DTR__MPI_UNITS &&
           (all & (((int64_t)1 << (u + 1)) - 1)) == 0)
        u++;
    if (big / ((int64_t)1 << u) > INT_MAX)
        return dtr__error(DTR_ERR_UNSUPPORTED, "mpi",
                          "%lld bytes in one piece: past MPI's int counts with no common "
                          "unit of up to 4 KiB",
                          (long long)big);
    *type = u == 0 ? MPI_BYTE : m->unit[u];
    *unit = (int64_t)1 << u;
    return DTR_OK;
}

static void dtr__mpi_ints(const int64_t *v, int n, int64_t unit, int *out) {
    for (int k = 0; k < n; k++) out[k] = (int)(v[k] / unit);
}

static dtr__mpi_req_t *dtr__req(dtr_backend_req_t *req) {
    dtr__mpi_req_t *r = (dtr__mpi_req_t *)req->bytes;
    memset(r, 0, sizeof *r);
    r->req = MPI_REQUEST_NULL;
    r->stype = r->rtype = MPI_DATATYPE_NULL;
    return r;
}

/* rows x block bytes, row bytes apart, with an extent of block: piece k starts at k*block. */
static dtr_status_t dtr__mpi_strided(int64_t rows, int64_t block, int64_t row, MPI_Datatype *out) {
    if (rows > INT_MAX || block > INT_MAX)
        return dtr__error(DTR_ERR_UNSUPPORTED, "mpi", "strided piece of %lld rows of %lld bytes",
                          (long long)rows, (long long)block);
    MPI_Datatype v;
    DTR__MPI(MPI_Type_create_hvector((int)rows, (int)block, (MPI_Aint)row, MPI_BYTE, &v),
             "MPI_Type_create_hvector");
    int rc = MPI_Type_create_resized(v, 0, (MPI_Aint)block, out);
    MPI_Type_free(&v);
    if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Type_create_resized");
    DTR__MPI(MPI_Type_commit(out), "MPI_Type_commit");
    return DTR_OK;
}

static void dtr__mpi_free_types(dtr__mpi_req_t *r) {
    if (r->stype != MPI_DATATYPE_NULL) MPI_Type_free(&r->stype);
    if (r->rtype != MPI_DATATYPE_NULL) MPI_Type_free(&r->rtype);
}

/*
 * The shared-memory gather places pieces at copy speed (the datatype engine does not) and
 * makes n + 1 copies of a piece where the slices make 3n - 1: it beat them on 2, 3 and 4
 * members at 16 and 64 MiB (docs/executor.md).
 */
static bool dtr__mpi_strided_in_place(void *group) {
    dtr__mpi_group_t *g = group;
    return g->shm != NULL && g->mpi->shm_gather; /* (a segment means strided forms are on) */
}

static dtr_status_t dtr__mpi_all_gather_strided(void *group, const void *send, int64_t rows,
                                                int64_t block, int64_t row, void *recv,
                                                dtr_backend_req_t *req) {
    dtr__mpi_group_t *g = group;
    if (!g->mpi->strided)
        return dtr__error(DTR_ERR_UNSUPPORTED, "mpi", "strided forms off (DTR_MPI_STRIDED=0)");
    if (dtr__mpi_strided_in_place(g)) {
        DTR_CHECK(dtr__shm_gather_start(g->shm, send, rows * block, recv, block, row));
        dtr__req(req)->kind = DTR__OP_SHM;
        return DTR_OK;
    }
    dtr__mpi_req_t *r = dtr__req(req);
    DTR_CHECK(dtr__mpi_strided(rows, block, row, &r->rtype));
    /* the send side: rows pieces of block bytes, back to back */
    int rc = MPI_Type_contiguous((int)block, MPI_BYTE, &r->stype);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&r->stype);
    if (rc != MPI_SUCCESS) {
        dtr__mpi_free_types(r);
        return dtr__mpi_error(rc, "MPI_Type_contiguous");
    }
    r->kind = DTR__OP_ALLGATHER_STRIDED;
    r->send = send;
    r->recv = recv;
    r->scount = (int)rows;
    return DTR_OK;
}

/* MPI_Alltoallw between the other members only: the caller copies its own piece (it can
 * write it with streaming stores; Open MPI's self copy between two derived types runs
 * through a 64 KiB bounce buffer). */
static dtr_status_t dtr__mpi_all_to_all_strided(void *group, const void *send, int64_t srows,
                                                int64_t sblock, int64_t srow, void *recv,
                                                int64_t rrows, int64_t rblock, int64_t rrow,
                                                dtr_backend_req_t *req) {
    dtr__mpi_group_t *g = group;
    if (!g->mpi->strided)
        return dtr__error(DTR_ERR_UNSUPPORTED, "mpi", "strided forms off (DTR_MPI_STRIDED=0)");
    if (g->shm != NULL) {
        if (srows * sblock != rrows * rblock)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, "mpi",
                              "strided all-to-all: pieces of %lld bytes sent, %lld received",
                              (long long)(srows * sblock), (long long)(rrows * rblock));
        /* (where the send buffer lies in a shared allocation, the others read it there) */
        dtr__shm_shared_t sh;
        const dtr__shm_shared_t *shared = NULL; /* (allocations are made by every rank) */
        if (g->mpi->shared != NULL && srows > 0) {
            int64_t span = (g->n - 1) * sblock + (srows - 1) * srow + sblock;
            dtr__mpi_shared_find(g->mpi, g->ranks, g->n, send, span, 0, &sh);
            shared = &sh;
        }
        DTR_CHECK(dtr__shm_start_direct(g->shm, send, sblock, srow, recv, rblock, rrow,
                                        srows * sblock, shared));
        dtr__req(req)->kind = DTR__OP_SHM;
        return DTR_OK;
    }
    int64_t last = g->n - 1;
    if (last * sblock > INT_MAX || last * rblock > INT_MAX)
        return dtr__error(DTR_ERR_UNSUPPORTED, "mpi",
                          "strided all-to-all displacements past INT_MAX bytes (%lld, %lld)",
                          (long long)(last * sblock), (long long)(last * rblock));
    dtr__mpi_req_t *r = dtr__req(req);
    DTR_CHECK(dtr__mpi_strided(srows, sblock, srow, &r->stype));
    dtr_status_t st = dtr__mpi_strided(rrows, rblock, rrow, &r->rtype);
    if (st != DTR_OK) {
        dtr__mpi_free_types(r);
        return st;
    }
    r->kind = DTR__OP_ALLTOALL_STRIDED;
    r->send = send;
    r->recv = recv;
    r->scounts = g->ints;
    r->sdispls = g->ints + g->n;
    r->rcounts = g->ints + 2 * g->n;
    r->rdispls = g->ints + 3 * g->n;
    for (int k = 0; k < g->n; k++) {
        r->scounts[k] = r->rcounts[k] = k != g->me;
        r->sdispls[k] = (int)(k * sblock);
        r->rdispls[k] = (int)(k * rblock);
        g->types[k] = r->stype;
        g->types[g->n + k] = r->rtype;
    }
    return DTR_OK;
}

/* Records an operation where every member moves `bytes` to or from every member. */
static dtr_status_t dtr__mpi_equal(dtr__mpi_kind_t kind, void *group, const void *send,
                                   int64_t bytes, void *recv, dtr_backend_req_t *req) {
    dtr__mpi_group_t *g = group;
    dtr__mpi_req_t *r = dtr__req(req);
    int64_t unit;
    DTR_CHECK(dtr__mpi_unit(g->mpi, NULL, 0, 0, &bytes, 1, &r->type, &unit));
    r->kind = kind;
    r->send = send;
    r->recv = recv;
    r->scount = r->rcount = (int)(bytes / unit);
    return DTR_OK;
}

/* Through the segment where the group has one, as the strided form (one row per piece). */
static dtr_status_t dtr__mpi_all_gather(void *group, const void *send, int64_t bytes, void *recv,
                                        dtr_backend_req_t *req) {
    dtr__mpi_group_t *g = group;
    if (dtr__mpi_strided_in_place(g) && bytes > 0) {
        DTR_CHECK(dtr__shm_gather_start(g->shm, send, bytes, recv, bytes, bytes));
        dtr__req(req)->kind = DTR__OP_SHM;
        return DTR_OK;
    }
    return dtr__mpi_equal(DTR__OP_ALLGATHER, group, send, bytes, recv, req);
}

static dtr_status_t dtr__mpi_all_gatherv(void *group, const void *send, int64_t bytes, void *recv,
                                         const int64_t *counts, const int64_t *displs,
                                         dtr_backend_req_t *req) {
    dtr__mpi_group_t *g = group;
    dtr__mpi_req_t *r = dtr__req(req);
    int64_t unit;
    const int64_t *arrays[2] = {counts, displs};
    DTR_CHECK(dtr__mpi_unit(g->mpi, arrays, 2, g->n, &bytes, 1, &r->type, &unit));
    r->kind = DTR__OP_ALLGATHERV;
    r->send = send;
    r->recv = recv;
    r->scount = (int)(bytes / unit);
    r->rcounts = g->ints;
    r->rdispls = g->ints + g->n;
    dtr__mpi_ints(counts, g->n, unit, r->rcounts);
    dtr__mpi_ints(displs, g->n, unit, r->rdispls);
    return DTR_OK;
}

static dtr_status_t dtr__mpi_count(int64_t count) {
    if (count > INT_MAX)
        return dtr__error(DTR_ERR_UNSUPPORTED, "mpi",
                          "%lld elements in one reduction: past MPI's int counts",
                          (long long)count);
    return DTR_OK;
}

/* Whether a reduction of `bytes` per member goes through the segment. Small ones whose
 * result is exact in any order (max and min; sums and products of i32 and i64, which wrap)
 * keep MPI's call: its few-byte all-reduce is as fast alone and, next to a segment gather or
 * all-to-all (the argument agreement before one), faster, and exactness keeps every member's
 * bits equal. u8 sums stay on the segment (Open MPI's saturate, open-mpi/ompi#8045). */
static bool dtr__mpi_shm_reduces(dtr__mpi_group_t *g, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                 int64_t bytes) {
    if (g->shm == NULL || !g->mpi->shm_reduce) return false;
    bool exact = op == DTR_REDUCE_MAX || op == DTR_REDUCE_MIN ||
                 ((dtype == DTR_I32 || dtype == DTR_I64) &&
                  (op == DTR_REDUCE_SUM || op == DTR_REDUCE_PRODUCT));
    return !(exact && bytes <= DTR__SHM_REDUCE_EXACT_MAX);
}

/* Where a reduction's send and receive buffers sit in shared allocations, in *sh; NULL where
 * the process has none (the common case, at no cost). */
static const dtr__shm_shared_t *dtr__mpi_shared(const dtr__mpi_group_t *g, const void *send,
                                                int64_t sbytes, const void *recv,
                                                int64_t rbytes, dtr__shm_shared_t *sh) {
    if (g->mpi->shared == NULL) return NULL;
    dtr__mpi_shared_find(g->mpi, g->ranks, g->n, send, sbytes, 0, sh);
    dtr__mpi_shared_find(g->mpi, g->ranks, g->n, recv, rbytes, 1, sh);
    return sh;
}

/* A reduction of `count` elements per member (reduce-scatter block, all-reduce). */
static dtr_status_t dtr__mpi_reduce(dtr__mpi_kind_t kind, void *group, const void *send,
                                    void *recv, int64_t count, dtr_dtype_t dtype,
                                    dtr_reduce_op_t op, dtr_backend_req_t *req) {
    dtr__mpi_group_t *g = group;
    dtr__mpi_req_t *r = dtr__req(req);
    DTR_CHECK(dtr__mpi_count(count));
    DTR_CHECK(dtr__mpi_reduction(g->mpi, dtype, op, &r->type, &r->op));
    int64_t esize = dtr_dtype_info(dtype)->size;
    if (dtr__hier_takes(g->hier, kind == DTR__OP_ALLREDUCE, count, dtype, op)) {
        r->kind = DTR__OP_HIER;
        r->hier = (dtr__hier_op_t){.all_reduce = kind == DTR__OP_ALLREDUCE, .send = send,
                                   .recv = recv, .count = count, .dtype = dtype, .op = op,
                                   .req = MPI_REQUEST_NULL};
        return DTR_OK;
    }
    if (kind == DTR__OP_ALLREDUCE && g->shm != NULL && g->mpi->shm_reduce &&
        count * esize <= DTR__SHM_TINY_MAX) {
        DTR_CHECK(dtr__shm_tiny_all_reduce_start(g->shm, send, recv, count, dtype, op, esize));
        r->kind = DTR__OP_SHM;
        return DTR_OK;
    }
    int64_t in_bytes = count * esize * (kind == DTR__OP_ALLREDUCE ? 1 : g->n);
    if (dtr__mpi_shm_reduces(g, dtype, op, in_bytes)) {
        dtr__shm_shared_t sh;
        const dtr__shm_shared_t *shared = dtr__mpi_shared(g, send, in_bytes, recv, count * esize, &sh);
        if (kind == DTR__OP_ALLREDUCE) {
            DTR_CHECK(dtr__shm_all_reduce_start(g->shm, send, recv, count, dtype, op, esize, shared));
        } else {
            int64_t counts[DTR__SHM_MAX_MEMBERS];
            for (int k = 0; k < g->n; k++) counts[k] = count;
            DTR_CHECK(dtr__shm_reduce_scatter_start(g->shm, send, recv, counts, dtype, op, esize,
                                                    shared));
        }
        r->kind = DTR__OP_SHM;
        return DTR_OK;
    }
    r->kind = kind;
    r->send = send;
    r->recv = recv;
    r->rcount = (int)count;
    return DTR_OK;
}

static dtr_status_t dtr__mpi_reduce_scatter(void *group, const void *send, void *recv,
                                            int64_t count, dtr_dtype_t dtype,
                                            dtr_reduce_op_t op, dtr_backend_req_t *req) {
    return dtr__mpi_reduce(DTR__OP_REDUCE_SCATTER_BLOCK, group, send, recv, count, dtype, op,
                           req);
}

static dtr_status_t dtr__mpi_reduce_scatterv(void *group, const void *send, void *recv,
                                             const int64_t *counts, dtr_dtype_t dtype,
                                             dtr_reduce_op_t op, dtr_backend_req_t *req) {
    dtr__mpi_group_t *g = group;
    dtr__mpi_req_t *r = dtr__req(req);
    for (int k = 0; k < g->n; k++) DTR_CHECK(dtr__mpi_count(counts[k]));
    DTR_CHECK(dtr__mpi_reduction(g->mpi, dtype, op, &r->type, &r->op));
    int64_t total = 0, esize = dtr_dtype_info(dtype)->size;
    for (int k = 0; k < g->n; k++) total += counts[k];
    if (dtr__mpi_shm_reduces(g, dtype, op, total * esize)) { /* counts are every member's */
        dtr__shm_shared_t sh;
        const dtr__shm_shared_t *shared =
            dtr__mpi_shared(g, send, total * esize, recv, counts[g->me] * esize, &sh);
        DTR_CHECK(dtr__shm_reduce_scatter_start(g->shm, send, recv, counts, dtype, op, esize,
                                                shared));
        r->kind = DTR__OP_SHM;
        return DTR_OK;
    }
    r->kind = DTR__OP_REDUCE_SCATTER;
    r->send = send;
    r->recv = recv;
    r->rcounts = g->ints;
    dtr__mpi_ints(counts, g->n, 1, r->rcounts);
    return DTR_OK;
}

static dtr_status_t dtr__mpi_all_reduce(void *group, const void *send, void *recv, int64_t count,
                                        dtr_dtype_t dtype, dtr_reduce_op_t op,
                                        dtr_backend_req_t *req) {
    return dtr__mpi_reduce(DTR__OP_ALLREDUCE, group, send, recv, count, dtype, op, req);
}

static dtr_status_t dtr__mpi_all_to_all(void *group, const void *send, int64_t bytes, void *recv,
                                        dtr_backend_req_t *req) {
    return dtr__mpi_equal(DTR__OP_ALLTOALL, group, send, bytes, recv, req);
}

static dtr_status_t dtr__mpi_all_to_allv(void *group, const void *send, const int64_t *scounts,
                                         const int64_t *sdispls, void *recv,
                                         const int64_t *rcounts, const int64_t *rdispls,
                                         dtr_backend_req_t *req) {
    dtr__mpi_group_t *g = group;
    dtr__mpi_req_t *r = dtr__req(req);
    int64_t unit;
    const int64_t *arrays[4] = {scounts, sdispls, rcounts, rdispls};
    DTR_CHECK(dtr__mpi_unit(g->mpi, arrays, 4, g->n, NULL, 0, &r->type, &unit));
    r->send = send;
    r->recv = recv;
    /* Always MPI's v form, even where this rank's counts look regular: another member's may
     * not, and every member must make the same call. (Through the segment, the ring
     * all-to-all of dtr__shm_start_v, it took 1.0-1.5x as long at 4095x4097 f32 on 2 ranks:
     * Open MPI's shared-memory transport copies a large message once.) */
    r->kind = DTR__OP_ALLTOALLV;
    r->scounts = g->ints;
    r->sdispls = g->ints + g->n;
    r->rcounts = g->ints + 2 * g->n;
    r->rdispls = g->ints + 3 * g->n;
    dtr__mpi_ints(scounts, g->n, unit, r->scounts);
    dtr__mpi_ints(sdispls, g->n, unit, r->sdispls);
    dtr__mpi_ints(rcounts, g->n, unit, r->rcounts);
    dtr__mpi_ints(rdispls, g->n, unit, r->rdispls);
    return DTR_OK;
}

/* The argument agreement: through the segment's own lines where the group has one (it may
 * run beside a started operation), else MPI's all-reduce, issued at the first test. */
static dtr_status_t dtr__mpi_agree(void *group, const int64_t *send, int64_t *recv,
                                   dtr_backend_req_t *req) {
    dtr__mpi_group_t *g = group;
    if (g->shm == NULL)
        return dtr__mpi_reduce(DTR__OP_ALLREDUCE, group, send, recv, 3, DTR_I64, DTR_REDUCE_MAX,
                               req);
    dtr__mpi_req_t *r = dtr__req(req);
    r->kind = DTR__OP_AGREE;
    r->recv = recv;
    r->agreement = dtr__shm_agree_start(g->shm, send);
    return DTR_OK;
}

/* An operation started but never tested: MPI's was only recorded; the segment's may have
 * published this member's first chunks, which it takes back. */
static void dtr__mpi_cancel(void *group, dtr_backend_req_t *req) {
    dtr__mpi_req_t *r = (dtr__mpi_req_t *)req->bytes;
    if (r->started) return; /* (the contract: never tested) */
    if (r->kind == DTR__OP_SHM)
        dtr__shm_cancel(((dtr__mpi_group_t *)group)->shm);
    else
        dtr__mpi_free_types(r);
    r->kind = 0;
}

/* Counts an operation of a group for dtr_mpi_groups (read from any thread): its one writer
 * is the thread running the group's operation (they run one at a time), so a load and a
 * store, not a locked add, which would drain the store buffer on every operation. */
static inline void dtr__mpi_tally(int64_t *counter) {
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* Runs the recorded operation: blocking, or started non-blocking. */
static dtr_status_t dtr__mpi_run(dtr__mpi_group_t *g, dtr__mpi_req_t *r, bool blocking) {
    MPI_Comm c = g->comm;
    MPI_Request *q = &r->req;
    int rc;
    const char *name;
    switch (r->kind) {
    case DTR__OP_ALLGATHER:
        name = blocking ? "MPI_Allgather" : "MPI_Iallgather";
        rc = blocking ? MPI_Allgather(r->send, r->scount, r->type, r->recv, r->rcount, r->type, c)
                      : MPI_Iallgather(r->send, r->scount, r->type, r->recv, r->rcount, r->type,
                                       c, q);
        break;
    case DTR__OP_ALLGATHERV:
        name = blocking ? "MPI_Allgatherv" : "MPI_Iallgatherv";
        rc = blocking ? MPI_Allgatherv(r->send, r->scount, r->type, r->recv, r->rcounts,
                                       r->rdispls, r->type, c)
                      : MPI_Iallgatherv(r->send, r->scount, r->type, r->recv, r->rcounts,
                                        r->rdispls, r->type, c, q);
        break;
    case DTR__OP_REDUCE_SCATTER_BLOCK:
        name = blocking ? "MPI_Reduce_scatter_block" : "MPI_Ireduce_scatter_block";
        rc = blocking ? MPI_Reduce_scatter_block(r->send, r->recv, r->rcount, r->type, r->op, c)
                      : MPI_Ireduce_scatter_block(r->send, r->recv, r->rcount, r->type, r->op, c,
                                                  q);
        break;
    case DTR__OP_REDUCE_SCATTER:
        name = blocking ? "MPI_Reduce_scatter" : "MPI_Ireduce_scatter";
        rc = blocking ? MPI_Reduce_scatter(r->send, r->recv, r->rcounts, r->type, r->op, c)
                      : MPI_Ireduce_scatter(r->send, r->recv, r->rcounts, r->type, r->op, c, q);
        break;
    case DTR__OP_ALLREDUCE:
        name = blocking ? "MPI_Allreduce" : "MPI_Iallreduce";
        rc = blocking ? MPI_Allreduce(r->send, r->recv, r->rcount, r->type, r->op, c)
                      : MPI_Iallreduce(r->send, r->recv, r->rcount, r->type, r->op, c, q);
        break;
    case DTR__OP_ALLTOALL:
        name = blocking ? "MPI_Alltoall" : "MPI_Ialltoall";
        rc = blocking ? MPI_Alltoall(r->send, r->scount, r->type, r->recv, r->rcount, r->type, c)
                      : MPI_Ialltoall(r->send, r->scount, r->type, r->recv, r->rcount, r->type,
                                      c, q);
        break;
    case DTR__OP_ALLTOALLV:
        name = blocking ? "MPI_Alltoallv" : "MPI_Ialltoallv";
        rc = blocking ? MPI_Alltoallv(r->send, r->scounts, r->sdispls, r->type, r->recv,
                                      r->rcounts, r->rdispls, r->type, c)
                      : MPI_Ialltoallv(r->send, r->scounts, r->sdispls, r->type, r->recv,
                                       r->rcounts, r->rdispls, r->type, c, q);
        break;
    case DTR__OP_ALLGATHER_STRIDED:
        name = blocking ? "MPI_Allgather (strided)" : "MPI_Iallgather (strided)";
        rc = blocking ? MPI_Allgather(r->send, r->scount, r->stype, r->recv, 1, r->rtype, c)
                      : MPI_Iallgather(r->send, r->scount, r->stype, r->recv, 1, r->rtype, c, q);
        break;
    case DTR__OP_ALLTOALL_STRIDED:
        name = blocking ? "MPI_Alltoallw" : "MPI_Ialltoallw";
        rc = blocking ? MPI_Alltoallw(r->send, r->scounts, r->sdispls, g->types, r->recv,
                                      r->rcounts, r->rdispls, g->types + g->n, c)
                      : MPI_Ialltoallw(r->send, r->scounts, r->sdispls, g->types, r->recv,
                                       r->rcounts, r->rdispls, g->types + g->n, c, q);
        break;
    case DTR__OP_HIER: {
        dtr__mpi_tally(&g->hier_ops);
        r->started = true;
        bool done;
        return dtr__hier_progress(g->hier, &r->hier, blocking, &done);
    }
    case DTR__OP_SHM:
        dtr__mpi_tally(&g->shm_ops);
        if (blocking) dtr__shm_wait(g->shm);
        r->started = true;
        return DTR_OK;
    default:
        return dtr__error(DTR_ERR_INTERNAL, "mpi", "request holds no operation");
    }
    dtr__mpi_tally(&g->mpi_ops);
    /* MPI lets a type be freed while an operation using it is pending. */
    dtr__mpi_free_types(r);
    r->started = true;
    if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, name);
    return DTR_OK;
}

static dtr_status_t dtr__mpi_test(void *group, dtr_backend_req_t *req, bool *done) {
    dtr__mpi_req_t *r = (dtr__mpi_req_t *)req->bytes;
    if (r->kind == DTR__OP_AGREE) {
        *done = dtr__shm_agree_progress(((dtr__mpi_group_t *)group)->shm, r->agreement, r->recv);
        return DTR_OK;
    }
    if (!r->started) DTR_CHECK(dtr__mpi_run(group, r, false));
    if (r->kind == DTR__OP_HIER)
        return dtr__hier_progress(((dtr__mpi_group_t *)group)->hier, &r->hier, false, done);
    if (r->kind == DTR__OP_SHM) {
        *done = dtr__shm_progress(((dtr__mpi_group_t *)group)->shm, NULL);
        return DTR_OK;
    }
    int flag = 0;
    DTR__MPI(MPI_Test(&r->req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    *done = flag != 0;
    return DTR_OK;
}

static dtr_status_t dtr__mpi_wait(void *group, dtr_backend_req_t *req) {
    dtr__mpi_req_t *r = (dtr__mpi_req_t *)req->bytes;
    if (r->kind == DTR__OP_AGREE) {
        while (!dtr__shm_agree_progress(((dtr__mpi_group_t *)group)->shm, r->agreement, r->recv))
            sched_yield();
        return DTR_OK;
    }
    if (!r->started) return dtr__mpi_run(group, r, true);
    if (r->kind == DTR__OP_HIER) {
        bool done;
        return dtr__hier_progress(((dtr__mpi_group_t *)group)->hier, &r->hier, true, &done);
    }
    if (r->kind == DTR__OP_SHM) {
        dtr__shm_wait(((dtr__mpi_group_t *)group)->shm);
        return DTR_OK;
    }
    DTR__MPI(MPI_Wait(&r->req, MPI_STATUS_IGNORE), "MPI_Wait");
    return DTR_OK;
}

/* Span lists go through the segment only: where a reduction would keep MPI's call, or the
 * group has no segment, the executor packs. */
static bool dtr__mpi_spans_ok(void *group, dtr_spans_kind_t kind, dtr_dtype_t dtype,
                              dtr_reduce_op_t op, int64_t bytes) {
    dtr__mpi_group_t *g = group;
    if (!g->mpi->spans) return false;
    if (kind == DTR_SPANS_ALL_GATHER) return dtr__mpi_strided_in_place(g);
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    return (kind == DTR_SPANS_REDUCE_SCATTER || bytes > DTR__SHM_TINY_MAX) &&
           op != DTR_REDUCE_AVG && info != NULL && !info->storage_only &&
           dtr__mpi_shm_reduces(g, dtype, op, bytes);
}

static dtr_status_t dtr__mpi_spans_start(void *group, const dtr_spans_op_t *op,
                                         dtr_backend_req_t *req) {
    dtr__mpi_group_t *g = group;
    if (g->shm == NULL)
        return dtr__error(DTR_ERR_UNSUPPORTED, "mpi", "span lists need the shared-memory path");
    DTR_CHECK(dtr__shm_spans_start(g->shm, op, dtr_dtype_info(op->dtype)->size));
    dtr__req(req)->kind = DTR__OP_SHM;
    return DTR_OK;
}

static const dtr_backend_ops_t dtr__mpi_ops = {
    .name = "mpi",
    /* no AVG; span lists cast on reading, divide and cast on writing (shm.c) */
    .caps = DTR_BACKEND_CAP_SPANS_CAST | DTR_BACKEND_CAP_SPANS_SCALE,
    .rank = dtr__mpi_rank,
    .group_create = dtr__mpi_group_create,
    .group_destroy = dtr__mpi_group_destroy,
    .all_gather = dtr__mpi_all_gather,
    .all_gatherv = dtr__mpi_all_gatherv,
    .reduce_scatter = dtr__mpi_reduce_scatter,
    .reduce_scatterv = dtr__mpi_reduce_scatterv,
    .all_reduce = dtr__mpi_all_reduce,
    .all_to_all = dtr__mpi_all_to_all,
    .all_to_allv = dtr__mpi_all_to_allv,
    .all_gather_strided = dtr__mpi_all_gather_strided,
    .all_to_all_strided = dtr__mpi_all_to_all_strided,
    .strided_in_place = dtr__mpi_strided_in_place,
    .test = dtr__mpi_test,
    .wait = dtr__mpi_wait,
    .destroy = dtr__mpi_destroy,
    .agree = dtr__mpi_agree,
    .cancel = dtr__mpi_cancel,
    .spans_ok = dtr__mpi_spans_ok,
    .spans_start = dtr__mpi_spans_start,
    .mem_alloc = dtr__mpi_mem_alloc,
    .mem_free = dtr__mpi_mem_free,
};

const dtr_backend_ops_t *dtr_backend_mpi_ops(void) { return &dtr__mpi_ops; }

dtr_status_t dtr_context_create_mpi(MPI_Comm comm, dtr_context_t **out) {
    DTR_CHECK_PTR(out, __func__);
    void *state = NULL;
    DTR_CHECK(dtr_backend_mpi_state_create(comm, &state));
    return dtr_context_create(&dtr__mpi_ops, state, out);
}
