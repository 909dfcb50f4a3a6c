/* The job of a multi-rank test program on a named backend (job.h). */
#define _POSIX_C_SOURCE 200809L
#include "tests/support/job.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void test_job_start(int *argc, char ***argv, test_job_t *j) {
    memset(j, 0, sizeof *j);
    j->backend = "mpi";
    for (int k = 1; k + 1 < *argc; k++)
        if (strcmp((*argv)[k], "--backend") == 0) j->backend = (*argv)[k + 1];
    j->mpi = strcmp(j->backend, "mpi") == 0;
    if (j->mpi) MPI_Init(argc, argv);
    if (dtr_context_create_named(j->backend, &j->ctx) != DTR_OK) {
        fprintf(stderr, "test job: backend %s: %s\n", j->backend, dtr_last_error());
        exit(2);
    }
    j->rank = dtr_context_rank(j->ctx);
    if (j->mpi) {
        MPI_Comm_size(MPI_COMM_WORLD, &j->world);
    } else {
        const char *ws = getenv("WORLD_SIZE");
        j->world = ws != NULL ? atoi(ws) : 1;
    }
    int64_t n = j->world;
    if (dtr_mesh_create(1, &n, NULL, 0, &j->all) != DTR_OK) {
        fprintf(stderr, "test job: the mesh of %d ranks: %s\n", j->world, dtr_last_error());
        exit(2);
    }
}

int test_job_max(const test_job_t *j, int v) {
    int all = v;
    if (dtr_all_reduce(j->ctx, j->all, 1u, &v, &all, 1, DTR_I32, DTR_REDUCE_MAX) != DTR_OK) {
        fprintf(stderr, "rank %d: the test's tally: %s\n", j->rank, dtr_last_error());
        exit(2);
    }
    return all;
}

double test_job_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void test_job_end(test_job_t *j) {
    dtr_mesh_destroy(j->all);
    dtr_context_destroy(j->ctx);
    if (j->mpi) MPI_Finalize();
}
