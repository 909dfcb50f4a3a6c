/*
 * Batched plans: the exact rounds of a fixed list, the totals (bytes summed per rank, the
 * bound, counts), random lists whose members run in the reference interpreter and whose
 * rounds are a schedule of them, and every argument error. Seeded (DTR_SEED overrides; the
 * seed and a failing list are printed).
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redistribute/planner/testing.h"
#include "tests/support/interp.h"
#include "tests/support/plan_util.h"

/* "kind@mesh_dim[dtype op]: tensor.step ..." per round, "; " between rounds. */
static void rounds_text(const dtr_batch_plan_t *b, char *buf, size_t len) {
    size_t pos = 0;
    buf[0] = '\0';
    for (int r = 0; r < b->nrounds && pos < len; r++) {
        const dtr_batch_round_t *rd = &b->rounds[r];
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%s@%d", r ? "; " : "",
                                dtr_step_kind_info(rd->kind)->name, rd->mesh_dim);
        if (rd->reduces)
            pos += (size_t)snprintf(buf + pos, len - pos, " %s %s", dtr_dtype_name(rd->dtype),
                                    dtr_reduce_op_name(rd->op));
        pos += (size_t)snprintf(buf + pos, len - pos, ":");
        for (int j = rd->first; j < rd->first + rd->count && pos < len; j++)
            pos += (size_t)snprintf(buf + pos, len - pos, " %d.%d", b->items[j].tensor,
                                    b->items[j].step + 1);
    }
}

typedef struct {
    const char *shape, *from, *to;
    dtr_dtype_t dtype;
} member_t;

static dtr_batch_plan_t *batch_of(const char *mesh_text, const member_t *m, int n,
                                  dtr_mesh_t **mesh) {
    cr_assert_eq(dtr_mesh_parse(mesh_text, NULL, 0, mesh), DTR_OK);
    dtr_spec_t src[16], dst[16];
    for (int t = 0; t < n; t++) {
        cr_assert_eq(spec_from(*mesh, m[t].shape, m[t].from, m[t].dtype, &src[t]), DTR_OK);
        cr_assert_eq(spec_from(*mesh, m[t].shape, m[t].to, m[t].dtype, &dst[t]), DTR_OK);
    }
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    dtr_plan_options_t opts = {.cost = &cost};
    dtr_batch_plan_t *b = NULL;
    cr_assert_eq(dtr_batch_plan_create(n, src, dst, &opts, NULL, &b), DTR_OK, "%s",
                 dtr_last_error());
    return b;
}

Test(batch_plan, rounds_of_a_mixed_list) {
    /* Majority merge: all_gather on mesh dim 1 first (two tensors wait on it), then dim 0
     * (two again, tensor 1's second step among them); reductions split by dtype. */
    const member_t m[] = {{"8x6", "S(0),R", "R,R", DTR_F32},
                          {"8x6", "S(0),S(1)", "R,R", DTR_F32},
                          {"8x6", "P,R", "R,R", DTR_F32},
                          {"5x3", "P,P", "R,S(1)", DTR_BF16},
                          {"4", "R,S(0)", "S(0),R", DTR_F32}};
    dtr_mesh_t *mesh;
    dtr_batch_plan_t *b = batch_of("2x2", m, 5, &mesh);
    char text[1024];
    rounds_text(b, text, sizeof text);
    cr_expect_str_eq(text, "all_gather@1: 1.1 4.1; all_gather@0: 0.1 1.2; reduce_scatter@1 bf16 "
                           "sum: 3.1; all_reduce@0 f32 sum: 2.1; all_reduce@0 bf16 sum: 3.2");
    cr_expect_eq(b->count[DTR_STEP_ALL_GATHER], 2);
    cr_expect_eq(b->member_count[DTR_STEP_ALL_GATHER], 4);
    cr_expect_eq(b->count[DTR_STEP_ALL_REDUCE], 2);
    /* no all-to-all or exchange: coordinate 0 is every member's busiest rank, so the batch's
     * receive is the members' summed (96 + 144 + 192 + 40 + 8) */
    cr_expect_eq(b->recv_bytes_max, 480);
    cr_expect_eq(b->lower_bound_recv_bytes, 460); /* tensor 3 must receive 20, its plan 40 */
    int64_t send, recv, sum_send = 0, sum_recv = 0;
    cr_assert_eq(dtr_batch_plan_rank_bytes(b, 3, &send, &recv), DTR_OK);
    for (int t = 0; t < b->ntensors; t++)
        for (int k = 0; k < b->plans[t].nsteps; k++) {
            int64_t s, r;
            cr_assert_eq(dtr_plan_step_bytes(&b->plans[t], k, 3, &s, &r), DTR_OK);
            sum_send += s;
            sum_recv += r;
        }
    cr_expect_eq(send, sum_send);
    cr_expect_eq(recv, sum_recv);
    /* one latency per round: 5 us per all_gather of 2 ranks, 10 per all_reduce */
    cr_expect(b->one_by_one_time_us - b->time_us > 9.99 && b->one_by_one_time_us - b->time_us < 10.01,
              "saved %.4f us", b->one_by_one_time_us - b->time_us);
    dtr_batch_plan_destroy(b);
    dtr_mesh_destroy(mesh);
}

