/*
 * Backends by name: one table of the backends a context can be made on from the job's
 * environment ("mpi", "gloo", "nccl", and a caller's own), each row registered by the code
 * that holds the backend. The built-in rows register themselves when their object is loaded
 * (a constructor in mpi.c, gloo.c, nccl.c), so a backend in a companion library
 * (libdtr_gloo.so, libdtr_nccl.so) is in the table once that library is loaded, and a name
 * not in the table is looked for as libdtr_NAME.so.MAJOR (dlopen) before it is refused.
 * Memory spaces by name (memory.h) have a table of their own, filled the same way.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/version.h"
#include "runtime/context.h"

enum { DTR__MAX_BACKENDS = 16 };

/* The names of one table's rows (its rows are an array beside it, at the same index). */
typedef struct {
    char names[DTR__MAX_BACKENDS][DTR_BACKEND_NAME_MAX + 1];
    int count;
} dtr__names_t;

/* Both tables, under one lock. */
static pthread_mutex_t dtr__registry_lock = PTHREAD_MUTEX_INITIALIZER;
static dtr_backend_info_t dtr__registry[DTR__MAX_BACKENDS];
static dtr__names_t dtr__backends;
static dtr_memory_info_t dtr__spaces[DTR__MAX_BACKENDS];
static dtr__names_t dtr__space_names;

/* A name is 1..DTR_BACKEND_NAME_MAX of [a-z0-9_]: it becomes part of a file name. */
static bool dtr__name_ok(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > DTR_BACKEND_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

/* The row of `name` in t, or -1. Under the lock. */
static int dtr__find_locked(const dtr__names_t *t, const char *name) {
    for (int i = 0; i < t->count; i++)
        if (strcmp(t->names[i], name) == 0) return i;
    return -1;
}

/* The row for `name` in t: its own, or a new one named so (-1 where the table is full).
 * Under the lock. */
static int dtr__row_locked(dtr__names_t *t, const char *name) {
    int at = dtr__find_locked(t, name);
    if (at >= 0 || t->count == DTR__MAX_BACKENDS) return at;
    at = t->count++;
    snprintf(t->names[at], sizeof t->names[at], "%s", name);
    return at;
}

/* A row's name checked: INVALID_ARGUMENT naming it where it is not one. */
static dtr_status_t dtr__check_name(const char *func, const char *name) {
    if (!dtr__name_ok(name))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "info->name: '%.40s' is not 1 to %d of a-z, 0-9 and _", name,
                          DTR_BACKEND_NAME_MAX);
    return DTR_OK;
}

static dtr_status_t dtr__table_full(const char *func, const char *name, const char *rows) {
    return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "info->name '%s': the table is full (%d %s)",
                      name, DTR__MAX_BACKENDS, rows);
}

dtr_status_t dtr_backend_register(const dtr_backend_info_t *info) {
    if (info == NULL || info->name == NULL || info->create_env == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "%s: must not be NULL",
                          info == NULL ? "info" : info->name == NULL ? "info->name"
                                                                      : "info->create_env");
    dtr_status_t st = dtr__check_name(__func__, info->name);
    if (st != DTR_OK) return st;
    pthread_mutex_lock(&dtr__registry_lock);
    int at = dtr__row_locked(&dtr__backends, info->name);
    if (at < 0) {
        st = dtr__table_full(__func__, info->name, "backends");
    } else {
        dtr__registry[at] = *info;
        dtr__registry[at].name = dtr__backends.names[at];
        if (dtr__registry[at].memory == NULL) dtr__registry[at].memory = "host";
        if (dtr__registry[at].launch == NULL) dtr__registry[at].launch = "";
    }
    pthread_mutex_unlock(&dtr__registry_lock);
    return st;
}

dtr_status_t dtr_memory_register(const dtr_memory_info_t *info) {
    if (info == NULL || info->name == NULL || info->ops == NULL || info->create == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "%s: must not be NULL",
                          info == NULL         ? "info"
                          : info->name == NULL ? "info->name"
                          : info->ops == NULL  ? "info->ops"
                                               : "info->create");
    dtr_status_t st = dtr__check_name(__func__, info->name);
    if (st != DTR_OK) return st;
    if (strcmp(info->name, "host") == 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "info->name: 'host' is every context's own memory, not a row");
    pthread_mutex_lock(&dtr__registry_lock);
    int at = dtr__row_locked(&dtr__space_names, info->name);
    if (at < 0) {
        st = dtr__table_full(__func__, info->name, "spaces");
    } else {
        dtr__spaces[at] = *info;
        dtr__spaces[at].name = dtr__space_names.names[at];
    }
    pthread_mutex_unlock(&dtr__registry_lock);
    return st;
}

