/*
 * Plans and layouts as pictures (SVG: text, no library): what `dtr layout --svg` and
 * `dtr plan --svg` write, and Python's _repr_svg_.
 *
 * A layout panel is the mesh as a grid of its ranks beside the tensor, each rank's block
 * filled with the rank's colour: a tensor of 2 dims as rows x columns, of 1 dim as one row,
 * of more dims with dims 1.. flattened into columns (a block sharded in dim 2 or later is
 * drawn as its flattened span; the panel's title says so). Blocks that several ranks hold
 * (replicas) are one rectangle naming them all. A change is its source panel, its steps or
 * messages, and its destination panel; between meshes, the message matrix: a row per sender,
 * a column per receiver, one mark (class "msg") per message, darker for more bytes, a
 * hollow one for a box its rank keeps. Past 64 ranks a panel draws blocks without names,
 * past 4096 messages the matrix one mark per pair of ranks (class "pair"). Every mark has a
 * <title> (a tooltip) saying what it is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtensor/mesh.h"
#include "redistribute/planner/internal.h"

enum { DTR__SVG_NAMED = 64, DTR__SVG_MARKS = 4096, DTR__SVG_TENSORS = 4 };

/* 12 colours that tell ranks apart (Tableau's), by rank modulo 12. */
static const char *dtr__svg_colour(int rank) {
    static const char *const c[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                    "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                    "#9c755f", "#bab0ac", "#86bcb6", "#d37295"};
    return c[(rank % 12 + 12) % 12];
}

/* s with XML's special characters escaped. */
static void dtr__svg_text(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", out);
        else if (*s == '>') fputs("&gt;", out);
        else if (*s == '&') fputs("&amp;", out);
        else if (*s == '"') fputs("&quot;", out);
        else fputc(*s, out);
    }
}

static void dtr__svg_label(FILE *out, double x, double y, double size, const char *anchor,
                           const char *text) {
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"%s\">", x, y,
            size, anchor);
    dtr__svg_text(out, text);
    fputs("</text>\n", out);
}

static void dtr__svg_begin(FILE *out, double w, double h) {
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n", w, h, w, h);
    fprintf(out, "<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", w, h);
}

static dtr_status_t dtr__svg_end(FILE *out, const char *func) {
    fputs("</svg>\n", out);
    return ferror(out) ? dtr__error(DTR_ERR_IO, func, "out: a write failed") : DTR_OK;
}

/* The 2-D view of a tensor: rows (dim 0; 1 for 0 or 1 dims) and columns (the rest). */
static void dtr__svg_view(const dtr_spec_t *s, int64_t *rows, int64_t *cols) {
    *rows = s->ndim >= 2 ? s->shape[0] : 1;
    *cols = 1;
    for (int d = s->ndim >= 2 ? 1 : 0; d < s->ndim; d++) *cols *= s->shape[d];
}

/* The tensor's box within W x H px, its aspect kept where that leaves it at least 48 x 24. */
static void dtr__svg_box(const dtr_spec_t *s, double W, double H, double *w, double *h) {
    int64_t rows, cols;
    dtr__svg_view(s, &rows, &cols);
    double r = rows > 0 ? (double)rows : 1, c = cols > 0 ? (double)cols : 1;
    double k = W / c < H / r ? W / c : H / r;
    *w = c * k < 48 ? 48 : c * k;
    *h = r * k < 24 ? 24 : r * k;
}

/* A block's rows [r0, r1) and flattened columns [c0, c1) (its span, for 3 or more dims). */
static void dtr__svg_span(const dtr_spec_t *s, const dtr_layout_t *l, int64_t *r0, int64_t *r1,
                          int64_t *c0, int64_t *c1) {
    int first = s->ndim >= 2 ? 1 : 0;
    *r0 = first ? l->global_offset[0] : 0;
    *r1 = first ? *r0 + l->local_shape[0] : 1;
    int64_t lo = 0, hi = 0;
    for (int d = first; d < s->ndim; d++) {
        lo = lo * s->shape[d] + l->global_offset[d];
        hi = hi * s->shape[d] + l->global_offset[d] + l->local_shape[d] - 1;
    }
    *c0 = lo;
    *c1 = s->ndim > first ? hi + 1 : 1;
}

