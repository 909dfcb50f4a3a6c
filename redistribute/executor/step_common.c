/* What every step kind's file shares (below them and the table in steps.c): the end of a
 * collective's start, the end of its finish, and the error that names the step. */
#include <stdio.h>

#include "redistribute/executor/internal.h"

/* Wraps a backend failure with the step it happened in. */
dtr_status_t dtr__step_error(const dtr_request_t *r, dtr_status_t st) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", dtr_last_error());
    if (r->phase == DTR__PHASE_AGREE)
        return dtr__error(st, "dtr_redistribute", "argument agreement over the mesh: %s", detail);
    const dtr_step_t *s = &r->plan->steps[r->step];
    if (s->mesh_dim < 0)
        return dtr__error(st, "dtr_redistribute", "step %d (%s, over the whole mesh): %s",
                          r->step + 1, dtr_step_kind_info(s->kind)->name, detail);
    return dtr__error(st, "dtr_redistribute", "step %d (%s, mesh dim %d): %s", r->step + 1,
                      dtr_step_kind_info(s->kind)->name, s->mesh_dim, detail);
}

dtr_status_t dtr__step_issued(dtr_request_t *r, dtr_status_t st) {
    if (st != DTR_OK) return dtr__step_error(r, st);
    r->in_flight = true;
    r->t0 = dtr__now();
    return DTR_OK;
}

dtr_status_t dtr__step_poll(dtr_request_t *r, bool block, bool *done) {
    *done = false;
    while (r->in_flight) {
        bool finished = false;
        dtr_status_t st = dtr__poll(r->ctx, r->group, &r->breq, r->t0, block, &finished);
        if (st == DTR_OK && !finished) return DTR_OK;
        r->in_flight = false;
        if (st != DTR_OK) return dtr__step_error(r, st);
        /* the step's kind finishes it, or starts its next operation */
        const dtr__step_impl_t *impl = &dtr__step_impls[r->plan->steps[r->step].kind];
        if (impl->finish != NULL) DTR_CHECK(impl->finish(r));
    }
    *done = true;
    return DTR_OK;
}

/* After the step's operation completed: unpack and divide. */
dtr_status_t dtr__step_done(dtr_request_t *r) {
    dtr__pending_t *p = &r->pend;
    dtr_context_t *ctx = r->ctx;
    if (p->unpack3) {
        /* pieces back to back in stage_recv, each [outer, piece rows, inner] */
        const char *at = ctx->stage_recv;
        if (p->npieces == 1) { /* padded reduce-scatter: keep the first dst_len rows */
            DTR_CHECK(dtr__m_copy3(ctx, at, p->piece_len, 0, p->dst, p->dst_len, 0, p->outer,
                                   p->dst_len, p->inner));
        } else {
            for (int64_t m = 0; m < p->npieces; m++) {
                int64_t size, off;
                if (p->psz != NULL) {
                    size = p->psz[m];
                    off = p->pof[m];
                } else {
                    dtr_chunk(p->dst_len, p->npieces, m, &size, &off);
                }
                int64_t rows = p->piece_len >= 0 ? p->piece_len : size;
                DTR_CHECK(dtr__m_copy3(ctx, at, rows, 0, p->dst, p->dst_len, off, p->outer, size,
                                       p->inner));
                at += p->outer * rows * p->inner;
            }
        }
    }
    if (p->divide)
        DTR_CHECK(dtr__m_divide(ctx, r->plan->op_dtype, p->dst, p->dst, p->out_numel,
                                 p->divisor));
    return DTR_OK;
}
