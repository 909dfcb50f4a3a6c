/* dtr_plan_create and friends: argument checks, the transition rules that are errors, and
 * the cost model's parameters. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"
#include "redistribute/planner/internal.h"

void dtr_cost_model_default(dtr_cost_model_t *out) {
    if (out == NULL) return;
    for (int i = 0; i < DTR_MAX_MESH_DIMS; i++) {
        out->alpha_us[i] = DTR_DEFAULT_ALPHA_US;
        out->bandwidth_gbps[i] = DTR_DEFAULT_BANDWIDTH_GBPS;
    }
    out->local_gbps = DTR_DEFAULT_LOCAL_GBPS;
    out->across_nodes = 0;
}

/* Parses "5" or "5,20,..." into v[0..DTR_MAX_MESH_DIMS), the last value repeating. */
static dtr_status_t dtr__parse_list(const char *text, const char *what, bool positive,
                                    double *v, const char *func) {
    double vals[DTR_MAX_MESH_DIMS];
    int n = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        while (*end == ' ') end++;
        if (end == p || errno != 0 || !isfinite(x) || x < 0 || (positive && x == 0) ||
            (*end != ',' && *end != '\0'))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "%s \"%s\": item %d must be a finite number %s", what, text, n,
                              positive ? "> 0" : ">= 0");
        if (n == DTR_MAX_MESH_DIMS)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "%s \"%s\": more than %d values (one per mesh dim)", what, text,
                              DTR_MAX_MESH_DIMS);
        vals[n++] = x;
        if (*end == '\0') break;
        p = end + 1;
    }
    for (int i = 0; i < DTR_MAX_MESH_DIMS; i++) v[i] = vals[i < n ? i : n - 1];
    return DTR_OK;
}

dtr_status_t dtr_cost_model_set(dtr_cost_model_t *model, const char *alpha_us,
                                const char *bandwidth_gbps, const char *local_gbps) {
    DTR_CHECK_PTR(model, __func__);
    dtr_cost_model_t m = *model;
    if (alpha_us != NULL) DTR_CHECK(dtr__parse_list(alpha_us, "alpha_us", false, m.alpha_us, __func__));
    if (bandwidth_gbps != NULL)
        DTR_CHECK(dtr__parse_list(bandwidth_gbps, "bandwidth_gbps", true, m.bandwidth_gbps, __func__));
    if (local_gbps != NULL) {
        double v[DTR_MAX_MESH_DIMS];
        DTR_CHECK(dtr__parse_list(local_gbps, "local_gbps", true, v, __func__));
        m.local_gbps = v[0];
    }
    *model = m;
    return DTR_OK;
}

/* One value of an inter-node figure: the argument, else the variable, else the default. */
static dtr_status_t dtr__inter_value(const char *text, const char *arg, const char *var,
                                     bool positive, double fallback, double *out) {
    const char *v = text != NULL ? text : getenv(var);
    if (v == NULL) {
        *out = fallback;
        return DTR_OK;
    }
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || errno != 0 || !isfinite(x) || x < 0 || (positive && x == 0))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_cost_model_nodes",
                          "%s \"%s\": must be one finite number %s", text != NULL ? arg : var,
                          v, positive ? "> 0" : ">= 0");
    *out = x;
    return DTR_OK;
}

dtr_status_t dtr_cost_model_nodes(dtr_cost_model_t *model, uint32_t across,
                                  const char *inter_alpha_us, const char *inter_bandwidth_gbps) {
    DTR_CHECK_PTR(model, __func__);
    if (across >> DTR_MAX_MESH_DIMS != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "across: 0x%x names a mesh dim past %d", (unsigned)across,
                          DTR_MAX_MESH_DIMS - 1);
    double alpha, bw;
    DTR_CHECK(dtr__inter_value(inter_alpha_us, "inter_alpha_us", "DTR_INTER_ALPHA_US", false,
                               DTR_DEFAULT_INTER_ALPHA_US, &alpha));
    DTR_CHECK(dtr__inter_value(inter_bandwidth_gbps, "inter_bandwidth_gbps",
                               "DTR_INTER_BANDWIDTH_GBPS", true, DTR_DEFAULT_INTER_BANDWIDTH_GBPS,
                               &bw));
    for (int i = 0; i < DTR_MAX_MESH_DIMS; i++)
        if (across & (1u << i)) {
            model->alpha_us[i] = alpha;
            model->bandwidth_gbps[i] = bw;
        }
    model->across_nodes = across;
    return DTR_OK;
}

