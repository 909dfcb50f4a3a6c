/*
 * One change, any form (dtr_change_t): one tensor or many, on one mesh or between two. The
 * create call reads every option once, checks which apply to the form the specs make, and
 * plans with the form's own planner (plan.c, batch.c, cross.c); printing and the figures go
 * to the form's. The executor runs it (redistribute/executor/change_run.c).
 */
#include <stdlib.h>
#include <string.h>

#include "redistribute/planner/internal.h"

static const char *const C = "dtr_change_create";

struct dtr_change {
    dtr_change_form_t form;
    int n;
    dtr_plan_t *plan;            /* DTR_CHANGE_ONE */
    dtr_batch_plan_t *batch;     /* DTR_CHANGE_BATCH */
    dtr_cross_plan_t *cross;     /* DTR_CHANGE_CROSS, DTR_CHANGE_CROSS_BATCH */
    dtr__change_fp8_t *fp8;      /* opts->block_scale: the plans above move 2n tensors */
};

/* The options that the form of the change takes; an error naming the first that it does
 * not. between: the specs are on two meshes. */
static dtr_status_t dtr__change_options(const dtr_change_options_t *o, bool between) {
    if ((unsigned)o->strategy >= DTR_STRATEGY_LAST)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "opts->strategy: %d is not a strategy",
                          (int)o->strategy);
    if (o->staging_cap_bytes < 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "opts->staging_cap_bytes: %lld (0: no "
                          "cap, or a byte count)", (long long)o->staging_cap_bytes);
    if (between) {
        if (o->strategy != DTR_STRATEGY_OPTIMAL)
            return dtr__error(DTR_ERR_UNSUPPORTED, C, "opts->strategy: %s plans within one "
                              "mesh only (src and dst are on two meshes)",
                              dtr_strategy_name(o->strategy));
        if (o->backward)
            return dtr__error(DTR_ERR_UNSUPPORTED, C, "opts->backward: a change between meshes "
                              "has no backward plan (plan the way back as a change of its own)");
        return DTR_OK;
    }
    if (o->relabel)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "opts->relabel: relabels the destination "
                          "mesh of a change between meshes (src and dst share one mesh)");
    if (o->staging_cap_bytes != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "opts->staging_cap_bytes: caps the "
                          "staging of a change between meshes (src and dst share one mesh: "
                          "its collectives stage as dtr_context_set_slice_bytes says)");
    return DTR_OK;
}

/* Plans the form the specs make into c: n tensors. */
static dtr_status_t dtr__change_plan(dtr_change_t *c, int n, const dtr_spec_t *src,
                                     const dtr_spec_t *dst, const dtr_change_options_t *o) {
    if (c->form == DTR_CHANGE_CROSS || c->form == DTR_CHANGE_CROSS_BATCH) {
        dtr_cross_options_t x = {.cost = o->cost, .relabel = o->relabel,
                                 .staging_cap_bytes = o->staging_cap_bytes};
        return c->form == DTR_CHANGE_CROSS ? dtr_cross_plan_create(src, dst, &x, &c->cross)
                                           : dtr_cross_plan_create_batch(n, src, dst, &x,
                                                                         &c->cross);
    }
    dtr_plan_options_t p = {.strategy = o->strategy, .cost = o->cost, .backward = o->backward};
    if (c->form == DTR_CHANGE_BATCH)
        return dtr_batch_plan_create(n, src, dst, &p, o->cache, &c->batch);
    c->plan = malloc(sizeof *c->plan);
    if (c->plan == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, C, "the plan");
    return o->cache != NULL ? dtr_plan_cache_get(o->cache, src, dst, &p, c->plan, NULL)
                            : dtr_plan_create(src, dst, &p, c->plan);
}

dtr_status_t dtr_change_create(int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                               const dtr_change_options_t *opts, dtr_change_t **out) {
    DTR_CHECK_PTR(src, C);
    DTR_CHECK_PTR(dst, C);
    DTR_CHECK_PTR(out, C);
    if (n < 1) return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "n: %d (1 or more tensors)", n);
    if (src[0].mesh == NULL || dst[0].mesh == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "%s[0]: not initialised (dtr_spec_init)",
                          src[0].mesh == NULL ? "src" : "dst");
    dtr_change_options_t none = {0}, o = opts != NULL ? *opts : none;
    /* A ragged shard that moves (planner/ragged.c) moves as a change between meshes does, box
     * by box, even on one mesh. */
    bool between = o.between_meshes || !dtr_mesh_equal(src[0].mesh, dst[0].mesh);
    for (int i = 0; i < n && !between; i++) {
        between = dtr__ragged_pair(&src[i], &dst[i]) &&
                  (o.block_scale != 0 || !dtr__ragged_kept(&src[i], &dst[i], NULL, 0));
    }
    DTR_CHECK(dtr__change_options(&o, between));
    dtr_change_t *c = calloc(1, sizeof *c);
    if (c == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, C, "the change");
    c->n = n;
    bool one = n == 1 && !o.many && o.block_scale == 0;
    c->form = between ? (one ? DTR_CHANGE_CROSS : DTR_CHANGE_CROSS_BATCH)
                      : (one ? DTR_CHANGE_ONE : DTR_CHANGE_BATCH);
    dtr_status_t st;
    if (o.block_scale != 0) { /* the move of the quantized tensors and their scales */
        dtr_spec_t *qsrc = NULL, *qdst = NULL;
        st = dtr__change_fp8_create(n, src, dst, &o, &c->fp8, &qsrc, &qdst);
        if (st == DTR_OK) st = dtr__change_plan(c, 2 * n, qsrc, qdst, &o);
        free(qsrc);
        free(qdst);
    } else {
        st = dtr__change_plan(c, n, src, dst, &o);
    }
    if (st != DTR_OK) {
        dtr_change_destroy(c);
        return dtr__error_as(st, C);
    }
    *out = c;
    return DTR_OK;
}

