/* What a change between meshes' plan (cross.c) tells: its figures, its tensors'
 * destination specs, a rank's bytes, and the plan as text and as JSON. */
#include <string.h>

#include "redistribute/planner/internal.h"

/* The mesh's ranks in row-major order, comma-separated (at most `max`, then "..."). */
static void dtr__mesh_ranks(FILE *out, const dtr_mesh_t *mesh, int64_t max) {
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, n = dtr_mesh_nranks(mesh);
    for (int64_t p = 0; p < n; p++) {
        int r;
        if (p == max) {
            fputs(",...", out);
            return;
        }
        dtr_mesh_rank_at(mesh, coord, &r);
        fprintf(out, "%s%d", p ? "," : "", r);
        for (int i = dtr_mesh_ndims(mesh) - 1; i >= 0; i--) {
            if (++coord[i] < dtr_mesh_size(mesh, i)) break;
            coord[i] = 0;
        }
    }
}

/* A side of the change: its mesh and ranks, and (but for a batch's) its dtype and
 * placements. */
static void dtr__side(FILE *out, const dtr_spec_t *s, bool json, bool batch) {
    char mesh[128], pl[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX];
    dtr_mesh_format(s->mesh, mesh, sizeof mesh);
    dtr_placements_describe(s->placements, dtr_mesh_ndims(s->mesh), pl, sizeof pl);
    if (!json) {
        fprintf(out, "mesh %s (ranks ", mesh);
        dtr__mesh_ranks(out, s->mesh, 16);
        fputc(')', out);
        if (!batch) fprintf(out, " %s %s", dtr_dtype_name(s->dtype), pl);
        return;
    }
    fputs("{\"mesh\":[", out);
    for (int i = 0; i < dtr_mesh_ndims(s->mesh); i++)
        fprintf(out, "%s%lld", i ? "," : "", (long long)dtr_mesh_size(s->mesh, i));
    fputs("],\"ranks\":[", out);
    dtr__mesh_ranks(out, s->mesh, -1);
    fputc(']', out);
    if (!batch) {
        /* the placements as a list, one item per mesh dim ("S(0)", "R") */
        fprintf(out, ",\"dtype\":\"%s\",\"placements\":", dtr_dtype_name(s->dtype));
        dtr_placements_print_json(out, s->placements, dtr_mesh_ndims(s->mesh));
    }
    fputc('}', out);
}

dtr_status_t dtr_cross_plan_figures(const dtr_cross_plan_t *plan, dtr_cross_figures_t *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    *out = plan->fig;
    return DTR_OK;
}

int dtr_cross_plan_tensors(const dtr_cross_plan_t *plan) { return plan != NULL ? plan->ntensors : 0; }

int dtr_cross_plan_addends(const dtr_cross_plan_t *plan, int i) {
    if (plan == NULL || i < 0 || i >= plan->ntensors || !plan->t[i].at_receiver) return 0;
    return plan->t[i].parts;
}

dtr_status_t dtr_cross_plan_dst(const dtr_cross_plan_t *plan, int i, dtr_spec_t *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    if (i < 0 || i >= plan->ntensors)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "i: %d, the plan has tensors 0..%d",
                          i, plan->ntensors - 1);
    *out = plan->t[i].dst;
    return DTR_OK;
}

dtr_status_t dtr_cross_plan_rank_bytes(const dtr_cross_plan_t *plan, int rank, int64_t *send,
                                       int64_t *recv) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(send, __func__);
    DTR_CHECK_PTR(recv, __func__);
    dtr__xrank_bytes(plan, rank, send, recv);
    return DTR_OK;
}

dtr_status_t dtr_cross_plan_rank_messages(const dtr_cross_plan_t *plan, int rank, int64_t *count) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(count, __func__);
    int64_t n = 0;
    *count = 0;
    if (rank < 0 || plan->nranks == 0 || rank > plan->ranks[plan->nranks - 1] || plan->pos[rank] < 0)
        return DTR_OK;
    dtr_status_t st = dtr__xensure(plan, rank);
    if (st != DTR_OK) return dtr__error_as(st, __func__);
    for (int64_t k = 0; k < plan->nmsgs; k++) n += plan->msgs[k].from == rank || plan->msgs[k].to == rank;
    *count = n;
    return DTR_OK;
}

/* The boxes kept where they are, over the tensors (from the kinds: no messages made). */
static int64_t dtr__local_copies(const dtr_cross_plan_t *p) {
    int64_t n = 0;
    for (int j = 0; j < p->nkinds; j++) {
        int64_t kept = 0;
        for (int64_t i = 0; i < p->kinds[j].n; i++) kept += p->kinds[j].slot[i] < 0;
        n += kept * p->kinds[j].count;
    }
    return n;
}

