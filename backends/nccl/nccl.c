/*
 * The NCCL backend (dtr_nccl.h): the executor's ops table over NCCL communicators, one per
 * group, bootstrapped over MPI.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "numeric/numeric.h"
#include "backends/cuda/dtr_cuda.h"
#include "backends/cuda/kernels.h"
#include "backends/mpi/error.h"
#include "backends/nccl/dtr_nccl.h"

typedef struct dtr__nccl_group dtr__nccl_group_t;

/* A communicator dtr_nccl_split_mesh split from the root, and the ranks it holds in order. */
typedef struct dtr__nccl_split {
    struct dtr__nccl_split *next;
    ncclComm_t comm;
    int n;
    int *ranks;
} dtr__nccl_split_t;

/* A mesh dtr_nccl_split_mesh split already: its sizes and ranks, row-major. */
typedef struct dtr__nccl_split_mesh {
    struct dtr__nccl_split_mesh *next;
    int nd;
    int64_t sizes[DTR_MAX_MESH_DIMS], n;
    int ranks[];
} dtr__nccl_split_mesh_t;

typedef struct {
    MPI_Comm world; /* MPI_COMM_NULL for a context without MPI (root below) */
    int rank, size;
    cudaStream_t stream;
    void *mem;                 /* the CUDA space's state (dtr_nccl_set_stream) */
    ncclComm_t root;           /* without MPI: every rank's communicator */
    bool own_root;             /* made here from a unique id (else the caller's, adopted) */
    dtr__nccl_split_t *splits; /* the groups' communicators, split from root */
    dtr__nccl_split_mesh_t *split_meshes; /* the meshes they were split for */
    dtr__nccl_group_t *groups; /* every communicator, for the asynchronous error checks */
    bool aborted;
    char abort_msg[256];
} dtr__nccl_t;

struct dtr__nccl_group {
    dtr__nccl_group_t *next;
    dtr__nccl_t *s;
    MPI_Comm mpi;
    ncclComm_t comm;
    bool borrowed; /* root's or a split's: the state destroys it */
    int n, index;
};

static dtr_status_t dtr__nccl_fail(dtr__nccl_group_t *g, ncclResult_t r, const char *what) {
    const char *last = g != NULL ? ncclGetLastError(g->comm) : NULL;
    return dtr__error(DTR_ERR_BACKEND, "nccl", "%s: %s%s%s", what, ncclGetErrorString(r),
                      last != NULL && *last != '\0' ? ": " : "", last != NULL ? last : "");
}

static bool dtr__nccl_type(dtr_dtype_t d, ncclDataType_t *t) {
    switch (d) {
    case DTR_F32: *t = ncclFloat32; return true;
    case DTR_F64: *t = ncclFloat64; return true;
    case DTR_F16: *t = ncclFloat16; return true;
    case DTR_BF16: *t = ncclBfloat16; return true;
    case DTR_I32: *t = ncclInt32; return true;
    case DTR_I64: *t = ncclInt64; return true;
    case DTR_U8: *t = ncclUint8; return true;
    case DTR_F8E4M3: *t = ncclFloat8e4m3; return true;
    case DTR_F8E5M2: *t = ncclFloat8e5m2; return true;
    default: return false;
    }
}

/* NCCL's op for op on dtype; *divide when AVG must be SUM then the divide kernel. */
static dtr_status_t dtr__nccl_op(dtr_dtype_t dtype, dtr_reduce_op_t op, ncclDataType_t *t,
                                 ncclRedOp_t *r, bool *divide) {
    *divide = false;
    if (!dtr__nccl_type(dtype, t))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "nccl", "dtype: %d has no NCCL type",
                          (int)dtype);
    switch (op) {
    case DTR_REDUCE_SUM: *r = ncclSum; break;
    case DTR_REDUCE_PRODUCT: *r = ncclProd; break;
    case DTR_REDUCE_MAX: *r = ncclMax; break;
    case DTR_REDUCE_MIN: *r = ncclMin; break;
    case DTR_REDUCE_AVG:
        *divide = dtr_dtype_info(dtype)->is_float;
        *r = *divide ? ncclSum : ncclAvg;
        break;
    default:
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "nccl", "op: %d is not a reduce op", (int)op);
    }
    return DTR_OK;
}

