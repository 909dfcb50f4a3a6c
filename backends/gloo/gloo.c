/*
 * The Gloo backend (dtr_gloo.h): the backend table over link.h's posted transfers. Every
 * operation is one transfer between the group's members, posted at its start; a reduction
 * reduces what arrived when it completes, and an all-reduce posts its all-gather then. A
 * group whose members share a node takes what fits through its shared-memory segment
 * instead (node.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "backends/gloo/dtr_gloo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/common.h"
#include "numeric/numeric.h"
#include "backends/gloo/gloo_state.h"
#include "backends/gloo/link.h"

#define DTR_GLOO_CAPS \
    (DTR_BACKEND_CAP_CONCURRENT | DTR_BACKEND_CAP_SPANS_CAST | DTR_BACKEND_CAP_SPANS_SCALE)

typedef enum { DTR__GLOO_MOVE, DTR__GLOO_REDUCE, DTR__GLOO_ALL_REDUCE } dtr__gloo_kind_t;

/* An operation in flight (dtr_backend_req_t holds a pointer to it). */
typedef struct {
    dtr__gloo_kind_t kind;
    dtr__gloo_xfer_t *x;
    /* reductions: this member's piece of `count` elements from every member, in scratch
     * (member k's at k * count; its own read from `own`), reduced into `out` */
    char *scratch;
    const char *own;
    const void **in; /* the pieces' addresses, in member order */
    char *out;
    int64_t count, esize;
    dtr_dtype_t dtype;
    dtr_reduce_op_t op;
    /* an all-reduce's second half: every member's reduced piece gathered into recv */
    char *recv;
    int64_t *displ, *counts; /* bytes, one per member */
    uint32_t tag2;
} dtr__gloo_req_t;

static dtr_status_t dtr__gloo_fail(int rc, const char *what, const char *err) {
    return dtr__error(rc == DTR__GLOO_TIMEOUT ? DTR_ERR_TIMEOUT : DTR_ERR_BACKEND, "gloo",
                      "%s: %s", what, err);
}

/* ---- state and groups ------------------------------------------------------------- */

static void dtr__gloo_destroy(void *state) {
    dtr__gloo_t *b = state;
    if (b == NULL) return;
    dtr__gloo_link_free(b->world);
    dtr__gloo_device_free(b->dev);
    dtr__gloo_store_free(b->store);
    while (b->keys != NULL) {
        dtr__gloo_key_t *k = b->keys;
        b->keys = k->next;
        free(k);
    }
    free(b);
}

static int dtr__gloo_rank(void *state) { return ((dtr__gloo_t *)state)->rank; }

static void dtr__gloo_group_destroy(void *state, void *group) {
    (void)state;
    dtr__gloo_group_t *g = group;
    if (g == NULL) return;
    dtr__shm_destroy(g->shm);
    dtr__gloo_link_free(g->link);
    free(g);
}

/* How many groups of this (ranks, tag) this rank has created before (then counts this one). */
static dtr_status_t dtr__gloo_count(dtr__gloo_t *b, uint64_t hash, int *count) {
    for (dtr__gloo_key_t *k = b->keys; k != NULL; k = k->next)
        if (k->hash == hash) {
            *count = k->count++;
            return DTR_OK;
        }
    dtr__gloo_key_t *k = calloc(1, sizeof *k);
    if (k == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "gloo", "group keys");
    k->hash = hash;
    k->count = 1;
    k->next = b->keys;
    b->keys = k;
    *count = 0;
    return DTR_OK;
}