/* The title of a spec: "8x6 f32 on mesh 2x2 (ranks 0..3): S(0),S(1)". */
static void dtr__svg_spec_title(const dtr_spec_t *s, const char *side, char *buf, size_t len) {
    char shape[128], mesh[96], pl[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX];
    dtr_shape_format(s->shape, s->ndim, shape, sizeof shape);
    dtr_mesh_format(s->mesh, mesh, sizeof mesh);
    if (dtr_placements_format(s->placements, dtr_mesh_ndims(s->mesh), pl, sizeof pl) != DTR_OK)
        snprintf(pl, sizeof pl, "?");
    snprintf(buf, len, "%s%s %s on mesh %s: %s%s", side, shape, dtr_dtype_name(s->dtype), mesh,
             pl, s->ndim > 2 ? " (dims 1.. flattened)" : "");
}

/* The mesh grid's rows (mesh dim 0, where it has 2 dims or more), columns, and cell size:
 * 22 px, less where it would pass 352 px. */
static double dtr__svg_grid(const dtr_mesh_t *m, int64_t *rows, int64_t *cols) {
    *rows = dtr_mesh_ndims(m) >= 2 ? dtr_mesh_size(m, 0) : 1;
    *cols = dtr_mesh_nranks(m) / *rows;
    int64_t most = *rows > *cols ? *rows : *cols;
    double cell = most > 16 ? 352.0 / (double)most : 22;
    return cell < 2 ? 2 : cell;
}

/* A layout panel's height and width for a tensor drawn within W x H px. */
static double dtr__svg_panel_h(const dtr_spec_t *s, double W, double H) {
    int64_t rows, cols;
    double cell = dtr__svg_grid(s->mesh, &rows, &cols), grid = cell * (double)rows, w, h;
    dtr__svg_box(s, W, H, &w, &h);
    return 24 + (grid > h ? grid : h) + 16;
}

static double dtr__svg_panel_w(const dtr_spec_t *s, double W) {
    int64_t rows, cols;
    double cell = dtr__svg_grid(s->mesh, &rows, &cols);
    return cell * (double)cols + 20 + W;
}

/* The mesh as a grid of its ranks in their colours, at (x, y). Returns its bottom. */
static double dtr__svg_mesh(FILE *out, const dtr_mesh_t *m, double x, double y) {
    int64_t rows, cols;
    double cell = dtr__svg_grid(m, &rows, &cols);
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    bool named = dtr_mesh_nranks(m) <= DTR__SVG_NAMED;
    for (int64_t p = 0; p < rows * cols; p++) {
        int r;
        dtr_mesh_rank_at(m, coord, &r);
        double cx = x + (double)(p % cols) * cell, cy = y + (double)(p / cols) * cell;
        fprintf(out, "<rect class=\"rank\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                "fill=\"%s\" stroke=\"white\"><title>rank %d</title></rect>\n", cx, cy, cell,
                cell, dtr__svg_colour(r), r);
        if (named && cell >= 14) {
            char t[16];
            snprintf(t, sizeof t, "%d", r);
            dtr__svg_label(out, cx + cell / 2, cy + cell / 2 + 4, 11, "middle", t);
        }
        dtr__xcoord_next(m, coord);
    }
    return y + (double)rows * cell;
}

/* The ranks holding the block of coordinate p's rank (the same offset and shape) before p:
 * -1 where p is the first holder. */
