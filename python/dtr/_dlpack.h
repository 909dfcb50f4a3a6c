/*
 * DLPack's ABI (dlpack.h, version 0.x: the structs every framework's from_dlpack reads and
 * every __dlpack__ gives in a "dltensor" capsule), declared here so that `pip install`
 * needs no dlpack.h (Debian's libdlpack-dev): the layout is the ABI, fixed since 0.x. A
 * DLManagedTensor starts with its DLTensor.
 */
#ifndef DTR_PY_DLPACK_H
#define DTR_PY_DLPACK_H

#include <stdint.h>

typedef struct {
    int device_type, device_id; /* kDLCPU = 1 */
} dtrpy_dl_device_t;
typedef struct {
    uint8_t code, bits; /* kDLUInt = 1 */
    uint16_t lanes;
} dtrpy_dl_dtype_t;
typedef struct {
    void *data;
    dtrpy_dl_device_t device;
    int32_t ndim;
    dtrpy_dl_dtype_t dtype;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} dtrpy_dl_tensor_t;
#endif