static dtr_status_t dtr__gloo_group_create(void *state, const int *ranks, int n, int tag,
                                           void **group) {
    dtr__gloo_t *b = state;
    int me = -1;
    uint64_t hash = dtr__fnv(dtr__fnv(14695981039346656037ull, tag), n);
    for (int k = 0; k < n; k++) {
        if (ranks[k] < 0 || ranks[k] >= b->size)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, "gloo",
                              "group member %d: rank %d outside the %d ranks", k, ranks[k],
                              b->size);
        if (ranks[k] == b->rank) me = k;
        hash = dtr__fnv(hash, ranks[k]);
    }
    if (me < 0)
        return dtr__error(DTR_ERR_NOT_IN_MESH, "gloo", "rank %d is not in the group", b->rank);
    int count = 0;
    DTR_CHECK(dtr__gloo_count(b, hash, &count));
    dtr__gloo_group_t *g = calloc(1, sizeof *g);
    if (g == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "gloo", "a group");
    g->b = b;
    g->me = me;
    g->n = n;
    if (n > 1) {
        char prefix[192], err[512] = "";
        snprintf(prefix, sizeof prefix, "%s.g.%016llx.%d", b->prefix, (unsigned long long)hash,
                 count);
        int rc = dtr__gloo_connect(b->store, b->dev, prefix, me, n, b->timeout_ms, &g->link,
                                   err, sizeof err);
        if (rc != 0) {
            free(g);
            return dtr__gloo_fail(rc, "connecting a group", err);
        }
    }
    b->paths.groups += n > 1;
    /* Here, not at the first operation: this call is the one every member surely makes. */
    dtr_status_t st = dtr__gloo_node_create(g);
    if (st != DTR_OK) {
        dtr__gloo_group_destroy(state, g);
        return st;
    }
    *group = g;
    return DTR_OK;
}

/* ---- operations ---------------------------------------------------------------------- */

static dtr_status_t dtr__gloo_new_req(dtr_backend_req_t *req, dtr__gloo_kind_t kind,
                                      dtr__gloo_req_t **out) {
    dtr__gloo_req_t *r = calloc(1, sizeof *r);
    if (r == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "gloo", "an operation");
    r->kind = kind;
    dtr__gloo_set_handle(req, r, 0);
    *out = r;
    return DTR_OK;
}

static dtr__gloo_req_t *dtr__gloo_req(dtr_backend_req_t *req) {
    return dtr__gloo_handle(req).op;
}

static void dtr__gloo_free_req(dtr_backend_req_t *req) {
    dtr__gloo_req_t *r = dtr__gloo_req(req);
    if (r == NULL) return;
    free(r->scratch);
    free(r->in);
    free(r->displ);
    free(r->counts);
    free(r);
    dtr__gloo_set_handle(req, NULL, 0);
}

/* This member's own piece is copied; the others' are posted under the group's next tag. */
static dtr_status_t dtr__gloo_move(dtr__gloo_group_t *g, uint32_t tag, const void *send,
                                   const int64_t *sd, const int64_t *sc, void *recv,
                                   const int64_t *rd, const int64_t *rc, dtr__gloo_xfer_t **x) {
    *x = NULL;
    int me = g->me;
    DTR_CHECK(dtr__gloo_own(me, send, sd[me], sc[me], recv, rd[me], rc[me]));
    if (g->link == NULL) return DTR_OK;
    char err[512] = "";
    int rc2 = dtr__gloo_post(g->link, tag, send, sd, sc, recv, rd, rc, x, err, sizeof err);
    return rc2 == 0 ? DTR_OK : dtr__gloo_fail(rc2, "posting an operation", err);
}

/* Four arrays of n int64 in one allocation (freed with the first). */
static dtr_status_t dtr__gloo_arrays(int n, int64_t **a, int64_t **b, int64_t **c,
                                     int64_t **d) {
    int64_t *all = calloc((size_t)n * 4, sizeof *all);
    if (all == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "gloo", "%d members' counts", n);
    *a = all;
    *b = all + n;
    *c = all + 2 * n;
    *d = all + 3 * n;
    return DTR_OK;
}

/* A move of the group: sd/sc/rd/rc filled by `fill` for each member p. */
typedef void (*dtr__gloo_fill_fn)(int p, int me, const void *arg, int64_t *sd, int64_t *sc,
                                  int64_t *rd, int64_t *rc);

