/* The README's C example, built and run as //docs:example_test so it cannot go stale. */
#include <stdio.h>

#include "dtr.h"

int main(void) {
    dtr_mesh_t *mesh;
    dtr_placement_t placements[2];
    int n;
    dtr_spec_t spec;
    dtr_layout_t layout;
    int64_t shape[2] = {2, 5};

    if (dtr_mesh_parse("2x2", NULL, 0, &mesh) != DTR_OK ||
        dtr_placements_parse("S(1),S(1)", placements, 2, &n) != DTR_OK ||
        dtr_spec_init(&spec, mesh, placements, n, shape, 2, DTR_F32) != DTR_OK) {
        fprintf(stderr, "%s\n", dtr_last_error());
        return 1;
    }
    int ok = 1;
    for (int rank = 0; rank < 4; rank++) {
        dtr_spec_layout(&spec, rank, &layout);
        printf("rank %d: %lldx%lld at (%lld,%lld), %lld bytes\n", rank,
               (long long)layout.local_shape[0], (long long)layout.local_shape[1],
               (long long)layout.global_offset[0], (long long)layout.global_offset[1],
               (long long)layout.bytes);
    }
    ok = layout.local_shape[1] == 1 && layout.global_offset[1] == 4; /* rank 3: (2,1)@(0,4) */

    /* Bad input: an error code and a message that names the argument. */
    dtr_placement_t bad = dtr_shard(2);
    dtr_placement_t two[2] = {bad, dtr_replicate()};
    if (dtr_spec_init(&spec, mesh, two, 2, shape, 2, DTR_F32) != DTR_OK)
        printf("error: %s\n", dtr_last_error());
    dtr_mesh_destroy(mesh);
    printf("example: %d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
