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

enum {
    DTR__SVG_NAMED = 64,     /* ranks past which blocks and cells carry no names */
    DTR__SVG_MARKS = 4096,   /* messages past which the matrix has a mark per pair */
    DTR__SVG_BLOCKS = 4096,  /* distinct blocks past which a panel says how many instead */
    DTR__SVG_RANKS = 65536,  /* ranks past which neither blocks nor grid cells are drawn */
    DTR__SVG_TENSORS = 4,    /* tensors of a batch drawn */
};

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

/* The title of a spec: "8x6 f32 on mesh 2x2: S(0),S(1)". */
static void dtr__svg_spec_title(const dtr_spec_t *s, const char *side, char *buf, size_t len) {
    char shape[128], mesh[96], pl[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX];
    dtr_shape_format(s->shape, s->ndim, shape, sizeof shape);
    dtr_mesh_format(s->mesh, mesh, sizeof mesh);
    dtr_placements_describe(s->placements, dtr_mesh_ndims(s->mesh), pl, sizeof pl);
    snprintf(buf, len, "%s%s %s on mesh %s: %s%s", side, shape, dtr_dtype_name(s->dtype), mesh,
             pl, s->ndim > 2 ? " (dims 1.. flattened)" : "");
}

/* The mesh grid's rows and columns (mesh dim 0 by the rest; a 1-d mesh in rows of 64) and
 * cell size: 22 px, less where the grid would pass 352 px. No grid past 4096 ranks (0 x 0). */
static double dtr__svg_grid(const dtr_mesh_t *m, int64_t *rows, int64_t *cols) {
    int64_t n = dtr_mesh_nranks(m);
    *rows = dtr_mesh_ndims(m) >= 2 ? dtr_mesh_size(m, 0) : 1;
    *cols = n / *rows;
    if (*rows == 1 && *cols > 64) *cols = 64, *rows = (n + 63) / 64;
    if (n > DTR__SVG_BLOCKS) *rows = *cols = 0;
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
    return (cols > 0 ? cell * (double)cols : 120) + 20 + W;
}

/* The px a panel's title takes (13 px type; about 0.6 em a character), margins included. */
static double dtr__svg_title_w(const dtr_spec_t *s, const char *side) {
    char title[512];
    dtr__svg_spec_title(s, side, title, sizeof title);
    return (double)strlen(title) * 13 * 0.6 + 30;
}

/* The mesh as a grid of its ranks in their colours, at (x, y) (past 4096 ranks a line saying
 * how many). Returns its bottom. */
static double dtr__svg_mesh(FILE *out, const dtr_mesh_t *m, double x, double y) {
    int64_t rows, cols, n = dtr_mesh_nranks(m);
    double cell = dtr__svg_grid(m, &rows, &cols);
    if (cols == 0) {
        char t[48];
        snprintf(t, sizeof t, "%lld ranks", (long long)n);
        dtr__svg_label(out, x, y + 14, 12, "start", t);
        return y + 24;
    }
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    bool named = n <= DTR__SVG_NAMED;
    for (int64_t p = 0; p < n; p++) {
        int r;
        dtr_mesh_rank_at(m, coord, &r);
        double cx = x + (double)(p % cols) * cell, cy = y + (double)(p / cols) * cell;
        fprintf(out, "<rect class=\"rank\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                "fill=\"%s\"%s><title>rank %d</title></rect>\n", cx, cy, cell, cell,
                dtr__svg_colour(r), cell >= 6 ? " stroke=\"white\"" : "", r);
        char t[16];
        snprintf(t, sizeof t, "%d", r);
        if (named && cell >= (double)strlen(t) * 6.5 + 2)
            dtr__svg_label(out, cx + cell / 2, cy + cell / 2 + 4, 11, "middle", t);
        dtr__xcoord_next(m, coord);
    }
    return y + (double)rows * cell;
}

/* One rank's block, for grouping replicas. */
typedef struct {
    dtr_layout_t l;
    int rank;
    int64_t pos; /* its position in the mesh, row-major */
} dtr__svg_held_t;

/* By block (offset, then shape), then position: a block's holders come together, in mesh
 * order. */