dtr_status_t dtr_mesh_dims_parse(const char *text, int ndims, uint32_t *out) {
    DTR_CHECK_PTR(text, __func__);
    DTR_CHECK_PTR(out, __func__);
    uint32_t mask = 0;
    if (*text == '\0' || strcmp(text, "none") == 0) {
        *out = 0;
        return DTR_OK;
    }
    const char *p = text;
    for (int item = 0;; item++) {
        char *end;
        errno = 0;
        long d = strtol(p, &end, 10);
        if (end == p || errno != 0 || (*end != ',' && *end != '\0') || d < 0 || d >= ndims)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "\"%s\": item %d is not a mesh dim of a %d-d mesh (0..%d)", text,
                              item, ndims, ndims - 1);
        if (mask & (1u << d))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "\"%s\": mesh dim %ld named twice", text, d);
        mask |= 1u << d;
        if (*end == '\0') break;
        p = end + 1;
    }
    *out = mask;
    return DTR_OK;
}

dtr_status_t dtr_cost_model_from_env(dtr_cost_model_t *out) {
    DTR_CHECK_PTR(out, __func__);
    dtr_cost_model_t m;
    dtr_cost_model_default(&m);
    const char *names[3] = {"DTR_ALPHA_US", "DTR_BANDWIDTH_GBPS", "DTR_LOCAL_GBPS"};
    for (int k = 0; k < 3; k++) {
        const char *v = getenv(names[k]), *set[3] = {NULL, NULL, NULL};
        set[k] = v;
        if (v != NULL && dtr_cost_model_set(&m, set[0], set[1], set[2]) != DTR_OK)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "%s: %s", names[k],
                              dtr__last_detail());
    }
    *out = m;
    return DTR_OK;
}

dtr_status_t dtr__check_spec(const dtr_spec_t *spec, const char *name, const char *func) {
    if (spec == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: must not be NULL", name);
    if (spec->mesh == NULL || dtr_dtype_info(spec->dtype) == NULL || spec->ndim < 0 ||
        spec->ndim > DTR_MAX_TENSOR_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "%s: not initialised by dtr_spec_init", name);
    for (int i = 0; i < dtr_mesh_ndims(spec->mesh); i++) {
        dtr_placement_t p = spec->placements[i];
        if ((unsigned)p.kind >= DTR_PLACEMENT_KIND_LAST ||
            (p.kind == DTR_SHARD && (p.dim < 0 || p.dim >= spec->ndim || p.order < 0 ||
                                     p.order >= DTR_MAX_MESH_DIMS || p.split_factor > 1 ||
                                     p.nsizes < 0 || (p.nsizes > 0 && p.sizes == NULL))) ||
            (p.kind == DTR_PARTIAL && (unsigned)p.op >= DTR_REDUCE_OP_LAST))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "%s: placements[%d] not initialised by dtr_spec_init", name, i);
    }
    return DTR_OK;
}

/* A placement a complex dtype can reduce: anything but a Partial other than sum and avg
 * (such a Partial may be kept as it is while nothing is reduced). */
static bool dtr__complex_op(dtr_placement_t p) {
    return p.kind != DTR_PARTIAL || p.op == DTR_REDUCE_SUM || p.op == DTR_REDUCE_AVG;
}

