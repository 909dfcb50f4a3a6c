/* The cross planner tests' shared cases and checks (test_cross.c, test_cross_relabel.c):
 * a seeded generator, random meshes and placements, specs from text, and the exact check
 * that a plan's boxes tile every target block. */
#ifndef DTR_TESTS_REDISTRIBUTE_PLANNER_CROSS_FIXTURE_H
#define DTR_TESTS_REDISTRIBUTE_PLANNER_CROSS_FIXTURE_H

#include <criterion/criterion.h>
#include <stdint.h>

#include "dtr.h"
#include "redistribute/planner/testing.h"

/* The generator's state (seed it per case) and a draw in 0..n-1. */
extern uint64_t rng;
uint64_t pick(uint64_t n);
/* A mesh of `n` of the `world` ranks (world <= 16): 1-3 dims, its ranks a random choice in
 * random order. */
dtr_mesh_t *random_mesh(int world, int n);
dtr_placement_t random_placement(int ndim, bool partial);
/* The case as a command line, for the failure messages. */
void describe(const dtr_spec_t *a, const dtr_spec_t *b, uint64_t seed, int k, char *out, size_t len);
/* Every tensor's target blocks tiled exactly by the boxes their ranks receive or keep, each
 * inside its sender's block, chunks within the plan's cap (asserts). */
void check_tiling(const dtr_cross_plan_t *p, const char *what);
dtr_spec_t spec_on(const dtr_mesh_t *m, const char *placements, const char *shape, dtr_dtype_t dtype);
dtr_mesh_t *mesh_of(const char *text, const int *ranks, int n);

#endif
