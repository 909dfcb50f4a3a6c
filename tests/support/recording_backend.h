/*
 * A recording wrapper around a backend, for the gradient tests: it logs the data
 * collectives issued (the argument agreements, 3 x i64 under MAX, are left out) in order,
 * so a test asserts which operations ran, their sizes, dtypes and ops. It passes the inner
 * backend's span lists on (the parameter groups' reduce-scatter without a pack).
 */
#ifndef DTR_TESTS_AUTOGRAD_RECORDING_BACKEND_H
#define DTR_TESTS_AUTOGRAD_RECORDING_BACKEND_H

#include "runtime/runtime.h"

typedef struct {
    char kind; /* 'r' reduce-scatter, 'a' all-reduce, 'g' all-gather */
    int64_t count; /* elements; bytes for an all-gather */
    dtr_dtype_t dtype;
    dtr_reduce_op_t op;
    int size; /* the group's size */
    double scale; /* a pre-multiplied SUM's scale (premul_sum); 1 otherwise */
    int spans;    /* 1: over span lists (spans_start), counts[0] in count */
    double pre, post; /* span lists: the divides on reading and writing (0: none) */
    int recv_cast;    /* span lists: the results cast as they are written */
} rec_t;

#define REC_MAX 256
extern rec_t recs[REC_MAX];
extern int nrecs;

/* Set before a context is made: its wrapper also offers premul_sum, as NCCL does. Its
 * addends are multiplied by the scale rounded to the dtype, each product rounded to the
 * dtype (NCCL's pre-multiply), into a buffer of the group's, and the inner backend sums
 * those; recorded as 'r' or 'a' with the scale. */
extern int rec_premul;

/* The wrapper's table around `inner` (one inner backend per process). */
const dtr_backend_ops_t *recording_ops(const dtr_backend_ops_t *inner);

/* The kinds recorded since nrecs was last set to 0, as a string ("rrara"). */
const char *rec_kinds(void);

/* A context on MPI_COMM_WORLD through the recording wrapper around the MPI backend; with
 * `mem` (and its state) its memory is that space, NULL: host. NULL if any step fails (the
 * reason is dtr_last_error()). */
dtr_context_t *recording_mpi_context(const dtr_memory_ops_t *mem, void *mem_state);

#endif
