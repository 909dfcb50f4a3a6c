#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "core/common.h"

static const char *const dtr__log_names[DTR_LOG_LAST] = {
    [DTR_LOG_NONE] = "NONE",
    [DTR_LOG_WARN] = "WARN",
    [DTR_LOG_INFO] = "INFO",
    [DTR_LOG_TRACE] = "TRACE",
};

/* Read DTR_DEBUG once; a racing first read by two threads computes the same value. */
static int dtr__level_cached = -1;

dtr_log_level_t dtr__log_level(void) {
    int level = __atomic_load_n(&dtr__level_cached, __ATOMIC_RELAXED);
    if (level >= 0) return (dtr_log_level_t)level;
    level = DTR_LOG_NONE;
    const char *env = getenv("DTR_DEBUG");
    if (env != NULL) {
        for (int i = 0; i < DTR_LOG_LAST; i++)
            if (strcasecmp(env, dtr__log_names[i]) == 0) level = i;
    }
    __atomic_store_n(&dtr__level_cached, level, __ATOMIC_RELAXED);
    return (dtr_log_level_t)level;
}

void dtr__log(dtr_log_level_t level, const char *func, const char *fmt, ...) {
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line so lines from several threads do not interleave. */
    fprintf(stderr, "dtr %s %s: %s\n", dtr__log_names[level], func, line);
}
