/* The planner's tables: the step kinds (what a plan's steps are, printed by the CLI and by
 * dtr_plan_print) and the strategies, by name. */
#include "redistribute/planner/internal.h"

static const dtr_step_kind_info_t dtr__step_kinds[DTR_STEP_KIND_LAST] = {
    [DTR_STEP_ALL_GATHER] = {"all_gather", true, "S(d) -> R: gather the chunks of dim d"},
    [DTR_STEP_REDUCE_SCATTER] = {"reduce_scatter", true, "P -> S(d): reduce, keep chunk of d"},
    [DTR_STEP_ALL_REDUCE] = {"all_reduce", true, "P -> R: reduce, everyone keeps the result"},
    [DTR_STEP_ALL_TO_ALL] = {"all_to_all", true, "S(a) -> S(b): gather a and scatter b at once"},
    [DTR_STEP_EXCHANGE] = {"exchange", true,
                           "any layout change: each rank sends each peer exactly what that "
                           "peer needs and lacks (one all-to-all-v over the mesh)"},
    [DTR_STEP_REDUCE_EXCHANGE] = {"reduce_exchange", true,
                                  "P -> S(d) under a later shard of d: reduce balanced parts "
                                  "over the mesh dim, then send each part to its owner"},
    [DTR_STEP_LOCAL_CHUNK] = {"local_chunk", false, "R -> S(d): keep this rank's chunk"},
    [DTR_STEP_LOCAL_SCALE] = {"local_scale", false, "R -> P(sum): divide by the mesh dim size"},
    [DTR_STEP_LOCAL_RELABEL] = {"local_relabel", false,
                                "R -> P(avg|max|min), or any change on mesh dims of one "
                                "rank: every block and value stays"},
    [DTR_STEP_LOCAL_ZERO_FILL] = {"local_zero_fill", false,
                                  "S(d) -> P(sum): this rank's chunk, zeros elsewhere in the "
                                  "extent of d it was cut from"},
};

const dtr_step_kind_info_t *dtr_step_kind_info(dtr_step_kind_t kind) {
    if ((unsigned)kind >= DTR_STEP_KIND_LAST) return NULL;
    return &dtr__step_kinds[kind];
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

/* Does "before" split tensor dim d, down to mesh dim k, exactly as "after" does (the same
 * mesh dims of more than one rank, in the same order)? Then a rank's target on d lies in the
 * chunk its own coordinates on those dims pick, which the sources sharing them hold: nothing
 * crosses mesh dim k. */
static bool dtr__same_split_to(const dtr_step_t *s, int mdims, const int64_t *msize, int d,
                               int k) {
    int b[DTR_MAX_MESH_DIMS], a[DTR_MAX_MESH_DIMS];
    int nb = dtr__shard_seq(s->before, mdims, d, b), na = dtr__shard_seq(s->after, mdims, d, a);
    for (int x = 0, y = 0;; x++, y++) {
        while (x < nb && msize[b[x]] <= 1) x++;
        while (y < na && msize[a[y]] <= 1) y++;
        if (x == nb || y == na || b[x] != a[y]) return false;
        if (b[x] == k) return true;
    }
}

unsigned dtr__step_links(const dtr_step_t *s, int mdims, const int64_t *msize) {
    unsigned links = 0;
    if (!dtr_step_kind_info(s->kind)->collective) return 0;
    int i = s->mesh_dim;
    for (int k = 0; k < mdims; k++) {
        if (msize[k] <= 1) continue;
        bool moves;
        switch (s->kind) {
        case DTR_STEP_EXCHANGE: /* peers differ from a rank only where "before" shards */
            moves = s->before[k].kind == DTR_SHARD &&
                    !dtr__same_split_to(s, mdims, msize, s->before[k].dim, k);
            break;
        case DTR_STEP_REDUCE_EXCHANGE: /* the group, then the later shards of d it serves */
            moves = k == i || (k > i && s->before[k].kind == DTR_SHARD &&
                               s->before[k].dim == s->after[i].dim);
            break;
        default:
            moves = k == i;
            break;
        }
        if (moves) links |= 1u << k;
    }
    return links;
}
