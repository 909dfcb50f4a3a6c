/*
 * Multi-process check of meshes and layouts under mpirun (not Criterion: it forks).
 *
 * Every process builds the same mesh over MPI_COMM_WORLD, with the world ranks in reverse
 * order so that mesh positions and world ranks differ, and then checks:
 *  1. dtr_mesh_group along each mesh dim agrees with the communicator MPI_Comm_split makes
 *     from it (size, rank = coordinate, members in coordinate order);
 *  2. the layouts of all processes tile the global tensor: each fills its local block with
 *     the global row-major index of every element, rank 0 gathers the blocks and puts them
 *     back at their global offsets; within each replica group every element must arrive
 *     exactly once and hold its own index;
 *  3. a process outside the mesh (world size > mesh size) gets DTR_ERR_NOT_IN_MESH.
 * Usage: mpirun -n N mpi_layout_test MESH SHAPE PLACEMENTS     (mesh of at most N ranks)
 * Prints "mpi layout: N passed, N failed" on rank 0; exits 1 on any failure.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"

static int g_failed, g_passed, g_world_rank;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (cond) {                                                                      \
            g_passed++;                                                                  \
        } else {                                                                         \
            g_failed++;                                                                  \
            fprintf(stderr, "rank %d: %s:%d: ", g_world_rank, __FILE__, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
        }                                                                                \
    } while (0)

static void check_groups(const dtr_mesh_t *mesh, int rank, const int64_t *coord,
                         MPI_Comm in_mesh) {
    for (int dim = 0; dim < dtr_mesh_ndims(mesh); dim++) {
        int group[64];
        int64_t n = 0;
        dtr_status_t st = dtr_mesh_group(mesh, rank, dim, group, 64, &n);
        CHECK(st == DTR_OK, "dtr_mesh_group: %s", dtr_last_error());
        if (st != DTR_OK) continue;
        MPI_Comm sub;
        MPI_Comm_split(in_mesh, group[0], (int)coord[dim], &sub);
        int size, sub_rank;
        MPI_Comm_size(sub, &size);
        MPI_Comm_rank(sub, &sub_rank);
        CHECK(size == n, "mesh dim %d: communicator of %d, group of %lld", dim, size,
              (long long)n);
        CHECK(sub_rank == coord[dim], "mesh dim %d: rank %d in the communicator, coord %lld",
              dim, sub_rank, (long long)coord[dim]);
        int members[64];
        MPI_Allgather(&rank, 1, MPI_INT, members, 1, MPI_INT, sub);
        CHECK(memcmp(members, group, (size_t)n * sizeof(int)) == 0,
              "mesh dim %d: communicator members differ from dtr_mesh_group", dim);
        MPI_Comm_free(&sub);
    }
}

/* Each element's value is its global row-major index. */
static void fill_local(const dtr_spec_t *spec, const dtr_layout_t *l, int64_t *buf) {
    int nd = spec->ndim;
    int64_t idx[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t k = 0; k < l->numel; k++) {
        int64_t global = 0;
        for (int d = 0; d < nd; d++) global = global * spec->shape[d] + l->global_offset[d] + idx[d];
        buf[k] = global;
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < l->local_shape[d]) break;
            idx[d] = 0;
        }
    }
}

