/* The bad-input table (tests/data/bad_inputs.txt) through the library, in the order the CLI
 * makes its calls: each row must fail at its step with the listed status and a message
 * containing the listed text, and no output of the failing call may be written. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"

#define FIELDS 7

static char *trim(char *s) {
    while (*s == ' ') s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\n')) *--end = '\0';
    return s;
}

static int split_row(char *line, char **f) {
    int n = 0;
    char *p = line;
    while (n < FIELDS) {
        char *bar = strstr(p, " | ");
        f[n++] = p;
        if (bar == NULL) break;
        *bar = '\0';
        p = bar + 3;
    }
    for (int i = 0; i < n; i++) {
        f[i] = trim(f[i]);
        if (strcmp(f[i], "<empty>") == 0) f[i] = "";
    }
    return n;
}

static int parse_ranks(const char *text, int *out) {
    int n = 0;
    for (const char *p = text; *p;) {
        out[n++] = (int)strtol(p, (char **)&p, 10);
        if (*p == ',') p++;
    }
    return n;
}

/* Runs the row's calls; returns the first failing status (DTR_OK if none failed). */
static dtr_status_t run_row(char **f) {
    int ranks[64];
    int nranks = 0;
    if (strcmp(f[1], "-") != 0) nranks = parse_ranks(f[1], ranks);
    dtr_mesh_t *const sentinel_mesh = (dtr_mesh_t *)(uintptr_t)0xdead;
    dtr_mesh_t *mesh = sentinel_mesh;
    dtr_status_t st = dtr_mesh_parse(f[0], nranks ? ranks : NULL, nranks, &mesh);
    if (st != DTR_OK) {
        cr_expect_eq(mesh, sentinel_mesh, "mesh written on error");
        return st;
    }
    int64_t shape[DTR_MAX_TENSOR_DIMS], shape_keep[DTR_MAX_TENSOR_DIMS];
    memset(shape, 0x77, sizeof shape);
    memcpy(shape_keep, shape, sizeof shape);
    dtr_placement_t p[DTR_MAX_MESH_DIMS], p_keep[DTR_MAX_MESH_DIMS];
    memset(p, 0x66, sizeof p);
    memcpy(p_keep, p, sizeof p);
    int ndim = -3, np = -3;
    dtr_dtype_t dtype = DTR_DTYPE_LAST;
    dtr_spec_t spec, spec_keep;
    memset(&spec, 0x55, sizeof spec);
    spec_keep = spec;

    if ((st = dtr_shape_parse(f[2], shape, DTR_MAX_TENSOR_DIMS, &ndim)) != DTR_OK) {
        cr_expect(ndim == -3 && memcmp(shape, shape_keep, sizeof shape) == 0,
                  "shape written on error");
    } else if ((st = dtr_placements_parse(f[3], p, DTR_MAX_MESH_DIMS, &np)) != DTR_OK) {
        cr_expect(np == -3 && memcmp(p, p_keep, sizeof p) == 0, "placements written on error");
    } else if ((st = dtr_dtype_parse(f[4], &dtype)) != DTR_OK) {
        cr_expect_eq(dtype, DTR_DTYPE_LAST, "dtype written on error");
    } else if ((st = dtr_spec_init(&spec, mesh, p, np, shape, ndim, dtype)) != DTR_OK) {
        cr_expect_eq(memcmp(&spec, &spec_keep, sizeof spec), 0, "spec written on error");
    }
    dtr_mesh_destroy(mesh);
    return st;
}

Test(bad_inputs, every_row_fails_with_its_status_and_message) {
    const char *path = getenv("DTR_BAD_INPUTS");
    if (path == NULL) path = "tests/data/bad_inputs.txt";
    FILE *in = fopen(path, "r");
    cr_assert_not_null(in, "cannot open %s", path);
    char line[1024];
    int rows = 0, lineno = 0;
    while (fgets(line, sizeof line, in) != NULL) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        char *f[FIELDS];
        cr_assert_eq(split_row(line, f), FIELDS, "%s:%d: expected %d fields", path, lineno,
                     FIELDS);
        rows++;
        dtr_status_t st = run_row(f);
        cr_expect_str_eq(dtr_status_name(st), f[5], "%s:%d (mesh \"%s\" shape \"%s\" placements "
                         "\"%s\" dtype \"%s\")",
                         path, lineno, f[0], f[2], f[3], f[4]);
        if (st != DTR_OK)
            cr_expect_not_null(strstr(dtr_last_error(), f[6]),
                               "%s:%d: message \"%s\" lacks \"%s\"", path, lineno,
                               dtr_last_error(), f[6]);
    }
    fclose(in);
    cr_expect_geq(rows, 25, "the table must hold at least 25 bad inputs");
    cr_log_info("%d bad inputs checked", rows);
}
