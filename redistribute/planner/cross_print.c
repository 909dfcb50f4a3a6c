/* A change between meshes as text and JSON (dtr cross plans: cross.c). */
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

static void dtr__side(FILE *out, const dtr_spec_t *s, bool json) {
    char mesh[128], pl[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX];
    dtr_mesh_format(s->mesh, mesh, sizeof mesh);
    if (dtr_placements_format(s->placements, dtr_mesh_ndims(s->mesh), pl, sizeof pl) != DTR_OK)
        snprintf(pl, sizeof pl, "?");
    if (!json) {
        fprintf(out, "mesh %s (ranks ", mesh);
        dtr__mesh_ranks(out, s->mesh, 16);
        fprintf(out, ") %s %s", dtr_dtype_name(s->dtype), pl);
        return;
    }
    fprintf(out, "{\"mesh\":\"%s\",\"ranks\":[", mesh);
    dtr__mesh_ranks(out, s->mesh, -1);
    fprintf(out, "],\"dtype\":\"%s\",\"placements\":\"%s\"}", dtr_dtype_name(s->dtype), pl);
}

static int64_t dtr__local_copies(const dtr_cross_plan_t *p) {
    int64_t k = 0;
    for (int64_t j = 0; j < p->nmsgs; j++) k += p->msgs[j].from == p->msgs[j].to;
    return k;
}

/* "lo..hi" per dim, comma-separated ("scalar" for 0-d), into buf. */
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

dtr_status_t dtr_cross_plan_print(const dtr_cross_plan_t *plan, int64_t max_messages, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    const dtr_cross_figures_t *f = &plan->fig;
    char shape[256];
    dtr_shape_format(plan->src.shape, plan->src.ndim, shape, sizeof shape);
    fprintf(out, "cross plan, shape %s: from ", shape);
    dtr__side(out, &plan->src, false);
    fputs("\n                        to ", out);
    dtr__side(out, &plan->dst, false);
    fputc('\n', out);
    if (plan->has_pre) {
        char mid[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX];
        dtr_placements_format(plan->mid.placements, dtr_mesh_ndims(plan->mid.mesh), mid, sizeof mid);
        fprintf(out, "  first, on the source mesh (to %s %s):", mid, dtr_dtype_name(plan->mid.dtype));
        for (int k = 0; k < plan->pre.nsteps; k++)
            fprintf(out, "%s %s", k ? "," : "", dtr_step_kind_info(plan->pre.steps[k].kind)->name);
        fprintf(out, "%s\n", plan->pre.nsteps == 0 ? " a cast" : "");
    }
    fprintf(out, "  %lld messages between ranks (%lld bytes), %lld boxes kept where they are\n",
            (long long)f->messages, (long long)f->moved_bytes, (long long)dtr__local_copies(plan));
    fprintf(out, "  most bytes one rank sends: %lld (lower bound %lld); receives: %lld (lower bound "
                 "%lld)\n",
            (long long)f->send_bytes_max, (long long)f->lower_bound_send_bytes,
            (long long)f->recv_bytes_max, (long long)f->lower_bound_recv_bytes);
    fprintf(out, "  peak extra memory per rank: %lld bytes; modeled time %.2f us\n",
            (long long)f->peak_extra_bytes, f->time_us);
    if (plan->nmsgs > 0 && max_messages != 0) fprintf(out, "  %6s %6s  %-40s %14s\n", "from", "to", "box", "bytes");
    for (int64_t k = 0; k < plan->nmsgs && (max_messages < 0 || k < max_messages); k++) {
        const dtr__xmsg_t *m = &plan->msgs[k];
        char box[512];
        dtr__box(box, sizeof box, m, plan->dst.ndim);
        fprintf(out, "  %6d %6d  %-40s %14lld%s\n", m->from, m->to, box, (long long)m->bytes,
                m->from == m->to ? "  (kept)" : "");
    }
    if (max_messages >= 0 && plan->nmsgs > max_messages)
        fprintf(out, "  ... %lld more\n", (long long)(plan->nmsgs - max_messages));
    return DTR_OK;
}

dtr_status_t dtr_cross_plan_print_json(const dtr_cross_plan_t *plan, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    const dtr_cross_figures_t *f = &plan->fig;
    fputs("{\"shape\":[", out);
    for (int d = 0; d < plan->src.ndim; d++)
        fprintf(out, "%s%lld", d ? "," : "", (long long)plan->src.shape[d]);
    fputs("],\"from\":", out);
    dtr__side(out, &plan->src, true);
    fputs(",\"to\":", out);
    dtr__side(out, &plan->dst, true);
    fputs(",\"pre\":", out);
    if (plan->has_pre)
        DTR_CHECK(dtr_plan_print_json(&plan->pre, out));
    else
        fputs("null", out);
    fprintf(out,
            ",\"messages\":%lld,\"local_copies\":%lld,\"moved_bytes\":%lld,"
            "\"send_bytes_per_rank_max\":%lld,\"recv_bytes_per_rank_max\":%lld,"
            "\"lower_bound_send_bytes_per_rank\":%lld,\"lower_bound_recv_bytes_per_rank\":%lld,"
            "\"peak_extra_bytes_per_rank\":%lld,\"modeled_time_us\":%.6g}",
            (long long)f->messages, (long long)dtr__local_copies(plan), (long long)f->moved_bytes,
            (long long)f->send_bytes_max, (long long)f->recv_bytes_max,
            (long long)f->lower_bound_send_bytes, (long long)f->lower_bound_recv_bytes,
            (long long)f->peak_extra_bytes, f->time_us);
    return DTR_OK;
}
