/* The recording wrapper (recording_backend.h). */
#include "tests/support/recording_backend.h"

#include <mpi.h>
#include <stdlib.h>

#include "numeric/numeric.h"
#include "backends/mpi/dtr_mpi.h"

rec_t recs[REC_MAX];
int nrecs;
int rec_premul;

static const dtr_backend_ops_t *inner;
static dtr_backend_ops_t table, table_premul; /* without and with premul_sum */

/* The group's size, kept beside the inner group. */
typedef struct {
    void *g;
    int n;
    void *scaled; /* premul_sum's multiplied addends, kept until the next one */
} wgroup_t;

static void record(char kind, int64_t count, dtr_dtype_t t, dtr_reduce_op_t o, void *g) {
    if (kind == 'a' && t == DTR_I64 && count == 3 && o == DTR_REDUCE_MAX) return;
    if (nrecs < REC_MAX) recs[nrecs++] = (rec_t){kind, count, t, o, ((wgroup_t *)g)->n, 1, 0, 0, 0, 0};
}

static int w_rank(void *s) { return inner->rank(s); }
static dtr_status_t w_group_create(void *s, const int *r, int n, int tag, void **g) {
    wgroup_t *w = calloc(1, sizeof *w);
    if (w == NULL) return DTR_ERR_OUT_OF_MEMORY;
    w->n = n;
    dtr_status_t st = inner->group_create(s, r, n, tag, &w->g);
    if (st != DTR_OK) {
        free(w);
        return st;
    }
    *g = w;
    return DTR_OK;
}
static void w_group_destroy(void *s, void *g) {
    inner->group_destroy(s, ((wgroup_t *)g)->g);
    free(((wgroup_t *)g)->scaled);
    free(g);
}
static dtr_status_t w_all_gather(void *g, const void *s, int64_t b, void *r, dtr_backend_req_t *q) {
    record('g', b, DTR_U8, DTR_REDUCE_SUM, g);
    return inner->all_gather(((wgroup_t *)g)->g, s, b, r, q);
}
static dtr_status_t w_reduce_scatter(void *g, const void *s, void *r, int64_t n, dtr_dtype_t t,
                                     dtr_reduce_op_t o, dtr_backend_req_t *q) {
    record('r', n, t, o, g);
    return inner->reduce_scatter(((wgroup_t *)g)->g, s, r, n, t, o, q);
}
static dtr_status_t w_all_reduce(void *g, const void *s, void *r, int64_t n, dtr_dtype_t t,
                                 dtr_reduce_op_t o, dtr_backend_req_t *q) {
    record('a', n, t, o, g);
    return inner->all_reduce(((wgroup_t *)g)->g, s, r, n, t, o, q);
}
static dtr_status_t w_premul_sum(void *g, const void *s, void *r, int64_t n, dtr_dtype_t t,
                                 double scale, bool scatter, dtr_backend_req_t *q) {
    wgroup_t *w = g;
    record(scatter ? 'r' : 'a', n, t, DTR_REDUCE_SUM, g);
    if (nrecs > 0) recs[nrecs - 1].scale = scale;
    int64_t total = scatter ? n * w->n : n;
    free(w->scaled);
    w->scaled = malloc((size_t)(total * dtr_dtype_info(t)->size + 1));
    if (w->scaled == NULL) return DTR_ERR_OUT_OF_MEMORY;
    double sc; /* the scale in the dtype, as NCCL takes it */
    char one[8];
    dtr__store(t, one, 0, scale);
    sc = dtr__load(t, one, 0);
    for (int64_t k = 0; k < total; k++) dtr__store(t, w->scaled, k, dtr__load(t, s, k) * sc);
    return scatter ? inner->reduce_scatter(w->g, w->scaled, r, n, t, DTR_REDUCE_SUM, q)
                   : inner->all_reduce(w->g, w->scaled, r, n, t, DTR_REDUCE_SUM, q);
}
static bool w_spans_ok(void *g, dtr_spans_kind_t k, dtr_dtype_t t, dtr_reduce_op_t o,
                       int64_t bytes) {
    return inner->spans_ok != NULL && inner->spans_ok(((wgroup_t *)g)->g, k, t, o, bytes);
}
static dtr_status_t w_spans_start(void *g, const dtr_spans_op_t *op, dtr_backend_req_t *q) {
    static const char kinds[] = {'g', 'r', 'a'};
    record(kinds[op->kind], op->counts[0], op->dtype, op->op, g);
    if (nrecs > 0) {
        recs[nrecs - 1].spans = 1;
        recs[nrecs - 1].pre = op->pre;
        recs[nrecs - 1].post = op->post;
        recs[nrecs - 1].recv_cast = op->recv_cast;
    }
    return inner->spans_start(((wgroup_t *)g)->g, op, q);
}
static dtr_status_t w_all_to_allv(void *g, const void *s, const int64_t *sc, const int64_t *sd,
                                  void *r, const int64_t *rc, const int64_t *rd,
                                  dtr_backend_req_t *q) {
    return inner->all_to_allv(((wgroup_t *)g)->g, s, sc, sd, r, rc, rd, q);
}
static dtr_status_t w_test(void *g, dtr_backend_req_t *q, bool *done) {
    return inner->test(((wgroup_t *)g)->g, q, done);
}
static dtr_status_t w_wait(void *g, dtr_backend_req_t *q) {
    return inner->wait(((wgroup_t *)g)->g, q);
}
static void w_destroy(void *s) { inner->destroy(s); }

const dtr_backend_ops_t *recording_ops(const dtr_backend_ops_t *in) {
    inner = in;
    table = (dtr_backend_ops_t){
        .name = "recording",
        .caps = in->caps,
        .rank = w_rank,
        .group_create = w_group_create,
        .group_destroy = w_group_destroy,
        .all_gather = w_all_gather,
        .reduce_scatter = w_reduce_scatter,
        .all_reduce = w_all_reduce,
        .all_to_allv = w_all_to_allv,
        .test = w_test,
        .wait = w_wait,
        .destroy = w_destroy,
        .spans_ok = in->spans_ok != NULL ? w_spans_ok : NULL,
        .spans_start = in->spans_ok != NULL ? w_spans_start : NULL,
    };
    table_premul = table;
    table_premul.premul_sum = w_premul_sum;
    return rec_premul ? &table_premul : &table;
}

const char *rec_kinds(void) {
    static char s[REC_MAX + 1];
    for (int i = 0; i < nrecs; i++) s[i] = recs[i].kind;
    s[nrecs] = 0;
    return s;
}

dtr_context_t *recording_mpi_context(const dtr_memory_ops_t *mem, void *mem_state) {
    void *state = NULL;
    dtr_context_t *ctx = NULL;
    if (dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state) != DTR_OK ||
        dtr_context_create(recording_ops(dtr_backend_mpi_ops()), state, &ctx) != DTR_OK)
        return NULL;
    if (mem != NULL && dtr_context_set_memory(ctx, mem, mem_state) != DTR_OK) {
        dtr_context_destroy(ctx);
        return NULL;
    }
    return ctx;
}
