/* dtr run --to-mesh: a change between two meshes of the job's ranks, of one tensor or of a
 * --batch file's, verified on every destination rank (and every source rank's input
 * intact) and timed; a batch also one tensor at a time, side by side (run.h). */
#include <stdlib.h>
#include <string.h>

#include "cli/run.h"

/* What this rank holds and checks, per tensor. */
typedef struct {
    int n;
    dtr_spec_t *src, *dst;  /* dst: as the plan delivers it */
    dtr_fill_t *fills;
    void **in, **copy, **out;
    size_t *in_bytes, *out_bytes;
    size_t oom_bytes;       /* a tensor's buffers that could not be had (0: none) */
    dtr_cross_plan_t **one; /* a batch's tensors planned one at a time (for the timing) */
    dtr_change_t *change;   /* the change: planned and run through the library's one object */
    int64_t block;          /* --block-scale: out[n + k] holds tensor k's scales (sc[k]) */
    dtr_spec_t *sc;
    dtr_spec_t *dg_src, *dg_dst; /* --digest --block-scale: the 2n tensors sent and delivered */
} dtr__xt_t;

/* The flags a change between meshes does not take yet, named. */
static int dtr__cross_flags(const dtr_cli_change_t *o) {
    const char *other = o->backward ? "--backward"
                        : o->input != NULL ? "--input"
                        : o->shared ? "--buffers shared"
                        : o->backend != NULL && strcmp(o->backend, "mpi") != 0 &&
                                  strcmp(o->backend, "gloo") != 0 ? "--backend nccl"
                        : o->device != NULL && strcmp(o->device, "cpu") != 0 ? "--device"
                        : o->strategy == DTR_STRATEGY_COMPAT ? "--strategy compat"
                        : o->nodes_of != NULL && strcmp(o->nodes_of, "auto") != 0 ? "--nodes-of"
                                                                                 : NULL;
    if (other != NULL)
        return dtr_cli_usage_error("run", "%s: not with %s yet (docs/cross-mesh.md, "
                                           "\"Not yet\", lists what a change between meshes "
                                           "lacks)", other,
                                   o->ragged ? "a ragged shard (its change runs as one between "
                                               "meshes, onto --mesh)"
                                             : "--to-mesh");
    return DTR_EXIT_OK;
}

/* Outputs per tensor: the tensor, and with --block-scale its scales. */
static int dtr__xouts(const dtr__xt_t *t) { return t->block > 0 ? 2 * t->n : t->n; }

static void dtr__xt_free(dtr__xt_t *t) {
    for (int k = 0; k < t->n; k++) {
        if (t->in != NULL) free(t->in[k]);
        if (t->copy != NULL) free(t->copy[k]);
        if (t->one != NULL) dtr_cross_plan_destroy(t->one[k]);
    }
    for (int k = 0; k < dtr__xouts(t) && t->out != NULL; k++) free(t->out[k]);
    free(t->in), free(t->copy), free(t->out), free(t->in_bytes), free(t->out_bytes);
    free(t->fills), free(t->one), free(t->src), free(t->dst), free(t->sc);
    free(t->dg_src), free(t->dg_dst);
    dtr_change_destroy(t->change); /* (last: the plans above borrow its relabeled mesh) */
}

/* This rank's buffers: its source blocks filled (a copy kept; a batch's tensor k with seed
 * + k), room for its target blocks. */
