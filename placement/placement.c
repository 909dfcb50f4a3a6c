#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "placement/placement.h"

#define DTR__MAX_SIZE ((int64_t)1 << 40) /* DTR_MAX_DIM_SIZE */

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

/* Ragged sizes: one kept copy per distinct list, found again by its hash, so that equal
 * lists share a pointer and a placement stays a plain value. Never freed: a list is a few
 * bytes a mesh dim, and specs and plans anywhere may point at it. */
typedef struct dtr__sizes_entry {
    struct dtr__sizes_entry *next;
    uint64_t hash;
    int32_t n;
    int64_t sizes[];
} dtr__sizes_entry_t;

#define DTR__SIZES_BUCKETS 1024
static dtr__sizes_entry_t *dtr__sizes_table[DTR__SIZES_BUCKETS];
static pthread_mutex_t dtr__sizes_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t dtr__sizes_hash(const int64_t *sizes, int n) {
    uint64_t h = dtr__fnv(0, n);
    for (int i = 0; i < n; i++) h = dtr__fnv(h, sizes[i]);
    return h;
}

/* The kept copy of sizes[0..n) (checked by the caller); NULL when out of memory. */
static const int64_t *dtr__sizes_keep(const int64_t *sizes, int n) {
    uint64_t h = dtr__sizes_hash(sizes, n);
    pthread_mutex_lock(&dtr__sizes_lock);
    dtr__sizes_entry_t **slot = &dtr__sizes_table[h % DTR__SIZES_BUCKETS], *e = *slot;
    while (e != NULL &&
           !(e->hash == h && e->n == n && memcmp(e->sizes, sizes, (size_t)n * sizeof *sizes) == 0))
        e = e->next;
    if (e == NULL && (e = malloc(sizeof *e + (size_t)n * sizeof *sizes)) != NULL) {
        e->hash = h;
        e->n = n;
        memcpy(e->sizes, sizes, (size_t)n * sizeof *sizes);
        e->next = *slot;
        *slot = e;
    }
    pthread_mutex_unlock(&dtr__sizes_lock);
    return e != NULL ? e->sizes : NULL;
}

static dtr_status_t dtr__sizes_check(const int64_t *sizes, int64_t n, const char *func) {
    if (n < 1 || n > DTR_MAX_RAGGED_SIZES)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "sizes: %lld of them, must be 1..%d (one per rank of the mesh dim)",
                          (long long)n, DTR_MAX_RAGGED_SIZES);
    if (sizes == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "sizes: NULL for %lld sizes",
                          (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (sizes[i] < 0 || sizes[i] > DTR__MAX_SIZE)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "sizes[%lld]: %lld, must be 0..2^40", (long long)i,
                              (long long)sizes[i]);
    return DTR_OK;
}

dtr_status_t dtr_shard_sizes(int32_t dim, const int64_t *sizes, int n, dtr_placement_t *out) {
    DTR_CHECK_PTR(out, __func__);
    DTR_CHECK(dtr__sizes_check(sizes, n, __func__));
    const int64_t *kept = dtr__sizes_keep(sizes, n);
    if (kept == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "sizes: %d of them", n);
    dtr_placement_t p = dtr_shard(dim);
    p.nsizes = n;
    p.sizes = kept;
    *out = p;
    return DTR_OK;
}

static bool dtr__sizes_equal(dtr_placement_t a, dtr_placement_t b) {
    return a.nsizes == b.nsizes &&
           (a.nsizes == 0 || a.sizes == b.sizes ||
            memcmp(a.sizes, b.sizes, (size_t)a.nsizes * sizeof *a.sizes) == 0);
}

bool dtr_placement_equal(dtr_placement_t a, dtr_placement_t b) {
    if (a.kind != b.kind) return false;
    if (a.kind == DTR_SHARD)
        return a.dim == b.dim && a.order == b.order &&
               (a.split_factor > 1 ? a.split_factor : 1) ==
                   (b.split_factor > 1 ? b.split_factor : 1) &&
               dtr__sizes_equal(a, b);
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
    if (placement.nsizes != 0) {
        if (placement.kind != DTR_SHARD)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "placement: %s with %d sizes; only a Shard takes sizes",
                              placement.kind == DTR_REPLICATE ? "R" : "P", (int)placement.nsizes);
        if (placement.split_factor > 1)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "placement: S(%d): both sizes and a split factor (%d); give one",
                              (int)placement.dim, (int)placement.split_factor);
        DTR_CHECK_AS(dtr__sizes_check(placement.sizes, placement.nsizes, "placement"), __func__);
    }
    return DTR_OK;
}

