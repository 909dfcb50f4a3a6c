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
 * with each group counted once (by its first member). mpi_paths_one_node() says whether all
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
#include "redistribute/mpi/dtr_mpi.h"

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

static inline int mpi_paths_check(const char *what) {
    int me = 0, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_Get_processor_name(name, &len);
    char *names = calloc((size_t)n, MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
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
    long long t[5] = {0, 0, 0, 0, 0};
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
        }
    }
    free(g);
    free(names);
    long long sums[5];
    MPI_Allreduce(t, sums, 5, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    int all_wrong = 0;
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0)
        printf("paths (%s): %lld inside a node, %lld shm ops, %lld mpi ops; %lld across nodes, "
               "%lld mpi ops\n",
               what, sums[0], sums[1], sums[2], sums[3], sums[4]);
    return all_wrong;
}

#endif
