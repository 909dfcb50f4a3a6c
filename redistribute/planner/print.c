/* Plans as text and JSON: the CLI's output, and the trace DTR_DEBUG=TRACE prints. */
#include <string.h>

#include "redistribute/planner/internal.h"

/* A step's from and to: one placement, or the whole list for an exchange. */
static void dtr__step_from_to(const dtr_step_t *s, char *a, char *b, size_t len) {
    if (dtr__kind_of(s)->whole_mesh) {
        dtr_placements_describe(s->before, s->nplacements, a, len);
        dtr_placements_describe(s->after, s->nplacements, b, len);
    } else {
        dtr_placement_format(s->from, a, len);
        dtr_placement_format(s->to, b, len);
    }
}

/* Prints " name count" (JSON: "name":count) for every collective kind, in enum order. */
static void dtr__kind_counts(FILE *out, const int *count, bool json) {
    for (int k = 0, first = 1; k < DTR_STEP_KIND_LAST; k++) {
        if (!dtr__kinds[k]->info.collective) continue;
        if (json)
            fprintf(out, "%s\"%s\":%d", first ? "" : ",", dtr__kinds[k]->info.name, count[k]);
        else
            fprintf(out, " %s %d", dtr__kinds[k]->info.name, count[k]);
        first = 0;
    }
}

dtr_status_t dtr_plan_print(const dtr_plan_t *plan, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    char mesh[128], shape[256], from[160], to[160];
    dtr_mesh_format(plan->src.mesh, mesh, sizeof mesh);
    dtr_shape_format(plan->src.shape, plan->src.ndim, shape, sizeof shape);
    int m = dtr_mesh_ndims(plan->src.mesh);
    dtr_placements_describe(plan->src.placements, m, from, sizeof from);
    dtr_placements_describe(plan->dst.placements, m, to, sizeof to);
    fprintf(out, "plan %s%s", plan->backward ? "(backward) " : "", dtr_strategy_name(plan->strategy));
    if (plan->strategy == DTR_STRATEGY_OPTIMAL && plan->chosen_by != NULL)
        fprintf(out, " (best candidate: %s)", plan->chosen_by);
    fprintf(out, ": mesh %s, shape %s %s, %s -> %s", mesh, shape,
            dtr_dtype_name(plan->src.dtype), from, to);
    if (plan->op_dtype != plan->src.dtype) /* a cast, before the steps */
        fprintf(out, ", cast to %s first", dtr_dtype_name(plan->op_dtype));
    if (plan->op_dtype != plan->dst.dtype) /* and one after them */
        fprintf(out, ", to %s last", dtr_dtype_name(plan->dst.dtype));
    fputc('\n', out);
    uint32_t across = plan->cost.across_nodes;
    if (across != 0) {
        bool one = (across & (across - 1)) == 0;
        fprintf(out, "  nodes: mesh dim%s", one ? "" : "s");
        for (int i = 0, first = 1; i < m; i++)
            if (across & (1u << i)) {
                fprintf(out, "%s%d", first ? " " : ",", i);
                first = 0;
            }
        fprintf(out, " cross%s nodes (%g us, %g GB/s), the others stay inside one\n",
                one ? "es" : "",
                plan->cost.alpha_us[__builtin_ctz(across)],
                plan->cost.bandwidth_gbps[__builtin_ctz(across)]);
    }
    if (plan->seed_blocks)
        fprintf(out, "  blocks: the seed's own, of other lengths than the canonical layout on "
                     "the way (docs/planner.md)\n");
    if (plan->nsteps == 0) {
        fprintf(out, "  no steps: the placements are equal\n");
    } else {
        fprintf(out, "  %-3s %-5s %-28s %-15s %14s %14s %10s\n", "#", "mesh", "from -> to", "kind",
                "recv B/rank", "extra B/rank", "time us");
        for (int k = 0; k < plan->nsteps; k++) {
            const dtr_step_t *s = &plan->steps[k];
            char a[160], b[160], change[340], dim[16];
            dtr__step_from_to(s, a, b, sizeof a);
            snprintf(change, sizeof change, "%s -> %s", a, b);
            if (s->mesh_dim >= 0)
                snprintf(dim, sizeof dim, "%d", s->mesh_dim);
            else
                snprintf(dim, sizeof dim, "all");
            char nodes[64] = "";
            if (dtr_step_across_nodes(plan, k, across))
                snprintf(nodes, sizeof nodes, "  across nodes, %lld B into a node",
                         (long long)s->node_recv_bytes_max);
            fprintf(out, "  %-3d %-5s %-28s %-15s %14lld %14lld %10.2f%s\n", k + 1, dim, change,
                    dtr_step_kind_info(s->kind)->name, (long long)s->recv_bytes_max,
                    (long long)s->extra_bytes_max, s->time_us, nodes);
        }
    }
    fprintf(out, "  collectives:");
    dtr__kind_counts(out, plan->count, false);
    fprintf(out, "\n  most bytes one rank receives: %lld (lower bound %lld)\n",
            (long long)plan->recv_bytes_max, (long long)plan->lower_bound_recv_bytes);
    fprintf(out, "  peak extra memory per rank: %lld bytes; modeled time %.2f us\n",
            (long long)plan->peak_extra_bytes, plan->time_us);
    return DTR_OK;
}