Test(batch_plan, same_changes_take_one_plans_collectives) {
    /* a layer's parameters: 6 tensors, one change whose plan is the same for their shapes:
     * as many rounds as one plan has steps. (The plan depends on the shape: a 1-d 768 would
     * take reduce_scatter then exchange, 768x768 reduce_scatter, all_gather, reduce_scatter.) */
    member_t m[6];
    const char *shapes[] = {"768x768", "2304x768", "3072x768", "768x3072", "1536x64", "256x768"};
    for (int t = 0; t < 6; t++) m[t] = (member_t){shapes[t], "S(0),P", "R,S(0)", DTR_BF16};
    dtr_mesh_t *mesh;
    dtr_batch_plan_t *b = batch_of("2x4", m, 6, &mesh);
    char text[1024], first[256], other[256];
    rounds_text(b, text, sizeof text);
    steps_text(&b->plans[0], first, sizeof first);
    for (int t = 1; t < 6; t++) {
        steps_text(&b->plans[t], other, sizeof other);
        cr_assert_str_eq(other, first, "tensor %d", t);
    }
    cr_expect_eq(b->nrounds, b->plans[0].nsteps, "%s", text);
    for (int r = 0; r < b->nrounds; r++) cr_expect_eq(b->rounds[r].count, 6, "%s", text);
    dtr_batch_plan_destroy(b);
    dtr_mesh_destroy(mesh);
}

Test(batch_plan, local_and_one_rank_steps_are_not_rounds) {
    /* a mesh dim of one rank, and R -> S (a local chunk): no collective at all */
    const member_t m[] = {{"8", "P,R", "R,R", DTR_F32}, {"8", "R,R", "S(0),R", DTR_F32}};
    dtr_mesh_t *mesh;
    dtr_batch_plan_t *b = batch_of("1x2", m, 2, &mesh);
    cr_expect_eq(b->nrounds, 0);
    cr_expect_eq(b->nitems, 0);
    cr_expect_eq(b->recv_bytes_max, 0);
    dtr_batch_plan_destroy(b);
    dtr_mesh_destroy(mesh);
}

static uint64_t g_state;

