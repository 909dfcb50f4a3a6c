/*
 * Backends by name: one table of the backends a context can be made on from the job's
 * environment ("mpi", "gloo", "nccl", and a caller's own), each row registered by the code
 * that holds the backend. The built-in rows register themselves when their object is loaded
 * (a constructor in mpi.c, gloo.c, nccl.c), so a backend in a companion library
 * (libdtr_gloo.so, libdtr_nccl.so) is in the table once that library is loaded, and a name
 * not in the table is looked for as libdtr_NAME.so.MAJOR (dlopen) before it is refused.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/version.h"
#include "runtime/context.h"

enum { DTR__MAX_BACKENDS = 16 };

static pthread_mutex_t dtr__registry_lock = PTHREAD_MUTEX_INITIALIZER;
static dtr_backend_info_t dtr__registry[DTR__MAX_BACKENDS];
static char dtr__registry_names[DTR__MAX_BACKENDS][DTR_BACKEND_NAME_MAX + 1];
static int dtr__registry_count;

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

/* The row of `name`, or -1. Under the lock. */
static int dtr__find_locked(const char *name) {
    for (int i = 0; i < dtr__registry_count; i++)
        if (strcmp(dtr__registry_names[i], name) == 0) return i;
    return -1;
}

dtr_status_t dtr_backend_register(const dtr_backend_info_t *info) {
    if (info == NULL || info->name == NULL || info->create_env == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "%s: must not be NULL",
                          info == NULL ? "info" : info->name == NULL ? "info->name"
                                                                      : "info->create_env");
    if (!dtr__name_ok(info->name))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "info->name: '%.40s' is not 1 to %d of a-z, 0-9 and _", info->name,
                          DTR_BACKEND_NAME_MAX);
    dtr_status_t st = DTR_OK;
    pthread_mutex_lock(&dtr__registry_lock);
    int at = dtr__find_locked(info->name);
    if (at < 0 && dtr__registry_count == DTR__MAX_BACKENDS)
        st = dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "info->name '%s': the table is "
                        "full (%d backends)", info->name, DTR__MAX_BACKENDS);
    if (st == DTR_OK) {
        if (at < 0) at = dtr__registry_count++;
        snprintf(dtr__registry_names[at], sizeof dtr__registry_names[at], "%s", info->name);
        dtr__registry[at] = *info;
        dtr__registry[at].name = dtr__registry_names[at];
        if (dtr__registry[at].memory == NULL) dtr__registry[at].memory = "host";
        if (dtr__registry[at].launch == NULL) dtr__registry[at].launch = "";
    }
    pthread_mutex_unlock(&dtr__registry_lock);
    return st;
}

/* Copies the row of name into *out; false where it is not registered. */
static bool dtr__lookup(const char *name, dtr_backend_info_t *out) {
    pthread_mutex_lock(&dtr__registry_lock);
    int at = dtr__find_locked(name);
    if (at >= 0) *out = dtr__registry[at];
    pthread_mutex_unlock(&dtr__registry_lock);
    return at >= 0;
}

/* The registered names, comma-separated, into buf. */
static void dtr__names(char *buf, size_t cap) {
    size_t pos = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&dtr__registry_lock);
    for (int i = 0; i < dtr__registry_count && pos < cap; i++) {
        int n = snprintf(buf + pos, cap - pos, "%s%s", i ? ", " : "", dtr__registry_names[i]);
        pos += n > 0 ? (size_t)n : 0;
    }
    pthread_mutex_unlock(&dtr__registry_lock);
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

dtr_status_t dtr_backend_find(const char *name, dtr_backend_info_t *out) {
    if (name == NULL || out == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "%s: must not be NULL",
                          name == NULL ? "name" : "out");
    if (!dtr__name_ok(name))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "name: '%.40s' is not a backend name (1 to %d of a-z, 0-9 and _)",
                          name, DTR_BACKEND_NAME_MAX);
    dtr_backend_info_t row;
    if (dtr__lookup(name, &row)) {
        *out = row;
        return DTR_OK;
    }
    /* not loaded yet: its companion library registers it as it loads */
    char file[64];
    snprintf(file, sizeof file, "libdtr_%s.so.%d", name, dtr_version() / 10000);
    char why[512] = "loaded, but registered no such backend";
    void *lib = dtr__open_companion(file, why, sizeof why);
    if (lib != NULL && dtr__lookup(name, &row)) {
        *out = row;
        return DTR_OK;
    }
    char known[256];
    dtr__names(known, sizeof known);
    return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                      "name: no backend '%s' (registered: %s; %s: %s)", name,
                      known[0] ? known : "none", file, why);
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
