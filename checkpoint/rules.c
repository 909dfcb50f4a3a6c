/* Placement rules: which placements (and dtype) each tensor of a checkpoint takes
 * (dtr_checkpoint.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint/internal.h"
#include "numeric/numeric.h"

typedef struct {
    char *match;
    dtr_placement_t pl[DTR_MAX_MESH_DIMS];
    bool cast;
    dtr_dtype_t dtype;
    char text[320]; /* "'glob': S(0),R as bf16" */
} dtr__rule_t;

struct dtr_checkpoint_rules {
    dtr__rule_t *rules;
    int n, ndims;
    char *label; /* the file's path, or "rules" */
};

void dtr_checkpoint_rules_destroy(dtr_checkpoint_rules_t *r) {
    if (r == NULL) return;
    for (int i = 0; i < r->n; i++) free(r->rules[i].match);
    free(r->rules);
    free(r->label);
    free(r);
}

/* Rule i of the list: {"match", "placements"[, "dtype"]}. */
static dtr_status_t dtr__rule(const char *func, const char *label, size_t i, json_t *e, int nd,
                              dtr__rule_t *r) {
    const char *key;
    json_t *v;
    json_object_foreach(e, key, v) {
        if (strcmp(key, "match") != 0 && strcmp(key, "placements") != 0 &&
            strcmp(key, "dtype") != 0)
            return dtr__error(DTR_ERR_PARSE, func, "%s: rule %zu: unknown key \"%s\" (match, "
                                                   "placements, dtype)", label, i, key);
    }
    json_t *m = json_object_get(e, "match"), *p = json_object_get(e, "placements");
    json_t *dt = json_object_get(e, "dtype");
    if (!json_is_string(m) || !json_is_string(p))
        return dtr__error(DTR_ERR_PARSE, func, "%s: rule %zu: needs \"match\" and \"placements\" "
                                               "(strings)", label, i);
    int got = 0;
    if (dtr_placements_parse(json_string_value(p), r->pl, DTR_MAX_MESH_DIMS, &got) != DTR_OK)
        return dtr__error(DTR_ERR_PARSE, func, "%s: rule %zu: placements '%s': %s", label, i,
                          json_string_value(p), dtr__last_detail());
    if (got != nd)
        return dtr__error(DTR_ERR_PARSE, func, "%s: rule %zu: placements '%s': %d for a %d-dim "
                                               "mesh (one per mesh dim)", label, i,
                          json_string_value(p), got, nd);
    for (int d = 0; d < nd; d++)
        if (r->pl[d].kind == DTR_PARTIAL)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: rule %zu: placements '%s': "
                              "Partial: a checkpoint holds whole values, not addends",
                              label, i, json_string_value(p));
    r->cast = dt != NULL;
    if (dt != NULL && (!json_is_string(dt) ||
                       dtr_dtype_parse(json_string_value(dt), &r->dtype) != DTR_OK))
        return dtr__error(DTR_ERR_PARSE, func, "%s: rule %zu: dtype: not a dtype", label, i);
    if ((r->match = strdup(json_string_value(m))) == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%s", label);
    char pl[256] = "";
    dtr_placements_format(r->pl, nd, pl, sizeof pl);
    snprintf(r->text, sizeof r->text, "'%.200s': %s%s%s", r->match, pl, r->cast ? " as " : "",
             r->cast ? dtr_dtype_name(r->dtype) : "");
    return DTR_OK;
}

static dtr_status_t dtr__rules_from(const char *func, const char *label, json_t *root, int nd,
                                    dtr_checkpoint_rules_t **out) {
    size_t count = json_is_array(root) ? json_array_size(root) : 0;
    if (count == 0)
        return dtr__error(DTR_ERR_PARSE, func, "%s: not a non-empty JSON list of rules", label);
    dtr_checkpoint_rules_t *r = calloc(1, sizeof *r);
    if (r == NULL || (r->rules = calloc(count, sizeof *r->rules)) == NULL ||
        (r->label = strdup(label)) == NULL) {
        dtr_checkpoint_rules_destroy(r);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%s", label);
    }
    r->ndims = nd;
    for (size_t i = 0; i < count; i++) {
        dtr_status_t st = dtr__rule(func, label, i, json_array_get(root, i), nd, &r->rules[i]);
        r->n = (int)i + 1;
        if (st != DTR_OK) {
            dtr_checkpoint_rules_destroy(r);
            return st;
        }
    }
    *out = r;
    return DTR_OK;
}

