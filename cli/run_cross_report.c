/* dtr run --to-mesh: the result on rank 0, as text or one JSON object, and the failure line
 * on stderr (run.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/run.h"

/* The names a change between meshes prints (tensor 0's for a batch). */
typedef struct {
    char shape[128], from[128], to[128], ma[64], mb[64];
    const char *dtype, *to_dtype;
} dtr__xnames_t;

static void dtr__names(const dtr_cli_cross_result_t *r, dtr__xnames_t *n) {
    n->dtype = dtr_dtype_name(r->src->dtype);
    n->to_dtype = dtr_dtype_name(r->dst->dtype);
    dtr_shape_format(r->src->shape, r->src->ndim, n->shape, sizeof n->shape);
    dtr_placements_describe(r->src->placements, dtr_mesh_ndims(r->src->mesh), n->from, sizeof n->from);
    dtr_placements_describe(r->dst->placements, dtr_mesh_ndims(r->dst->mesh), n->to, sizeof n->to);
    dtr_mesh_format(r->src->mesh, n->ma, sizeof n->ma);
    dtr_mesh_format(r->dst->mesh, n->mb, sizeof n->mb);
}

/* The destination mesh's ranks by coordinate, comma-separated. */
static void dtr__ranks(const dtr_mesh_t *mesh) {
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, n = dtr_mesh_nranks(mesh);
    for (int64_t p = 0; p < n; p++) {
        int rank;
        dtr_mesh_rank_at(mesh, coord, &rank);
        printf("%s%d", p ? "," : "", rank);
        for (int i = dtr_mesh_ndims(mesh) - 1; i >= 0; i--) {
            if (++coord[i] < dtr_mesh_size(mesh, i)) break;
            coord[i] = 0;
        }
    }
}

