/*
 * The JSON list files of the CLI, read by one strict reader of just that (a list of
 * objects of string values, a shape also an array of integers, no other keys; errors name
 * the file, the line and the entry):
 *
 *   --batch FILE of 'dtr plan' and 'dtr run': tensors to redistribute,
 *     [{"shape": "64x64", "dtype": "f32", "from": "S(0),R", "to": "R,S(1)"}, ...]
 *     shape, from and to required, dtype optional (f32), to_dtype optional (the dtype the
 *     tensor arrives in, default its dtype; between meshes only: the library refuses a cast
 *     in a batch within one mesh); a shape also as an array, [64, 64];
 *   --model FILE of 'dtr grad': a model's parameters (f32, sharded on dim 0),
 *     [{"shape": "768x2304", "group": "h.0"}, ...]
 *     shape required, group optional (a parameter without one is a group of its own).
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

/* The longest string value (a ragged shard's sizes make long placement texts). */
#define DTR__VALUE_MAX (1 << 20)

typedef struct {
    const char *cmd, *flag, *path, *text;
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
        return dtr_cli_usage_error(r->cmd, "%s %s: line %d, entry %d: %s", r->flag, r->path,
                                   dtr__line(r), r->entry, msg);
    return dtr_cli_usage_error(r->cmd, "%s %s: line %d: %s", r->flag, r->path, dtr__line(r),
                               msg);
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

/* A JSON array of integers, e.g. [768, 2304], as its text into buf (dtr_shape_parse reads
 * it); its values are checked there. */
static int dtr__array(dtr__reader_t *r, char *buf, size_t len) {
    size_t n = 0;
    for (;;) {
        char c = r->text[r->pos];
        if (c == '\0') return dtr__bad(r, "unterminated array");
        if (!isdigit((unsigned char)c) && !strchr("[], \t\r\n-+", c))
            return dtr__bad(r, "an array of integers holds '%c'", c);
        if (n + 1 >= len) return dtr__bad(r, "array longer than %zu characters", len - 1);
        buf[n++] = c;
        r->pos++;
        if (c == ']') break;
    }
    buf[n] = '\0';
    return DTR_EXIT_OK;
}

/* One object of string values under `keys` (n of them) into val[k] (the "shape" key's also
 * a JSON array of integers, as the JSON output prints shapes); seen[k] says which were
 * given. Unknown or repeated keys are errors naming them. */
static int dtr__object(dtr__reader_t *r, const char *const *keys, int n, char *val,
                       size_t width, bool *seen) {
    char known[128] = "";
    for (int k = 0; k < n; k++) {
        strcat(known, k ? ", " : "");
        strcat(known, keys[k]);
    }
    bool any = false;
    int rc = dtr__expect(r, '{', "'{' (each entry is an object)");
    while (rc == DTR_EXIT_OK && dtr__peek(r) != '}') {
        char key[64];
        if (any) rc = dtr__expect(r, ',', "',' or '}'");
        if (rc == DTR_EXIT_OK) rc = dtr__string(r, key, sizeof key);
        if (rc == DTR_EXIT_OK) rc = dtr__expect(r, ':', "':' after a key");
        if (rc != DTR_EXIT_OK) return rc;
        int k = 0;
        while (k < n && strcmp(key, keys[k]) != 0) k++;
        if (k == n) return dtr__bad(r, "unknown key \"%s\" (%s)", key, known);
        if (seen[k]) return dtr__bad(r, "\"%s\" given twice", key);
        seen[k] = any = true;
        if (strcmp(key, "shape") == 0 && dtr__peek(r) == '[')
            rc = dtr__array(r, val + (size_t)k * width, width);
        else
            rc = dtr__string(r, val + (size_t)k * width, width);
    }
    if (rc != DTR_EXIT_OK) return rc;
    r->pos++;
    return DTR_EXIT_OK;
}

/* A list of entries, each read by fn(r, arg, index); *n counts them. */
typedef int (*dtr__entry_fn)(dtr__reader_t *r, void *arg, int index);

static int dtr__list(dtr__reader_t *r, dtr__entry_fn fn, void *arg, int *n, const char *what) {
    int rc = dtr__expect(r, '[', what);
    while (rc == DTR_EXIT_OK && dtr__peek(r) != ']') {
        if (*n > 0) rc = dtr__expect(r, ',', "',' or ']'");
        if (rc != DTR_EXIT_OK) break;
        r->entry = *n;
        rc = fn(r, arg, *n);
        r->entry = -1;
        if (rc == DTR_EXIT_OK) (*n)++;
    }
    if (rc != DTR_EXIT_OK) return rc;
    r->pos++;
    if (dtr__peek(r) != '\0') return dtr__bad(r, "text after the list");
    if (*n == 0) return dtr__bad(r, "the list is empty");
    return DTR_EXIT_OK;
}

/* The whole file as a NUL-terminated string (malloc'd), or a usage error. */
static int dtr__read_file(const char *cmd, const char *flag, const char *path, char **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return dtr_cli_usage_error(cmd, "%s: cannot open '%s': %s", flag, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return dtr_cli_usage_error(cmd, "%s: '%s' is %s, not a JSON file", flag, path,
                                   S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
    }
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
    if (text == NULL) return dtr_cli_usage_error(cmd, "%s: out of memory", flag);
    text[len] = '\0';
    if (strlen(text) != len) {
        free(text);
        return dtr_cli_usage_error(cmd, "%s %s: a NUL byte in the file", flag, path);
    }
    *out = text;
    return DTR_EXIT_OK;
}

/* Grows an array of `size`-byte items to hold index + 1: 16 at first, then doubling at
 * each power of two. */
static int dtr__grow(dtr__reader_t *r, void **a, int index, size_t size) {
    if (index != 0 && (index < 16 || (index & (index - 1)) != 0)) return DTR_EXIT_OK;
    size_t cap = index == 0 ? 16 : 2 * (size_t)index;
    void *t = realloc(*a, cap * size);
    if (t == NULL) return dtr__bad(r, "out of memory");
    *a = t;
    return DTR_EXIT_OK;
}

/* ---- --batch ---------------------------------------------------------------------------- */

typedef struct {
    const dtr_mesh_t *mesh, *mesh_b; /* the sources', the destinations' */
    dtr_spec_t *src, *dst;
    char (*val)[DTR__VALUE_MAX]; /* [5]: an entry's values, read one entry at a time */
} dtr__batch_arg_t;

/* One entry: {"shape": .., "dtype": .., "from": .., "to": .., "to_dtype": ..} into the two
 * specs. */
static int dtr__batch_entry(dtr__reader_t *r, void *arg, int index) {
    static const char *const keys[5] = {"shape", "dtype", "from", "to", "to_dtype"};
    dtr__batch_arg_t *b = arg;
    char (*val)[DTR__VALUE_MAX] = b->val;
    for (int k = 0; k < 5; k++) val[k][0] = '\0';
    strcpy(val[1], "f32");
    bool seen[5] = {false, false, false, false, false};
    int rc = dtr__grow(r, (void **)&b->src, index, sizeof *b->src);
    if (rc == DTR_EXIT_OK) rc = dtr__grow(r, (void **)&b->dst, index, sizeof *b->dst);
    if (rc == DTR_EXIT_OK) rc = dtr__object(r, keys, 5, val[0], DTR__VALUE_MAX, seen);
    if (rc != DTR_EXIT_OK) return rc;
    for (int k = 0; k < 4; k++)
        if (k != 1 && !seen[k]) return dtr__bad(r, "\"%s\" is missing", keys[k]);
    if (!seen[4]) strcpy(val[4], val[1]);
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim, n1, n2;
    dtr_dtype_t dtype, to_dtype;
    dtr_placement_t a[DTR_MAX_MESH_DIMS], c[DTR_MAX_MESH_DIMS];
    dtr_spec_t *src = &b->src[index], *dst = &b->dst[index];
    const char *which = "shape";
    dtr_status_t st = dtr_shape_parse(val[0], shape, DTR_MAX_TENSOR_DIMS, &ndim);
    if (st == DTR_OK && (which = "dtype", st = dtr_dtype_parse(val[1], &dtype)) == DTR_OK &&
        (which = "to_dtype", st = dtr_dtype_parse(val[4], &to_dtype)) == DTR_OK &&
        (which = "from", st = dtr_placements_parse(val[2], a, DTR_MAX_MESH_DIMS, &n1)) == DTR_OK &&
        (which = "to", st = dtr_placements_parse(val[3], c, DTR_MAX_MESH_DIMS, &n2)) == DTR_OK &&
        (which = "from", st = dtr_spec_init(src, b->mesh, a, n1, shape, ndim, dtype)) == DTR_OK)
        which = "to", st = dtr_spec_init(dst, b->mesh_b, c, n2, shape, ndim, to_dtype);
    if (st != DTR_OK) return dtr__bad(r, "%s: %s", which, dtr_last_error());
    return DTR_EXIT_OK;
}

int dtr_cli_batch_load(const char *cmd, const char *path, const dtr_mesh_t *mesh,
                       const dtr_mesh_t *mesh_b, dtr_spec_t **src, dtr_spec_t **dst, int *n) {
    *src = *dst = NULL;
    *n = 0;
    char *text;
    int rc = dtr__read_file(cmd, "--batch", path, &text);
    if (rc != DTR_EXIT_OK) return rc;
    dtr__reader_t r = {.cmd = cmd, .flag = "--batch", .path = path, .text = text, .entry = -1};
    dtr__batch_arg_t b = {.mesh = mesh, .mesh_b = mesh_b != NULL ? mesh_b : mesh,
                          .val = malloc(5 * sizeof *b.val)};
    rc = b.val != NULL ? dtr__list(&r, dtr__batch_entry, &b, n, "'[' (the file is a JSON list of tensors)")
                       : dtr_cli_usage_error(cmd, "--batch: out of memory");
    free(b.val);
    free(text);
    if (rc != DTR_EXIT_OK) {
        free(b.src);
        free(b.dst);
        *n = 0;
        return rc;
    }
    *src = b.src;
    *dst = b.dst;
    return DTR_EXIT_OK;
}

/* ---- --model ---------------------------------------------------------------------------- */

/* One parameter: {"shape": .., "group": ..}; f32, shard dim 0. */
static int dtr__model_entry(dtr__reader_t *r, void *arg, int index) {
    static const char *const keys[2] = {"shape", "group"};
    dtr_cli_param_t **ps = arg;
    char val[2][256] = {"", ""};
    bool seen[2] = {false, false};
    int rc = dtr__grow(r, (void **)ps, index, sizeof **ps);
    if (rc == DTR_EXIT_OK) rc = dtr__object(r, keys, 2, val[0], sizeof val[0], seen);
    if (rc != DTR_EXIT_OK) return rc;
    if (!seen[0]) return dtr__bad(r, "\"shape\" is missing");
    dtr_cli_param_t *p = &(*ps)[index];
    memset(p, 0, sizeof *p);
    p->desc.dtype = DTR_F32;
    int64_t bytes;
    if (dtr_shape_parse(val[0], p->desc.shape, DTR_MAX_TENSOR_DIMS, &p->desc.ndim) != DTR_OK ||
        dtr_shape_bytes(p->desc.shape, p->desc.ndim, DTR_F32, &bytes) != DTR_OK)
        return dtr__bad(r, "shape: %s", dtr_last_error());
    if (p->desc.ndim == 0)
        return dtr__bad(r, "shape: '%s' is a scalar; a parameter has 1 or more dims", val[0]);
    if (seen[1]) snprintf(p->group, sizeof p->group, "%.63s", val[1]);
    else snprintf(p->group, sizeof p->group, "#%d", index);
    return DTR_EXIT_OK;
}

int dtr_cli_model_load(const char *cmd, const char *path, dtr_cli_param_t **params, int *n) {
    *params = NULL;
    *n = 0;
    char *text;
    int rc = dtr__read_file(cmd, "--model", path, &text);
    if (rc != DTR_EXIT_OK) return rc;
    dtr__reader_t r = {.cmd = cmd, .flag = "--model", .path = path, .text = text, .entry = -1};
    rc = dtr__list(&r, dtr__model_entry, params, n,
                   "'[' (the file is a JSON list of parameters)");
    free(text);
    if (rc != DTR_EXIT_OK) {
        free(*params);
        *params = NULL;
        *n = 0;
    }
    return rc;
}
