/* What belongs to the library as a whole: the check that a caller's
 * headers and the loaded library agree on the public structs. */
#include "dtr.h"

#include "core/common.h"

/* The library's own sizes of the public structs, in DTR_ABI_STRUCTS' order. */
#define DTR__ABI_ENTRY(type) {#type, sizeof(type)},
static const dtr__abi_struct_t dtr__abi_structs[] = {DTR_ABI_STRUCTS(DTR__ABI_ENTRY)};

dtr_status_t dtr_abi_check(int header_code, const size_t *sizes, int count) {
    return dtr__abi_compare(__func__, header_code, sizes, count, dtr__abi_structs,
                            (int)(sizeof dtr__abi_structs / sizeof dtr__abi_structs[0]));
}
