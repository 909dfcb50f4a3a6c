/*
 * The staging backend: runs a host-memory backend (Open MPI) on buffers of another memory
 * space (CUDA device memory) by copying each operation's send pieces to host memory before
 * it starts and its received pieces back when it completes. This is the shared-GPU mode:
 * NCCL refuses two ranks on one GPU, but MPI ranks sharing one can still run every device
 * kernel of the executor, with the data crossing ranks through host memory.
 *
 * The context wraps its backend in this one when dtr_context_set_memory gives it a space the
 * backend cannot read. A context has one operation in flight at a time, so the state holds
 * the one pending copy-back. The strided forms are left out: the executor packs instead.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/context.h"

typedef struct {
    const dtr_backend_ops_t *in_ops;
    void *in_state;
    const dtr_memory_ops_t *mem;
    void *mem_state;
    void *hsend, *hrecv; /* host staging, grown on demand */
    int64_t send_cap, recv_cap;
    int64_t *arr; /* the pending operation's receive counts and displacements */
    int64_t arr_cap;
    /* the operation in flight: its received bytes go to dst (whole, or npieces pieces) */
    bool pending;
    void *dst;
    int64_t bytes;
    int64_t npieces;
} dtr__staged_t;

typedef struct {
    dtr__staged_t *s;
    void *inner;
    int n;     /* members */
    int index; /* this rank's place */
} dtr__staged_group_t;

static dtr_status_t dtr__host_grow(void **p, int64_t *cap, int64_t need) {
    if (need <= *cap) return DTR_OK;
    void *q = realloc(*p, (size_t)(need > 0 ? need : 1));
    if (q == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "staged backend",
                          "host staging: cannot grow to %lld bytes", (long long)need);
    *p = q;
    *cap = need;
    return DTR_OK;
}

void *dtr__staged_inner(void *state, const dtr_backend_ops_t **ops) {
    dtr__staged_t *s = state;
    *ops = s->in_ops;
    return s->in_state;
}

static int dtr__staged_rank(void *state) {
    dtr__staged_t *s = state;
    return s->in_ops->rank(s->in_state);
}

static dtr_status_t dtr__staged_group_create(void *state, const int *ranks, int n, int tag,
                                             void **group) {
    dtr__staged_t *s = state;
    dtr__staged_group_t *g = calloc(1, sizeof *g);
    if (g == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "staged backend", "group");
    int me = s->in_ops->rank(s->in_state);
    g->s = s;
    g->n = n;
    g->index = -1;
    for (int k = 0; k < n; k++)
        if (ranks[k] == me) g->index = k;
    dtr_status_t st = s->in_ops->group_create(s->in_state, ranks, n, tag, &g->inner);
    if (st != DTR_OK) {
        free(g);
        return st;
    }
    *group = g;
    return DTR_OK;
}

static void dtr__staged_group_destroy(void *state, void *group) {
    dtr__staged_t *s = state;
    dtr__staged_group_t *g = group;
    if (g == NULL) return;
    s->in_ops->group_destroy(s->in_state, g->inner);
    free(g);
}

/* The send side: `bytes` from the space to host staging. */
static dtr_status_t dtr__stage_send(dtr__staged_t *s, const void *send, int64_t bytes) {
    DTR_CHECK(dtr__host_grow(&s->hsend, &s->send_cap, bytes));
    if (bytes > 0) DTR_CHECK(s->mem->copy(s->mem_state, s->hsend, send, bytes, DTR_COPY_TO_HOST));
    return DTR_OK;
}

/* The receive side: host staging of `bytes`, copied back to dst when the operation
 * completes (whole, or the pieces in s->arr when npieces > 0). */
static dtr_status_t dtr__stage_recv(dtr__staged_t *s, void *dst, int64_t bytes,
                                    int64_t npieces) {
    DTR_CHECK(dtr__host_grow(&s->hrecv, &s->recv_cap, bytes));
    s->pending = true;
    s->dst = dst;
    s->bytes = bytes;
    s->npieces = npieces;
    return DTR_OK;
}

/* Room for n counts and n displacements of the pending operation. */
static dtr_status_t dtr__staged_arrays(dtr__staged_t *s, int64_t n) {
    if (n <= s->arr_cap) return DTR_OK;
    int64_t *p = realloc(s->arr, (size_t)(2 * n) * sizeof *p);
    if (p == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "staged backend", "count arrays");
    s->arr = p;
    s->arr_cap = n;
    return DTR_OK;
}

/* The extent of pieces (the end of the last byte any of them covers). */
static int64_t dtr__extent(const int64_t *counts, const int64_t *displs, int n) {
    int64_t end = 0;
    for (int k = 0; k < n; k++)
        if (counts[k] > 0 && displs[k] + counts[k] > end) end = displs[k] + counts[k];
    return end;
}