static int64_t dtr__svg_seen(const dtr_spec_t *s, int64_t p, const dtr_layout_t *l) {
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    for (int64_t q = 0; q < p; q++, dtr__xcoord_next(s->mesh, coord)) {
        dtr_layout_t k;
        if (dtr_spec_layout_at(s, coord, &k) != DTR_OK) continue;
        if (memcmp(k.global_offset, l->global_offset, sizeof k.global_offset[0] * (size_t)l->ndim) == 0 &&
            memcmp(k.local_shape, l->local_shape, sizeof k.local_shape[0] * (size_t)l->ndim) == 0)
            return q;
    }
    return -1;
}

/* The names of the ranks holding l's block ("3 7", at most 4 then "+k"), into buf. */
static void dtr__svg_holders(const dtr_spec_t *s, const dtr_layout_t *l, char *buf, size_t len) {
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, n = dtr_mesh_nranks(s->mesh), named = 0;
    size_t at = 0;
    buf[0] = '\0';
    for (int64_t q = 0; q < n; q++, dtr__xcoord_next(s->mesh, coord)) {
        dtr_layout_t k;
        int r;
        if (dtr_spec_layout_at(s, coord, &k) != DTR_OK ||
            memcmp(k.global_offset, l->global_offset, sizeof k.global_offset[0] * (size_t)l->ndim) != 0 ||
            memcmp(k.local_shape, l->local_shape, sizeof k.local_shape[0] * (size_t)l->ndim) != 0)
            continue;
        dtr_mesh_rank_at(s->mesh, coord, &r);
        if (named++ < 4 && at < len) {
            int w = snprintf(buf + at, len - at, "%s%d", at ? " " : "", r);
            at += w > 0 ? (size_t)w : 0;
        }
    }
    if (named > 4 && at < len) snprintf(buf + at, len - at, " +%lld", (long long)(named - 4));
}

/* A layout panel at (x, y), the tensor drawn within W x H px; returns its bottom. */
static double dtr__svg_panel(FILE *out, const dtr_spec_t *s, const char *side, double x,
                             double y, double W, double H) {
    double w, h;
    dtr__svg_box(s, W, H, &w, &h);
    char title[512];
    dtr__svg_spec_title(s, side, title, sizeof title);
    dtr__svg_label(out, x, y + 14, 13, "start", title);
    y += 24;
    double bottom = dtr__svg_mesh(out, s->mesh, x, y);
    double tx = x + dtr__svg_panel_w(s, W) - W;
    int64_t rows, cols;
    dtr__svg_view(s, &rows, &cols);
    fprintf(out, "<rect class=\"tensor\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
            "fill=\"none\" stroke=\"#333\"/>\n", tx, y, w, h);
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, n = dtr_mesh_nranks(s->mesh);
    bool named = n <= DTR__SVG_NAMED;
    for (int64_t p = 0; p < n; p++, dtr__xcoord_next(s->mesh, coord)) {
        dtr_layout_t l;
        int r;
        if (dtr_spec_layout_at(s, coord, &l) != DTR_OK || l.bytes == 0 ||
            (named && dtr__svg_seen(s, p, &l) >= 0))
            continue; /* (empty, or a replica drawn with its first holder) */
        dtr_mesh_rank_at(s->mesh, coord, &r);
        int64_t r0, r1, c0, c1;
        dtr__svg_span(s, &l, &r0, &r1, &c0, &c1);
        double bx = tx + w * (double)c0 / (double)cols, by = y + h * (double)r0 / (double)rows;
        double bw = w * (double)(c1 - c0) / (double)cols, bh = h * (double)(r1 - r0) / (double)rows;
        char holders[64] = "";
        if (named) dtr__svg_holders(s, &l, holders, sizeof holders);
        fprintf(out, "<rect class=\"block\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                "fill=\"%s\" fill-opacity=\"0.8\" stroke=\"white\"><title>rank%s %s: rows "
                "%lld..%lld, columns %lld..%lld</title></rect>\n", bx, by, bw, bh,
                dtr__svg_colour(r), strchr(holders, ' ') ? "s" : "", named ? holders : "",
                (long long)r0, (long long)r1 - 1, (long long)c0, (long long)c1 - 1);
        if (named && bw >= 14 && bh >= 12)
            dtr__svg_label(out, bx + bw / 2, by + bh / 2 + 4, bh >= 24 && bw >= 40 ? 12 : 9,
                           "middle", holders);
    }
    return (bottom > y + h ? bottom : y + h) + 16;
}

