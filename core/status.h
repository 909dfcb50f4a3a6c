/*
 * Status codes and the per-thread error detail.
 *
 * Every dtr call that can fail returns a dtr_status_t: DTR_OK (0) or a negative code. On
 * failure the call leaves its outputs untouched and records a one-line detail for the
 * calling thread that names the function, the argument and the offending value, e.g.
 *   "dtr_spec_init: placements[1]: shard dim 3 out of range for a 2-d tensor"
 * The detail is always one line: control characters in quoted input show as '?'. It stays
 * until the next failing call on the same thread (success does not clear it, as with errno).
 */
#ifndef DTR_CORE_STATUS_H
#define DTR_CORE_STATUS_H

#include "core/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message): the one list every status-related function is built from. */
#define DTR_STATUS_MAP(X)                                                              \
    X(DTR_OK, 0, "success")                                                            \
    X(DTR_ERR_INVALID_ARGUMENT, -1, "invalid argument")                                \
    X(DTR_ERR_PARSE, -2, "malformed text")                                             \
    X(DTR_ERR_OVERFLOW, -3, "size overflows 64 bits")                                  \
    X(DTR_ERR_OUT_OF_MEMORY, -4, "out of memory")                                      \
    X(DTR_ERR_NOT_IN_MESH, -5, "rank is not in the mesh")                              \
    X(DTR_ERR_BUFFER_TOO_SMALL, -6, "output buffer too small")                         \
    X(DTR_ERR_INTERNAL, -7, "internal error (a bug in dtr)")                           \
    X(DTR_ERR_UNSUPPORTED, -8, "not supported")                                        \
    X(DTR_ERR_BACKEND, -9, "the communication backend failed")                         \
    X(DTR_ERR_MISMATCH, -10, "ranks disagree on a collective call's arguments")        \
    X(DTR_ERR_REMOTE, -11, "another rank failed this collective call")                 \
    X(DTR_ERR_BUSY, -12, "the context is running another redistribution")            \
    X(DTR_ERR_TIMEOUT, -13, "a collective did not complete within the deadline")       \
    X(DTR_ERR_ABORTED, -14, "the context was aborted by an earlier timeout")          \
    X(DTR_ERR_IO, -15, "a file could not be opened, read or written")

typedef enum {
#define DTR__STATUS_ENUM(name, value, msg) name = value,
    DTR_STATUS_MAP(DTR__STATUS_ENUM)
#undef DTR__STATUS_ENUM
} dtr_status_t;

/* "DTR_ERR_PARSE" for DTR_ERR_PARSE; "DTR_UNKNOWN_STATUS" for a value not in the map. */
DTR_API const char *dtr_status_name(dtr_status_t status);

/* A short English message for the code ("malformed text"). Never NULL. */
DTR_API const char *dtr_status_string(dtr_status_t status);

/* The detail of the calling thread's most recent failure; "" if none. The string is
 * owned by dtr and valid until the thread's next failing dtr call. */
DTR_API const char *dtr_last_error(void);

/* The status of the calling thread's most recent failure; DTR_OK if none. */
DTR_API dtr_status_t dtr_last_status(void);

#ifdef __cplusplus
}
#endif

#endif
