#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "placement/placement.h"

static const char *const dtr__reduce_op_names[DTR_REDUCE_OP_LAST] = {
    [DTR_REDUCE_SUM] = "sum",
    [DTR_REDUCE_AVG] = "avg",
    [DTR_REDUCE_MAX] = "max",
    [DTR_REDUCE_MIN] = "min",
    [DTR_REDUCE_PRODUCT] = "product",
};

dtr_placement_t dtr_shard(int32_t dim) {
    return (dtr_placement_t){.kind = DTR_SHARD, .dim = dim, .op = DTR_REDUCE_SUM};
}

dtr_placement_t dtr_replicate(void) {
    return (dtr_placement_t){.kind = DTR_REPLICATE, .dim = 0, .op = DTR_REDUCE_SUM};
}

dtr_placement_t dtr_partial(dtr_reduce_op_t op) {
    return (dtr_placement_t){.kind = DTR_PARTIAL, .dim = 0, .op = op};
}

bool dtr_placement_equal(dtr_placement_t a, dtr_placement_t b) {
    if (a.kind != b.kind) return false;
    if (a.kind == DTR_SHARD)
        return a.dim == b.dim && a.order == b.order &&
               (a.split_factor > 1 ? a.split_factor : 1) ==
                   (b.split_factor > 1 ? b.split_factor : 1);
    if (a.kind == DTR_PARTIAL) return a.op == b.op;
    return true;
}

const char *dtr_reduce_op_name(dtr_reduce_op_t op) {
    if ((unsigned)op >= DTR_REDUCE_OP_LAST) return NULL;
    return dtr__reduce_op_names[op];
}

/* Scans a reduce op name at the cursor; returns the op or DTR_REDUCE_OP_LAST. "prod", the
 * spelling PyTorch's tests use for product (Partial("prod")), is read, never printed. */
static dtr_reduce_op_t dtr__scan_reduce_op(const char **cursor) {
    for (int op = 0; op < DTR_REDUCE_OP_LAST; op++)
        if (dtr__scan_word(cursor, dtr__reduce_op_names[op])) return (dtr_reduce_op_t)op;
    if (dtr__scan_word(cursor, "prod")) return DTR_REDUCE_PRODUCT;
    return DTR_REDUCE_OP_LAST;
}

dtr_status_t dtr_reduce_op_parse(const char *text, dtr_reduce_op_t *out) {
    DTR_CHECK_PTR(text, __func__);
    DTR_CHECK_PTR(out, __func__);
    const char *p = dtr__skip_space(text);
    dtr_reduce_op_t op = dtr__scan_reduce_op(&p);
    if (op == DTR_REDUCE_OP_LAST || *dtr__skip_space(p) != '\0')
        return dtr__error(DTR_ERR_PARSE, __func__,
                          "text \"%s\": not a reduce op (sum, avg, max, min, product)", text);
    *out = op;
    return DTR_OK;
}

dtr_status_t dtr_placement_validate(dtr_placement_t placement) {
    if ((unsigned)placement.kind >= DTR_PLACEMENT_KIND_LAST)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "placement: kind %d is not Shard, Replicate or Partial",
                          (int)placement.kind);
    if (placement.kind == DTR_PARTIAL && (unsigned)placement.op >= DTR_REDUCE_OP_LAST)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "placement: Partial reduce op %d is not one of sum, avg, max, min, "
                          "product",
                          (int)placement.op);
    if (placement.kind == DTR_SHARD) {
        if (placement.order < 0 || placement.order >= DTR_MAX_MESH_DIMS)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "placement: S(%d)[%d]: a shard order must be 0..%d", (int)placement.dim,
                              (int)placement.order, DTR_MAX_MESH_DIMS - 1);
        if (placement.split_factor < 0)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "placement: S(%d): split factor %d, must be >= 1 (0: none)",
                              (int)placement.dim, (int)placement.split_factor);
        if (placement.split_factor > 1 && placement.order != 0)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "placement: S(%d): both an order ([%d]) and a split factor (%d); "
                              "give one",
                              (int)placement.dim, (int)placement.order,
                              (int)placement.split_factor);
    }
    return DTR_OK;
}