/* The checks every strategy shares; fills ctx. */
static dtr_status_t dtr__check_pair(const dtr_spec_t *src, const dtr_spec_t *dst,
                                    bool backward, const char *func) {
    char why[512];
    DTR_CHECK(dtr__check_spec(src, "src", func));
    DTR_CHECK(dtr__check_spec(dst, "dst", func));
    if (!dtr_mesh_equal(src->mesh, dst->mesh))
        return dtr__error(DTR_ERR_UNSUPPORTED, func,
                          "dst: its mesh differs from src's (redistribution across meshes is not "
                          "supported)");
    char a[256], b[256];
    if (dtr__ragged_pair(src, dst) && !dtr__ragged_kept(src, dst, why, sizeof why))
        return dtr__error(DTR_ERR_UNSUPPORTED, func,
                          "%s; a change between meshes moves it (dtr_change_create does so by "
                          "itself, dtr_cross_plan_create, dtr run --to-mesh)",
                          why);
    if (src->ndim != dst->ndim || memcmp(src->shape, dst->shape, (size_t)src->ndim * sizeof(int64_t)) != 0) {
        dtr_shape_format(src->shape, src->ndim, a, sizeof a);
        dtr_shape_format(dst->shape, dst->ndim, b, sizeof b);
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "dst: shape %s differs from src's %s", b, a);
    }
    /* A cast (PyTorch's forward_dtype): the input is cast to dst's dtype first, and every
     * step runs in it, so the checks below are of that dtype. */
    const dtr_dtype_info_t *info = dtr_dtype_info(dst->dtype), *from = dtr_dtype_info(src->dtype);
    if (!dtr__castable(src->dtype, dst->dtype))
        return dtr__error(DTR_ERR_UNSUPPORTED, func,
                          "dst: dtype %s from src's %s: a redistribution casts between float "
                          "dtypes (f32 f64 f16 bf16) or between complex ones (c64 c128)%s",
                          info->name, from->name, dtr__cast_hint(src->dtype, dst->dtype));
    /* Does the change reduce any Partial? (A kept complex P(max) is then reduced too where
     * the ops do not commute: partial_order.c.) */
    bool reduces = false;
    for (int i = 0; i < dtr_mesh_ndims(src->mesh); i++)
        reduces |= src->placements[i].kind == DTR_PARTIAL &&
                   !dtr_placement_equal(src->placements[i], dst->placements[i]);
    for (int i = 0; i < dtr_mesh_ndims(src->mesh); i++) {
        dtr_placement_t f = src->placements[i], t = dst->placements[i];
        dtr_placement_format(f, a, sizeof a);
        dtr_placement_format(t, b, sizeof b);
        int64_t n = dtr_mesh_size(src->mesh, i);
        if (info->is_complex && (!dtr__complex_op(f) || !dtr__complex_op(t)) &&
            (reduces || !dtr_placement_equal(f, t)))
            return dtr__error(DTR_ERR_UNSUPPORTED, func,
                              "mesh dim %d: %s -> %s on %s: complex values reduce by sum and avg "
                              "only (max, min and product are refused, as in PyTorch)",
                              i, a, b, info->name);
        if (f.kind == DTR_PARTIAL && t.kind == DTR_PARTIAL && f.op != t.op)
            return dtr__error(DTR_ERR_UNSUPPORTED, func,
                              "mesh dim %d: %s -> %s: a Partial cannot change its reduce op "
                              "(reduce to R first)",
                              i, a, b);
        if (f.kind == DTR_SHARD && t.kind == DTR_PARTIAL && t.op != DTR_REDUCE_SUM)
            return dtr__error(DTR_ERR_UNSUPPORTED, func,
                              "mesh dim %d: %s -> %s: a Shard becomes Partial only as P(sum) "
                              "(its chunk in zeros, as in PyTorch); zeros are no partition "
                              "for %s",
                              i, a, b, dtr_reduce_op_name(t.op));
        if (f.kind == DTR_SHARD && t.kind == DTR_PARTIAL && backward)
            return dtr__error(DTR_ERR_UNSUPPORTED, func,
                              "mesh dim %d: %s -> %s: a backward plan does not make a Shard "
                              "Partial (the backward rule never asks for it)",
                              i, a, b);
        if (f.kind == DTR_REPLICATE && t.kind == DTR_PARTIAL && backward)
            continue; /* a pass-through: nothing is divided */
        if (f.kind == DTR_REPLICATE && t.kind == DTR_PARTIAL && t.op == DTR_REDUCE_PRODUCT)
            return dtr__error(DTR_ERR_UNSUPPORTED, func,
                              "mesh dim %d: %s -> %s: no partition of a value into a product is "
                              "defined",
                              i, a, b);
        if (f.kind == DTR_REPLICATE && t.kind == DTR_PARTIAL && t.op == DTR_REDUCE_SUM && n > 1 &&
            (!info->is_float || info->storage_only))
            return dtr__error(DTR_ERR_UNSUPPORTED, func,
                              "mesh dim %d: %s -> %s divides by %lld, which %s cannot do exactly",
                              i, a, b, (long long)n, info->name);
        if (f.kind == DTR_PARTIAL && t.kind != DTR_PARTIAL && info->storage_only && n > 1)
            return dtr__error(DTR_ERR_UNSUPPORTED, func,
                              "mesh dim %d: %s -> %s reduces, and %s is storage only", i, a, b,
                              info->name);
    }
    return DTR_OK;
}

