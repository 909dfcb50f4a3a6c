/* Changes between meshes, planned (redistribute/planner/cross.c): every target block tiled
 * exactly by the boxes its rank receives or keeps, each box inside its sender's block, the
 * bounds met, replicas spread, and the refusals named. Seeded random cases print their seed
 * and the failing case. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/redistribute/planner/cross_fixture.h"

Test(cross, random_changes_tile_every_target_block) {
    const uint64_t seed = 20261127;
    int planned = 0, kept = 0, reduced = 0, summed = 0;
    for (int k = 0; k < 400; k++) {
        rng = seed * 1000003u + (uint64_t)k;
        int world = 2 + (int)pick(7);
        dtr_mesh_t *ma = random_mesh(world, 1 + (int)pick((uint64_t)world));
        dtr_mesh_t *mb = random_mesh(world, 1 + (int)pick((uint64_t)world));
        int ndim = (int)pick(4);
        int64_t shape[3];
        for (int d = 0; d < ndim; d++) shape[d] = (int64_t)pick(13);
        dtr_placement_t pa[3], pb[3];
        dtr_reduce_op_t op = (dtr_reduce_op_t)pick(4);
        for (int i = 0; i < dtr_mesh_ndims(ma); i++) {
            pa[i] = random_placement(ndim, true);
            if (pa[i].kind == DTR_PARTIAL) pa[i] = dtr_partial(op); /* (one op a case) */
        }
        for (int i = 0; i < dtr_mesh_ndims(mb); i++) pb[i] = random_placement(ndim, false);
        dtr_spec_t a, b;
        if (dtr_spec_init(&a, ma, pa, dtr_mesh_ndims(ma), shape, ndim, DTR_F32) != DTR_OK ||
            dtr_spec_init(&b, mb, pb, dtr_mesh_ndims(mb), shape, ndim, DTR_F32) != DTR_OK) {
            dtr_mesh_destroy(ma);
            dtr_mesh_destroy(mb);
            continue;
        }
        char what[512];
        describe(&a, &b, seed, k, what, sizeof what);
        dtr_cross_plan_t *p = NULL;
        /* with no message start-up cost, a replicated block's boxes are cut among its holders
         * however small (dtr__xshare): the pieces must tile the targets too */
        dtr_cost_model_t free_start;
        dtr_cost_model_default(&free_start);
        cr_assert_eq(dtr_cost_model_set(&free_start, "0", NULL, NULL), DTR_OK);
        dtr_cross_options_t cut = {.cost = &free_start};
        cr_assert_eq(dtr_cross_plan_create(&a, &b, &cut, &p), DTR_OK, "%s: %s", what, dtr_last_error());
        check_tiling(p, what);
        dtr_cross_figures_t g;
        dtr_cross_plan_figures(p, &g);
        cr_assert_eq(g.recv_bytes_max, g.lower_bound_recv_bytes, "%s (alpha 0)", what);
        dtr_cross_plan_destroy(p);
        p = NULL;
        cr_assert_eq(dtr_cross_plan_create(&a, &b, NULL, &p), DTR_OK, "%s: %s", what, dtr_last_error());
        check_tiling(p, what);
        dtr_cross_figures_t f;
        dtr_cross_plan_figures(p, &f);
        cr_assert_eq(f.recv_bytes_max, f.lower_bound_recv_bytes, "%s", what);
        cr_assert_geq(f.send_bytes_max, f.lower_bound_send_bytes, "%s", what);
        bool replicas = false; /* no replicas in the moved layout: the send bound is met */
        for (int i = 0; i < dtr_mesh_ndims(ma); i++)
            replicas |= p->t[0].mid.placements[i].kind != DTR_SHARD && dtr_mesh_size(ma, i) > 1;
        if (!replicas)
            cr_assert_eq(f.send_bytes_max, f.lower_bound_send_bytes, "%s", what);
        for (int64_t j = 0; j < p->nmsgs; j++) kept += p->msgs[j].from == p->msgs[j].to; /* (made) */
        reduced += p->t[0].has_pre;
        summed += p->t[0].at_receiver;
        planned++;
        dtr_cross_plan_destroy(p);
        dtr_mesh_destroy(ma);
        dtr_mesh_destroy(mb);
    }
    cr_assert_geq(planned, 300, "only %d of 400 cases planned", planned);
    cr_assert_gt(kept, 0, "no case kept a box in place");
    cr_assert_gt(reduced, 20, "only %d cases reduced a Partial first", reduced);
    cr_assert_gt(summed, 5, "only %d cases summed a Partial at the receivers", summed);
}

