/* The hierarchical reductions of groups that span nodes (hier.h). May include the segment
 * (shm.h) and MPI; knows nothing of plans. */
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "numeric/numeric.h"
#include "backends/mpi/hier.h"
#include "backends/mpi/error.h"
#include "backends/mpi/mpi_state.h"
#include "backends/shm/shm.h"

struct dtr__hier {
    dtr__shm_t *shm; /* this node's members (L), local index l */
    MPI_Comm cross;  /* the members of local index l on every node (k), ordered by group rank */
    int L, l, k;
    int *member;     /* [l * k + q]: the group rank of local index l at cross position q */
    const void **pieces; /* k: the inputs of the reduction across nodes */
    char *scratch;   /* grown to the largest operation's need, kept with the group */
    int64_t scratch_bytes;
    int64_t min_bytes;
};

/* Every member of the group runs this, so every member leaves with the same answer. */
dtr_status_t dtr__hier_create(MPI_Comm comm, int n, int me, int64_t chunk, int64_t ring,
                              int64_t min_bytes, dtr__hier_t **out) {
    *out = NULL;
    MPI_Comm node = MPI_COMM_NULL, cross = MPI_COMM_NULL;
    int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Comm_split_type (hierarchical)");
    int L = 0, l = 0, k = 0, q = 0;
    MPI_Comm_size(node, &L);
    MPI_Comm_rank(node, &l);
    /* the same L on every node, several members on each, more than one node */
    int sizes[2] = {L, -L}, all[2] = {0, 0};
    rc = MPI_Allreduce(sizes, all, 2, MPI_INT, MPI_MIN, comm);
    dtr_status_t st = DTR_OK;
    dtr__hier_t *h = NULL;
    if (rc != MPI_SUCCESS) {
        st = dtr__mpi_error(rc, "MPI_Allreduce (hierarchical)");
        goto done;
    }
    if (all[0] != -all[1] || L < 2 || L == n || L > DTR__SHM_MAX_MEMBERS) goto done;
    rc = MPI_Comm_split(comm, l, me, &cross);
    if (rc != MPI_SUCCESS) {
        st = dtr__mpi_error(rc, "MPI_Comm_split (hierarchical)");
        goto done;
    }
    MPI_Comm_set_errhandler(cross, MPI_ERRORS_RETURN);
    MPI_Comm_size(cross, &k);
    MPI_Comm_rank(cross, &q);
    h = calloc(1, sizeof *h);
    int *member = malloc((size_t)n * sizeof *member);
    int *pos = malloc((size_t)n * 2 * sizeof *pos);
    const void **pieces = malloc((size_t)k * sizeof *pieces);
    int ok = h != NULL && member != NULL && pos != NULL && pieces != NULL, all_ok = 0;
    if (h != NULL) {
        h->member = member;
        h->pieces = pieces;
    } else {
        free(member);
        free(pieces);
    }
    /* every member must hear of a failure here, or the others would wait in the next call */
    rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (rc != MPI_SUCCESS || !all_ok) {
        free(pos);
        st = rc != MPI_SUCCESS ? dtr__mpi_error(rc, "MPI_Allreduce (hierarchical)")
                               : dtr__error(DTR_ERR_OUT_OF_MEMORY, "mpi", "hierarchical group");
        goto done;
    }
    int mine[2] = {l, q};
    rc = MPI_Allgather(mine, 2, MPI_INT, pos, 2, MPI_INT, comm);
    for (int j = 0; j < n && rc == MPI_SUCCESS; j++) member[pos[2 * j] * k + pos[2 * j + 1]] = j;
    free(pos);
    if (rc != MPI_SUCCESS) {
        st = dtr__mpi_error(rc, "MPI_Allgather (hierarchical)");
        goto done;
    }
    /* collective over the node; the nodes then agree that every one has its segment */
    st = dtr__mpi_shm_create(node, L, l, chunk, ring, &h->shm);
    int mapped = st == DTR_OK && h->shm != NULL, all_mapped = 0;
    rc = MPI_Allreduce(&mapped, &all_mapped, 1, MPI_INT, MPI_MIN, comm);
    if (st == DTR_OK && rc != MPI_SUCCESS) st = dtr__mpi_error(rc, "MPI_Allreduce (hierarchical)");
    if (st != DTR_OK || !all_mapped) goto done;
    h->cross = cross;
    cross = MPI_COMM_NULL;
    h->L = L;
    h->l = l;
    h->k = k;
    h->min_bytes = min_bytes;
    *out = h;
    h = NULL;
done:
    if (h != NULL) {
        h->cross = MPI_COMM_NULL;
        dtr__hier_destroy(h);
    }
    if (cross != MPI_COMM_NULL) MPI_Comm_free(&cross);
    MPI_Comm_free(&node);
    return st;
}