static dtr_status_t dtr__nccl_alive(dtr__nccl_t *s) {
    if (!s->aborted) return DTR_OK;
    return dtr__error(DTR_ERR_BACKEND, "nccl", "communicators aborted after an earlier error "
                      "(%s); destroy the context", s->abort_msg);
}

/* Checks every communicator's asynchronous error; aborts them all on a fatal one. */
static dtr_status_t dtr__nccl_poll(void *arg) {
    dtr__nccl_t *s = arg;
    DTR_CHECK(dtr__nccl_alive(s));
    for (dtr__nccl_group_t *g = s->groups; g != NULL; g = g->next) {
        ncclResult_t a = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(g->comm, &a);
        if (r == ncclSuccess && (a == ncclSuccess || a == ncclInProgress)) continue;
        dtr_status_t st = dtr__nccl_fail(g, r != ncclSuccess ? r : a, "asynchronous error");
        snprintf(s->abort_msg, sizeof s->abort_msg, "%s", dtr_last_error());
        s->aborted = true;
        for (dtr__nccl_group_t *h = s->groups; h != NULL; h = h->next)
            if (!h->borrowed) ncclCommAbort(h->comm);
        for (dtr__nccl_split_t *sp = s->splits; sp != NULL; sp = sp->next) {
            ncclCommAbort(sp->comm);
            sp->comm = NULL;
        }
        return st;
    }
    return DTR_OK;
}

static int dtr__nccl_rank(void *state) { return ((dtr__nccl_t *)state)->rank; }

/* A group of n ranks with this rank's index in it (-1: not a member); no communicator yet. */
static dtr__nccl_group_t *dtr__nccl_group_new(dtr__nccl_t *s, const int *ranks, int n) {
    dtr__nccl_group_t *g = calloc(1, sizeof *g);
    if (g == NULL) return NULL;
    g->s = s;
    g->n = n;
    g->index = -1;
    g->mpi = MPI_COMM_NULL;
    for (int k = 0; k < n; k++)
        if (ranks[k] == s->rank) g->index = k;
    return g;
}

/* A group of a context without MPI: the root's communicator for every rank in order, else one
 * dtr_nccl_split_mesh split for exactly these ranks. */
static dtr_status_t dtr__nccl_group_lookup(dtr__nccl_t *s, const int *ranks, int n,
                                           void **group) {
    bool whole = n == s->size;
    for (int k = 0; whole && k < n; k++) whole = ranks[k] == k;
    ncclComm_t comm = whole ? s->root : NULL;
    for (dtr__nccl_split_t *sp = s->splits; comm == NULL && sp != NULL; sp = sp->next)
        if (sp->n == n && memcmp(sp->ranks, ranks, (size_t)n * sizeof *ranks) == 0)
            comm = sp->comm;
    if (comm == NULL)
        return dtr__error(DTR_ERR_UNSUPPORTED, "nccl",
                          "a group of %d ranks (first %d) has no communicator: on a context "
                          "made without MPI, call dtr_nccl_split_mesh(ctx, mesh) on every rank "
                          "of the communicator first (ncclCommSplit is collective over all of "
                          "them)", n, n > 0 ? ranks[0] : -1);
    dtr__nccl_group_t *g = dtr__nccl_group_new(s, ranks, n);
    if (g == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "nccl", "group");
    g->comm = comm;
    g->borrowed = true;
    g->next = s->groups;
    s->groups = g;
    *group = g;
    return DTR_OK;
}

