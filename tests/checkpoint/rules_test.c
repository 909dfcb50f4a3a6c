/* Placement rules (dtr_checkpoint_rules_*): first match wins, casts, and the refusals, each
 * naming the rule or the tensor; on the Python-written fixture. */
#include "tests/checkpoint/fixture.h"

#include "checkpoint/dtr_checkpoint.h"
#include "dtr.h"

static dtr_checkpoint_t *fixture(void) {
    dtr_checkpoint_t *ck = NULL;
    cr_assert_eq(dtr_checkpoint_open("tests/checkpoint/data/py_model.safetensors", &ck), DTR_OK,
                 "%s", dtr_last_error());
    return ck;
}

Test(rules, first_match_wins_and_casts) {
    dtr_checkpoint_t *ck = fixture();
    dtr_mesh_t *mesh;
    dtr_mesh_parse("2x2", NULL, 0, &mesh);
    dtr_checkpoint_rules_t *r = NULL;
    cr_assert_eq(dtr_checkpoint_rules_parse(
                     "[{\"match\": \"[we]\", \"placements\": \"S(0),S(1)\", \"dtype\": \"f64\"},"
                     " {\"match\": \"w\", \"placements\": \"R,R\"},"
                     " {\"match\": \"*\", \"placements\": \"R,S(0)[0]\"}]", 2, &r),
                 DTR_OK, "%s", dtr_last_error());
    cr_expect_str_eq(dtr_checkpoint_rules_describe(r, 0), "'[we]': S(0),S(1) as f64");
    cr_expect(dtr_checkpoint_rules_describe(r, 3) == NULL);
    static const struct {
        const char *name;
        int rule;
        dtr_dtype_t dtype;
    } want[] = {{"w", 0, DTR_F64}, {"b", 2, DTR_BF16}};
    for (int i = 0; i < 2; i++) {
        int64_t at;
        dtr_checkpoint_find(ck, want[i].name, &at);
        dtr_spec_t spec;
        int k = -1;
        cr_assert_eq(dtr_checkpoint_rules_spec(r, ck, at, mesh, &spec, &k), DTR_OK, "%s",
                     dtr_last_error());
        cr_expect(k == want[i].rule && spec.dtype == want[i].dtype, "%s: rule %d", want[i].name, k);
    }
    /* the i64 tensor matches rule 0, whose cast to f64 it cannot take: refused here, before
     * anything is read or written */
    int64_t e;
    dtr_checkpoint_find(ck, "e", &e);
    dtr_spec_t spec;
    cr_expect_eq(dtr_checkpoint_rules_spec(r, ck, e, mesh, &spec, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "tensor 'e' (i64) with rule 0 ('[we]': S(0),S(1) as f64): "
                                       "casts are between float dtypes only"),
              "%s", dtr_last_error());
    /* the scalar cannot take rule 2's S(0): named with its shape and the rule */
    int64_t s;
    dtr_checkpoint_find(ck, "s", &s);
    cr_expect_eq(dtr_checkpoint_rules_spec(r, ck, s, mesh, &spec, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "tensor 's' (scalar) with rule 2 ('*': R,S(0)): "),
              "%s", dtr_last_error());
    dtr_mesh_t *one;
    dtr_mesh_parse("4", NULL, 0, &one);
    cr_expect_eq(dtr_checkpoint_rules_spec(r, ck, 0, one, &spec, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "mesh: 1 dims, the rules are for 2"), "%s", dtr_last_error());
    dtr_checkpoint_rules_destroy(r);
    cr_assert_eq(dtr_checkpoint_rules_parse("[{\"match\": \"w\", \"placements\": \"R,R\"}]", 2, &r),
                 DTR_OK);
    cr_expect_eq(dtr_checkpoint_rules_spec(r, ck, s, mesh, &spec, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "rules: tensor 's' matches no rule"), "%s", dtr_last_error());
    dtr_checkpoint_rules_destroy(r);
    /* a Partial rule never fits a checkpoint: refused as the rules are read */
    r = (dtr_checkpoint_rules_t *)1;
    cr_expect_eq(dtr_checkpoint_rules_parse("[{\"match\": \"*\", \"placements\": \"R,P(avg)\"}]",
                                            2, &r),
                 DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "rules: rule 0: placements 'R,P(avg)': Partial: a "
                                       "checkpoint holds whole values, not addends"),
              "%s", dtr_last_error());
    dtr_mesh_destroy(one);
    dtr_mesh_destroy(mesh);
    dtr_checkpoint_close(ck);
}

Test(rules, refused_by_name) {
    static const struct {
        const char *json, *detail;
    } bad[] = {
        {"[]", "rules: not a non-empty JSON list of rules"},
        {"{}", "not a non-empty JSON list"},
        {"[{\"match\": \"*\"}]", "rule 0: needs \"match\" and \"placements\""},
        {"[{\"match\": \"*\", \"placements\": \"R\", \"why\": 1}]", "rule 0: unknown key \"why\""},
        {"[{\"match\": \"*\", \"placements\": \"R,R\"}, {\"match\": \"*\", \"placements\": \"R\"}]",
         "rule 1: placements 'R': 1 for a 2-dim mesh"},
        {"[{\"match\": \"*\", \"placements\": \"Q,R\"}]", "rule 0: placements 'Q,R': "},
        {"[{\"match\": \"*\", \"placements\": \"R,R\", \"dtype\": \"f17\"}]", "rule 0: dtype: not a dtype"},
        {"[{\"match\": \"*\", \"placements\": \"R,R\"}", "rules: line 1, column"},
        {"[{\"match\": \"*\", \"match\": \"w\", \"placements\": \"R,R\"}]", "duplicate object key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dtr_checkpoint_rules_t *r = (dtr_checkpoint_rules_t *)(uintptr_t)0x77;
        dtr_status_t st = dtr_checkpoint_rules_parse(bad[i].json, 2, &r);
        cr_expect(st == DTR_ERR_PARSE && strstr(dtr_last_error(), bad[i].detail) != NULL &&
                      r == (dtr_checkpoint_rules_t *)(uintptr_t)0x77,
                  "case %zu: %s '%s' (want '%s')", i, dtr_status_name(st), dtr_last_error(),
                  bad[i].detail);
    }
    dtr_checkpoint_rules_t *r = NULL;
    cr_expect_eq(dtr_checkpoint_rules_load("/nonexistent.json", 2, &r), DTR_ERR_IO);
    cr_expect(strstr(dtr_last_error(), "/nonexistent.json: No such file or directory"), "%s",
              dtr_last_error());
    cr_expect_eq(dtr_checkpoint_rules_parse("[]", 0, &r), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "mesh_ndims: 0"), "%s", dtr_last_error());
}
