/*
 * The tape and from_local / to_local backward under MPI on 4 ranks: chains recorded forward,
 * run backward, the input gradient's placements and every value checked (the pattern of
 * pattern/pattern.h), a Partial source getting a Replicate gradient with no traffic,
 * to_local's grad_placements, and the errors.
 *
 * Usage: mpirun -n 4 tape_mpi_test. Ends with "N passed, N failed" on rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "tests/support/mpi_check.h"
#include "tests/support/mpi_paths.h"
#include "backends/mpi/dtr_mpi.h"
#include "tests/support/fake_device.h"
#include "pattern/pattern.h"

static dtr_context_t *ctx;
/* A second context whose memory is the fake device space: backward_case runs there too, its
 * gradient and output copied into the space and back. */
static dtr_context_t *dctx;


static dtr_spec_t spec(const dtr_mesh_t *mesh, const char *placements, const char *shape) {
    dtr_placement_t p[8];
    int np, nd;
    int64_t sh[8];
    dtr_spec_t s;
    memset(&s, 0, sizeof s);
    if (dtr_placements_parse(placements, p, 8, &np) != DTR_OK ||
        dtr_shape_parse(shape, sh, 8, &nd) != DTR_OK ||
        dtr_spec_init(&s, mesh, p, np, sh, nd, DTR_F32) != DTR_OK)
        printf("rank %d: bad spec %s %s: %s\n", rank, placements, shape, dtr_last_error());
    return s;
}

static size_t bytes_of(const dtr_spec_t *s) {
    dtr_layout_t l;
    return dtr_spec_layout(s, rank, &l) == DTR_OK ? (size_t)l.bytes : 0;
}

/* Runs plan a -> b forward on the tape from a filled block of a; returns the output. */
static void *forward(dtr_tape_t *t, const dtr_spec_t *a, const dtr_spec_t *b, dtr_status_t *st) {
    dtr_plan_t *plan = malloc(sizeof *plan);
    size_t ib = bytes_of(a), ob = bytes_of(b);
    void *in = malloc(ib + 1), *out = malloc(ob + 1);
    dtr_pattern_fill(a, rank, in, ib);
    *st = dtr_plan_create(a, b, NULL, plan);
    if (*st == DTR_OK) *st = dtr_tape_redistribute(t, ctx, plan, in, ib, out, ob);
    free(plan);
    free(in);
    return out;
}

/* Backward from a gradient in grad_spec's pattern; checks the input gradient's placements
 * (want) and values, and that the gradient was not written. */
