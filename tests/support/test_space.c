/* The device space of a test's device sections (test_space.h). */
#include "tests/support/test_space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/fake_device.h"
#if defined(DTR_HAVE_CUDA)
#include "backends/cuda/dtr_cuda.h"
#endif

int test_space_open(const char *prog, int rank, test_space_t *s) {
    const char *name = getenv("DTR_TEST_SPACE");
    if (name == NULL || *name == '\0' || strcmp(name, "fake") == 0) {
        *s = (test_space_t){fake_device_ops(), fake_device_state(), "fake", true};
        return 0;
    }
    if (strcmp(name, "cuda") != 0) {
        if (rank == 0) printf("%s: DTR_TEST_SPACE='%s': not fake or cuda\n", prog, name);
        return 2;
    }
#if defined(DTR_HAVE_CUDA)
    int gpus = dtr_cuda_device_count();
    void *state = NULL;
    if (gpus < 1 || dtr_memory_cuda_create(rank % gpus, NULL, &state) != DTR_OK) {
        if (rank == 0) printf("%s: skipped, no GPU: %s\n", prog, dtr_last_error());
        return 1;
    }
    *s = (test_space_t){dtr_memory_cuda_ops(), state, "cuda", false};
    return 0;
#else
    if (rank == 0) printf("%s: DTR_TEST_SPACE=cuda: built without CUDA\n", prog);
    return 2;
#endif
}

int test_space_probe(const char *prog, int rank) {
    test_space_t s;
    int rc = test_space_open(prog, rank, &s);
    if (rc != 0) return rc == 1 ? 0 : 2;
    test_space_close(&s);
    return -1;
}

void test_space_close(test_space_t *s) {
    if (s->ops != NULL) s->ops->destroy(s->state);
    s->ops = NULL;
    s->state = NULL;
}

void *test_space_in(const test_space_t *s, const void *h, size_t n) {
    void *d = NULL;
    if (s->ops->alloc(s->state, (int64_t)n + 1, &d) != DTR_OK ||
        (n > 0 && s->ops->copy(s->state, d, h, (int64_t)n, DTR_COPY_FROM_HOST) != DTR_OK) ||
        s->ops->sync(s->state) != DTR_OK) {
        fprintf(stderr, "test_space_in: %zu bytes: %s\n", n, dtr_last_error());
        abort(); /* a test's own setup: nothing to check past it */
    }
    return d;
}

void test_space_get(const test_space_t *s, void *h, const void *d, size_t n) {
    if (n > 0 && s->ops->copy(s->state, h, d, (int64_t)n, DTR_COPY_TO_HOST) != DTR_OK) {
        fprintf(stderr, "test_space_get: %zu bytes: %s\n", n, dtr_last_error());
        abort();
    }
}

void test_space_out(const test_space_t *s, void *h, void *d, size_t n) {
    test_space_get(s, h, d, n);
    s->ops->free(s->state, d);
}