static dtr_status_t dtr__xt_fill(dtr__xt_t *t, const dtr_fill_t *fill, bool batch, int rank) {
    size_t n = (size_t)t->n, nout = (size_t)dtr__xouts(t);
    t->in = calloc(n, sizeof *t->in), t->copy = calloc(n, sizeof *t->copy);
    t->out = calloc(nout, sizeof *t->out), t->fills = calloc(n, sizeof *t->fills);
    t->in_bytes = calloc(n, sizeof *t->in_bytes), t->out_bytes = calloc(nout, sizeof *t->out_bytes);
    if (!t->in || !t->copy || !t->out || !t->fills || !t->in_bytes || !t->out_bytes)
        return DTR_ERR_OUT_OF_MEMORY;
    for (int k = t->n; k < (int)nout; k++) { /* the scales */
        dtr_layout_t l = {0};
        dtr_spec_layout(&t->sc[k - t->n], rank, &l);
        t->out_bytes[k] = (size_t)l.bytes;
        if ((t->out[k] = dtr_cli_host_alloc(t->out_bytes[k] + 1)) == NULL) {
            t->oom_bytes = t->out_bytes[k] + 1;
            return DTR_ERR_OUT_OF_MEMORY;
        }
    }
    for (int k = 0; k < t->n; k++) {
        dtr_layout_t sl = {0}, dl = {0};
        bool src = dtr_spec_layout(&t->src[k], rank, &sl) == DTR_OK;
        dtr_spec_layout(&t->dst[k], rank, &dl);
        t->fills[k] = *fill;
        t->fills[k].seed = fill->seed + (batch ? (uint64_t)k : 0);
        t->in_bytes[k] = (size_t)sl.bytes;
        t->out_bytes[k] = (size_t)dl.bytes;
        t->in[k] = dtr_cli_host_alloc(t->in_bytes[k] + 1);
        t->copy[k] = dtr_cli_host_alloc(t->in_bytes[k] + 1);
        t->out[k] = dtr_cli_host_alloc(t->out_bytes[k] + 1);
        if (t->in[k] == NULL || t->copy[k] == NULL || t->out[k] == NULL) {
            t->oom_bytes = 2 * t->in_bytes[k] + t->out_bytes[k] + 3;
            return DTR_ERR_OUT_OF_MEMORY;
        }
        dtr_status_t st = src ? dtr_fill(&t->src[k], &t->fills[k], rank, t->in[k], t->in_bytes[k]) : DTR_OK;
        if (st != DTR_OK) return st;
        memcpy(t->copy[k], t->in[k], t->in_bytes[k]);
    }
    return DTR_OK;
}

/* The check on this rank: every target block against the reference, every input intact;
 * *v the first failing tensor's verdict (its index in *bad_tensor, -1: none), with the
 * counts summed over the tensors. */
static dtr_status_t dtr__xt_check(const dtr__xt_t *t, int rank, dtr_cli_verdict_t *v,
                                  int *bad_tensor) {
    memset(v, 0, sizeof *v);
    v->rep.first = -1;
    *bad_tensor = -1;
    int64_t mismatches = 0, checked = 0, changed = 0;
    for (int k = 0; k < t->n; k++) {
        dtr_cli_verdict_t one = {0};
        dtr_layout_t l;
        one.input_changed = memcmp(t->in[k], t->copy[k], t->in_bytes[k]) != 0;
        dtr_status_t st = DTR_OK;
        dtr_pattern_report_t scales = {0};
        bool here = dtr_spec_layout(&t->dst[k], rank, &l) == DTR_OK;
        if (here && t->block > 0) /* every byte and scale against the reference quantizer */
            st = dtr_fill_check_fp8(&t->src[k], &t->dst[k], &t->sc[k], t->block, &t->fills[k],
                                    rank, t->out[k], t->out_bytes[k], t->out[t->n + k],
                                    t->out_bytes[t->n + k], &one.rep, &scales);
        else if (here)
            st = dtr_fill_check(&t->src[k], &t->dst[k], &t->fills[k], rank, t->out[k],
                                t->out_bytes[k], &one.rep);
        if (st != DTR_OK) return st;
        if (one.rep.mismatches == 0 && scales.mismatches > 0) /* (the scale that differs) */
            one.rep = (dtr_pattern_report_t){.first = scales.first, .got = scales.got,
                                             .want = scales.want,
                                             .checked = one.rep.checked};
        one.rep.mismatches += scales.mismatches;
        one.rep.checked += scales.checked;
        mismatches += one.rep.mismatches;
        checked += one.rep.checked;
        changed += one.input_changed;
        if (*bad_tensor < 0 && (one.rep.mismatches > 0 || one.input_changed)) *v = one, *bad_tensor = k;
    }
    v->rep.mismatches = mismatches;
    v->rep.checked = checked;
    v->input_changed = changed;
    return DTR_OK;
}

