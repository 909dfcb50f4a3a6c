/*
 * The MPI backend's reductions, called directly through its ops table: reduce-scatter,
 * reduce-scatter-v (uneven pieces, some empty) and all-reduce of every reducible dtype and
 * of SUM, MAX, MIN and PRODUCT (all-reduces of up to 1 KiB in the one-exchange form), over two groups of the same ranks in opposite orders,
 * blocking and non-blocking, mixed with strided all-to-alls on the same groups (so that the
 * shared-memory rings' counters carry over and wrap, each kind's apart). Contributions are
 * random values whose sums depend on their order and precision. Where the shared-memory path
 * is on, every result must equal, bit for bit, the reduction in member order (halves summed
 * in f32 and rounded once) that each rank computes itself from every member's data; an
 * all-reduce must give every member the same bits; bytes past the output and the send
 * buffer must be untouched; an operation started over an unfinished reduction is refused
 * (DTR_ERR_BACKEND) and the first still completes right. With DTR_MPI_SHM_REDUCE=0 (MPI's
 * calls, whose order is MPI's) the results are checked against an f64 reference within
 * a tolerance instead, and every member's all-reduce must still agree.
 *
 * After the random cases, two all-reduces of 9 MiB (f32 and bf16), large enough for the
 * streaming stores; --no-large leaves them out (tools/test.sh's shorter parts run them on
 * some of the launches only).
 *
 * Usage: mpirun -n N mpi_shm_reduce_test [--cases N] [--seed S] [--shared] [--no-large]
 * Prints one line per failing case (seed and case number to rerun it) and a summary; exits
 * non-zero on any failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"
#include "dtr.h"
#include "backends/mpi/dtr_mpi.h"
#include "tests/support/mpi_paths.h"

#define GUARD 64
/* --shared: each rank's part of the allocation holds send in its first half, recv in its
 * second (the largest case: 9 MiB) */
#define ARENA_HALF ((int64_t)10 << 20)

static uint64_t rng_state;

/* MPI's calls: u8 sums and products kept from overflowing, because Open MPI 4.1's AVX
 * reduction (op/avx) saturates 8-bit sums where C and NCCL wrap (open-mpi/ompi#8045, closed
 * as won't fix); the shared-memory path wraps and is checked with any values. */
static int u8_members;

static uint64_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rng(void) { return mix(rng_state += 0x9e3779b97f4a7c15ull); }

static int64_t pick(int64_t n) { return (int64_t)(rng() % (uint64_t)n); }

/* Element k of member `from`'s contribution in case c: random sign, mantissa and exponent
 * (products stay near 1 so that they neither overflow nor vanish). */
static double value(dtr_dtype_t dtype, dtr_reduce_op_t op, int from, int64_t k, int c) {
    uint64_t x = mix((uint64_t)from * 0x100000001b3ull ^ (uint64_t)k * 0x9e3779b97f4a7c15ull ^
                     (uint64_t)c << 40);
    double m = (double)(x >> 11) * 0x1p-53 + 0.5; /* [0.5, 1.5) */
    /* 25 binades: sums of halves in f32 are inexact, so their order shows in the bits */
    int e = (int)(x % 25) - 12;
    double sign = x & (1ull << 7) ? -1 : 1;
    switch (dtype) {
    case DTR_I32: return (double)(int32_t)(x >> 17);
    case DTR_I64: return (double)((int64_t)(x >> 20) - (1ll << 43));
    case DTR_U8:
        if (u8_members > 0)
            return (double)(op == DTR_REDUCE_PRODUCT ? x % 2 : x % (uint64_t)(256 / u8_members));
        return (double)(x % 256);
    default:
        if (op == DTR_REDUCE_PRODUCT) return sign * (0.75 + 0.5 * (m - 0.5));
        return sign * ldexp(m, e);
    }
}

typedef struct {
    dtr_dtype_t dtype;
    dtr_reduce_op_t op;
    int kind; /* 0 reduce-scatter, 1 reduce-scatter-v, 2 all-reduce */
    int64_t count; /* per member (reduce-scatter), in all (all-reduce) */
    int64_t counts[16];
    bool blocking;
    /* --shared: where this rank's buffers sit in its part of the shared allocation (NULL:
     * the heap), and whether recv is its own piece of send (in place) */
    char *arena;
    int64_t send_at, recv_at;
    bool in_place;
} case_t;