static dtr_status_t dtr__gloo_start_move(void *group, const void *send, void *recv,
                                         dtr__gloo_fill_fn fill, const void *arg,
                                         dtr_backend_req_t *req) {
    dtr__gloo_group_t *g = group;
    int64_t *sd, *sc, *rd, *rc;
    DTR_CHECK(dtr__gloo_arrays(g->n, &sd, &sc, &rd, &rc));
    for (int p = 0; p < g->n; p++) fill(p, g->me, arg, &sd[p], &sc[p], &rd[p], &rc[p]);
    dtr__gloo_req_t *r = NULL;
    dtr_status_t st = dtr__gloo_new_req(req, DTR__GLOO_MOVE, &r);
    if (st == DTR_OK) st = dtr__gloo_move(g, g->seq++, send, sd, sc, recv, rd, rc, &r->x);
    free(sd);
    if (st != DTR_OK && r != NULL) dtr__gloo_free_req(req);
    g->b->paths.gloo_ops += st == DTR_OK && g->n > 1;
    return st;
}

typedef struct {
    int64_t bytes;
    const int64_t *counts, *displs;
} dtr__gloo_gather_t;

static void dtr__gloo_fill_gather(int p, int me, const void *arg, int64_t *sd, int64_t *sc,
                                  int64_t *rd, int64_t *rc) {
    const dtr__gloo_gather_t *a = arg;
    (void)me;
    *sd = 0;
    *sc = a->bytes;
    *rd = a->displs != NULL ? a->displs[p] : p * a->bytes;
    *rc = a->counts != NULL ? a->counts[p] : a->bytes;
}

static dtr_status_t dtr__gloo_all_gather(void *group, const void *send, int64_t bytes, void *recv,
                                         dtr_backend_req_t *req) {
    dtr_status_t st;
    if (dtr__gloo_node_all_gather(group, send, bytes, recv, req, &st)) return st;
    dtr__gloo_gather_t a = {.bytes = bytes};
    return dtr__gloo_start_move(group, send, recv, dtr__gloo_fill_gather, &a, req);
}

static dtr_status_t dtr__gloo_all_gatherv(void *group, const void *send, int64_t bytes,
                                          void *recv, const int64_t *counts,
                                          const int64_t *displs, dtr_backend_req_t *req) {
    dtr_status_t st;
    if (dtr__gloo_node_all_gatherv(group, send, bytes, recv, counts, displs, req, &st)) return st;
    dtr__gloo_gather_t a = {.bytes = bytes, .counts = counts, .displs = displs};
    return dtr__gloo_start_move(group, send, recv, dtr__gloo_fill_gather, &a, req);
}

typedef struct {
    int64_t bytes;
    const int64_t *sc, *sd, *rc, *rd;
} dtr__gloo_a2a_t;

static void dtr__gloo_fill_a2a(int p, int me, const void *arg, int64_t *sd, int64_t *sc,
                               int64_t *rd, int64_t *rc) {
    const dtr__gloo_a2a_t *a = arg;
    (void)me;
    if (a->sc == NULL) {
        *sd = *rd = p * a->bytes;
        *sc = *rc = a->bytes;
    } else {
        *sd = a->sd[p];
        *sc = a->sc[p];
        *rd = a->rd[p];
        *rc = a->rc[p];
    }
}

static dtr_status_t dtr__gloo_all_to_all(void *group, const void *send, int64_t bytes, void *recv,
                                         dtr_backend_req_t *req) {
    dtr_status_t st;
    if (dtr__gloo_node_all_to_all(group, send, bytes, recv, req, &st)) return st;
    dtr__gloo_a2a_t a = {.bytes = bytes};
    return dtr__gloo_start_move(group, send, recv, dtr__gloo_fill_a2a, &a, req);
}