static dtr_status_t dtr__nccl_group_create(void *state, const int *ranks, int n, int tag,
                                           void **group) {
    dtr__nccl_t *s = state;
    DTR_CHECK(dtr__nccl_alive(s));
    if (s->world == MPI_COMM_NULL) return dtr__nccl_group_lookup(s, ranks, n, group);
    dtr__nccl_group_t *g = dtr__nccl_group_new(s, ranks, n);
    if (g == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "nccl", "group");
    MPI_Group all, sub;
    int rc = MPI_Comm_group(s->world, &all);
    if (rc == MPI_SUCCESS) rc = MPI_Group_incl(all, n, ranks, &sub);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(s->world, sub, tag, &g->mpi);
    if (rc != MPI_SUCCESS) {
        free(g);
        return dtr__mpi_error(rc, "MPI_Comm_create_group (the NCCL bootstrap)");
    }
    MPI_Group_free(&sub);
    MPI_Group_free(&all);
    MPI_Comm_set_errhandler(g->mpi, MPI_ERRORS_RETURN);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = ncclSuccess;
    if (g->index == 0) r = ncclGetUniqueId(&id);
    /* the id, or the first rank's failure, to every member */
    int ok = r == ncclSuccess;
    rc = MPI_Bcast(&ok, 1, MPI_INT, 0, g->mpi);
    if (rc == MPI_SUCCESS && ok) rc = MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, g->mpi);
    if (rc != MPI_SUCCESS || !ok) {
        MPI_Comm_free(&g->mpi);
        free(g);
        return rc != MPI_SUCCESS ? dtr__mpi_error(rc, "MPI_Bcast of the ncclUniqueId")
                                 : dtr__error(DTR_ERR_BACKEND, "nccl",
                                              "ncclGetUniqueId failed on the group's first rank");
    }
    r = ncclCommInitRank(&g->comm, n, id, g->index);
    if (r != ncclSuccess) {
        MPI_Comm_free(&g->mpi);
        free(g);
        return dtr__nccl_fail(NULL, r, "ncclCommInitRank");
    }
    g->next = s->groups;
    s->groups = g;
    *group = g;
    return DTR_OK;
}

static void dtr__nccl_group_destroy(void *state, void *group) {
    dtr__nccl_t *s = state;
    dtr__nccl_group_t *g = group;
    if (g == NULL) return;
    for (dtr__nccl_group_t **p = &s->groups; *p != NULL; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            break;
        }
    if (!g->borrowed && s->aborted) ncclCommAbort(g->comm);
    else if (!g->borrowed) ncclCommDestroy(g->comm);
    if (g->mpi != MPI_COMM_NULL) MPI_Comm_free(&g->mpi);
    free(g);
}

#define DTR__NCCL(g, call, what)                                                              \
    do {                                                                                       \
        ncclResult_t dtr__r = (call);                                                         \
        if (dtr__r != ncclSuccess) return dtr__nccl_fail((g), dtr__r, (what));                \
    } while (0)

static dtr_status_t dtr__nccl_all_gather(void *group, const void *send, int64_t bytes,
                                         void *recv, dtr_backend_req_t *req) {
    dtr__nccl_group_t *g = group;
    (void)req;
    DTR_CHECK(dtr__nccl_alive(g->s));
    DTR__NCCL(g, ncclAllGather(send, recv, (size_t)bytes, ncclUint8, g->comm, g->s->stream),
              "ncclAllGather");
    return DTR_OK;
}

/* Pieces both ways by grouped send/receive; this rank's own piece by a device copy. */
static dtr_status_t dtr__nccl_pairs(dtr__nccl_group_t *g, const void *send,
                                    const int64_t *sc, const int64_t *sd, void *recv,
                                    const int64_t *rc, const int64_t *rd, const char *what) {
    cudaStream_t st = g->s->stream;
    int me = g->index;
    if (rc[me] > 0) {
        cudaError_t e = cudaMemcpyAsync((char *)recv + rd[me], (const char *)send + sd[me],
                                        (size_t)rc[me], cudaMemcpyDeviceToDevice, st);
        if (e != cudaSuccess)
            return dtr__error(DTR_ERR_BACKEND, "nccl", "%s: own piece: %s", what,
                              cudaGetErrorString(e));
    }
    DTR__NCCL(g, ncclGroupStart(), "ncclGroupStart");
    for (int k = 0; k < g->n; k++) {
        if (k == me) continue;
        if (sc[k] > 0) {
            ncclResult_t r = ncclSend((const char *)send + sd[k], (size_t)sc[k], ncclUint8, k,
                                      g->comm, st);
            if (r != ncclSuccess) {
                ncclGroupEnd();
                return dtr__nccl_fail(g, r, "ncclSend");
            }
        }
        if (rc[k] > 0) {
            ncclResult_t r = ncclRecv((char *)recv + rd[k], (size_t)rc[k], ncclUint8, k, g->comm,
                                      st);
            if (r != ncclSuccess) {
                ncclGroupEnd();
                return dtr__nccl_fail(g, r, "ncclRecv");
            }
        }
    }
    DTR__NCCL(g, ncclGroupEnd(), what);
    return DTR_OK;
}

