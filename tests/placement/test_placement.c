#include <criterion/criterion.h>
#include <string.h>

#include "dtr.h"

static void expect_parse(const char *text, dtr_placement_t want, const char *canonical) {
    dtr_placement_t got;
    cr_assert_eq(dtr_placement_parse(text, &got), DTR_OK, "parse \"%s\": %s", text,
                 dtr_last_error());
    cr_expect(dtr_placement_equal(got, want), "parse \"%s\"", text);
    char buf[DTR_PLACEMENT_TEXT_MAX];
    cr_assert_eq(dtr_placement_format(got, buf, sizeof buf), DTR_OK);
    cr_expect_str_eq(buf, canonical, "print(parse(\"%s\"))", text);
}

Test(placement, every_accepted_form_parses_to_its_canonical_text) {
    expect_parse("S(0)", dtr_shard(0), "S(0)");
    expect_parse(" s ( 12 ) ", dtr_shard(12), "S(12)");
    expect_parse("Shard(3)", dtr_shard(3), "S(3)");
    expect_parse("Shard(dim=1)", dtr_shard(1), "S(1)");
    expect_parse("S(-1)", dtr_shard(-1), "S(-1)");
    expect_parse("R", dtr_replicate(), "R");
    expect_parse("Replicate()", dtr_replicate(), "R");
    expect_parse("replicate", dtr_replicate(), "R");
    expect_parse("P", dtr_partial(DTR_REDUCE_SUM), "P(sum)");
    expect_parse("P()", dtr_partial(DTR_REDUCE_SUM), "P(sum)");
    expect_parse("P(sum)", dtr_partial(DTR_REDUCE_SUM), "P(sum)");
    expect_parse("P(avg)", dtr_partial(DTR_REDUCE_AVG), "P(avg)");
    expect_parse("Partial(max)", dtr_partial(DTR_REDUCE_MAX), "P(max)");
    expect_parse("p( MIN )", dtr_partial(DTR_REDUCE_MIN), "P(min)");
    expect_parse("Partial(reduce_op=product)", dtr_partial(DTR_REDUCE_PRODUCT), "P(product)");
    /* PyTorch's spelling, read and printed as product (issue 27) */
    expect_parse("P(prod)", dtr_partial(DTR_REDUCE_PRODUCT), "P(product)");
    expect_parse("Partial(reduce_op=PROD)", dtr_partial(DTR_REDUCE_PRODUCT), "P(product)");
    /* a dataclass's repr quotes the op: Partial(reduce_op='sum') */
    expect_parse("Partial(reduce_op='sum')", dtr_partial(DTR_REDUCE_SUM), "P(sum)");
    expect_parse("Partial(reduce_op=\"avg\")", dtr_partial(DTR_REDUCE_AVG), "P(avg)");
    expect_parse("P('max')", dtr_partial(DTR_REDUCE_MAX), "P(max)");
}