static int failures;

static void fail(int rank, int c, uint64_t seed, const char *what) {
    if (failures++ < 10)
        printf("FAIL rank %d case %d (rerun: --seed %llu, case %d): %s\n", rank, c,
               (unsigned long long)seed, c, what);
}

static const char *kind_name(int kind) {
    return kind == 0 ? "reduce_scatter" : kind == 1 ? "reduce_scatterv" : "all_reduce";
}

/* Elements [at, at + len) of the send layout (len at most BLOCK) reduced in member order, as
 * dtr__reduce_n defines it, into out: every member's values stored, then one dtr__reduce_n
 * with the generic loop (not the vector loops the backend runs, so they are checked against
 * it; reduce_test checks every loop gives the generic one's bits). A block at a time: element
 * by element, a 9 MiB all-reduce's check made millions of calls. */
#define BLOCK 4096
static void expected(const case_t *t, int n, int c, int64_t at, int64_t len, char *out) {
    static char in[16][BLOCK * 8];
    const void *ptrs[16];
    for (int j = 0; j < n; j++) {
        for (int64_t i = 0; i < len; i++)
            dtr__store(t->dtype, in[j], i, value(t->dtype, t->op, j, at + i, c));
        ptrs[j] = in[j];
    }
    dtr__reduce_simd(0);
    dtr__reduce_n(t->dtype, t->op, ptrs, n, out, len);
    dtr__reduce_simd(-1);
}

/* A group over several nodes in the hierarchical form (backends/mpi/hier.h), as this
 * test works it out from the members' host names: node[j] of member j (0..k-1, by first
 * member), local[j] its index among its node's members (group order), and cross[l][q] the
 * node at position q of local index l's group across nodes (ordered by group rank). */
typedef struct {
    int k;
    int node[16], local[16], cross[16][16];
} hier_t;

static bool hier_of(const int *world_ranks, int n, hier_t *h) {
    char names[16][MPI_MAX_PROCESSOR_NAME], mine[MPI_MAX_PROCESSOR_NAME] = "";
    char all[32][MPI_MAX_PROCESSOR_NAME];
    int len = 0, size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(mine, &len);
    MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    for (int j = 0; j < n; j++) memcpy(names[j], all[world_ranks[j]], MPI_MAX_PROCESSOR_NAME);
    memset(h, 0, sizeof *h);
    int on[16] = {0};
    for (int j = 0; j < n; j++) {
        int x = 0;
        while (x < h->k && strcmp(names[j], names[h->cross[0][x]]) != 0) x++;
        if (x == h->k) h->cross[0][h->k++] = j; /* (the node's first member, for now) */
        h->node[j] = x;
        h->local[j] = on[x]++;
    }
    for (int x = 0; x < h->k; x++)
        if (on[x] != on[0]) return false;
    int L = on[0];
    if (h->k < 2 || L < 2) return false;
    /* node x's local-l member, in group order: cross order is by that member's rank */
    for (int l = 0; l < L; l++) {
        int q = 0;
        for (int j = 0; j < n; j++)
            if (h->local[j] == l) h->cross[l][q++] = h->node[j];
    }
    return true;
}

/* Element k reduced in the hierarchical order: each node's members in group order, then the
 * nodes in local index l's cross order. */
static void expected_hier(const case_t *t, const hier_t *h, int n, int c, int l, int64_t k,
                          void *out) {
    char in[16][8], part[16][8];
    const void *ptrs[16];
    for (int x = 0; x < h->k; x++) {
        int m = 0;
        for (int j = 0; j < n; j++)
            if (h->node[j] == x) {
                dtr__store(t->dtype, in[m], 0, value(t->dtype, t->op, j, k, c));
                ptrs[m] = in[m];
                m++;
            }
        dtr__reduce_n(t->dtype, t->op, ptrs, m, part[x], 1);
    }
    for (int q = 0; q < h->k; q++) ptrs[q] = part[h->cross[l][q]];
    dtr__reduce_n(t->dtype, t->op, ptrs, h->k, out, 1);
}

