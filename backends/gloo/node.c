/*
 * The Gloo backend's shared-memory path (gloo_state.h): a group whose members all run on
 * this node moves its gathers, all-to-alls and reductions through one segment
 * (backends/shm/shm.h), as the MPI backend's groups do, instead of through Gloo's TCP pairs.
 * The segment holds one operation at a time while the backend lets the executor start
 * several on a group (DTR_BACKEND_CAP_CONCURRENT): a start first completes the group's
 * segment operation in flight, which every member started before this one, as the executor
 * itself does for a backend without that cap.
 */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "backends/gloo/gloo_state.h"

/* dtr__shm_create's exchange: a blocking all-gather over the group's link, under its next tag
 * (every member makes it at the same point, group creation). */
static dtr_status_t dtr__gloo_exchange(void *group, const void *mine, int64_t bytes, void *all) {
    dtr__gloo_group_t *g = group;
    int64_t *arrays = calloc((size_t)g->n * 4, sizeof *arrays);
    if (arrays == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "gloo", "%d members' counts", g->n);
    int64_t *sd = arrays, *sc = arrays + g->n, *rd = arrays + 2 * g->n, *rc = arrays + 3 * g->n;
    for (int p = 0; p < g->n; p++) {
        sc[p] = rc[p] = bytes;
        rd[p] = p * bytes;
    }
    memcpy((char *)all + g->me * bytes, mine, (size_t)bytes);
    char err[512] = "";
    dtr__gloo_xfer_t *x = NULL;
    int code = dtr__gloo_post(g->link, g->seq++, mine, sd, sc, all, rd, rc, &x, err, sizeof err);
    if (code == 0) code = dtr__gloo_finish(x, err, sizeof err);
    free(arrays);
    if (code == 0) return DTR_OK;
    return dtr__error(code == DTR__GLOO_TIMEOUT ? DTR_ERR_TIMEOUT : DTR_ERR_BACKEND, "gloo",
                      "meeting for the shared-memory segment: %s", err);
}

/* What the members compare before a segment: where they run and how they would size it. */
typedef struct {
    char node[256];
    int64_t on, chunk, ring;
} dtr__gloo_meet_t;

/* The members' settings must agree: a member with the segment off, or another geometry,
 * would read the others' rings wrong. Every member sees the same list, so all fail alike. */
static dtr_status_t dtr__gloo_node_agree(const dtr__gloo_group_t *g, const dtr__gloo_meet_t *m) {
    static const char *const names[] = {"DTR_GLOO_SHM", "DTR_GLOO_SHM_CHUNK", "DTR_GLOO_SHM_RING"};
    for (int k = 1; k < g->n; k++) {
        const int64_t a[3] = {m[0].on, m[0].chunk, m[0].ring}, b[3] = {m[k].on, m[k].chunk, m[k].ring};
        for (int v = 0; v < 3; v++)
            if (a[v] != b[v])
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, "gloo",
                                  "%s differs between the group's members: %lld on member 0, "
                                  "%lld on member %d (set it alike on every rank)",
                                  names[v], (long long)a[v], (long long)b[v], k);
    }
    return DTR_OK;
}

dtr_status_t dtr__gloo_node_create(dtr__gloo_group_t *g) {
    if (g->n < 2 || g->n > DTR__SHM_MAX_MEMBERS) return DTR_OK;
    dtr__gloo_meet_t mine, *all = malloc((size_t)g->n * sizeof mine);
    if (all == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "gloo", "%d node keys", g->n);
    memset(&mine, 0, sizeof mine);
    dtr__shm_node_key(mine.node);
    mine.on = g->b->shm;
    mine.chunk = g->b->shm_chunk;
    mine.ring = g->b->shm_ring;
    dtr_status_t st = dtr__gloo_exchange(g, &mine, sizeof mine, all);
    if (st == DTR_OK) st = dtr__gloo_node_agree(g, all);
    bool one = st == DTR_OK && mine.on;
    for (int k = 1; k < g->n && one; k++) one = memcmp(all[0].node, all[k].node, sizeof mine.node) == 0;
    free(all);
    if (!one) return st; /* every member saw the same list, so none maps a segment */
    st = dtr__shm_create(dtr__gloo_exchange, g, g->n, g->me, g->b->shm_chunk, g->b->shm_ring,
                         &g->shm);
    g->b->paths.shared_memory += g->shm != NULL;
    return st;
}

