/*
 * The tally of the multi-rank test programs: check() counts a check every rank makes and
 * fails it if any rank's `ok` is false (each failing rank prints why); mpi_check_finish()
 * prints "<what>: N passed, N failed" on rank 0 (tools/test.sh sums these lines) and returns
 * the exit status every rank agrees on. One translation unit per test binary includes it.
 */
#ifndef DTR_TESTS_MPI_CHECK_H
#define DTR_TESTS_MPI_CHECK_H

#include <mpi.h>
#include <stdio.h>

#include "core/status.h"

static int rank, world, passed, failed;

static void check(int ok, const char *what) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) printf("rank %d: FAIL: %s (last error: %s)\n", rank, what, dtr_last_error());
    if (rank == 0) {
        if (all)
            passed++;
        else
            failed++;
    }
}

static int mpi_check_finish(const char *what) {
    if (rank == 0) printf("%s: %d passed, %d failed\n", what, passed, failed);
    int rc = failed > 0;
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}

#endif
