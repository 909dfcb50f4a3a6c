/* The one-rank backend (see solo_backend.h). */
#include "tests/support/solo_backend.h"

static int s_rank(void *s) {
    (void)s;
    return 0;
}
static dtr_status_t s_group_create(void *s, const int *r, int n, int t, void **g) {
    (void)s, (void)r, (void)n, (void)t, (void)g;
    return DTR_ERR_UNSUPPORTED;
}
static void s_group_destroy(void *s, void *g) { (void)s, (void)g; }
static dtr_status_t s_gather(void *g, const void *s, int64_t b, void *r, dtr_backend_req_t *q) {
    (void)g, (void)s, (void)b, (void)r, (void)q;
    return DTR_ERR_UNSUPPORTED;
}
/* reduce_scatter and all_reduce share this signature */
static dtr_status_t s_reduce(void *g, const void *s, void *r, int64_t n, dtr_dtype_t t,
                             dtr_reduce_op_t o, dtr_backend_req_t *q) {
    (void)g, (void)s, (void)r, (void)n, (void)t, (void)o, (void)q;
    return DTR_ERR_UNSUPPORTED;
}
static dtr_status_t s_all_to_allv(void *g, const void *s, const int64_t *a, const int64_t *b,
                                  void *r, const int64_t *c, const int64_t *d,
                                  dtr_backend_req_t *q) {
    (void)g, (void)s, (void)a, (void)b, (void)r, (void)c, (void)d, (void)q;
    return DTR_ERR_UNSUPPORTED;
}
static dtr_status_t s_test(void *g, dtr_backend_req_t *q, bool *done) {
    (void)g, (void)q, (void)done;
    return DTR_ERR_UNSUPPORTED;
}
static dtr_status_t s_wait(void *g, dtr_backend_req_t *q) {
    (void)g, (void)q;
    return DTR_ERR_UNSUPPORTED;
}

const dtr_backend_ops_t solo_backend_ops = {
    .name = "solo",
    .rank = s_rank,
    .group_create = s_group_create,
    .group_destroy = s_group_destroy,
    .all_gather = s_gather,
    .reduce_scatter = s_reduce,
    .all_reduce = s_reduce,
    .all_to_allv = s_all_to_allv,
    .test = s_test,
    .wait = s_wait,
};