dtr_status_t dtr_layout_print_svg(const dtr_spec_t *spec, FILE *out) {
    DTR_CHECK_PTR(spec, __func__);
    DTR_CHECK_PTR(out, __func__);
    DTR_CHECK(dtr__check_spec(spec, "spec", __func__));
    dtr__svg_begin(out, dtr__svg_panel_w(spec, 480) + 20, dtr__svg_panel_h(spec, 480, 320) + 8);
    dtr__svg_panel(out, spec, "", 10, 4, 480, 320);
    return dtr__svg_end(out, __func__);
}

/* ---- changes ------------------------------------------------------------------------------ */

/* A single-mesh plan's steps as lines at (x, y); returns the bottom. */
static double dtr__svg_steps(FILE *out, const dtr_plan_t *p, double x, double y) {
    char line[256];
    if (p->nsteps == 0) {
        dtr__svg_label(out, x, y + 14, 12, "start", "no step: the layouts are the same");
        return y + 24;
    }
    for (int k = 0; k < p->nsteps; k++) {
        const dtr_step_t *st = &p->steps[k];
        char from[DTR_PLACEMENT_TEXT_MAX], to[DTR_PLACEMENT_TEXT_MAX], dim[24] = "the mesh";
        dtr_placement_format(st->from, from, sizeof from);
        dtr_placement_format(st->to, to, sizeof to);
        if (st->mesh_dim >= 0) snprintf(dim, sizeof dim, "mesh dim %d", st->mesh_dim);
        snprintf(line, sizeof line, "step %d: %s over %s, %s -> %s, at most %lld bytes in a rank",
                 k + 1, dtr_step_kind_info(st->kind)->name, dim, from, to,
                 (long long)st->recv_bytes_max);
        fprintf(out, "<text class=\"step\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\">", x,
                y + 14 + 18 * k);
        dtr__svg_text(out, line);
        fputs("</text>\n", out);
    }
    return y + 18 * p->nsteps + 12;
}

/* One tensor's change on one mesh: source, steps, destination; returns the bottom. */
static double dtr__svg_one(FILE *out, const dtr_plan_t *p, const char *tag, double y) {
    char side[48];
    snprintf(side, sizeof side, "%sfrom ", tag);
    dtr__svg_panel(out, &p->src, side, 10, y, 480, 240);
    y += dtr__svg_panel_h(&p->src, 480, 240);
    y = dtr__svg_steps(out, p, 10, y);
    snprintf(side, sizeof side, "%sto ", tag);
    dtr__svg_panel(out, &p->dst, side, 10, y, 480, 240);
    return y + dtr__svg_panel_h(&p->dst, 480, 240);
}

static double dtr__svg_one_h(const dtr_plan_t *p) {
    return dtr__svg_panel_h(&p->src, 480, 240) + 18 * (p->nsteps ? p->nsteps : 1) + 12 +
           dtr__svg_panel_h(&p->dst, 480, 240);
}

/* The position of rank r in ranks[0..n) (ascending), or -1. */
static int64_t dtr__svg_at(const int *ranks, int64_t n, int r) {
    for (int64_t i = 0; i < n; i++)
        if (ranks[i] == r) return i;
    return -1;
}

/* The ranks of a mesh, ascending, into out (n of them). */
static int64_t dtr__svg_ranks(const dtr_mesh_t *m, int *out) {
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, n = dtr_mesh_nranks(m);
    for (int64_t p = 0; p < n; p++, dtr__xcoord_next(m, coord)) dtr_mesh_rank_at(m, coord, &out[p]);
    qsort(out, (size_t)n, sizeof *out, dtr__int_cmp);
    return n;
}

