/* dtr run --digest, in every form (one tensor, a batch, between meshes): each tensor's
 * source and result digests (dtr_digest, on their meshes), brought to every rank, compared
 * and reported (run.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/run.h"

static bool dtr__partial(const dtr_spec_t *s) {
    for (int i = 0; i < dtr_mesh_ndims(s->mesh); i++)
        if (s->placements[i].kind == DTR_PARTIAL) return true;
    return false;
}

int dtr_cli_digest_refuse(int n, const dtr_spec_t *dst) {
    for (int k = 0; k < n; k++) {
        if (!dtr__partial(&dst[k])) continue;
        char p[128] = "";
        dtr_placements_describe(dst[k].placements, dtr_mesh_ndims(dst[k].mesh), p, sizeof p);
        char which[32] = "";
        if (n > 1) snprintf(which, sizeof which, " of tensor %d", k);
        return dtr_cli_usage_error("run", "--digest: the destination%s '%s' is Partial: it "
                                          "holds no values to digest until reduced", which, p);
    }
    return DTR_EXIT_OK;
}

/* The first rank of spec's mesh (row-major), which holds the digest for the others. */
static int dtr__root(const dtr_spec_t *s) {
    int64_t zero[DTR_MAX_MESH_DIMS] = {0};
    int root = 0;
    dtr_mesh_rank_at(s->mesh, zero, &root);
    return root;
}

bool dtr_cli_digests(dtr_context_t *ctx, int rank, int n, const dtr_spec_t *src,
                     const dtr_spec_t *dst, void *const *in, const size_t *in_bytes,
                     void *const *out, const size_t *out_bytes, dtr_cli_digest_t **out_d) {
    dtr_cli_digest_t *d = *out_d = calloc((size_t)n + 1, sizeof *d);
    int64_t *mine = calloc((size_t)(2 * n + 1), sizeof *mine);
    dtr_status_t st = d == NULL || mine == NULL ? DTR_ERR_OUT_OF_MEMORY : DTR_OK;
    if (!dtr_cli_all_ok("run", st, rank, "--digest")) { /* (every rank, before the digests) */
        free(mine);
        return false;
    }
    for (int k = 0; k < n && st == DTR_OK; k++) {
        dtr_layout_t l;
        uint64_t a = 0, b = 0;
        d[k].has_src = !dtr__partial(&src[k]);
        if (d[k].has_src && dtr_spec_layout(&src[k], rank, &l) == DTR_OK)
            st = dtr_digest(ctx, &src[k], in[k], (int64_t)in_bytes[k], &a);
        if (st == DTR_OK && dtr_spec_layout(&dst[k], rank, &l) == DTR_OK)
            st = dtr_digest(ctx, &dst[k], out[k], (int64_t)out_bytes[k], &b);
        /* (each mesh's first rank adds its digest, the others zero: the job's sum is it) */
        if (rank == dtr__root(&src[k])) mine[2 * k] = (int64_t)a;
        if (rank == dtr__root(&dst[k])) mine[2 * k + 1] = (int64_t)b;
    }
    dtr_cli_job_reduce(mine, 2 * n, DTR_I64, DTR_REDUCE_SUM); /* (every rank, failed or not) */
    for (int k = 0; k < n; k++)
        d[k].src = (uint64_t)mine[2 * k], d[k].dst = (uint64_t)mine[2 * k + 1];
    free(mine);
    return dtr_cli_all_ok("run", st, rank, "--digest");
}

bool dtr_cli_digest_bad(const dtr_cli_digest_t *d, const dtr_spec_t *src, const dtr_spec_t *dst) {
    return d->has_src && src->dtype == dst->dtype && d->src != d->dst;
}

/* tensor k's digests as JSON members (without braces). */
static void dtr__json_one(FILE *f, const dtr_cli_digest_t *d) {
    if (d->has_src)
        fprintf(f, "\"digest_src\":\"0x%016llx\"", (unsigned long long)d->src);
    else
        fprintf(f, "\"digest_src\":null");
    fprintf(f, ",\"digest_dst\":\"0x%016llx\"", (unsigned long long)d->dst);
}

void dtr_cli_digest_json(FILE *f, int n, bool batch, const dtr_cli_digest_t *d) {
    if (!batch) {
        fprintf(f, ",");
        dtr__json_one(f, d);
        return;
    }
    fprintf(f, ",\"digests\":[");
    for (int k = 0; k < n; k++) {
        fprintf(f, "%s{", k ? "," : "");
        dtr__json_one(f, &d[k]);
        fprintf(f, "}");
    }
    fprintf(f, "]");
}

void dtr_cli_digest_text(FILE *f, int n, bool batch, const dtr_cli_digest_t *d,
                         const dtr_spec_t *src, const dtr_spec_t *dst) {
    if (!batch) {
        fprintf(f, "  digest: result 0x%016llx", (unsigned long long)d->dst);
        if (!d->has_src)
            fprintf(f, " (the source is Partial: no digest of it before the reduction)\n");
        else if (src->dtype != dst->dtype)
            fprintf(f, ", source 0x%016llx (the cast changes the values)\n",
                    (unsigned long long)d->src);
        else
            fprintf(f, " %s the source's: %s\n", d->src == d->dst ? "==" : "!=",
                    d->src == d->dst ? "delivered" : "NOT delivered (the result differs)");
        return;
    }
    int compared = 0, bad = -1;
    for (int k = 0; k < n; k++) {
        compared += d[k].has_src && src[k].dtype == dst[k].dtype;
        if (bad < 0 && dtr_cli_digest_bad(&d[k], &src[k], &dst[k])) bad = k;
    }
    if (bad >= 0)
        fprintf(f, "  digests: tensor %d's result 0x%016llx != its source's 0x%016llx: NOT "
                   "delivered\n", bad, (unsigned long long)d[bad].dst,
                (unsigned long long)d[bad].src);
    else
        fprintf(f, "  digests: %d of %d tensors compared, every result's == its source's: "
                   "delivered%s\n", compared, n,
                compared < n ? " (the others: a Partial source or a cast)" : "");
}

bool dtr_cli_digest_failed(int n, const dtr_cli_digest_t *d, const dtr_spec_t *src,
                           const dtr_spec_t *dst, bool say) {
    for (int k = 0; k < n; k++) {
        if (!dtr_cli_digest_bad(&d[k], &src[k], &dst[k])) continue;
        char which[32] = "";
        if (n > 1) snprintf(which, sizeof which, " of tensor %d", k);
        if (say)
            fprintf(stderr, "dtr run: --digest: the result's digest%s 0x%016llx is not the "
                            "source's 0x%016llx: the change did not deliver the tensor\n",
                    which, (unsigned long long)d[k].dst, (unsigned long long)d[k].src);
        return true;
    }
    return false;
}
