/*
 * The --batch FILE of 'dtr plan' and 'dtr run': a JSON list of tensors,
 *
 *   [{"shape": "64x64", "dtype": "f32", "from": "S(0),R", "to": "R,S(1)"}, ...]
 *
 * shape, from and to required, dtype optional (f32). A strict reader of just that: objects
 * of string values, no other keys. Errors name the file, the line and the entry.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

typedef struct {
    const char *cmd, *path, *text;
    size_t pos;
    int entry; /* 0-based; -1 outside the list's entries */
} dtr__reader_t;

static int dtr__line(const dtr__reader_t *r) {
    int line = 1;
    for (size_t k = 0; k < r->pos; k++) line += r->text[k] == '\n';
    return line;
}

static int dtr__bad(const dtr__reader_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int dtr__bad(const dtr__reader_t *r, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->entry >= 0)
        return dtr_cli_usage_error(r->cmd, "--batch %s: line %d, entry %d: %s", r->path,
                                   dtr__line(r), r->entry, msg);
    return dtr_cli_usage_error(r->cmd, "--batch %s: line %d: %s", r->path, dtr__line(r), msg);
}

static char dtr__peek(dtr__reader_t *r) {
    while (isspace((unsigned char)r->text[r->pos])) r->pos++;
    return r->text[r->pos];
}

/* A JSON string without escapes other than \" and \\, into buf. */
static int dtr__string(dtr__reader_t *r, char *buf, size_t len) {
    if (dtr__peek(r) != '"') return dtr__bad(r, "expected a string in double quotes");
    r->pos++;
    size_t n = 0;
    for (;;) {
        char c = r->text[r->pos];
        if (c == '\0' || c == '\n') return dtr__bad(r, "unterminated string");
        r->pos++;
        if (c == '"') break;
        if (c == '\\') {
            c = r->text[r->pos++];
            if (c != '"' && c != '\\') return dtr__bad(r, "unsupported escape \\%c", c);
        }
        if (n + 1 >= len) return dtr__bad(r, "string longer than %zu characters", len - 1);
        buf[n++] = c;
    }
    buf[n] = '\0';
    return DTR_EXIT_OK;
}

static int dtr__expect(dtr__reader_t *r, char c, const char *what) {
    if (dtr__peek(r) != c) return dtr__bad(r, "expected %s", what);
    r->pos++;
    return DTR_EXIT_OK;
}

/* One entry: {"shape": .., "dtype": .., "from": .., "to": ..} into the two specs. */
static int dtr__entry(dtr__reader_t *r, const dtr_mesh_t *mesh, dtr_spec_t *src, dtr_spec_t *dst) {
    static const char *const keys[4] = {"shape", "dtype", "from", "to"};
    char val[4][256] = {"", "f32", "", ""};
    bool seen[4] = {false, false, false, false};
    int rc = dtr__expect(r, '{', "'{' (each entry is an object)");
    while (rc == DTR_EXIT_OK && dtr__peek(r) != '}') {
        char key[64];
        if (seen[0] || seen[1] || seen[2] || seen[3]) rc = dtr__expect(r, ',', "',' or '}'");
        if (rc == DTR_EXIT_OK) rc = dtr__string(r, key, sizeof key);
        if (rc == DTR_EXIT_OK) rc = dtr__expect(r, ':', "':' after a key");
        if (rc != DTR_EXIT_OK) return rc;
        int k = 0;
        while (k < 4 && strcmp(key, keys[k]) != 0) k++;
        if (k == 4) return dtr__bad(r, "unknown key \"%s\" (shape, dtype, from, to)", key);
        if (seen[k]) return dtr__bad(r, "\"%s\" given twice", key);
        seen[k] = true;
        rc = dtr__string(r, val[k], sizeof val[k]);
    }
    if (rc != DTR_EXIT_OK) return rc;
    r->pos++;
    for (int k = 0; k < 4; k++)
        if (k != 1 && !seen[k]) return dtr__bad(r, "\"%s\" is missing", keys[k]);
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim, n1, n2;
    dtr_dtype_t dtype;
    dtr_placement_t a[DTR_MAX_MESH_DIMS], b[DTR_MAX_MESH_DIMS];
    const char *which = "shape";
    dtr_status_t st = dtr_shape_parse(val[0], shape, DTR_MAX_TENSOR_DIMS, &ndim);
    if (st == DTR_OK && (which = "dtype", st = dtr_dtype_parse(val[1], &dtype)) == DTR_OK &&
        (which = "from", st = dtr_placements_parse(val[2], a, DTR_MAX_MESH_DIMS, &n1)) == DTR_OK &&
        (which = "to", st = dtr_placements_parse(val[3], b, DTR_MAX_MESH_DIMS, &n2)) == DTR_OK &&
        (which = "from", st = dtr_spec_init(src, mesh, a, n1, shape, ndim, dtype)) == DTR_OK)
        which = "to", st = dtr_spec_init(dst, mesh, b, n2, shape, ndim, dtype);
    if (st != DTR_OK) return dtr__bad(r, "%s: %s", which, dtr_last_error());
    return DTR_EXIT_OK;
}

static int dtr__list(dtr__reader_t *r, const dtr_mesh_t *mesh, dtr_spec_t **src,
                     dtr_spec_t **dst, int *n) {
    int cap = 0, rc = dtr__expect(r, '[', "'[' (the file is a JSON list of tensors)");
    while (rc == DTR_EXIT_OK && dtr__peek(r) != ']') {
        if (*n > 0) rc = dtr__expect(r, ',', "',' or ']'");
        if (rc != DTR_EXIT_OK) break;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            dtr_spec_t *s = realloc(*src, sizeof *s * (size_t)cap);
            if (s != NULL) *src = s;
            dtr_spec_t *d = realloc(*dst, sizeof *d * (size_t)cap);
            if (d != NULL) *dst = d;
            if (s == NULL || d == NULL) return dtr__bad(r, "out of memory");
        }
        r->entry = *n;
        rc = dtr__entry(r, mesh, &(*src)[*n], &(*dst)[*n]);
        r->entry = -1;
        if (rc == DTR_EXIT_OK) (*n)++;
    }
    if (rc != DTR_EXIT_OK) return rc;
    r->pos++;
    if (dtr__peek(r) != '\0') return dtr__bad(r, "text after the list");
    if (*n == 0) return dtr__bad(r, "the list is empty (a batch needs at least one tensor)");
    return DTR_EXIT_OK;
}

int dtr_cli_batch_load(const char *cmd, const char *path, const dtr_mesh_t *mesh,
                       dtr_spec_t **src, dtr_spec_t **dst, int *n) {
    *src = *dst = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return dtr_cli_usage_error(cmd, "--batch: cannot open '%s'", path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 65536;
            char *t = realloc(text, cap);
            if (t == NULL) break;
            text = t;
        }
        size_t got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    fclose(f);
    if (text == NULL) return dtr_cli_usage_error(cmd, "--batch: out of memory");
    text[len] = '\0';
    if (strlen(text) != len) {
        free(text);
        return dtr_cli_usage_error(cmd, "--batch %s: a NUL byte in the file", path);
    }
    dtr__reader_t r = {.cmd = cmd, .path = path, .text = text, .entry = -1};
    int rc = dtr__list(&r, mesh, src, dst, n);
    free(text);
    if (rc != DTR_EXIT_OK) {
        free(*src);
        free(*dst);
        *src = *dst = NULL;
        *n = 0;
    }
    return rc;
}