static dtr_status_t dtr__gloo_all_to_allv(void *group, const void *send, const int64_t *scounts,
                                          const int64_t *sdispls, void *recv,
                                          const int64_t *rcounts, const int64_t *rdispls,
                                          dtr_backend_req_t *req) {
    dtr_status_t st;
    if (dtr__gloo_node_all_to_allv(group, send, scounts, sdispls, recv, rcounts, rdispls, req,
                                   &st))
        return st;
    dtr__gloo_a2a_t a = {.sc = scounts, .sd = sdispls, .rc = rcounts, .rd = rdispls};
    return dtr__gloo_start_move(group, send, recv, dtr__gloo_fill_a2a, &a, req);
}

/* ---- reductions ---------------------------------------------------------------------- */

/* What dtr__reduce_n reduces: complex sums as their real parts, two per element. */
static dtr_status_t dtr__gloo_reducible(dtr_dtype_t *dtype, dtr_reduce_op_t op,
                                        int64_t *per) {
    *per = 1;
    const dtr_dtype_info_t *info = dtr_dtype_info(*dtype);
    if (op < 0 || op >= DTR_REDUCE_OP_LAST || op == DTR_REDUCE_AVG)
        return dtr__error(DTR_ERR_UNSUPPORTED, "gloo",
                          "reduce op %d: no AVG here (the executor reduces it as SUM)", (int)op);
    if (info == NULL || info->storage_only || (info->is_complex && op != DTR_REDUCE_SUM))
        return dtr__error(DTR_ERR_UNSUPPORTED, "gloo", "dtype %s under %s: not reduced",
                          info != NULL ? info->name : "?", dtr_reduce_op_name(op));
    if (info->is_complex) {
        *dtype = *dtype == DTR_C64 ? DTR_F32 : DTR_F64;
        *per = 2;
    }
    return DTR_OK;
}

/* Starts a reduce-scatter of pieces of counts[k] elements (`each` where counts is NULL), the
 * result of this member's piece into out. */
static dtr_status_t dtr__gloo_start_reduce(dtr__gloo_group_t *g, const void *send, char *out,
                                           const int64_t *counts, int64_t each,
                                           dtr_dtype_t dtype, dtr_reduce_op_t op,
                                           dtr__gloo_req_t *r) {
    int64_t per;
    DTR_CHECK(dtr__gloo_reducible(&dtype, op, &per));
    int64_t es = dtr_dtype_info(dtype)->size, n = g->n, me = g->me;
    int64_t *sd, *sc, *rd, *rc;
    DTR_CHECK(dtr__gloo_arrays(g->n, &sd, &sc, &rd, &rc));
    int64_t at = 0, mine = (counts != NULL ? counts[me] : each) * per;
    for (int p = 0; p < n; p++) {
        int64_t c = (counts != NULL ? counts[p] : each) * per;
        sd[p] = at * es;
        sc[p] = c * es;
        rd[p] = p * mine * es;
        rc[p] = mine * es;
        at += c;
    }
    r->own = (const char *)send + sd[me];
    r->out = out;
    r->count = mine;
    r->esize = es;
    r->dtype = dtype;
    r->op = op;
    r->scratch = malloc((size_t)(n * mine * es) + 1);
    r->in = malloc((size_t)n * sizeof *r->in);
    dtr_status_t st = r->scratch != NULL && r->in != NULL
                          ? DTR_OK
                          : dtr__error(DTR_ERR_OUT_OF_MEMORY, "gloo", "a reduction's %lld bytes",
                                       (long long)(n * mine * es));
    sc[me] = rc[me] = 0; /* its own piece is read where it is */
    if (st == DTR_OK) st = dtr__gloo_move(g, g->seq++, send, sd, sc, r->scratch, rd, rc, &r->x);
    free(sd);
    g->b->paths.gloo_ops += st == DTR_OK && g->n > 1;
    return st;
}

/* The arrived pieces reduced in member order. */
static void dtr__gloo_reduce(const dtr__gloo_group_t *g, dtr__gloo_req_t *r) {
    if (r->count == 0) return;
    for (int k = 0; k < g->n; k++)
        r->in[k] = k == g->me ? (const void *)r->own : r->scratch + k * r->count * r->esize;
    dtr__reduce_n(r->dtype, r->op, r->in, g->n, r->out, r->count);
}

