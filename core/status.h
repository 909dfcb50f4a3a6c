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

/*
 * The classes of failure, the one table the front ends map from: the CLI's exit code and
 * the Python package's exception class of every status come from its class, never from a
 * choice in the front end. X(name, exit code, Python class, what it means).
 */
#define DTR_ERROR_CLASS_MAP(X)                                                              \
    X(DTR_CLASS_OK, 0, "", "done")                                                         \
    X(DTR_CLASS_ARGUMENT, 2, "ArgumentError", "an argument or input is wrong")             \
    X(DTR_CLASS_FILE, 2, "FileError", "a file could not be opened, read or written")       \
    X(DTR_CLASS_REFUSED, 3, "RefusedError", "well-formed, but dtr has no plan or support")  \
    X(DTR_CLASS_COMMUNICATION, 1, "BackendError", "the ranks or the engine failed a call") \
    X(DTR_CLASS_TIMEOUT, 1, "TimeoutError", "a collective missed its deadline")            \
    X(DTR_CLASS_RUN, 1, "Error", "the run failed (memory, a bug in dtr)")

typedef enum {
#define DTR__CLASS_ENUM(name, exit_code, py, what) name,
    DTR_ERROR_CLASS_MAP(DTR__CLASS_ENUM)
#undef DTR__CLASS_ENUM
    DTR_CLASS_LAST
} dtr_error_class_t;

/* X(name, value, class, message): the one list every status-related function is built from. */
#define DTR_STATUS_MAP(X)                                                                  \
    X(DTR_OK, 0, DTR_CLASS_OK, "success")                                                  \
    X(DTR_ERR_INVALID_ARGUMENT, -1, DTR_CLASS_ARGUMENT, "invalid argument")                \
    X(DTR_ERR_PARSE, -2, DTR_CLASS_ARGUMENT, "malformed text")                             \
    X(DTR_ERR_OVERFLOW, -3, DTR_CLASS_ARGUMENT, "size overflows 64 bits")                  \
    X(DTR_ERR_OUT_OF_MEMORY, -4, DTR_CLASS_RUN, "out of memory")                           \
    X(DTR_ERR_NOT_IN_MESH, -5, DTR_CLASS_ARGUMENT, "rank is not in the mesh")              \
    X(DTR_ERR_BUFFER_TOO_SMALL, -6, DTR_CLASS_ARGUMENT, "output buffer too small")         \
    X(DTR_ERR_INTERNAL, -7, DTR_CLASS_RUN, "internal error (a bug in dtr)")                \
    X(DTR_ERR_UNSUPPORTED, -8, DTR_CLASS_REFUSED, "not supported")                         \
    X(DTR_ERR_BACKEND, -9, DTR_CLASS_COMMUNICATION, "the communication backend failed")    \
    X(DTR_ERR_MISMATCH, -10, DTR_CLASS_COMMUNICATION,                                      \
      "ranks disagree on a collective call's arguments")                                    \
    X(DTR_ERR_REMOTE, -11, DTR_CLASS_COMMUNICATION,                                        \
      "another rank failed this collective call")                                           \
    X(DTR_ERR_BUSY, -12, DTR_CLASS_COMMUNICATION,                                          \
      "the context is running another redistribution")                                      \
    X(DTR_ERR_TIMEOUT, -13, DTR_CLASS_TIMEOUT,                                             \
      "a collective did not complete within the deadline")                                  \
    X(DTR_ERR_ABORTED, -14, DTR_CLASS_TIMEOUT, "the context was aborted by an earlier timeout") \
    X(DTR_ERR_IO, -15, DTR_CLASS_FILE, "a file could not be opened, read or written")

typedef enum {
#define DTR__STATUS_ENUM(name, value, cls, msg) name = value,
    DTR_STATUS_MAP(DTR__STATUS_ENUM)
#undef DTR__STATUS_ENUM
} dtr_status_t;

/* "DTR_ERR_PARSE" for DTR_ERR_PARSE; "DTR_UNKNOWN_STATUS" for a value not in the map. */
DTR_API const char *dtr_status_name(dtr_status_t status);

/* A short English message for the code ("malformed text"). Never NULL. */
DTR_API const char *dtr_status_string(dtr_status_t status);

/* The class of a status (DTR_CLASS_RUN for a value not in the map). */
DTR_API dtr_error_class_t dtr_status_class(dtr_status_t status);
/* "DTR_CLASS_ARGUMENT" for DTR_CLASS_ARGUMENT; NULL for a value out of range. */
DTR_API const char *dtr_error_class_name(dtr_error_class_t cls);
/* The exit code a command ends with for a failure of the class: 0 done, 1 a run failed, 2
 * bad arguments or input files, 3 refused (well-formed, but no plan); 1 out of range. */
DTR_API int dtr_error_class_exit_code(dtr_error_class_t cls);
/* The name of the Python package's exception class ("ArgumentError"; "" for OK). */
DTR_API const char *dtr_error_class_python(dtr_error_class_t cls);

/* The detail of the calling thread's most recent failure; "" if none. The string is
 * owned by dtr and valid until the thread's next failing dtr call. */
DTR_API const char *dtr_last_error(void);

/* The status of the calling thread's most recent failure; DTR_OK if none. */
DTR_API dtr_status_t dtr_last_status(void);

#ifdef __cplusplus
}
#endif

#endif
