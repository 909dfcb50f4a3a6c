/* A program outside dtr on the installed Gloo backend, started by tools/dtr_launch.sh (no
 * MPI anywhere): a context by name (dtr_context_create_named, which loads libdtr_gloo.so
 * from beside libdtr.so) and one from dtr_gloo.h, each running S(0) -> R on a 1-D mesh of
 * the job's ranks, every element checked. Prints "gloo_consumer: N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>

#include <dtr/dtr.h>
#include <dtr/dtr_gloo.h>

static int passed, failed;

static void check(int ok, const char *what) {
    if (ok) passed++;
    else failed++, fprintf(stderr, "gloo_consumer: FAIL: %s: %s\n", what, dtr_last_error());
}

/* S(0) -> R of a [4 * world + 3] f64 tensor holding 0, 1, 2, ...; each element checked. */
static void gather_all(dtr_context_t *ctx, int world, const char *what) {
    int64_t n = world, shape = 4 * (int64_t)world + 3;
    dtr_mesh_t *mesh = NULL;
    dtr_spec_t src, dst;
    dtr_plan_t plan;
    dtr_layout_t l;
    int rank = dtr_context_rank(ctx);
    dtr_placement_t s0 = {0}, r = {0};
    int np = 0;
    int ok = dtr_mesh_create(1, &n, NULL, 0, &mesh) == DTR_OK &&
             dtr_placements_parse("S(0)", &s0, 1, &np) == DTR_OK &&
             dtr_placements_parse("R", &r, 1, &np) == DTR_OK &&
             dtr_spec_init(&src, mesh, &s0, 1, &shape, 1, DTR_F64) == DTR_OK &&
             dtr_spec_init(&dst, mesh, &r, 1, &shape, 1, DTR_F64) == DTR_OK &&
             dtr_plan_create(&src, &dst, NULL, &plan) == DTR_OK &&
             dtr_spec_layout(&src, rank, &l) == DTR_OK;
    double *in = calloc((size_t)shape, sizeof *in), *out = calloc((size_t)shape, sizeof *out);
    ok = ok && in != NULL && out != NULL;
    for (int64_t k = 0; ok && k < l.local_shape[0]; k++) in[k] = (double)(l.global_offset[0] + k);
    ok = ok && dtr_redistribute(ctx, &plan, in, (size_t)l.bytes, out,
                                (size_t)shape * sizeof *out) == DTR_OK;
    for (int64_t k = 0; ok && k < shape; k++) ok = out[k] == (double)k;
    check(ok, what);
    free(in);
    free(out);
    dtr_mesh_destroy(mesh);
}

int main(void) {
    const char *ws = getenv("WORLD_SIZE");
    int world = ws != NULL ? atoi(ws) : 0;
    check(world > 0 && dtr_check_headers() == DTR_OK, "WORLD_SIZE and the headers");
    dtr_backend_info_t row;
    check(dtr_backend_find("gloo", &row) == DTR_OK, "dtr_backend_find(\"gloo\")");
    dtr_context_t *a = NULL, *b = NULL;
    check(dtr_context_create_named("gloo", &a) == DTR_OK, "dtr_context_create_named");
    if (a != NULL) gather_all(a, world, "S(0) -> R on the context by name");
    check(dtr_context_create_gloo_env(&b) == DTR_OK, "dtr_context_create_gloo_env");
    if (b != NULL) gather_all(b, world, "S(0) -> R on the context from dtr_gloo.h");
    dtr_context_destroy(a);
    dtr_context_destroy(b);
    printf("gloo_consumer: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