static dtr_status_t dtr__nccl_all_gatherv(void *group, const void *send, int64_t bytes,
                                          void *recv, const int64_t *counts,
                                          const int64_t *displs, dtr_backend_req_t *req) {
    dtr__nccl_group_t *g = group;
    (void)req;
    DTR_CHECK(dtr__nccl_alive(g->s));
    /* every member sends its piece to every other: send counts all `bytes`, from 0 */
    int64_t *sc = malloc((size_t)g->n * 2 * sizeof *sc);
    if (sc == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "nccl", "count arrays");
    int64_t *sd = sc + g->n;
    for (int k = 0; k < g->n; k++) {
        sc[k] = bytes;
        sd[k] = 0;
    }
    dtr_status_t st = dtr__nccl_pairs(g, send, sc, sd, recv, counts, displs, "all_gatherv");
    free(sc);
    return st;
}

/* AVG of a float dtype: SUM, then the divide kernel on the result. */
static dtr_status_t dtr__nccl_divide(dtr__nccl_group_t *g, void *recv, int64_t count,
                                     dtr_dtype_t dtype) {
    int e = dtr_cuda__divide(g->s->stream, (int)dtype, recv, recv, count, g->n);
    if (e != 0)
        return dtr__error(DTR_ERR_BACKEND, "nccl", "AVG's divide kernel: %s",
                          e < 0 ? "no divide for this dtype" : cudaGetErrorString((cudaError_t)e));
    return DTR_OK;
}

/* ncclReduceScatter (scatter) or ncclAllReduce; AVG of floats divides after. */
static dtr_status_t dtr__nccl_reduce(dtr__nccl_group_t *g, const void *send, void *recv,
                                     int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                     bool scatter) {
    DTR_CHECK(dtr__nccl_alive(g->s));
    ncclDataType_t t = ncclUint8;
    ncclRedOp_t r = ncclSum;
    bool divide = false;
    dtype = dtr__parts(dtype, &count); /* NCCL has no complex type: reduce the parts */
    DTR_CHECK(dtr__nccl_op(dtype, op, &t, &r, &divide));
    if (scatter)
        DTR__NCCL(g, ncclReduceScatter(send, recv, (size_t)count, t, r, g->comm, g->s->stream),
                  "ncclReduceScatter");
    else
        DTR__NCCL(g, ncclAllReduce(send, recv, (size_t)count, t, r, g->comm, g->s->stream),
                  "ncclAllReduce");
    return divide ? dtr__nccl_divide(g, recv, count, dtype) : DTR_OK;
}

/* A SUM whose addends are first multiplied by `scale` in dtype: ncclRedOpCreatePreMulSum
 * with the scalar on the host, destroyed as soon as the collective is enqueued (NCCL
 * allows that once the last call given the op has returned). */
static dtr_status_t dtr__nccl_premul_sum(void *group, const void *send, void *recv,
                                         int64_t count, dtr_dtype_t dtype, double scale,
                                         bool scatter, dtr_backend_req_t *req) {
    dtr__nccl_group_t *g = group;
    (void)req;
    DTR_CHECK(dtr__nccl_alive(g->s));
    ncclDataType_t t = ncclUint8;
    if (!dtr_dtype_info(dtype)->is_float || dtr_dtype_info(dtype)->storage_only ||
        dtr_dtype_info(dtype)->is_complex || !dtr__nccl_type(dtype, &t))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "nccl", "premul_sum: dtype %s, not a float",
                          dtr_dtype_name(dtype) != NULL ? dtr_dtype_name(dtype) : "?");
    DTR_ALIGNAS(8) unsigned char scalar[8];
    dtr__store(dtype, scalar, 0, scale); /* the scalar in the collective's dtype */
    ncclRedOp_t op;
    DTR__NCCL(g, ncclRedOpCreatePreMulSum(&op, scalar, t, ncclScalarHostImmediate, g->comm),
              "ncclRedOpCreatePreMulSum");
    ncclResult_t r =
        scatter ? ncclReduceScatter(send, recv, (size_t)count, t, op, g->comm, g->s->stream)
                : ncclAllReduce(send, recv, (size_t)count, t, op, g->comm, g->s->stream);
    ncclRedOpDestroy(op, g->comm);
    if (r != ncclSuccess)
        return dtr__nccl_fail(g, r, scatter ? "ncclReduceScatter (premul sum)"
                                            : "ncclAllReduce (premul sum)");
    return DTR_OK;
}

