/* A program that plans with dtr and moves nothing: built against the installed
 * <dtr/dtr_core.h> and libdtr_core alone (no MPI compiler wrapper, no MPI library), it
 * checks every rank's block of a 2x2 layout, a plan's steps and bytes, a bad argument's
 * named error, and the version. Prints "core_consumer: N passed, N failed". */
#include <stdio.h>
#include <string.h>

#include <dtr/dtr_core.h>

static int passed, failed;

static void check(int ok, const char *what) {
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL: %s (%s)\n", what, dtr_last_error());
    }
}

int main(void) {
    dtr_mesh_t *mesh = NULL;
    check(dtr_mesh_parse("2x2", NULL, 0, &mesh) == DTR_OK, "dtr_mesh_parse 2x2");
    dtr_placement_t from[2], to[2];
    int n = 0, m = 0;
    check(dtr_placements_parse("S(0),S(1)", from, 2, &n) == DTR_OK && n == 2, "from");
    check(dtr_placements_parse("S(1),S(0)", to, 2, &m) == DTR_OK && m == 2, "to");
    int64_t shape[2] = {6, 10};
    dtr_spec_t src, dst;
    check(dtr_spec_init(&src, mesh, from, 2, shape, 2, DTR_F32) == DTR_OK, "src spec");
    check(dtr_spec_init(&dst, mesh, to, 2, shape, 2, DTR_F32) == DTR_OK, "dst spec");
    /* rank r = (i, j): rows chunked by i (3, 3), columns by j (5, 5) */
    for (int r = 0; r < 4; r++) {
        dtr_layout_t lay;
        char what[64];
        snprintf(what, sizeof what, "rank %d's block of 6x10 on 2x2 S(0),S(1)", r);
        check(dtr_spec_layout(&src, r, &lay) == DTR_OK && lay.local_shape[0] == 3 &&
                  lay.local_shape[1] == 5 && lay.global_offset[0] == 3 * (r / 2) &&
                  lay.global_offset[1] == 5 * (r % 2) && lay.bytes == 60,
              what);
    }
    dtr_plan_t plan;
    check(dtr_plan_create(&src, &dst, NULL, &plan) == DTR_OK, "dtr_plan_create");
    check(plan.nsteps == 1 && plan.steps[0].kind == DTR_STEP_EXCHANGE, "one exchange step");
    char text[4096] = "";
    FILE *f = tmpfile();
    check(f != NULL && dtr_plan_print_json(&plan, f) == DTR_OK, "dtr_plan_print_json");
    if (f != NULL) {
        rewind(f);
        size_t got = fread(text, 1, sizeof text - 1, f);
        text[got] = '\0';
        fclose(f);
    }
    check(strstr(text, "\"kind\":\"exchange\"") != NULL, "the plan's JSON names the exchange");
    dtr_placement_t p;
    check(dtr_placement_parse("S(x)", &p) == DTR_ERR_PARSE &&
              strstr(dtr_last_error(), "S(x)") != NULL,
          "a bad placement is a named parse error");
    check(dtr_version() == DTR_VERSION_CODE && strcmp(dtr_version_string(), DTR_VERSION_STRING) == 0,
          "the library's version is the headers'");
    dtr_mesh_destroy(mesh);
    printf("core_consumer: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
