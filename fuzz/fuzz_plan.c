/*
 * libFuzzer harness for planning: random specs on meshes of 1 to 3 dims (sizes 1..4), uneven
 * shapes with empty shards, every placement kind, shard orders, both strategies. A plan that is made must
 * turn the source layout into the target layout when the reference interpreter
 * (tests/support/interp.c) runs it on virtual ranks, and the optimal plan must not
 * receive fewer bytes than the lower bound or model more time than compat's. A refusal must
 * be a known error with a detail. Printing the plan must work.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dtr.h"
#include "fuzz/fuzz_util.h"
#include "tests/support/interp.h"

static FILE *devnull;

static dtr_placement_t placement(fuzz_bytes_t *b, int ndim, dtr_reduce_op_t op) {
    unsigned v = fuzz_byte(b);
    switch (v % 4) {
    case 0:
    case 1:
        return dtr_shard((int32_t)((v >> 2) % (unsigned)ndim));
    case 2:
        return dtr_replicate();
    default:
        return dtr_partial(op);
    }
}

/* Shard orders: where `on`, each tensor dim that several mesh dims shard gets them in a
 * rotated, perhaps reversed, order (every permutation of up to 3), from the bits of k. */
static void shard_orders(dtr_placement_t *pl, int mdims, int ndim, unsigned on, unsigned k) {
    for (int d = 0; on && d < ndim; d++) {
        int dims[3], n = 0;
        for (int i = 0; i < mdims; i++)
            if (pl[i].kind == DTR_SHARD && pl[i].dim == d) dims[n++] = i;
        for (int q = 0; q < n && n > 1; q++) {
            int pos = (q + (int)(k % (unsigned)n)) % n;
            pl[dims[q]].order = k & 4 ? n - 1 - pos : pos;
        }
        k >>= 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (devnull == NULL) devnull = fopen("/dev/null", "w");
    fuzz_bytes_t b = {data, size};
    int mdims = 1 + (int)(fuzz_byte(&b) % 3);
    int64_t msize[3];
    for (int i = 0; i < mdims; i++) msize[i] = 1 + fuzz_byte(&b) % 4;
    int ndim = 1 + (int)(fuzz_byte(&b) % 3);
    int64_t shape[3];
    for (int d = 0; d < ndim; d++) shape[d] = fuzz_byte(&b) % 10;
    unsigned ops = fuzz_byte(&b);
    dtr_reduce_op_t src_op = (dtr_reduce_op_t)(ops % DTR_REDUCE_OP_LAST);
    dtr_reduce_op_t dst_op = (ops & 0x80) ? (dtr_reduce_op_t)((ops >> 3) % DTR_REDUCE_OP_LAST)
                                          : src_op;
    dtr_placement_t a[3], c[3];
    for (int i = 0; i < mdims; i++) a[i] = placement(&b, ndim, src_op);
    for (int i = 0; i < mdims; i++) c[i] = placement(&b, ndim, dst_op);
    static const dtr_dtype_t dtypes[] = {DTR_F32, DTR_F64, DTR_BF16, DTR_I32, DTR_F8E4M3};
    dtr_dtype_t dtype = dtypes[fuzz_byte(&b) % 5];
    unsigned ord = fuzz_byte(&b); /* (last, so that older inputs keep their meaning) */
    shard_orders(a, mdims, ndim, ord & 1, ord >> 2);
    shard_orders(c, mdims, ndim, ord & 2, ord >> 5);

    dtr_mesh_t *mesh = NULL;
    FUZZ_ASSERT(dtr_mesh_create(mdims, msize, NULL, 0, &mesh) == DTR_OK, "mesh_create");
    dtr_spec_t src, dst;
    FUZZ_ASSERT(dtr_spec_init(&src, mesh, a, mdims, shape, ndim, dtype) == DTR_OK &&
                    dtr_spec_init(&dst, mesh, c, mdims, shape, ndim, dtype) == DTR_OK,
                "spec_init");
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    double modeled[2] = {-1, -1};
    for (int s = 0; s < 2; s++) {
        dtr_plan_options_t opts = {.strategy = s ? DTR_STRATEGY_COMPAT : DTR_STRATEGY_OPTIMAL,
                                   .cost = &cost};
        dtr_plan_t plan;
        dtr_status_t st = dtr_plan_create(&src, &dst, &opts, &plan);
        if (st != DTR_OK) {
            fuzz_check_error(st);
            continue;
        }
        /* (optimal does not take a seed plan through its own block lengths: such a plan
         * cannot join a batch, docs/planner.md; so it may model faster) */
        modeled[s] = s && plan.seed_blocks ? -1 : plan.time_us;
        FUZZ_ASSERT(plan.nsteps >= 0 && plan.nsteps <= DTR_MAX_PLAN_STEPS, "nsteps");
        FUZZ_ASSERT(dtr_plan_print(&plan, devnull) == DTR_OK &&
                        dtr_plan_print_json(&plan, devnull) == DTR_OK,
                    "print");
        if (s == 0)
            FUZZ_ASSERT(plan.recv_bytes_max >= plan.lower_bound_recv_bytes,
                        "optimal receives %lld bytes, under the lower bound %lld",
                        (long long)plan.recv_bytes_max, (long long)plan.lower_bound_recv_bytes);
        interp_t *in = interp_create(&src, (uint64_t)size);
        FUZZ_ASSERT(in != NULL, "interp_create");
        char err[512] = "";
        int rc = interp_run(in, &plan, err, sizeof err);
        if (rc == 0) rc = interp_check(in, &dst, err, sizeof err);
        interp_destroy(in);
        FUZZ_ASSERT(rc == 0, "%s plan does not redistribute: %s", s ? "compat" : "optimal", err);
    }
    if (modeled[0] >= 0 && modeled[1] >= 0)
        FUZZ_ASSERT(modeled[0] <= modeled[1] * (1 + 1e-9),
                    "optimal models %g us, compat %g us", modeled[0], modeled[1]);
    dtr_mesh_destroy(mesh);
    return 0;
}