/* Before a segment operation starts: the last one complete. */
static void dtr__gloo_node_ready(dtr__gloo_group_t *g) {
    if (g->shm_done == g->shm_started) return;
    dtr__shm_wait(g->shm);
    g->shm_done = g->shm_started;
}

/* After its start: the handle names it. */
static bool dtr__gloo_node_started(dtr__gloo_group_t *g, dtr_status_t st, dtr_backend_req_t *req,
                                   dtr_status_t *out) {
    *out = st;
    if (st != DTR_OK) return true;
    dtr__gloo_set_handle(req, NULL, ++g->shm_started);
    g->b->paths.shm_ops++;
    return true;
}

bool dtr__gloo_node_all_gather(dtr__gloo_group_t *g, const void *send, int64_t bytes, void *recv,
                               dtr_backend_req_t *req, dtr_status_t *st) {
    if (g->shm == NULL || bytes <= 0) return false;
    dtr__gloo_node_ready(g);
    return dtr__gloo_node_started(
        g, dtr__shm_gather_start(g->shm, send, bytes, recv, bytes, bytes), req, st);
}

bool dtr__gloo_node_all_gatherv(dtr__gloo_group_t *g, const void *send, int64_t bytes,
                                void *recv, const int64_t *counts, const int64_t *displs,
                                dtr_backend_req_t *req, dtr_status_t *st) {
    if (g->shm == NULL) return false;
    /* as a gather over span lists: one span sent, each member's piece a span received */
    dtr_span_t in = {(char *)send, 1, bytes, bytes}, out[DTR__SHM_MAX_MEMBERS];
    int nout = 0;
    for (int k = 0; k < g->n; k++)
        if (counts[k] > 0)
            out[nout++] = (dtr_span_t){(char *)recv + displs[k], 1, counts[k], counts[k]};
    dtr_spans_op_t op = {.kind = DTR_SPANS_ALL_GATHER, .send = &in, .nsend = bytes > 0,
                         .recv = out, .nrecv = nout, .counts = counts, .dtype = DTR_U8};
    dtr__gloo_node_ready(g);
    return dtr__gloo_node_started(g, dtr__shm_spans_start(g->shm, &op, 1), req, st);
}

bool dtr__gloo_node_all_to_all(dtr__gloo_group_t *g, const void *send, int64_t bytes, void *recv,
                               dtr_backend_req_t *req, dtr_status_t *st) {
    if (g->shm == NULL || bytes <= 0) return false;
    dtr__gloo_node_ready(g);
    int64_t at = g->me * bytes;
    *st = dtr__gloo_own(g->me, send, at, bytes, recv, at, bytes); /* (the segment: the others') */
    return dtr__gloo_node_started(
        g, dtr__shm_start(g->shm, send, bytes, bytes, recv, bytes, bytes, bytes), req, st);
}

bool dtr__gloo_node_all_to_allv(dtr__gloo_group_t *g, const void *send, const int64_t *sc,
                                const int64_t *sd, void *recv, const int64_t *rc,
                                const int64_t *rd, dtr_backend_req_t *req, dtr_status_t *st) {
    if (g->shm == NULL) return false;
    int me = g->me;
    dtr__gloo_node_ready(g);
    *st = dtr__gloo_own(me, send, sd[me], sc[me], recv, rd[me], rc[me]);
    if (*st != DTR_OK) return true;
    return dtr__gloo_node_started(g, dtr__shm_start_v(g->shm, send, sc, sd, recv, rc, rd), req,
                                  st);
}