static int below(int n) {
    uint64_t z = (g_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (int)((z ^ (z >> 31)) % (uint64_t)n);
}

static dtr_placement_t any_placement(int ndim, dtr_reduce_op_t op) {
    int k = below(ndim + 2);
    return k < ndim ? dtr_shard(k) : k == ndim ? dtr_replicate() : dtr_partial(op);
}

Test(batch_plan, random_lists_schedule_their_members) {
    const char *env = getenv("DTR_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 0) : 20261124;
    g_state = seed;
    int lists = 0, members = 0, coalesced = 0;
    for (int c = 0; c < 300; c++) {
        int mdims = 1 + below(3);
        int64_t msize[3];
        for (int i = 0; i < mdims; i++) msize[i] = 1 + below(4);
        dtr_mesh_t *mesh;
        cr_assert_eq(dtr_mesh_create(mdims, msize, NULL, 0, &mesh), DTR_OK);
        int n = 1 + below(10);
        dtr_spec_t src[10], dst[10];
        /* one reduce op per list: the interpreter's Partial sources need one per tensor, and
         * tensors copy tensor 0's placements */
        dtr_reduce_op_t op = (dtr_reduce_op_t)below(DTR_REDUCE_OP_LAST);
        for (int t = 0; t < n;) {
            int ndim = below(4);
            int64_t shape[3];
            for (int d = 0; d < ndim; d++) shape[d] = below(10);
            dtr_placement_t a[3], b[3];
            for (int i = 0; i < mdims; i++) {
                a[i] = t > 0 && below(2) ? src[0].placements[i] : any_placement(ndim, op);
                b[i] = any_placement(ndim, op);
            }
            dtr_dtype_t dtype = below(2) ? DTR_F32 : (dtr_dtype_t)below(DTR_DTYPE_LAST);
            dtr_plan_t p;
            if (dtr_spec_init(&src[t], mesh, a, mdims, shape, ndim, dtype) != DTR_OK ||
                dtr_spec_init(&dst[t], mesh, b, mdims, shape, ndim, dtype) != DTR_OK ||
                dtr_plan_create(&src[t], &dst[t], NULL, &p) != DTR_OK)
                continue;
            t++;
        }
        dtr_batch_plan_t *bp = NULL;
        cr_assert_eq(dtr_batch_plan_create(n, src, dst, NULL, NULL, &bp), DTR_OK,
                     "seed %llu list %d: %s", (unsigned long long)seed, c, dtr_last_error());
        int next[10] = {0}, items = 0;
        for (int r = 0; r < bp->nrounds; r++) {
            const dtr_batch_round_t *rd = &bp->rounds[r];
            coalesced += rd->count > 1;
            for (int j = rd->first; j < rd->first + rd->count; j++) {
                const dtr_batch_item_t *it = &bp->items[j];
                const dtr_step_t *s = &bp->plans[it->tensor].steps[it->step];
                cr_assert(it->step >= next[it->tensor] && s->kind == rd->kind &&
                              s->mesh_dim == rd->mesh_dim,
                          "seed %llu list %d round %d: tensor %d step %d out of order or kind",
                          (unsigned long long)seed, c, r + 1, it->tensor, it->step + 1);
                next[it->tensor] = it->step + 1;
                items++;
            }
        }
        int64_t bound = 0, recv = 0;
        for (int t = 0; t < n; t++) {
            char err[512];
            cr_assert_eq(interp_plan(&src[t], &dst[t], &bp->plans[t], seed, err, sizeof err), 0,
                         "seed %llu list %d tensor %d: %s", (unsigned long long)seed, c, t, err);
            if (bp->plans[t].lower_bound_recv_bytes > bound) bound = bp->plans[t].lower_bound_recv_bytes;
            recv += bp->plans[t].recv_bytes_max;
            int collectives = 0;
            for (int k = 0; k < bp->plans[t].nsteps; k++) {
                const dtr_step_t *s = &bp->plans[t].steps[k];
                int64_t g = s->mesh_dim >= 0 ? msize[s->mesh_dim] : dtr_mesh_nranks(mesh);
                collectives += dtr_step_kind_info(s->kind)->collective && g > 1 &&
                               !(s->kind == DTR_STEP_EXCHANGE && s->recv_bytes_max == 0 &&
                                 s->peers_max == 0);
            }
            members += collectives;
        }
        cr_expect_eq(items, bp->nitems);
        /* the bound: at least every member's, at most what the batch receives */
        cr_expect(bp->lower_bound_recv_bytes >= bound &&
                      bp->lower_bound_recv_bytes <= bp->recv_bytes_max && bp->recv_bytes_max <= recv,
                  "seed %llu list %d: bound %lld, recv %lld, members' %lld, sum %lld",
                  (unsigned long long)seed, c, (long long)bp->lower_bound_recv_bytes,
                  (long long)bp->recv_bytes_max, (long long)bound, (long long)recv);
        lists++;
        dtr_batch_plan_destroy(bp);
        dtr_mesh_destroy(mesh);
    }
    printf("batch plans: %d random lists, %d member collectives, %d rounds coalescing 2 or more, "
           "seed %llu\n", lists, members, coalesced, (unsigned long long)seed);
    cr_expect_gt(coalesced, 50);
}

Test(batch_plan, errors_name_the_argument) {
    dtr_mesh_t *m4, *m22;
    cr_assert_eq(dtr_mesh_parse("4", NULL, 0, &m4), DTR_OK);
    cr_assert_eq(dtr_mesh_parse("2x2", NULL, 0, &m22), DTR_OK);
    dtr_spec_t src[2], dst[2];
    cr_assert_eq(spec_from(m4, "8", "S(0)", DTR_F32, &src[0]), DTR_OK);
    cr_assert_eq(spec_from(m4, "8", "R", DTR_F32, &dst[0]), DTR_OK);
    dtr_batch_plan_t *b = (dtr_batch_plan_t *)0x1;
    cr_expect_eq(dtr_batch_plan_create(0, src, dst, NULL, NULL, &b), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "n: 0") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_batch_plan_create(1, NULL, dst, NULL, NULL, &b), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "src") != NULL, "%s", dtr_last_error());
    /* another mesh */
    cr_assert_eq(spec_from(m22, "8", "S(0),R", DTR_F32, &src[1]), DTR_OK);
    cr_assert_eq(spec_from(m22, "8", "R,R", DTR_F32, &dst[1]), DTR_OK);
    cr_expect_eq(dtr_batch_plan_create(2, src, dst, NULL, NULL, &b), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "src[1].mesh: not the mesh of src[0]") != NULL, "%s",
              dtr_last_error());
    /* a member that cannot be planned: S -> P(max) */
    cr_assert_eq(spec_from(m4, "8", "S(0)", DTR_F32, &src[1]), DTR_OK);
    cr_assert_eq(spec_from(m4, "8", "P(max)", DTR_F32, &dst[1]), DTR_OK);
    cr_expect_eq(dtr_batch_plan_create(2, src, dst, NULL, NULL, &b), DTR_ERR_UNSUPPORTED);
    cr_expect(strstr(dtr_last_error(), "tensor 1 (src[1] -> dst[1])") != NULL, "%s",
              dtr_last_error());
    cr_expect_eq(b, (dtr_batch_plan_t *)0x1, "*out written on failure");
    dtr_batch_plan_t empty;
    memset(&empty, 0, sizeof empty);
    cr_expect_eq(dtr_batch_plan_print(&empty, stdout), DTR_ERR_INVALID_ARGUMENT);
    int64_t s, r;
    cr_assert_eq(spec_from(m4, "8", "R", DTR_F32, &dst[1]), DTR_OK);
    cr_assert_eq(dtr_batch_plan_create(2, src, dst, NULL, NULL, &b), DTR_OK, "%s", dtr_last_error());
    cr_expect_eq(dtr_batch_plan_rank_bytes(b, 4, &s, &r), DTR_ERR_NOT_IN_MESH);
    dtr_batch_plan_destroy(b);
    dtr_batch_plan_destroy(NULL);
    dtr_mesh_destroy(m4);
    dtr_mesh_destroy(m22);
}