static dtr_status_t dtr__nccl_reduce_scatter(void *group, const void *send, void *recv,
                                             int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                             dtr_backend_req_t *req) {
    (void)req;
    return dtr__nccl_reduce(group, send, recv, count, dtype, op, true);
}

static dtr_status_t dtr__nccl_all_reduce(void *group, const void *send, void *recv,
                                         int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                         dtr_backend_req_t *req) {
    (void)req;
    return dtr__nccl_reduce(group, send, recv, count, dtype, op, false);
}

static dtr_status_t dtr__nccl_all_to_all(void *group, const void *send, int64_t bytes,
                                         void *recv, dtr_backend_req_t *req) {
    dtr__nccl_group_t *g = group;
    (void)req;
    DTR_CHECK(dtr__nccl_alive(g->s));
    DTR__NCCL(g, ncclAlltoAll(send, recv, (size_t)bytes, ncclUint8, g->comm, g->s->stream),
              "ncclAlltoAll");
    return DTR_OK;
}

static dtr_status_t dtr__nccl_all_to_allv(void *group, const void *send, const int64_t *sc,
                                          const int64_t *sd, void *recv, const int64_t *rc,
                                          const int64_t *rd, dtr_backend_req_t *req) {
    dtr__nccl_group_t *g = group;
    (void)req;
    DTR_CHECK(dtr__nccl_alive(g->s));
    return dtr__nccl_pairs(g, send, sc, sd, recv, rc, rd, "all_to_allv");
}

/* Enqueued is complete for the executor (the stream orders what follows); an asynchronous
 * error of any communicator fails the test. */
static dtr_status_t dtr__nccl_test(void *group, dtr_backend_req_t *req, bool *done) {
    dtr__nccl_group_t *g = group;
    (void)req;
    *done = true;
    return dtr__nccl_poll(g->s);
}

static dtr_status_t dtr__nccl_wait(void *group, dtr_backend_req_t *req) {
    bool done;
    return dtr__nccl_test(group, req, &done);
}

static void dtr__nccl_destroy(void *state) {
    dtr__nccl_t *s = state;
    if (s == NULL) return;
    while (s->splits != NULL) {
        dtr__nccl_split_t *sp = s->splits;
        s->splits = sp->next;
        if (sp->comm != NULL) ncclCommDestroy(sp->comm);
        free(sp->ranks);
        free(sp);
    }
    while (s->split_meshes != NULL) {
        dtr__nccl_split_mesh_t *m = s->split_meshes;
        s->split_meshes = m->next;
        free(m);
    }
    if (s->own_root && s->aborted) ncclCommAbort(s->root);
    else if (s->own_root) ncclCommDestroy(s->root);
    if (s->world != MPI_COMM_NULL) MPI_Comm_free(&s->world);
    free(s);
}

static const dtr_backend_ops_t dtr__nccl_ops = {
    .name = "nccl",
    .caps = DTR_BACKEND_CAP_AVG | DTR_BACKEND_CAP_DEVICE | DTR_BACKEND_CAP_CONCURRENT,
    .rank = dtr__nccl_rank,
    .group_create = dtr__nccl_group_create,
    .group_destroy = dtr__nccl_group_destroy,
    .all_gather = dtr__nccl_all_gather,
    .all_gatherv = dtr__nccl_all_gatherv,
    .reduce_scatter = dtr__nccl_reduce_scatter,
    .all_reduce = dtr__nccl_all_reduce,
    .all_to_all = dtr__nccl_all_to_all,
    .all_to_allv = dtr__nccl_all_to_allv,
    .test = dtr__nccl_test,
    .wait = dtr__nccl_wait,
    .destroy = dtr__nccl_destroy,
    .premul_sum = dtr__nccl_premul_sum,
};