static int backward_case(dtr_tape_t *t, const dtr_spec_t *grad_spec, const char *want) {
    size_t gb = bytes_of(grad_spec);
    unsigned char *g = malloc(gb + 1), *copy = malloc(gb + 1), *out = malloc(4096);
    dtr_pattern_fill(grad_spec, rank, g, gb);
    memcpy(copy, g, gb);
    dtr_spec_t got;
    int ok = 1;
    const dtr_memory_ops_t *m = fake_device_ops();
    void *dg = NULL, *dout = NULL;
    m->alloc(NULL, (int64_t)gb + 1, &dg);
    m->alloc(NULL, 4096, &dout);
    /* passes 0, 1 on the host context (the tape runs backward again), 2, 3 on the device */
    for (int pass = 0; pass < 4 && ok; pass++) {
        dtr_status_t st;
        if (pass < 2) {
            st = dtr_tape_backward(t, ctx, g, gb, out, 4096, &got);
        } else {
            m->copy(NULL, dg, g, (int64_t)gb, DTR_COPY_FROM_HOST);
            memset(out, 0xff, 4096);
            st = dtr_tape_backward(t, dctx, dg, gb, dout, 4096, &got);
            m->copy(NULL, out, dout, 4096, DTR_COPY_TO_HOST);
            m->copy(NULL, g, dg, (int64_t)gb, DTR_COPY_TO_HOST);
            if (st != DTR_OK) printf("rank %d: device backward: %s\n", rank, dtr_last_error());
        }
        ok = st == DTR_OK;
        if (!ok) break;
        char text[64];
        dtr_placements_format(got.placements, dtr_mesh_ndims(got.mesh), text, sizeof text);
        if (strcmp(text, want) != 0) {
            printf("rank %d: input gradient placed %s, want %s\n", rank, text, want);
            ok = 0;
        }
        dtr_pattern_report_t rep;
        ok = ok && dtr_pattern_check(grad_spec, &got, rank, out, bytes_of(&got), &rep) == DTR_OK &&
             rep.mismatches == 0 && rep.checked > 0;
        ok = ok && memcmp(g, copy, gb) == 0;
    }
    m->free(NULL, dg);
    m->free(NULL, dout);
    free(g);
    free(copy);
    free(out);
    return ok;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 4) {
        if (rank == 0) fprintf(stderr, "tape_mpi_test: run under mpirun -n 4\n");
        MPI_Finalize();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    dtr_mesh_t *m4 = NULL, *m22 = NULL;
    dtr_mesh_parse("4", NULL, 0, &m4);
    dtr_mesh_parse("2x2", NULL, 0, &m22);
    if (dtr_context_create_mpi(MPI_COMM_WORLD, &ctx) != DTR_OK ||
        dtr_context_create_mpi(MPI_COMM_WORLD, &dctx) != DTR_OK ||
        dtr_context_set_memory(dctx, fake_device_ops(), fake_device_state()) != DTR_OK)
        MPI_Abort(MPI_COMM_WORLD, 2);
    dtr_status_t st;

    /* from_local S(0) -> R -> S(1) -> to_local: the gradient in S(1) comes back as S(0). */
    {
        dtr_tape_t *t = NULL;
        dtr_tape_create(NULL, &t);
        dtr_spec_t s0 = spec(m4, "S(0)", "8x6"), r = spec(m4, "R", "8x6"), s1 = spec(m4, "S(1)", "8x6");
        st = dtr_tape_from_local(t, &s0);
        void *o1 = forward(t, &s0, &r, &st);
        dtr_status_t st2;
        void *o2 = forward(t, &r, &s1, &st2);
        dtr_status_t st3 = dtr_tape_to_local(t, NULL);
        check(st == DTR_OK && st2 == DTR_OK && st3 == DTR_OK && dtr_tape_length(t) == 4,
              "record from_local, two redistributions, to_local");
        check(backward_case(t, &s1, "S(0)"),
              "S(0) -> R -> S(1) backward, on host and fake-device memory: S(1) gradient back "
              "to S(0), every value");
        free(o1);
        free(o2);
        dtr_tape_destroy(t);
    }

    /* A Partial source gets a Replicate gradient, and nothing moves: from_local [P, S(0)],
     * redistribute to [R, S(0)], to_local with grad_placements [R, S(0)]. */
    {
        dtr_tape_t *t = NULL;
        dtr_tape_create(NULL, &t);
        dtr_spec_t ps = spec(m22, "P,S(0)", "6x4"), rs = spec(m22, "R,S(0)", "6x4");
        dtr_tape_from_local(t, &ps);
        void *o = forward(t, &ps, &rs, &st);
        dtr_placement_t gp[2] = {dtr_replicate(), dtr_shard(0)};
        dtr_status_t st2 = dtr_tape_to_local(t, gp);
        check(st == DTR_OK && st2 == DTR_OK, "record a P -> R chain");
        check(backward_case(t, &rs, "R,S(0)"),
              "P source, on host and fake-device memory: the gradient stays Replicate (not "
              "Partial), values intact");
        free(o);
        dtr_tape_destroy(t);
    }

    /* to_local(grad_placements = P): the local gradients are partial sums; the backward
     * of R -> S(0) all-reduces them to the source's R. */
    {
        dtr_tape_t *t = NULL;
        dtr_tape_create(NULL, &t);
        dtr_spec_t r = spec(m4, "R", "5x3"), s0 = spec(m4, "S(0)", "5x3"), p = spec(m4, "P", "5x3");
        dtr_tape_from_local(t, &r);
        void *o = forward(t, &r, &s0, &st);
        dtr_placement_t gp[1] = {dtr_partial(DTR_REDUCE_SUM)};
        dtr_status_t st2 = dtr_tape_to_local(t, gp);
        check(st == DTR_OK && st2 == DTR_OK, "record R -> S(0), to_local with a Partial gradient");
        check(backward_case(t, &p, "R"), "grad_placements P: reduced to R, every value");
        free(o);

        /* Errors. */
        dtr_spec_t other = spec(m4, "S(1)", "5x3");
        check(dtr_tape_from_local(t, &r) == DTR_ERR_INVALID_ARGUMENT,
              "record after to_local: INVALID_ARGUMENT");
        dtr_tape_t *u = NULL;
        dtr_tape_create(NULL, &u);
        check(dtr_tape_to_local(u, NULL) == DTR_ERR_INVALID_ARGUMENT &&
                  strstr(dtr_last_error(), "empty") != NULL,
              "to_local on an empty tape: INVALID_ARGUMENT");
        dtr_tape_from_local(u, &r);
        check(dtr_tape_from_local(u, &r) == DTR_ERR_INVALID_ARGUMENT &&
                  strstr(dtr_last_error(), "first") != NULL,
              "a second from_local: INVALID_ARGUMENT");
        void *o2 = forward(u, &other, &s0, &st);
        check(st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "chain") != NULL &&
                  dtr_tape_length(u) == 1,
              "a redistribution whose source is not the previous output: refused, not recorded");
        free(o2);
        dtr_placement_t bad[1] = {dtr_shard(5)};
        check(dtr_tape_to_local(u, bad) == DTR_ERR_INVALID_ARGUMENT &&
                  strstr(dtr_last_error(), "grad_placements") != NULL,
              "to_local with Shard(5) of a 2-D tensor: INVALID_ARGUMENT naming grad_placements");
        dtr_tape_destroy(u);

        /* One rank's gradient has the wrong size: it says so, the others name it. */
        size_t gb = bytes_of(&p);
        float *g = calloc(gb + 4, 1), out[64];
        st = dtr_tape_backward(t, ctx, g, rank == 2 ? gb - 4 : gb, out, sizeof out, NULL);
        check(rank == 2 ? st == DTR_ERR_INVALID_ARGUMENT : st == DTR_ERR_REMOTE,
              "backward, rank 2's grad_bytes wrong: INVALID_ARGUMENT there, REMOTE elsewhere");
        st = dtr_tape_backward(t, ctx, g, gb, out, 4, NULL);
        check(st == DTR_ERR_BUFFER_TOO_SMALL && strstr(dtr_last_error(), "out_bytes") != NULL,
              "backward into a 4-byte out: BUFFER_TOO_SMALL naming out_bytes");
        free(g);
        dtr_tape_destroy(t);
    }

    check(mpi_paths_check("tape") == 0, "each group's path: shared memory inside a node, MPI across nodes");
    dtr_context_destroy(ctx);
    dtr_context_destroy(dctx);
    dtr_mesh_destroy(m4);
    dtr_mesh_destroy(m22);
    int rc = mpi_check_finish("tape on 4 ranks");
    MPI_Finalize();
    return rc;
}
