/*
 * Which path each live group of the MPI backend took (dtr_mpi_groups), checked against the
 * nodes its members run on (MPI_Get_processor_name over MPI_COMM_WORLD): a group of 2 to 16
 * members that all share one node has a shared-memory segment (unless DTR_MPI_SHM=0 or
 * DTR_MPI_STRIDED=0 turn it off), and any other group runs every operation through MPI.
 * Under tools/mpirun_nodes.sh the ranks run on several simulated nodes, and this is how the
 * multi-rank tests see the shared-memory paths taken inside a node and MPI across nodes.
 *
 * mpi_paths_check(what) is collective over MPI_COMM_WORLD and must be called while the
 * contexts live (their groups go with them), made over MPI_COMM_WORLD (the groups' ranks are
 * world ranks). Rank 0 prints one line the test scripts sum:
 *   paths (WHAT): G inside a node, S shm ops, M mpi ops; H across nodes, K mpi ops
 * (then ", X hierarchical": reductions across nodes in the hierarchical form) with each group
 * counted once (by its first member). A group across nodes with the same number of members
 * (2 to 16) on each node must report those nodes (dtr_mpi_group_info_t.nodes: it has the
 * hierarchical form) unless DTR_MPI_SHM, DTR_MPI_STRIDED, DTR_MPI_SHM_REDUCE or DTR_MPI_HIER
 * turn it off; any other group must report 0. mpi_paths_one_node() says whether all
 * ranks share one node (tests whose expectations depend on the path). Every rank prints the groups it finds
 * wrong; the return value, equal on all ranks, is how many are wrong in all. Where
 * DTR_EXPECT_NODES=N is set, the ranks must also run on N nodes (or one a rank, if fewer).
 */
#ifndef DTR_TESTS_MPI_PATHS_H
#define DTR_TESTS_MPI_PATHS_H

#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "backends/mpi/dtr_mpi.h"

static inline bool mpi_paths_env_on(const char *name) {
    const char *v = getenv(name);
    return v == NULL || strcmp(v, "0") != 0;
}