void dtr__hier_destroy(dtr__hier_t *h) {
    if (h == NULL) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && h->cross != MPI_COMM_NULL) MPI_Comm_free(&h->cross);
    dtr__shm_destroy(h->shm);
    free(h->member);
    free(h->pieces);
    free(h->scratch);
    free(h);
}

int dtr__hier_nodes(const dtr__hier_t *h) { return h != NULL ? h->k : 0; }

bool dtr__hier_takes(const dtr__hier_t *h, bool all_reduce, int64_t count, dtr_dtype_t dtype,
                     dtr_reduce_op_t op) {
    if (h == NULL || count <= 0 || op == DTR_REDUCE_AVG) return false;
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    if (info == NULL || info->storage_only) return false;
    int64_t n = (int64_t)h->L * h->k, es = info->size;
    if (all_reduce && count % n != 0) return false;
    int64_t per_member = all_reduce ? count * es : count * n * es;
    /* what one MPI call across nodes moves to or from one peer: an int count of bytes */
    int64_t piece = all_reduce ? count / n * es : count * es;
    return per_member >= h->min_bytes && piece <= INT_MAX;
}

static dtr_status_t dtr__hier_scratch(dtr__hier_t *h, int64_t bytes) {
    if (bytes <= h->scratch_bytes) return DTR_OK;
    char *p = realloc(h->scratch, (size_t)bytes);
    if (p == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "mpi", "hierarchical scratch of %lld bytes",
                          (long long)bytes);
    h->scratch = p;
    h->scratch_bytes = bytes;
    return DTR_OK;
}

/* The k pieces that arrived from the nodes, each `count` elements at in, reduced in cross
 * order into out. */
static void dtr__hier_combine(dtr__hier_t *h, const dtr__hier_op_t *o, const char *in,
                              int64_t count, void *out) {
    int64_t bytes = count * dtr_dtype_info(o->dtype)->size;
    for (int q = 0; q < h->k; q++) h->pieces[q] = in + q * bytes;
    dtr__reduce_n(o->dtype, o->op, h->pieces, h->k, out, count);
}

/* The segment's operation: done, or (blocking) waited for. */
static bool dtr__hier_shm_done(dtr__hier_t *h, bool blocking) {
    if (!blocking) return dtr__shm_progress(h->shm, NULL);
    dtr__shm_wait(h->shm);
    return true;
}

/* MPI's operation across nodes: done, or (blocking) waited for. */
static dtr_status_t dtr__hier_mpi_done(dtr__hier_op_t *o, bool blocking, bool *done) {
    int flag = 1, rc;
    if (blocking)
        rc = MPI_Wait(&o->req, MPI_STATUS_IGNORE);
    else
        rc = MPI_Test(&o->req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, blocking ? "MPI_Wait" : "MPI_Test");
    *done = flag != 0;
    return DTR_OK;
}

/*
 * Reduce-scatter, c elements per member, n = L k members:
 *   1. pack: region l' holds the pieces of the members at local index l' in cross order, so
 *      that the node's reduce-scatter hands local index l' exactly what its cross group needs;
 *   2. the node's reduce-scatter (k c elements to each local index) into B;
 *   3. across nodes: all-to-all of B's k pieces into C, then C's k pieces reduced into recv.
 * All-reduce, count elements, p = count / L per local index, s = p / k:
 *   1. the node's reduce-scatter of p elements to each local index into B;
 *   2. across nodes: all-to-all of B's k pieces of s into C; C reduced into D (s elements);
 *   3. all-gather of D across nodes into B (the node's p, reduced over every node);
 *   4. the node's all-gather of B into recv.
 */