/* A reduction through the group's segment, where it has one: true with *st where it took it
 * (complex sums as their real parts, as dtr__gloo_reducible says). */
static bool dtr__gloo_node(dtr__gloo_group_t *g, bool all, const void *send, void *recv,
                           const int64_t *counts, int64_t count, dtr_dtype_t dtype,
                           dtr_reduce_op_t op, dtr_backend_req_t *req, dtr_status_t *st) {
    if (g->shm == NULL) return false;
    int64_t per, each[DTR__SHM_MAX_MEMBERS];
    *st = dtr__gloo_reducible(&dtype, op, &per);
    if (*st != DTR_OK) return true;
    for (int k = 0; counts != NULL && k < g->n; k++) each[k] = counts[k] * per;
    return dtr__gloo_node_reduce(g, all, send, recv, counts != NULL ? each : NULL, count * per,
                                 dtype, op, req, st);
}

static dtr_status_t dtr__gloo_reduce_scatterv(void *group, const void *send, void *recv,
                                              const int64_t *counts, dtr_dtype_t dtype,
                                              dtr_reduce_op_t op, dtr_backend_req_t *req) {
    dtr_status_t st;
    if (dtr__gloo_node(group, false, send, recv, counts, 0, dtype, op, req, &st)) return st;
    dtr__gloo_req_t *r = NULL;
    DTR_CHECK(dtr__gloo_new_req(req, DTR__GLOO_REDUCE, &r));
    st = dtr__gloo_start_reduce(group, send, recv, counts, 0, dtype, op, r);
    if (st != DTR_OK) dtr__gloo_free_req(req);
    return st;
}

static dtr_status_t dtr__gloo_reduce_scatter(void *group, const void *send, void *recv,
                                             int64_t count, dtr_dtype_t dtype,
                                             dtr_reduce_op_t op, dtr_backend_req_t *req) {
    dtr_status_t st;
    if (dtr__gloo_node(group, false, send, recv, NULL, count, dtype, op, req, &st)) return st;
    dtr__gloo_req_t *r = NULL;
    DTR_CHECK(dtr__gloo_new_req(req, DTR__GLOO_REDUCE, &r));
    st = dtr__gloo_start_reduce(group, send, recv, NULL, count, dtype, op, r);
    if (st != DTR_OK) dtr__gloo_free_req(req);
    return st;
}

/* An all-reduce: a reduce-scatter of near-equal pieces into recv, then (when it completes)
 * an all-gather of the reduced pieces in place. */
static dtr_status_t dtr__gloo_all_reduce(void *group, const void *send, void *recv, int64_t count,
                                         dtr_dtype_t dtype, dtr_reduce_op_t op,
                                         dtr_backend_req_t *req) {
    dtr__gloo_group_t *g = group;
    dtr_status_t st = DTR_OK;
    if (dtr__gloo_node(g, true, send, recv, NULL, count, dtype, op, req, &st)) return st;
    dtr__gloo_req_t *r = NULL;
    DTR_CHECK(dtr__gloo_new_req(req, DTR__GLOO_ALL_REDUCE, &r));
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    int64_t n = g->n, es = info != NULL ? info->size : 1;
    int64_t *pieces = calloc((size_t)n, sizeof *pieces);
    r->displ = calloc((size_t)n, sizeof *r->displ);
    r->counts = calloc((size_t)n, sizeof *r->counts);
    if (pieces == NULL || r->displ == NULL || r->counts == NULL) {
        st = dtr__error(DTR_ERR_OUT_OF_MEMORY, "gloo", "%lld members' counts", (long long)n);
    } else {
        for (int64_t p = 0, at = 0; p < n; p++) {
            pieces[p] = count / n + (p < count % n);
            r->counts[p] = pieces[p] * es;
            r->displ[p] = at * es;
            at += pieces[p];
        }
        r->recv = recv;
        r->tag2 = g->seq + 1;
        st = dtr__gloo_start_reduce(g, send, (char *)recv + r->displ[g->me], pieces, 0, dtype, op,
                                    r);
        g->seq = r->tag2 + 1;
    }
    free(pieces);
    if (st != DTR_OK) dtr__gloo_free_req(req);
    return st;
}