/* Parsing. Errors quote the whole text and give the offset where it went wrong. */

typedef struct {
    const char *text; /* start of the whole input, for messages */
    const char *p;    /* cursor */
    const char *func; /* public function to name in errors */
} dtr__scanner_t;

static dtr_status_t dtr__parse_error(const dtr__scanner_t *s, const char *what) {
    const char *at = dtr__skip_space(s->p);
    if (*at == '\0')
        return dtr__error(DTR_ERR_PARSE, s->func, "text \"%s\": %s, found end of text", s->text,
                          what);
    return dtr__error(DTR_ERR_PARSE, s->func, "text \"%s\": at offset %td: %s, found '%c'",
                      s->text, at - s->text, what, *at);
}

static int dtr__accept(dtr__scanner_t *s, char c) {
    s->p = dtr__skip_space(s->p);
    if (*s->p != c) return 0;
    s->p++;
    return 1;
}

/* Optional "name=" before an argument, as PyTorch's repr writes Shard(dim=0). */
static void dtr__accept_keyword(dtr__scanner_t *s, const char *name) {
    const char *save = s->p;
    s->p = dtr__skip_space(s->p);
    if (dtr__scan_word(&s->p, name) && dtr__accept(s, '=')) return;
    s->p = save;
}

/* An integer argument of at most int32 range; what names it in errors. */
static dtr_status_t dtr__parse_int_arg(dtr__scanner_t *s, const char *what, const char *where,
                                       const char *range, int64_t lo, int32_t *out) {
    s->p = dtr__skip_space(s->p);
    const char *num = s->p;
    int64_t v;
    int rc = dtr__scan_i64(&s->p, &v);
    char expected[64];
    snprintf(expected, sizeof expected, "expected %s (an integer)%s", what, where);
    if (rc == -1) return dtr__parse_error(s, expected);
    if (rc == -2 || v < lo || v > INT32_MAX)
        return dtr__error(DTR_ERR_PARSE, s->func, "text \"%s\": at offset %td: %s out of range",
                          s->text, num - s->text, range);
    *out = (int32_t)v;
    return DTR_OK;
}

/* S(d) or S(d)[k]. */
static dtr_status_t dtr__parse_shard_args(dtr__scanner_t *s, dtr_placement_t *out) {
    if (!dtr__accept(s, '(')) return dtr__parse_error(s, "expected '(' after S");
    dtr__accept_keyword(s, "dim");
    int32_t dim, order = 0;
    DTR_CHECK(dtr__parse_int_arg(s, "a tensor dim", " in S(...)", "shard dim", INT32_MIN, &dim));
    if (!dtr__accept(s, ')')) return dtr__parse_error(s, "expected ')' after the shard dim");
    if (dtr__accept(s, '[')) {
        DTR_CHECK(dtr__parse_int_arg(s, "a shard order", " in [...]", "shard order", 0, &order));
        if (order >= DTR_MAX_MESH_DIMS)
            return dtr__error(DTR_ERR_PARSE, s->func,
                              "text \"%s\": shard order [%d]: must be 0..%d (a mesh has at most "
                              "%d dims)",
                              s->text, (int)order, DTR_MAX_MESH_DIMS - 1, DTR_MAX_MESH_DIMS);
        if (!dtr__accept(s, ']')) return dtr__parse_error(s, "expected ']' after the shard order");
    }
    *out = dtr_shard(dim);
    out->order = order;
    return DTR_OK;
}

/* _S(d, f) and _StridedShard(dim=d, sf=f | split_factor=f), as PyTorch prints them. */
static dtr_status_t dtr__parse_strided_args(dtr__scanner_t *s, dtr_placement_t *out) {
    if (!dtr__accept(s, '(')) return dtr__parse_error(s, "expected '(' after _StridedShard");
    dtr__accept_keyword(s, "dim");
    int32_t dim, sf;
    DTR_CHECK(dtr__parse_int_arg(s, "a tensor dim", " in _StridedShard(...)", "shard dim",
                                 INT32_MIN, &dim));
    if (!dtr__accept(s, ',')) return dtr__parse_error(s, "expected ', split_factor' after the dim");
    dtr__accept_keyword(s, "split_factor");
    dtr__accept_keyword(s, "sf");
    DTR_CHECK(dtr__parse_int_arg(s, "a split factor", " in _StridedShard(...)",
                                 "split factor (1..2^31-1)", 1, &sf));
    if (!dtr__accept(s, ')')) return dtr__parse_error(s, "expected ')' after the split factor");
    *out = dtr_shard(dim);
    out->split_factor = sf;
    return DTR_OK;
}

