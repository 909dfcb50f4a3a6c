/* The cross planner tests' shared cases (cross_fixture.h). */
#include "tests/redistribute/planner/cross_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t rng;
uint64_t pick(uint64_t n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (rng >> 33) % n;
}

/* A mesh of `n` of the `world` ranks: 1-3 dims, its ranks a random choice in random order. */
dtr_mesh_t *random_mesh(int world, int n) {
    int64_t sizes[3];
    int nd = 0, left = n;
    while (left > 1 && nd < 2) { /* a factor of what is left, then the rest */
        int f = 1 + (int)pick((uint64_t)left);
        while (left % f != 0) f--;
        if (f == 1) break;
        sizes[nd++] = f;
        left /= f;
    }
    sizes[nd++] = left;
    int all[16], ranks[16];
    for (int k = 0; k < world; k++) all[k] = k;
    for (int k = world - 1; k > 0; k--) { /* shuffle, then take n */
        int j = (int)pick((uint64_t)k + 1), t = all[k];
        all[k] = all[j];
        all[j] = t;
    }
    memcpy(ranks, all, (size_t)n * sizeof *ranks);
    dtr_mesh_t *m = NULL;
    cr_assert_eq(dtr_mesh_create(nd, sizes, ranks, n, &m), DTR_OK, "%s", dtr_last_error());
    return m;
}

dtr_placement_t random_placement(int ndim, bool partial) {
    uint64_t r = pick(partial ? 4 : 3);
    if (r == 3) return dtr_partial((dtr_reduce_op_t)pick(4));
    if (r < 2 && ndim > 0) return dtr_shard((int32_t)pick((uint64_t)ndim));
    return dtr_replicate();
}

/* The case as a command line, for the failure messages. */
void describe(const dtr_spec_t *a, const dtr_spec_t *b, uint64_t seed, int k, char *out,
                     size_t len) {
    char ma[32], mb[32], sh[64], pa[128], pb[128];
    dtr_mesh_format(a->mesh, ma, sizeof ma);
    dtr_mesh_format(b->mesh, mb, sizeof mb);
    dtr_shape_format(a->shape, a->ndim, sh, sizeof sh);
    dtr_placements_format(a->placements, dtr_mesh_ndims(a->mesh), pa, sizeof pa);
    dtr_placements_format(b->placements, dtr_mesh_ndims(b->mesh), pb, sizeof pb);
    snprintf(out, len, "seed %llu case %d: --mesh %s --shape %s --from '%s' --to-mesh %s --to '%s'",
             (unsigned long long)seed, k, ma, sh, pa, mb, pb);
}

/* The messages to rank r of tensor t, over every round, into out (their count). */
static int64_t received(const dtr_cross_plan_t *p, int t, int r, const dtr__xmsg_t **out, int64_t cap) {
    int64_t got = 0;
    for (int round = 0; round < p->nrounds; round++) {
        int64_t first, n;
        dtr__cross_recvs(p, round, r, &first, &n);
        for (int64_t k = first; k < first + n; k++)
            if (p->msgs[p->by_to[k]].tensor == t) {
                cr_assert_lt(got, cap, "more than %lld boxes to one rank", (long long)cap);
                out[got++] = &p->msgs[p->by_to[k]];
            }
    }
    return got;
}

static void check_addend(const dtr_cross_plan_t *p, int tn, int r, int part, const char *what);

/* The addend a rank of src's mesh holds: its coordinate over the Partial dims, row-major. */
static int addend_of(const dtr_spec_t *src, int rank) {
    int64_t coord[DTR_MAX_MESH_DIMS];
    int k = 0;
    cr_assert_eq(dtr_mesh_coord(src->mesh, rank, coord), DTR_OK, "rank %d not on the source mesh", rank);
    for (int i = 0; i < dtr_mesh_ndims(src->mesh); i++)
        if (src->placements[i].kind == DTR_PARTIAL) k = k * (int)dtr_mesh_size(src->mesh, i) + (int)coord[i];
    return k;
}

/* One target block (rank r's of tensor tn): the boxes of the messages to it lie inside it,
 * inside their sender's reduced block, within the cap, do not overlap, and cover it; for a
 * Partial summed at the receiver, the boxes of each addend so, each from a holder of it. */
static void check_target(const dtr_cross_plan_t *p, int tn, int r, const char *what) {
    const dtr__xtensor_t *x = &p->t[tn];
    for (int part = 0; part < (x->at_receiver ? x->parts : 1); part++)
        check_addend(p, tn, r, part, what);
}

