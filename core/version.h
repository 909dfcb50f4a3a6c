/* The loaded library's version (core/abi.c): the same in libdtr and libdtr_core. */
#ifndef DTR_CORE_VERSION_H
#define DTR_CORE_VERSION_H

#include "core/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library that is loaded, as DTR_VERSION_CODE spells it (MAJOR * 10000
 * + MINOR * 100 + PATCH). It may differ from the DTR_VERSION_* macros of the headers the
 * caller was compiled against; dtr_check_headers() says whether the two can work together. */
DTR_API int dtr_version(void);

/* The loaded library's version as text, "0.9.0". Static storage. */
DTR_API const char *dtr_version_string(void);

#ifdef __cplusplus
}
#endif

#endif
