/*
 * The leak check: 10,000 plan / execute / free cycles on 4 ranks, every public object made
 * and freed in the loop (mesh, specs, plan, plan cache, a context every 50th cycle, the
 * non-blocking form, an error path where one rank's buffer is wrong), over six transitions
 * and four dtypes, each result checked. The memory dtr holds is counted exactly: the binary
 * is linked with --wrap=malloc,calloc,realloc,free, which routes the allocations of the
 * statically linked code (dtr and this test) through counters and leaves Open MPI's shared
 * libraries alone (their own heap grows by a few bytes per communicator created and freed,
 * with or without dtr). Blocks and bytes live after cycle 1,000 and after the last cycle must
 * be equal. Under --config=asan LeakSanitizer checks the same loop at exit as well.
 *
 * Usage: mpirun -n 4 leak_cycles_test [CYCLES]. Ends with "N passed, N failed" on rank 0.
 * DTR_CASES_DIV=D runs 10,000 / D cycles (at least 2,000) where CYCLES is not given.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "backends/mpi/dtr_mpi.h"
#include "pattern/pattern.h"
#include "tests/support/mpi_check.h"

/* ---- counting the statically linked code's heap ---------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
static long live_blocks;
static long long live_bytes;

void *__wrap_malloc(size_t n) {
    void *p = __real_malloc(n);
    if (p != NULL) live_blocks++, live_bytes += (long long)malloc_usable_size(p);
    return p;
}
void *__wrap_calloc(size_t n, size_t size) {
    void *p = __real_calloc(n, size);
    if (p != NULL) live_blocks++, live_bytes += (long long)malloc_usable_size(p);
    return p;
}
void *__wrap_realloc(void *p, size_t n) {
    long long old = p != NULL ? (long long)malloc_usable_size(p) : 0;
    void *q = __real_realloc(p, n);
    if (q != NULL) {
        if (p == NULL) live_blocks++;
        live_bytes += (long long)malloc_usable_size(q) - old;
    } else if (p != NULL && n == 0) {
        live_blocks--, live_bytes -= old;
    }
    return q;
}
void __wrap_free(void *p) {
    if (p != NULL) live_blocks--, live_bytes -= (long long)malloc_usable_size(p);
    __real_free(p);
}

static const struct {
    const char *mesh, *shape, *from, *to;
} cases[] = {
    {"4", "7x5", "S(0)", "R"},         {"2x2", "6x9", "P,S(1)", "S(0),S(1)"},
    {"4", "9x6", "S(0)", "S(1)"},      {"2x2", "8x6", "S(0),S(0)", "R,S(0)"},
    {"4", "5x3", "P(max)", "R"},       {"2x2", "4x4x3", "S(2),R", "R,S(1)"},
};
static const dtr_dtype_t dtypes[] = {DTR_F32, DTR_BF16, DTR_I64, DTR_F64};

/* One cycle; returns 0 when every call did what it should. */
static int cycle(long k, dtr_context_t *ctx, dtr_plan_cache_t *cache) {
    int bad = 0;
    size_t c = (size_t)k % (sizeof cases / sizeof cases[0]);
    dtr_dtype_t dtype = dtypes[(k / 7) % 4];
    dtr_mesh_t *mesh = NULL;
    dtr_placement_t a[8], b[8];
    int na, nb, nd;
    int64_t shape[8];
    dtr_spec_t src, dst;
    if (dtr_mesh_parse(cases[c].mesh, NULL, 0, &mesh) != DTR_OK ||
        dtr_placements_parse(cases[c].from, a, 8, &na) != DTR_OK ||
        dtr_placements_parse(cases[c].to, b, 8, &nb) != DTR_OK ||
        dtr_shape_parse(cases[c].shape, shape, 8, &nd) != DTR_OK ||
        dtr_spec_init(&src, mesh, a, na, shape, nd, dtype) != DTR_OK ||
        dtr_spec_init(&dst, mesh, b, nb, shape, nd, dtype) != DTR_OK) {
        dtr_mesh_destroy(mesh);
        return 1;
    }
    dtr_plan_t plan;
    dtr_plan_options_t opts = {.strategy = k % 3 == 0 ? DTR_STRATEGY_COMPAT : DTR_STRATEGY_OPTIMAL};
    bool hit;
    dtr_status_t st = k % 2 ? dtr_plan_create(&src, &dst, &opts, &plan)
                            : dtr_plan_cache_get(cache, &src, &dst, &opts, &plan, &hit);
    if (st != DTR_OK) {
        dtr_mesh_destroy(mesh);
        return 1;
    }
    dtr_layout_t sl, dl;
    dtr_spec_layout(&src, rank, &sl);
    dtr_spec_layout(&dst, rank, &dl);
    void *in = malloc((size_t)sl.bytes + 1), *out = malloc((size_t)dl.bytes + 1);
    dtr_pattern_fill(&src, rank, in, (size_t)sl.bytes);
    if (k % 5 == 0) {
        dtr_request_t *req = NULL;
        st = dtr_redistribute_start(ctx, &plan, in, (size_t)sl.bytes, out, (size_t)dl.bytes, &req);
        if (st == DTR_OK) st = dtr_request_wait(req);
    } else {
        st = dtr_redistribute(ctx, &plan, in, (size_t)sl.bytes, out, (size_t)dl.bytes);
    }
    dtr_pattern_report_t rep;
    if (st != DTR_OK ||
        dtr_pattern_check(&src, &dst, rank, out, (size_t)dl.bytes, &rep) != DTR_OK ||
        rep.mismatches != 0)
        bad = 1;
    if (k % 11 == 0) { /* an error path: rank 2's input size is wrong */
        size_t ib = (size_t)sl.bytes + (rank == 2 ? 1 : 0);
        st = dtr_redistribute(ctx, &plan, in, ib, out, (size_t)dl.bytes);
        if (st != (rank == 2 ? DTR_ERR_INVALID_ARGUMENT : DTR_ERR_REMOTE)) bad = 1;
    }
    free(in);
    free(out);
    dtr_mesh_destroy(mesh);
    return bad;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    /* DTR_CASES_DIV (tools/test.sh's MPICH and asan parts) divides the default, down to
     * 2,000: still 1,000 cycles between the two counts */
    const char *div = getenv("DTR_CASES_DIV");
    long d = div != NULL && atol(div) > 1 ? atol(div) : 1;
    long cycles = argc > 1 ? atol(argv[1]) : 10000 / d < 2000 ? 2000 : 10000 / d;
    if (world != 4 || cycles < 1000) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -n 4 leak_cycles_test [CYCLES >= 1000]\n");
        MPI_Finalize();
        return 2;
    }
    dtr_plan_cache_t *cache = NULL;
    check(dtr_plan_cache_create(16, &cache) == DTR_OK, "plan cache");
    dtr_context_t *ctx = NULL;
    long failures = 0;
    size_t heap_at_1000 = 0, heap_at_end = 0;
    long blocks_at_1000 = 0, blocks_at_end = 0;
    long long bytes_at_1000 = 0, bytes_at_end = 0;
    for (long k = 0; k < cycles; k++) {
        if (k % 50 == 0 || ctx == NULL) { /* a fresh context every 50th cycle */
            dtr_context_destroy(ctx);
            ctx = NULL;
            if (dtr_context_create_mpi(MPI_COMM_WORLD, &ctx) != DTR_OK) {
                failures++;
                break;
            }
        }
        failures += cycle(k, ctx, cache);
        if (k + 1 == 1000 || k + 1 == cycles) {
            /* the same state at both points: no context (the next cycle makes one), cache full */
            dtr_context_destroy(ctx);
            ctx = NULL;
            MPI_Barrier(MPI_COMM_WORLD);
            struct mallinfo2 mi = mallinfo2();
            if (k + 1 == 1000) {
                heap_at_1000 = mi.uordblks;
                blocks_at_1000 = live_blocks, bytes_at_1000 = live_bytes;
            } else {
                heap_at_end = mi.uordblks;
                blocks_at_end = live_blocks, bytes_at_end = live_bytes;
            }
        }
    }
    dtr_context_destroy(ctx);
    dtr_plan_cache_destroy(cache);
    char what[200];
    snprintf(what, sizeof what, "%ld cycles, every result verified and every error as expected",
             cycles);
    check(failures == 0, what);
    printf("rank %d: dtr's heap after cycle 1000: %ld blocks, %lld bytes; after cycle %ld: %ld "
           "blocks, %lld bytes. Whole process (Open MPI included): %zu -> %zu bytes\n",
           rank, blocks_at_1000, bytes_at_1000, cycles, blocks_at_end, bytes_at_end, heap_at_1000,
           heap_at_end);
    snprintf(what, sizeof what, "dtr's live heap the same after cycle 1000 and cycle %ld", cycles);
    check(blocks_at_end == blocks_at_1000 && bytes_at_end == bytes_at_1000, what);
    int rc = mpi_check_finish("leak cycles");
    MPI_Finalize();
    return rc;
}