dtr_status_t dtr_plan_create(const dtr_spec_t *src, const dtr_spec_t *dst,
                             const dtr_plan_options_t *opts, dtr_plan_t *out) {
    DTR_CHECK_PTR(out, __func__);
    bool backward = opts != NULL && opts->backward;
    DTR_CHECK(dtr__check_pair(src, dst, backward, __func__));
    dtr_strategy_t strategy = opts != NULL ? opts->strategy : DTR_STRATEGY_OPTIMAL;
    if ((unsigned)strategy >= DTR_STRATEGY_LAST)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "opts->strategy: %d is not a strategy", (int)strategy);
    /* Ragged shards: planned on their stand-ins (ragged.c), the plan made theirs at the end. */
    dtr__ragged_t rg;
    bool ragged = dtr__ragged_pair(src, dst);
    if (ragged && strategy == DTR_STRATEGY_COMPAT)
        return dtr__error(DTR_ERR_UNSUPPORTED, __func__,
                          "compat: the seed algorithm knows only the chunk rule, not the ragged "
                          "shard of %s; the optimal strategy handles this change",
                          dtr_spec_ragged(src) ? "src" : "dst");
    if (ragged) {
        DTR_CHECK_AS(dtr__ragged_stand_in(src, dst, &rg), __func__);
        src = &rg.proxy_src;
        dst = &rg.proxy_dst;
    }
    dtr_cost_model_t cost;
    if (opts != NULL && opts->cost != NULL) {
        cost = *opts->cost;
        for (int i = 0; i < DTR_MAX_MESH_DIMS; i++)
            if (!isfinite(cost.alpha_us[i]) || cost.alpha_us[i] < 0 ||
                !isfinite(cost.bandwidth_gbps[i]) || cost.bandwidth_gbps[i] <= 0)
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                                  "opts->cost: mesh dim %d: alpha %g us, bandwidth %g GB/s (need "
                                  "alpha >= 0, bandwidth > 0)",
                                  i, cost.alpha_us[i], cost.bandwidth_gbps[i]);
        if (!isfinite(cost.local_gbps) || cost.local_gbps <= 0)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "opts->cost: local_gbps %g must be > 0", cost.local_gbps);
    } else {
        DTR_CHECK(dtr_cost_model_from_env(&cost));
    }
    dtr__ctx_t ctx;
    dtr__ctx_init(&ctx, dst, &cost); /* (the steps run in dst's dtype) */
    if (ragged) {
        ctx.ragged_mdims = rg.mdims;
        ctx.ragged_tdims = rg.tdims;
    }
    int m = ctx.mdims;
    ctx.ordered = !dtr__orders_default(src->placements, m) || !dtr__orders_default(dst->placements, m);
    /* Built in a local and copied out, so *out is untouched on error. */
    dtr_plan_t plan;
    char why[640];
    if (ctx.ordered && strategy == DTR_STRATEGY_COMPAT)
        return dtr__error(DTR_ERR_UNSUPPORTED, __func__,
                          "compat: the seed algorithm knows only mesh-dim order, not the shard "
                          "order of %s; the optimal strategy handles this change",
                          dtr__orders_default(src->placements, m) ? "dst" : "src");
    if (dtr__zero_fill_dims(&ctx, src->placements, dst->placements) != 0) {
        if (strategy == DTR_STRATEGY_COMPAT)
            return dtr__error(DTR_ERR_UNSUPPORTED, __func__,
                              "compat: the seed algorithm has no Shard -> Partial; the optimal "
                              "strategy handles this change");
        DTR_CHECK(dtr__plan_from_zero_fill(&ctx, src, dst, &plan));
    } else if (!dtr__partials_ok(&ctx, src->placements, dst->placements, backward, why,
                                 sizeof why)) {
        return dtr__error(DTR_ERR_UNSUPPORTED, __func__, "%s", why);
    } else if (strategy == DTR_STRATEGY_COMPAT) {
        if (!dtr__plan_compat(&ctx, src, dst, true, NULL, &plan, why, sizeof why))
            return dtr__error(DTR_ERR_UNSUPPORTED, __func__,
                              "compat: %s; the optimal strategy handles this change",
                              why);
        dtr__plan_finish(&ctx, src, dst, &plan);
        if (plan.seed_blocks) dtr__seed_figures(&ctx, &plan); /* (compat checked it fits) */
    } else {
        DTR_CHECK(dtr__plan_optimal(&ctx, src, dst, &plan));
    }
    if (ragged && !dtr__ragged_respects(&ctx, &plan))
        return dtr__error(DTR_ERR_UNSUPPORTED, __func__,
                          "no plan within one mesh keeps the ragged shards as they are; a "
                          "change between meshes moves them (dtr_change_create does so by "
                          "itself, dtr_cross_plan_create, dtr run --to-mesh)");
    if (ragged) dtr__ragged_restore(&rg, &plan);
    plan.backward = backward;
    plan.op_dtype = dst->dtype;
    if (backward) {
        /* R -> P(sum) keeps its values: its scale step becomes a relabel, which costs nothing. */
        for (int k = 0; k < plan.nsteps; k++) {
            dtr_step_t *s = &plan.steps[k];
            if (s->kind != DTR_STEP_LOCAL_SCALE) continue;
            plan.time_us -= s->time_us;
            plan.count[DTR_STEP_LOCAL_SCALE]--;
            plan.count[DTR_STEP_LOCAL_RELABEL]++;
            s->kind = DTR_STEP_LOCAL_RELABEL;
            s->scale = 1.0;
            s->time_us = 0;
        }
    }
    if (DTR_LOG_TRACE <= dtr__log_level()) dtr_plan_print(&plan, stderr);
    *out = plan;
    return DTR_OK;
}

