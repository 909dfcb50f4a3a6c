#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"

const char *dtr__skip_space(const char *p) {
    while (*p != '\0' && isspace((unsigned char)*p)) p++;
    return p;
}

int dtr__scan_i64(const char **cursor, int64_t *out) {
    const char *p = *cursor;
    int negative = 0;
    if (*p == '+' || *p == '-') negative = (*p++ == '-');
    if (!isdigit((unsigned char)*p)) return -1;
    /* Accumulate negatively so INT64_MIN parses too. */
    int64_t value = 0;
    for (; isdigit((unsigned char)*p); p++) {
        int digit = *p - '0';
        if (dtr__mul_overflow(value, 10, &value) || dtr__add_overflow(value, -digit, &value))
            return -2;
    }
    if (!negative) {
        if (value == INT64_MIN) return -2;
        value = -value;
    }
    *out = value;
    *cursor = p;
    return 0;
}

static int dtr__is_word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

int dtr__scan_word(const char **cursor, const char *word) {
    const char *p = *cursor;
    for (; *word != '\0'; word++, p++)
        if (tolower((unsigned char)*p) != tolower((unsigned char)*word)) return 0;
    if (dtr__is_word_char(*p)) return 0;
    *cursor = p;
    return 1;
}

dtr_status_t dtr__buf_printf(char *buf, size_t len, size_t *pos, const char *func,
                             const char *fmt, ...) {
    size_t at = *pos < len ? *pos : len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(len > 0 ? buf + at : NULL, len - at, fmt, ap);
    va_end(ap);
    if (n < 0) return dtr__error(DTR_ERR_INTERNAL, func, "formatting failed");
    *pos += (size_t)n;
    if (*pos >= len)
        return dtr__error(DTR_ERR_BUFFER_TOO_SMALL, func,
                          "len: %zu bytes given, %zu needed", len, *pos + 1);
    return DTR_OK;
}

dtr_status_t dtr__copy_out(char *buf, size_t len, const char *text, size_t n, const char *func) {
    if (n >= len)
        return dtr__error(DTR_ERR_BUFFER_TOO_SMALL, func, "len: %zu bytes given, %zu needed",
                          len, n + 1);
    memcpy(buf, text, n);
    buf[n] = '\0';
    return DTR_OK;
}