/* A Partial(sum) summed at the receivers: 2x2 R,P to 2 of its own ranks as S(0). Each
 * target keeps its addend 0 (it holds it) and gets addend 1 from one of its two holders,
 * the two targets from different ones; on the source mesh first, a reduce-scatter would
 * make every rank receive as much before anything moves. DTR_CROSS_REDUCE=source plans
 * that instead, and a Partial(max) always. */
Test(cross, a_partial_summed_at_the_receivers) {
    int ra[] = {0, 1, 2, 3}, rb[] = {0, 2};
    dtr_mesh_t *a = mesh_of("2x2", ra, 4), *b = mesh_of("2", rb, 2);
    dtr_spec_t src = spec_on(a, "R,P", "8x4", DTR_F32), dst = spec_on(b, "S(0)", "8x4", DTR_F32);
    dtr_cross_plan_t *p = NULL;
    cr_assert_eq(dtr_cross_plan_create(&src, &dst, NULL, &p), DTR_OK, "%s", dtr_last_error());
    cr_expect(p->t[0].at_receiver && p->t[0].parts == 2 && !p->t[0].has_pre);
    cr_assert_eq(dtr__xensure(p, -1), DTR_OK);
    cr_assert_eq(p->nmsgs, 4);
    int senders = 0;
    for (int64_t k = 0; k < p->nmsgs; k++) {
        const dtr__xmsg_t *m = &p->msgs[k];
        cr_expect_eq(m->bytes, 4 * 4 * 4);
        cr_expect_eq(m->lo[0], m->to == 0 ? 0 : 4, "message %lld", (long long)k);
        if (m->from == m->to) {
            cr_expect_eq(m->part, 0, "a kept box is addend 0");
        } else {
            cr_expect(m->part == 1 && (m->from == 1 || m->from == 3), "message %lld from %d", (long long)k, m->from);
            senders |= 1 << m->from;
        }
    }
    cr_expect_eq(senders, (1 << 1) | (1 << 3), "addend 1 from both of its holders");
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(p, &f);
    cr_expect(f.messages == 2 && f.send_bytes_max == 64 && f.recv_bytes_max == 64 && f.pre_steps == 0);
    cr_expect_eq(f.lower_bound_send_bytes, 64);
    dtr_cross_plan_destroy(p);
    setenv("DTR_CROSS_REDUCE", "source", 1);
    cr_assert_eq(dtr_cross_plan_create(&src, &dst, NULL, &p), DTR_OK, "%s", dtr_last_error());
    unsetenv("DTR_CROSS_REDUCE");
    cr_expect(!p->t[0].at_receiver && p->t[0].has_pre);
    dtr_cross_plan_destroy(p);
    dtr_spec_t pmax = spec_on(a, "R,P(max)", "8x4", DTR_F32);
    setenv("DTR_CROSS_REDUCE", "receiver", 1);
    cr_assert_eq(dtr_cross_plan_create(&pmax, &dst, NULL, &p), DTR_OK, "%s", dtr_last_error());
    unsetenv("DTR_CROSS_REDUCE");
    cr_expect(!p->t[0].at_receiver && p->t[0].has_pre, "a Partial(max) is reduced on the source mesh");
    dtr_cross_plan_destroy(p);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}