static void dtr__text(const dtr_cli_cross_result_t *r, const dtr__xnames_t *n,
                      const dtr_cross_figures_t *f, bool ok) {
    const dtr_cli_change_t *o = r->o;
    bool cast = strcmp(n->to_dtype, n->dtype) != 0;
    if (r->batch)
        printf("dtr run: batch of %d tensors, mesh %s -> mesh %s, %d ranks (%s backend, cpu "
               "buffers)\n",
               dtr_cross_plan_tensors(r->plan) / (r->block_scale > 0 ? 2 : 1), n->ma, n->mb, r->world, dtr_cli_job_backend());
    else
        printf("dtr run: shape %s %s, mesh %s %s -> mesh %s %s%s%s, %d ranks (%s backend, cpu "
               "buffers)\n",
               n->shape, n->dtype, n->ma, n->from, n->mb, n->to, cast ? " in " : "",
               cast ? n->to_dtype : "", r->world, dtr_cli_job_backend());
    if (o->relabel) {
        printf("  relabeled: the destination mesh's ranks by coordinate ");
        dtr__ranks(r->dst->mesh);
        printf(", %lld bytes kept from moving%s\n", (long long)f->relabel_saved_bytes,
               f->permutation ? " (a pure permutation: nothing moves)" : "");
    }
    int summed = 0, addends = 0; /* tensors whose Partial the receivers sum */
    for (int t = 0; t < dtr_cross_plan_tensors(r->plan); t++) {
        int a = dtr_cross_plan_addends(r->plan, t);
        summed += a > 0;
        addends = a > 0 ? a : addends;
    }
    dtr_reduce_op_t op = DTR_REDUCE_SUM; /* (a ragged source's max, min or product too) */
    for (int i = 0; i < dtr_mesh_ndims(r->src->mesh); i++)
        if (r->src->placements[i].kind == DTR_PARTIAL) op = r->src->placements[i].op;
    if (summed > 0 && !r->batch && op == DTR_REDUCE_SUM)
        printf("  the %d addends summed at the receivers", addends);
    else if (summed > 0 && !r->batch)
        printf("  the %d addends combined by %s at the receivers", addends, dtr_reduce_op_name(op));
    else
        printf("  %d step%s on the source mesh first", f->pre_steps, f->pre_steps == 1 ? "" : "s");
    if (summed > 0 && r->batch)
        printf(" (%d tensor%s summed at the receivers instead)", summed, summed == 1 ? "" : "s");
    printf(", then %lld message%s between ranks in %lld round%s; most bytes one rank sends %lld "
           "(lower bound %lld), receives %lld (lower bound %lld)\n",
           (long long)f->messages, f->messages == 1 ? "" : "s", (long long)f->rounds,
           f->rounds == 1 ? "" : "s", (long long)f->send_bytes_max,
           (long long)f->lower_bound_send_bytes, (long long)f->recv_bytes_max,
           (long long)f->lower_bound_recv_bytes);
    if (o->staging_cap > 0)
        printf("  staging cap %lld bytes: at most %lld staged on a rank in a round\n",
               (long long)o->staging_cap, (long long)f->staging_bytes_max);
    if (o->fill.kind == DTR_FILL_RANDOM)
        printf("  fill: random, seed %llu%s\n", (unsigned long long)o->fill.seed,
               r->batch ? " (tensor k: seed + k)" : "");
    else
        printf("  fill: pattern\n");
    if (r->block_scale > 0 && r->src->ndim >= 2)
        printf("  block-scaled: one f32 scale per %lld x %lld block, laid out by the "
               "destination's placements; only fp8 bytes and scales moved\n",
               (long long)r->block_scale, (long long)r->block_scale);
    else if (r->block_scale > 0) /* (1-D: B elements; 0-D: the one element) */
        printf("  block-scaled: one f32 scale per block of %lld elements, laid out by the "
               "destination's placements; only fp8 bytes and scales moved\n",
               (long long)(r->src->ndim == 1 ? r->block_scale : 1));
    if (o->verify && ok && r->block_scale > 0)
        printf("  verified: all %lld fp8 elements and scales of the destination ranks' blocks "
               "equal the reference quantizer's; every source rank's input intact\n",
               (long long)r->sum.rep.checked);
    else if (o->verify && ok)
        printf("  verified: all %lld elements on every destination rank match; every source rank's "
               "input intact\n",
               (long long)r->sum.rep.checked);
    if (r->digests != NULL && r->block_scale > 0)
        printf("  (--block-scale: the digests are of the %d fp8 tensor%s, then %s scales, as the "
               "source ranks quantized them and as they arrived)\n", r->ntensors / 2,
               r->ntensors > 2 ? "s" : "", r->ntensors > 2 ? "their" : "its");
    if (r->digests != NULL)
        dtr_cli_digest_text(stdout, r->ntensors, r->batch || r->block_scale > 0, r->digests,
                            r->srcs, r->dsts);
    if (o->iters > 0 && r->batch && r->block_scale > 0)
        printf("  median of %ld iterations: batched %.1f us\n", (long)o->iters, r->med);
    else if (o->iters > 0 && r->batch)
        printf("  median of %ld iterations: batched %.1f us, one tensor at a time %.1f us (%.2fx)\n",
               (long)o->iters, r->med, r->one_by_one, r->med > 0 ? r->one_by_one / r->med : 0);
    else if (o->iters > 0)
        printf("  median of %ld iterations: %.1f us\n", (long)o->iters, r->med);
}