static dtr_status_t dtr__parse_partial_args(dtr__scanner_t *s, dtr_placement_t *out) {
    dtr_reduce_op_t op = DTR_REDUCE_SUM;
    if (dtr__accept(s, '(')) {
        if (!dtr__accept(s, ')')) {
            dtr__accept_keyword(s, "reduce_op");
            s->p = dtr__skip_space(s->p);
            /* quoted as a dataclass's repr writes it: Partial(reduce_op='sum') */
            char quote = *s->p == '\'' || *s->p == '"' ? *s->p++ : '\0';
            op = dtr__scan_reduce_op(&s->p);
            if (op == DTR_REDUCE_OP_LAST)
                return dtr__parse_error(
                    s, "expected a reduce op (sum, avg, max, min, product) in P(...)");
            if (quote != '\0' && *s->p != quote)
                return dtr__parse_error(s, "expected the closing quote after the reduce op");
            if (quote != '\0') s->p++;
            if (!dtr__accept(s, ')'))
                return dtr__parse_error(s, "expected ')' after the reduce op");
        }
    }
    *out = dtr_partial(op);
    return DTR_OK;
}

static dtr_status_t dtr__parse_one(dtr__scanner_t *s, dtr_placement_t *out) {
    s->p = dtr__skip_space(s->p);
    if (dtr__scan_word(&s->p, "S") || dtr__scan_word(&s->p, "Shard"))
        return dtr__parse_shard_args(s, out);
    if (dtr__scan_word(&s->p, "_S") || dtr__scan_word(&s->p, "_StridedShard"))
        return dtr__parse_strided_args(s, out);
    if (dtr__scan_word(&s->p, "R") || dtr__scan_word(&s->p, "Replicate")) {
        if (dtr__accept(s, '(') && !dtr__accept(s, ')'))
            return dtr__parse_error(s, "expected ')': Replicate takes no argument");
        *out = dtr_replicate();
        return DTR_OK;
    }
    if (dtr__scan_word(&s->p, "P") || dtr__scan_word(&s->p, "Partial"))
        return dtr__parse_partial_args(s, out);
    return dtr__parse_error(s, "expected a placement: S(d), R or P(op)");
}

dtr_status_t dtr_placement_parse(const char *text, dtr_placement_t *out) {
    DTR_CHECK_PTR(text, __func__);
    DTR_CHECK_PTR(out, __func__);
    dtr__scanner_t s = {.text = text, .p = text, .func = __func__};
    dtr_placement_t value;
    DTR_CHECK(dtr__parse_one(&s, &value));
    if (*dtr__skip_space(s.p) != '\0')
        return dtr__parse_error(&s, "expected end of text after one placement");
    *out = value;
    return DTR_OK;
}

