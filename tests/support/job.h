/*
 * The job a multi-rank test program is one rank of, on the backend its command line names
 * (--backend mpi, the default: started by mpirun, MPI initialised here; --backend gloo:
 * started by tools/dtr_launch.sh, no MPI), with the test's own tallies over it through
 * dtr's all-reduce, so that one program runs its cases on every backend.
 */
#ifndef DTR_TESTS_SUPPORT_JOB_H
#define DTR_TESTS_SUPPORT_JOB_H

#include <stdbool.h>

#include "dtr.h"

typedef struct {
    const char *backend; /* "mpi" or another name of dtr_context_create_named */
    bool mpi;
    int rank, world;
    dtr_context_t *ctx; /* the job's context: the tallies', host memory (cases may run on it) */
    dtr_mesh_t *all;    /* a 1-d mesh of every rank, for the tallies */
} test_job_t;

/* Joins the job: --backend NAME from argv (default mpi), MPI_Init for mpi, the context by
 * name. Prints why and exits 2 on failure. */
void test_job_start(int *argc, char ***argv, test_job_t *j);
/* The largest v over the ranks (a failure anywhere: every rank learns it). */
int test_job_max(const test_job_t *j, int v);
/* Seconds on the monotonic clock. */
double test_job_now(void);
/* Destroys the context, MPI_Finalize for mpi. */
void test_job_end(test_job_t *j);

#endif