bool dtr_step_across_nodes(const dtr_plan_t *plan, int step, uint32_t across) {
    if (plan == NULL || step < 0 || step >= plan->nsteps) return false;
    const dtr_step_t *s = &plan->steps[step];
    if ((unsigned)s->kind >= DTR_STEP_KIND_LAST) return false;
    if (across == 0 || plan->src.mesh == NULL) return false;
    int64_t msize[DTR_MAX_MESH_DIMS];
    int m = dtr_mesh_ndims(plan->src.mesh);
    for (int k = 0; k < m; k++) msize[k] = dtr_mesh_size(plan->src.mesh, k);
    return (dtr__step_links(s, m, msize) & across) != 0;
}

dtr_status_t dtr_plan_print_json(const dtr_plan_t *plan, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    fprintf(out, "{\"strategy\":\"%s\",", dtr_strategy_name(plan->strategy));
    if (plan->backward) fputs("\"backward\":true,", out);
    if (plan->seed_blocks) fputs("\"seed_blocks\":true,", out);
    if (plan->chosen_by != NULL) fprintf(out, "\"chosen_by\":\"%s\",", plan->chosen_by);
    if (plan->op_dtype != plan->src.dtype)
        fprintf(out, "\"cast\":{\"from\":\"%s\",\"to\":\"%s\"},", dtr_dtype_name(plan->src.dtype),
                dtr_dtype_name(plan->op_dtype));
    if (plan->op_dtype != plan->dst.dtype)
        fprintf(out, "\"cast_out\":{\"from\":\"%s\",\"to\":\"%s\"},",
                dtr_dtype_name(plan->op_dtype), dtr_dtype_name(plan->dst.dtype));
    if (plan->cost.across_nodes != 0) {
        fputs("\"mesh_dims_across_nodes\":[", out);
        for (int i = 0, first = 1; i < DTR_MAX_MESH_DIMS; i++)
            if (plan->cost.across_nodes & (1u << i)) {
                fprintf(out, "%s%d", first ? "" : ",", i);
                first = 0;
            }
        fputs("],", out);
    }
    fputs("\"steps\":[", out);
    for (int k = 0; k < plan->nsteps; k++) {
        const dtr_step_t *s = &plan->steps[k];
        char a[160], b[160];
        dtr__step_from_to(s, a, b, sizeof a);
        fprintf(out, "%s{\"mesh_dim\":%d,\"kind\":\"%s\",\"from\":\"%s\",\"to\":\"%s\"", k ? "," : "",
                s->mesh_dim, dtr_step_kind_info(s->kind)->name, a, b);
        if (s->tensor_dim >= 0) fprintf(out, ",\"tensor_dim\":%d", s->tensor_dim);
        if (s->tensor_dim2 >= 0) fprintf(out, ",\"tensor_dim2\":%d", s->tensor_dim2);
        if (plan->cost.across_nodes != 0)
            fprintf(out, ",\"across_nodes\":%s,\"node_recv_bytes_max\":%lld",
                    dtr_step_across_nodes(plan, k, plan->cost.across_nodes) ? "true" : "false",
                    (long long)s->node_recv_bytes_max);
        fprintf(out,
                ",\"recv_bytes_per_rank_max\":%lld,\"send_bytes_per_rank_max\":%lld,"
                "\"extra_bytes_per_rank_max\":%lld,\"modeled_time_us\":%.6g}",
                (long long)s->recv_bytes_max, (long long)s->send_bytes_max,
                (long long)s->extra_bytes_max, s->time_us);
    }
    fputs("],\"collectives\":{", out);
    dtr__kind_counts(out, plan->count, true);
    fprintf(out,
            "},\"recv_bytes_per_rank_max\":%lld,\"lower_bound_recv_bytes_per_rank\":%lld,"
            "\"peak_extra_bytes_per_rank\":%lld,\"modeled_time_us\":%.6g}",
            (long long)plan->recv_bytes_max, (long long)plan->lower_bound_recv_bytes,
            (long long)plan->peak_extra_bytes, plan->time_us);
    return DTR_OK;
}

static void dtr__round_dim(const dtr_batch_round_t *r, char *buf, size_t len) {
    if (r->mesh_dim >= 0)
        snprintf(buf, len, "%d", r->mesh_dim);
    else
        snprintf(buf, len, "all");
}