enum { HIER_SHM_REDUCE = 1, HIER_EXCHANGE, HIER_GATHER_ACROSS, HIER_GATHER_NODE };

static dtr_status_t dtr__hier_step(dtr__hier_t *h, dtr__hier_op_t *o, bool blocking,
                                   bool *moved) {
    int64_t es = dtr_dtype_info(o->dtype)->size, n = (int64_t)h->L * h->k;
    int64_t c = o->all_reduce ? o->count / n : o->count; /* what one member ends with */
    int64_t node_piece = c * h->k;                      /* what one local index reduces */
    char *B = h->scratch, *C = B + node_piece * es, *A = C + node_piece * es;
    int64_t counts[DTR__SHM_MAX_MEMBERS];
    bool done = false;
    int rc;
    *moved = false;
    switch (o->stage) {
    case 0: {
        int64_t need = 2 * node_piece * es + (o->all_reduce ? c * es : n * c * es);
        DTR_CHECK(dtr__hier_scratch(h, need));
        B = h->scratch, C = B + node_piece * es, A = C + node_piece * es;
        const void *from = o->send;
        if (!o->all_reduce) {
            for (int l = 0; l < h->L; l++)
                for (int q = 0; q < h->k; q++)
                    memcpy(A + ((int64_t)l * h->k + q) * c * es,
                           (const char *)o->send + h->member[l * h->k + q] * c * es,
                           (size_t)(c * es));
            from = A;
        }
        for (int l = 0; l < h->L; l++) counts[l] = node_piece;
        DTR_CHECK(dtr__shm_reduce_scatter_start(h->shm, from, B, counts, o->dtype, o->op, es, NULL));
        o->stage = HIER_SHM_REDUCE;
        break;
    }
    case HIER_SHM_REDUCE:
        if (!dtr__hier_shm_done(h, blocking)) return DTR_OK;
        rc = MPI_Ialltoall(B, (int)(c * es), MPI_BYTE, C, (int)(c * es), MPI_BYTE, h->cross,
                           &o->req);
        if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Ialltoall (across nodes)");
        o->stage = HIER_EXCHANGE;
        break;
    case HIER_EXCHANGE:
        DTR_CHECK(dtr__hier_mpi_done(o, blocking, &done));
        if (!done) return DTR_OK;
        if (!o->all_reduce) {
            dtr__hier_combine(h, o, C, c, o->recv);
            o->stage = -1;
            break;
        }
        dtr__hier_combine(h, o, C, c, A);
        rc = MPI_Iallgather(A, (int)(c * es), MPI_BYTE, B, (int)(c * es), MPI_BYTE, h->cross,
                            &o->req);
        if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Iallgather (across nodes)");
        o->stage = HIER_GATHER_ACROSS;
        break;
    case HIER_GATHER_ACROSS:
        DTR_CHECK(dtr__hier_mpi_done(o, blocking, &done));
        if (!done) return DTR_OK;
        DTR_CHECK(dtr__shm_gather_start(h->shm, B, node_piece * es, o->recv, node_piece * es,
                                        node_piece * es));
        o->stage = HIER_GATHER_NODE;
        break;
    case HIER_GATHER_NODE:
        if (!dtr__hier_shm_done(h, blocking)) return DTR_OK;
        o->stage = -1;
        break;
    default:
        return dtr__error(DTR_ERR_INTERNAL, "mpi", "hierarchical stage %d", o->stage);
    }
    *moved = true;
    return DTR_OK;
}

dtr_status_t dtr__hier_progress(dtr__hier_t *h, dtr__hier_op_t *o, bool blocking, bool *done) {
    bool moved = true;
    while (o->stage != -1 && moved) DTR_CHECK(dtr__hier_step(h, o, blocking, &moved));
    *done = o->stage == -1;
    return DTR_OK;
}