/* The issue's example: 2x2 training ranks, S(0) and Partial, to 4 inference ranks as S(1). */
Test(cross, the_refit_example) {
    int ra[] = {0, 1, 2, 3}, rb[] = {4, 5, 6, 7};
    dtr_mesh_t *a = mesh_of("2x2", ra, 4), *b = mesh_of("4", rb, 4);
    dtr_spec_t src = spec_on(a, "S(0),P", "1024x1000", DTR_F32), dst = spec_on(b, "S(1)", "1024x1000", DTR_F32);
    dtr_cross_plan_t *p = NULL;
    cr_assert_eq(dtr_cross_plan_create(&src, &dst, NULL, &p), DTR_OK, "%s", dtr_last_error());
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(p, &f);
    /* reduce-scatter on A (to S(0),S(1)), then each of 4 ranks sends 2 boxes of 512x250 */
    cr_expect(p->t[0].has_pre && p->t[0].pre->nsteps == 1 &&
              p->t[0].pre->steps[0].kind == DTR_STEP_REDUCE_SCATTER);
    cr_expect_eq(f.messages, 8);
    cr_expect_eq(f.moved_bytes, 1024 * 1000 * 4);
    cr_expect_eq(f.send_bytes_max, 512 * 500 * 4);
    cr_expect_eq(f.recv_bytes_max, 1024 * 250 * 4);
    cr_expect_eq(f.lower_bound_send_bytes, 512 * 500 * 4);
    cr_expect_eq(f.lower_bound_recv_bytes, 1024 * 250 * 4);
    int64_t send, recv;
    cr_expect_eq(dtr_cross_plan_rank_bytes(p, 5, &send, &recv), DTR_OK);
    cr_expect(send == 0 && recv == 1024 * 250 * 4);
    cr_expect_eq(dtr_cross_plan_rank_bytes(p, 9, &send, &recv), DTR_OK); /* in neither */
    cr_expect(send == 0 && recv == 0);
    dtr_cross_plan_destroy(p);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}

/* The same ranks in another order and shape: what a rank holds already stays. */
Test(cross, the_same_blocks_move_nothing) {
    int ra[] = {0, 1, 2, 3}, rb[] = {0, 1, 2, 3};
    dtr_mesh_t *a = mesh_of("2x2", ra, 4), *b = mesh_of("4", rb, 4);
    /* S(0),S(0) on 2x2 and S(0) on 4: the same rows on the same ranks */
    dtr_spec_t src = spec_on(a, "S(0),S(0)", "8x3", DTR_F32), dst = spec_on(b, "S(0)", "8x3", DTR_F32);
    dtr_cross_plan_t *p = NULL;
    cr_assert_eq(dtr_cross_plan_create(&src, &dst, NULL, &p), DTR_OK, "%s", dtr_last_error());
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(p, &f);
    cr_expect_eq(f.messages, 0);
    cr_expect_eq(f.recv_bytes_max, 0);
    cr_assert_eq(dtr__xensure(p, -1), DTR_OK);
    cr_expect_eq(p->nmsgs, 4, "four boxes kept in place");
    dtr_cross_plan_destroy(p);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}

/* Replicas share the sends: four copies of a tensor serve four targets, one box each. */
Test(cross, replicas_share_the_sends) {
    int rb[] = {4, 5, 6, 7};
    dtr_mesh_t *a = mesh_of("2x2", NULL, 0), *b = mesh_of("4", rb, 4);
    dtr_spec_t src = spec_on(a, "R,R", "64x3", DTR_F32), dst = spec_on(b, "S(0)", "64x3", DTR_F32);
    dtr_cross_plan_t *p = NULL;
    cr_assert_eq(dtr_cross_plan_create(&src, &dst, NULL, &p), DTR_OK);
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(p, &f);
    cr_expect_eq(f.send_bytes_max, 16 * 3 * 4);
    cr_expect_eq(f.lower_bound_send_bytes, 16 * 3 * 4);
    for (int r = 0; r < 4; r++) {
        int64_t send, recv;
        dtr_cross_plan_rank_bytes(p, r, &send, &recv);
        cr_expect_eq(send, 16 * 3 * 4, "rank %d sends %lld", r, (long long)send);
    }
    dtr_cross_plan_destroy(p);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}

/* A replicated block's boxes cut among its holders: 2x2 S(0),R to R,S(0) on the same ranks,
 * 1000x600 f32. Ranks 1 and 2 each lack one block that two ranks hold; whole boxes would
 * make one holder send all 1.2 MB; cut in two, each holder sends half, the lower bound, in
 * four messages. A small tensor's boxes go whole (a piece must pay for its message). */
