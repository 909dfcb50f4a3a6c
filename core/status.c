#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"

/* Long enough for a function name, an argument path and an echoed piece of bad text. */
#define DTR__ERROR_LEN 512

static _Thread_local char dtr__last_error_buf[DTR__ERROR_LEN];
static _Thread_local dtr_status_t dtr__last_status_val = DTR_OK;

const char *dtr_status_name(dtr_status_t status) {
    switch (status) {
#define DTR__STATUS_NAME(name, value, cls, msg) \
    case name:                             \
        return #name;
        DTR_STATUS_MAP(DTR__STATUS_NAME)
#undef DTR__STATUS_NAME
    }
    return "DTR_UNKNOWN_STATUS";
}

const char *dtr_status_string(dtr_status_t status) {
    switch (status) {
#define DTR__STATUS_MSG(name, value, cls, msg) \
    case name:                            \
        return msg;
        DTR_STATUS_MAP(DTR__STATUS_MSG)
#undef DTR__STATUS_MSG
    }
    return "unknown status";
}

dtr_error_class_t dtr_status_class(dtr_status_t status) {
    switch (status) {
#define DTR__STATUS_CLASS(name, value, cls, msg) \
    case name:                                   \
        return cls;
        DTR_STATUS_MAP(DTR__STATUS_CLASS)
#undef DTR__STATUS_CLASS
    }
    return DTR_CLASS_RUN;
}

static const struct {
    const char *name, *python;
    int exit_code;
} dtr__classes[DTR_CLASS_LAST] = {
#define DTR__CLASS_ROW(cls, code, py, what) [cls] = {#cls, py, code},
    DTR_ERROR_CLASS_MAP(DTR__CLASS_ROW)
#undef DTR__CLASS_ROW
};

const char *dtr_error_class_name(dtr_error_class_t cls) {
    return (unsigned)cls < DTR_CLASS_LAST ? dtr__classes[cls].name : NULL;
}

int dtr_error_class_exit_code(dtr_error_class_t cls) {
    return (unsigned)cls < DTR_CLASS_LAST ? dtr__classes[cls].exit_code : 1;
}

const char *dtr_error_class_python(dtr_error_class_t cls) {
    return (unsigned)cls < DTR_CLASS_LAST ? dtr__classes[cls].python : "Error";
}

const char *dtr_last_error(void) { return dtr__last_error_buf; }

dtr_status_t dtr_last_status(void) { return dtr__last_status_val; }

/* Formats into a local buffer first: callers may pass dtr_last_error() itself as an
 * argument, to wrap the detail of a failure they propagate. */
dtr_status_t dtr__error(dtr_status_t status, const char *func, const char *fmt, ...) {
    char text[sizeof dtr__last_error_buf];
    int n = snprintf(text, sizeof text, "%s: ", func);
    if (n < 0 || (size_t)n >= sizeof text) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + n, sizeof text - (size_t)n, fmt, ap);
    va_end(ap);
    /* One line, whatever the quoted input held: control characters become '?'. */
    for (char *c = text; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    memcpy(dtr__last_error_buf, text, sizeof text);
    dtr__last_status_val = status;
    DTR_INFO("%s (%s)", dtr__last_error_buf, dtr_status_name(status));
    return status;
}

const char *dtr__last_detail(void) {
    const char *rest = dtr__last_error_buf;
    const char *colon = strstr(rest, ": ");
    if (strncmp(rest, "dtr_", 4) == 0 && colon != NULL) rest = colon + 2;
    return rest;
}

dtr_status_t dtr__error_as(dtr_status_t status, const char *func) {
    return dtr__error(status, func, "%s", dtr__last_detail());
}
