/*
 * libFuzzer harness for the text parsers: the input, as text, through every parser. A parse
 * that succeeds must format back to text that parses to the same value; one that fails must
 * return a known error code with a detail, and leave its outputs as they were.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "fuzz/fuzz_util.h"

static void placements(const char *text) {
    dtr_placement_t pl[DTR_MAX_MESH_DIMS], back[DTR_MAX_MESH_DIMS];
    memset(pl, 0xab, sizeof pl);
    int n = -7, m = -7;
    dtr_status_t st = dtr_placements_parse(text, pl, DTR_MAX_MESH_DIMS, &n);
    if (st != DTR_OK) {
        FUZZ_ASSERT(n == -7, "placements: count written on error");
        fuzz_check_error(st);
        return;
    }
    FUZZ_ASSERT(n >= 1 && n <= DTR_MAX_MESH_DIMS, "placements: count %d", n);
    /* (a ragged shard's text has no fixed length) */
    int64_t len = dtr_placements_text_len(pl, n);
    FUZZ_ASSERT(len > 0, "placements: text_len %lld", (long long)len);
    char *buf = malloc((size_t)len + 1);
    FUZZ_ASSERT(buf != NULL, "placements: out of memory");
    FUZZ_ASSERT(dtr_placements_format(pl, n, buf, (size_t)len + 1) == DTR_OK, "placements: format");
    FUZZ_ASSERT(dtr_placements_parse(buf, back, DTR_MAX_MESH_DIMS, &m) == DTR_OK && m == n,
                "placements: '%s' does not parse back", buf);
    for (int i = 0; i < n; i++)
        FUZZ_ASSERT(dtr_placement_equal(pl[i], back[i]), "placements: '%s' item %d", buf, i);
    free(buf);
    /* one placement alone */
    dtr_placement_t one;
    if (dtr_placement_parse(text, &one) == DTR_OK)
        FUZZ_ASSERT(n == 1 && dtr_placement_equal(one, pl[0]), "placement vs placements");
}

static void shape(const char *text) {
    int64_t sh[DTR_MAX_TENSOR_DIMS], back[DTR_MAX_TENSOR_DIMS];
    memset(sh, 0x5a, sizeof sh);
    int n = -7, m = -7;
    dtr_status_t st = dtr_shape_parse(text, sh, DTR_MAX_TENSOR_DIMS, &n);
    if (st != DTR_OK) {
        FUZZ_ASSERT(n == -7, "shape: ndim written on error");
        fuzz_check_error(st);
        return;
    }
    FUZZ_ASSERT(n >= 0 && n <= DTR_MAX_TENSOR_DIMS, "shape: ndim %d", n);
    char buf[512];
    FUZZ_ASSERT(dtr_shape_format(sh, n, buf, sizeof buf) == DTR_OK, "shape: format");
    FUZZ_ASSERT(dtr_shape_parse(buf, back, DTR_MAX_TENSOR_DIMS, &m) == DTR_OK && m == n,
                "shape: '%s' does not parse back", buf);
    for (int i = 0; i < n; i++) FUZZ_ASSERT(sh[i] == back[i] && sh[i] >= 0, "shape: dim %d", i);
}

static void mesh(const char *text) {
    dtr_mesh_t *const sentinel = (dtr_mesh_t *)(uintptr_t)0x5e;
    dtr_mesh_t *m = sentinel, *back = NULL;
    dtr_status_t st = dtr_mesh_parse(text, NULL, 0, &m);
    if (st != DTR_OK) {
        FUZZ_ASSERT(m == sentinel, "mesh: written on error");
        fuzz_check_error(st);
        return;
    }
    char buf[512];
    FUZZ_ASSERT(dtr_mesh_format(m, buf, sizeof buf) == DTR_OK, "mesh: format");
    FUZZ_ASSERT(dtr_mesh_parse(buf, NULL, 0, &back) == DTR_OK && dtr_mesh_equal(m, back),
                "mesh: '%s' does not parse back", buf);
    dtr_mesh_destroy(back);
    dtr_mesh_destroy(m);
}

static void names(const char *text) {
    dtr_dtype_t dt = (dtr_dtype_t)-5;
    if (dtr_dtype_parse(text, &dt) == DTR_OK) {
        dtr_dtype_t again;
        FUZZ_ASSERT(dtr_dtype_parse(dtr_dtype_name(dt), &again) == DTR_OK && again == dt,
                    "dtype round trip");
    } else {
        FUZZ_ASSERT(dt == (dtr_dtype_t)-5, "dtype: written on error");
    }
    dtr_reduce_op_t op = (dtr_reduce_op_t)-5;
    if (dtr_reduce_op_parse(text, &op) == DTR_OK) {
        dtr_reduce_op_t again;
        FUZZ_ASSERT(dtr_reduce_op_parse(dtr_reduce_op_name(op), &again) == DTR_OK && again == op,
                    "reduce op round trip");
    } else {
        FUZZ_ASSERT(op == (dtr_reduce_op_t)-5, "reduce op: written on error");
    }
    dtr_strategy_t s = (dtr_strategy_t)-5;
    if (dtr_strategy_parse(text, &s) == DTR_OK) {
        dtr_strategy_t again;
        FUZZ_ASSERT(dtr_strategy_parse(dtr_strategy_name(s), &again) == DTR_OK && again == s,
                    "strategy round trip");
    } else {
        FUZZ_ASSERT(s == (dtr_strategy_t)-5, "strategy: written on error");
    }
    /* cost parameters: the text split at ';' into alpha, bandwidth and local lists */
    char copy[600];
    snprintf(copy, sizeof copy, "%s", text);
    const char *part[3] = {copy, NULL, NULL};
    char *at = copy;
    for (int k = 1; k < 3 && (at = strchr(at, ';')) != NULL; k++) {
        *at++ = '\0';
        part[k] = at;
    }
    dtr_cost_model_t cm, keep;
    dtr_cost_model_default(&cm);
    keep = cm;
    if (dtr_cost_model_set(&cm, part[0], part[1], part[2]) != DTR_OK)
        FUZZ_ASSERT(memcmp(&cm, &keep, sizeof cm) == 0, "cost model written on error");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 512) return 0;
    char text[513];
    memcpy(text, data, size);
    text[size] = '\0';
    placements(text);
    shape(text);
    mesh(text);
    names(text);
    return 0;
}
