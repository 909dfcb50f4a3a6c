/* dtr run --to-mesh: a change between two meshes of the job's ranks, verified on every
 * destination rank (and every source rank's input intact) and timed (run.h). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "redistribute/mpi/dtr_mpi.h"
#include "tools/run.h"

/* What one rank holds and checks. */
typedef struct {
    bool src, dst;
    size_t in_bytes, out_bytes;
    unsigned char *in, *copy, *out;
} dtr__xbufs_t;

/* The flags a change between meshes does not take yet, named. */
static int dtr__cross_flags(const dtr_cli_change_t *o) {
    const char *other = o->backward ? "--backward" : o->nonblocking ? "--nonblocking"
                        : o->dump != NULL ? "--dump" : o->input != NULL ? "--input"
                        : o->shared ? "--buffers shared"
                        : strcmp(o->backend, "mpi") != 0 ? "--backend"
                        : strcmp(o->device, "cpu") != 0 ? "--device"
                        : o->strategy == DTR_STRATEGY_COMPAT ? "--strategy compat" : NULL;
    if (other != NULL)
        return dtr_cli_usage_error("run", "%s: not with --to-mesh yet (docs/cross-mesh.md, "
                                          "\"Not yet\", lists what a change between meshes "
                                          "lacks)", other);
    return DTR_EXIT_OK;
}

/* This rank's buffers: its source block filled (a copy kept), room for its target block. */
static dtr_status_t dtr__xbufs(const dtr_spec_t *src, const dtr_spec_t *dst, const dtr_fill_t *fill,
                               int rank, dtr__xbufs_t *b) {
    dtr_layout_t sl = {0}, dl = {0};
    b->src = dtr_spec_layout(src, rank, &sl) == DTR_OK;
    b->dst = dtr_spec_layout(dst, rank, &dl) == DTR_OK;
    b->in_bytes = (size_t)sl.bytes;
    b->out_bytes = (size_t)dl.bytes;
    b->in = malloc(b->in_bytes + 1);
    b->copy = malloc(b->in_bytes + 1);
    b->out = malloc(b->out_bytes + 1);
    if (b->in == NULL || b->copy == NULL || b->out == NULL) return DTR_ERR_OUT_OF_MEMORY;
    dtr_status_t st = b->src ? dtr_fill(src, fill, rank, b->in, b->in_bytes) : DTR_OK;
    memcpy(b->copy, b->in, b->in_bytes);
    return st;
}

/* The check on this rank: its target block against the reference, its input intact. */
static dtr_status_t dtr__xcheck(const dtr_spec_t *src, const dtr_spec_t *dst, const dtr_fill_t *fill,
                                int rank, const dtr__xbufs_t *b, dtr_cli_verdict_t *v) {
    memset(v, 0, sizeof *v);
    v->rep.first = -1;
    v->input_changed = b->src && memcmp(b->in, b->copy, b->in_bytes) != 0;
    if (!b->dst) return DTR_OK;
    return dtr_fill_check(src, dst, fill, rank, b->out, b->out_bytes, &v->rep);
}

/* The verdicts over every rank: *sum their totals, and the first rank that failed (returned;
 * -1 if none) with its own verdict in *bad. Collective over the job. */