/* Parsing. Errors quote the whole text and give the offset where it went wrong. */

typedef struct {
    const char *text;  /* start of the whole input, for offsets */
    const char *shown; /* the input for messages: cut after 80 characters */
    const char *p;    /* cursor */
    const char *func; /* public function to name in errors */
} dtr__scanner_t;

/* text as messages quote it: whole, or its first 80 characters and "..." (a ragged shard's
 * sizes make long texts; the offset a message gives still points into the whole). */
static const char *dtr__shown(const char *text, char *buf, size_t len) {
    if (strlen(text) <= 96) return text;
    snprintf(buf, len, "%.80s...", text);
    return buf;
}

static dtr_status_t dtr__parse_error(const dtr__scanner_t *s, const char *what) {
    const char *at = dtr__skip_space(s->p);
    if (*at == '\0')
        return dtr__error(DTR_ERR_PARSE, s->func, "text \"%s\": %s, found end of text", s->shown,
                          what);
    return dtr__error(DTR_ERR_PARSE, s->func, "text \"%s\": at offset %td: %s, found '%c'",
                      s->shown, at - s->text, what, *at);
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
                          s->shown, num - s->text, range);
    *out = (int32_t)v;
    return DTR_OK;
}

/* The sizes of a ragged shard after its '{': "3,0,5,2}". */
static dtr_status_t dtr__parse_sizes(dtr__scanner_t *s, int32_t dim, dtr_placement_t *out) {
    int64_t *v = NULL;
    int n = 0, cap = 0;
    dtr_status_t st = DTR_OK;
    do {
        s->p = dtr__skip_space(s->p);
        const char *num = s->p;
        int64_t x;
        int rc = dtr__scan_i64(&s->p, &x);
        if (rc == -1) {
            st = dtr__parse_error(s, "expected a size (an integer >= 0) in {...}");
            break;
        }
        if (rc == -2 || x < 0 || x > DTR__MAX_SIZE || n == DTR_MAX_RAGGED_SIZES) {
            st = dtr__error(DTR_ERR_PARSE, s->func,
                            "text \"%s\": at offset %td: %s", s->shown, num - s->text,
                            n == DTR_MAX_RAGGED_SIZES ? "more than 65536 sizes"
                                                      : "size out of range (0..2^40)");
            break;
        }
        if (n == cap) {
            int64_t *grown = realloc(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *v);
            if (grown == NULL) {
                st = dtr__error(DTR_ERR_OUT_OF_MEMORY, s->func, "text \"%s\": sizes", s->shown);
                break;
            }
            v = grown;
        }
        v[n++] = x;
    } while (dtr__accept(s, ','));
    if (st == DTR_OK && !dtr__accept(s, '}'))
        st = dtr__parse_error(s, "expected ',' or '}' after a size");
    if (st == DTR_OK) st = dtr_shard_sizes(dim, v, n, out);
    free(v);
    return st;
}

/* S(d), S(d)[k], S(d){sizes} or S(d)[k]{sizes}. */
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
                              s->shown, (int)order, DTR_MAX_MESH_DIMS - 1, DTR_MAX_MESH_DIMS);
        if (!dtr__accept(s, ']')) return dtr__parse_error(s, "expected ']' after the shard order");
    }
    dtr_placement_t p = dtr_shard(dim);
    if (dtr__accept(s, '{')) DTR_CHECK(dtr__parse_sizes(s, dim, &p));
    p.order = order;
    *out = p;
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

/* Sizes belong to a Shard: "R{2,2}" names the placement. */
static dtr_status_t dtr__no_sizes(dtr__scanner_t *s, const char *what) {
    const char *at = dtr__skip_space(s->p);
    if (*at != '{') return DTR_OK;
    return dtr__error(DTR_ERR_PARSE, s->func,
                      "text \"%s\": at offset %td: %s takes no sizes ({...}); only a Shard does",
                      s->shown, at - s->text, what);
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
        return dtr__no_sizes(s, "R");
    }
    if (dtr__scan_word(&s->p, "P") || dtr__scan_word(&s->p, "Partial")) {
        DTR_CHECK(dtr__parse_partial_args(s, out));
        return dtr__no_sizes(s, "P");
    }
    return dtr__parse_error(s, "expected a placement: S(d), R or P(op)");
}