static void dtr__box(char *buf, size_t len, const dtr__xmsg_t *m, int nd) {
    size_t at = 0;
    buf[0] = '\0';
    for (int d = 0; d < nd && at < len; d++) {
        int w = snprintf(buf + at, len - at, "%s%lld..%lld", d ? "," : "", (long long)m->lo[d],
                         (long long)(m->lo[d] + m->ext[d] - 1));
        at += w > 0 ? (size_t)w : 0;
    }
    if (nd == 0) snprintf(buf, len, "scalar");
}

/* Tensor t's change on one line: shape, dtypes, placements, what runs on A first. */
static void dtr__tensor_line(FILE *out, const dtr__xtensor_t *x, int t, bool batch) {
    char shape[256], from[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX], to[sizeof from];
    dtr_shape_format(x->src.shape, x->src.ndim, shape, sizeof shape);
    dtr_placements_describe(x->src.placements, dtr_mesh_ndims(x->src.mesh), from, sizeof from);
    dtr_placements_describe(x->dst.placements, dtr_mesh_ndims(x->dst.mesh), to, sizeof to);
    if (batch)
        fprintf(out, "  tensor %d: shape %s %s %s -> %s %s", t, shape, dtr_dtype_name(x->src.dtype),
                from, dtr_dtype_name(x->dst.dtype), to);
    if (x->has_pre) {
        char mid[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX];
        dtr_placements_describe(x->mid.placements, dtr_mesh_ndims(x->mid.mesh), mid, sizeof mid);
        fprintf(out, "%sfirst, on the source mesh (to %s %s):", batch ? "; " : "  ", mid,
                dtr_dtype_name(x->mid.dtype));
        for (int k = 0; k < x->pre->nsteps; k++)
            fprintf(out, "%s %s", k ? "," : "", dtr_step_kind_info(x->pre->steps[k].kind)->name);
        fprintf(out, "%s", x->pre->nsteps == 0 ? " a cast" : "");
    }
    if (x->wire_cast)
        fprintf(out, "%scast from %s to %s as each box is packed", batch ? "; " : "  ",
                dtr_dtype_name(x->src.dtype), dtr_dtype_name(x->dst.dtype));
    if (x->at_receiver && dtr__xpartial_op(&x->src) == DTR_REDUCE_SUM)
        fprintf(out, "%sthe %d addends summed at the receivers, in addend order", batch ? "; " : "  ",
                x->parts);
    else if (x->at_receiver) /* (a ragged source's max, min or product) */
        fprintf(out, "%sthe %d addends combined by %s at the receivers, in addend order",
                batch ? "; " : "  ", x->parts, dtr_reduce_op_name(dtr__xpartial_op(&x->src)));
    if (batch || x->has_pre || x->wire_cast || x->at_receiver) fputc('\n', out);
}

/* The relabeled order: the rank of each coordinate of B, row-major. */
static void dtr__relabel_line(FILE *out, const dtr_cross_plan_t *p) {
    const dtr_cross_figures_t *f = &p->fig;
    fprintf(out, "  relabeled: ranks by coordinate of the destination mesh ");
    dtr__mesh_ranks(out, p->t[0].dst.mesh, 32);
    fprintf(out, "; %lld bytes kept from moving%s\n", (long long)f->relabel_saved_bytes,
            f->permutation ? "; a pure permutation: nothing moves" : "");
}