Test(placement, quoted_ops_must_close) {
    static const char *const bad[][2] = {
        {"Partial(reduce_op='sum\")",
         "dtr_placement_parse: text \"Partial(reduce_op='sum\")\": at offset 22: expected the "
         "closing quote after the reduce op, found '\"'"},
        {"P('sum)", "dtr_placement_parse: text \"P('sum)\": at offset 6: expected the closing "
                    "quote after the reduce op, found ')'"},
        {"P('')", "dtr_placement_parse: text \"P('')\": at offset 3: expected a reduce op (sum, "
                  "avg, max, min, product) in P(...), found '''"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dtr_placement_t p = dtr_replicate();
        cr_expect_eq(dtr_placement_parse(bad[i][0], &p), DTR_ERR_PARSE, "%s", bad[i][0]);
        cr_expect_str_eq(dtr_last_error(), bad[i][1]);
        cr_expect_eq(p.kind, DTR_REPLICATE, "%s: written on failure", bad[i][0]);
    }
}

Test(placement, lists_round_trip_canonically) {
    const char *cases[][2] = {
        {"S(0),R,P(sum)", "S(0),R,P(sum)"},
        {" S(0) , R ,P ", "S(0),R,P(sum)"},
        {"[Shard(dim=1), Replicate()]", "S(1),R"},
        {"(Partial(avg),)", NULL}, /* trailing comma is an error */
        {"(Partial(avg))", "P(avg)"},
        {"R,R,R,R,R,R,R,R", "R,R,R,R,R,R,R,R"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dtr_placement_t list[DTR_MAX_MESH_DIMS];
        int n = -1;
        dtr_status_t st = dtr_placements_parse(cases[i][0], list, DTR_MAX_MESH_DIMS, &n);
        if (cases[i][1] == NULL) {
            cr_expect_eq(st, DTR_ERR_PARSE, "\"%s\" must fail", cases[i][0]);
            cr_expect_eq(n, -1, "count written on error");
            continue;
        }
        cr_assert_eq(st, DTR_OK, "\"%s\": %s", cases[i][0], dtr_last_error());
        char buf[128];
        cr_assert_eq(dtr_placements_format(list, n, buf, sizeof buf), DTR_OK);
        cr_expect_str_eq(buf, cases[i][1]);
        /* parse(print(x)) == x */
        dtr_placement_t again[DTR_MAX_MESH_DIMS];
        int m;
        cr_assert_eq(dtr_placements_parse(buf, again, DTR_MAX_MESH_DIMS, &m), DTR_OK);
        cr_assert_eq(m, n);
        for (int k = 0; k < n; k++) cr_expect(dtr_placement_equal(again[k], list[k]));
    }
}

Test(placement, every_value_round_trips) {
    dtr_placement_t values[24];
    int n = 0;
    for (int d = -3; d < 8; d++) values[n++] = dtr_shard(d);
    values[n++] = dtr_replicate();
    for (int op = 0; op < DTR_REDUCE_OP_LAST; op++) values[n++] = dtr_partial((dtr_reduce_op_t)op);
    for (int i = 0; i < n; i++) {
        char buf[DTR_PLACEMENT_TEXT_MAX];
        dtr_placement_t back;
        cr_assert_eq(dtr_placement_format(values[i], buf, sizeof buf), DTR_OK);
        cr_assert_eq(dtr_placement_parse(buf, &back), DTR_OK);
        cr_expect(dtr_placement_equal(back, values[i]), "%s", buf);
    }
    char buf[DTR_PLACEMENT_TEXT_MAX];
    cr_assert_eq(dtr_placement_format(dtr_shard(INT32_MIN), buf, sizeof buf), DTR_OK);
    cr_expect_str_eq(buf, "S(-2147483648)");
    cr_assert_eq(dtr_placement_format(dtr_partial(DTR_REDUCE_PRODUCT), buf, sizeof buf), DTR_OK);
    cr_expect_str_eq(buf, "P(product)");
}

Test(placement, equality_ignores_unused_fields) {
    dtr_placement_t a = dtr_replicate(), b = dtr_replicate();
    b.dim = 7;
    b.op = DTR_REDUCE_MAX;
    cr_expect(dtr_placement_equal(a, b));
    cr_expect_not(dtr_placement_equal(dtr_shard(0), dtr_shard(1)));
    cr_expect_not(dtr_placement_equal(dtr_partial(DTR_REDUCE_SUM), dtr_partial(DTR_REDUCE_AVG)));
    cr_expect_not(dtr_placement_equal(dtr_shard(0), dtr_replicate()));
}

Test(placement, reduce_ops) {
    dtr_reduce_op_t op = DTR_REDUCE_OP_LAST;
    cr_expect_eq(dtr_reduce_op_parse(" Product ", &op), DTR_OK);
    cr_expect_eq(op, DTR_REDUCE_PRODUCT);
    cr_expect_eq(dtr_reduce_op_parse("mean", &op), DTR_ERR_PARSE);
    cr_expect_eq(op, DTR_REDUCE_PRODUCT, "output written on error");
    op = DTR_REDUCE_SUM;
    cr_expect_eq(dtr_reduce_op_parse("prod", &op), DTR_OK);
    cr_expect_eq(op, DTR_REDUCE_PRODUCT);
    /* a word, not a prefix */
    cr_expect_eq(dtr_reduce_op_parse("produc", &op), DTR_ERR_PARSE);
    cr_expect_eq(dtr_reduce_op_parse("prods", &op), DTR_ERR_PARSE);
    cr_expect_str_eq(dtr_reduce_op_name(DTR_REDUCE_AVG), "avg");
    cr_expect_null(dtr_reduce_op_name(DTR_REDUCE_OP_LAST));
}

/* Errors: named status, a message naming the argument, outputs untouched. */
Test(placement, bad_calls_leave_outputs_untouched) {
    dtr_placement_t sentinel = {.kind = (dtr_placement_kind_t)77, .dim = 77, .op = 77};
    dtr_placement_t out = sentinel;
    cr_expect_eq(dtr_placement_parse(NULL, &out), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_placement_parse: text: must not be NULL");
    cr_expect_eq(dtr_placement_parse("R", NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_placement_parse: out: must not be NULL");
    cr_expect_eq(dtr_placement_parse("R,R", &out), DTR_ERR_PARSE);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_placement_parse: text \"R,R\": at offset 1: expected end of text "
                     "after one placement, found ','");
    cr_expect_eq(memcmp(&out, &sentinel, sizeof out), 0);

    dtr_placement_t list[3] = {sentinel, sentinel, sentinel};
    int n = -5;
    cr_expect_eq(dtr_placements_parse("S(0),R,P", list, 2, &n), DTR_ERR_PARSE);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_placements_parse: text \"S(0),R,P\": more than 2 placements");
    cr_expect_eq(dtr_placements_parse("S(0),R", list, 0, &n), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_placements_parse: cap: 0, must be at least 1");
    cr_expect_eq(dtr_placements_parse("S(0),R", NULL, 2, &n), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_placements_parse("S(0),R", list, 2, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(n, -5);
    for (int i = 0; i < 3; i++) cr_expect_eq(memcmp(&list[i], &sentinel, sizeof sentinel), 0);

    char buf[4];
    memset(buf, '#', sizeof buf);
    cr_expect_eq(dtr_placement_format(dtr_partial(DTR_REDUCE_AVG), buf, sizeof buf),
                 DTR_ERR_BUFFER_TOO_SMALL);
    cr_expect_str_eq(dtr_last_error(), "dtr_placement_format: len: 4 bytes given, 7 needed");
    cr_expect_eq(memcmp(buf, "####", 4), 0, "buffer written on error");
    cr_expect_eq(dtr_placement_format(sentinel, buf, sizeof buf), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_placement_format: placement: kind 77 is not Shard, Replicate or "
                     "Partial");
    dtr_placement_t bad_op = dtr_partial((dtr_reduce_op_t)9);
    cr_expect_eq(dtr_placement_format(bad_op, buf, sizeof buf), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(memcmp(buf, "####", 4), 0);
    dtr_placement_t two[2] = {dtr_shard(0), dtr_replicate()};
    cr_expect_eq(dtr_placements_format(two, 2, buf, sizeof buf), DTR_ERR_BUFFER_TOO_SMALL);
    cr_expect_eq(dtr_placements_format(two, 9, buf, sizeof buf), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_placements_format: count: 9, must be 0..8");
    cr_expect_eq(memcmp(buf, "####", 4), 0);
}

/* Shard orders as PyTorch prints them (S(d)[k]) and _StridedShard in its three spellings. */
Test(placement, shard_orders_and_strided_shards) {
    dtr_placement_t p;
    char buf[DTR_PLACEMENT_TEXT_MAX];
    cr_assert_eq(dtr_placement_parse("Shard(dim=1) [ 2 ]", &p), DTR_OK, "%s", dtr_last_error());
    cr_expect(p.kind == DTR_SHARD && p.dim == 1 && p.order == 2 && p.split_factor == 0);
    cr_assert_eq(dtr_placement_format(p, buf, sizeof buf), DTR_OK);
    cr_expect_str_eq(buf, "S(1)[2]");
    const char *strided[] = {"_StridedShard(dim=0, sf=2)", "_StridedShard(0, split_factor=2)",
                             "_S(0, 2)"};
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(dtr_placement_parse(strided[k], &p), DTR_OK, "%s: %s", strided[k],
                     dtr_last_error());
        cr_expect(p.kind == DTR_SHARD && p.dim == 0 && p.order == 0 && p.split_factor == 2,
                  "%s", strided[k]);
        cr_assert_eq(dtr_placement_format(p, buf, sizeof buf), DTR_OK);
        cr_expect_str_eq(buf, "_S(0, 2)");
    }
    /* Equality: the order counts, a split factor of 1 is none. */
    dtr_placement_t a = dtr_shard(0), b = dtr_shard(0);
    b.order = 1;
    cr_expect(!dtr_placement_equal(a, b));
    b.order = 0;
    b.split_factor = 1;
    cr_expect(dtr_placement_equal(a, b));
    /* A list shows [0] too where its tensor dim has an order, as PyTorch does. */
    dtr_placement_t l[3];
    int n;
    cr_assert_eq(dtr_placements_parse("S(0)[1],S(0)[0],S(1)", l, 3, &n), DTR_OK);
    char text[128];
    cr_assert_eq(dtr_placements_format(l, n, text, sizeof text), DTR_OK);
    cr_expect_str_eq(text, "S(0)[1],S(0)[0],S(1)");
    l[0].order = 0;
    l[1].order = 0;
    cr_assert_eq(dtr_placements_format(l, n, text, sizeof text), DTR_OK);
    cr_expect_str_eq(text, "S(0),S(0),S(1)");
    /* Validation. */
    b = dtr_shard(0);
    b.order = 8;
    cr_expect_eq(dtr_placement_validate(b), DTR_ERR_INVALID_ARGUMENT);
    b.order = 1;
    b.split_factor = 2;
    cr_expect_eq(dtr_placement_validate(b), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "both an order ([1]) and a split factor (2)") != NULL, "%s",
              dtr_last_error());
}
