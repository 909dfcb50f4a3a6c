/* The fault-injecting backend wrapper (see faulty_backend.h). */
#define _POSIX_C_SOURCE 200809L
#include "tests/support/faulty_backend.h"

#include <string.h>
#include <time.h>

faulty_settings_t faulty;
static const dtr_backend_ops_t *inner;
static dtr_backend_ops_t table;

void faulty_reset(void) { memset(&faulty, 0, sizeof faulty); }

/* What every issuing operation does first: count, maybe sleep, maybe fail. */
static dtr_status_t issue(void) {
    int k = ++faulty.issued;
    if (k == faulty.delay_at && faulty.delay_s > 0) {
        struct timespec t = {(time_t)faulty.delay_s,
                             (long)((faulty.delay_s - (double)(time_t)faulty.delay_s) * 1e9)};
        while (nanosleep(&t, &t) != 0) {
        }
    }
    return k == faulty.fail_issue ? DTR_ERR_BACKEND : DTR_OK;
}

#define ISSUE()                                                                          \
    do {                                                                                 \
        dtr_status_t st_ = issue();                                                      \
        if (st_ != DTR_OK) return st_;                                                   \
    } while (0)

static int w_rank(void *s) { return inner->rank(s); }
static dtr_status_t w_group_create(void *s, const int *r, int n, int tag, void **g) {
    return inner->group_create(s, r, n, tag, g);
}
static void w_group_destroy(void *s, void *g) { inner->group_destroy(s, g); }
static dtr_status_t w_all_gather(void *g, const void *s, int64_t b, void *r,
                                 dtr_backend_req_t *q) {
    ISSUE();
    return inner->all_gather(g, s, b, r, q);
}
static dtr_status_t w_all_gatherv(void *g, const void *s, int64_t b, void *r, const int64_t *c,
                                  const int64_t *d, dtr_backend_req_t *q) {
    ISSUE();
    return inner->all_gatherv(g, s, b, r, c, d, q);
}
static dtr_status_t w_reduce_scatter(void *g, const void *s, void *r, int64_t n, dtr_dtype_t t,
                                     dtr_reduce_op_t o, dtr_backend_req_t *q) {
    ISSUE();
    return inner->reduce_scatter(g, s, r, n, t, o, q);
}
static dtr_status_t w_reduce_scatterv(void *g, const void *s, void *r, const int64_t *c,
                                      dtr_dtype_t t, dtr_reduce_op_t o, dtr_backend_req_t *q) {
    ISSUE();
    return inner->reduce_scatterv(g, s, r, c, t, o, q);
}
static dtr_status_t w_all_reduce(void *g, const void *s, void *r, int64_t n, dtr_dtype_t t,
                                 dtr_reduce_op_t o, dtr_backend_req_t *q) {
    ISSUE();
    return inner->all_reduce(g, s, r, n, t, o, q);
}
static dtr_status_t w_all_to_all(void *g, const void *s, int64_t b, void *r,
                                 dtr_backend_req_t *q) {
    ISSUE();
    return inner->all_to_all(g, s, b, r, q);
}
static dtr_status_t w_all_gather_strided(void *g, const void *s, int64_t rows, int64_t block,
                                         int64_t row, void *r, dtr_backend_req_t *q) {
    ISSUE();
    return inner->all_gather_strided(g, s, rows, block, row, r, q);
}
static dtr_status_t w_all_to_all_strided(void *g, const void *s, int64_t sr, int64_t sb,
                                         int64_t srow, void *r, int64_t rr, int64_t rb,
                                         int64_t rrow, dtr_backend_req_t *q) {
    ISSUE();
    return inner->all_to_all_strided(g, s, sr, sb, srow, r, rr, rb, rrow, q);
}
static bool w_strided_in_place(void *g) { return inner->strided_in_place(g); }
static dtr_status_t w_all_to_allv(void *g, const void *s, const int64_t *sc, const int64_t *sd,
                                  void *r, const int64_t *rc, const int64_t *rd,
                                  dtr_backend_req_t *q) {
    ISSUE();
    return inner->all_to_allv(g, s, sc, sd, r, rc, rd, q);
}
static dtr_status_t w_agree(void *g, const int64_t *s, int64_t *r, dtr_backend_req_t *q) {
    ISSUE();
    return inner->agree(g, s, r, q);
}
static void w_cancel(void *g, dtr_backend_req_t *q) {
    ++faulty.cancelled;
    inner->cancel(g, q);
}
static dtr_status_t w_test(void *g, dtr_backend_req_t *q, bool *done) {
    dtr_status_t st = inner->test(g, q, done);
    if (st == DTR_OK && *done && ++faulty.completed == faulty.fail_complete) return DTR_ERR_BACKEND;
    return st;
}
static dtr_status_t w_wait(void *g, dtr_backend_req_t *q) {
    dtr_status_t st = inner->wait(g, q);
    if (st == DTR_OK && ++faulty.completed == faulty.fail_complete) return DTR_ERR_BACKEND;
    return st;
}
static void w_destroy(void *s) { inner->destroy(s); }

const dtr_backend_ops_t *faulty_ops(const dtr_backend_ops_t *in) {
    inner = in;
    table = (dtr_backend_ops_t){
        .name = "faulty",
        .caps = in->caps,
        .rank = w_rank,
        .group_create = w_group_create,
        .group_destroy = w_group_destroy,
        .all_gather = w_all_gather,
        .all_gatherv = in->all_gatherv ? w_all_gatherv : NULL,
        .reduce_scatter = w_reduce_scatter,
        .reduce_scatterv = in->reduce_scatterv ? w_reduce_scatterv : NULL,
        .all_reduce = w_all_reduce,
        .all_to_all = in->all_to_all ? w_all_to_all : NULL,
        .all_gather_strided = in->all_gather_strided ? w_all_gather_strided : NULL,
        .all_to_all_strided = in->all_to_all_strided ? w_all_to_all_strided : NULL,
        .strided_in_place = in->strided_in_place ? w_strided_in_place : NULL,
        .all_to_allv = w_all_to_allv,
        .test = w_test,
        .wait = w_wait,
        .destroy = w_destroy,
        .agree = in->agree ? w_agree : NULL,
        .cancel = in->cancel ? w_cancel : NULL,
    };
    return &table;
}
