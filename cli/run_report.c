/* dtr run's report on rank 0: the result as text or one JSON object, and what failed on
 * stderr (run.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/run.h"

/* "verified: ..." for a check that passed: how close, against what tolerance. */
static void dtr__print_tolerance(FILE *out, const dtr_pattern_report_t *r, dtr_dtype_t dtype) {
    if (r->tolerance == 0) {
        fprintf(out, "exactly");
        return;
    }
    const char *scale = r->sum_scale ? "sum|x|" : "|want|";
    fprintf(out, "within |got - want| <= %.0f u %s (u = 2^%d for %s); largest error %.3g u %s",
            r->tolerance / r->unit, scale, (int)log2(r->unit), dtr_dtype_name(dtype),
            r->worst / r->unit, scale);
}

static void dtr__json_tolerance(FILE *out, const dtr_pattern_report_t *r) {
    double u = r->unit > 0 ? r->unit : 1;
    fprintf(out, "{\"exact\":%s,\"factor\":%.0f,\"u\":%.9g,\"scale\":\"%s\",\"worst_u\":%.6g}",
            r->tolerance == 0 ? "true" : "false", r->tolerance / u, r->unit,
            r->tolerance == 0 ? "none" : r->sum_scale ? "sum|x|" : "|want|", r->worst / u);
}

/* The change's text forms. */
typedef struct {
    char shape[128], from[128], to[128], mesh[64];
    const char *unit; /* what the checks count: a complex element is two values */
} dtr__texts_t;

static void dtr__texts(const dtr_cli_run_t *r, dtr__texts_t *t) {
    int m = dtr_mesh_ndims(r->mesh);
    dtr_shape_format(r->src.shape, r->src.ndim, t->shape, sizeof t->shape);
    dtr_placements_format(r->src.placements, m, t->from, sizeof t->from);
    dtr_placements_format(r->dst.placements, m, t->to, sizeof t->to);
    dtr_mesh_format(r->mesh, t->mesh, sizeof t->mesh);
    t->unit = dtr_dtype_info(r->src.dtype)->is_complex ? "values (real, imaginary)" : "elements";
}

/* "S,T": the mesh dims in mask, comma-separated (each with prefix before it, the first
 * with `first`). */
static void dtr__dims(FILE *out, const dtr_cli_run_t *r, uint32_t mask, const char *first) {
    for (int i = 0, k = 0; i < dtr_mesh_ndims(r->mesh); i++)
        if (mask & (1u << i)) fprintf(out, "%s%d", k++ ? "," : first, i);
}

static void dtr__json_backward(const dtr_cli_run_t *r) {
    const dtr_cli_change_t *o = r->o;
    const dtr_plan_t *b = r->bplan;
    printf(",\"backward_result\":{\"placements\":");
    dtr_cli_json_placements(stdout, b->dst.placements, dtr_mesh_ndims(r->mesh));
    printf(",\"verified\":%s,\"mismatches\":%lld,\"checked\":%lld,\"nsteps\":%d,"
           "\"collectives\":",
           o->verify ? (r->bwd.rep.mismatches == 0 ? "true" : "false") : "null",
           (long long)r->bwd.rep.mismatches, (long long)r->bwd.rep.checked, b->nsteps);
    dtr_cli_json_collectives(stdout, b);
    if (o->verify) {
        printf(",\"tolerance\":");
        dtr__json_tolerance(stdout, &r->bwd.rep);
    }
    printf(",\"op_dtype\":\"%s\"}", dtr_dtype_name(b->op_dtype));
}

