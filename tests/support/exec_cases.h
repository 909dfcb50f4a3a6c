/*
 * The executor's random cases, shared by the tests that run them on a backend
 * (mpi_exec_test under mpirun, gloo_exec_test under tools/dtr_launch.sh): a case drawn from
 * the seed (every rank draws the same), its buffers in the run's memory space (host, the
 * fake device, or CUDA), and one plan run and checked on this rank: every element, the input
 * intact, nothing written past the output.
 */
#ifndef DTR_TESTS_SUPPORT_EXEC_CASES_H
#define DTR_TESTS_SUPPORT_EXEC_CASES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "tests/support/fake_device.h"
#include "tests/support/rand_cases.h"
#include "pattern/pattern.h"
#if defined(DTR_HAVE_CUDA)
#include "backends/cuda/dtr_cuda.h"
#endif

#define GUARD 64

typedef struct {
    int mdims;
    int64_t msize[3];
    int *ranks; /* NULL: row-major */
    int64_t nranks;
    int ndim;
    int64_t shape[3];
    dtr_placement_t src[3], dst[3];
    dtr_dtype_t dtype;
    bool blocked; /* a reduction blocked by a later shard of its dim */
    bool ragged;  /* a ragged shard kept as it is (ragged_keep) */
    int64_t sizes[4];
    char text[512];
} test_case_t;


/* Every fifth case's target is in another dtype of the same family (a cast plan): floats
 * among f32 f64 f16 bf16, complex between c64 and c128; others keep theirs. */
static inline dtr_dtype_t cast_to(dtr_dtype_t t, int index) {
    static const dtr_dtype_t floats[] = {DTR_F32, DTR_F64, DTR_F16, DTR_BF16};
    if (index % 5 != 2) return t;
    if (t == DTR_C64 || t == DTR_C128) return t == DTR_C64 ? DTR_C128 : DTR_C64;
    for (int k = 0; k < 4; k++)
        if (floats[k] == t) return floats[(k + 1 + (index / 5) % 3) % 4];
    return t;
}

static inline void draw(test_case_t *c, int world);

/* Case `index` of the run with `seed`, drawn for `world` ranks: its mesh (the caller destroys
 * it, and frees c->ranks) and specs (the target in cast_to's dtype). */
static inline dtr_status_t case_specs(uint64_t seed, int index, int world, test_case_t *c,
                                      dtr_mesh_t **mesh, dtr_spec_t *src, dtr_spec_t *dst) {
    rng_state = seed * 1000003ull + (uint64_t)index;
    draw(c, world);
    *mesh = NULL;
    dtr_status_t st = dtr_mesh_create(c->mdims, c->msize, c->ranks, c->ranks ? c->nranks : 0, mesh);
    if (st == DTR_OK) st = dtr_spec_init(src, *mesh, c->src, c->mdims, c->shape, c->ndim, c->dtype);
    if (st == DTR_OK)
        st = dtr_spec_init(dst, *mesh, c->dst, c->mdims, c->shape, c->ndim, cast_to(c->dtype, index));
    return st;
}