/* The context over a state whose world is set (s->rank, and MPI or the root): the CUDA space
 * mem (device, stream) joined to it. Owns s and mem, also on failure. */
static dtr_status_t dtr__nccl_context(dtr__nccl_t *s, void *mem, dtr_context_t **out) {
    s->mem = mem;
    s->stream = (cudaStream_t)dtr_memory_cuda_stream(mem);
    dtr_context_t *ctx = NULL;
    dtr_status_t st = dtr_context_create(&dtr__nccl_ops, s, &ctx); /* owns s, even on failure */
    if (st != DTR_OK) {
        dtr_memory_cuda_ops()->destroy(mem);
        return st;
    }
    dtr_memory_cuda_set_poll(mem, dtr__nccl_poll, s);
    st = dtr_context_set_memory(ctx, dtr_memory_cuda_ops(), mem); /* owns mem */
    if (st != DTR_OK) {
        dtr_context_destroy(ctx);
        return st;
    }
    *out = ctx;
    return DTR_OK;
}

dtr_status_t dtr_context_create_nccl(MPI_Comm comm, int device, void *stream,
                                     dtr_context_t **out) {
    DTR_CHECK_PTR(out, __func__);
    int init = 0;
    MPI_Initialized(&init);
    if (!init) return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "MPI is not initialised");
    void *mem = NULL;
    DTR_CHECK(dtr_memory_cuda_create(device, stream, &mem));
    dtr__nccl_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        dtr_memory_cuda_ops()->destroy(mem);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "state");
    }
    int rc = MPI_Comm_dup(comm, &s->world);
    if (rc != MPI_SUCCESS) {
        free(s);
        dtr_memory_cuda_ops()->destroy(mem);
        return dtr__mpi_error(rc, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(s->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s->world, &s->rank);
    MPI_Comm_size(s->world, &s->size);
    return dtr__nccl_context(s, mem, out);
}

/* The CUDA space on (device, stream) and a zeroed state for a context without MPI: both into
 * *s and *mem, or an error with neither. */
static dtr_status_t dtr__nccl_new(const char *func, int device, void *stream, dtr__nccl_t **s,
                                  void **mem) {
    DTR_CHECK(dtr_memory_cuda_create(device, stream, mem)); /* the device NCCL joins on */
    *s = calloc(1, sizeof **s);
    if (*s == NULL) {
        dtr_memory_cuda_ops()->destroy(*mem);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "state");
    }
    (*s)->world = MPI_COMM_NULL;
    return DTR_OK;
}

dtr_status_t dtr_context_create_nccl_id(const void *unique_id, size_t id_bytes, int rank,
                                        int size, int device, void *stream,
                                        dtr_context_t **out) {
    DTR_CHECK_PTR(unique_id, __func__);
    DTR_CHECK_PTR(out, __func__);
    if (id_bytes != sizeof(ncclUniqueId))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "id_bytes: %zu, an ncclUniqueId is %zu bytes", id_bytes,
                          sizeof(ncclUniqueId));
    if (size < 1 || rank < 0 || rank >= size)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "rank %d of size %d: need 0 <= rank < size", rank, size);
    void *mem = NULL;
    dtr__nccl_t *s = NULL;
    DTR_CHECK(dtr__nccl_new(__func__, device, stream, &s, &mem));
    s->rank = rank;
    s->size = size;
    ncclUniqueId id;
    memcpy(&id, unique_id, sizeof id);
    ncclResult_t r = ncclCommInitRank(&s->root, size, id, rank);
    if (r != ncclSuccess) {
        free(s);
        dtr_memory_cuda_ops()->destroy(mem);
        return dtr__nccl_fail(NULL, r, "ncclCommInitRank");
    }
    s->own_root = true;
    return dtr__nccl_context(s, mem, out);
}

dtr_status_t dtr_context_create_nccl_comm(void *comm, int device, void *stream,
                                          dtr_context_t **out) {
    DTR_CHECK_PTR(comm, __func__);
    DTR_CHECK_PTR(out, __func__);
    int size = 0, rank = -1;
    ncclResult_t r = ncclCommCount((ncclComm_t)comm, &size);
    if (r == ncclSuccess) r = ncclCommUserRank((ncclComm_t)comm, &rank);
    if (r != ncclSuccess) return dtr__nccl_fail(NULL, r, "comm: ncclCommCount/ncclCommUserRank");
    void *mem = NULL;
    dtr__nccl_t *s = NULL;
    DTR_CHECK(dtr__nccl_new(__func__, device, stream, &s, &mem));
    s->rank = rank;
    s->size = size;
    s->root = (ncclComm_t)comm; /* adopted: the caller's to destroy, after the context */
    return dtr__nccl_context(s, mem, out);
}