/* The f64 reduction of element k, and the tolerance for the MPI path (its order is MPI's). */
static double loose(const case_t *t, int n, int c, int64_t k, double *tol) {
    double acc = 0, mag = 0;
    for (int j = 0; j < n; j++) {
        char b[8];
        dtr__store(t->dtype, b, 0, value(t->dtype, t->op, j, k, c));
        double v = dtr__load(t->dtype, b, 0);
        acc = j == 0 ? v
              : t->op == DTR_REDUCE_MAX ? fmax(acc, v)
              : t->op == DTR_REDUCE_MIN ? fmin(acc, v)
              : t->op == DTR_REDUCE_PRODUCT ? acc * v
                                            : acc + v;
        mag += fabs(v);
    }
    double eps = t->dtype == DTR_F16 ? 0x1p-10 : t->dtype == DTR_BF16 ? 0x1p-7
                 : t->dtype == DTR_F32 ? 0x1p-23 : 0x1p-52;
    *tol = t->op == DTR_REDUCE_PRODUCT ? 2 * n * eps * fabs(acc) : 2 * n * eps * mag;
    return acc;
}

/* The result in recv (mine elements, the first at element `first` of the whole) against
 * the expected values: bit for bit in the member order (or the hierarchical one), or within
 * a tolerance of MPI's own reductions; an all-reduce's replicas the same bits everywhere. */
static void check_result(const case_t *t, const char *recv, int me, int n, int c,
                         uint64_t seed, int64_t first, int64_t mine, int64_t total, bool shm,
                         const hier_t *hier, int rank) {
    int64_t es = dtr_dtype_info(t->dtype)->size;
    char what[512];
    char want[8];
    static char block[BLOCK * 8]; /* expected()'s values for elements [k0, k0 + BLOCK) */
    int64_t k0 = -1;
    /* the hierarchical form takes equal reduce-scatters and all-reduces of a multiple of the
     * members (DTR_MPI_HIER_MIN=0 here: at any size) */
    bool hierarchical = hier != NULL && total > 0 &&
                        (t->kind == 0 || (t->kind == 2 && t->count % n == 0));
    for (int64_t k = 0; k < mine; k++) {
        int64_t at = t->kind == 2 ? k : first + k;
        double got = dtr__load(t->dtype, recv, k);
        bool ok;
        double ref = 0, tol = 0;
        if (hierarchical) {
            /* the local index whose cross group reduces element `at` */
            int l = t->kind == 0 ? hier->local[me] : (int)(at / (t->count / (n / hier->k) ));
            expected_hier(t, hier, n, c, l, at, want);
            ok = memcmp(want, recv + k * es, (size_t)es) == 0;
            ref = dtr__load(t->dtype, want, 0);
        } else if (shm) {
            if (k0 < 0 || k >= k0 + BLOCK) {
                k0 = k;
                expected(t, n, c, at, mine - k < BLOCK ? mine - k : BLOCK, block);
            }
            ok = memcmp(block + (k - k0) * es, recv + k * es, (size_t)es) == 0;
            ref = dtr__load(t->dtype, block, k - k0);
        } else {
            ref = loose(t, n, c, at, &tol);
            ok = t->dtype == DTR_I32 || t->dtype == DTR_I64 || t->dtype == DTR_U8
                     ? (expected(t, n, c, at, 1, want), memcmp(want, recv + k * es, (size_t)es) == 0)
                     : fabs(got - ref) <= tol;
        }
        if (!ok) {
            snprintf(what, sizeof what,
                     "%s %s %s of %lld (%s): element %lld is %.17g, want %.17g (tolerance %g)",
                     kind_name(t->kind), dtr_dtype_name(t->dtype), dtr_reduce_op_name(t->op),
                     (long long)total, t->blocking ? "blocking" : "non-blocking", (long long)k,
                     got, ref, tol);
            fail(rank, c, seed, what);
            break;
        }
    }
    if (t->kind == 2) {
        /* the replicas agree bit for bit: every member's hash of its result is the same */
        uint64_t h = 1469598103934665603ull, lo = 0, hi = 0;
        for (int64_t b = 0; b < mine * es; b++) h = (h ^ (unsigned char)recv[b]) * 1099511628211ull;
        MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        if (lo != hi) fail(rank, c, seed, "the all-reduce's members hold different bits");
    }
}

