/* Plans as text and JSON: the CLI's output, and the trace DTR_DEBUG=TRACE prints. */
#include <string.h>

#include "redistribute/planner/internal.h"

static void dtr__placements_text(const dtr_placement_t *pl, int n, char *buf, size_t len) {
    if (dtr_placements_format(pl, n, buf, len) != DTR_OK) snprintf(buf, len, "?");
}

/* A step's from and to: one placement, or the whole list for an exchange. */
static void dtr__step_from_to(const dtr_step_t *s, char *a, char *b, size_t len) {
    if (s->kind == DTR_STEP_EXCHANGE) {
        dtr__placements_text(s->before, s->nplacements, a, len);
        dtr__placements_text(s->after, s->nplacements, b, len);
    } else {
        dtr_placement_format(s->from, a, len);
        dtr_placement_format(s->to, b, len);
    }
}

static const dtr_step_kind_t dtr__collective_kinds[] = {
    DTR_STEP_ALL_GATHER, DTR_STEP_REDUCE_SCATTER, DTR_STEP_ALL_REDUCE, DTR_STEP_ALL_TO_ALL,
    DTR_STEP_EXCHANGE, DTR_STEP_REDUCE_EXCHANGE};

dtr_status_t dtr_plan_print(const dtr_plan_t *plan, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    char mesh[128], shape[256], from[160], to[160];
    dtr_mesh_format(plan->src.mesh, mesh, sizeof mesh);
    dtr_shape_format(plan->src.shape, plan->src.ndim, shape, sizeof shape);
    int m = dtr_mesh_ndims(plan->src.mesh);
    dtr__placements_text(plan->src.placements, m, from, sizeof from);
    dtr__placements_text(plan->dst.placements, m, to, sizeof to);
    fprintf(out, "plan %s%s", plan->backward ? "(backward) " : "", dtr_strategy_name(plan->strategy));
    if (plan->strategy == DTR_STRATEGY_OPTIMAL && plan->chosen_by != NULL)
        fprintf(out, " (best candidate: %s)", plan->chosen_by);
    fprintf(out, ": mesh %s, shape %s %s, %s -> %s\n", mesh, shape,
            dtr_dtype_name(plan->src.dtype), from, to);
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
            fprintf(out, "  %-3d %-5s %-28s %-15s %14lld %14lld %10.2f\n", k + 1, dim, change,
                    dtr_step_kind_info(s->kind)->name, (long long)s->recv_bytes_max,
                    (long long)s->extra_bytes_max, s->time_us);
        }
    }
    fprintf(out, "  collectives:");
    for (size_t k = 0; k < sizeof dtr__collective_kinds / sizeof dtr__collective_kinds[0]; k++)
        fprintf(out, " %s %d", dtr_step_kind_info(dtr__collective_kinds[k])->name,
                plan->count[dtr__collective_kinds[k]]);
    fprintf(out, "\n  most bytes one rank receives: %lld (lower bound %lld)\n",
            (long long)plan->recv_bytes_max, (long long)plan->lower_bound_recv_bytes);
    fprintf(out, "  peak extra memory per rank: %lld bytes; modeled time %.2f us\n",
            (long long)plan->peak_extra_bytes, plan->time_us);
    return DTR_OK;
}

dtr_status_t dtr_plan_print_json(const dtr_plan_t *plan, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    fprintf(out, "{\"strategy\":\"%s\",", dtr_strategy_name(plan->strategy));
    if (plan->backward) fputs("\"backward\":true,", out);
    if (plan->chosen_by != NULL) fprintf(out, "\"chosen_by\":\"%s\",", plan->chosen_by);
    fputs("\"steps\":[", out);
    for (int k = 0; k < plan->nsteps; k++) {
        const dtr_step_t *s = &plan->steps[k];
        char a[160], b[160];
        dtr__step_from_to(s, a, b, sizeof a);
        fprintf(out, "%s{\"mesh_dim\":%d,\"kind\":\"%s\",\"from\":\"%s\",\"to\":\"%s\"", k ? "," : "",
                s->mesh_dim, dtr_step_kind_info(s->kind)->name, a, b);
        if (s->tensor_dim >= 0) fprintf(out, ",\"tensor_dim\":%d", s->tensor_dim);
        if (s->tensor_dim2 >= 0) fprintf(out, ",\"tensor_dim2\":%d", s->tensor_dim2);
        fprintf(out,
                ",\"recv_bytes_per_rank_max\":%lld,\"send_bytes_per_rank_max\":%lld,"
                "\"extra_bytes_per_rank_max\":%lld,\"modeled_time_us\":%.6g}",
                (long long)s->recv_bytes_max, (long long)s->send_bytes_max,
                (long long)s->extra_bytes_max, s->time_us);
    }
    fputs("],\"collectives\":{", out);
    for (size_t k = 0; k < sizeof dtr__collective_kinds / sizeof dtr__collective_kinds[0]; k++)
        fprintf(out, "%s\"%s\":%d", k ? "," : "", dtr_step_kind_info(dtr__collective_kinds[k])->name,
                plan->count[dtr__collective_kinds[k]]);
    fprintf(out,
            "},\"recv_bytes_per_rank_max\":%lld,\"lower_bound_recv_bytes_per_rank\":%lld,"
            "\"peak_extra_bytes_per_rank\":%lld,\"modeled_time_us\":%.6g}",
            (long long)plan->recv_bytes_max, (long long)plan->lower_bound_recv_bytes,
            (long long)plan->peak_extra_bytes, plan->time_us);
    return DTR_OK;
}