/* The verdicts over every rank into r: the sums, and the first rank that failed (-1: none)
 * with its first failing tensor's verdict. Collective over the job. */
static void dtr__xverdicts(const dtr_cli_verdict_t *v, int bad_tensor, int rank,
                           dtr_cli_cross_result_t *r) {
    int64_t all[3] = {v->rep.mismatches, v->rep.checked, v->input_changed};
    dtr_cli_job_reduce(all, 3, DTR_I64, DTR_REDUCE_SUM);
    memset(&r->sum, 0, sizeof r->sum);
    r->sum.rep.mismatches = all[0];
    r->sum.rep.checked = all[1];
    r->sum.input_changed = all[2];
    int first = bad_tensor >= 0 ? rank : r->world;
    dtr_cli_job_reduce(&first, 1, DTR_I32, DTR_REDUCE_MIN);
    r->first_bad = first < r->world ? first : -1;
    if (r->first_bad < 0) return;
    double d[5] = {(double)v->rep.first, v->rep.got, v->rep.want, 0, (double)bad_tensor};
    d[3] = (double)v->rep.mismatches;
    dtr_cli_job_bcast(d, sizeof d, first);
    r->bad.rep.first = (int64_t)d[0];
    r->bad.rep.got = d[1];
    r->bad.rep.want = d[2];
    r->bad.rep.mismatches = (int64_t)d[3];
    r->bad_tensor = (int)d[4];
}

/* A started request (st: the start's status) tested until done (--nonblocking). */
static dtr_status_t dtr__xpoll(dtr_status_t st, dtr_request_t *const *req) {
    bool done = false;
    while (st == DTR_OK && !done) st = dtr_request_test(*req, &done);
    return st;
}

/* One run of the plan (form 0), or of the batch's tensors one plan at a time (form 1);
 * --nonblocking: started, then tested until done. */
static dtr_status_t dtr__xonce(dtr_context_t *ctx, const dtr__xt_t *t,
                               bool batch, int form, bool nonblocking) {
    dtr_request_t *req = NULL;
    if ((!batch || form == 0) && nonblocking)
        return dtr__xpoll(dtr_change_start(ctx, t->change, (const void *const *)t->in,
                                           t->in_bytes, t->out, t->out_bytes, &req), &req);
    if (!batch || form == 0 || t->one == NULL)
        return dtr_change_run(ctx, t->change, (const void *const *)t->in, t->in_bytes, t->out,
                              t->out_bytes);
    dtr_status_t st = DTR_OK;
    for (int k = 0; k < t->n && st == DTR_OK; k++)
        st = dtr_redistribute_cross(ctx, t->one[k], t->in[k], t->in_bytes[k], t->out[k], t->out_bytes[k]);
    return st;
}

/* The timing: warmup, then iters of each form (a batch alternates the two), the slowest
 * rank's times; their medians into r. */
static dtr_status_t dtr__xtime(dtr_context_t *ctx, const dtr__xt_t *t,
                               const dtr_cli_change_t *o, dtr_cli_cross_result_t *r) {
    int forms = r->batch && t->one != NULL ? 2 : 1;
    double *times = malloc(sizeof *times * (size_t)(2 * o->iters + 2));
    if (times == NULL) return DTR_ERR_OUT_OF_MEMORY;
    dtr_status_t st = DTR_OK;
    for (int64_t k = -o->warmup; k < o->iters && st == DTR_OK; k++)
        for (int form = 0; form < forms && st == DTR_OK; form++) {
            dtr_cli_job_barrier();
            double t0 = dtr_cli_job_now();
            st = dtr__xonce(ctx, t, r->batch, form, o->nonblocking);
            double slowest = (dtr_cli_job_now() - t0) * 1e6;
            dtr_cli_job_reduce(&slowest, 1, DTR_F64, DTR_REDUCE_MAX);
            if (k >= 0) times[form * o->iters + k] = slowest;
        }
    r->med = dtr_cli_median(times, (int)o->iters);
    r->one_by_one = r->batch ? dtr_cli_median(times + o->iters, (int)o->iters) : 0;
    free(times);
    return st;
}