static void dtr__json(const dtr_cli_run_t *r) {
    const dtr_cli_change_t *o = r->o;
    const dtr_plan_t *plan = r->plan;
    dtr_cli_json_begin(stdout, "run", r->mesh);
    dtr_cli_json_change(stdout, &r->src, &r->dst);
    printf(",\"verified\":%s,\"mismatches\":%lld,\"checked\":%lld,\"input_intact\":%s,",
           o->verify ? (r->ok ? "true" : "false") : "null", (long long)r->fwd.rep.mismatches,
           (long long)r->fwd.rep.checked, r->fwd.input_changed == 0 ? "true" : "false");
    printf("\"fill\":\"%s\",", o->fill_text);
    if (r->data.fill.kind == DTR_FILL_RANDOM)
        printf("\"seed\":%llu,", (unsigned long long)r->data.fill.seed);
    if (o->verify) {
        printf("\"tolerance\":");
        dtr__json_tolerance(stdout, &r->fwd.rep);
        printf(",");
    }
    printf("\"median_us\":%.3f,\"baseline_median_us\":%.3f,\"overhead_ratio\":%.4f,", r->med,
           r->base, r->base > 0 ? r->med / r->base : 0.0);
    printf("\"iters\":%ld,\"recv_bytes_per_rank_max\":%lld,\"collectives\":", (long)o->iters,
           (long long)plan->recv_bytes_max);
    dtr_cli_json_collectives(stdout, plan);
    printf(",\"nsteps\":%d,\"strategy\":\"%s\",\"backend\":\"%s\",\"device\":\"%s\","
           "\"buffers\":\"%s\",\"world\":%d",
           plan->nsteps, dtr_strategy_name(o->strategy), dtr_context_backend(r->ctx), o->device,
           o->buffers, r->world);
    printf(",\"mesh_dims_across_nodes\":[");
    dtr__dims(stdout, r, r->across, "");
    printf("],\"mesh_dims_planned_across_nodes\":[");
    dtr__dims(stdout, r, r->planned_across, "");
    printf("],\"steps_across_nodes\":%d,\"node_aware\":%s", r->steps_across,
           r->planned_across != 0 ? "true" : "false");
    if (r->mpi)
        printf(",\"groups\":{\"shared_memory\":%lld,\"shm_ops\":%lld,\"mpi_ops\":%lld,"
               "\"mpi_only\":%lld,\"mpi_only_ops\":%lld,\"hier_ops\":%lld,\"direct_ops\":%lld}",
               r->paths[0], r->paths[1], r->paths[2], r->paths[3], r->paths[4], r->paths[5],
               r->paths[6]);
    if (r->bplan != NULL) dtr__json_backward(r);
    if (o->digest) dtr_cli_digest_json(stdout, 1, false, &r->digest);
    if (r->first_bad >= 0) {
        const dtr_pattern_report_t *b = &r->all[r->first_bad].rep;
        printf(",\"first_mismatch\":{\"rank\":%d,\"index\":%lld,\"got\":%.9g,\"want\":%.9g}",
               r->first_bad, (long long)b->first, b->got, b->want);
    }
    printf("}\n");
}

static void dtr__text_backward(const dtr_cli_run_t *r, const dtr__texts_t *t) {
    const dtr_plan_t *b = r->bplan;
    char bp[128];
    dtr_placements_format(b->dst.placements, dtr_mesh_ndims(r->mesh), bp, sizeof bp);
    printf("  backward: gradient %s -> %s, %d step%s", t->to, bp, b->nsteps,
           b->nsteps == 1 ? "" : "s");
    if (b->op_dtype != b->dst.dtype) printf(" in %s", dtr_dtype_name(b->op_dtype));
    if (r->o->verify && r->bwd.rep.mismatches == 0) {
        printf("; verified: all %lld %s match ", (long long)r->bwd.rep.checked, t->unit);
        /* (rounded to the coarser of the gradient's steps' and result's dtypes) */
        dtr_dtype_t op = b->op_dtype, sd = r->src.dtype;
        bool coarser = dtr_dtype_info(op)->size < dtr_dtype_info(sd)->size ||
                       (op == DTR_BF16 && sd == DTR_F16);
        dtr__print_tolerance(stdout, &r->bwd.rep, coarser ? op : sd);
    }
    printf("\n");
}