/* The message matrix of a change between meshes at (x, y), cells of `cell` px; returns its
 * bottom. marks: one per message (class msg), or per pair of ranks past DTR__SVG_MARKS. */
static double dtr__svg_matrix(FILE *out, const dtr_cross_plan_t *p, const int *from, int64_t nf,
                              const int *to, int64_t nt, double x, double y, double cell) {
    char t[128];
    snprintf(t, sizeof t, "messages: %lld (a row per sending rank, a column per receiving one)",
             (long long)p->nmsgs);
    dtr__svg_label(out, x, y + 14, 13, "start", t);
    y += 24;
    double mx = x + 34, my = y + 16;
    for (int64_t j = 0; j < nt && nt <= DTR__SVG_NAMED; j++) {
        snprintf(t, sizeof t, "%d", to[j]);
        dtr__svg_label(out, mx + cell * ((double)j + 0.5), y + 11, 10, "middle", t);
    }
    for (int64_t i = 0; i < nf && nf <= DTR__SVG_NAMED; i++) {
        snprintf(t, sizeof t, "%d", from[i]);
        dtr__svg_label(out, mx - 4, my + cell * ((double)i + 0.5) + 4, 10, "end", t);
    }
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#999\"/>\n", mx, my, cell * (double)nt, cell * (double)nf);
    int64_t most = 1;
    for (int64_t k = 0; k < p->nmsgs; k++) most = p->msgs[k].bytes > most ? p->msgs[k].bytes : most;
    bool each = p->nmsgs <= DTR__SVG_MARKS;
    int64_t *count = calloc((size_t)(nf * nt > 0 ? nf * nt : 1), sizeof *count);
    int64_t *done = calloc((size_t)(nf * nt > 0 ? nf * nt : 1), sizeof *done);
    int64_t *bytes = calloc((size_t)(nf * nt > 0 ? nf * nt : 1), sizeof *bytes);
    if (count == NULL || done == NULL || bytes == NULL) {
        free(count), free(done), free(bytes);
        return my + cell * (double)nf + 16;
    }
    for (int64_t k = 0; k < p->nmsgs; k++) {
        int64_t i = dtr__svg_at(from, nf, p->msgs[k].from), j = dtr__svg_at(to, nt, p->msgs[k].to);
        if (i >= 0 && j >= 0) count[i * nt + j]++, bytes[i * nt + j] += p->msgs[k].bytes;
    }
    for (int64_t k = 0; each && k < p->nmsgs; k++) {
        const dtr__xmsg_t *m = &p->msgs[k];
        int64_t i = dtr__svg_at(from, nf, m->from), j = dtr__svg_at(to, nt, m->to), c;
        if (i < 0 || j < 0) continue;
        c = i * nt + j;
        double h = cell / (double)count[c], yy = my + cell * (double)i + h * (double)done[c]++;
        bool keep = m->from == m->to;
        fprintf(out, "<rect class=\"msg\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                "fill=\"%s\" fill-opacity=\"%.2f\" stroke=\"%s\"><title>tensor %d, round %d: "
                "%lld bytes, rank %d -> rank %d%s</title></rect>\n", mx + cell * (double)j, yy,
                cell, h, keep ? "none" : dtr__svg_colour(m->from),
                keep ? 0.0 : 0.25 + 0.75 * (double)m->bytes / (double)most,
                keep ? dtr__svg_colour(m->from) : "white", m->tensor, m->round,
                (long long)m->bytes, m->from, m->to, keep ? " (kept: a local copy)" : "");
    }
    for (int64_t c = 0; !each && c < nf * nt; c++)
        if (count[c] > 0)
            fprintf(out, "<rect class=\"pair\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                    "height=\"%.2f\" fill=\"%s\"><title>%lld messages, %lld bytes, rank %d -> "
                    "rank %d</title></rect>\n", mx + cell * (double)(c % nt),
                    my + cell * (double)(c / nt), cell, cell, dtr__svg_colour(from[c / nt]),
                    (long long)count[c], (long long)bytes[c], from[c / nt], to[c % nt]);
    free(count), free(done), free(bytes);
    return my + cell * (double)nf + 16;
}