/* --digest: each tensor's digests on its source's mesh and its result's (dtr_cli_digests);
 * with --block-scale the 2n tensors the change sent (dtr_change_sent: the quantized ones,
 * then their scales, as the source ranks made them) against what arrived. r's digest
 * fields set; false where it failed (every rank alike). */
static bool dtr__xdigests(dtr_context_t *ctx, dtr__xt_t *t, int rank, dtr_cli_digest_t **d,
                          dtr_cli_cross_result_t *r) {
    int m = dtr__xouts(t);
    r->ntensors = t->n, r->srcs = t->src, r->dsts = t->dst;
    if (t->block <= 0)
        return dtr_cli_digests(ctx, rank, t->n, t->src, t->dst, t->copy, t->in_bytes, t->out,
                               t->out_bytes, d);
    t->dg_src = calloc((size_t)m, sizeof *t->dg_src);
    t->dg_dst = calloc((size_t)m, sizeof *t->dg_dst);
    const void **sent = calloc((size_t)m, sizeof *sent);
    size_t *sent_bytes = calloc((size_t)m, sizeof *sent_bytes);
    dtr_status_t st = t->dg_src && t->dg_dst && sent && sent_bytes ? DTR_OK : DTR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < m && st == DTR_OK; i++) {
        st = dtr_change_sent(t->change, i, &t->dg_src[i], &sent[i], &sent_bytes[i]);
        t->dg_dst[i] = i < t->n ? t->dst[i] : t->sc[i - t->n];
    }
    bool ok = dtr_cli_all_ok("run", st, rank, "--digest") &&
              dtr_cli_digests(ctx, rank, m, t->dg_src, t->dg_dst, (void *const *)sent, sent_bytes,
                              t->out, t->out_bytes, d);
    free(sent), free(sent_bytes);
    r->ntensors = m, r->srcs = t->dg_src, r->dsts = t->dg_dst;
    return ok;
}

/* --dump --block-scale: each destination rank's block of the scales as rankR.scales (a
 * batch's tensor k: rankR.K.scales), beside the fp8 block in rankR.out (rankR.K.out). */
static bool dtr__xdump_scales(const char *dir, int rank, const dtr__xt_t *t, bool batch) {
    bool ok = true;
    for (int k = 0; dir != NULL && t->block > 0 && ok && k < t->n; k++) {
        dtr_layout_t l;
        char what[64] = "scales";
        if (batch) snprintf(what, sizeof what, "%d.scales", k);
        if (dtr_spec_layout(&t->sc[k], rank, &l) == DTR_OK)
            ok = dtr_cli_dump(dir, rank, what, t->out[t->n + k], t->out_bytes[t->n + k]);
    }
    return ok;
}