static int dtr__xverdicts(const dtr_cli_verdict_t *v, int rank, int world, dtr_cli_verdict_t *sum,
                          dtr_cli_verdict_t *bad) {
    int64_t mine[3] = {v->rep.mismatches, v->rep.checked, v->input_changed}, all[3];
    MPI_Allreduce(mine, all, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    memset(sum, 0, sizeof *sum);
    sum->rep.mismatches = all[0];
    sum->rep.checked = all[1];
    sum->input_changed = all[2];
    int me = v->rep.mismatches > 0 || v->input_changed ? rank : world, first = world;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    *bad = *v;
    if (first == world) return -1;
    double d[4] = {(double)v->rep.first, v->rep.got, v->rep.want, (double)v->rep.mismatches};
    MPI_Bcast(d, 4, MPI_DOUBLE, first, MPI_COMM_WORLD);
    bad->rep.first = (int64_t)d[0];
    bad->rep.got = d[1];
    bad->rep.want = d[2];
    bad->rep.mismatches = (int64_t)d[3];
    return first;
}

/* Runs once, checks, times; rank 0 reports. An exit code, the same on every rank. */
static int dtr__xrun(const dtr_cli_change_t *o, const dtr_spec_t *src, const dtr_spec_t *dst,
                     const dtr_cross_plan_t *plan, int rank, int world) {
    dtr_context_t *ctx = NULL;
    dtr__xbufs_t b = {0};
    double *times = malloc(sizeof *times * (size_t)(o->iters + 1));
    dtr_status_t st = times != NULL ? dtr_context_create_mpi(MPI_COMM_WORLD, &ctx) : DTR_ERR_OUT_OF_MEMORY;
    int rc = DTR_EXIT_FAIL;
    if (!dtr_cli_all_ok("run", st, rank, "context")) goto done;
    st = dtr__xbufs(src, dst, &o->fill, rank, &b);
    if (!dtr_cli_all_ok("run", st, rank, "fill")) goto done;
    st = dtr_redistribute_cross(ctx, plan, b.in, b.in_bytes, b.out, b.out_bytes);
    if (!dtr_cli_all_ok("run", st, rank, "redistribute")) goto done;
    if (o->inject == rank && b.out_bytes > 0) b.out[b.out_bytes - 1] ^= 0x5a; /* the checker's test */
    dtr_cli_verdict_t v, sum, bad;
    st = o->verify ? dtr__xcheck(src, dst, &o->fill, rank, &b, &v) : DTR_OK;
    if (!o->verify) memset(&v, 0, sizeof v);
    if (!dtr_cli_all_ok("run", st, rank, "check")) goto done;
    int first_bad = dtr__xverdicts(&v, rank, world, &sum, &bad);
    for (int64_t k = -o->warmup; k < o->iters && st == DTR_OK; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime(), dt, slowest;
        st = dtr_redistribute_cross(ctx, plan, b.in, b.in_bytes, b.out, b.out_bytes);
        dt = (MPI_Wtime() - t0) * 1e6;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (k >= 0) times[k] = slowest;
    }
    if (!dtr_cli_all_ok("run", st, rank, "timing")) goto done;
    bool ok = !o->verify || first_bad < 0;
    if (rank == 0)
        dtr_cli_cross_report(o, src, dst, plan, &sum, first_bad, &bad,
                             dtr_cli_median(times, (int)o->iters), world);
    rc = ok ? DTR_EXIT_OK : DTR_EXIT_FAIL;
done:
    dtr_context_destroy(ctx);
    free(b.in);
    free(b.copy);
    free(b.out);
    free(times);
    return rc;
}

int dtr_cli_run_cross(const dtr_cli_change_t *o, int rank, int world) {
    int rc = dtr__cross_flags(o);
    if (rc != DTR_EXIT_OK) return rc;
    dtr_mesh_t *mesh = NULL, *mesh_b = NULL;
    dtr_spec_t src, dst;
    rc = dtr_cli_build_spec("run", &o->spec, &mesh, &src);
    if (rc == DTR_EXIT_OK)
        rc = dtr_cli_target_spec("run", o->to, o->to_mesh, o->to_ranks, o->to_dtype, &src,
                                 &mesh_b, &dst);
    if (rc == DTR_EXIT_OK) rc = dtr_cli_mesh_fits("run", "--mesh", mesh, world);
    if (rc == DTR_EXIT_OK) rc = dtr_cli_mesh_fits("run", "--to-mesh", mesh_b, world);
    dtr_cross_plan_t *plan = NULL;
    if (rc == DTR_EXIT_OK && dtr_cross_plan_create(&src, &dst, NULL, &plan) != DTR_OK)
        rc = dtr_cli_plan_error("run", "--to-mesh");
    if (rc == DTR_EXIT_OK) {
        dtr_cli_restore_stderr(); /* from here on errors are per rank */
        rc = dtr__xrun(o, &src, &dst, plan, rank, world);
    }
    dtr_cross_plan_destroy(plan);
    dtr_mesh_destroy(mesh_b);
    dtr_mesh_destroy(mesh);
    return rc;
}
