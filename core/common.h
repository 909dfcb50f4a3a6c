/* What every module of the library uses from core/: error recording and the check macros,
 * logging, overflow-checked arithmetic, text scanning, the clock, the environment, hashing
 * and the ABI check. Not installed: libdtr exports the few that companion libraries need
 * (DTR_INTERNAL_EXPORT). */
#ifndef DTR_CORE_COMMON_H
#define DTR_CORE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#if defined(__GNUC__)
#define DTR__PRINTF(fmt_idx, args_idx) __attribute__((format(printf, fmt_idx, args_idx)))
#else
#define DTR__PRINTF(fmt_idx, args_idx)
#endif

/* Records "func: <formatted detail>" as the thread's last error and returns status, so a
 * failing check reads `return dtr__error(DTR_ERR_..., __func__, "...", ...);`. */
DTR_INTERNAL_EXPORT dtr_status_t dtr__error(dtr_status_t status, const char *func,
                                            const char *fmt, ...)
    DTR__PRINTF(3, 4);

/* Propagate a failure; the callee already recorded the detail. */
#define DTR_CHECK(call)                                                                \
    do {                                                                               \
        dtr_status_t dtr__st = (call);                                                 \
        if (dtr__st != DTR_OK) return dtr__st;                                         \
    } while (0)

/* The thread's last error without its "dtr_function: " prefix (dtr__error may be handed it). */
const char *dtr__last_detail(void);

/* Re-records the thread's last error under `func` (the public function the caller is in),
 * replacing the callee's name, so a detail names the function the user called. */
dtr_status_t dtr__error_as(dtr_status_t status, const char *func);

/* Propagate a failure of a public callee, under this function's name. */
#define DTR_CHECK_AS(call, func)                                                       \
    do {                                                                               \
        dtr_status_t dtr__st = (call);                                                 \
        if (dtr__st != DTR_OK) return dtr__error_as(dtr__st, func);                    \
    } while (0)

/* Store a failure in st and jump to an unwind label; the first error wins. */
#define DTR_CHECK_GOTO(call, st, label)                                                \
    do {                                                                               \
        dtr_status_t dtr__st = (call);                                                 \
        if (dtr__st != DTR_OK) {                                                       \
            if ((st) == DTR_OK) (st) = dtr__st;                                        \
            goto label;                                                                \
        }                                                                              \
    } while (0)

#define DTR_CHECK_PTR(ptr, func)                                                       \
    do {                                                                               \
        if ((ptr) == NULL)                                                             \
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: must not be NULL",  \
                              #ptr);                                                   \
    } while (0)

/* Logging, turned up from outside with DTR_DEBUG=WARN|INFO|TRACE (default: off). A
 * disabled level costs one comparison; arguments are not evaluated. */
typedef enum {
    DTR_LOG_NONE = 0,
    DTR_LOG_WARN,
    DTR_LOG_INFO,
    DTR_LOG_TRACE,
    DTR_LOG_LAST
} dtr_log_level_t;

dtr_log_level_t dtr__log_level(void);
void dtr__log(dtr_log_level_t level, const char *func, const char *fmt, ...)
    DTR__PRINTF(3, 4);

#define DTR_LOG(level, ...)                                                            \
    do {                                                                               \
        if ((level) <= dtr__log_level()) dtr__log((level), __func__, __VA_ARGS__);     \
    } while (0)
#define DTR_WARN(...) DTR_LOG(DTR_LOG_WARN, __VA_ARGS__)
#define DTR_INFO(...) DTR_LOG(DTR_LOG_INFO, __VA_ARGS__)
#define DTR_TRACE(...) DTR_LOG(DTR_LOG_TRACE, __VA_ARGS__)

/* Overflow-checked int64 arithmetic: return 0 and store the result, or 1 on overflow. */
static inline int dtr__mul_overflow(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline int dtr__add_overflow(int64_t a, int64_t b, int64_t *out) {
    return __builtin_add_overflow(a, b, out);
}

/* Text scanning shared by the parsers. A cursor is a `const char **`; helpers advance it
 * only past what they accept. */
const char *dtr__skip_space(const char *p);
/* Parses an optionally signed decimal integer; 0 on success, -1 if none is there, -2 if it
 * does not fit in int64. */
int dtr__scan_i64(const char **cursor, int64_t *out);
/* Case-insensitive match of a word (letters, digits, '_') at the cursor; advances on a
 * match of the whole word. */
int dtr__scan_word(const char **cursor, const char *word);
/* Appends formatted text at buf+*pos like snprintf and advances *pos by the full length;
 * DTR_ERR_BUFFER_TOO_SMALL when it did not fit. Used on the *_format functions' local
 * buffers, which are then handed out with dtr__copy_out. */
dtr_status_t dtr__buf_printf(char *buf, size_t len, size_t *pos, const char *func,
                             const char *fmt, ...) DTR__PRINTF(5, 6);

/* Scans dims written "2x5" ("" or "scalar": none) into out[0..cap), each 0..2^40; with
 * `brackets` (shapes) also "[2, 5]" and "(2, 5)" ("[]", "()": none) and sizes from 0,
 * without (meshes) sizes from 1; errors name `func`. Shared by
 * the shape and mesh parsers (dtensor/shape.c). */
dtr_status_t dtr__dims_parse(const char *text, int64_t *out, int cap, int *ndim,
                             const char *func, bool brackets);

/* Copies text (n chars) and a NUL into the caller's buf[0..len), or returns
 * DTR_ERR_BUFFER_TOO_SMALL without writing buf. */
dtr_status_t dtr__copy_out(char *buf, size_t len, const char *text, size_t n, const char *func);

/* ---- the clock, the environment, hashing (env.c) ---------------------------------------- */

/* Monotonic seconds. */
DTR_INTERNAL_EXPORT double dtr__now(void);

/* The deadline new contexts (and the CUDA space) start with: DTR_TIMEOUT_S, else 600 s
 * (INVALID_ARGUMENT naming func for a bad value). */
DTR_INTERNAL_EXPORT dtr_status_t dtr__env_timeout(const char *func, double *out);

/* A byte count from environment variable `name`: `dflt` when unset or empty, else an
 * integer in [min, max]; anything else is DTR_ERR_INVALID_ARGUMENT from `func` saying
 * "<name>: "<value>" is not <what>". */
DTR_INTERNAL_EXPORT dtr_status_t dtr__env_bytes(const char *name, const char *func, int64_t dflt,
                                                int64_t min, int64_t max, const char *what,
                                                int64_t *out);

/* Do [a, a+na) and [b, b+nb) overlap? */
bool dtr__bytes_overlap(const void *a, size_t na, const void *b, size_t nb);

/* One 64-bit step of the hash of what ranks must agree on (core/env.c). */
DTR_INTERNAL_EXPORT uint64_t dtr__fnv(uint64_t h, int64_t v);

/* ---- abi.c ------------------------------------------------------------------------- */

/* A public struct as the library was built with it. */
typedef struct {
    const char *name;
    size_t size;
} dtr__abi_struct_t;

/* The check behind dtr_abi_check: the headers' version header_code and their sizes[0..count)
 * against the library's (its version, and the structs `known` in the same order). Another
 * major version, another minor one while the major is 0, newer headers, more structs than
 * the library knows or one size that differs: DTR_ERR_MISMATCH naming it, as func. */
dtr_status_t dtr__abi_compare(const char *func, int header_code, const size_t *sizes,
                              int count, const dtr__abi_struct_t *known, int nknown);

#endif