/* Runs once, checks, times; rank 0 reports. An exit code, the same on every rank. */
static int dtr__xrun(const dtr_cli_change_t *o, dtr__xt_t *t, const dtr_cross_plan_t *plan,
                     int rank, int world) {
    dtr_context_t *ctx = NULL;
    dtr_cli_digest_t *d = NULL;
    dtr_cli_cross_result_t r = {.o = o, .plan = plan, .src = &t->src[0], .dst = &t->dst[0],
                                .world = world, .batch = o->batch != NULL, .first_bad = -1,
                                .block_scale = t->block};
    dtr_status_t st = dtr_cli_job_context(&ctx);
    int rc = DTR_EXIT_FAIL;
    if (!dtr_cli_all_ok("run", st, rank, "context")) goto done;
    st = dtr__xt_fill(t, &o->fill, r.batch, rank);
    if ((rc = dtr_cli_fill_code("run", st, rank, t->oom_bytes)) != DTR_EXIT_OK) goto done;
    rc = DTR_EXIT_FAIL;
    st = dtr__xonce(ctx, t, r.batch, 0, o->nonblocking);
    if (!dtr_cli_all_ok("run", st, rank, "redistribute")) goto done;
    /* --dump: a source rank's block as rankR.in, a destination rank's as rankR.out (the
     * destination's blocks as dtr_cross_plan_dst lays them out, relabeled or not) */
    dtr_layout_t l;
    bool src_rank = dtr_spec_layout(&t->src[0], rank, &l) == DTR_OK;
    bool dst_rank = dtr_spec_layout(&t->dst[0], rank, &l) == DTR_OK;
    bool dumped = r.batch ? dtr_cli_dump_tensors(o->dump, rank, t->n, t->src, t->dst, t->in,
                                                 t->in_bytes, t->out, t->out_bytes)
                          : (!src_rank || dtr_cli_dump(o->dump, rank, "in", t->in[0], t->in_bytes[0])) &&
                                (!dst_rank || dtr_cli_dump(o->dump, rank, "out", t->out[0], t->out_bytes[0]));
    dumped = dumped && dtr__xdump_scales(o->dump, rank, t, r.batch);
    if (!dtr_cli_all_true(dumped)) goto done;
    for (int k = 0; k < t->n && o->inject == rank; k++)
        if (t->out_bytes[k] > 0) { /* the checker's own test */
            ((unsigned char *)t->out[k])[t->out_bytes[k] - 1] ^= 0x5a;
            break;
        }
    dtr_cli_verdict_t v = {0};
    int bad_tensor = -1;
    st = o->verify ? dtr__xt_check(t, rank, &v, &bad_tensor) : DTR_OK;
    if (!dtr_cli_all_ok("run", st, rank, "check")) goto done;
    dtr__xverdicts(&v, bad_tensor, rank, &r);
    if (o->digest) {
        if (!dtr__xdigests(ctx, t, rank, &d, &r)) goto done;
        r.digests = d;
    }
    st = dtr__xtime(ctx, t, o, &r);
    if (!dtr_cli_all_ok("run", st, rank, "timing")) goto done;
    if (rank == 0) dtr_cli_cross_report(&r);
    bool undelivered = d != NULL && dtr_cli_digest_failed(r.ntensors, d, r.srcs, r.dsts, false);
    rc = (!o->verify || r.first_bad < 0) && !undelivered ? DTR_EXIT_OK : DTR_EXIT_FAIL;
done:
    free(d);
    dtr_context_destroy(ctx);
    return rc;
}

/* The specs: one tensor's (--shape, --from, --to) or a --batch file's; *mesh and *mesh_b
 * made (the caller destroys them). */
static int dtr__xspecs(const dtr_cli_change_t *o, int world, dtr_mesh_t **mesh, dtr_mesh_t **mesh_b,
                       dtr__xt_t *t) {
    int rc;
    if (o->batch != NULL) {
        rc = dtr_cli_build_mesh("run", &o->spec, mesh);
        if (rc == DTR_EXIT_OK) rc = dtr_cli_target_mesh("run", o->to_mesh, o->to_ranks, mesh_b);
        if (rc == DTR_EXIT_OK) rc = dtr_cli_mesh_fits("run", "--mesh", *mesh, world);
        if (rc == DTR_EXIT_OK) rc = dtr_cli_mesh_fits("run", "--to-mesh", *mesh_b, world);
        if (rc == DTR_EXIT_OK) rc = dtr_cli_batch_load("run", o->batch, *mesh, *mesh_b, &t->src, &t->dst, &t->n);
        return rc;
    }
    t->src = malloc(sizeof *t->src);
    t->dst = malloc(sizeof *t->dst);
    if (t->src == NULL || t->dst == NULL) return dtr_cli_usage_error("run", "out of memory");
    t->n = 1;
    rc = dtr_cli_build_spec("run", &o->spec, mesh, t->src);
    if (rc == DTR_EXIT_OK)
        rc = dtr_cli_target_spec("run", o->to, o->to_mesh, o->to_ranks, o->to_dtype, t->src,
                                 mesh_b, t->dst);
    if (rc == DTR_EXIT_OK) rc = dtr_cli_mesh_fits("run", "--mesh", *mesh, world);
    if (rc == DTR_EXIT_OK) rc = dtr_cli_mesh_fits("run", "--to-mesh", *mesh_b, world);
    return rc;
}