static void run_case(const dtr_backend_ops_t *ops, void *group, int me, int n, int c,
                     uint64_t seed, const case_t *t, bool shm, const hier_t *hier, int rank) {
    int64_t es = dtr_dtype_info(t->dtype)->size;
    int64_t counts[16], total = 0, mine;
    for (int k = 0; k < n; k++) {
        counts[k] = t->kind == 1 ? t->counts[k] : t->count;
        total += counts[k];
    }
    if (t->kind == 2) total = t->count;
    int64_t first = 0;
    for (int k = 0; k < me && t->kind != 2; k++) first += counts[k];
    mine = t->kind == 2 ? total : counts[me];
    char *copy = malloc((size_t)(total * es + GUARD)), *send, *recv;
    if (t->arena != NULL) {
        send = t->arena + t->send_at;
        recv = t->in_place ? send + (t->kind == 2 ? 0 : first * es) : t->arena + t->recv_at;
    } else {
        send = malloc((size_t)(total * es + GUARD));
        recv = malloc((size_t)(mine * es + GUARD));
    }
    if (!t->in_place) memset(recv, 0x5A, (size_t)(mine * es + GUARD));
    for (int64_t k = 0; k < total; k++)
        dtr__store(t->dtype, send, k, value(t->dtype, t->op, me, k, c));
    memset(send + total * es, 0x33, GUARD);
    memcpy(copy, send, (size_t)(total * es + GUARD));

    dtr_backend_req_t req, extra;
    dtr_status_t st = t->kind == 0 ? ops->reduce_scatter(group, send, recv, t->count, t->dtype,
                                                         t->op, &req)
                      : t->kind == 1 ? ops->reduce_scatterv(group, send, recv, counts, t->dtype,
                                                            t->op, &req)
                                     : ops->all_reduce(group, send, recv, t->count, t->dtype,
                                                       t->op, &req);
    char what[512];
    if (st != DTR_OK) {
        snprintf(what, sizeof what, "%s issue: %s: %s", kind_name(t->kind), dtr_status_name(st),
                 dtr_last_error());
        fail(rank, c, seed, what);
        goto out;
    }
    /* the backend keeps MPI's call for small reduce-scatters exact in any order; all-reduces
     * of at most 1 KiB take the segment's one-exchange form (mpi.c) */
    bool exact = t->op == DTR_REDUCE_MAX || t->op == DTR_REDUCE_MIN ||
                 ((t->dtype == DTR_I32 || t->dtype == DTR_I64) &&
                  (t->op == DTR_REDUCE_SUM || t->op == DTR_REDUCE_PRODUCT));
    int64_t bytes = total * es;
    bool on_segment = shm && ((t->kind == 2 && bytes <= 1024) || !(exact && bytes <= 1024));
    if (on_segment && c % 7 == 3 && total > 0) {
        /* a second operation over the running one: refused, and the first completes */
        char b[8 * 16];
        st = ops->all_reduce(group, b, b, 1, DTR_F32, DTR_REDUCE_SUM, &extra);
        if (st != DTR_ERR_BACKEND || strstr(dtr_last_error(), "never completed") == NULL) {
            snprintf(what, sizeof what, "all_reduce over a running %s gave %s",
                     kind_name(t->kind), dtr_status_name(st));
            fail(rank, c, seed, what);
        }
        st = DTR_OK;
    }
    if (t->blocking) {
        st = ops->wait(group, &req);
    } else {
        bool done = false;
        while (st == DTR_OK && !done) st = ops->test(group, &req, &done);
    }
    if (st != DTR_OK) {
        snprintf(what, sizeof what, "%s: %s: %s", kind_name(t->kind), dtr_status_name(st),
                 dtr_last_error());
        fail(rank, c, seed, what);
        goto out;
    }
    if (t->in_place) { /* only the own piece may change (all of it for an all-reduce) */
        int64_t lo = t->kind == 2 ? 0 : first * es, hi = lo + mine * es;
        if (memcmp(send, copy, (size_t)lo) != 0 ||
            memcmp(send + hi, copy + hi, (size_t)(total * es + GUARD - hi)) != 0)
            fail(rank, c, seed, "in place: the send buffer was written outside this piece");
    } else if (memcmp(send, copy, (size_t)(total * es + GUARD)) != 0) {
        fail(rank, c, seed, "the send buffer was written");
    }
    if (t->arena != NULL && !t->in_place) {
        /* the caller owns send again: a member still reading it would see this */
        memset(send, 0xEE, (size_t)(total * es));
    }
    for (int64_t b = 0; b < GUARD && !t->in_place; b++)
        if ((unsigned char)recv[mine * es + b] != 0x5A) {
            fail(rank, c, seed, "bytes past the output were written");
            break;
        }
    check_result(t, recv, me, n, c, seed, first, mine, total, shm, hier, rank);
out:
    if (t->arena == NULL) {
        free(send);
        free(recv);
    }
    free(copy);
}