/* One ncclCommSplit of the root: dim i's groups (i >= 0) or the whole mesh (i < 0). This
 * rank's group recorded where it is in the mesh. Collective over the root. */
static dtr_status_t dtr__nccl_split_one(dtr__nccl_t *s, const dtr_mesh_t *mesh, int i) {
    int nd = dtr_mesh_ndims(mesh);
    int64_t coord[DTR_MAX_MESH_DIMS];
    bool inside = dtr_mesh_coord(mesh, s->rank, coord) == DTR_OK;
    int color = NCCL_SPLIT_NOCOLOR, key = 0, n = 0;
    if (inside) {
        int64_t c = 0, k = 0;
        for (int d = 0; d < nd; d++) {
            if (d != i) c = c * dtr_mesh_size(mesh, d) + coord[d];
            k = k * dtr_mesh_size(mesh, d) + coord[d];
        }
        color = i < 0 ? 0 : (int)c;
        key = i < 0 ? (int)k : (int)coord[i];
        n = i < 0 ? (int)dtr_mesh_nranks(mesh) : (int)dtr_mesh_size(mesh, i);
    }
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommSplit(s->root, color, key, &comm, NULL);
    if (r != ncclSuccess) return dtr__nccl_fail(NULL, r, "ncclCommSplit");
    if (!inside) return DTR_OK;
    dtr__nccl_split_t *sp = calloc(1, sizeof *sp);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (sp == NULL || ranks == NULL) {
        free(sp);
        free(ranks);
        ncclCommDestroy(comm);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_nccl_split_mesh", "a group");
    }
    /* the group's ranks in its order: along dim i at this coordinate, or the mesh row-major */
    int64_t at[DTR_MAX_MESH_DIMS];
    memcpy(at, coord, sizeof at);
    for (int k = 0; k < n; k++) {
        if (i >= 0) {
            at[i] = k;
        } else {
            for (int d = nd - 1, rest = k; d >= 0; d--) {
                at[d] = rest % dtr_mesh_size(mesh, d);
                rest /= (int)dtr_mesh_size(mesh, d);
            }
        }
        dtr_mesh_rank_at(mesh, at, &ranks[k]);
    }
    sp->comm = comm;
    sp->n = n;
    sp->ranks = ranks;
    sp->next = s->splits;
    s->splits = sp;
    return DTR_OK;
}

/* Whether mesh m (recorded by dtr_nccl_split_mesh) was split before. */
static bool dtr__nccl_split_before(const dtr__nccl_t *s, const dtr__nccl_split_mesh_t *m) {
    for (const dtr__nccl_split_mesh_t *o = s->split_meshes; o != NULL; o = o->next)
        if (o->nd == m->nd && o->n == m->n && memcmp(o->sizes, m->sizes, sizeof m->sizes) == 0 &&
            memcmp(o->ranks, m->ranks, (size_t)m->n * sizeof m->ranks[0]) == 0)
            return true;
    return false;
}