dtr_status_t dtr_checkpoint_rules_load(const char *path, int mesh_ndims,
                                       dtr_checkpoint_rules_t **out) {
    static const char *const F = "dtr_checkpoint_rules_load";
    DTR_CHECK_PTR(path, F);
    DTR_CHECK_PTR(out, F);
    if (mesh_ndims < 1 || mesh_ndims > DTR_MAX_MESH_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "mesh_ndims: %d, not 1..%d", mesh_ndims,
                          DTR_MAX_MESH_DIMS);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return dtr__error(DTR_ERR_IO, F, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return dtr__error(DTR_ERR_IO, F, "%s: %s, not a rules file", path,
                          S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
    }
    json_error_t err;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    fclose(f);
    if (root == NULL)
        return dtr__error(DTR_ERR_PARSE, F, "%s: line %d, column %d: %s", path, err.line,
                          err.column, err.text);
    dtr_status_t st = dtr__rules_from(F, path, root, mesh_ndims, out);
    json_decref(root);
    return st;
}

dtr_status_t dtr_checkpoint_rules_parse(const char *json, int mesh_ndims,
                                        dtr_checkpoint_rules_t **out) {
    static const char *const F = "dtr_checkpoint_rules_parse";
    DTR_CHECK_PTR(json, F);
    DTR_CHECK_PTR(out, F);
    if (mesh_ndims < 1 || mesh_ndims > DTR_MAX_MESH_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "mesh_ndims: %d, not 1..%d", mesh_ndims,
                          DTR_MAX_MESH_DIMS);
    json_error_t err;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        return dtr__error(DTR_ERR_PARSE, F, "rules: line %d, column %d: %s", err.line,
                          err.column, err.text);
    dtr_status_t st = dtr__rules_from(F, "rules", root, mesh_ndims, out);
    json_decref(root);
    return st;
}

const char *dtr_checkpoint_rules_describe(const dtr_checkpoint_rules_t *r, int rule) {
    return r == NULL || rule < 0 || rule >= r->n ? NULL : r->rules[rule].text;
}

dtr_status_t dtr_checkpoint_rules_spec(const dtr_checkpoint_rules_t *r, const dtr_checkpoint_t *ck,
                                       int64_t index, const dtr_mesh_t *mesh, dtr_spec_t *spec,
                                       int *rule) {
    static const char *const F = "dtr_checkpoint_rules_spec";
    DTR_CHECK_PTR(r, F);
    DTR_CHECK_PTR(ck, F);
    DTR_CHECK_PTR(mesh, F);
    DTR_CHECK_PTR(spec, F);
    if (index < 0 || index >= ck->ntensors)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "index: %lld, not 0..%lld",
                          (long long)index, (long long)ck->ntensors - 1);
    if (dtr_mesh_ndims(mesh) != r->ndims)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "mesh: %d dims, the rules are for %d",
                          dtr_mesh_ndims(mesh), r->ndims);
    const dtr__ck_tensor_t *t = &ck->tensors[index];
    int k = 0;
    while (k < r->n && fnmatch(r->rules[k].match, t->name, 0) != 0) k++;
    if (k == r->n)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "%s: tensor '%s' matches no rule",
                          r->label, t->name);
    if (t->dtype == DTR_DTYPE_LAST)
        return dtr__error(DTR_ERR_UNSUPPORTED, F, "tensor '%s': dtype %s: dtr has none", t->name,
                          t->format_dtype);
    if (r->rules[k].cast && r->rules[k].dtype != t->dtype &&
        !dtr__castable(t->dtype, r->rules[k].dtype))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "tensor '%s' (%s) with rule %d (%s): "
                          "casts are between float dtypes only", t->name,
                          dtr_dtype_name(t->dtype), k, r->rules[k].text);
    dtr_spec_t s;
    if (dtr_spec_init(&s, mesh, r->rules[k].pl, r->ndims, t->shape, t->ndim,
                      r->rules[k].cast ? r->rules[k].dtype : t->dtype) != DTR_OK) {
        char shape[160] = "";
        dtr_shape_format(t->shape, t->ndim, shape, sizeof shape);
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "tensor '%s' (%s) with rule %d (%s): %s",
                          t->name, shape, k, r->rules[k].text, dtr__last_detail());
    }
    *spec = s;
    if (rule != NULL) *rule = k;
    return DTR_OK;
}