dtr_status_t dtr_batch_plan_print(const dtr_batch_plan_t *plan, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    if (plan->ntensors <= 0 || plan->plans == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "plan: not a batch from dtr_batch_plan_create");
    char mesh[128];
    dtr_mesh_format(plan->plans[0].src.mesh, mesh, sizeof mesh);
    fprintf(out, "batch %s: mesh %s, %d tensors, %d rounds\n",
            dtr_strategy_name(plan->plans[0].strategy), mesh, plan->ntensors, plan->nrounds);
    for (int t = 0; t < plan->ntensors; t++) {
        const dtr_plan_t *p = &plan->plans[t];
        char shape[256], from[160], to[160];
        int m = dtr_mesh_ndims(p->src.mesh);
        dtr_shape_format(p->src.shape, p->src.ndim, shape, sizeof shape);
        dtr_placements_describe(p->src.placements, m, from, sizeof from);
        dtr_placements_describe(p->dst.placements, m, to, sizeof to);
        fprintf(out, "  tensor %-3d %s %s, %s -> %s: %d steps\n", t, shape,
                dtr_dtype_name(p->src.dtype), from, to, p->nsteps);
    }
    if (plan->nrounds > 0)
        fprintf(out, "  %-3s %-5s %-15s %-12s %8s %14s %10s  %s\n", "#", "mesh", "kind", "dtype op",
                "members", "recv B/rank", "time us", "tensor.step");
    for (int r = 0; r < plan->nrounds; r++) {
        const dtr_batch_round_t *rd = &plan->rounds[r];
        char dim[16], what[32];
        dtr__round_dim(rd, dim, sizeof dim);
        if (rd->reduces)
            snprintf(what, sizeof what, "%s %s", dtr_dtype_name(rd->dtype),
                     dtr_reduce_op_name(rd->op));
        else
            snprintf(what, sizeof what, "-");
        fprintf(out, "  %-3d %-5s %-15s %-12s %8d %14lld %10.2f  ", r + 1, dim,
                dtr_step_kind_info(rd->kind)->name, what, rd->count,
                (long long)rd->recv_bytes_max, rd->time_us);
        for (int j = rd->first; j < rd->first + rd->count; j++) {
            if (j - rd->first == 8) {
                fprintf(out, " ... (%d more)", rd->first + rd->count - j);
                break;
            }
            fprintf(out, "%s%d.%d", j > rd->first ? " " : "", plan->items[j].tensor,
                    plan->items[j].step + 1);
        }
        fprintf(out, "%s\n", rd->coalesced ? "" : "  (member by member)");
    }
    fprintf(out, "  collectives:");
    dtr__kind_counts(out, plan->count, false);
    fprintf(out, " (one by one:");
    dtr__kind_counts(out, plan->member_count, false);
    fprintf(out, ")\n  most bytes one rank receives: %lld (lower bound %lld)\n",
            (long long)plan->recv_bytes_max, (long long)plan->lower_bound_recv_bytes);
    fprintf(out, "  peak extra memory per rank: at most %lld bytes; modeled time %.2f us (one by "
                 "one %.2f us)\n",
            (long long)plan->peak_extra_bytes, plan->time_us, plan->one_by_one_time_us);
    return DTR_OK;
}

static void dtr__counts_json(const int *count, FILE *out) {
    fputc('{', out);
    dtr__kind_counts(out, count, true);
    fputc('}', out);
}

dtr_status_t dtr_batch_plan_print_json(const dtr_batch_plan_t *plan, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    if (plan->ntensors <= 0 || plan->plans == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "plan: not a batch from dtr_batch_plan_create");
    fprintf(out, "{\"strategy\":\"%s\",\"ntensors\":%d,\"plans\":[",
            dtr_strategy_name(plan->plans[0].strategy), plan->ntensors);
    for (int t = 0; t < plan->ntensors; t++) {
        if (t) fputc(',', out);
        DTR_CHECK(dtr_plan_print_json(&plan->plans[t], out));
    }
    fputs("],\"rounds\":[", out);
    for (int r = 0; r < plan->nrounds; r++) {
        const dtr_batch_round_t *rd = &plan->rounds[r];
        fprintf(out, "%s{\"kind\":\"%s\",\"mesh_dim\":%d,", r ? "," : "",
                dtr_step_kind_info(rd->kind)->name, rd->mesh_dim);
        if (rd->reduces)
            fprintf(out, "\"dtype\":\"%s\",\"op\":\"%s\",", dtr_dtype_name(rd->dtype),
                    dtr_reduce_op_name(rd->op));
        fprintf(out, "\"coalesced\":%s,\"members\":[", rd->coalesced ? "true" : "false");
        for (int j = rd->first; j < rd->first + rd->count; j++)
            fprintf(out, "%s[%d,%d]", j > rd->first ? "," : "", plan->items[j].tensor,
                    plan->items[j].step);
        fprintf(out, "],\"recv_bytes_per_rank_max\":%lld,\"modeled_time_us\":%.6g}",
                (long long)rd->recv_bytes_max, rd->time_us);
    }
    fputs("],\"collectives\":", out);
    dtr__counts_json(plan->count, out);
    fputs(",\"one_by_one_collectives\":", out);
    dtr__counts_json(plan->member_count, out);
    fprintf(out,
            ",\"recv_bytes_per_rank_max\":%lld,\"lower_bound_recv_bytes_per_rank\":%lld,"
            "\"peak_extra_bytes_per_rank\":%lld,\"modeled_time_us\":%.6g,"
            "\"one_by_one_modeled_time_us\":%.6g}",
            (long long)plan->recv_bytes_max, (long long)plan->lower_bound_recv_bytes,
            (long long)plan->peak_extra_bytes, plan->time_us, plan->one_by_one_time_us);
    return DTR_OK;
}