bool dtr__gloo_node_reduce(dtr__gloo_group_t *g, bool all, const void *send, void *recv,
                           const int64_t *counts, int64_t count, dtr_dtype_t dtype,
                           dtr_reduce_op_t op, dtr_backend_req_t *req, dtr_status_t *st) {
    if (g->shm == NULL) return false;
    int64_t esize = dtr_dtype_info(dtype)->size;
    dtr__gloo_node_ready(g);
    if (all && count * esize <= DTR__SHM_TINY_MAX)
        return dtr__gloo_node_started(
            g, dtr__shm_tiny_all_reduce_start(g->shm, send, recv, count, dtype, op, esize), req,
            st);
    if (all)
        return dtr__gloo_node_started(
            g, dtr__shm_all_reduce_start(g->shm, send, recv, count, dtype, op, esize, NULL), req,
            st);
    int64_t each[DTR__SHM_MAX_MEMBERS];
    for (int k = 0; k < g->n; k++) each[k] = counts != NULL ? counts[k] : count;
    return dtr__gloo_node_started(
        g, dtr__shm_reduce_scatter_start(g->shm, send, recv, each, dtype, op, esize, NULL), req,
        st);
}

dtr_status_t dtr__gloo_node_test(dtr__gloo_group_t *g, uint64_t seq, bool *done) {
    *done = seq <= g->shm_done || dtr__shm_progress(g->shm, NULL);
    if (*done && seq > g->shm_done) g->shm_done = seq;
    return DTR_OK;
}

void dtr__gloo_node_wait(dtr__gloo_group_t *g, uint64_t seq) {
    if (seq <= g->shm_done) return;
    dtr__shm_wait(g->shm);
    g->shm_done = seq;
}

/* ---- the forms only the segment takes --------------------------------------------------- */

bool dtr__gloo_strided_in_place(void *group) { return ((dtr__gloo_group_t *)group)->shm != NULL; }

dtr_status_t dtr__gloo_all_gather_strided(void *group, const void *send, int64_t rows,
                                          int64_t block, int64_t row, void *recv,
                                          dtr_backend_req_t *req) {
    dtr__gloo_group_t *g = group;
    if (g->shm == NULL)
        return dtr__error(DTR_ERR_UNSUPPORTED, "gloo", "strided forms need the shared-memory path");
    dtr_status_t st;
    dtr__gloo_node_ready(g);
    dtr__gloo_node_started(g, dtr__shm_gather_start(g->shm, send, rows * block, recv, block, row),
                           req, &st);
    return st;
}

dtr_status_t dtr__gloo_all_to_all_strided(void *group, const void *send, int64_t srows,
                                          int64_t sblock, int64_t srow, void *recv,
                                          int64_t rrows, int64_t rblock, int64_t rrow,
                                          dtr_backend_req_t *req) {
    dtr__gloo_group_t *g = group;
    if (g->shm == NULL)
        return dtr__error(DTR_ERR_UNSUPPORTED, "gloo", "strided forms need the shared-memory path");
    if (srows * sblock != rrows * rblock)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "gloo",
                          "strided all-to-all: pieces of %lld bytes sent, %lld received",
                          (long long)(srows * sblock), (long long)(rrows * rblock));
    dtr_status_t st;
    dtr__gloo_node_ready(g);
    dtr__gloo_node_started(
        g, dtr__shm_start(g->shm, send, sblock, srow, recv, rblock, rrow, srows * sblock), req,
        &st);
    return st;
}

/* Span lists go through the segment only (elsewhere the executor packs). */
bool dtr__gloo_spans_ok(void *group, dtr_spans_kind_t kind, dtr_dtype_t dtype,
                        dtr_reduce_op_t op, int64_t bytes) {
    dtr__gloo_group_t *g = group;
    if (g->shm == NULL) return false;
    if (kind == DTR_SPANS_ALL_GATHER) return true;
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    return (kind == DTR_SPANS_REDUCE_SCATTER || bytes > DTR__SHM_TINY_MAX) &&
           op != DTR_REDUCE_AVG && op >= 0 && op < DTR_REDUCE_OP_LAST && info != NULL &&
           !info->storage_only && !info->is_complex;
}

dtr_status_t dtr__gloo_spans_start(void *group, const dtr_spans_op_t *op, dtr_backend_req_t *req) {
    dtr__gloo_group_t *g = group;
    if (g->shm == NULL)
        return dtr__error(DTR_ERR_UNSUPPORTED, "gloo", "span lists need the shared-memory path");
    dtr_status_t st;
    dtr__gloo_node_ready(g);
    dtr__gloo_node_started(g, dtr__shm_spans_start(g->shm, op, dtr_dtype_info(op->dtype)->size),
                           req, &st);
    return st;
}
