/* The local step kinds: no communication, each rank changes its own block. */
#include "redistribute/executor/internal.h"

/* local_chunk (R -> S(d)): keep this rank's chunk of dim d. */
dtr_status_t dtr__local_chunk_start(dtr_request_t *r, const dtr__step_args_t *a) {
    if (a->bare) return DTR_OK;
    int d = a->s->tensor_dim, nd = a->nd;
    int64_t size, off;
    dtr_chunk(a->ish[d], a->n, a->ci, &size, &off);
    return dtr__m_copy3(r->ctx, a->src, a->ish[d], off, a->dst, size, 0, dtr__prod(a->ish, 0, d),
                        size, dtr__prod(a->ish, d + 1, nd) * a->item);
}

/* local_scale (R -> P(sum)): divide by the mesh dim's size, so the sum is the value. */
dtr_status_t dtr__local_scale_start(dtr_request_t *r, const dtr__step_args_t *a) {
    if (a->bare) return DTR_OK;
    return dtr__m_divide(r->ctx, a->dtype, a->src, a->dst, a->in_numel, a->n);
}

/* local_relabel (R -> P(avg|max|min)): the values already qualify; the step keeps every
 * block (its row's keeps_block), so only the baseline gets here. */
dtr_status_t dtr__local_relabel_start(dtr_request_t *r, const dtr__step_args_t *a) {
    (void)r; /* the table's signature */
    if (a->bare) return DTR_OK;
    return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                      "step %d (%s): a no-op step was not skipped", a->k + 1,
                      dtr_step_kind_info(a->s->kind)->name);
}

/* local_zero_fill (S(d) -> P(sum)): this rank's chunk of dim d at its place in zeros of the
 * extent it was cut from; the sum over the mesh dim is that extent. */
dtr_status_t dtr__local_zero_fill_start(dtr_request_t *r, const dtr__step_args_t *a) {
    if (a->bare) return DTR_OK;
    int d = a->s->tensor_dim, nd = a->nd;
    DTR_CHECK(dtr__m_zero(r->ctx, a->dst, a->out_numel * a->item));
    return dtr__m_copy3(r->ctx, a->src, a->ish[d], 0, a->dst, a->osh[d], a->ioff[d] - a->ooff[d],
                        dtr__prod(a->ish, 0, d), a->ish[d],
                        dtr__prod(a->ish, d + 1, nd) * a->item);
}