void dtr_change_destroy(dtr_change_t *c) {
    if (c == NULL) return;
    free(c->plan);
    dtr_batch_plan_destroy(c->batch);
    dtr_cross_plan_destroy(c->cross);
    dtr__change_fp8_destroy(c->fp8);
    free(c);
}

dtr_change_form_t dtr_change_form(const dtr_change_t *c) {
    return c != NULL ? c->form : DTR_CHANGE_FORM_LAST;
}

int dtr_change_tensors(const dtr_change_t *c) { return c != NULL ? c->n : 0; }

int64_t dtr_change_block_scale(const dtr_change_t *c) {
    return c != NULL && c->fp8 != NULL ? c->fp8->block : 0;
}

dtr__change_fp8_t *dtr__change_fp8(const dtr_change_t *c) { return c != NULL ? c->fp8 : NULL; }

const dtr_plan_t *dtr_change_plan(const dtr_change_t *c) { return c != NULL ? c->plan : NULL; }

const dtr_batch_plan_t *dtr_change_batch_plan(const dtr_change_t *c) {
    return c != NULL ? c->batch : NULL;
}

const dtr_cross_plan_t *dtr_change_cross_plan(const dtr_change_t *c) {
    return c != NULL ? c->cross : NULL;
}

dtr_status_t dtr_change_dst(const dtr_change_t *c, int i, dtr_spec_t *out) {
    static const char *const F = "dtr_change_dst";
    DTR_CHECK_PTR(c, F);
    DTR_CHECK_PTR(out, F);
    if (i < 0 || i >= c->n)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "i: %d, the change has %d tensor%s", i,
                          c->n, c->n == 1 ? "" : "s");
    if (c->cross != NULL) DTR_CHECK_AS(dtr_cross_plan_dst(c->cross, i, out), F);
    else *out = c->plan != NULL ? c->plan->dst : c->batch->plans[i].dst;
    return DTR_OK;
}

dtr_status_t dtr_change_scales(const dtr_change_t *c, int i, dtr_spec_t *out) {
    static const char *const F = "dtr_change_scales";
    DTR_CHECK_PTR(c, F);
    DTR_CHECK_PTR(out, F);
    if (c->fp8 == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "change: not block-scaled (no scales)");
    if (i < 0 || i >= c->n)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "i: %d, the change has %d tensor%s", i,
                          c->n, c->n == 1 ? "" : "s");
    if (c->cross != NULL) DTR_CHECK_AS(dtr_cross_plan_dst(c->cross, c->n + i, out), F);
    else *out = c->batch->plans[c->n + i].dst;
    return DTR_OK;
}

dtr_status_t dtr_change_rank_bytes(const dtr_change_t *c, int rank, int64_t *send,
                                   int64_t *recv) {
    static const char *const F = "dtr_change_rank_bytes";
    DTR_CHECK_PTR(c, F);
    if (c->cross != NULL) DTR_CHECK_AS(dtr_cross_plan_rank_bytes(c->cross, rank, send, recv), F);
    else if (c->batch != NULL) DTR_CHECK_AS(dtr_batch_plan_rank_bytes(c->batch, rank, send, recv), F);
    else {
        DTR_CHECK_PTR(send, F);
        DTR_CHECK_PTR(recv, F);
        int64_t s = 0, r = 0;
        for (int k = 0; k < c->plan->nsteps; k++) {
            int64_t ks = 0, kr = 0;
            DTR_CHECK_AS(dtr_plan_step_bytes(c->plan, k, rank, &ks, &kr), F);
            s += ks;
            r += kr;
        }
        *send = s;
        *recv = r;
    }
    return DTR_OK;
}

dtr_status_t dtr_change_print(const dtr_change_t *c, int64_t max_messages, FILE *out) {
    static const char *const F = "dtr_change_print";
    DTR_CHECK_PTR(c, F);
    if (c->cross != NULL) DTR_CHECK_AS(dtr_cross_plan_print(c->cross, max_messages, out), F);
    else if (c->batch != NULL) DTR_CHECK_AS(dtr_batch_plan_print(c->batch, out), F);
    else DTR_CHECK_AS(dtr_plan_print(c->plan, out), F);
    return DTR_OK;
}

dtr_status_t dtr_change_print_json(const dtr_change_t *c, FILE *out) {
    static const char *const F = "dtr_change_print_json";
    DTR_CHECK_PTR(c, F);
    if (c->cross != NULL) DTR_CHECK_AS(dtr_cross_plan_print_json(c->cross, out), F);
    else if (c->batch != NULL) DTR_CHECK_AS(dtr_batch_plan_print_json(c->batch, out), F);
    else DTR_CHECK_AS(dtr_plan_print_json(c->plan, out), F);
    return DTR_OK;
}