dtr_status_t dtr_cross_plan_print(const dtr_cross_plan_t *plan, int64_t max_messages, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    const dtr_cross_figures_t *f = &plan->fig;
    const dtr__xtensor_t *x0 = &plan->t[0];
    bool batch = plan->ntensors > 1;
    char shape[256];
    dtr_shape_format(x0->src.shape, x0->src.ndim, shape, sizeof shape);
    if (batch)
        fprintf(out, "cross plan of %d tensors:\n  from ", plan->ntensors);
    else
        fprintf(out, "cross plan, shape %s:\n  from ", shape);
    dtr__side(out, &x0->src, false, batch);
    fputs("\n  to   ", out);
    dtr__side(out, &x0->dst, false, batch);
    fputc('\n', out);
    for (int t = 0; t < plan->ntensors; t++) dtr__tensor_line(out, &plan->t[t], t, batch);
    if (plan->relabel) dtr__relabel_line(out, plan);
    fprintf(out, "  %lld messages between ranks (%lld bytes) in %lld round%s, %lld boxes kept where "
                 "they are\n",
            (long long)f->messages, (long long)f->moved_bytes, (long long)f->rounds,
            f->rounds == 1 ? "" : "s", (long long)dtr__local_copies(plan));
    fprintf(out, "  most bytes one rank sends: %lld (lower bound %lld); receives: %lld (lower bound "
                 "%lld)\n",
            (long long)f->send_bytes_max, (long long)f->lower_bound_send_bytes,
            (long long)f->recv_bytes_max, (long long)f->lower_bound_recv_bytes);
    fprintf(out, "  peak extra memory per rank: %lld bytes (staging %lld%s); modeled time %.2f us\n",
            (long long)f->peak_extra_bytes, (long long)f->staging_bytes_max,
            plan->cap > 0 ? ", under the cap" : "", f->time_us);
    if (max_messages != 0) DTR_CHECK(dtr__xensure(plan, -1));
    if (plan->nmsgs > 0 && max_messages != 0)
        fprintf(out, "  %s%6s %6s  %-40s %14s\n", batch ? "tensor " : "", "from", "to", "box", "bytes");
    for (int64_t k = 0; k < plan->nmsgs && (max_messages < 0 || k < max_messages); k++) {
        const dtr__xmsg_t *m = &plan->msgs[k];
        char box[512], tensor[16] = "";
        dtr__box(box, sizeof box, m, plan->t[m->tensor].dst.ndim);
        if (batch) snprintf(tensor, sizeof tensor, "%6d ", m->tensor);
        char part[32] = "";
        if (plan->t[m->tensor].at_receiver) snprintf(part, sizeof part, "  (addend %d)", m->part);
        fprintf(out, "  %s%6d %6d  %-40s %14lld%s%s\n", tensor, m->from, m->to, box,
                (long long)m->bytes, m->from == m->to ? "  (kept)" : "", part);
    }
    int64_t total = f->messages + dtr__local_copies(plan); /* (made or not) */
    if (max_messages >= 0 && total > max_messages)
        fprintf(out, "  ... %lld more\n", (long long)(total - max_messages));
    return DTR_OK;
}

/* One tensor's shape, sides and plan on A, as JSON members (no braces). */
static dtr_status_t dtr__tensor_json(FILE *out, const dtr__xtensor_t *x) {
    fputs("\"shape\":[", out);
    for (int d = 0; d < x->src.ndim; d++) fprintf(out, "%s%lld", d ? "," : "", (long long)x->src.shape[d]);
    fputs("],\"src\":", out);
    dtr__side(out, &x->src, true, false);
    fputs(",\"dst\":", out);
    dtr__side(out, &x->dst, true, false);
    if (x->at_receiver) fprintf(out, ",\"summed_at_receiver\":%d", x->parts);
    fputs(",\"pre\":", out);
    if (x->has_pre) return dtr_plan_print_json(x->pre, out);
    fputs("null", out);
    return DTR_OK;
}

dtr_status_t dtr_cross_plan_print_json(const dtr_cross_plan_t *plan, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    const dtr_cross_figures_t *f = &plan->fig;
    fputc('{', out);
    if (plan->ntensors == 1) {
        DTR_CHECK(dtr__tensor_json(out, &plan->t[0]));
    } else {
        fputs("\"src\":", out);
        dtr__side(out, &plan->t[0].src, true, true);
        fputs(",\"dst\":", out);
        dtr__side(out, &plan->t[0].dst, true, true);
        fputs(",\"tensors\":[", out);
        for (int t = 0; t < plan->ntensors; t++) {
            fputs(t ? ",{" : "{", out);
            DTR_CHECK(dtr__tensor_json(out, &plan->t[t]));
            fputc('}', out);
        }
        fputc(']', out);
    }
    fprintf(out,
            ",\"messages\":%lld,\"local_copies\":%lld,\"moved_bytes\":%lld,"
            "\"send_bytes_per_rank_max\":%lld,\"recv_bytes_per_rank_max\":%lld,"
            "\"lower_bound_send_bytes_per_rank\":%lld,\"lower_bound_recv_bytes_per_rank\":%lld,"
            "\"peak_extra_bytes_per_rank\":%lld,\"modeled_time_us\":%.6g,\"nrounds\":%lld,"
            "\"staging_bytes_per_rank_max\":%lld",
            (long long)f->messages, (long long)dtr__local_copies(plan), (long long)f->moved_bytes,
            (long long)f->send_bytes_max, (long long)f->recv_bytes_max,
            (long long)f->lower_bound_send_bytes, (long long)f->lower_bound_recv_bytes,
            (long long)f->peak_extra_bytes, f->time_us, (long long)f->rounds,
            (long long)f->staging_bytes_max);
    if (plan->cap > 0) fprintf(out, ",\"staging_cap_bytes\":%lld", (long long)plan->cap);
    if (plan->relabel) {
        fputs(",\"relabel\":[", out);
        dtr__mesh_ranks(out, plan->t[0].dst.mesh, -1);
        fprintf(out, "],\"relabel_saved_bytes\":%lld,\"permutation\":%s",
                (long long)f->relabel_saved_bytes, f->permutation ? "true" : "false");
    }
    fputs("}", out);
    return DTR_OK;
}