/* The reductions of group g (oldest first) that read the members' buffers in place. */
static int64_t direct_ops(int g) {
    dtr_mpi_group_info_t info[2];
    int live = 0;
    if (dtr_mpi_groups(info, 2, &live) != DTR_OK || live <= g) return -1;
    return info[g].direct_ops;
}

/* Whether the backend takes a case's reduction to the segment in a form with a line
 * (mpi.c): not MPI's call (small and exact in any order), not the one-exchange all-reduce
 * (up to 1 KiB), not empty. */
static bool takes_direct(const case_t *t, int n) {
    int64_t es = dtr_dtype_info(t->dtype)->size, total = 0;
    for (int k = 0; k < n; k++) total += t->kind == 1 ? t->counts[k] : t->count;
    if (t->kind == 2) total = t->count;
    bool exact = t->op == DTR_REDUCE_MAX || t->op == DTR_REDUCE_MIN ||
                 ((t->dtype == DTR_I32 || t->dtype == DTR_I64) &&
                  (t->op == DTR_REDUCE_SUM || t->op == DTR_REDUCE_PRODUCT));
    int64_t bytes = total * es;
    if (total == 0 || (t->kind == 2 && bytes <= 1024)) return false;
    return !(exact && bytes <= 1024);
}

/* An all-to-all between the reductions, so that the kinds' rings and counters interleave. */
static void shuffle(const dtr_backend_ops_t *ops, void *group, int n, int c, uint64_t seed,
                    int rank) {
    int64_t bytes = 1 + pick(5000);
    char *send = malloc((size_t)(bytes * n)), *recv = malloc((size_t)(bytes * n));
    memset(send, rank, (size_t)(bytes * n));
    memset(recv, 0, (size_t)(bytes * n));
    dtr_backend_req_t req;
    dtr_status_t st = ops->all_to_all_strided(group, send, 1, bytes, bytes * n, recv, 1, bytes,
                                              bytes * n, &req);
    if (st == DTR_OK) st = ops->wait(group, &req);
    if (st != DTR_OK) fail(rank, c, seed, "the all-to-all between reductions failed");
    free(send);
    free(recv);
}

/* What the cases run on, and their tally. */
typedef struct {
    const dtr_backend_ops_t *ops;
    void *groups[2]; /* the ranks in order, and reversed */
    int n, rank;
    uint64_t seed;
    bool shm;
    char *arena;            /* --shared: the allocation the buffers lie in, else NULL */
    const hier_t *hier[2];  /* each group's hierarchical form, or NULL */
    int64_t direct_seen, direct_want; /* reductions that read the buffers in place, and that should */
    int passed, failed;
} run_t;

/* Case t on group g (this rank's place in it: me), and whether it read the buffers in place
 * as it should (want_direct); with shuffles, an all-to-all after it now and then. */
static void count_case(run_t *r, int g, int me, int c, const case_t *t, bool want_direct,
                       bool shuffles) {
    int64_t before_direct = direct_ops(g);
    run_case(r->ops, r->groups[g], me, r->n, c, r->seed, t, r->shm, r->hier[g], r->rank);
    r->direct_seen += direct_ops(g) - before_direct;
    r->direct_want += want_direct;
    if (shuffles && pick(3) == 0) shuffle(r->ops, r->groups[g], r->n, c, r->seed, r->rank);
}