/* A change between meshes: its first tensor's sides and the message matrix. */
static dtr_status_t dtr__svg_cross(FILE *out, const dtr_cross_plan_t *p, const char *func) {
    const dtr__xtensor_t *x = &p->t[0];
    int64_t na = dtr_mesh_nranks(x->src.mesh), nb = dtr_mesh_nranks(x->dst.mesh);
    int *from = malloc(sizeof *from * (size_t)na), *to = malloc(sizeof *to * (size_t)nb);
    if (from == NULL || to == NULL) {
        free(from), free(to);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "the matrix's ranks");
    }
    dtr__svg_ranks(x->src.mesh, from);
    dtr__svg_ranks(x->dst.mesh, to);
    int64_t most = na > nb ? na : nb;
    double cell = most > 20 ? 480.0 / (double)most : 24;
    char tag[64] = "";
    if (p->ntensors > 1) snprintf(tag, sizeof tag, "tensor 0 of %d, ", p->ntensors);
    double w = dtr__svg_panel_w(&x->src, 480), w2 = dtr__svg_panel_w(&x->dst, 480);
    double h = dtr__svg_panel_h(&x->src, 480, 240) + dtr__svg_panel_h(&x->dst, 480, 240) + 40 + 24 + 16 +
               cell * (double)na + 16;
    dtr__svg_begin(out, (w > w2 ? w : w2) + 60, h);
    char side[80];
    snprintf(side, sizeof side, "%sfrom ", tag);
    dtr__svg_panel(out, &x->src, side, 10, 4, 480, 240);
    double y = 4 + dtr__svg_panel_h(&x->src, 480, 240);
    snprintf(side, sizeof side, "%sto ", tag);
    dtr__svg_panel(out, &x->dst, side, 10, y, 480, 240);
    y += dtr__svg_panel_h(&x->dst, 480, 240);
    dtr__svg_matrix(out, p, from, na, to, nb, 10, y, cell);
    free(from), free(to);
    return dtr__svg_end(out, func);
}

dtr_status_t dtr_change_print_svg(const dtr_change_t *change, FILE *out) {
    DTR_CHECK_PTR(change, __func__);
    DTR_CHECK_PTR(out, __func__);
    const dtr_cross_plan_t *cross = dtr_change_cross_plan(change);
    if (cross != NULL) return dtr__svg_cross(out, cross, __func__);
    const dtr_plan_t *one = dtr_change_plan(change);
    const dtr_batch_plan_t *batch = dtr_change_batch_plan(change);
    int n = one != NULL ? 1 : batch->ntensors, drawn = n < DTR__SVG_TENSORS ? n : DTR__SVG_TENSORS;
    const dtr_plan_t *plans = one != NULL ? one : batch->plans;
    double h = 8, w = 0;
    for (int i = 0; i < drawn; i++) {
        double a = dtr__svg_panel_w(&plans[i].src, 480), b = dtr__svg_panel_w(&plans[i].dst, 480);
        h += dtr__svg_one_h(&plans[i]) + 8;
        w = a > w ? a : w, w = b > w ? b : w;
    }
    dtr__svg_begin(out, w + 200, h + (n > drawn ? 24 : 0));
    double y = 4;
    for (int i = 0; i < drawn; i++) {
        char tag[32] = "";
        if (n > 1) snprintf(tag, sizeof tag, "tensor %d: ", i);
        y = dtr__svg_one(out, &plans[i], tag, y) + 8;
    }
    if (n > drawn) {
        char more[64];
        snprintf(more, sizeof more, "and %d more tensors (dtr plan --batch lists them)", n - drawn);
        dtr__svg_label(out, 10, y + 14, 12, "start", more);
    }
    return dtr__svg_end(out, __func__);
}