dtr_status_t dtr_placement_parse(const char *text, dtr_placement_t *out) {
    DTR_CHECK_PTR(text, __func__);
    DTR_CHECK_PTR(out, __func__);
    char shown[96];
    dtr__scanner_t s = {.text = text, .shown = dtr__shown(text, shown, sizeof shown), .p = text,
                        .func = __func__};
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
    char shown[96];
    dtr__scanner_t s = {.text = text, .shown = dtr__shown(text, shown, sizeof shown), .p = text,
                        .func = __func__};
    char close = '\0';
    if (dtr__accept(&s, '['))
        close = ']';
    else if (dtr__accept(&s, '('))
        close = ')';
    if (*dtr__skip_space(s.p) == '\0' || (close != '\0' && *dtr__skip_space(s.p) == close))
        return dtr__error(DTR_ERR_PARSE, __func__,
                          "text \"%s\": empty placement list (one placement per mesh dim, "
                          "e.g. \"S(0),R\")",
                          s.shown);

    /* Parse into a local array so out is untouched on error; no mesh has more dims. */
    int limit = cap < DTR_MAX_MESH_DIMS ? cap : DTR_MAX_MESH_DIMS;
    dtr_placement_t items[DTR_MAX_MESH_DIMS];
    int n = 0;
    for (;;) {
        if (n == limit)
            return dtr__error(DTR_ERR_PARSE, __func__, "text \"%s\": more than %d placements%s",
                              s.shown, limit, limit == cap ? "" : " (the most mesh dims)");
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

/* Where a text must fit a fixed buffer (messages, tables), ragged sizes as "{N sizes}". */
static _Thread_local bool dtr__brief;

/* The sizes' text "{3,0,5,2}" (nothing for a chunked shard). */
static dtr_status_t dtr__format_sizes(dtr_placement_t p, char *buf, size_t len, size_t *pos,
                                      const char *func) {
    if (dtr__brief && p.nsizes > 0)
        return dtr__buf_printf(buf, len, pos, func, "{%d sizes}", (int)p.nsizes);
    for (int i = 0; i < p.nsizes; i++)
        DTR_CHECK(dtr__buf_printf(buf, len, pos, func, "%c%lld", i == 0 ? '{' : ',',
                                  (long long)p.sizes[i]));
    return p.nsizes > 0 ? dtr__buf_printf(buf, len, pos, func, "}") : DTR_OK;
}

static dtr_status_t dtr__format_one(dtr_placement_t p, char *buf, size_t len, size_t *pos,
                                    const char *func) {
    switch (p.kind) {
    case DTR_SHARD:
        if (p.split_factor > 1)
            return dtr__buf_printf(buf, len, pos, func, "_S(%d, %d)", (int)p.dim,
                                   (int)p.split_factor);
        if (p.order != 0)
            DTR_CHECK(dtr__buf_printf(buf, len, pos, func, "S(%d)[%d]", (int)p.dim, (int)p.order));
        else
            DTR_CHECK(dtr__buf_printf(buf, len, pos, func, "S(%d)", (int)p.dim));
        return dtr__format_sizes(p, buf, len, pos, func);
    case DTR_REPLICATE:
        return dtr__buf_printf(buf, len, pos, func, "R");
    case DTR_PARTIAL:
        return dtr__buf_printf(buf, len, pos, func, "P(%s)", dtr__reduce_op_names[p.op]);
    default:
        return dtr__error(DTR_ERR_INTERNAL, func, "unreachable placement kind");
    }
}

int64_t dtr_placement_text_len(dtr_placement_t placement) {
    if (dtr_placement_validate(placement) != DTR_OK) return -1;
    int64_t n = DTR_PLACEMENT_TEXT_MAX; /* the head, generously ("[0]" included) */
    for (int i = 0; i < placement.nsizes; i++)
        n += 1 + snprintf(NULL, 0, "%lld", (long long)placement.sizes[i]);
    char *text = malloc((size_t)n + 2);
    size_t pos = 0;
    if (text == NULL || dtr__format_one(placement, text, (size_t)n + 2, &pos, __func__) != DTR_OK)
        pos = 0;
    free(text);
    return text == NULL ? -1 : (int64_t)pos;
}

dtr_status_t dtr_placement_format(dtr_placement_t placement, char *buf, size_t len) {
    DTR_CHECK_PTR(buf, __func__);
    DTR_CHECK_AS(dtr_placement_validate(placement), __func__);
    int64_t n = dtr_placement_text_len(placement);
    char *text = malloc((size_t)n + 1);
    if (text == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "placement text");
    size_t pos = 0;
    dtr_status_t st = dtr__format_one(placement, text, (size_t)n + 1, &pos, __func__);
    if (st == DTR_OK) st = dtr__copy_out(buf, len, text, pos, __func__);
    free(text);
    return st;
}

int64_t dtr_placements_text_len(const dtr_placement_t *placements, int count) {
    if (placements == NULL || count < 0 || count > DTR_MAX_MESH_DIMS) return -1;
    int64_t n = 0;
    for (int i = 0; i < count; i++) {
        int64_t one = dtr_placement_text_len(placements[i]);
        if (one < 0) return -1;
        n += one + 4; /* ",", "[0]" */
    }
    return n;
}

dtr_status_t dtr_placements_format(const dtr_placement_t *placements, int count, char *buf,
                                   size_t len) {
    DTR_CHECK_PTR(placements, __func__);
    DTR_CHECK_PTR(buf, __func__);
    if (count < 0 || count > DTR_MAX_MESH_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "count: %d, must be 0..%d", count,
                          DTR_MAX_MESH_DIMS);
    int64_t cap = 1;
    for (int i = 0; i < count; i++) {
        DTR_CHECK(dtr_placement_validate(placements[i]));
        cap += dtr_placement_text_len(placements[i]) + 4; /* ",", "[0]" */
    }
    char *text = malloc((size_t)cap);
    if (text == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "placements text");
    size_t pos = 0;
    text[0] = '\0';
    dtr_status_t st = DTR_OK;
    for (int i = 0; i < count && st == DTR_OK; i++) {
        if (i > 0) st = dtr__buf_printf(text, (size_t)cap, &pos, __func__, ",");
        /* As PyTorch prints a shard order: every mesh dim of an ordered tensor dim shows its
         * index, [0] included (before a ragged shard's sizes). */
        dtr_placement_t p = placements[i];
        bool ordered = false;
        for (int j = 0; j < count && p.kind == DTR_SHARD && p.order == 0 && p.split_factor <= 1; j++)
            ordered = ordered || (placements[j].kind == DTR_SHARD && placements[j].dim == p.dim &&
                                  placements[j].order != 0);
        if (st != DTR_OK) break;
        if (ordered) {
            st = dtr__buf_printf(text, (size_t)cap, &pos, __func__, "S(%d)[0]", (int)p.dim);
            if (st == DTR_OK) st = dtr__format_sizes(p, text, (size_t)cap, &pos, __func__);
        } else {
            st = dtr__format_one(p, text, (size_t)cap, &pos, __func__);
        }
    }
    if (st == DTR_OK) st = dtr__copy_out(buf, len, text, pos, __func__);
    free(text);
    return st;
}

void dtr_placements_describe(const dtr_placement_t *placements, int count, char *buf,
                             size_t len) {
    if (len == 0) return;
    if (dtr_placements_format(placements, count, buf, len) == DTR_OK) return;
    dtr__brief = true;
    if (dtr_placements_format(placements, count, buf, len) != DTR_OK) snprintf(buf, len, "?");
    dtr__brief = false;
}

void dtr_placements_print_json(FILE *out, const dtr_placement_t *placements, int count) {
    /* The list's text form, item by item (a spec's placements hold no split factor; a ragged
     * shard's commas are within its braces): shard orders show as they do in the text. */
    int64_t len = dtr_placements_text_len(placements, count);
    char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (text != NULL && dtr_placements_format(placements, count, text, (size_t)len + 1) != DTR_OK)
        text[0] = '\0';
    if (count == 0 || text == NULL || text[0] == '\0') {
        fputs("[]", out);
        free(text);
        return;
    }
    fputs("[\"", out);
    int depth = 0;
    for (const char *c = text; *c != '\0'; c++) {
        depth += *c == '{' ? 1 : *c == '}' ? -1 : 0;
        if (*c == ',' && depth == 0)
            fputs("\",\"", out);
        else
            fputc(*c, out);
    }
    fputs("\"]", out);
    free(text);
}