/* The figures of a last cast from the steps' dtype (plan->dst's until now) to dst's. */
static void dtr__plan_cast_out(dtr_plan_t *plan, const dtr_spec_t *dst) {
    dtr__ctx_t ctx;
    dtr__ctx_init(&ctx, &plan->dst, &plan->cost);
    int64_t shape[DTR_MAX_TENSOR_DIMS], off[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_MESH_DIMS] = {0};
    /* (coordinate 0's is the largest, or the longest slice's of a ragged shard) */
    dtr__layout(&ctx, dst->placements, zero, shape, off);
    dtr__ragged_largest(&ctx, dst->placements, shape);
    int64_t numel = 1;
    for (int d = 0; d < ctx.ndim; d++) numel *= shape[d];
    int64_t op_bytes = numel * ctx.item, out_bytes = numel * dtr_dtype_info(dst->dtype)->size;
    bool moves = false;
    for (int k = 0; k < plan->nsteps; k++) moves |= !dtr__kind_of(&plan->steps[k])->keeps_block;
    /* Without a step that moves data, a first cast goes into a buffer instead of the output;
     * otherwise the last step's output (counted in its figures) is that buffer. */
    if (!moves && plan->src.dtype != plan->dst.dtype && op_bytes > plan->peak_extra_bytes)
        plan->peak_extra_bytes = op_bytes;
    plan->time_us += (double)(op_bytes + out_bytes) / (plan->cost.local_gbps * 1e3);
    plan->op_dtype = plan->dst.dtype;
    plan->dst = *dst;
}

