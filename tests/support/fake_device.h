/*
 * A memory space for tests: "device" buffers are host memory behind tagged addresses (bit 62
 * set), so the executor faults at once if it ever reads or writes one itself instead of
 * through the space's table, and the table refuses an untagged (host) address where it
 * expects one of its own. Every operation is a plain loop, written apart from the executor's
 * own copies, and counted.
 */
#ifndef DTR_TESTS_FAKE_DEVICE_H
#define DTR_TESTS_FAKE_DEVICE_H

#include <stdint.h>

#include "dtr.h"

typedef struct {
    int64_t alloc, copy_within, to_host, from_host, zero, copy_box, copy_range, divide, cast, add;
    int64_t refused; /* calls with an address of the wrong space */
} fake_device_counts_t;

const dtr_memory_ops_t *fake_device_ops(void);
/* A state (counts shared by every state of the process). */
void *fake_device_state(void);
fake_device_counts_t fake_device_counts(void);

/* Host view of a fake device address (for the test's own checks). */
void *fake_device_host(const void *p);

#endif
