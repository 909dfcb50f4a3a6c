/* The planner's tables: the step kinds, one row each from its kind_*.c (kinds.h: what a
 * plan's steps are, printed by the CLI and by dtr_plan_print, and the planner's rules for
 * each), and the strategies, by name. */
#include "redistribute/planner/internal.h"

const dtr__kind_t *const dtr__kinds[DTR_STEP_KIND_LAST] = {
    [DTR_STEP_ALL_GATHER] = &dtr__kind_all_gather,
    [DTR_STEP_REDUCE_SCATTER] = &dtr__kind_reduce_scatter,
    [DTR_STEP_ALL_REDUCE] = &dtr__kind_all_reduce,
    [DTR_STEP_ALL_TO_ALL] = &dtr__kind_all_to_all,
    [DTR_STEP_EXCHANGE] = &dtr__kind_exchange,
    [DTR_STEP_REDUCE_EXCHANGE] = &dtr__kind_reduce_exchange,
    [DTR_STEP_LOCAL_CHUNK] = &dtr__kind_local_chunk,
    [DTR_STEP_LOCAL_SCALE] = &dtr__kind_local_scale,
    [DTR_STEP_LOCAL_RELABEL] = &dtr__kind_local_relabel,
    [DTR_STEP_LOCAL_ZERO_FILL] = &dtr__kind_local_zero_fill,
};

const dtr_step_kind_info_t *dtr_step_kind_info(dtr_step_kind_t kind) {
    if ((unsigned)kind >= DTR_STEP_KIND_LAST) return NULL;
    return &dtr__kinds[kind]->info;
}

static const char *const dtr__strategy_names[DTR_STRATEGY_LAST] = {
    [DTR_STRATEGY_OPTIMAL] = "optimal",
    [DTR_STRATEGY_COMPAT] = "compat",
};

const char *dtr_strategy_name(dtr_strategy_t strategy) {
    if ((unsigned)strategy >= DTR_STRATEGY_LAST) return NULL;
    return dtr__strategy_names[strategy];
}

dtr_status_t dtr_strategy_parse(const char *text, dtr_strategy_t *out) {
    DTR_CHECK_PTR(text, __func__);
    DTR_CHECK_PTR(out, __func__);
    for (int s = 0; s < DTR_STRATEGY_LAST; s++) {
        const char *p = dtr__skip_space(text);
        if (dtr__scan_word(&p, dtr__strategy_names[s]) && *dtr__skip_space(p) == '\0') {
            *out = (dtr_strategy_t)s;
            return DTR_OK;
        }
    }
    return dtr__error(DTR_ERR_PARSE, __func__, "text \"%s\": not a strategy (optimal, compat)",
                      text);
}

unsigned dtr__step_links(const dtr_step_t *s, int mdims, const int64_t *msize) {
    const dtr__kind_t *kind = dtr__kind_of(s);
    if (!kind->info.collective) return 0;
    unsigned links = 0;
    for (int k = 0; k < mdims; k++)
        if (msize[k] > 1 && (kind->crosses != NULL ? kind->crosses(s, mdims, msize, k)
                                                   : k == s->mesh_dim))
            links |= 1u << k;
    return links;
}
