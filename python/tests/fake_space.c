/*
 * The fake device of the C tests (tests/support/fake_device.c: host memory behind tagged
 * addresses that fault if anything but the space's own table touches them) as a memory space
 * named "fake", registered with the library as this file's shared object loads. The Python
 * device tests (test_device.py) build it with the C compiler alone, load it, and put meshes
 * on device="fake": every path of device arrays without a GPU.
 */
#include <stdint.h>

#include "tests/support/fake_device.h"

static dtr_status_t fake_space_create(int device, void *stream, void **state) {
    (void)device, (void)stream;
    *state = fake_device_state();
    return *state != NULL ? DTR_OK : DTR_ERR_OUT_OF_MEMORY;
}

/* The fake device's counts (fake_device_counts_t's fields in order) into out[0..11). */
void fake_space_counts(int64_t *out) {
    fake_device_counts_t c = fake_device_counts();
    int64_t v[] = {c.alloc, c.copy_within, c.to_host, c.from_host, c.zero, c.copy_box,
                   c.copy_range, c.divide, c.cast, c.add, c.refused};
    for (int i = 0; i < 11; i++) out[i] = v[i];
}

/* The fake device registered under another name too (test_nccl.py: as "cuda", in place of
 * the real space, so that device="cuda" is taken without a GPU). */
int fake_space_register_as(const char *name) {
    dtr_memory_info_t row = {.name = name, .ops = fake_device_ops(), .create = fake_space_create};
    return (int)dtr_memory_register(&row);
}

__attribute__((constructor)) static void fake_space_register(void) {
    dtr_memory_info_t row = {.name = "fake", .ops = fake_device_ops(), .create = fake_space_create};
    (void)dtr_memory_register(&row);
}