/* ---- completion ------------------------------------------------------------------------ */

static dtr_status_t dtr__gloo_wait(void *group, dtr_backend_req_t *req) {
    dtr__gloo_group_t *g = group;
    dtr__gloo_handle_t h = dtr__gloo_handle(req);
    if (h.op == NULL && h.shm != 0) dtr__gloo_node_wait(g, h.shm);
    dtr__gloo_req_t *r = h.op;
    if (r == NULL) return DTR_OK;
    char err[512] = "";
    int rc = dtr__gloo_finish(r->x, err, sizeof err);
    r->x = NULL;
    dtr_status_t st = rc == 0 ? DTR_OK : dtr__gloo_fail(rc, "completing an operation", err);
    if (st == DTR_OK && r->kind != DTR__GLOO_MOVE) dtr__gloo_reduce(g, r);
    if (st == DTR_OK && r->kind == DTR__GLOO_ALL_REDUCE) {
        /* every member's reduced piece, from where it sits in each recv */
        int64_t *sd, *sc, *rd, *rc2;
        st = dtr__gloo_arrays(g->n, &sd, &sc, &rd, &rc2);
        if (st == DTR_OK) {
            for (int p = 0; p < g->n; p++) {
                sd[p] = r->displ[g->me];
                sc[p] = r->counts[g->me];
                rd[p] = r->displ[p];
                rc2[p] = r->counts[p];
            }
            dtr__gloo_xfer_t *x = NULL;
            st = dtr__gloo_move(g, r->tag2, r->recv, sd, sc, r->recv, rd, rc2, &x);
            free(sd);
            if (st == DTR_OK && (rc = dtr__gloo_finish(x, err, sizeof err)) != 0)
                st = dtr__gloo_fail(rc, "completing an all-reduce's gather", err);
        }
    }
    dtr__gloo_free_req(req);
    return st;
}

/* Gloo moves the bytes on its own thread: a test completes the operation (it waits). */
static dtr_status_t dtr__gloo_test(void *group, dtr_backend_req_t *req, bool *done) {
    dtr__gloo_handle_t h = dtr__gloo_handle(req);
    if (h.op == NULL && h.shm != 0) return dtr__gloo_node_test(group, h.shm, done);
    *done = true;
    return dtr__gloo_wait(group, req);
}

static const dtr_backend_ops_t dtr__gloo_ops = {
    .name = "gloo",
    /* host memory; no AVG; span lists and strided forms through a group's segment only (and
     * the row of dtr__gloo_register below) */
    .caps = DTR_GLOO_CAPS,
    .rank = dtr__gloo_rank,
    .group_create = dtr__gloo_group_create,
    .group_destroy = dtr__gloo_group_destroy,
    .all_gather = dtr__gloo_all_gather,
    .all_gatherv = dtr__gloo_all_gatherv,
    .reduce_scatter = dtr__gloo_reduce_scatter,
    .reduce_scatterv = dtr__gloo_reduce_scatterv,
    .all_reduce = dtr__gloo_all_reduce,
    .all_to_all = dtr__gloo_all_to_all,
    .all_to_allv = dtr__gloo_all_to_allv,
    .all_gather_strided = dtr__gloo_all_gather_strided,
    .all_to_all_strided = dtr__gloo_all_to_all_strided,
    .strided_in_place = dtr__gloo_strided_in_place,
    .test = dtr__gloo_test,
    .wait = dtr__gloo_wait,
    .destroy = dtr__gloo_destroy,
    .spans_ok = dtr__gloo_spans_ok,
    .spans_start = dtr__gloo_spans_start,
};

/* ---- contexts -------------------------------------------------------------------------- */

