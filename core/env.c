/* The clock, the environment's tunables and the hash every module agrees on. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "core/common.h"

/* What DTR_TIMEOUT_S means when it is not set. */
#define DTR__DEFAULT_TIMEOUT_S 600.0

double dtr__now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

dtr_status_t dtr__env_timeout(const char *func, double *out) {
    const char *env = getenv("DTR_TIMEOUT_S");
    *out = DTR__DEFAULT_TIMEOUT_S;
    if (env == NULL || *env == '\0') return DTR_OK;
    char *end = NULL;
    errno = 0;
    double v = strtod(env, &end);
    if (end == env || *end != '\0' || errno != 0 || !(v >= 0) || isinf(v))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "DTR_TIMEOUT_S: \"%.40s\" is not a number of seconds >= 0 (0: no "
                          "deadline)",
                          env);
    *out = v;
    return DTR_OK;
}

dtr_status_t dtr__env_bytes(const char *name, const char *func, int64_t dflt, int64_t min,
                            int64_t max, const char *what, int64_t *out) {
    const char *env = getenv(name);
    *out = dflt;
    if (env == NULL || *env == '\0') return DTR_OK;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(env, &end, 10);
    if (end == env || *end != '\0' || errno != 0 || v < min || v > max)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: \"%.40s\" is not %s", name, env,
                          what);
    *out = v;
    return DTR_OK;
}

/* A word at a time (it was FNV-1a's byte at a time: 8 dependent multiplies a value, a
 * quarter of a small call's cost beyond its collective). Each step is a bijection of h for a
 * given v (xor, an odd multiply, an xorshift), so two sequences that differ in one value
 * always hash apart. */
uint64_t dtr__fnv(uint64_t h, int64_t v) {
    h = (h ^ (uint64_t)v) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 32);
}

bool dtr__bytes_overlap(const void *a, size_t na, const void *b, size_t nb) {
    if (na == 0 || nb == 0) return false;
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + nb && y < x + na;
}
