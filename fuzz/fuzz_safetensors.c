/*
 * libFuzzer harness for the safetensors header parser (checkpoint/safetensors.c): the input
 * as a whole file (the 8-byte length, the JSON, the data) and as a header alone over a data
 * section as long as the input. A parse that succeeds must describe tensors that tile the
 * data exactly, each its shape's byte count; one that fails must return a known error with
 * a detail and leave its output as it was.
 */
#include <stdint.h>
#include <string.h>

#include "checkpoint/safetensors.h"
#include "fuzz/fuzz_util.h"

static const int bits_of[] = {[DTR_F32] = 32, [DTR_F64] = 64, [DTR_F16] = 16, [DTR_BF16] = 16,
                              [DTR_I32] = 32, [DTR_I64] = 64, [DTR_U8] = 8, [DTR_F8E4M3] = 8,
                              [DTR_F8E5M2] = 8, [DTR_C64] = 64};

static void check(dtr_status_t st, const dtr__st_header_t *h, int64_t data_bytes) {
    if (st != DTR_OK) {
        fuzz_check_error(st);
        FUZZ_ASSERT(h->tensors == (void *)1 && h->ntensors == -3, "output written on error");
        return;
    }
    int64_t total = 0;
    for (int64_t i = 0; i < h->ntensors; i++) {
        const dtr__st_tensor_t *t = &h->tensors[i];
        FUZZ_ASSERT(t->begin == total, "tensor %lld begins at %lld, not %lld", (long long)i,
                    (long long)t->begin, (long long)total);
        FUZZ_ASSERT(t->ndim >= 0 && t->ndim <= DTR_MAX_TENSOR_DIMS, "ndim %d", t->ndim);
        if (t->dtype != DTR_DTYPE_LAST && t->dtype != DTR_C128) {
            int64_t n = 1;
            for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
            FUZZ_ASSERT(t->end - t->begin == n * bits_of[t->dtype] / 8, "bytes of %s",
                        t->name);
        }
        total = t->end;
    }
    FUZZ_ASSERT(total == data_bytes, "tensors end at %lld, data %lld", (long long)total,
                (long long)data_bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dtr__st_header_t h = {.tensors = (void *)1, .ntensors = -3};
    dtr_status_t st = dtr__st_parse_image("fuzz", "input", data, size, &h);
    if (st == DTR_OK) {
        uint64_t n = 0;
        for (int k = 7; k >= 0; k--) n = n << 8 | data[k];
        check(st, &h, (int64_t)(size - 8 - n));
        dtr__st_free(&h);
    } else {
        check(st, &h, 0);
    }
    h = (dtr__st_header_t){.tensors = (void *)1, .ntensors = -3};
    st = dtr__st_parse("fuzz", "input", (const char *)data, size, (int64_t)size, &h);
    check(st, &h, (int64_t)size);
    if (st == DTR_OK) dtr__st_free(&h);
    return 0;
}