/* A compat plan through the seed's own block lengths (seed_blocks) runs alone: a batch
 * refuses it by name, and takes the same change planned by optimal. */
Test(batch_plan, refuses_a_seed_plan_with_its_own_blocks) {
    dtr_mesh_t *m;
    cr_assert_eq(dtr_mesh_parse("3x3x2", NULL, 0, &m), DTR_OK);
    dtr_spec_t src[2], dst[2];
    cr_assert_eq(spec_from(m, "9x4", "R,R,S(0)", DTR_F32, &src[0]), DTR_OK);
    cr_assert_eq(spec_from(m, "9x4", "R,R,R", DTR_F32, &dst[0]), DTR_OK);
    cr_assert_eq(spec_from(m, "9x4", "S(0),R,S(0)", DTR_F32, &src[1]), DTR_OK);
    cr_assert_eq(spec_from(m, "9x4", "R,S(0),S(0)", DTR_F32, &dst[1]), DTR_OK);
    dtr_plan_options_t compat = {.strategy = DTR_STRATEGY_COMPAT};
    dtr_plan_t alone;
    cr_assert_eq(dtr_plan_create(&src[1], &dst[1], &compat, &alone), DTR_OK, "%s", dtr_last_error());
    cr_assert(alone.seed_blocks);
    dtr_batch_plan_t *b = (dtr_batch_plan_t *)0x1;
    cr_expect_eq(dtr_batch_plan_create(2, src, dst, &compat, NULL, &b), DTR_ERR_UNSUPPORTED);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_batch_plan_create: tensor 1 (src[1] -> dst[1]): dtr_plan_create: "
                     "compat: the seed algorithm's plan holds blocks of other lengths than the "
                     "canonical layout on the way, which a batch cannot coalesce (plan the "
                     "tensor alone, or with the optimal strategy)");
    cr_expect_eq(b, (dtr_batch_plan_t *)0x1, "*out written on failure");
    cr_assert_eq(dtr_batch_plan_create(2, src, dst, NULL, NULL, &b), DTR_OK, "%s", dtr_last_error());
    cr_expect(!b->plans[1].seed_blocks);
    dtr_batch_plan_destroy(b);
    dtr_mesh_destroy(m);
}
