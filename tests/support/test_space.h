/*
 * The device space a test's device sections run on, picked by DTR_TEST_SPACE: "fake" (the
 * default: fake_device.h, where a GPU is not needed and the space's calls are counted) or
 * "cuda" (CUDA memory on GPU rank % GPUs visible, in a CUDA build: the shared-GPU mode, every
 * cast, divide, add and copy a kernel). A test's checks of the fake device's counts hold only
 * where `fake` is set; the values are checked the same on both.
 */
#ifndef DTR_TESTS_TEST_SPACE_H
#define DTR_TESTS_TEST_SPACE_H

#include <stdbool.h>
#include <stddef.h>

#include "dtr.h"

typedef struct {
    const dtr_memory_ops_t *ops;
    void *state;      /* the space's state: give it to dtr_context_set_memory */
    const char *name; /* "fake" or "cuda" */
    bool fake;
} test_space_t;

/* Opens the space DTR_TEST_SPACE names for this rank, with a state of its own (a CUDA
 * stream): hand it to one context, which frees it (dtr_context_set_memory), or close it.
 * 0: ready. 1: skip (no GPU visible; printed with the driver's reason). 2: not runnable here
 * (an unknown name, or a build without CUDA; printed). `prog` prefixes the messages, which
 * rank 0 prints. */
int test_space_open(const char *prog, int rank, test_space_t *s);
void test_space_close(test_space_t *s);
/* Whether DTR_TEST_SPACE is usable here: -1 yes; else the exit status to end with (0: a
 * skip, 2: not runnable), having printed why. */
int test_space_probe(const char *prog, int rank);

/* A check of the fake device's counts: holds by definition on CUDA memory (not counted). */
static inline bool test_space_counted(const test_space_t *s, bool cond) {
    return !s->fake || cond;
}

/* A buffer of the space holding n host bytes (one byte more allocated, so n may be 0). */
void *test_space_in(const test_space_t *s, const void *h, size_t n);
/* n bytes of the space's buffer d into h (complete when it returns). */
void test_space_get(const test_space_t *s, void *h, const void *d, size_t n);
/* test_space_get, then d freed. */
void test_space_out(const test_space_t *s, void *h, void *d, size_t n);

#endif