static inline void draw(test_case_t *c, int world) {
    memset(c, 0, sizeof *c);
    c->mdims = 1 + pick(3);
    int64_t total = 1;
    for (int i = 0; i < c->mdims; i++) {
        int64_t s = 1 + pick(4);
        while (total * s > world) s--;
        c->msize[i] = s;
        total *= s;
    }
    c->nranks = total;
    if (pick(3) == 0) { /* explicit ranks: a shuffled subset of the world */
        int *all = malloc((size_t)world * sizeof *all);
        for (int r = 0; r < world; r++) all[r] = r;
        for (int r = world - 1; r > 0; r--) {
            int j = pick(r + 1), t = all[r];
            all[r] = all[j];
            all[j] = t;
        }
        c->ranks = all;
    }
    c->ndim = 1 + pick(3);
    for (int d = 0; d < c->ndim; d++) c->shape[d] = pick(10) == 0 ? 0 : 1 + pick(9);
    if (pick(4) == 0) c->shape[pick(c->ndim)] *= 4;
    dtr_reduce_op_t op = (dtr_reduce_op_t)pick(DTR_REDUCE_OP_LAST);
    for (int i = 0; i < c->mdims; i++) {
        c->src[i] = random_placement(c->ndim, op);
        c->dst[i] = random_placement(c->ndim, op);
    }
    if (c->mdims >= 2 && pick(3) == 0) {
        int i = pick(c->mdims - 1), j = i + 1 + pick(c->mdims - 1 - i), d = pick(c->ndim);
        for (int k = 0; k < c->mdims; k++) c->dst[k] = c->src[k];
        c->src[i] = dtr_partial(op);
        c->dst[i] = c->src[j] = c->dst[j] = dtr_shard(d);
        c->blocked = true;
    }
    if (c->mdims >= 2 && !c->blocked && pick(2) == 0) /* shard orders */
        nest_in_orders(c->mdims, c->msize, c->ndim, pick(3), c->src, c->dst);
    if (world >= 8 && !c->blocked && pick(8) == 0) {
        /* a seed plan through blocks of other lengths than the canonical layout (compat
         * sizes them as the seed does: plan->seed_blocks): 2x2x2, 2, 6 or 10 rows */
        int d = pick(c->ndim), k = pick(2);
        c->mdims = 3;
        c->msize[0] = c->msize[1] = c->msize[2] = 2;
        c->nranks = 8;
        c->shape[d] = 2 + 4 * pick(3);
        c->src[2] = c->dst[2] = dtr_shard(d);
        c->src[k] = c->dst[1 - k] = dtr_shard(d);
        c->src[1 - k] = c->dst[k] = dtr_replicate();
    }
    /* one case in four that no reduction blocks keeps a ragged shard (rand_cases.h) */
    if (!c->blocked && pick(4) == 0)
        c->ragged = ragged_keep(c->mdims, c->msize, c->ndim, c->shape, c->src, c->dst, c->sizes);
    c->dtype = (dtr_dtype_t)pick(DTR_DTYPE_LAST);
    char m[64], sh[64], a[128], b[128];
    dtr_placements_format(c->src, c->mdims, a, sizeof a);
    dtr_placements_format(c->dst, c->mdims, b, sizeof b);
    snprintf(m, sizeof m, "%lld", (long long)c->msize[0]);
    for (int i = 1; i < c->mdims; i++)
        snprintf(m + strlen(m), sizeof m - strlen(m), "x%lld", (long long)c->msize[i]);
    dtr_shape_format(c->shape, c->ndim, sh, sizeof sh);
    snprintf(c->text, sizeof c->text, "mesh %s%s shape %s %s -> %s %s", m,
             c->ranks ? " (shuffled ranks)" : "", sh, a, b, dtr_dtype_name(c->dtype));
}


typedef struct {
    int plans, failures, skipped;
} tally_t;

static inline void report(int rank, uint64_t seed, int index, const char *strategy, const char *how,
                   const test_case_t *c, const char *what) {
    printf("FAIL seed %llu case %d (%s, %s): %s: rank %d: %s\n", (unsigned long long)seed, index,
           strategy, how, c->text, rank, what);
    fflush(stdout);
}

/* The memory space of this run: the test's own buffers (ops NULL: host memory). */
static const dtr_memory_ops_t *space_ops;
static void *space_state;

/* A fresh state of the run's memory space (for a context to own); NULL on host. */
static inline int space_new(const char *memory, const dtr_memory_ops_t **ops, void **state,
                     char *why, size_t len) {
    *ops = NULL;
    *state = NULL;
    if (strcmp(memory, "host") == 0) return 0;
    if (strcmp(memory, "fake") == 0) {
        *ops = fake_device_ops();
        *state = fake_device_state();
        return 0;
    }
#if defined(DTR_HAVE_CUDA)
    if (strcmp(memory, "cuda") == 0) {
        if (dtr_cuda_device_count() < 1) {
            snprintf(why, len, "no GPU visible (%s)", dtr_last_error());
            return 1;
        }
        if (dtr_memory_cuda_create(0, NULL, state) != DTR_OK) {
            snprintf(why, len, "CUDA memory: %s", dtr_last_error());
            return 2;
        }
        *ops = dtr_memory_cuda_ops();
        return 0;
    }
#else
    if (strcmp(memory, "cuda") == 0) {
        snprintf(why, len, "built without CUDA (nvcc was not found at build time)");
        return 1;
    }
#endif
    snprintf(why, len, "--memory %s: not host, fake or cuda", memory);
    return 2;
}