static void check_addend(const dtr_cross_plan_t *p, int tn, int r, int part, const char *what) {
    static const dtr__xmsg_t *all[1 << 16], *box[1 << 16];
    const dtr__xtensor_t *x = &p->t[tn];
    dtr_layout_t t;
    dtr_spec_layout(&x->dst, r, &t);
    int64_t got = received(p, tn, r, all, 1 << 16), covered = 0, n = 0;
    for (int64_t k = 0; k < got; k++)
        if (all[k]->part == part) box[n++] = all[k];
    for (int64_t k = 0; k < n; k++) {
        const dtr__xmsg_t *m = box[k];
        dtr_layout_t s;
        if (x->at_receiver)
            cr_assert_eq(addend_of(&x->src, m->from), part, "%s: rank %d sends addend %d, holds %d",
                         what, m->from, part, addend_of(&x->src, m->from));
        cr_assert_eq(dtr_spec_layout(&x->mid, m->from, &s), DTR_OK, "%s: sender %d", what, m->from);
        if (p->cap > 0 && m->from != m->to)
            cr_assert_leq(m->bytes, p->cap, "%s: a chunk of %lld bytes over the cap", what,
                          (long long)m->bytes);
        int64_t numel = 1;
        for (int d = 0; d < x->dst.ndim; d++) {
            cr_assert(m->lo[d] >= t.global_offset[d] &&
                          m->lo[d] + m->ext[d] <= t.global_offset[d] + t.local_shape[d],
                      "%s: a box to rank %d leaves its block on dim %d", what, r, d);
            cr_assert(m->lo[d] >= s.global_offset[d] &&
                          m->lo[d] + m->ext[d] <= s.global_offset[d] + s.local_shape[d],
                      "%s: a box from rank %d leaves its block on dim %d", what, m->from, d);
            numel *= m->ext[d];
        }
        for (int64_t j = 0; j < k; j++) { /* disjoint from the earlier boxes */
            const dtr__xmsg_t *o = box[j];
            bool meet = true;
            for (int d = 0; d < x->dst.ndim; d++)
                meet = meet && m->lo[d] < o->lo[d] + o->ext[d] && o->lo[d] < m->lo[d] + m->ext[d];
            cr_assert(!meet || numel == 0, "%s: two boxes to rank %d overlap", what, r);
        }
        covered += numel;
    }
    cr_assert_eq(covered, t.numel, "%s: rank %d's boxes of addend %d hold %lld of its %lld elements",
                 what, r, part, (long long)covered, (long long)t.numel);
}

static bool same_msg(const dtr__xmsg_t *a, const dtr__xmsg_t *b) {
    return a->tensor == b->tensor && a->round == b->round && a->from == b->from && a->to == b->to &&
           a->part == b->part && a->bytes == b->bytes &&
           memcmp(a->lo, b->lo, sizeof a->lo) == 0 && memcmp(a->ext, b->ext, sizeof a->ext) == 0;
}

/* Each rank's own messages, made for it alone as a run makes them, are exactly the messages
 * of every rank's that it sends or receives, in the same order; and its bytes
 * (dtr_cross_plan_rank_bytes, from the kinds) their sums. (A plan under a cap makes every
 * rank's at once.) */