Test(cross, replicated_blocks_are_cut_among_their_holders) {
    dtr_mesh_t *a = mesh_of("2x2", NULL, 0), *b = mesh_of("2x2", NULL, 0);
    const char *shapes[] = {"1000x600", "10x6"};
    for (int k = 0; k < 2; k++) {
        dtr_spec_t src = spec_on(a, "S(0),R", shapes[k], DTR_F32), dst = spec_on(b, "R,S(0)", shapes[k], DTR_F32);
        dtr_cross_plan_t *p = NULL;
        cr_assert_eq(dtr_cross_plan_create(&src, &dst, NULL, &p), DTR_OK, "%s", dtr_last_error());
        check_tiling(p, shapes[k]);
        dtr_cross_figures_t f;
        dtr_cross_plan_figures(p, &f);
        int64_t block = k == 0 ? 500 * 600 * 4 : 5 * 6 * 4;
        cr_expect_eq(f.lower_bound_send_bytes, block / 2, "%s", shapes[k]);
        cr_expect_eq(f.send_bytes_max, k == 0 ? block / 2 : block, "%s", shapes[k]);
        cr_expect_eq(f.messages, k == 0 ? 4 : 2, "%s", shapes[k]);
        cr_expect_eq(f.recv_bytes_max, block, "%s", shapes[k]);
        dtr_cross_plan_destroy(p);
    }
    /* the same with ragged shards: 1000 rows as 300 and 700, then as 200 and 800 */
    dtr_spec_t src = spec_on(a, "S(0){300,700},R", "1000x600", DTR_F32);
    dtr_spec_t dst = spec_on(b, "R,S(0){200,800}", "1000x600", DTR_F32);
    dtr_cross_plan_t *p = NULL;
    cr_assert_eq(dtr_cross_plan_create(&src, &dst, NULL, &p), DTR_OK, "%s", dtr_last_error());
    check_tiling(p, "ragged");
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(p, &f);
    cr_expect_eq(f.send_bytes_max, f.lower_bound_send_bytes, "ragged: %lld over the bound %lld",
                 (long long)f.send_bytes_max, (long long)f.lower_bound_send_bytes);
    cr_expect_eq(f.recv_bytes_max, f.lower_bound_recv_bytes);
    dtr_cross_plan_destroy(p);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}

/* A kind's tensors take the replicas in turn: four alike tensors, each held by ranks 0..3,
 * to one rank: tensor k from rank k; and each rank's own messages, counted as a run makes
 * them, are its share (none for a rank in neither mesh). */
Test(cross, a_kinds_tensors_take_the_replicas_in_turn) {
    int ra[] = {0, 1, 2, 3}, rb[] = {4};
    dtr_mesh_t *a = mesh_of("4", ra, 4), *b = mesh_of("1", rb, 1);
    dtr_spec_t src[4], dst[4];
    for (int k = 0; k < 4; k++) src[k] = spec_on(a, "R", "8x3", DTR_F32), dst[k] = spec_on(b, "R", "8x3", DTR_F32);
    dtr_cross_plan_t *p = NULL;
    cr_assert_eq(dtr_cross_plan_create_batch(4, src, dst, NULL, &p), DTR_OK, "%s", dtr_last_error());
    cr_expect_eq(p->nkinds, 1);
    int64_t count = -1;
    cr_assert_eq(dtr_cross_plan_rank_messages(p, 4, &count), DTR_OK);
    cr_expect_eq(count, 4);
    cr_expect_eq(p->msgs_for, 4, "rank 4's messages alone are made");
    for (int64_t j = 0; j < p->nmsgs; j++)
        cr_expect_eq(p->msgs[j].from, p->msgs[j].tensor, "tensor %d from rank %d", p->msgs[j].tensor,
                     p->msgs[j].from);
    for (int r = 0; r < 4; r++) {
        int64_t send, recv;
        cr_assert_eq(dtr_cross_plan_rank_messages(p, r, &count), DTR_OK);
        cr_expect_eq(count, 1, "rank %d: %lld messages", r, (long long)count);
        dtr_cross_plan_rank_bytes(p, r, &send, &recv);
        cr_expect_eq(send, 8 * 3 * 4, "rank %d sends %lld", r, (long long)send);
    }
    cr_expect_eq(p->msgs_for, -1, "another rank asked: every rank's made");
    cr_assert_eq(dtr_cross_plan_rank_messages(p, 9, &count), DTR_OK);
    cr_expect_eq(count, 0);
    cr_assert_eq(dtr_cross_plan_rank_messages(p, -1, &count), DTR_OK);
    cr_expect_eq(count, 0);
    cr_expect_eq(dtr_cross_plan_rank_messages(p, 0, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "count") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_cross_plan_rank_messages(NULL, 0, &count), DTR_ERR_INVALID_ARGUMENT);
    dtr_cross_plan_destroy(p);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}

