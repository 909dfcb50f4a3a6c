/*
 * The argument agreement: before a call moves data, the ranks of the mesh (or of a group)
 * run one small all-reduce of [h >> 1, INT64_MAX - (h >> 1), first bad rank + 1]
 * under MAX, where h hashes what they must share. Equal hashes everywhere make the first two
 * maxima complements; a rank whose own arguments were bad shows in the third. So a wrong
 * buffer size or a different plan on one rank becomes an error on every rank
 * (DTR_ERR_MISMATCH, DTR_ERR_REMOTE) instead of a hang. DTR_AGREE=0 leaves it out.
 */
#include <stdio.h>

#include "runtime/context.h"

/* The buffers an agreement's all-reduce runs on: the host arrays, or on a memory space its
 * own 6 int64 with `send` copied in (the result comes back through dtr__agree_result). */
static dtr_status_t dtr__agree_buffers(dtr_context_t *ctx, const int64_t *send, int64_t **dsend,
                                       int64_t **drecv) {
    if (ctx->mem == NULL) return DTR_OK;
    DTR_CHECK(dtr__reserve(ctx, (void **)&ctx->agree_dev, &ctx->agree_cap, 6 * sizeof(int64_t),
                           "agreement"));
    DTR_CHECK(dtr__m_host(ctx, ctx->agree_dev, send, 3 * sizeof(int64_t), false));
    *dsend = ctx->agree_dev;
    *drecv = ctx->agree_dev + 3;
    return DTR_OK;
}

static dtr_status_t dtr__agree_result(dtr_context_t *ctx, int64_t *recv) {
    if (ctx->mem == NULL) return DTR_OK;
    return dtr__m_host(ctx, recv, ctx->agree_dev + 3, 3 * sizeof(int64_t), true);
}

/* Starts an agreement of send into recv (host arrays) over group: the backend's own form
 * where it has one (the MPI backend: a cache line per member through its segment), else its
 * all-reduce. The form depends on the backend only, so every rank runs the same one. */
dtr_status_t dtr__agree_start(dtr_context_t *ctx, void *group, int64_t *send, int64_t *recv,
                              dtr_backend_req_t *breq) {
    if (ctx->ops->agree != NULL) return ctx->ops->agree(group, send, recv, breq);
    int64_t *dsend = send, *drecv = recv;
    DTR_CHECK(dtr__agree_buffers(ctx, send, &dsend, &drecv));
    return ctx->ops->all_reduce(group, dsend, drecv, 3, DTR_I64, DTR_REDUCE_MAX, breq);
}

/* After the agreement completed: its result in recv. */
dtr_status_t dtr__agree_done(dtr_context_t *ctx, int64_t *recv) {
    if (ctx->ops->agree != NULL) return DTR_OK;
    return dtr__agree_result(ctx, recv);
}

void dtr__agree_fill(int64_t *send, uint64_t h, int rank, dtr_status_t local) {
    send[0] = (int64_t)(h >> 1);
    send[1] = INT64_MAX - (int64_t)(h >> 1);
    send[2] = local != DTR_OK ? rank + 1 : 0;
}

dtr_status_t dtr__agree_verdict(const int64_t *recv, const char *func, dtr_status_t local,
                                const char *msg, const char *mismatch) {
    if (local != DTR_OK) return dtr__error(local, func, "%s", msg);
    if (recv[2] > 0)
        return dtr__error(DTR_ERR_REMOTE, func,
                          "rank %lld rejected its arguments (see its error); this rank's were "
                          "good",
                          (long long)(recv[2] - 1));
    if (recv[0] != INT64_MAX - recv[1]) /* the max of h and of its complement: equal h everywhere */
        return dtr__error(DTR_ERR_MISMATCH, func, "%s", mismatch);
    return DTR_OK;
}

/* The agreement over a group: every member's hash equal and every member's own argument
 * check good, in one small all-reduce. */
dtr_status_t dtr__agree_on(dtr_context_t *ctx, void *group, const char *func, uint64_t h,
                           dtr_status_t local, const char *msg) {
    if (group == NULL || !ctx->agree) {
        if (local != DTR_OK) return dtr__error(local, func, "%s", msg);
        return DTR_OK;
    }
    int64_t *send = ctx->gsend, *recv = ctx->grecv;
    dtr__agree_fill(send, h, ctx->rank, local);
    dtr_status_t st =
        dtr__wait_op(ctx, group, dtr__agree_start(ctx, group, send, recv, &ctx->gbreq));
    if (st == DTR_OK) st = dtr__agree_done(ctx, recv);
    if (st != DTR_OK)
        return dtr__error(st, func, "argument agreement over the group: %s", dtr_last_error());
    return dtr__agree_verdict(recv, func, local, msg,
                              "the group's members called with different arguments (counts, "
                              "dtypes, ops, meshes or settings)");
}