static void check_own(const dtr_cross_plan_t *cp, const char *what) {
    dtr_cross_plan_t *p = (dtr_cross_plan_t *)cp;
    if (p->cap > 0) return;
    for (int k = 0; k < p->nranks; k++) {
        int r = p->ranks[k];
        cr_assert_eq(dtr__xmake(p, r), DTR_OK, "%s", what);
        cr_assert_eq(p->msgs_for, r, "%s", what);
        int64_t n = p->nmsgs;
        dtr__xmsg_t *own = malloc(sizeof *own * (size_t)(n > 0 ? n : 1));
        cr_assert_not_null(own);
        memcpy(own, p->msgs, sizeof *own * (size_t)n);
        cr_assert_eq(dtr__xmake(p, -1), DTR_OK, "%s", what);
        int64_t j = 0, send = 0, recv = 0, s2, r2;
        for (int64_t a = 0; a < p->nmsgs; a++) {
            const dtr__xmsg_t *m = &p->msgs[a];
            if (m->from != r && m->to != r) continue;
            cr_assert_lt(j, n, "%s: rank %d made %lld messages of its own, fewer than it has", what, r,
                         (long long)n);
            cr_assert(same_msg(&own[j], m), "%s: rank %d's message %lld (tensor %d, %d -> %d) differs "
                      "from every rank's (tensor %d, %d -> %d)", what, r, (long long)j, own[j].tensor,
                      own[j].from, own[j].to, m->tensor, m->from, m->to);
            j++;
            if (m->from == m->to) continue;
            send += m->from == r ? m->bytes : 0;
            recv += m->to == r ? m->bytes : 0;
        }
        cr_assert_eq(j, n, "%s: rank %d made %lld messages of its own, it has %lld", what, r,
                     (long long)n, (long long)j);
        cr_assert_eq(dtr_cross_plan_rank_bytes(p, r, &s2, &r2), DTR_OK);
        cr_assert(s2 == send && r2 == recv, "%s: rank %d's bytes %lld / %lld, its messages' %lld / %lld",
                  what, r, (long long)s2, (long long)r2, (long long)send, (long long)recv);
        free(own);
    }
}

/* The figures (from the kinds, each variant of a kind once) are the sums of every rank's
 * messages (made). */
static void check_figures(const dtr_cross_plan_t *p, const char *what) {
    dtr_cross_figures_t f;
    int64_t messages = 0, moved = 0, most_send = 0, most_recv = 0;
    cr_assert_eq(dtr_cross_plan_figures(p, &f), DTR_OK);
    for (int k = 0; k < p->nranks; k++) {
        int64_t send = 0, recv = 0;
        for (int64_t j = 0; j < p->nmsgs; j++) {
            const dtr__xmsg_t *m = &p->msgs[j];
            if (m->from == m->to) continue;
            send += m->from == p->ranks[k] ? m->bytes : 0;
            recv += m->to == p->ranks[k] ? m->bytes : 0;
        }
        most_send = send > most_send ? send : most_send;
        most_recv = recv > most_recv ? recv : most_recv;
    }
    for (int64_t j = 0; j < p->nmsgs; j++)
        if (p->msgs[j].from != p->msgs[j].to) messages++, moved += p->msgs[j].bytes;
    cr_assert(f.messages == messages && f.moved_bytes == moved && f.send_bytes_max == most_send &&
              f.recv_bytes_max == most_recv,
              "%s: figures %lld messages, %lld bytes, most sent %lld, received %lld; the messages "
              "%lld, %lld, %lld, %lld", what, (long long)f.messages, (long long)f.moved_bytes,
              (long long)f.send_bytes_max, (long long)f.recv_bytes_max, (long long)messages,
              (long long)moved, (long long)most_send, (long long)most_recv);
}

void check_tiling(const dtr_cross_plan_t *p, const char *what) {
    check_own(p, what);
    cr_assert_eq(dtr__xensure(p, -1), DTR_OK, "%s", what);
    check_figures(p, what);
    for (int tn = 0; tn < p->ntensors; tn++) {
        const dtr_mesh_t *mb = p->t[tn].dst.mesh;
        int64_t coord[DTR_MAX_MESH_DIMS] = {0};
        for (int64_t q = 0; q < dtr_mesh_nranks(mb); q++) {
            int r;
            dtr_mesh_rank_at(mb, coord, &r);
            check_target(p, tn, r, what);
            for (int i = dtr_mesh_ndims(mb) - 1; i >= 0; i--) {
                if (++coord[i] < dtr_mesh_size(mb, i)) break;
                coord[i] = 0;
            }
        }
    }
}

dtr_spec_t spec_on(const dtr_mesh_t *m, const char *placements, const char *shape,
                   dtr_dtype_t dtype) {
    dtr_placement_t p[8];
    int n, nd;
    int64_t sh[8];
    dtr_spec_t s;
    cr_assert_eq(dtr_placements_parse(placements, p, 8, &n), DTR_OK);
    cr_assert_eq(dtr_shape_parse(shape, sh, 8, &nd), DTR_OK);
    cr_assert_eq(dtr_spec_init(&s, m, p, n, sh, nd, dtype), DTR_OK, "%s", dtr_last_error());
    return s;
}

dtr_mesh_t *mesh_of(const char *text, const int *ranks, int n) {
    dtr_mesh_t *m = NULL;
    cr_assert_eq(dtr_mesh_parse(text, ranks, n, &m), DTR_OK);
    return m;
}