static void dtr__text(const dtr_cli_run_t *r, const dtr__texts_t *t) {
    const dtr_cli_change_t *o = r->o;
    const dtr_plan_t *plan = r->plan;
    char cast[32] = "";
    if (r->dst.dtype != r->src.dtype)
        snprintf(cast, sizeof cast, " (to %s)", dtr_dtype_name(r->dst.dtype));
    printf("dtr run: mesh %s, shape %s %s%s, %s -> %s, %s plan, %d ranks (%s backend, %s "
           "buffers)\n",
           t->mesh, t->shape, dtr_dtype_name(r->src.dtype), cast, t->from, t->to,
           dtr_strategy_name(o->strategy), r->world, dtr_context_backend(r->ctx), o->device);
    printf("  %d step%s:", plan->nsteps, plan->nsteps == 1 ? "" : "s");
    for (int k = 0; k < plan->nsteps; k++)
        printf("%s %s", k ? "," : "", dtr_step_kind_info(plan->steps[k].kind)->name);
    printf("; most bytes one rank receives: %lld\n", (long long)plan->recv_bytes_max);
    if (r->across != 0) {
        bool one = (r->across & (r->across - 1)) == 0;
        printf("  nodes: mesh dim%s", one ? "" : "s");
        dtr__dims(stdout, r, r->across, " ");
        printf(" cross%s nodes; %d of the %d steps move data between nodes (planned %s)\n",
               one ? "es" : "", r->steps_across, plan->nsteps,
               r->planned_across != 0 ? "node-aware, --nodes-of" : "as on one node");
    }
    if (r->planned_across != 0 && r->planned_across != r->across) {
        /* --nodes-of named dims the job's placement does not split so: say both */
        printf("  nodes: planned with mesh dim%s", (r->planned_across & (r->planned_across - 1))
                                                       ? "s" : "");
        dtr__dims(stdout, r, r->planned_across, " ");
        printf(" crossing nodes (--nodes-of); ");
        if (r->across == 0) {
            printf("this job's ranks are all on one node, so no group crosses one\n");
        } else {
            printf("in this job mesh dim%s", (r->across & (r->across - 1)) ? "s" : "");
            dtr__dims(stdout, r, r->across, " ");
            printf(" do%s\n", (r->across & (r->across - 1)) ? "" : "es");
        }
    }
    if (r->data.fill.kind == DTR_FILL_RANDOM)
        printf("  fill: random, seed %llu\n", (unsigned long long)r->data.fill.seed);
    else
        printf("  fill: %s\n", o->input != NULL ? o->input : "pattern");
    if (o->verify && r->first_bad < 0) {
        printf("  verified: all %lld %s on every rank match ", (long long)r->fwd.rep.checked,
               t->unit);
        dtr__print_tolerance(stdout, &r->fwd.rep, r->dst.dtype);
        printf("; inputs intact\n");
    }
    if (r->bplan != NULL) dtr__text_backward(r, t);
    if (o->digest) dtr_cli_digest_text(stdout, 1, false, &r->digest, &r->src, &r->dst);
    if (o->iters > 0)
        printf("  median of %ld iterations: %.1f us; baseline (the plan's collectives alone) "
               "%.1f us; overhead ratio %.3f\n",
               (long)o->iters, r->med, r->base, r->base > 0 ? r->med / r->base : 0.0);
    if (r->mpi)
        printf("  groups: %lld on one node, through shared memory (%lld operations; %lld "
               "through MPI), %lld across nodes (%lld operations through MPI, %lld "
               "hierarchical)\n",
               r->paths[0], r->paths[1], r->paths[2], r->paths[3], r->paths[4], r->paths[5]);
    if (r->mpi && r->paths[6] > 0)
        printf("  operations reading the members' shared buffers where they are: %lld\n",
               r->paths[6]);
}

/* What failed, on stderr: the forward check's first mismatch, or the backward's count. */
static void dtr__failures(const dtr_cli_run_t *r, const dtr__texts_t *t) {
    bool fwd_ok = r->first_bad < 0;
    bool digest_bad = r->o->digest && dtr_cli_digest_failed(1, &r->digest, &r->src, &r->dst, true);
    if (fwd_ok && !r->ok && (!digest_bad || r->bwd.rep.mismatches > 0))
        fprintf(stderr, "dtr run: backward verification failed: %lld %s wrong or inputs "
                        "written\n",
                (long long)r->bwd.rep.mismatches, t->unit);
    if (fwd_ok) return;
    const dtr_cli_verdict_t *b = &r->all[r->first_bad];
    const dtr_pattern_report_t *f = &r->fwd.rep;
    char held[96] = "compared exactly";
    if (f->tolerance > 0)
        snprintf(held, sizeof held, "allowed: |got - want| <= %.0f u %s", f->tolerance / f->unit,
                 f->sum_scale ? "sum|x|" : "|want|");
    if (b->rep.mismatches > 0)
        fprintf(stderr,
                "dtr run: verification failed: %lld of %lld %s wrong; first on rank %d at local "
                "index %lld: got %.9g, want %.9g (%s)\n",
                (long long)f->mismatches, (long long)f->checked, t->unit, r->first_bad,
                (long long)b->rep.first, b->rep.got, b->rep.want, held);
    else
        fprintf(stderr, "dtr run: verification failed: rank %d's input was written\n",
                r->first_bad);
}

void dtr_cli_run_report(const dtr_cli_run_t *r) {
    dtr__texts_t t;
    dtr__texts(r, &t);
    if (r->o->json)
        dtr__json(r);
    else
        dtr__text(r, &t);
    dtr__failures(r, &t);
}