static void check_tiling(const dtr_spec_t *spec, int rank, int mesh_rank, MPI_Comm in_mesh) {
    int nprocs;
    MPI_Comm_size(in_mesh, &nprocs);
    dtr_layout_t l;
    dtr_status_t st = dtr_spec_layout(spec, rank, &l);
    CHECK(st == DTR_OK, "dtr_spec_layout: %s", dtr_last_error());
    int64_t *local = malloc((size_t)(l.numel > 0 ? l.numel : 1) * sizeof *local);
    fill_local(spec, &l, local);

    /* Rank 0 learns every process's world rank and block size, then gathers the blocks. */
    int count = (int)l.numel;
    int *counts = NULL, *displs = NULL, *who = NULL;
    int64_t *all = NULL, total = 0;
    if (mesh_rank == 0) {
        counts = malloc((size_t)nprocs * sizeof *counts);
        displs = malloc((size_t)nprocs * sizeof *displs);
        who = malloc((size_t)nprocs * sizeof *who);
    }
    MPI_Gather(&count, 1, MPI_INT, counts, 1, MPI_INT, 0, in_mesh);
    MPI_Gather(&rank, 1, MPI_INT, who, 1, MPI_INT, 0, in_mesh);
    if (mesh_rank == 0) {
        for (int p = 0; p < nprocs; p++) {
            displs[p] = (int)total;
            total += counts[p];
        }
        all = malloc((size_t)(total > 0 ? total : 1) * sizeof *all);
    }
    MPI_Gatherv(local, count, MPI_INT64_T, all, counts, displs, MPI_INT64_T, 0, in_mesh);
    if (mesh_rank == 0) {
        const dtr_mesh_t *mesh = spec->mesh;
        int mdims = dtr_mesh_ndims(mesh);
        int64_t numel = 1;
        for (int d = 0; d < spec->ndim; d++) numel *= spec->shape[d];
        int64_t ngroups = 1;
        for (int i = 0; i < mdims; i++)
            if (spec->placements[i].kind != DTR_SHARD) ngroups *= dtr_mesh_size(mesh, i);
        int *seen = calloc((size_t)(ngroups * numel > 0 ? ngroups * numel : 1), sizeof *seen);
        int bad_values = 0;
        for (int p = 0; p < nprocs; p++) {
            int64_t coord[DTR_MAX_MESH_DIMS];
            dtr_layout_t pl;
            dtr_mesh_coord(mesh, who[p], coord);
            dtr_spec_layout(spec, who[p], &pl);
            int64_t group = 0;
            for (int i = 0; i < mdims; i++)
                if (spec->placements[i].kind != DTR_SHARD)
                    group = group * dtr_mesh_size(mesh, i) + coord[i];
            int64_t *expect = malloc((size_t)(pl.numel > 0 ? pl.numel : 1) * sizeof *expect);
            fill_local(spec, &pl, expect);
            for (int64_t k = 0; k < counts[p]; k++) {
                int64_t v = all[displs[p] + k];
                if (v != expect[k] || v < 0 || v >= numel) {
                    bad_values++;
                    continue;
                }
                seen[group * numel + v]++;
            }
            free(expect);
        }
        CHECK(bad_values == 0, "%d gathered values are not their global index", bad_values);
        int64_t wrong = 0;
        for (int64_t e = 0; e < ngroups * numel; e++) wrong += seen[e] != 1;
        CHECK(wrong == 0, "%lld (group, element) pairs held other than exactly once",
              (long long)wrong);
        free(seen);
        free(all);
        free(counts);
        free(displs);
        free(who);
    }
    free(local);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int nworld;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nworld);
    if (argc != 4) {
        if (g_world_rank == 0) fprintf(stderr, "usage: mpi_layout_test MESH SHAPE PLACEMENTS\n");
        MPI_Finalize();
        return 2;
    }

    /* The mesh's size is read from the text; it holds the world's last ranks, reversed. */
    dtr_mesh_t *probe;
    if (dtr_mesh_parse(argv[1], NULL, 0, &probe) != DTR_OK) {
        fprintf(stderr, "rank %d: %s\n", g_world_rank, dtr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int64_t nmesh = dtr_mesh_nranks(probe);
    dtr_mesh_destroy(probe);
    if (nmesh > nworld) {
        if (g_world_rank == 0) fprintf(stderr, "mesh of %lld needs as many ranks\n", (long long)nmesh);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int *ranks = malloc((size_t)nmesh * sizeof *ranks);
    for (int64_t p = 0; p < nmesh; p++) ranks[p] = nworld - 1 - (int)p;

    dtr_mesh_t *mesh;
    dtr_spec_t spec;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim, np;
    dtr_placement_t pl[DTR_MAX_MESH_DIMS];
    CHECK(dtr_mesh_parse(argv[1], ranks, nmesh, &mesh) == DTR_OK, "%s", dtr_last_error());
    CHECK(dtr_shape_parse(argv[2], shape, DTR_MAX_TENSOR_DIMS, &ndim) == DTR_OK, "%s",
          dtr_last_error());
    CHECK(dtr_placements_parse(argv[3], pl, DTR_MAX_MESH_DIMS, &np) == DTR_OK, "%s",
          dtr_last_error());
    CHECK(dtr_spec_init(&spec, mesh, pl, np, shape, ndim, DTR_I64) == DTR_OK, "%s",
          dtr_last_error());
    if (g_failed) MPI_Abort(MPI_COMM_WORLD, 2);

    int64_t coord[DTR_MAX_MESH_DIMS];
    dtr_status_t st = dtr_mesh_coord(mesh, g_world_rank, coord);
    int in = st == DTR_OK;
    MPI_Comm in_mesh;
    MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : 1, in ? nworld - 1 - g_world_rank : 0, &in_mesh);
    if (in) {
        int mesh_rank;
        MPI_Comm_rank(in_mesh, &mesh_rank);
        check_groups(mesh, g_world_rank, coord, in_mesh);
        check_tiling(&spec, g_world_rank, mesh_rank, in_mesh);
    } else {
        CHECK(st == DTR_ERR_NOT_IN_MESH, "rank outside the mesh: %s", dtr_status_name(st));
        dtr_layout_t l;
        memset(&l, 0x3c, sizeof l);
        dtr_layout_t keep = l;
        CHECK(dtr_spec_layout(&spec, g_world_rank, &l) == DTR_ERR_NOT_IN_MESH,
              "layout of a rank outside the mesh");
        CHECK(memcmp(&l, &keep, sizeof l) == 0, "layout written for a rank outside the mesh");
    }
    MPI_Comm_free(&in_mesh);

    int counts[2] = {g_passed, g_failed}, sums[2];
    MPI_Reduce(counts, sums, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (g_world_rank == 0)
        printf("mpi layout (%d ranks, mesh %s, shape %s, %s): %d passed, %d failed\n", nworld,
               argv[1], argv[2], argv[3], sums[0], sums[1]);
    int any_failed = g_failed > 0, all_failed;
    MPI_Allreduce(&any_failed, &all_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    dtr_mesh_destroy(mesh);
    free(ranks);
    MPI_Finalize();
    return all_failed ? 1 : 0;
}
