/* The backward rule for redistributions (see autograd.h). */
#include <string.h>

#include "autograd/autograd.h"
#include "core/common.h"
#include "numeric/numeric.h"

dtr_status_t dtr_backward_placements(const dtr_placement_t *src, const dtr_placement_t *grad,
                                     int n, dtr_placement_t *out) {
    DTR_CHECK_PTR(src, __func__);
    DTR_CHECK_PTR(grad, __func__);
    DTR_CHECK_PTR(out, __func__);
    if (n < 1 || n > DTR_MAX_MESH_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "n: %d, must be 1..%d", n,
                          DTR_MAX_MESH_DIMS);
    dtr_placement_t res[DTR_MAX_MESH_DIMS];
    for (int i = 0; i < n; i++) {
        if (dtr_placement_validate(src[i]) != DTR_OK)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "src[%d]: not a placement", i);
        if (dtr_placement_validate(grad[i]) != DTR_OK)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "grad[%d]: not a placement", i);
        res[i] = src[i].kind == DTR_PARTIAL && grad[i].kind != DTR_PARTIAL ? dtr_replicate()
                                                                           : src[i];
    }
    memcpy(out, res, (size_t)n * sizeof *out);
    return DTR_OK;
}

/* Both entry points; backward_dtype NULL: the input's. */
static dtr_status_t dtr__plan_backward(const char *func, const dtr_spec_t *forward_src,
                                       const dtr_spec_t *grad, const dtr_dtype_t *backward_dtype,
                                       const dtr_plan_options_t *opts, dtr_plan_t *out) {
    DTR_CHECK_PTR(forward_src, func);
    DTR_CHECK_PTR(grad, func);
    DTR_CHECK_PTR(out, func);
    if (forward_src->mesh == NULL || grad->mesh == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "%s: not initialised by dtr_spec_init",
                          forward_src->mesh == NULL ? "forward_src" : "grad");
    int n = dtr_mesh_ndims(forward_src->mesh);
    if (!dtr_mesh_equal(forward_src->mesh, grad->mesh))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "grad: its mesh differs from forward_src's");
    dtr_placement_t target[DTR_MAX_MESH_DIMS];
    DTR_CHECK(dtr_backward_placements(forward_src->placements, grad->placements, n, target));
    /* The gradient comes back in the input's dtype, cast first where the forward cast
     * (PyTorch's default backward_dtype: the backward collectives run in the input's). */
    dtr_spec_t dst;
    DTR_CHECK(dtr_spec_init(&dst, forward_src->mesh, target, n, forward_src->shape,
                            forward_src->ndim, forward_src->dtype));
    dtr_plan_options_t o = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = NULL};
    if (opts != NULL) o = *opts;
    o.backward = true;
    if (backward_dtype == NULL || *backward_dtype == forward_src->dtype)
        return dtr_plan_create(grad, &dst, &o, out);
    const dtr_dtype_info_t *b = dtr_dtype_info(*backward_dtype);
    if (b == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "backward_dtype: %d is not a dtype",
                          (int)*backward_dtype);
    if (!dtr__castable(grad->dtype, *backward_dtype) ||
        !dtr__castable(*backward_dtype, forward_src->dtype))
        return dtr__error(DTR_ERR_UNSUPPORTED, func,
                          "backward_dtype: %s between the gradient's %s and the input's %s: a "
                          "redistribution casts between float dtypes (f32 f64 f16 bf16) or "
                          "between complex ones (c64 c128)",
                          b->name, dtr_dtype_name(grad->dtype), dtr_dtype_name(forward_src->dtype));
    return dtr_plan_create_in(grad, &dst, *backward_dtype, &o, out);
}

dtr_status_t dtr_plan_backward(const dtr_spec_t *forward_src, const dtr_spec_t *grad,
                               const dtr_plan_options_t *opts, dtr_plan_t *out) {
    return dtr__plan_backward(__func__, forward_src, grad, NULL, opts, out);
}

dtr_status_t dtr_plan_backward_in(const dtr_spec_t *forward_src, const dtr_spec_t *grad,
                                  dtr_dtype_t backward_dtype, const dtr_plan_options_t *opts,
                                  dtr_plan_t *out) {
    return dtr__plan_backward(__func__, forward_src, grad, &backward_dtype, opts, out);
}

dtr_status_t dtr_divide_factors(int64_t n, double *pre, double *post) {
    DTR_CHECK_PTR(pre, __func__);
    DTR_CHECK_PTR(post, __func__);
    if (n < 1)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "n: %lld, need at least 1 worker",
                          (long long)n);
    int64_t f = 1;
    while (n % f == 0 && n / f > f) f *= 2;
    *pre = (double)f;
    *post = (double)n / (double)f;
    return DTR_OK;
}
