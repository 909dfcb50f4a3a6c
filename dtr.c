/* What belongs to the library as a whole: its version, and the check that a caller's
 * headers and the loaded library agree on the public value structs. */
#include "dtr.h"

#include "core/internal.h"

int dtr_version(void) {
    return DTR_VERSION_CODE;
}

const char *dtr_version_string(void) {
    return DTR_VERSION_STRING;
}

/* The library's own sizes of the value structs, in DTR_ABI_STRUCTS' order. */
#define DTR__ABI_ENTRY(type) {#type, sizeof(type)},
static const struct {
    const char *name;
    size_t size;
} dtr__abi_structs[] = {DTR_ABI_STRUCTS(DTR__ABI_ENTRY)};
#define DTR__ABI_NSTRUCTS ((int)(sizeof dtr__abi_structs / sizeof dtr__abi_structs[0]))

dtr_status_t dtr_abi_check(int header_code, const size_t *sizes, int count) {
    DTR_CHECK_PTR(sizes, __func__);
    if (count < 1)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "count: %d, must be at least 1",
                          count);
    if (header_code < 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "header_code: %d, must not be negative", header_code);
    int hmaj = header_code / 10000, hmin = header_code / 100 % 100, hpat = header_code % 100;
    if (hmaj != DTR_VERSION_MAJOR)
        return dtr__error(DTR_ERR_MISMATCH, __func__,
                          "headers are dtr %d.%d.%d and the library is %s: major versions "
                          "differ, rebuild against this library's headers",
                          hmaj, hmin, hpat, DTR_VERSION_STRING);
    if (header_code > DTR_VERSION_CODE)
        return dtr__error(DTR_ERR_MISMATCH, __func__,
                          "headers are dtr %d.%d.%d and the library is older, %s: load a "
                          "library at least as new as the headers",
                          hmaj, hmin, hpat, DTR_VERSION_STRING);
    /* Same major, library at least as new: it knows at least as many structs as the
     * headers list, so a longer list means the code does not encode what it lists. */
    if (count > DTR__ABI_NSTRUCTS)
        return dtr__error(DTR_ERR_MISMATCH, __func__,
                          "count: the headers list %d value structs and library %s knows %d",
                          count, DTR_VERSION_STRING, DTR__ABI_NSTRUCTS);
    for (int i = 0; i < count; i++)
        if (sizes[i] != dtr__abi_structs[i].size)
            return dtr__error(DTR_ERR_MISMATCH, __func__,
                              "sizeof(%s) is %zu in the headers and %zu in library %s",
                              dtr__abi_structs[i].name, sizes[i], dtr__abi_structs[i].size,
                              DTR_VERSION_STRING);
    return DTR_OK;
}