/* Copies pieces between a buffer of the space and host staging laid out alike. */
static dtr_status_t dtr__pieces(dtr__staged_t *s, void *dev, void *host, const int64_t *counts,
                                const int64_t *displs, int64_t n, dtr_copy_kind_t kind) {
    for (int64_t k = 0; k < n; k++) {
        if (counts[k] <= 0) continue;
        char *d = (char *)dev + displs[k], *h = (char *)host + displs[k];
        DTR_CHECK(s->mem->copy(s->mem_state, kind == DTR_COPY_TO_HOST ? (void *)h : d,
                               kind == DTR_COPY_TO_HOST ? (void *)d : h, counts[k], kind));
    }
    return DTR_OK;
}

static dtr_status_t dtr__staged_all_gather(void *group, const void *send, int64_t bytes,
                                           void *recv, dtr_backend_req_t *req) {
    dtr__staged_group_t *g = group;
    dtr__staged_t *s = g->s;
    DTR_CHECK(dtr__stage_send(s, send, bytes));
    DTR_CHECK(dtr__stage_recv(s, recv, bytes * g->n, 0));
    return s->in_ops->all_gather(g->inner, s->hsend, bytes, s->hrecv, req);
}

static dtr_status_t dtr__staged_all_gatherv(void *group, const void *send, int64_t bytes,
                                            void *recv, const int64_t *counts,
                                            const int64_t *displs, dtr_backend_req_t *req) {
    dtr__staged_group_t *g = group;
    dtr__staged_t *s = g->s;
    DTR_CHECK(dtr__staged_arrays(s, g->n));
    memcpy(s->arr, counts, (size_t)g->n * sizeof *counts);
    memcpy(s->arr + s->arr_cap, displs, (size_t)g->n * sizeof *displs);
    DTR_CHECK(dtr__stage_send(s, send, bytes));
    DTR_CHECK(dtr__stage_recv(s, recv, dtr__extent(counts, displs, g->n), g->n));
    return s->in_ops->all_gatherv(g->inner, s->hsend, bytes, s->hrecv, counts, displs, req);
}

static dtr_status_t dtr__staged_reduce_scatter(void *group, const void *send, void *recv,
                                               int64_t count, dtr_dtype_t dtype,
                                               dtr_reduce_op_t op, dtr_backend_req_t *req) {
    dtr__staged_group_t *g = group;
    dtr__staged_t *s = g->s;
    int64_t item = dtr_dtype_info(dtype)->size;
    DTR_CHECK(dtr__stage_send(s, send, count * item * g->n));
    DTR_CHECK(dtr__stage_recv(s, recv, count * item, 0));
    return s->in_ops->reduce_scatter(g->inner, s->hsend, s->hrecv, count, dtype, op, req);
}

static dtr_status_t dtr__staged_reduce_scatterv(void *group, const void *send, void *recv,
                                                const int64_t *counts, dtr_dtype_t dtype,
                                                dtr_reduce_op_t op, dtr_backend_req_t *req) {
    dtr__staged_group_t *g = group;
    dtr__staged_t *s = g->s;
    int64_t item = dtr_dtype_info(dtype)->size, total = 0;
    for (int k = 0; k < g->n; k++) total += counts[k];
    DTR_CHECK(dtr__stage_send(s, send, total * item));
    DTR_CHECK(dtr__stage_recv(s, recv, counts[g->index] * item, 0));
    return s->in_ops->reduce_scatterv(g->inner, s->hsend, s->hrecv, counts, dtype, op, req);
}

static dtr_status_t dtr__staged_all_reduce(void *group, const void *send, void *recv,
                                           int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                           dtr_backend_req_t *req) {
    dtr__staged_group_t *g = group;
    dtr__staged_t *s = g->s;
    int64_t item = dtr_dtype_info(dtype)->size;
    DTR_CHECK(dtr__stage_send(s, send, count * item));
    DTR_CHECK(dtr__stage_recv(s, recv, count * item, 0));
    return s->in_ops->all_reduce(g->inner, s->hsend, s->hrecv, count, dtype, op, req);
}

static dtr_status_t dtr__staged_premul_sum(void *group, const void *send, void *recv,
                                           int64_t count, dtr_dtype_t dtype, double scale,
                                           bool scatter, dtr_backend_req_t *req) {
    dtr__staged_group_t *g = group;
    dtr__staged_t *s = g->s;
    int64_t item = dtr_dtype_info(dtype)->size;
    DTR_CHECK(dtr__stage_send(s, send, count * item * (scatter ? g->n : 1)));
    DTR_CHECK(dtr__stage_recv(s, recv, count * item, 0));
    return s->in_ops->premul_sum(g->inner, s->hsend, s->hrecv, count, dtype, scale, scatter,
                                 req);
}