static void dtr__json(const dtr_cli_cross_result_t *r, const dtr_cross_figures_t *f, bool ok) {
    const dtr_cli_change_t *o = r->o;
    const dtr_cli_verdict_t *v = &r->sum;
    dtr_cli_json_begin(stdout, "run", r->src->mesh);
    printf(",\"to_mesh\":");
    int64_t sizes[DTR_MAX_MESH_DIMS];
    for (int i = 0; i < dtr_mesh_ndims(r->dst->mesh); i++) sizes[i] = dtr_mesh_size(r->dst->mesh, i);
    dtr_cli_json_i64_array(stdout, sizes, dtr_mesh_ndims(r->dst->mesh));
    dtr_cli_json_str(stdout, "backend", dtr_cli_job_backend());
    if (r->block_scale > 0) printf(",\"block_scale\":%lld", (long long)r->block_scale);
    if (r->batch && r->block_scale > 0) { /* (2n tensors move; no one-at-a-time form) */
        dtr_cli_json_str(stdout, "batch", o->batch);
        printf(",\"ntensors\":%d,\"one_by_one_median_us\":null,"
               "\"one_by_one_over_batched\":null", dtr_cross_plan_tensors(r->plan) / 2);
    } else if (r->batch) {
        dtr_cli_json_str(stdout, "batch", o->batch);
        printf(",\"ntensors\":%d,\"one_by_one_median_us\":%.3f,\"one_by_one_over_batched\":%.3f",
               dtr_cross_plan_tensors(r->plan), r->one_by_one, r->med > 0 ? r->one_by_one / r->med : 0);
    } else {
        dtr_cli_json_change(stdout, r->src, r->dst);
    }
    printf(",\"verified\":%s,\"mismatches\":%lld,\"checked\":%lld,\"input_intact\":%s,"
           "\"fill\":\"%s\",",
           o->verify ? (ok ? "true" : "false") : "null", (long long)v->rep.mismatches,
           (long long)v->rep.checked, v->input_changed == 0 ? "true" : "false", o->fill_text);
    if (o->fill.kind == DTR_FILL_RANDOM) printf("\"seed\":%llu,", (unsigned long long)o->fill.seed);
    printf("\"median_us\":%.3f,\"iters\":%ld,\"world\":%d,", r->med, (long)o->iters, r->world);
    printf("\"messages\":%lld,\"recv_bytes_per_rank_max\":%lld,\"send_bytes_per_rank_max\":%lld,"
           "\"lower_bound_recv_bytes_per_rank\":%lld,\"lower_bound_send_bytes_per_rank\":%lld,"
           "\"nrounds\":%lld,\"staging_bytes_per_rank_max\":%lld,\"plan\":",
           (long long)f->messages, (long long)f->recv_bytes_max, (long long)f->send_bytes_max,
           (long long)f->lower_bound_recv_bytes, (long long)f->lower_bound_send_bytes,
           (long long)f->rounds, (long long)f->staging_bytes_max);
    dtr_cross_plan_print_json(r->plan, stdout);
    if (r->digests != NULL)
        dtr_cli_digest_json(stdout, r->ntensors, r->batch || r->block_scale > 0, r->digests);
    printf("}\n");
}

void dtr_cli_cross_report(const dtr_cli_cross_result_t *r) {
    bool ok = !r->o->verify || r->first_bad < 0;
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(r->plan, &f);
    dtr__xnames_t n;
    dtr__names(r, &n);
    if (r->o->json)
        dtr__json(r, &f, ok);
    else
        dtr__text(r, &n, &f, ok);
    if (r->digests != NULL) dtr_cli_digest_failed(r->ntensors, r->digests, r->srcs, r->dsts, true);
    if (ok) return;
    char where[48] = "";
    if (r->batch) snprintf(where, sizeof where, " in tensor %d", r->bad_tensor);
    if (r->bad.rep.mismatches > 0)
        fprintf(stderr, "dtr run: verification failed: %lld of %lld elements wrong; first on rank "
                        "%d%s at local index %lld: got %.9g, want %.9g\n",
                (long long)r->sum.rep.mismatches, (long long)r->sum.rep.checked, r->first_bad,
                where, (long long)r->bad.rep.first, r->bad.rep.got, r->bad.rep.want);
    else
        fprintf(stderr, "dtr run: verification failed: rank %d's input%s was written\n",
                r->first_bad, where);
}
