/*
 * The Gloo backend's state, groups and operation handles, for its two files: gloo.c (the
 * backend table over Gloo's transfers) and node.c (the shared-memory path of a group whose
 * members share a node, backends/shm/shm.h).
 */
#ifndef DTR_BACKENDS_GLOO_GLOO_STATE_H
#define DTR_BACKENDS_GLOO_GLOO_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/common.h"
#include "runtime/backend.h"
#include "backends/gloo/link.h"
#include "backends/shm/shm.h"

/* One (ranks, tag) pair's count of groups created: every member creates the same groups
 * in the same order, so the count names a group's keys alike on all of them. */
typedef struct dtr__gloo_key {
    uint64_t hash;
    int count;
    struct dtr__gloo_key *next;
} dtr__gloo_key_t;

typedef struct {
    int rank, size;
    char prefix[128];
    int64_t timeout_ms;
    dtr__gloo_store_t *store;
    dtr__gloo_device_t *dev;
    dtr__gloo_link_t *world; /* connected at creation: every rank came */
    dtr__gloo_key_t *keys;
    /* the shared-memory path (DTR_GLOO_SHM=0: off), its chunk and ring bytes
     * (DTR_GLOO_SHM_CHUNK, DTR_GLOO_SHM_RING, as the MPI backend's) */
    bool shm;
    int64_t shm_chunk, shm_ring;
    dtr_gloo_paths_t paths; /* (dtr_gloo_paths) */
} dtr__gloo_t;

typedef struct {
    dtr__gloo_t *b;
    dtr__gloo_link_t *link; /* NULL for a group of one */
    int me, n;
    uint32_t seq; /* the next operation's tag */
    /* where every member shares a node: the segment, which holds one operation at a time
     * (node.c starts the next only once the last is complete), and its operations started
     * and known complete, counted from 1 */
    dtr__shm_t *shm;
    uint64_t shm_started, shm_done;
} dtr__gloo_group_t;

/*
 * What an operation's dtr_backend_req_t holds: a transfer's state (gloo.c), or, for one on
 * the segment, NULL and its number among the group's segment operations.
 */
typedef struct {
    void *op;
    uint64_t shm;
} dtr__gloo_handle_t;

static inline dtr__gloo_handle_t dtr__gloo_handle(const dtr_backend_req_t *req) {
    dtr__gloo_handle_t h;
    memcpy(&h, req->bytes, sizeof h);
    return h;
}

static inline void dtr__gloo_set_handle(dtr_backend_req_t *req, void *op, uint64_t shm) {
    dtr__gloo_handle_t h = {op, shm};
    memcpy(req->bytes, &h, sizeof h);
}

/* This member's own piece of a move, copied from send + sd to recv + rd (sc bytes; rc the
 * bytes it receives from itself, which must be the same): Gloo's pairs and the segment both
 * move only the other members' pieces. */
static inline dtr_status_t dtr__gloo_own(int me, const void *send, int64_t sd, int64_t sc,
                                         void *recv, int64_t rd, int64_t rc) {
    if (sc != rc)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "gloo",
                          "member %d sends itself %lld bytes and receives %lld", me,
                          (long long)sc, (long long)rc);
    if (sc > 0 && (const char *)send + sd != (char *)recv + rd)
        memmove((char *)recv + rd, (const char *)send + sd, (size_t)sc);
    return DTR_OK;
}

/* Maps the group's segment where the path is on and every member shares this node
 * (collective over the group, at its creation); g->shm stays NULL otherwise (node.c). */
dtr_status_t dtr__gloo_node_create(dtr__gloo_group_t *g);

/* The segment's forms of the backend's operations (node.c): each returns true, with *st,
 * where it took the operation (the group has a segment and the operation fits it); false
 * where gloo.c's transfers take it. */
bool dtr__gloo_node_all_gather(dtr__gloo_group_t *g, const void *send, int64_t bytes, void *recv,
                               dtr_backend_req_t *req, dtr_status_t *st);
bool dtr__gloo_node_all_gatherv(dtr__gloo_group_t *g, const void *send, int64_t bytes,
                                void *recv, const int64_t *counts, const int64_t *displs,
                                dtr_backend_req_t *req, dtr_status_t *st);
bool dtr__gloo_node_all_to_all(dtr__gloo_group_t *g, const void *send, int64_t bytes, void *recv,
                               dtr_backend_req_t *req, dtr_status_t *st);
bool dtr__gloo_node_all_to_allv(dtr__gloo_group_t *g, const void *send, const int64_t *sc,
                                const int64_t *sd, void *recv, const int64_t *rc,
                                const int64_t *rd, dtr_backend_req_t *req, dtr_status_t *st);
bool dtr__gloo_node_reduce(dtr__gloo_group_t *g, bool all, const void *send, void *recv,
                           const int64_t *counts, int64_t count, dtr_dtype_t dtype,
                           dtr_reduce_op_t op, dtr_backend_req_t *req, dtr_status_t *st);

/* Completion of a segment operation (h.shm != 0). */
dtr_status_t dtr__gloo_node_test(dtr__gloo_group_t *g, uint64_t seq, bool *done);
void dtr__gloo_node_wait(dtr__gloo_group_t *g, uint64_t seq);

/* The backend table's rows that only the segment takes (DTR_ERR_UNSUPPORTED, or false, for
 * a group without one: the executor then stages or packs). */
bool dtr__gloo_strided_in_place(void *group);
dtr_status_t dtr__gloo_all_gather_strided(void *group, const void *send, int64_t rows,
                                          int64_t block, int64_t row, void *recv,
                                          dtr_backend_req_t *req);
dtr_status_t dtr__gloo_all_to_all_strided(void *group, const void *send, int64_t srows,
                                          int64_t sblock, int64_t srow, void *recv,
                                          int64_t rrows, int64_t rblock, int64_t rrow,
                                          dtr_backend_req_t *req);
bool dtr__gloo_spans_ok(void *group, dtr_spans_kind_t kind, dtr_dtype_t dtype,
                        dtr_reduce_op_t op, int64_t bytes);
dtr_status_t dtr__gloo_spans_start(void *group, const dtr_spans_op_t *op, dtr_backend_req_t *req);

#endif
