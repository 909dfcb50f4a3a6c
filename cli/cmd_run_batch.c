/* dtr run --batch: many tensors redistributed together under mpirun, verified element by
 * element, and timed three ways side by side: the batch, the same tensors one plan at a
 * time, and the batch's collectives alone. */
#include <stdlib.h>
#include <string.h>

#include "cli/change.h"
#include "cli/cli.h"
#include "pattern/pattern.h"
#include "cli/run.h"

typedef struct {
    int n;
    dtr_spec_t *src, *dst;
    dtr_fill_t *fills;
    void **in, **out, **copy;
    size_t *in_bytes, *out_bytes;
    size_t oom_bytes;  /* a tensor's buffers that could not be had (0: none) */
    dtr_plan_t *plans; /* the members, for one plan at a time */
} dtr__tensors_t;

static void dtr__tensors_free(dtr__tensors_t *t) {
    for (int k = 0; t->in != NULL && k < t->n; k++) {
        free(t->in[k]);
        free(t->out[k]);
        free(t->copy[k]);
    }
    free(t->in);
    free(t->out);
    free(t->copy);
    free(t->in_bytes);
    free(t->out_bytes);
    free(t->fills);
    free(t->src);
    free(t->dst);
}

/* This rank's buffers, its source blocks filled (tensor k's fill seed: seed + k). */
static dtr_status_t dtr__tensors_fill(dtr__tensors_t *t, int rank, dtr_fill_t fill) {
    size_t n = (size_t)t->n;
    t->in = calloc(n, sizeof *t->in);
    t->out = calloc(n, sizeof *t->out);
    t->copy = calloc(n, sizeof *t->copy);
    t->in_bytes = calloc(n, sizeof *t->in_bytes);
    t->out_bytes = calloc(n, sizeof *t->out_bytes);
    t->fills = calloc(n, sizeof *t->fills);
    if (!t->in || !t->out || !t->copy || !t->in_bytes || !t->out_bytes || !t->fills)
        return DTR_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < t->n; k++) {
        dtr_layout_t sl = {0}, dl = {0};
        if (dtr_spec_layout(&t->src[k], rank, &sl) != DTR_OK) return DTR_OK; /* a bystander */
        dtr_spec_layout(&t->dst[k], rank, &dl);
        t->fills[k] = fill;
        t->fills[k].seed = fill.seed + (uint64_t)k;
        t->in_bytes[k] = (size_t)sl.bytes;
        t->out_bytes[k] = (size_t)dl.bytes;
        t->in[k] = dtr_cli_host_alloc(t->in_bytes[k] + 1);
        t->copy[k] = dtr_cli_host_alloc(t->in_bytes[k] + 1);
        t->out[k] = dtr_cli_host_alloc(t->out_bytes[k] + 1);
        if (!t->in[k] || !t->copy[k] || !t->out[k]) {
            t->oom_bytes = 2 * t->in_bytes[k] + t->out_bytes[k] + 3;
            return DTR_ERR_OUT_OF_MEMORY;
        }
        dtr_status_t st = dtr_fill(&t->src[k], &t->fills[k], rank, t->in[k], t->in_bytes[k]);
        if (st != DTR_OK) return st;
        memcpy(t->copy[k], t->in[k], t->in_bytes[k]);
    }
    return DTR_OK;
}

/* Every element of every tensor; *bad counts the wrong ones (and written inputs). */
static dtr_status_t dtr__tensors_check(const dtr__tensors_t *t, int rank, int64_t *bad,
                                       int64_t *checked, int *first) {
    *bad = *checked = 0;
    *first = -1;
    for (int k = 0; k < t->n; k++) {
        if (t->in[k] == NULL) return DTR_OK;
        dtr_pattern_report_t rep;
        dtr_status_t st = dtr_fill_check(&t->src[k], &t->dst[k], &t->fills[k], rank, t->out[k],
                                         t->out_bytes[k], &rep);
        if (st != DTR_OK) return st;
        int64_t wrong = rep.mismatches + (memcmp(t->in[k], t->copy[k], t->in_bytes[k]) != 0);
        if (wrong > 0 && *first < 0) *first = k;
        *bad += wrong;
        *checked += rep.checked;
    }
    return DTR_OK;
}

static dtr_status_t dtr__batched(dtr_context_t *ctx, const dtr_batch_plan_t *bp,
                                 const dtr__tensors_t *t, bool nonblocking) {
    if (!nonblocking)
        return dtr_redistribute_batch(ctx, bp, (const void *const *)t->in, t->in_bytes, t->out,
                                      t->out_bytes);
    dtr_request_t *req = NULL;
    dtr_status_t st = dtr_redistribute_batch_start(ctx, bp, (const void *const *)t->in,
                                                   t->in_bytes, t->out, t->out_bytes, &req);
    bool done = false;
    while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
    return st;
}

static dtr_status_t dtr__one_by_one(dtr_context_t *ctx, const dtr_batch_plan_t *bp,
                                    const dtr__tensors_t *t) {
    dtr_status_t st = DTR_OK;
    for (int k = 0; k < t->n && st == DTR_OK; k++)
        st = dtr_redistribute(ctx, &bp->plans[k], t->in[k], t->in_bytes[k], t->out[k],
                              t->out_bytes[k]);
    return st;
}