dtr_status_t dtr_placements_parse(const char *text, dtr_placement_t *out, int cap,
                                  int *count) {
    DTR_CHECK_PTR(text, __func__);
    DTR_CHECK_PTR(out, __func__);
    DTR_CHECK_PTR(count, __func__);
    if (cap < 1)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "cap: %d, must be at least 1",
                          cap);
    dtr__scanner_t s = {.text = text, .p = text, .func = __func__};
    char close = '\0';
    if (dtr__accept(&s, '['))
        close = ']';
    else if (dtr__accept(&s, '('))
        close = ')';
    if (*dtr__skip_space(s.p) == '\0' || (close != '\0' && *dtr__skip_space(s.p) == close))
        return dtr__error(DTR_ERR_PARSE, __func__,
                          "text \"%s\": empty placement list (one placement per mesh dim, "
                          "e.g. \"S(0),R\")",
                          text);

    /* Parse into a local array so out is untouched on error; no mesh has more dims. */
    int limit = cap < DTR_MAX_MESH_DIMS ? cap : DTR_MAX_MESH_DIMS;
    dtr_placement_t items[DTR_MAX_MESH_DIMS];
    int n = 0;
    for (;;) {
        if (n == limit)
            return dtr__error(DTR_ERR_PARSE, __func__, "text \"%s\": more than %d placements%s",
                              text, limit, limit == cap ? "" : " (the most mesh dims)");
        DTR_CHECK(dtr__parse_one(&s, &items[n]));
        n++;
        if (!dtr__accept(&s, ',')) break;
    }
    if (close != '\0' && !dtr__accept(&s, close)) {
        char what[32];
        snprintf(what, sizeof what, "expected ',' or '%c'", close);
        return dtr__parse_error(&s, what);
    }
    if (*dtr__skip_space(s.p) != '\0')
        return dtr__parse_error(&s, "expected ',' between placements");
    memcpy(out, items, (size_t)n * sizeof *out);
    *count = n;
    return DTR_OK;
}

static dtr_status_t dtr__format_one(dtr_placement_t p, char *buf, size_t len, size_t *pos,
                                    const char *func) {
    switch (p.kind) {
    case DTR_SHARD:
        if (p.split_factor > 1)
            return dtr__buf_printf(buf, len, pos, func, "_S(%d, %d)", (int)p.dim,
                                   (int)p.split_factor);
        if (p.order != 0)
            return dtr__buf_printf(buf, len, pos, func, "S(%d)[%d]", (int)p.dim, (int)p.order);
        return dtr__buf_printf(buf, len, pos, func, "S(%d)", (int)p.dim);
    case DTR_REPLICATE:
        return dtr__buf_printf(buf, len, pos, func, "R");
    case DTR_PARTIAL:
        return dtr__buf_printf(buf, len, pos, func, "P(%s)", dtr__reduce_op_names[p.op]);
    default:
        return dtr__error(DTR_ERR_INTERNAL, func, "unreachable placement kind");
    }
}

dtr_status_t dtr_placement_format(dtr_placement_t placement, char *buf, size_t len) {
    DTR_CHECK_PTR(buf, __func__);
    DTR_CHECK_AS(dtr_placement_validate(placement), __func__);
    char text[DTR_PLACEMENT_TEXT_MAX];
    size_t pos = 0;
    DTR_CHECK(dtr__format_one(placement, text, sizeof text, &pos, __func__));
    return dtr__copy_out(buf, len, text, pos, __func__);
}

dtr_status_t dtr_placements_format(const dtr_placement_t *placements, int count, char *buf,
                                   size_t len) {
    DTR_CHECK_PTR(placements, __func__);
    DTR_CHECK_PTR(buf, __func__);
    if (count < 0 || count > DTR_MAX_MESH_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "count: %d, must be 0..%d", count,
                          DTR_MAX_MESH_DIMS);
    for (int i = 0; i < count; i++) DTR_CHECK(dtr_placement_validate(placements[i]));
    char text[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX];
    size_t pos = 0;
    text[0] = '\0';
    for (int i = 0; i < count; i++) {
        if (i > 0) DTR_CHECK(dtr__buf_printf(text, sizeof text, &pos, __func__, ","));
        DTR_CHECK(dtr__format_one(placements[i], text, sizeof text, &pos, __func__));
        /* As PyTorch prints a shard order: every mesh dim of an ordered tensor dim shows its
         * index, [0] included. */
        dtr_placement_t p = placements[i];
        bool ordered = false;
        for (int j = 0; j < count && p.kind == DTR_SHARD && p.order == 0 && p.split_factor <= 1; j++)
            ordered = ordered || (placements[j].kind == DTR_SHARD && placements[j].dim == p.dim &&
                                  placements[j].order != 0);
        if (ordered) DTR_CHECK(dtr__buf_printf(text, sizeof text, &pos, __func__, "[0]"));
    }
    return dtr__copy_out(buf, len, text, pos, __func__);
}