/* Copies row `name` of table t (rows of `size` bytes) into *out; false where there is none. */
static bool dtr__lookup(const dtr__names_t *t, const void *rows, size_t size, const char *name,
                        void *out) {
    pthread_mutex_lock(&dtr__registry_lock);
    int at = dtr__find_locked(t, name);
    if (at >= 0) memcpy(out, (const char *)rows + (size_t)at * size, size);
    pthread_mutex_unlock(&dtr__registry_lock);
    return at >= 0;
}

/* t's names, comma-separated, into buf ("none" where it has none). */
static void dtr__names(const dtr__names_t *t, char *buf, size_t cap) {
    size_t pos = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&dtr__registry_lock);
    for (int i = 0; i < t->count && pos < cap; i++) {
        int n = snprintf(buf + pos, cap - pos, "%s%s", i ? ", " : "", t->names[i]);
        pos += n > 0 ? (size_t)n : 0;
    }
    pthread_mutex_unlock(&dtr__registry_lock);
    if (buf[0] == '\0') snprintf(buf, cap, "none");
}

/* dlopen of file: first beside the object that holds this code (the installed lib/ of
 * libdtr.so, which a caller's RUNPATH does not cover for a dlopen made from libdtr.so),
 * then through the loader's search path. NULL with dlerror's text in why. */
static void *dtr__open_companion(const char *file, char *why, size_t cap) {
    Dl_info self;
    if (dladdr((void *)dtr__open_companion, &self) != 0 && self.dli_fname != NULL) {
        const char *slash = strrchr(self.dli_fname, '/');
        if (slash != NULL) {
            char path[4096];
            snprintf(path, sizeof path, "%.*s/%s", (int)(slash - self.dli_fname),
                     self.dli_fname, file);
            void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
            if (lib != NULL) return lib;
        }
    }
    void *lib = dlopen(file, RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(why, cap, "%s", e != NULL ? e : "not found");
    }
    return lib;
}

/* Row `name` of table t into *out, loading libdtr_NAME.so.MAJOR where it is not there yet
 * (its code registers it as it loads); `rows` names them in errors, `func` is the caller. */
static dtr_status_t dtr__find(const char *func, const dtr__names_t *t, const void *rows,
                              size_t size, const char *what, const char *name, void *out) {
    if (name == NULL || out == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: must not be NULL",
                          name == NULL ? "name" : "out");
    if (!dtr__name_ok(name))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "name: '%.40s' is not a %s name (1 to %d of a-z, 0-9 and _)", name,
                          what, DTR_BACKEND_NAME_MAX);
    if (dtr__lookup(t, rows, size, name, out)) return DTR_OK;
    char file[64];
    snprintf(file, sizeof file, "libdtr_%s.so.%d", name, dtr_version() / 10000);
    char why[512];
    snprintf(why, sizeof why, "loaded, but registered no such %s", what);
    void *lib = dtr__open_companion(file, why, sizeof why);
    if (lib != NULL && dtr__lookup(t, rows, size, name, out)) return DTR_OK;
    char known[256];
    dtr__names(t, known, sizeof known);
    return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "name: no %s '%s' (registered: %s; %s: %s)",
                      what, name, known, file, why);
}

dtr_status_t dtr_backend_find(const char *name, dtr_backend_info_t *out) {
    return dtr__find(__func__, &dtr__backends, dtr__registry, sizeof *dtr__registry, "backend",
                     name, out);
}

dtr_status_t dtr_memory_find(const char *name, dtr_memory_info_t *out) {
    if (name != NULL && strcmp(name, "host") == 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "name: 'host' is every context's own memory, not a space to set");
    return dtr__find(__func__, &dtr__space_names, dtr__spaces, sizeof *dtr__spaces,
                     "memory space", name, out);
}

dtr_status_t dtr_context_create_named(const char *name, dtr_context_t **out) {
    if (out == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "out: must not be NULL");
    dtr_backend_info_t row;
    dtr_status_t st = dtr_backend_find(name, &row);
    if (st != DTR_OK) return st;
    dtr_context_t *ctx = NULL;
    st = row.create_env(&ctx);
    if (st == DTR_OK) *out = ctx;
    return st;
}
