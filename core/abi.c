/* The loaded library's version, and the header/library agreement behind dtr_abi_check and dtr_mpi_abi_check: versions, then
 * the sizes of the public structs a caller allocates or embeds, in the order of the lists
 * the headers and the library were built from. */
#include "core/common.h"
#include "core/version.h"
#include "dtr_version.h"

int dtr_version(void) { return DTR_VERSION_CODE; }

const char *dtr_version_string(void) { return DTR_VERSION_STRING; }

dtr_status_t dtr__abi_compare(const char *func, int header_code, const size_t *sizes,
                              int count, const dtr__abi_struct_t *known, int nknown) {
    const int library_code = DTR_VERSION_CODE;
    const char *library_version = DTR_VERSION_STRING;
    DTR_CHECK_PTR(sizes, func);
    if (count < 1)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "count: %d, must be at least 1", count);
    if (header_code < 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "header_code: %d, must not be negative",
                          header_code);
    int hmaj = header_code / 10000, hmin = header_code / 100 % 100, hpat = header_code % 100;
    int lmaj = library_code / 10000, lmin = library_code / 100 % 100;
    if (hmaj != lmaj)
        return dtr__error(DTR_ERR_MISMATCH, func,
                          "headers are dtr %d.%d.%d and the library is %s: major versions "
                          "differ, rebuild against this library's headers",
                          hmaj, hmin, hpat, library_version);
    /* Before 1.0 a minor version may change any struct, limit or signature: only the same
     * MAJOR.MINOR can be trusted, whatever the sizes say (docs/integration.md). */
    if (lmaj == 0 && hmin != lmin)
        return dtr__error(DTR_ERR_MISMATCH, func,
                          "headers are dtr %d.%d.%d and the library is %s: before 1.0 the "
                          "minor versions must agree, rebuild against this library's headers",
                          hmaj, hmin, hpat, library_version);
    if (header_code > library_code)
        return dtr__error(DTR_ERR_MISMATCH, func,
                          "headers are dtr %d.%d.%d and the library is older, %s: load a "
                          "library at least as new as the headers",
                          hmaj, hmin, hpat, library_version);
    /* Same major, library at least as new: it knows at least as many structs as the
     * headers list, so a longer list means the code does not encode what it lists. */
    if (count > nknown)
        return dtr__error(DTR_ERR_MISMATCH, func,
                          "count: the headers list %d structs and library %s knows %d", count,
                          library_version, nknown);
    for (int i = 0; i < count; i++)
        if (sizes[i] != known[i].size)
            return dtr__error(DTR_ERR_MISMATCH, func,
                              "sizeof(%s) is %zu in the headers and %zu in library %s",
                              known[i].name, sizes[i], known[i].size, library_version);
    return DTR_OK;
}