static dtr_status_t dtr__staged_all_to_all(void *group, const void *send, int64_t bytes,
                                           void *recv, dtr_backend_req_t *req) {
    dtr__staged_group_t *g = group;
    dtr__staged_t *s = g->s;
    DTR_CHECK(dtr__stage_send(s, send, bytes * g->n));
    DTR_CHECK(dtr__stage_recv(s, recv, bytes * g->n, 0));
    return s->in_ops->all_to_all(g->inner, s->hsend, bytes, s->hrecv, req);
}

static dtr_status_t dtr__staged_all_to_allv(void *group, const void *send,
                                            const int64_t *send_counts,
                                            const int64_t *send_displs, void *recv,
                                            const int64_t *recv_counts,
                                            const int64_t *recv_displs,
                                            dtr_backend_req_t *req) {
    dtr__staged_group_t *g = group;
    dtr__staged_t *s = g->s;
    DTR_CHECK(dtr__host_grow(&s->hsend, &s->send_cap, dtr__extent(send_counts, send_displs, g->n)));
    DTR_CHECK(dtr__pieces(s, (void *)send, s->hsend, send_counts, send_displs, g->n,
                          DTR_COPY_TO_HOST));
    DTR_CHECK(dtr__staged_arrays(s, g->n));
    memcpy(s->arr, recv_counts, (size_t)g->n * sizeof *recv_counts);
    memcpy(s->arr + s->arr_cap, recv_displs, (size_t)g->n * sizeof *recv_displs);
    DTR_CHECK(dtr__stage_recv(s, recv, dtr__extent(recv_counts, recv_displs, g->n), g->n));
    return s->in_ops->all_to_allv(g->inner, s->hsend, send_counts, send_displs, s->hrecv,
                                  recv_counts, recv_displs, req);
}

/* The pending operation completed: its received bytes into the space. */
static dtr_status_t dtr__staged_deliver(dtr__staged_t *s) {
    if (!s->pending) return DTR_OK;
    s->pending = false;
    if (s->npieces > 0)
        return dtr__pieces(s, s->dst, s->hrecv, s->arr, s->arr + s->arr_cap, s->npieces,
                           DTR_COPY_FROM_HOST);
    if (s->bytes == 0) return DTR_OK;
    return s->mem->copy(s->mem_state, s->dst, s->hrecv, s->bytes, DTR_COPY_FROM_HOST);
}

static dtr_status_t dtr__staged_test(void *group, dtr_backend_req_t *req, bool *done) {
    dtr__staged_group_t *g = group;
    dtr__staged_t *s = g->s;
    DTR_CHECK(s->in_ops->test(g->inner, req, done));
    return *done ? dtr__staged_deliver(s) : DTR_OK;
}

static dtr_status_t dtr__staged_wait(void *group, dtr_backend_req_t *req) {
    dtr__staged_group_t *g = group;
    dtr__staged_t *s = g->s;
    DTR_CHECK(s->in_ops->wait(g->inner, req));
    return dtr__staged_deliver(s);
}

static void dtr__staged_destroy(void *state) {
    dtr__staged_t *s = state;
    if (s->in_ops->destroy != NULL) s->in_ops->destroy(s->in_state);
    free(s->hsend);
    free(s->hrecv);
    free(s->arr);
    free(s);
}

dtr_status_t dtr__staged_create(const dtr_backend_ops_t *inner, void *inner_state,
                                const dtr_memory_ops_t *mem, void *mem_state,
                                dtr_backend_ops_t *ops, void **state) {
    dtr__staged_t *s = calloc(1, sizeof *s);
    if (s == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_context_set_memory", "staging");
    s->in_ops = inner;
    s->in_state = inner_state;
    s->mem = mem;
    s->mem_state = mem_state;
    *ops = (dtr_backend_ops_t){
        .name = inner->name,
        .caps = inner->caps,
        .rank = dtr__staged_rank,
        .group_create = dtr__staged_group_create,
        .group_destroy = dtr__staged_group_destroy,
        .all_gather = dtr__staged_all_gather,
        .all_gatherv = inner->all_gatherv != NULL ? dtr__staged_all_gatherv : NULL,
        .reduce_scatter = dtr__staged_reduce_scatter,
        .reduce_scatterv = inner->reduce_scatterv != NULL ? dtr__staged_reduce_scatterv : NULL,
        .all_reduce = dtr__staged_all_reduce,
        .all_to_all = inner->all_to_all != NULL ? dtr__staged_all_to_all : NULL,
        .all_to_allv = dtr__staged_all_to_allv,
        .test = dtr__staged_test,
        .wait = dtr__staged_wait,
        .destroy = dtr__staged_destroy,
        .premul_sum = inner->premul_sum != NULL ? dtr__staged_premul_sum : NULL,
    };
    *state = s;
    return DTR_OK;
}
