/*
 * A fault-injecting wrapper around a backend, for the error-path tests: it fails the k-th
 * operation issued, or the k-th completion (after the operation really completed), or
 * sleeps before issuing the k-th operation. Settings are per process, so a test picks which
 * ranks misbehave by setting them on those ranks only. Operations are counted from the last
 * faulty_reset(); the context's argument agreement is an operation like any other. It
 * forwards the inner backend's agree and cancel, so the executor runs its agreement beside
 * the first operation as it does on the bare backend, and counts the cancels.
 */
#ifndef DTR_TESTS_FAULTY_BACKEND_H
#define DTR_TESTS_FAULTY_BACKEND_H

#include "runtime/runtime.h"

typedef struct {
    int fail_issue;    /* fail the k-th operation issued (1-based); 0: never */
    int fail_complete; /* fail the k-th completion; 0: never */
    int delay_at;      /* sleep delay_s before issuing the k-th operation; 0: never */
    double delay_s;
    int issued, completed, cancelled; /* counts since faulty_reset */
} faulty_settings_t;

extern faulty_settings_t faulty;

/* Clears the settings and the counts. */
void faulty_reset(void);

/* The wrapper's table around `inner` (one inner backend per process). */
const dtr_backend_ops_t *faulty_ops(const dtr_backend_ops_t *inner);

#endif