/* Buffers of the run's space: a copy of host bytes in the space, and back. */
static inline void *space_put(const void *host, size_t bytes) {
    if (space_ops == NULL) {
        void *p = malloc(bytes);
        memcpy(p, host, bytes);
        return p;
    }
    /* The copy runs on this space's own stream, the context's work on another: wait for it
     * before the call reads the buffer (as dtr run does). Without the wait, 4 ranks sharing
     * one H200 read inputs that had not landed (issue 25). */
    void *p = NULL;
    if (space_ops->alloc(space_state, (int64_t)bytes, &p) != DTR_OK ||
        space_ops->copy(space_state, p, host, (int64_t)bytes, DTR_COPY_FROM_HOST) != DTR_OK ||
        space_ops->sync(space_state) != DTR_OK) {
        fprintf(stderr, "space_put: %s\n", dtr_last_error());
        abort();
    }
    return p;
}

static inline void space_get(void *host, const void *p, size_t bytes) {
    if (space_ops == NULL) {
        memcpy(host, p, bytes);
    } else if (space_ops->copy(space_state, host, p, (int64_t)bytes, DTR_COPY_TO_HOST) != DTR_OK) {
        fprintf(stderr, "space_get: %s\n", dtr_last_error());
        abort();
    }
}

static inline void space_free(void *p) {
    if (space_ops == NULL) free(p);
    else space_ops->free(space_state, p);
}

static inline int run_plan(dtr_context_t *ctx, const dtr_plan_t *plan, const dtr_spec_t *src,
                    const dtr_spec_t *dst, const dtr_fill_t *fill, int rank, bool nonblocking,
                    char *why, size_t len) {
    dtr_layout_t sl = {0}, dl = {0};
    bool inside = dtr_spec_layout(src, rank, &sl) == DTR_OK;
    if (inside) dtr_spec_layout(dst, rank, &dl);
    size_t in_bytes = inside ? (size_t)sl.bytes : 24, out_bytes = inside ? (size_t)dl.bytes : 24;
    unsigned char *in = malloc(in_bytes + 1), *copy = malloc(in_bytes + 1);
    unsigned char *out = malloc(out_bytes + GUARD);
    memset(out, 0xab, out_bytes + GUARD);
    if (inside)
        dtr_fill(src, fill, rank, in, in_bytes);
    else
        for (size_t k = 0; k < in_bytes; k++) in[k] = (unsigned char)(k * 3 + 1);
    memcpy(copy, in, in_bytes);
    /* the buffers the call sees: these, or copies in the run's memory space */
    void *din = space_put(in, in_bytes + 1), *dout = space_put(out, out_bytes + GUARD);
    dtr_status_t st;
    if (nonblocking) {
        dtr_request_t *req = NULL;
        st = dtr_redistribute_start(ctx, plan, din, in_bytes, dout, out_bytes, &req);
        bool done = false;
        while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
    } else {
        st = dtr_redistribute(ctx, plan, din, in_bytes, dout, out_bytes);
    }
    if (st == DTR_OK) st = dtr_context_sync(ctx);
    space_get(in, din, in_bytes);
    space_get(out, dout, out_bytes + GUARD);
    space_free(din);
    space_free(dout);
    int bad = 0;
    if (st != DTR_OK) {
        snprintf(why, len, "%s: %s", dtr_status_name(st), dtr_last_error());
        bad = 1;
    } else if (memcmp(in, copy, in_bytes) != 0) {
        snprintf(why, len, "the input buffer was written");
        bad = 1;
    } else {
        for (int k = 0; k < GUARD && !bad; k++)
            if (out[out_bytes + k] != 0xab) {
                snprintf(why, len, "wrote past the end of the output (byte %d)", k);
                bad = 1;
            }
    }
    if (!bad && inside) {
        dtr_pattern_report_t rep;
        st = dtr_fill_check(src, dst, fill, rank, out, out_bytes, &rep);
        if (st != DTR_OK) {
            snprintf(why, len, "check: %s", dtr_last_error());
            bad = 1;
        } else if (rep.mismatches > 0) {
            snprintf(why, len, "%lld of %lld elements wrong; first at local %lld: got %.9g, want "
                     "%.9g (tolerance %g x scale)",
                     (long long)rep.mismatches, (long long)rep.checked, (long long)rep.first,
                     rep.got, rep.want, rep.tolerance);
            bad = 1;
        }
    } else if (!bad && memcmp(out, in, in_bytes) != 0) {
        snprintf(why, len, "a bystander's output is not its input");
        bad = 1;
    }
    free(in);
    free(copy);
    free(out);
    return bad;
}


#endif
