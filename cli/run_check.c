/* dtr run's checks: the sources filled or read, the results dumped and checked on every
 * rank, the verdicts gathered on rank 0, and the backward plan run and checked (run.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/run.h"

dtr_status_t dtr_cli_source_fill(dtr_cli_source_t *d, const dtr_spec_t *spec, const char *suffix,
                                 int rank, bool verify, void *buf, size_t bytes) {
    if (d->input == NULL) return dtr_fill(spec, &d->fill, rank, buf, bytes);
    dtr_status_t st = dtr_fill_read(d->input, suffix, rank, buf, bytes);
    if (st != DTR_OK || !verify) return st;
    dtr_fill_blocks_destroy(d->blocks);
    d->blocks = NULL;
    st = dtr_fill_load(spec, d->input, suffix, &d->blocks);
    d->fill.given = d->blocks;
    return st;
}

bool dtr_cli_dump(const char *dir, int rank, const char *what, const void *p, size_t n) {
    if (dir == NULL) return true;
    char path[4096];
    int len = snprintf(path, sizeof path, "%s/rank%d.%s", dir, rank, what);
    if (len < 0 || (size_t)len >= sizeof path) {
        fprintf(stderr, "dtr run: rank %d: --dump: path too long\n", rank);
        return false;
    }
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL && (n == 0 || fwrite(p, 1, n, f) == n);
    int err = errno;
    if (f != NULL && fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok)
        dtr_cli_say("dtr run: rank %d: --dump: cannot write '%s': %s", rank, path,
                    strerror(err));
    return ok;
}

bool dtr_cli_dump_tensors(const char *dir, int rank, int n, const dtr_spec_t *src,
                          const dtr_spec_t *dst, void *const *in, const size_t *in_bytes,
                          void *const *out, const size_t *out_bytes) {
    bool ok = true;
    for (int k = 0; dir != NULL && ok && k < n; k++) {
        char what[64];
        dtr_layout_t l;
        snprintf(what, sizeof what, "%d.in", k);
        if (dtr_spec_layout(&src[k], rank, &l) == DTR_OK)
            ok = dtr_cli_dump(dir, rank, what, in[k], in_bytes[k]);
        snprintf(what, sizeof what, "%d.out", k);
        if (ok && dtr_spec_layout(&dst[k], rank, &l) == DTR_OK)
            ok = dtr_cli_dump(dir, rank, what, out[k], out_bytes[k]);
    }
    return ok;
}

bool dtr_cli_all_true(bool ok) {
    int all = ok;
    dtr_cli_job_reduce(&all, 1, DTR_I32, DTR_REDUCE_MIN);
    return all != 0;
}

/* The verdicts of every rank folded into one: counts summed, tolerances the largest. */
static void dtr__fold(dtr_cli_verdict_t *sum, const dtr_cli_verdict_t *v) {
    sum->rep.mismatches += v->rep.mismatches;
    sum->rep.checked += v->rep.checked;
    sum->input_changed += v->input_changed;
    if (v->rep.tolerance > sum->rep.tolerance) sum->rep.tolerance = v->rep.tolerance;
    if (v->rep.unit > sum->rep.unit) sum->rep.unit = v->rep.unit;
    if (v->rep.worst > sum->rep.worst || isnan(v->rep.worst)) sum->rep.worst = v->rep.worst;
    sum->rep.sum_scale |= v->rep.sum_scale;
}

/* Every rank's verdict v on rank 0: into *all (kept, for the first failing rank's detail;
 * NULL to free it) and folded into *sum. Collective. */
static void dtr__gather(int rank, int world, const dtr_cli_verdict_t *v, dtr_cli_verdict_t **all,
                        dtr_cli_verdict_t *sum) {
    dtr_cli_verdict_t *each = rank == 0 ? calloc((size_t)world, sizeof *each) : NULL;
    dtr_cli_job_gather(v, sizeof *v, each);
    for (int k = 0; each != NULL && k < world; k++) dtr__fold(sum, &each[k]);
    if (all != NULL)
        *all = each;
    else
        free(each);
}

/* --digest: the source's digest and the result's (run_digest.c). Collective. */
static bool dtr__digests(dtr_cli_run_t *r) {
    if (!r->o->digest) return true;
    void *in[1] = {r->copy}, *out[1] = {r->out};
    dtr_cli_digest_t *d = NULL;
    bool ok = dtr_cli_digests(r->ctx, r->rank, 1, &r->src, &r->dst, in, &r->in_bytes, out,
                              &r->out_bytes, &d);
    if (ok) r->digest = d[0];
    free(d);
    return ok;
}