/* The change (its plan: *plan, the change's own) and, for a batch, each tensor's own plan to
 * the same destination specs. */
static int dtr__xplans(const dtr_cli_change_t *o, dtr__xt_t *t, const dtr_cross_plan_t **plan) {
    /* the cost flags as dtr plan --to-mesh takes them (no --nodes-of between meshes yet) */
    dtr_cli_cost_flags_t flags = {o->alpha, o->bandwidth, o->local, NULL, NULL};
    dtr_cost_model_t cost;
    int rc = dtr_cli_cost_flags("run", &flags, &cost);
    if (rc != DTR_EXIT_OK) return rc;
    dtr_change_options_t copts = {.cost = &cost, .relabel = o->relabel,
                                  .staging_cap_bytes = o->staging_cap, .between_meshes = true,
                                  .many = o->batch != NULL, .block_scale = o->block_scale};
    char what[512];
    snprintf(what, sizeof what, o->batch != NULL ? "--to-mesh --batch %s" : "--to-mesh", o->batch);
    if (dtr_change_create(t->n, t->src, t->dst, &copts, &t->change) != DTR_OK)
        return dtr_cli_plan_error("run", what);
    *plan = dtr_change_cross_plan(t->change);
    for (int k = 0; k < t->n; k++) dtr_change_dst(t->change, k, &t->dst[k]);
    t->block = o->block_scale;
    if (t->block > 0) { /* the scales' specs; no one-at-a-time plans (fp8 needs the scales) */
        if ((t->sc = calloc((size_t)t->n, sizeof *t->sc)) == NULL)
            return dtr_cli_usage_error("run", "out of memory");
        for (int k = 0; k < t->n; k++) dtr_change_scales(t->change, k, &t->sc[k]);
        return DTR_EXIT_OK;
    }
    if (o->batch == NULL) return DTR_EXIT_OK;
    /* (the batch's order, already in dst: no relabeling) */
    dtr_cross_options_t opts = {.cost = &cost, .staging_cap_bytes = o->staging_cap};
    if ((t->one = calloc((size_t)t->n, sizeof *t->one)) == NULL)
        return dtr_cli_usage_error("run", "out of memory");
    for (int k = 0; k < t->n; k++)
        if (dtr_cross_plan_create(&t->src[k], &t->dst[k], &opts, &t->one[k]) != DTR_OK)
            return dtr_cli_plan_error("run", what);
    return DTR_EXIT_OK;
}

int dtr_cli_run_cross(const dtr_cli_change_t *o, int rank, int world) {
    int rc = dtr__cross_flags(o);
    if (rc != DTR_EXIT_OK) return rc;
    dtr_mesh_t *mesh = NULL, *mesh_b = NULL;
    dtr__xt_t t = {0};
    const dtr_cross_plan_t *plan = NULL;
    rc = dtr__xspecs(o, world, &mesh, &mesh_b, &t);
    if (rc == DTR_EXIT_OK && o->digest) rc = dtr_cli_digest_refuse(t.n, t.dst);
    if (rc == DTR_EXIT_OK) rc = dtr__xplans(o, &t, &plan);
    rc = dtr_cli_agree_args("run", rc, rank); /* (before the first collective) */
    if (rc == DTR_EXIT_OK) {
        dtr_cli_restore_stderr(); /* from here on errors are per rank */
        rc = dtr__xrun(o, &t, plan, rank, world);
    }
    dtr__xt_free(&t);
    dtr_mesh_destroy(mesh_b);
    dtr_mesh_destroy(mesh);
    return rc;
}
