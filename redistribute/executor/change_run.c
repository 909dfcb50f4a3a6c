/* A change of any form run (dtr_change_run, dtr_change_start): the form's own call. */
#include "redistribute/executor/internal.h"

/* The arrays, checked; an error naming them under func. */
static dtr_status_t dtr__change_arrays(const dtr_change_t *change, const void *const *in,
                                       const size_t *in_bytes, void *const *out,
                                       const size_t *out_bytes, const char *func) {
    DTR_CHECK_PTR(change, func);
    if (in == NULL || in_bytes == NULL || out == NULL || out_bytes == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: must not be NULL (one entry per "
                          "tensor; an entry may be NULL)",
                          in == NULL ? "in" : in_bytes == NULL ? "in_bytes"
                          : out == NULL ? "out" : "out_bytes");
    return DTR_OK;
}

dtr_status_t dtr_change_run(dtr_context_t *ctx, const dtr_change_t *change,
                            const void *const *in, const size_t *in_bytes, void *const *out,
                            const size_t *out_bytes) {
    static const char *const F = "dtr_change_run";
    DTR_CHECK(dtr__change_arrays(change, in, in_bytes, out, out_bytes, F));
    switch (dtr_change_form(change)) {
    case DTR_CHANGE_ONE:
        DTR_CHECK_AS(dtr_redistribute(ctx, dtr_change_plan(change), in[0], in_bytes[0], out[0],
                                      out_bytes[0]), F);
        return DTR_OK;
    case DTR_CHANGE_BATCH:
        DTR_CHECK_AS(dtr_redistribute_batch(ctx, dtr_change_batch_plan(change), in, in_bytes,
                                            out, out_bytes), F);
        return DTR_OK;
    case DTR_CHANGE_CROSS:
        DTR_CHECK_AS(dtr_redistribute_cross(ctx, dtr_change_cross_plan(change), in[0],
                                            in_bytes[0], out[0], out_bytes[0]), F);
        return DTR_OK;
    default:
        DTR_CHECK_AS(dtr_redistribute_cross_batch(ctx, dtr_change_cross_plan(change), in,
                                                  in_bytes, out, out_bytes), F);
        return DTR_OK;
    }
}

dtr_status_t dtr_change_start(dtr_context_t *ctx, const dtr_change_t *change,
                              const void *const *in, const size_t *in_bytes, void *const *out,
                              const size_t *out_bytes, dtr_request_t **req) {
    static const char *const F = "dtr_change_start";
    DTR_CHECK(dtr__change_arrays(change, in, in_bytes, out, out_bytes, F));
    switch (dtr_change_form(change)) {
    case DTR_CHANGE_ONE:
        DTR_CHECK_AS(dtr_redistribute_start(ctx, dtr_change_plan(change), in[0], in_bytes[0],
                                            out[0], out_bytes[0], req), F);
        return DTR_OK;
    case DTR_CHANGE_BATCH:
        DTR_CHECK_AS(dtr_redistribute_batch_start(ctx, dtr_change_batch_plan(change), in,
                                                  in_bytes, out, out_bytes, req), F);
        return DTR_OK;
    case DTR_CHANGE_CROSS:
        DTR_CHECK_AS(dtr_redistribute_cross_start(ctx, dtr_change_cross_plan(change), in[0],
                                                  in_bytes[0], out[0], out_bytes[0], req), F);
        return DTR_OK;
    default:
        DTR_CHECK_AS(dtr_redistribute_cross_batch_start(ctx, dtr_change_cross_plan(change), in,
                                                        in_bytes, out, out_bytes, req), F);
        return DTR_OK;
    }
}