bool dtr_cli_run_check(dtr_cli_run_t *r) {
    const dtr_cli_change_t *o = r->o;
    dtr_cli_verdict_t v = {0};
    v.rep.first = -1;
    if (o->inject == r->rank && r->out_bytes > 0)
        r->out[r->out_bytes - 1] ^= 0x5a; /* the checker's own test */
    if (!dtr_cli_all_true(!r->inside || (dtr_cli_dump(o->dump, r->rank, "in", r->in, r->in_bytes) &&
                                         dtr_cli_dump(o->dump, r->rank, "out", r->out, r->out_bytes))))
        return false;
    dtr_status_t st = DTR_OK;
    if (o->verify && r->inside) {
        st = dtr_fill_check(&r->src, &r->dst, &r->data.fill, r->rank, r->out, r->out_bytes, &v.rep);
        v.input_changed = memcmp(r->in, r->copy, r->in_bytes) != 0;
    }
    if (!dtr_cli_all_ok("run", st, r->rank, "check") || !dtr__digests(r)) return false;
    /* rank 0 gathers the verdicts to name the first failing rank */
    dtr__gather(r->rank, r->world, &v, &r->all, &r->fwd);
    r->first_bad = -1;
    for (int k = 0; r->all != NULL && k < r->world && r->first_bad < 0; k++)
        if (r->all[k].rep.mismatches > 0 || r->all[k].input_changed) r->first_bad = k;
    return true;
}

/* The gradient's buffers on this rank: its block in (filled), a copy of it, its block out. */
typedef struct {
    size_t in_bytes, out_bytes;
    unsigned char *in, *copy, *out;
} dtr__grad_t;

/* Runs the backward plan on this rank's gradient g (filled already), into g->out. */
static dtr_status_t dtr__grad_run(dtr_cli_run_t *r, dtr__grad_t *g) {
    void *din = NULL, *dout = NULL;
    memcpy(g->copy, g->in, g->in_bytes);
    dtr_status_t st = dtr_cli_dev_put(&r->eng, g->in, g->in_bytes, &din);
    if (st == DTR_OK) st = dtr_cli_dev_put(&r->eng, g->out, g->out_bytes, &dout);
    if (st == DTR_OK) st = dtr_redistribute(r->ctx, r->bplan, din, g->in_bytes, dout, g->out_bytes);
    if (st == DTR_OK) st = dtr_context_sync(r->ctx);
    if (st == DTR_OK) st = dtr_cli_dev_get(&r->eng, g->out, dout, g->out_bytes);
    if (st == DTR_OK) st = dtr_cli_dev_get(&r->eng, g->in, din, g->in_bytes);
    dtr_cli_dev_free(&r->eng, din, g->in);
    dtr_cli_dev_free(&r->eng, dout, g->out);
    return st;
}

bool dtr_cli_run_backward(dtr_cli_run_t *r) {
    const dtr_cli_change_t *o = r->o;
    r->bplan = malloc(sizeof *r->bplan);
    dtr_status_t st = r->bplan == NULL ? DTR_ERR_OUT_OF_MEMORY
                      : o->backward_dtype_text != NULL
                          ? dtr_plan_backward_in(&r->src, &r->dst, o->backward_dtype, &r->opts,
                                                 r->bplan)
                          : dtr_plan_backward(&r->src, &r->dst, &r->opts, r->bplan);
    if (!dtr_cli_all_ok("run", st, r->rank, "backward plan")) return false;
    /* the gradient's values: other random values than the forward's, or the files' */
    dtr_cli_source_t grad = {.fill = r->data.fill, .input = o->input};
    grad.fill.seed ^= 0x5bd1e995u;
    dtr_layout_t gl = {0}, tl = {0};
    if (r->inside) {
        dtr_spec_layout(&r->dst, r->rank, &gl);
        dtr_spec_layout(&r->bplan->dst, r->rank, &tl);
    }
    dtr__grad_t g = {(size_t)gl.bytes, (size_t)tl.bytes, malloc((size_t)gl.bytes + 1),
                     malloc((size_t)gl.bytes + 1), malloc((size_t)tl.bytes + 1)};
    st = g.in && g.copy && g.out ? DTR_OK : DTR_ERR_OUT_OF_MEMORY;
    if (st == DTR_OK && r->inside)
        st = dtr_cli_source_fill(&grad, &r->dst, "grad_in", r->rank, o->verify, g.in, g.in_bytes);
    if (st == DTR_OK) st = dtr__grad_run(r, &g);
    bool dumped = st != DTR_OK || !r->inside ||
                  (dtr_cli_dump(o->dump, r->rank, "grad_in", g.in, g.in_bytes) &&
                   dtr_cli_dump(o->dump, r->rank, "grad_out", g.out, g.out_bytes));
    dtr_cli_verdict_t bv = {0};
    if (st == DTR_OK && o->verify && r->inside) {
        st = dtr_fill_check_via(&r->dst, &r->bplan->dst, r->bplan->op_dtype, &grad.fill, r->rank,
                                g.out, g.out_bytes, &bv.rep);
        bv.rep.mismatches += memcmp(g.in, g.copy, g.in_bytes) != 0;
    }
    free(g.in);
    free(g.copy);
    free(g.out);
    dtr_fill_blocks_destroy(grad.blocks);
    if (!dtr_cli_all_ok("run", st, r->rank, "backward") || !dtr_cli_all_true(dumped)) return false;
    dtr__gather(r->rank, r->world, &bv, NULL, &r->bwd);
    return true;
}