/* Times the three forms, alternating within each iteration; medians of the slowest rank's
 * times into med[3] (us). */
static dtr_status_t dtr__time(dtr_context_t *ctx, const dtr_batch_plan_t *bp,
                              const dtr__tensors_t *t, bool nonblocking, int64_t warmup,
                              int64_t iters, double *med) {
    double *v = malloc(sizeof *v * (size_t)(3 * (iters > 0 ? iters : 1)));
    if (v == NULL) return DTR_ERR_OUT_OF_MEMORY;
    dtr_status_t st = DTR_OK;
    for (int64_t it = -warmup; st == DTR_OK && it < iters; it++) {
        for (int form = 0; st == DTR_OK && form < 3; form++) {
            dtr_cli_job_barrier();
            double t0 = dtr_cli_job_now();
            st = form == 0   ? dtr__batched(ctx, bp, t, nonblocking)
                 : form == 1 ? dtr__one_by_one(ctx, bp, t)
                             : dtr_redistribute_batch_baseline(ctx, bp);
            double slowest = (dtr_cli_job_now() - t0) * 1e6;
            dtr_cli_job_reduce(&slowest, 1, DTR_F64, DTR_REDUCE_MAX);
            if (it >= 0) v[form * iters + it] = slowest;
        }
    }
    for (int form = 0; form < 3; form++) med[form] = dtr_cli_median(v + form * iters, (int)iters);
    free(v);
    return st;
}

static void dtr__print(const dtr_batch_plan_t *bp, const char *mesh, const char *path,
                       bool verify, bool ok, int64_t checked, const double *med, int64_t iters,
                       bool json, const dtr_cli_digest_t *d, const dtr__tensors_t *t) {
    int coll = 0, one = 0;
    for (int k = 0; k < DTR_STEP_KIND_LAST; k++) {
        coll += bp->count[k];
        one += bp->member_count[k];
    }
    if (json) {
        dtr_cli_json_begin(stdout, "run", bp->plans[0].src.mesh);
        dtr_cli_json_str(stdout, "backend", dtr_cli_job_backend());
        dtr_cli_json_str(stdout, "batch", path);
        printf(",\"ntensors\":%d,\"verified\":%s,\"elements_checked\":%lld,"
               "\"nrounds\":%d,\"collectives\":", bp->ntensors,
               verify ? (ok ? "true" : "false") : "null", (long long)checked, bp->nrounds);
        dtr_cli_json_counts(stdout, bp->count);
        fputs(",\"one_by_one_collectives\":", stdout);
        dtr_cli_json_counts(stdout, bp->member_count);
        printf(",\"iters\":%lld", (long long)iters);
        if (iters > 0)
            printf(",\"batched_median_us\":%.2f,\"one_by_one_median_us\":%.2f,"
                   "\"baseline_median_us\":%.2f,\"batched_over_baseline\":%.3f,"
                   "\"one_by_one_over_batched\":%.3f",
                   med[0], med[1], med[2], med[2] > 0 ? med[0] / med[2] : 0,
                   med[0] > 0 ? med[1] / med[0] : 0);
        if (d != NULL) dtr_cli_digest_json(stdout, t->n, true, d);
        printf("}\n");
        return;
    }
    printf("batch of %d tensors on mesh %s: %d rounds, %d collectives (one plan at a time: %d)\n",
           bp->ntensors, mesh, bp->nrounds, coll, one);
    if (verify)
        printf("  verified: %s (%lld elements checked over all ranks)\n", ok ? "yes" : "NO",
               (long long)checked);
    if (d != NULL) dtr_cli_digest_text(stdout, t->n, true, d, t->src, t->dst);
    if (iters > 0)
        printf("  batched %.1f us, one plan at a time %.1f us (%.2fx), the batch's collectives "
               "alone %.1f us (batched %.2fx of them); slowest rank, median of %lld\n",
               med[0], med[1], med[0] > 0 ? med[1] / med[0] : 0, med[2],
               med[2] > 0 ? med[0] / med[2] : 0, (long long)iters);
}