/* The tally of one case: failed on any rank, or passed. */
static void tally(run_t *r, int before) {
    int mine = failures > before, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any)
        r->failed++;
    else
        r->passed++;
}

/* Random case c: a dtype, op, kind, size and group drawn from the case's seed; with an
 * arena, the buffers in it (one member's on the heap, now and then; in place, now and then). */
static void random_case(run_t *r, int c) {
    static const dtr_dtype_t dtypes[] = {DTR_F32, DTR_F64, DTR_F16, DTR_BF16,
                                         DTR_I32, DTR_I64, DTR_U8};
    static const dtr_reduce_op_t rops[] = {DTR_REDUCE_SUM, DTR_REDUCE_MAX, DTR_REDUCE_MIN,
                                           DTR_REDUCE_PRODUCT};
    int n = r->n, rank = r->rank, before = failures;
    rng_state = r->seed * 1000003u + (uint64_t)c;
    case_t t;
    memset(&t, 0, sizeof t);
    t.dtype = dtypes[pick(7)];
    t.op = pick(3) == 0 ? rops[pick(4)] : DTR_REDUCE_SUM;
    t.kind = (int)pick(3);
    t.blocking = pick(2) == 0;
    /* 1 element to about 300 KB: one chunk to many, the rings wrapping */
    int64_t scale = pick(4);
    t.count = scale == 0 ? 1 + pick(8) : scale == 1 ? 1 + pick(600) : scale == 2 ? 1 + pick(6000) : 1 + pick(40000);
    for (int k = 0; k < n; k++) t.counts[k] = pick(4) == 0 ? 0 : pick(t.count + 1);
    int g = (int)pick(2);
    int me = g == 0 ? rank : n - 1 - rank;
    bool all_shared = false;
    if (r->arena != NULL) {
        int heap = pick(5) == 0 ? (int)pick(n) : -1; /* that member: the ring form */
        /* in place only where the segment's forms run it (MPI's calls and the hierarchical
         * form take no aliasing buffers) */
        bool in_place = t.kind != 1 && r->shm && r->hier[g] == NULL && takes_direct(&t, n) &&
                        pick(4) == 0;
        all_shared = heap < 0;
        if (rank != heap) {
            int64_t es = dtr_dtype_info(t.dtype)->size;
            t.arena = r->arena;
            t.send_at = 64 * (rank % 3) + es * (rank % 2);
            t.recv_at = ARENA_HALF + 64 * ((rank * 7) % 5) + es * (rank % 3 == 1);
            t.in_place = in_place;
        }
    }
    count_case(r, g, me, c, &t, all_shared && r->shm && r->hier[g] == NULL && takes_direct(&t, n),
               true);
    tally(r, before);
}

/* All-reduces of 9 MiB (case c, i = 0 or 1: f32 blocking on the first group, bf16
 * non-blocking on the second): the result is copied out with streaming stores (8 MiB and up). */