/* The shared-memory path's switches: DTR_GLOO_SHM=0 turns it off; DTR_GLOO_SHM_CHUNK and
 * DTR_GLOO_SHM_RING size it (small chunks make tests wrap the rings). */
static dtr_status_t dtr__gloo_shm_env(dtr__gloo_t *b) {
    const char *on = getenv("DTR_GLOO_SHM");
    b->shm = on == NULL || strcmp(on, "0") != 0;
    if (on != NULL && *on != '\0' && strcmp(on, "0") != 0 && strcmp(on, "1") != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_context_create_gloo",
                          "DTR_GLOO_SHM: \"%.40s\" is not 0 or 1", on);
    const char *f = "dtr_context_create_gloo";
    DTR_CHECK(dtr__env_bytes("DTR_GLOO_SHM_CHUNK", f, DTR__SHM_CHUNK, 1, 1 << 24,
                             "a byte count from 1 to 16 MiB", &b->shm_chunk));
    return dtr__env_bytes("DTR_GLOO_SHM_RING", f, DTR__SHM_RING, 4096, (int64_t)1 << 30,
                          "a byte count from 4 KiB to 1 GiB", &b->shm_ring);
}

static dtr_status_t dtr__gloo_state(int rank, int size, const dtr_gloo_options_t *o,
                                    dtr__gloo_t *b) {
    const char *func = "dtr_context_create_gloo";
    b->rank = rank;
    b->size = size;
    const char *prefix = o->prefix != NULL ? o->prefix : "dtr";
    if (strlen(prefix) >= sizeof b->prefix)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "opts->prefix: longer than %zu chars",
                          sizeof b->prefix - 1);
    snprintf(b->prefix, sizeof b->prefix, "%s", prefix);
    double t = o->timeout_s;
    if (!(t >= 0) || t > 1e9)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "opts->timeout_s: %g is not seconds >= 0", t);
    if (t == 0) DTR_CHECK(dtr__env_timeout(func, &t));
    b->timeout_ms = t > 0 ? (int64_t)(t * 1000.0) : (int64_t)86400000 * 365;
    DTR_CHECK(dtr__gloo_shm_env(b));
    char err[512] = "";
    int rc = o->file_store != NULL
                 ? dtr__gloo_store_file(o->file_store, &b->store, err, sizeof err)
                 : dtr__gloo_store_user(o->store, &b->store, err, sizeof err);
    if (rc != 0) return dtr__gloo_fail(rc, "the store", err);
    const char *host = o->hostname != NULL ? o->hostname : getenv("DTR_GLOO_HOSTNAME");
    const char *iface = host == NULL ? getenv("DTR_GLOO_IFACE") : NULL;
    if (host != NULL && *host == '\0') host = NULL;
    if (iface != NULL && *iface == '\0') iface = NULL;
    rc = dtr__gloo_device_open(host, iface, &b->dev, err, sizeof err);
    if (rc != 0) return dtr__gloo_fail(rc, "the TCP device", err);
    char key[160];
    snprintf(key, sizeof key, "%s.world", b->prefix);
    rc = dtr__gloo_connect(b->store, b->dev, key, rank, size, b->timeout_ms, &b->world, err,
                           sizeof err);
    return rc == 0 ? DTR_OK : dtr__gloo_fail(rc, "connecting the ranks", err);
}