/* Runs the batch once, checks it (with --verify), times it; the body after the flags. */
static int dtr__run_batch(dtr__tensors_t *t, const dtr_batch_plan_t *bp, const char *mesh_text,
                          const dtr_cli_change_t *o, int rank) {
    bool verify = o->verify, nonblocking = o->nonblocking;
    int64_t iters = o->iters;
    dtr_context_t *ctx = NULL;
    dtr_cli_digest_t *d = NULL;
    dtr_status_t st = dtr_cli_job_context(&ctx);
    if (!dtr_cli_all_ok("run", st, rank, "context")) return DTR_EXIT_FAIL;
    int rc = DTR_EXIT_FAIL;
    st = dtr__tensors_fill(t, rank, o->fill);
    if ((rc = dtr_cli_fill_code("run", st, rank, t->oom_bytes)) != DTR_EXIT_OK) goto done;
    rc = DTR_EXIT_FAIL;
    st = dtr__batched(ctx, bp, t, nonblocking);
    if (!dtr_cli_all_ok("run", st, rank, "redistribute")) goto done;
    if (!dtr_cli_all_true(dtr_cli_dump_tensors(o->dump, rank, t->n, t->src, t->dst, t->in,
                                               t->in_bytes, t->out, t->out_bytes)))
        goto done;
    int64_t bad = 0, checked = 0, totals[2];
    int first = -1;
    if (verify) st = dtr__tensors_check(t, rank, &bad, &checked, &first);
    if (!dtr_cli_all_ok("run", st, rank, "check")) goto done;
    if (bad > 0)
        fprintf(stderr, "dtr run: rank %d: %lld wrong elements or written inputs, the first in "
                        "tensor %d\n", rank, (long long)bad, first);
    totals[0] = bad;
    totals[1] = checked;
    dtr_cli_job_reduce(totals, 2, DTR_I64, DTR_REDUCE_SUM);
    if (o->digest && !dtr_cli_digests(ctx, rank, t->n, t->src, t->dst, t->copy, t->in_bytes,
                                       t->out, t->out_bytes, &d))
        goto done;
    double med[3] = {0, 0, 0};
    if (iters > 0) {
        st = dtr__time(ctx, bp, t, nonblocking, o->warmup, iters, med);
        if (!dtr_cli_all_ok("run", st, rank, "timing")) goto done;
    }
    if (rank == 0)
        dtr__print(bp, mesh_text, o->batch, verify, totals[0] == 0, totals[1], med, iters, o->json,
                   d, t);
    bool undelivered = d != NULL && dtr_cli_digest_failed(t->n, d, t->src, t->dst, rank == 0);
    rc = totals[0] == 0 && !undelivered ? DTR_EXIT_OK : DTR_EXIT_FAIL;
done:
    free(d);
    dtr_context_destroy(ctx);
    return rc;
}

int dtr_cli_run_batch(int argc, char **argv, int rank, int world) {
    dtr_cli_change_t o;
    int rc = dtr_cli_change_parse("run", DTR_CLI_RUN_BATCH, argc, argv, &o);
    if (rc == DTR_EXIT_OK) rc = dtr_cli_change_check("run", DTR_CLI_RUN_BATCH, world, &o, NULL);
    if (rc != DTR_EXIT_OK) return rc;
    if (o.to_mesh != NULL) return dtr_cli_run_cross(&o, rank, world); /* between meshes */
    dtr_mesh_t *mesh = NULL;
    rc = dtr_cli_build_mesh("run", &o.spec, &mesh);
    if (rc != DTR_EXIT_OK) return rc;
    dtr__tensors_t t = {0};
    const dtr_batch_plan_t *bp = NULL;
    rc = dtr_cli_mesh_fits("run", "--mesh", mesh, world);
    if (rc == DTR_EXIT_OK) rc = dtr_cli_batch_load("run", o.batch, mesh, NULL, &t.src, &t.dst, &t.n);
    /* (ragged shards that move go box by box, as between meshes: onto this mesh) */
    if (rc == DTR_EXIT_OK &&
        dtr_cli_ragged_route(t.n, t.src, t.dst, true) == DTR_CLI_ROUTE_BETWEEN) {
        dtr__tensors_free(&t);
        dtr_mesh_destroy(mesh);
        dtr_cli_ragged_onto_mesh(&o);
        o.ragged = true;
        return dtr_cli_run_cross(&o, rank, world);
    }
    if (rc == DTR_EXIT_OK && o.digest) rc = dtr_cli_digest_refuse(t.n, t.dst);
    /* planned for where the ranks run, as `dtr run` plans by default (--nodes-of auto) */
    dtr_cost_model_t cost;
    uint32_t across, planned;
    dtr_cli_cost_flags_t flags = {o.alpha, o.bandwidth, o.local, o.inter_alpha, o.inter_bandwidth};
    rc = dtr_cli_agree_args("run", rc, rank); /* (before the first collective) */
    if (rc == DTR_EXIT_OK)
        rc = dtr_cli_node_cost("run", mesh, "auto", &flags, &cost, &across, &planned);
    dtr_change_options_t opts = {.strategy = o.strategy, .cost = &cost, .many = true};
    char what[512];
    snprintf(what, sizeof what, "--batch %s", o.batch);
    dtr_change_t *change = NULL;
    if (rc == DTR_EXIT_OK && dtr_change_create(t.n, t.src, t.dst, &opts, &change) != DTR_OK)
        rc = dtr_cli_plan_error("run", what);
    if (rc == DTR_EXIT_OK) {
        dtr_cli_restore_stderr(); /* from here on errors are per rank */
        bp = dtr_change_batch_plan(change);
        rc = dtr__run_batch(&t, bp, o.spec.mesh, &o, rank);
    }
    dtr_change_destroy(change);
    dtr__tensors_free(&t);
    dtr_mesh_destroy(mesh);
    return rc;
}