static void large_case(run_t *r, int c, int i) {
    static const dtr_dtype_t large_dtypes[] = {DTR_F32, DTR_BF16};
    int rank = r->rank, before = failures;
    case_t t;
    memset(&t, 0, sizeof t);
    t.dtype = large_dtypes[i];
    t.op = DTR_REDUCE_SUM;
    t.kind = 2;
    t.blocking = i == 0;
    t.count = (9 << 20) / dtr_dtype_info(t.dtype)->size;
    if (r->arena != NULL) { /* the second in place, on the segment */
        t.arena = r->arena;
        t.send_at = 64 * (rank % 3);
        t.recv_at = ARENA_HALF + 64 * (rank % 2);
        t.in_place = i == 1 && r->shm && r->hier[i] == NULL;
    }
    count_case(r, i, i == 0 ? rank : r->n - 1 - rank, c, &t,
               r->arena != NULL && r->shm && r->hier[i] == NULL, false);
    tally(r, before);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int cases = 100;
    uint64_t seed = 20261123;
    bool shared = false, large = true;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--shared") == 0) shared = true;
        else if (strcmp(argv[a], "--no-large") == 0) large = false;
        else if (a + 1 < argc && strcmp(argv[a], "--cases") == 0) cases = atoi(argv[++a]);
        else if (a + 1 < argc && strcmp(argv[a], "--seed") == 0) seed = strtoull(argv[++a], NULL, 10);
    }
    if (n > 16) {
        if (rank == 0) printf("mpi_shm_reduce_test: at most 16 ranks\n");
        MPI_Finalize();
        return 2;
    }
    const char *env = getenv("DTR_MPI_SHM"), *renv = getenv("DTR_MPI_SHM_REDUCE");
    bool shm = n >= 2 && (env == NULL || strcmp(env, "0") != 0) &&
               (renv == NULL || strcmp(renv, "0") != 0) && mpi_paths_one_node();
    if (rank == 0)
        printf("mpi_shm_reduce_test: %d ranks, %d cases, seed %llu, %s%s\n", n, cases,
               (unsigned long long)seed,
               shm ? "shared-memory reductions (exact member order)" : "MPI's reductions",
               shared ? ", buffers in a shared allocation (mem_alloc)" : "");

    if (!shm) u8_members = n;
    /* over several nodes, the hierarchical form at every size (unless the caller chose) */
    setenv("DTR_MPI_HIER_MIN", "0", 0);
    const dtr_backend_ops_t *ops = dtr_backend_mpi_ops();
    void *state = NULL, *groups[2] = {NULL, NULL};
    int ranks[32];
    dtr_status_t st = dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state);
    for (int k = 0; k < n; k++) {
        ranks[k] = k;
        ranks[n + k] = n - 1 - k;
    }
    for (int g = 0; g < 2 && st == DTR_OK; g++)
        st = ops->group_create(state, ranks + g * n, n, 200 + g, &groups[g]);
    /* --shared: send and recv of every case in this rank's part of one allocation, at
     * offsets that differ between ranks (a case may put one member's on the heap) */
    char *arena = NULL;
    if (st == DTR_OK && shared) st = ops->mem_alloc(state, 2 * ARENA_HALF, (void **)&arena);
    if (st != DTR_OK) {
        printf("rank %d: setup failed: %s: %s\n", rank, dtr_status_name(st), dtr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* which groups the backend made hierarchical (mpi_paths_check below checks it was right
     * to): their results are checked bit for bit in the hierarchical order */
    hier_t hiers[2];
    const hier_t *hier[2] = {NULL, NULL};
    dtr_mpi_group_info_t info[2];
    int live = 0;
    if (dtr_mpi_groups(info, 2, &live) != DTR_OK || live != 2) {
        printf("rank %d: dtr_mpi_groups gave %d groups: %s\n", rank, live, dtr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int g = 0; g < 2; g++)
        if (hier_of(ranks + g * n, n, &hiers[g]) && info[g].nodes == hiers[g].k) hier[g] = &hiers[g];
    if (rank == 0 && hier[0] != NULL)
        printf("  hierarchical over %d nodes: reductions checked bit for bit in node, then "
               "node order\n", hiers[0].k);
    run_t r = {ops, {groups[0], groups[1]}, n, rank, seed, shm, arena, {hier[0], hier[1]}, 0, 0,
               0, 0};
    for (int c = 0; c < cases; c++) random_case(&r, c);
    for (int i = 0; i < 2 && large; i++) large_case(&r, cases + i, i);
    if (arena != NULL) {
        /* every case whose members' buffers were all in the allocation read them in place,
         * and no other */
        if (r.direct_seen != r.direct_want) {
            printf("rank %d: %lld reductions read the buffers in place, want %lld\n", rank,
                   (long long)r.direct_seen, (long long)r.direct_want);
            failures++;
        }
        if (rank == 0)
            printf("  %lld reductions read the members' buffers in place\n",
                   (long long)r.direct_seen);
        if (!ops->mem_free(state, arena) || ops->mem_free(state, arena)) {
            printf("rank %d: mem_free: the allocation was not freed exactly once\n", rank);
            failures++;
        }
    }
    if (mpi_paths_check("reductions") > 0) failures++;
    for (int g = 0; g < 2; g++) ops->group_destroy(state, groups[g]);
    ops->destroy(state);
    int bad = failures > 0, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("reductions on %d ranks: %d passed, %d failed\n", n, r.passed, r.failed);
    MPI_Finalize();
    return anybad ? 1 : 0;
}