dtr_status_t dtr_context_create_gloo(int rank, int size, const dtr_gloo_options_t *opts,
                                     dtr_context_t **out) {
    const char *func = __func__;
    DTR_CHECK_PTR(opts, func);
    DTR_CHECK_PTR(out, func);
    if (size < 1 || rank < 0 || rank >= size)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "rank %d of size %d: need 0 <= rank < size", rank, size);
    if ((opts->file_store == NULL) == (opts->store == NULL))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "opts: set exactly one of file_store and store");
    if (opts->store != NULL && (opts->store->set == NULL || opts->store->get == NULL))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "opts->store: set and get must not be NULL");
    if (opts->file_store != NULL && *opts->file_store == '\0')
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "opts->file_store: empty path");
    struct stat sb;
    if (opts->file_store != NULL && (stat(opts->file_store, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "opts->file_store: '%.200s' is not a directory (an empty one every "
                          "rank sees, fresh for each job)", opts->file_store);
    dtr__gloo_t *b = calloc(1, sizeof *b);
    if (b == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "the backend's state");
    dtr_status_t st = dtr__gloo_state(rank, size, opts, b);
    if (st != DTR_OK) {
        dtr__gloo_destroy(b);
        return st;
    }
    return dtr_context_create(&dtr__gloo_ops, b, out);
}

dtr_status_t dtr_gloo_paths(const dtr_context_t *ctx, dtr_gloo_paths_t *out) {
    DTR_CHECK_PTR(ctx, __func__);
    DTR_CHECK_PTR(out, __func__);
    const dtr__gloo_t *b = dtr_context_backend_state(ctx, &dtr__gloo_ops);
    if (b == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "ctx: a context of backend '%s', "
                          "not gloo", dtr_context_backend(ctx));
    *out = b->paths;
    return DTR_OK;
}

/* An integer environment variable in [min, max], or INVALID_ARGUMENT naming it. */
static dtr_status_t dtr__gloo_env_int(const char *name, int min, int max, int *out) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_context_create_gloo_env",
                          "%s is not set (a launcher sets it: tools/dtr_launch.sh, torchrun)",
                          name);
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || errno != 0 || x < min || x > max)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_context_create_gloo_env",
                          "%s: \"%.40s\" is not an integer in [%d, %d]", name, v, min, max);
    *out = (int)x;
    return DTR_OK;
}

dtr_status_t dtr_context_create_gloo_env(dtr_context_t **out) {
    DTR_CHECK_PTR(out, __func__);
    int size = 0, rank = 0;
    DTR_CHECK(dtr__gloo_env_int("WORLD_SIZE", 1, 1 << 24, &size));
    DTR_CHECK(dtr__gloo_env_int("RANK", 0, size - 1, &rank));
    const char *dir = getenv("DTR_GLOO_STORE");
    if (dir == NULL || *dir == '\0')
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "DTR_GLOO_STORE is not set (a directory every rank sees: "
                          "tools/dtr_launch.sh makes one)");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "DTR_GLOO_STORE: '%.200s' is not a directory (an empty one every rank "
                          "sees, fresh for each job: tools/dtr_launch.sh makes one)", dir);
    const char *prefix = getenv("DTR_GLOO_PREFIX");
    if (prefix == NULL || *prefix == '\0') prefix = "dtr";
    /* the k-th context of this process (k >= 1) meets under PREFIX.k: every rank makes its
     * contexts in one order, so the same call meets the same call */
    static _Atomic int made;
    int k = made++;
    char keyed[96];
    int n = k == 0 ? snprintf(keyed, sizeof keyed, "%s", prefix)
                   : snprintf(keyed, sizeof keyed, "%s.%d", prefix, k);
    if (n < 0 || (size_t)n >= sizeof keyed)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "DTR_GLOO_PREFIX: longer than %zu chars", sizeof keyed - 12);
    dtr_gloo_options_t o = {.file_store = dir, .prefix = keyed};
    return dtr_context_create_gloo(rank, size, &o, out);
}

/* The row of "gloo" in the table of backends by name (registry.c), made as this code loads
 * (in libdtr_gloo.so: when a program links it or dtr_backend_find loads it). */
__attribute__((constructor)) static void dtr__gloo_register(void) {
    dtr_backend_info_t row = {
        .name = "gloo",
        .caps = DTR_GLOO_CAPS,
        .memory = "host",
        .launch = "RANK, WORLD_SIZE and DTR_GLOO_STORE (tools/dtr_launch.sh sets them)",
        .create_env = dtr_context_create_gloo_env,
    };
    (void)dtr_backend_register(&row);
}