dtr_status_t dtr_nccl_split_mesh(dtr_context_t *ctx, const dtr_mesh_t *mesh) {
    DTR_CHECK_PTR(ctx, __func__);
    DTR_CHECK_PTR(mesh, __func__);
    dtr__nccl_t *s = dtr_context_backend_state(ctx, &dtr__nccl_ops);
    if (s == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "ctx: not an NCCL context");
    if (s->world != MPI_COMM_NULL) return DTR_OK; /* over MPI: groups bootstrap themselves */
    DTR_CHECK(dtr__nccl_alive(s));
    int64_t n = dtr_mesh_nranks(mesh), coord[DTR_MAX_MESH_DIMS] = {0};
    dtr__nccl_split_mesh_t *m = calloc(1, sizeof *m + (size_t)n * sizeof m->ranks[0]);
    if (m == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "the mesh's record");
    m->nd = dtr_mesh_ndims(mesh);
    m->n = n;
    for (int d = 0; d < m->nd; d++) m->sizes[d] = dtr_mesh_size(mesh, d);
    for (int64_t p = 0; p < n; p++) {
        int r = -1;
        dtr_mesh_rank_at(mesh, coord, &r);
        m->ranks[p] = r;
        if (r >= s->size) {
            free(m);
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "mesh: rank %d, but the communicator has %d ranks", r, s->size);
        }
        for (int d = m->nd - 1; d >= 0; d--) {
            if (++coord[d] < m->sizes[d]) break;
            coord[d] = 0;
        }
    }
    /* The same mesh again (every rank sees the whole mesh, so all decide alike) keeps its
     * communicators: a caller that splits before each use does not pile them up. */
    dtr_status_t st = DTR_OK;
    if (!dtr__nccl_split_before(s, m))
        for (int i = -1; i < m->nd && st == DTR_OK; i++) st = dtr__nccl_split_one(s, mesh, i);
    if (st != DTR_OK || dtr__nccl_split_before(s, m)) {
        free(m);
        return st;
    }
    m->next = s->split_meshes;
    s->split_meshes = m;
    return DTR_OK;
}

dtr_status_t dtr_nccl_set_stream(dtr_context_t *ctx, void *stream) {
    DTR_CHECK_PTR(ctx, __func__);
    dtr__nccl_t *s = dtr_context_backend_state(ctx, &dtr__nccl_ops);
    if (s == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "ctx: not an NCCL context");
    DTR_CHECK(dtr_memory_cuda_set_stream(s->mem, stream));
    s->stream = (cudaStream_t)dtr_memory_cuda_stream(s->mem);
    return DTR_OK;
}

dtr_status_t dtr_nccl_wait_stream(dtr_context_t *ctx, void *stream) {
    DTR_CHECK_PTR(ctx, __func__);
    DTR_CHECK_PTR(stream, __func__);
    dtr__nccl_t *s = dtr_context_backend_state(ctx, &dtr__nccl_ops);
    if (s == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "ctx: not an NCCL context");
    return dtr_memory_cuda_wait_stream(s->mem, stream);
}

dtr_status_t dtr_nccl_unique_id(void *id, size_t cap, size_t *len) {
    DTR_CHECK_PTR(id, __func__);
    DTR_CHECK_PTR(len, __func__);
    if (cap < sizeof(ncclUniqueId))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "cap: %zu bytes, an ncclUniqueId is %zu", cap, sizeof(ncclUniqueId));
    ncclUniqueId made;
    ncclResult_t r = ncclGetUniqueId(&made);
    if (r != ncclSuccess) return dtr__nccl_fail(NULL, r, "ncclGetUniqueId");
    memcpy(id, &made, sizeof made);
    *len = sizeof made;
    return DTR_OK;
}

/* ---- the row of "nccl" in the table of backends by name (registry.c) ------------------ */

/* A context over MPI_COMM_WORLD on GPU LOCAL_RANK (or Open MPI's, MPICH's local rank) mod
 * the visible GPUs, on the default stream. */
static dtr_status_t dtr__nccl_create_env(dtr_context_t **out) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_context_create_named",
                          "backend nccl: MPI is not initialised (this row bootstraps over "
                          "MPI_COMM_WORLD: start under mpirun and call MPI_Init first)");
    const char *vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                          "SLURM_LOCALID"};
    int local = 0;
    for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++) {
        const char *v = getenv(vars[k]);
        if (v != NULL && *v != '\0') {
            local = atoi(v);
            break;
        }
    }
    int gpus = dtr_cuda_device_count();
    return dtr_context_create_nccl(MPI_COMM_WORLD, gpus > 0 ? local % gpus : 0, NULL, out);
}

__attribute__((constructor)) static void dtr__nccl_register(void) {
    dtr_backend_info_t row = {
        .name = "nccl",
        .caps = dtr__nccl_ops.caps,
        .memory = "cuda",
        .launch = "mpirun or srun (MPI_COMM_WORLD), a GPU per rank (LOCAL_RANK)",
        .create_env = dtr__nccl_create_env,
    };
    (void)dtr_backend_register(&row);
}
