/*
 * The hostile-input table: every public entry point tried with null, empty, huge, negative,
 * overflowing, out-of-range, malformed and inconsistent values. Each row calls one function
 * and must get the listed status, a one-line detail that names the function and holds the
 * listed fragment (which names the argument), and leave every output and input as it was
 * (outputs are filled with a sentinel before the call and compared after).
 *
 * Calls that need a context run on a 1-rank mesh over the solo backend (every operation
 * refuses), so the table needs no MPI; the multi-rank cases (specs differing between ranks,
 * a rank's buffer of the wrong size) are in tests/redistribute/executor/mpi_exec_errors_test.c.
 * The cases are in hostile_api.c and hostile_exec.c, declared in hostile.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/reliability/hostile.h"

/* ---- the table ---------------------------------------------------------------------- */

typedef struct {
    const char *name;
    dtr_status_t want;
    const char *fragment; /* in the detail: names the argument */
    bool (*call)(dtr_status_t *st);
} row_t;

#define ROW(fn, status, fragment) {#fn, status, fragment, fn}
static const row_t rows[] = {
#include "tests/reliability/hostile_rows.inc"
};

#define NROWS (sizeof rows / sizeof rows[0])

/* Parameters are row indices: Criterion re-executes the binary for each test, so pointers
 * into it (names, functions) would not survive address randomisation. */
ParameterizedTestParameters(hostile, table) {
    static int index[NROWS];
    for (size_t k = 0; k < NROWS; k++) index[k] = (int)k;
    return cr_make_param_array(int, index, NROWS);
}

ParameterizedTest(int *k, hostile, table) {
    const row_t *row = &rows[*k];
    dtr_status_t st = DTR_OK;
    bool untouched = row->call(&st);
    const char *detail = dtr_last_error();
    cr_expect_eq(st, row->want, "%s: status %s, want %s (detail: %s)", row->name,
                 dtr_status_name(st), dtr_status_name(row->want), detail);
    cr_expect(strstr(detail, row->fragment) != NULL, "%s: detail '%s' lacks '%s'", row->name,
              detail, row->fragment);
    cr_expect(strncmp(detail, "dtr_", 4) == 0 && strchr(detail, '\n') == NULL,
              "%s: detail '%s' does not start with the function's name", row->name, detail);
    cr_expect(untouched, "%s: an output or the input was written", row->name);
    /* HOSTILE_DUMP=1 prints each row as it is now, to review when adding rows */
    if (getenv("HOSTILE_DUMP") != NULL)
        fprintf(stderr, "ROW %s | %s | %s\n", row->name, dtr_status_name(st), detail);
}

Test(hostile, table_has_at_least_60_rows) {
    cr_expect_geq(NROWS, 60u);
}