/* Copies of a tensor held by h replicas, each cut into d equal boxes: every replica sends
 * floor or ceil of k d / h boxes over the k copies (the next copy's boxes start at the
 * replica after the last one's); a seeded sweep of h, d and k. */
Test(cross, copies_spread_evenly_over_the_replicas) {
    const uint64_t seed = 20261201;
    for (int c = 0; c < 200; c++) {
        rng = seed * 1000003u + (uint64_t)c;
        int h = 1 + (int)pick(16), d = 1 + (int)pick(8), k = 1 + (int)pick(12);
        int ra[16], rb[8];
        char ma[16], mb[16], sh[32];
        for (int r = 0; r < h; r++) ra[r] = r;
        for (int r = 0; r < d; r++) rb[r] = 16 + r;
        snprintf(ma, sizeof ma, "%d", h), snprintf(mb, sizeof mb, "%d", d);
        snprintf(sh, sizeof sh, "%dx3", 4 * d);
        dtr_mesh_t *a = mesh_of(ma, ra, h), *b = mesh_of(mb, rb, d);
        dtr_spec_t src[12], dst[12];
        for (int j = 0; j < k; j++) src[j] = spec_on(a, "R", sh, DTR_F32), dst[j] = spec_on(b, "S(0)", sh, DTR_F32);
        dtr_cross_plan_t *p = NULL;
        cr_assert_eq(dtr_cross_plan_create_batch(k, src, dst, NULL, &p), DTR_OK, "%s", dtr_last_error());
        int64_t box = 4 * 3 * 4, lo = (int64_t)k * d / h, hi = lo + ((int64_t)k * d % h != 0);
        for (int r = 0; r < h; r++) {
            int64_t send, recv;
            dtr_cross_plan_rank_bytes(p, r, &send, &recv);
            cr_expect(send == lo * box || send == hi * box,
                      "seed %llu case %d: %d copies held by %d ranks, %d boxes each: rank %d sends "
                      "%lld boxes, not %lld or %lld", (unsigned long long)seed, c, k, h, d, r,
                      (long long)(send / box), (long long)lo, (long long)hi);
        }
        dtr_cross_plan_destroy(p);
        dtr_mesh_destroy(a);
        dtr_mesh_destroy(b);
    }
}

Test(cross, refusals_name_the_argument) {
    dtr_mesh_t *a = mesh_of("2", NULL, 0), *b = mesh_of("2", NULL, 0);
    dtr_spec_t src = spec_on(a, "S(0)", "4x4", DTR_F32);
    dtr_spec_t other = spec_on(b, "S(0)", "4x5", DTR_F32);
    dtr_spec_t partial = spec_on(b, "P", "4x4", DTR_F32);
    dtr_spec_t ints = spec_on(b, "R", "4x4", DTR_I32);
    dtr_cross_plan_t *p = (dtr_cross_plan_t *)0x1;
    cr_expect_eq(dtr_cross_plan_create(&src, &other, NULL, &p), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_cross_plan_create: dst: shape 4x5 differs from src's 4x4");
    cr_expect_eq(dtr_cross_plan_create(&src, &partial, NULL, &p), DTR_ERR_UNSUPPORTED);
    cr_expect(strstr(dtr_last_error(), "dst: placements[0] is P(sum)") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_cross_plan_create(&src, &ints, NULL, &p), DTR_ERR_UNSUPPORTED);
    cr_expect(strstr(dtr_last_error(), "dst: dtype i32 from src's f32") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_cross_plan_create(NULL, &ints, NULL, &p), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_cross_plan_create: src: must not be NULL");
    cr_expect_eq(dtr_cross_plan_create(&src, &ints, NULL, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(p, (dtr_cross_plan_t *)0x1, "out written on failure");
    /* a Partial of a storage-only dtype cannot be reduced on the source mesh */
    dtr_spec_t fp8 = spec_on(a, "P", "4x4", DTR_F8E4M3), fp8d = spec_on(b, "R", "4x4", DTR_F8E4M3);
    cr_expect_eq(dtr_cross_plan_create(&fp8, &fp8d, NULL, &p), DTR_ERR_UNSUPPORTED);
    cr_expect(strstr(dtr_last_error(), "the reduction on src's mesh") != NULL, "%s", dtr_last_error());
    dtr_cross_plan_destroy(NULL);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}