dtr_status_t dtr_plan_create_in(const dtr_spec_t *src, const dtr_spec_t *dst,
                                dtr_dtype_t op_dtype, const dtr_plan_options_t *opts,
                                dtr_plan_t *out) {
    DTR_CHECK_PTR(out, __func__);
    DTR_CHECK(dtr__check_spec(src, "src", __func__));
    DTR_CHECK(dtr__check_spec(dst, "dst", __func__));
    if ((unsigned)op_dtype >= DTR_DTYPE_LAST)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "op_dtype: %d is not a dtype",
                          (int)op_dtype);
    const char *op = dtr_dtype_name(op_dtype);
    if (!dtr__castable(src->dtype, op_dtype) || !dtr__castable(op_dtype, dst->dtype))
        return dtr__error(DTR_ERR_UNSUPPORTED, __func__,
                          "op_dtype: %s between src's %s and dst's %s: a redistribution casts "
                          "between float dtypes (f32 f64 f16 bf16) or between complex ones (c64 "
                          "c128)",
                          op, dtr_dtype_name(src->dtype), dtr_dtype_name(dst->dtype));
    dtr_spec_t in_op = *dst;
    in_op.dtype = op_dtype;
    dtr_plan_t plan;
    DTR_CHECK(dtr_plan_create(src, &in_op, opts, &plan));
    if (op_dtype != dst->dtype) dtr__plan_cast_out(&plan, dst);
    *out = plan;
    return DTR_OK;
}

dtr_status_t dtr__plan_compat_unchecked(const dtr_spec_t *src, const dtr_spec_t *dst,
                                        dtr_plan_t *out, bool *safe) {
    DTR_CHECK_PTR(out, __func__);
    DTR_CHECK_PTR(safe, __func__);
    DTR_CHECK(dtr__check_pair(src, dst, false, __func__));
    if (dtr__ragged_pair(src, dst))
        return dtr__error(DTR_ERR_UNSUPPORTED, __func__,
                          "compat: the seed algorithm knows only the chunk rule, not ragged "
                          "shards");
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    dtr__ctx_t ctx;
    dtr__ctx_init(&ctx, dst, &cost);
    if (dtr__zero_fill_dims(&ctx, src->placements, dst->placements) != 0)
        return dtr__error(DTR_ERR_UNSUPPORTED, __func__,
                          "compat: the seed algorithm has no Shard -> Partial");
    if (!dtr__orders_default(src->placements, ctx.mdims) ||
        !dtr__orders_default(dst->placements, ctx.mdims))
        return dtr__error(DTR_ERR_UNSUPPORTED, __func__,
                          "compat: the seed algorithm knows only mesh-dim order");
    *safe = dtr__plan_compat(&ctx, src, dst, true, NULL, out, NULL, 0);
    dtr__plan_finish(&ctx, src, dst, out);
    if (out->seed_blocks) dtr__seed_figures(&ctx, out);
    return DTR_OK;
}

dtr_status_t dtr_plan_step_bytes(const dtr_plan_t *plan, int step, int rank, int64_t *send,
                                 int64_t *recv) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(send, __func__);
    DTR_CHECK_PTR(recv, __func__);
    DTR_CHECK(dtr__check_spec(&plan->src, "plan->src", __func__));
    if (step < 0 || step >= plan->nsteps)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "step: %d, the plan has %d steps",
                          step, plan->nsteps);
    if ((unsigned)plan->steps[step].kind >= DTR_STEP_KIND_LAST)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "plan->steps[%d].kind: %d, not a "
                          "step kind", step, (int)plan->steps[step].kind);
    int64_t coord[DTR_MAX_MESH_DIMS];
    DTR_CHECK_AS(dtr_mesh_coord(plan->src.mesh, rank, coord), __func__);
    dtr__ctx_t ctx;
    dtr__ctx_init(&ctx, &plan->dst, &plan->cost);
    if (plan->seed_blocks)
        dtr__seed_step_bytes(&ctx, plan, step, coord, send, recv);
    else
        dtr__step_rank_bytes(&ctx, &plan->steps[step], coord, send, recv);
    return DTR_OK;
}

dtr_status_t dtr_plan_lower_bound(const dtr_spec_t *src, const dtr_spec_t *dst, int64_t *bytes) {
    DTR_CHECK_PTR(bytes, __func__);
    DTR_CHECK(dtr__check_pair(src, dst, false, __func__));
    dtr__ragged_t rg; /* (the stand-ins' bound is the change's: ragged.c) */
    if (dtr__ragged_pair(src, dst)) {
        DTR_CHECK_AS(dtr__ragged_stand_in(src, dst, &rg), __func__);
        src = &rg.proxy_src;
        dst = &rg.proxy_dst;
    }
    dtr__ctx_t ctx;
    dtr__ctx_init(&ctx, dst, NULL); /* the bound needs no cost model */
    *bytes = dtr__lower_bound(&ctx, src->placements, dst->placements);
    return DTR_OK;
}