static int dtr__svg_cmp_held(const void *a, const void *b) {
    const dtr__svg_held_t *x = a, *y = b;
    for (int d = 0; d < x->l.ndim; d++) {
        if (x->l.global_offset[d] != y->l.global_offset[d])
            return x->l.global_offset[d] < y->l.global_offset[d] ? -1 : 1;
        if (x->l.local_shape[d] != y->l.local_shape[d])
            return x->l.local_shape[d] < y->l.local_shape[d] ? -1 : 1;
    }
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static bool dtr__svg_same_block(const dtr_layout_t *a, const dtr_layout_t *b) {
    for (int d = 0; d < a->ndim; d++)
        if (a->global_offset[d] != b->global_offset[d] || a->local_shape[d] != b->local_shape[d])
            return false;
    return true;
}

/* One block, h[0..n) its holders in mesh order: a rectangle in the first one's colour, named
 * by them ("3 7", at most 4 then "+k") where n_ranks is small enough for names. */
static void dtr__svg_block(FILE *out, const dtr_spec_t *s, const dtr__svg_held_t *h, int64_t n,
                           bool named, double tx, double ty, double w, double hgt) {
    int64_t rows, cols, r0, r1, c0, c1;
    dtr__svg_view(s, &rows, &cols);
    dtr__svg_span(s, &h[0].l, &r0, &r1, &c0, &c1);
    double bx = tx + w * (double)c0 / (double)cols, by = ty + hgt * (double)r0 / (double)rows;
    double bw = w * (double)(c1 - c0) / (double)cols, bh = hgt * (double)(r1 - r0) / (double)rows;
    char names[64] = "";
    size_t at = 0;
    for (int64_t i = 0; i < n && i < 4 && at < sizeof names; i++) {
        int k = snprintf(names + at, sizeof names - at, "%s%d", i ? " " : "", h[i].rank);
        at += k > 0 ? (size_t)k : 0;
    }
    if (n > 4 && at < sizeof names) snprintf(names + at, sizeof names - at, " +%lld", (long long)(n - 4));
    /* (a stroke on a block under 3 px would hide it) */
    fprintf(out, "<rect class=\"block\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
            "fill=\"%s\" fill-opacity=\"0.8\"%s><title>rank%s %s: rows %lld..%lld, columns "
            "%lld..%lld</title></rect>\n", bx, by, bw, bh, dtr__svg_colour(h[0].rank),
            bw >= 3 && bh >= 3 ? " stroke=\"white\"" : "", n > 1 ? "s" : "", names,
            (long long)r0, (long long)r1 - 1, (long long)c0, (long long)c1 - 1);
    double size = bh >= 24 && bw >= 40 ? 12 : 9;
    if (named && bh >= 12 && bw >= (double)strlen(names) * size * 0.62 + 4)
        dtr__svg_label(out, bx + bw / 2, by + bh / 2 + 4, size, "middle", names);
}

/* The tensor's blocks: each distinct one once (its replicas grouped), where there are at
 * most DTR__SVG_BLOCKS of them; else a line saying how many. */
static void dtr__svg_blocks(FILE *out, const dtr_spec_t *s, double tx, double ty, double w,
                            double h) {
    int64_t n = dtr_mesh_nranks(s->mesh), coord[DTR_MAX_MESH_DIMS] = {0}, kept = 0;
    dtr__svg_held_t *v = n <= DTR__SVG_RANKS ? malloc(sizeof *v * (size_t)n) : NULL;
    for (int64_t p = 0; v != NULL && p < n; p++, dtr__xcoord_next(s->mesh, coord)) {
        if (dtr_spec_layout_at(s, coord, &v[kept].l) != DTR_OK || v[kept].l.bytes == 0) continue;
        dtr_mesh_rank_at(s->mesh, coord, &v[kept].rank);
        v[kept++].pos = p;
    }
    int64_t distinct = 0;
    if (v != NULL) {
        qsort(v, (size_t)kept, sizeof *v, dtr__svg_cmp_held);
        for (int64_t i = 0; i < kept; i++) distinct += i == 0 || !dtr__svg_same_block(&v[i].l, &v[i - 1].l);
    }
    if (v == NULL || distinct > DTR__SVG_BLOCKS) {
        char note[128];
        snprintf(note, sizeof note, "%lld ranks, %s distinct blocks: too many to draw",
                 (long long)n, v == NULL ? "as many" : "over 4096");
        dtr__svg_label(out, tx + 8, ty + 18, 12, "start", note);
        free(v);
        return;
    }
    for (int64_t i = 0, j; i < kept; i = j) {
        for (j = i + 1; j < kept && dtr__svg_same_block(&v[j].l, &v[i].l);) j++;
        dtr__svg_block(out, s, &v[i], j - i, n <= DTR__SVG_NAMED, tx, ty, w, h);
    }
    free(v);
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
    fprintf(out, "<rect class=\"tensor\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
            "fill=\"none\" stroke=\"#333\"/>\n", tx, y, w, h);
    dtr__svg_blocks(out, s, tx, y, w, h);
    return (bottom > y + h ? bottom : y + h) + 16;
}

dtr_status_t dtr_layout_print_svg(const dtr_spec_t *spec, FILE *out) {
    DTR_CHECK_PTR(spec, __func__);
    DTR_CHECK_PTR(out, __func__);
    DTR_CHECK(dtr__check_spec(spec, "spec", __func__));
    double w = dtr__svg_panel_w(spec, 480) + 20, t = dtr__svg_title_w(spec, "");
    dtr__svg_begin(out, w > t ? w : t, dtr__svg_panel_h(spec, 480, 320) + 8);
    dtr__svg_panel(out, spec, "", 10, 4, 480, 320);
    return dtr__svg_end(out, __func__);
}

/* ---- changes ------------------------------------------------------------------------------ */

/* Step k's line: its kind, where, and the placements before and after it (the whole lists:
 * an exchange over the mesh changes several). */
static void dtr__svg_step_line(const dtr_plan_t *p, int k, char *line, size_t len) {
    const dtr_step_t *st = &p->steps[k];
    int m = dtr_mesh_ndims(p->src.mesh);
    const dtr_placement_t *after = k + 1 < p->nsteps ? p->steps[k + 1].before : p->dst.placements;
    char from[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX], to[sizeof from], dim[24] = "the mesh";
    if (dtr_placements_format(st->before, m, from, sizeof from) != DTR_OK) snprintf(from, sizeof from, "?");
    if (dtr_placements_format(after, m, to, sizeof to) != DTR_OK) snprintf(to, sizeof to, "?");
    if (st->mesh_dim >= 0) snprintf(dim, sizeof dim, "mesh dim %d", st->mesh_dim);
    snprintf(line, len, "step %d: %s over %s, %s -> %s, at most %lld bytes in a rank", k + 1,
             dtr_step_kind_info(st->kind)->name, dim, from, to, (long long)st->recv_bytes_max);
}

/* The px the widest step line takes (12 px type). */
static double dtr__svg_steps_w(const dtr_plan_t *p) {
    double w = 0;
    for (int k = 0; k < p->nsteps; k++) {
        char line[1024];
        dtr__svg_step_line(p, k, line, sizeof line);
        double x = (double)strlen(line) * 12 * 0.6 + 30;
        w = x > w ? x : w;
    }
    return w;
}

/* A single-mesh plan's steps as lines at (x, y); returns the bottom. */
static double dtr__svg_steps(FILE *out, const dtr_plan_t *p, double x, double y) {
    if (p->nsteps == 0) {
        dtr__svg_label(out, x, y + 14, 12, "start", "no step: the layouts are the same");
        return y + 24;
    }
    for (int k = 0; k < p->nsteps; k++) {
        char line[1024];
        dtr__svg_step_line(p, k, line, sizeof line);
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
    char t[160];
    int64_t kept = 0;
    for (int64_t k = 0; k < p->nmsgs; k++) kept += p->msgs[k].from == p->msgs[k].to;
    snprintf(t, sizeof t, "%lld messages, %lld boxes kept (rows: senders, columns: receivers)",
             (long long)(p->nmsgs - kept), (long long)kept);
    dtr__svg_label(out, x, y + 14, 13, "start", t);
    y += 24;
    double mx = x + 34, my = y + 16;
    for (int64_t j = 0; j < nt && nt <= DTR__SVG_NAMED; j++) {
        snprintf(t, sizeof t, "%d", to[j]);
        if (cell >= (double)strlen(t) * 6 + 2)
            dtr__svg_label(out, mx + cell * ((double)j + 0.5), y + 11, 10, "middle", t);
    }
    for (int64_t i = 0; i < nf && nf <= DTR__SVG_NAMED && cell >= 10; i++) {
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
    DTR_CHECK(dtr__xensure(p, -1)); /* (every rank's messages) */
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
    char pre[512] = "";
    if (x->has_pre) { /* what runs on the source mesh first, which the matrix's senders hold */
        char mid[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX];
        dtr_placements_describe(x->mid.placements, dtr_mesh_ndims(x->mid.mesh), mid, sizeof mid);
        size_t at = (size_t)snprintf(pre, sizeof pre, "first, on the source mesh, to %s %s:", mid,
                                     dtr_dtype_name(x->mid.dtype));
        for (int k = 0; k < x->pre->nsteps && at < sizeof pre; k++)
            at += (size_t)snprintf(pre + at, sizeof pre - at, "%s %s", k ? "," : "",
                                   dtr_step_kind_info(x->pre->steps[k].kind)->name);
        if (x->pre->nsteps == 0 && at < sizeof pre) snprintf(pre + at, sizeof pre - at, " a cast");
    } else if (x->wire_cast) {
        snprintf(pre, sizeof pre, "cast from %s to %s as each box is packed",
                 dtr_dtype_name(x->src.dtype), dtr_dtype_name(x->dst.dtype));
    }
    double t1 = dtr__svg_title_w(&x->src, "tensor 0 of 1000000, from "),
           t2 = dtr__svg_title_w(&x->dst, "tensor 0 of 1000000, to "), tw = t1 > t2 ? t1 : t2;
    double wide = (w > w2 ? w : w2) + 60, lines = (double)strlen(pre) * 12 * 0.6 + 30;
    wide = wide > tw ? wide : tw, wide = wide > lines ? wide : lines;
    wide = wide > 34 + cell * (double)nb + 40 ? wide : 34 + cell * (double)nb + 40;
    dtr__svg_begin(out, wide > 620 ? wide : 620, h + (pre[0] ? 20 : 0));
    char side[80];
    snprintf(side, sizeof side, "%sfrom ", tag);
    dtr__svg_panel(out, &x->src, side, 10, 4, 480, 240);
    double y = 4 + dtr__svg_panel_h(&x->src, 480, 240);
    if (pre[0]) {
        dtr__svg_label(out, 10, y + 10, 12, "start", pre);
        y += 20;
    }
    snprintf(side, sizeof side, "%sto ", tag);
    dtr__svg_panel(out, &x->dst, side, 10, y, 480, 240);
    y += dtr__svg_panel_h(&x->dst, 480, 240);
    dtr__svg_matrix(out, p, from, na, to, nb, 10, y, cell);
    free(from), free(to);
    return dtr__svg_end(out, func);
}

/* Plans within one mesh, n of them (the first DTR__SVG_TENSORS drawn). */
static dtr_status_t dtr__svg_plans(FILE *out, const dtr_plan_t *plans, int n, const char *func) {
    int drawn = n < DTR__SVG_TENSORS ? n : DTR__SVG_TENSORS;
    double h = 8, w = 0;
    for (int i = 0; i < drawn; i++) {
        double x[5] = {dtr__svg_panel_w(&plans[i].src, 480) + 20,
                       dtr__svg_panel_w(&plans[i].dst, 480) + 20, dtr__svg_steps_w(&plans[i]),
                       dtr__svg_title_w(&plans[i].src, "tensor 0: from "),
                       dtr__svg_title_w(&plans[i].dst, "tensor 0: to ")};
        h += dtr__svg_one_h(&plans[i]) + 8;
        for (int k = 0; k < 5; k++) w = x[k] > w ? x[k] : w;
    }
    dtr__svg_begin(out, w, h + (n > drawn ? 24 : 0));
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
    return dtr__svg_end(out, func);
}

dtr_status_t dtr_plan_print_svg(const dtr_plan_t *plan, FILE *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    DTR_CHECK(dtr__check_spec(&plan->src, "plan->src", __func__));
    DTR_CHECK(dtr__check_spec(&plan->dst, "plan->dst", __func__));
    return dtr__svg_plans(out, plan, 1, __func__);
}

dtr_status_t dtr_change_print_svg(const dtr_change_t *change, FILE *out) {
    DTR_CHECK_PTR(change, __func__);
    DTR_CHECK_PTR(out, __func__);
    const dtr_cross_plan_t *cross = dtr_change_cross_plan(change);
    if (cross != NULL) return dtr__svg_cross(out, cross, __func__);
    const dtr_plan_t *one = dtr_change_plan(change);
    const dtr_batch_plan_t *batch = dtr_change_batch_plan(change);
    return one != NULL ? dtr__svg_plans(out, one, 1, __func__)
                       : dtr__svg_plans(out, batch->plans, batch->ntensors, __func__);
}