/* Whether every rank of MPI_COMM_WORLD runs on this rank's node (collective). */
static inline bool mpi_paths_one_node(void) {
    char name[MPI_MAX_PROCESSOR_NAME] = "", first[MPI_MAX_PROCESSOR_NAME];
    int len = 0, same = 0, all = 0;
    MPI_Get_processor_name(name, &len);
    memcpy(first, name, sizeof first);
    MPI_Bcast(first, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    same = strcmp(first, name) == 0;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all != 0;
}

/* Every rank's host name, MPI_MAX_PROCESSOR_NAME bytes apart (the caller frees), and this
 * rank's into name. Collective. */
static inline char *mpi_paths_names(char name[MPI_MAX_PROCESSOR_NAME]) {
    int n = 0, len = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Get_processor_name(name, &len);
    char *names = calloc((size_t)n, MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    return names;
}

/* Whether the world ranks `step` apart from `first`, `count` of them, share a node with the
 * shared-memory reductions and span lists on: where the MPI backend takes span lists for
 * their group (tools/mpirun_nodes.sh may split them over nodes). Collective. */
static inline bool mpi_paths_spans_on(int first, int step, int count) {
    char name[MPI_MAX_PROCESSOR_NAME];
    char *names = mpi_paths_names(name);
    bool on = mpi_paths_env_on("DTR_MPI_SHM") && mpi_paths_env_on("DTR_MPI_SPANS") &&
              mpi_paths_env_on("DTR_MPI_SHM_REDUCE");
    for (int q = first; q < first + step * count; q += step)
        on = on && strcmp(names + (size_t)q * MPI_MAX_PROCESSOR_NAME,
                          names + (size_t)first * MPI_MAX_PROCESSOR_NAME) == 0;
    free(names);
    return on;
}

static inline int mpi_paths_check(const char *what) {
    int me = 0, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    char *names = mpi_paths_names(name);
    bool shm_on = mpi_paths_env_on("DTR_MPI_SHM") && mpi_paths_env_on("DTR_MPI_STRIDED");
    int wrong = 0;
    /* DTR_EXPECT_NODES=N (tools/test.sh's nodes part): the ranks run on N distinct nodes */
    const char *expect = getenv("DTR_EXPECT_NODES");
    if (expect != NULL && me == 0) {
        int distinct = 0;
        for (int r = 0; r < n; r++) {
            int seen = 0;
            for (int q = 0; q < r && !seen; q++)
                seen = strcmp(names + (size_t)q * MPI_MAX_PROCESSOR_NAME,
                              names + (size_t)r * MPI_MAX_PROCESSOR_NAME) == 0;
            distinct += !seen;
        }
        int want = atoi(expect), ranks_min = want < n ? want : n;
        if (distinct != ranks_min) {
            printf("FAIL: the %d ranks run on %d nodes, DTR_EXPECT_NODES says %d\n", n, distinct,
                   want);
            wrong++;
        }
    }

    int count = 0;
    /* sums: groups inside a node, their shm and mpi ops; groups across nodes, their mpi ops */
    long long t[6] = {0, 0, 0, 0, 0, 0};
    bool hier_on = shm_on && mpi_paths_env_on("DTR_MPI_SHM_REDUCE") &&
                   mpi_paths_env_on("DTR_MPI_HIER");
    dtr_mpi_group_info_t *g = NULL;
    if (dtr_mpi_groups(NULL, 0, &count) != DTR_OK ||
        (count > 0 && (g = calloc((size_t)count, sizeof *g)) == NULL) ||
        dtr_mpi_groups(g, count, &count) != DTR_OK) {
        printf("rank %d: FAIL: dtr_mpi_groups: %s\n", me, dtr_last_error());
        wrong++;
        count = 0;
    }
    for (int i = 0; i < count; i++) {
        if (g[i].members < 2) continue;
        bool one_node = true;
        for (int k = 0; k < g[i].members; k++) {
            int r = g[i].ranks[k];
            if (r < 0 || r >= n) {
                printf("rank %d: FAIL: group %d names rank %d of %d\n", me, i, r, n);
                wrong++;
                one_node = false;
                break;
            }
            one_node = one_node && strcmp(names + (size_t)r * MPI_MAX_PROCESSOR_NAME, name) == 0;
        }
        bool want = one_node && shm_on && g[i].members <= 16;
        /* the hierarchical form: the nodes the members span, each holding as many of them */
        int nodes = 0, per_node = -1;
        bool even = !one_node;
        for (int k = 0; k < g[i].members && even; k++) {
            const char *nk = names + (size_t)g[i].ranks[k] * MPI_MAX_PROCESSOR_NAME;
            int first = 1, here = 0;
            for (int j = 0; j < g[i].members; j++) {
                const char *nj = names + (size_t)g[i].ranks[j] * MPI_MAX_PROCESSOR_NAME;
                if (strcmp(nj, nk) == 0) {
                    here++;
                    if (j < k) first = 0;
                }
            }
            if (!first) continue;
            nodes++;
            if (per_node >= 0 && here != per_node) even = false;
            per_node = here;
        }
        int want_nodes = hier_on && even && per_node >= 2 && per_node <= 16 ? nodes : 0;
        if (g[i].nodes != want_nodes || (want_nodes == 0 && g[i].hier_ops != 0)) {
            printf("rank %d: FAIL: group %d of %d members (first rank %d): hierarchical over %d "
                   "nodes, want %d; %lld hierarchical ops\n",
                   me, i, g[i].members, g[i].ranks[0], g[i].nodes, want_nodes,
                   (long long)g[i].hier_ops);
            wrong++;
        }
        if (g[i].shared_memory != want || (!g[i].shared_memory && g[i].shm_ops != 0)) {
            printf("rank %d: FAIL: group %d of %d members (first rank %d), %s: shared memory %s, "
                   "%lld shm ops, %lld mpi ops\n",
                   me, i, g[i].members, g[i].ranks[0], one_node ? "on this node" : "across nodes",
                   g[i].shared_memory ? "yes" : "no", (long long)g[i].shm_ops,
                   (long long)g[i].mpi_ops);
            wrong++;
        }
        if (g[i].ranks[0] != me) continue;
        if (one_node) {
            t[0]++;
            t[1] += g[i].shm_ops;
            t[2] += g[i].mpi_ops;
        } else {
            t[3]++;
            t[4] += g[i].mpi_ops;
            t[5] += g[i].hier_ops;
        }
    }
    free(g);
    free(names);
    long long sums[6];
    MPI_Allreduce(t, sums, 6, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    int all_wrong = 0;
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0)
        printf("paths (%s): %lld inside a node, %lld shm ops, %lld mpi ops; %lld across nodes, "
               "%lld mpi ops, %lld hierarchical\n",
               what, sums[0], sums[1], sums[2], sums[3], sums[4], sums[5]);
    return all_wrong;
}

/* dtr_mpi_mesh_across_nodes over MPI_COMM_WORLD, checked against the host names: meshes n,
 * 2 x n/2 and n/2 x 2 (where n is even), and a NULL mesh refused by name. Collective;
 * returns how many checks failed on all ranks together (rank 0 prints them). */
static inline int mpi_paths_mesh_check(void) {
    int me = 0, n = 0, wrong = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    char *names = mpi_paths_names(name);
#define MPI_PATHS_NODE(r) (names + (size_t)(r) * MPI_MAX_PROCESSOR_NAME)
    char text[3][32];
    snprintf(text[0], sizeof text[0], "%d", n);
    snprintf(text[1], sizeof text[1], "2x%d", n / 2);
    snprintf(text[2], sizeof text[2], "%dx2", n / 2);
    for (int t = 0; t < (n % 2 == 0 && n >= 4 ? 3 : 1); t++) {
        dtr_mesh_t *mesh = NULL;
        uint32_t got = 99, want = 0;
        if (dtr_mesh_parse(text[t], NULL, 0, &mesh) != DTR_OK ||
            dtr_mpi_mesh_across_nodes(MPI_COMM_WORLD, mesh, &got) != DTR_OK) {
            printf("rank %d: FAIL: mesh %s: %s\n", me, text[t], dtr_last_error());
            wrong++;
            dtr_mesh_destroy(mesh);
            continue;
        }
        /* mesh dim i crosses nodes where two ranks differing only in coordinate i do */
        int cols = t == 0 ? 1 : t == 1 ? n / 2 : 2;
        for (int r = 0; r < n; r++) {
            int row = r / cols, col = r % cols;
            if (t == 0 && strcmp(MPI_PATHS_NODE(r), MPI_PATHS_NODE(0)) != 0) want |= 1u;
            if (t > 0 && strcmp(MPI_PATHS_NODE(r), MPI_PATHS_NODE(col)) != 0) want |= 1u;
            if (t > 0 && strcmp(MPI_PATHS_NODE(r), MPI_PATHS_NODE(row * cols)) != 0) want |= 2u;
        }
        if (got != want) {
            if (me == 0)
                printf("FAIL: dtr_mpi_mesh_across_nodes on mesh %s: 0x%x, want 0x%x\n", text[t],
                       got, want);
            wrong++;
        }
        dtr_mesh_destroy(mesh);
    }
#undef MPI_PATHS_NODE
    uint32_t keep = 7;
    if (dtr_mpi_mesh_across_nodes(MPI_COMM_WORLD, NULL, &keep) != DTR_ERR_INVALID_ARGUMENT ||
        strstr(dtr_last_error(), "mesh") == NULL || keep != 7) {
        printf("rank %d: FAIL: dtr_mpi_mesh_across_nodes with no mesh: %s\n", me, dtr_last_error());
        wrong++;
    }
    free(names);
    int all = 0;
    MPI_Allreduce(&wrong, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

#endif
