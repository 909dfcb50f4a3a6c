/* What the fuzz harnesses share: a failed property aborts (libFuzzer records the input). */
#ifndef DTR_FUZZ_UTIL_H
#define DTR_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"

#define FUZZ_ASSERT(cond, ...)                                                           \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz property failed at %s:%d: ", __FILE__, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                                                \
            fprintf(stderr, "\n(last dtr error: %s)\n", dtr_last_error());              \
            abort();                                                                     \
        }                                                                                \
    } while (0)

/* A failing call: a known negative code and a one-line detail naming the function. */
static inline void fuzz_check_error(dtr_status_t st) {
    FUZZ_ASSERT(st < 0 && strcmp(dtr_status_name(st), "DTR_UNKNOWN_STATUS") != 0,
                "unknown status %d", (int)st);
    const char *e = dtr_last_error();
    FUZZ_ASSERT(e[0] != '\0' && strchr(e, '\n') == NULL && strstr(e, ": ") != NULL,
                "error detail '%s'", e);
}

/* Reads the input a byte at a time; 0 once it runs out. */
typedef struct {
    const uint8_t *p;
    size_t n;
} fuzz_bytes_t;

static inline unsigned fuzz_byte(fuzz_bytes_t *b) {
    if (b->n == 0) return 0;
    b->n--;
    return *b->p++;
}

#endif
