/*
 * A change between meshes, timed three ways side by side in one run (bench/cross_mesh_bench.sh
 * drives it and writes the table):
 *
 *   dtr        the tensors as one batch (dtr_cross_plan_create_batch, one round of messages
 *              per pair of ranks, a staging cap where given), and the same tensors one plan
 *              at a time (dtr_cross_plan_create each);
 *   gather     what people do without it, with Open MPI's own calls on the same buffers:
 *              per tensor, MPI_Allreduce of a Partial source over its Partial mesh dims,
 *              MPI_Allgatherv of the blocks over the Shard dims into the whole tensor on every
 *              source rank, MPI_Isend/MPI_Irecv of the whole tensor to each destination rank
 *              (destination j from source j mod |A|), and the slice copied out;
 *   limit      the busiest destination rank's output (every byte of its target blocks, received
 *              or kept) written once at the memcpy bandwidth of as many processes as ranks,
 *              measured in the same run (a Partial source's reduction reads more: the limit
 *              leaves that out, so it is lower than any run can reach there).
 *
 * Every destination block of dtr's result is compared byte for byte with gather-then-slice's
 * (the values are small integers, so every order of reduction gives the same sums).
 *
 * Usage: mpirun -n N cross_mesh_bench --list gpt2-medium|uniform:SIZE:COUNT
 *          --mesh A --ranks LIST --to-mesh B --to-ranks LIST [--from P] [--to P] [--relabel]
 *          [--staging-cap BYTES] [--iters N]
 * gpt2-medium: GPT-2 medium's 292 tensors (f32, 355M parameters), each --from on A (default
 * S(0),P) and, on B, as tensor parallelism shards them: the embedding by vocabulary (S(0)),
 * the attention's and MLP's first weights by column (S(1)), their second by row (S(0)), the
 * first ones' biases S(0), norms and the other biases R. uniform:SIZE:COUNT: COUNT tensors
 * of SIZE (16K, 16M: rows of 1024 f32), --from -> --to. Prints one JSON line (rank 0).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "backends/mpi/dtr_mpi.h"
#include "bench/copy_probe.h"

typedef struct {
    int64_t shape[2];
    int ndim;
    const char *to;
} tdesc_t;

typedef struct {
    const char *list, *mesh, *ranks, *to_mesh, *to_ranks, *from, *to;
    bool relabel;
    int64_t cap;
    int iters;
} args_t;

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what) {
    fprintf(stderr, "cross_mesh_bench: %s: %s\n", what, dtr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void add(tdesc_t *t, int *n, int64_t r, int64_t c, const char *to) {
    t[*n] = (tdesc_t){{r, c}, c > 0 ? 2 : 1, to};
    ++*n;
}

/* The tensor list: GPT-2 medium's, or COUNT uniform ones. */
static int tensor_list(const args_t *a, tdesc_t *t) {
    int n = 0;
    if (strcmp(a->list, "gpt2-medium") == 0) {
        const int64_t d = 1024;
        add(t, &n, 50257, d, "S(0)"); /* wte: by vocabulary */
        add(t, &n, 1024, d, "R");     /* wpe */
        for (int layer = 0; layer < 24; layer++) {
            add(t, &n, d, 0, "R"), add(t, &n, d, 0, "R");        /* ln_1 */
            add(t, &n, d, 3 * d, "S(1)"), add(t, &n, 3 * d, 0, "S(0)"); /* c_attn */
            add(t, &n, d, d, "S(0)"), add(t, &n, d, 0, "R");         /* attn c_proj */
            add(t, &n, d, 0, "R"), add(t, &n, d, 0, "R");            /* ln_2 */
            add(t, &n, d, 4 * d, "S(1)"), add(t, &n, 4 * d, 0, "S(0)"); /* c_fc */
            add(t, &n, 4 * d, d, "S(0)"), add(t, &n, d, 0, "R");     /* mlp c_proj */
        }
        add(t, &n, d, 0, "R"), add(t, &n, d, 0, "R"); /* ln_f */
        return n;
    }
    long long size = 0;
    int count = 0;
    char unit = 'M';
    if (sscanf(a->list, "uniform:%lld%c:%d", &size, &unit, &count) != 3 || size < 1 || count < 1 ||
        count > 4096 || (unit != 'K' && unit != 'M')) {
        fprintf(stderr, "cross_mesh_bench: --list: gpt2-medium or uniform:SIZE{K,M}:COUNT\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int64_t rows = unit == 'K' ? size / 4 : size * 256; /* rows of 1024 f32 */
    for (int k = 0; k < count; k++) add(t, &n, rows > 0 ? rows : 1, 1024, a->to);
    return n;
}

static dtr_spec_t spec(const dtr_mesh_t *m, const char *text, const tdesc_t *t) {
    dtr_placement_t p[8];
    int np;
    dtr_spec_t s;
    if (dtr_placements_parse(text, p, 8, &np) != DTR_OK) die(text);
    if (dtr_spec_init(&s, m, p, np, t->shape, t->ndim, DTR_F32) != DTR_OK) die(text);
    return s;
}

static dtr_mesh_t *mesh(const char *text, const char *ranks) {
    int r[4096], n = 0;
    for (const char *c = ranks; c != NULL && *c; c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL)
        r[n++] = atoi(c);
    dtr_mesh_t *m = NULL;
    if (dtr_mesh_parse(text, n ? r : NULL, n, &m) != DTR_OK) die("--mesh");
    return m;
}

/* The copy bandwidth of every rank at once (GB/s per rank, each byte counted read and
 * written; bench/copy_probe.h: from and to memory, the best of 3 medians). */
static double copy_gbps(void) {
    copy_probe_t p;
    if (!copy_probe(64ll << 20, 7, 3, 0, &p)) die("the copy probe's arena");
    return p.gbps;
}

/* The run's state: the specs and plans, this rank's buffers, and gather-then-slice's groups
 * and scratch. */
typedef struct {
    int n;
    dtr_spec_t *src, *dst; /* dst as the batch delivers it (relabeled where asked) */
    dtr_cross_plan_t *batch, **one;
    dtr_context_t *ctx;
    float **in, **out, **ref; /* the source block; dtr's result; gather-then-slice's */
    size_t *in_bytes, *out_bytes;
    int64_t total;
    MPI_Comm comm_p, comm_s; /* A's ranks sharing every coordinate but the Partial (Shard) dims */
    int ns, *s_world;        /* comm_s's members' world ranks */
    char *red, *gathered, *whole, *inbox;
    int *counts, *displs;
} bench_t;

/* The linear index of coord over the mesh dims where `pick` holds (kind == want, or !=). */
static int linear(const dtr_mesh_t *m, const int64_t *coord, const dtr_placement_t *p, int want,
                  bool same) {
    int v = 0;
    for (int i = 0; i < dtr_mesh_ndims(m); i++)
        if (((int)p[i].kind == want) == same) v = v * (int)dtr_mesh_size(m, i) + (int)coord[i];
    return v;
}

/* The groups of A's ranks gather-then-slice uses (every tensor has the same --from). */
static void groups(bench_t *b, int rank) {
    const dtr_spec_t *s = &b->src[0];
    int64_t coord[8];
    bool in_a = dtr_mesh_coord(s->mesh, rank, coord) == DTR_OK;
    int cp = in_a ? linear(s->mesh, coord, s->placements, DTR_PARTIAL, false) : MPI_UNDEFINED;
    int cs = in_a ? linear(s->mesh, coord, s->placements, DTR_SHARD, false) : MPI_UNDEFINED;
    MPI_Comm_split(MPI_COMM_WORLD, cp, in_a ? linear(s->mesh, coord, s->placements, DTR_PARTIAL, true) : 0, &b->comm_p);
    MPI_Comm_split(MPI_COMM_WORLD, cs, in_a ? linear(s->mesh, coord, s->placements, DTR_SHARD, true) : 0, &b->comm_s);
    if (!in_a) return;
    MPI_Comm_size(b->comm_s, &b->ns);
    b->s_world = malloc(sizeof *b->s_world * (size_t)b->ns);
    b->counts = malloc(sizeof *b->counts * (size_t)b->ns);
    b->displs = malloc(sizeof *b->displs * (size_t)b->ns);
    MPI_Allgather(&rank, 1, MPI_INT, b->s_world, 1, MPI_INT, b->comm_s);
}

/* Every rank's buffers; the source blocks filled with small integers (exact sums). */
static void setup(bench_t *b, int rank) {
    size_t n = (size_t)b->n, most = 0;
    b->in = calloc(n, sizeof *b->in), b->out = calloc(n, sizeof *b->out), b->ref = calloc(n, sizeof *b->ref);
    b->in_bytes = calloc(n, sizeof *b->in_bytes), b->out_bytes = calloc(n, sizeof *b->out_bytes);
    for (int k = 0; k < b->n; k++) {
        dtr_layout_t sl = {0}, dl = {0};
        dtr_spec_layout(&b->src[k], rank, &sl);
        dtr_spec_layout(&b->dst[k], rank, &dl);
        int64_t whole = 4;
        for (int d = 0; d < b->src[k].ndim; d++) whole *= b->src[k].shape[d];
        b->total += whole;
        if ((size_t)whole > most) most = (size_t)whole;
        b->in_bytes[k] = (size_t)sl.bytes, b->out_bytes[k] = (size_t)dl.bytes;
        b->in[k] = malloc(b->in_bytes[k] + 4), b->out[k] = malloc(b->out_bytes[k] + 4);
        b->ref[k] = malloc(b->out_bytes[k] + 4);
        int64_t cols = b->src[k].ndim == 2 ? sl.local_shape[1] : 1;
        for (int64_t e = 0; e < sl.numel; e++) {
            int64_t g = (sl.global_offset[0] + e / cols) * 7 + (b->src[k].ndim == 2 ? sl.global_offset[1] + e % cols : 0);
            b->in[k][e] = (float)((g * 13 + k * 5 + rank * 3) % 11 - 5);
        }
    }
    b->red = malloc(most), b->gathered = malloc(most), b->whole = malloc(most), b->inbox = malloc(most);
    memset(b->whole, 0, most), memset(b->inbox, 0, most), memset(b->gathered, 0, most), memset(b->red, 0, most);
    groups(b, rank);
}

/* Block l of a tensor of `cols` columns (1-d: cols 0) between its own buffer and the whole. */
static void block_copy(const dtr_layout_t *l, int64_t cols, char *whole, char *block, bool out) {
    int64_t rows = l->local_shape[0], w = cols ? l->local_shape[1] : 1, c0 = cols ? l->global_offset[1] : 0;
    size_t row = (size_t)w * 4;
    for (int64_t r = 0; r < rows; r++) {
        char *at = whole + ((size_t)(l->global_offset[0] + r) * (size_t)(cols ? cols : 1) + (size_t)c0) * 4;
        if (out)
            memcpy(block + (size_t)r * row, at, row);
        else
            memcpy(at, block + (size_t)r * row, row);
    }
}

/* Tensor k by gather-then-slice: reduce, all-gather, the whole to each destination, slice. */
static void gather_one(bench_t *b, int k, int rank) {
    const dtr_spec_t *s = &b->src[k], *d = &b->dst[k];
    int64_t cols = s->ndim == 2 ? s->shape[1] : 0, whole = 4 * s->shape[0] * (cols ? cols : 1);
    dtr_layout_t l;
    int64_t na = dtr_mesh_nranks(s->mesh), nb = dtr_mesh_nranks(d->mesh);
    bool in_a = dtr_spec_layout(s, rank, &l) == DTR_OK;
    if (in_a) {
        const void *red = b->in[k];
        if (b->comm_p != MPI_COMM_NULL) {
            int np;
            MPI_Comm_size(b->comm_p, &np);
            if (np > 1) {
                MPI_Allreduce(b->in[k], b->red, (int)(l.numel), MPI_FLOAT, MPI_SUM, b->comm_p);
                red = b->red;
            }
        }
        int at = 0;
        for (int m = 0; m < b->ns; m++) {
            dtr_layout_t lm;
            dtr_spec_layout(s, b->s_world[m], &lm);
            b->counts[m] = (int)lm.bytes, b->displs[m] = at, at += (int)lm.bytes;
        }
        MPI_Allgatherv(red, (int)l.bytes, MPI_BYTE, b->gathered, b->counts, b->displs, MPI_BYTE, b->comm_s);
        for (int m = 0; m < b->ns; m++) {
            dtr_layout_t lm;
            dtr_spec_layout(s, b->s_world[m], &lm);
            block_copy(&lm, cols, b->whole, b->gathered + b->displs[m], false);
        }
    }
    /* destination j (row-major in B) from source j mod |A| (row-major in A) */
    MPI_Request req[4096];
    int nreq = 0, from = -1;
    for (int64_t j = 0; j < nb; j++) {
        int to, src_rank;
        int64_t c[8] = {0}, cs[8] = {0};
        for (int i = dtr_mesh_ndims(d->mesh) - 1, x = (int)j; i >= 0; i--) c[i] = x % dtr_mesh_size(d->mesh, i), x /= (int)dtr_mesh_size(d->mesh, i);
        dtr_mesh_rank_at(d->mesh, c, &to);
        for (int i = dtr_mesh_ndims(s->mesh) - 1, x = (int)(j % na); i >= 0; i--) cs[i] = x % dtr_mesh_size(s->mesh, i), x /= (int)dtr_mesh_size(s->mesh, i);
        dtr_mesh_rank_at(s->mesh, cs, &src_rank);
        if (to == rank) from = src_rank;
        if (src_rank == rank && to != rank) MPI_Isend(b->whole, (int)whole, MPI_BYTE, to, k, MPI_COMM_WORLD, &req[nreq++]);
    }
    if (from >= 0 && from != rank) MPI_Irecv(b->inbox, (int)whole, MPI_BYTE, from, k, MPI_COMM_WORLD, &req[nreq++]);
    MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    if (from >= 0 && dtr_spec_layout(d, rank, &l) == DTR_OK)
        block_copy(&l, cols, from == rank ? b->whole : b->inbox, (char *)b->ref[k], true);
}

/* One run of form f: 0 the batch, 1 one plan at a time, 2 gather-then-slice. */
static void run_form(bench_t *b, int f, int rank) {
    dtr_status_t st = DTR_OK;
    if (f == 0)
        st = dtr_redistribute_cross_batch(b->ctx, b->batch, (const void *const *)b->in, b->in_bytes,
                                          (void *const *)b->out, b->out_bytes);
    for (int k = 0; f == 1 && k < b->n && st == DTR_OK; k++)
        st = dtr_redistribute_cross(b->ctx, b->one[k], b->in[k], b->in_bytes[k], b->out[k], b->out_bytes[k]);
    for (int k = 0; f == 2 && k < b->n; k++) gather_one(b, k, rank);
    if (st != DTR_OK) die("run");
}

/* Runs gather-then-slice once, then each of dtr's forms, comparing their results with its
 * (the bytes that differ on this rank, returned); then iters timed rounds, the forms
 * alternating (each in each position in turn: what runs before a form warms or cools its
 * caches); the slowest rank's medians into med. */
static int64_t run_all(bench_t *b, int iters, double *med) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int64_t diff = 0;
    run_form(b, 2, rank); /* the reference */
    for (int f = 0; f < 2; f++) {
        for (int k = 0; k < b->n; k++) memset(b->out[k], 0xee, b->out_bytes[k]);
        run_form(b, f, rank);
        for (int k = 0; k < b->n; k++)
            for (size_t e = 0; e < b->out_bytes[k]; e++)
                diff += ((char *)b->ref[k])[e] != ((char *)b->out[k])[e];
    }
    double *t = malloc(sizeof *t * (size_t)(3 * iters));
    for (int it = 0; it < iters; it++)
        for (int j = 0; j < 3; j++) {
            int f = (j + it) % 3; /* each form first, second and third in turn */
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime(), dt, slowest;
            run_form(b, f, rank);
            dt = MPI_Wtime() - t0;
            MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            t[f * iters + it] = slowest * 1e6;
        }
    for (int f = 0; f < 3; f++) {
        qsort(t + f * iters, (size_t)iters, sizeof *t, by_value);
        med[f] = t[f * iters + iters / 2];
    }
    free(t);
    return diff;
}

static void teardown(bench_t *b) {
    for (int k = 0; k < b->n; k++) free(b->in[k]), free(b->out[k]), free(b->ref[k]), dtr_cross_plan_destroy(b->one[k]);
    free(b->in), free(b->out), free(b->ref), free(b->in_bytes), free(b->out_bytes), free(b->one);
    free(b->red), free(b->gathered), free(b->whole), free(b->inbox), free(b->s_world), free(b->counts), free(b->displs);
    free(b->src), free(b->dst);
    if (b->comm_p != MPI_COMM_NULL) MPI_Comm_free(&b->comm_p);
    if (b->comm_s != MPI_COMM_NULL) MPI_Comm_free(&b->comm_s);
    dtr_cross_plan_destroy(b->batch);
    dtr_context_destroy(b->ctx);
}

static void parse(int argc, char **argv, args_t *a) {
    *a = (args_t){.from = "S(0),P", .to = "S(1)", .iters = 5};
    for (int k = 1; k < argc; k++) {
        const char *v = k + 1 < argc ? argv[k + 1] : NULL;
        if (strcmp(argv[k], "--relabel") == 0) { a->relabel = true; continue; }
        if (v == NULL) break;
        if (strcmp(argv[k], "--list") == 0) a->list = v;
        else if (strcmp(argv[k], "--mesh") == 0) a->mesh = v;
        else if (strcmp(argv[k], "--ranks") == 0) a->ranks = v;
        else if (strcmp(argv[k], "--to-mesh") == 0) a->to_mesh = v;
        else if (strcmp(argv[k], "--to-ranks") == 0) a->to_ranks = v;
        else if (strcmp(argv[k], "--from") == 0) a->from = v;
        else if (strcmp(argv[k], "--to") == 0) a->to = v;
        else if (strcmp(argv[k], "--staging-cap") == 0) a->cap = atoll(v);
        else if (strcmp(argv[k], "--iters") == 0) a->iters = atoi(v);
        k++;
    }
    if (a->list == NULL || a->mesh == NULL || a->to_mesh == NULL || a->iters < 1 || a->iters > 1000) {
        fprintf(stderr, "usage: mpirun -n N cross_mesh_bench --list L --mesh A [--ranks R] "
                        "--to-mesh B [--to-ranks R] [--from P] [--to P] [--relabel] "
                        "[--staging-cap BYTES] [--iters N]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    args_t a;
    parse(argc, argv, &a);
    static tdesc_t td[4096];
    int n = tensor_list(&a, td);
    dtr_mesh_t *ma = mesh(a.mesh, a.ranks), *mb = mesh(a.to_mesh, a.to_ranks);
    bench_t b = {.n = n};
    b.src = calloc((size_t)n, sizeof *b.src), b.dst = calloc((size_t)n, sizeof *b.dst);
    for (int k = 0; k < n; k++) b.src[k] = spec(ma, a.from, &td[k]), b.dst[k] = spec(mb, td[k].to, &td[k]);
    dtr_cross_options_t opts = {.relabel = a.relabel, .staging_cap_bytes = a.cap};
    if (dtr_cross_plan_create_batch(n, b.src, b.dst, &opts, &b.batch) != DTR_OK) die("plan");
    b.one = calloc((size_t)n, sizeof *b.one);
    opts.relabel = false;
    for (int k = 0; k < n; k++) {
        dtr_cross_plan_dst(b.batch, k, &b.dst[k]);
        if (dtr_cross_plan_create(&b.src[k], &b.dst[k], &opts, &b.one[k]) != DTR_OK) die("plan one");
    }
    if (dtr_context_create_mpi(MPI_COMM_WORLD, &b.ctx) != DTR_OK) die("context");
    setup(&b, rank);
    double gbps = copy_gbps(), med[3];
    int64_t diff = run_all(&b, a.iters, med);
    int64_t scratch = dtr_context_scratch_bytes(b.ctx), most = 0, wrong = 0;
    MPI_Allreduce(&scratch, &most, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&diff, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(b.batch, &f);
    int64_t mine = 0, out_max = 0;
    for (int k = 0; k < n; k++) mine += (int64_t)b.out_bytes[k];
    MPI_Allreduce(&mine, &out_max, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    double limit = 2.0 * (double)out_max / (gbps * 1e3);
    if (rank == 0)
        printf("{\"tensors\":%d,\"bytes\":%lld,\"ranks\":%d,\"batch_us\":%.1f,\"one_by_one_us\":%.1f,"
               "\"gather_us\":%.1f,\"limit_us\":%.1f,\"copy_gbps\":%.2f,\"out_bytes_max\":%lld,\"recv_bytes_max\":%lld,"
               "\"messages\":%lld,\"rounds\":%lld,\"cap\":%lld,\"staging_bytes_max\":%lld,"
               "\"peak_extra_bytes\":%lld,\"scratch_bytes_max\":%lld,\"relabel_saved_bytes\":%lld,"
               "\"gather_over_batch\":%.2f,\"one_by_one_over_batch\":%.2f,\"batch_over_limit\":%.2f,"
               "\"mismatched_bytes\":%lld}\n",
               n, (long long)b.total, world, med[0], med[1], med[2], limit, gbps, (long long)out_max,
               (long long)f.recv_bytes_max, (long long)f.messages, (long long)f.rounds, (long long)a.cap,
               (long long)f.staging_bytes_max, (long long)f.peak_extra_bytes, (long long)most,
               (long long)f.relabel_saved_bytes, med[2] / med[0], med[1] / med[0], limit > 0 ? med[0] / limit : 0.0,
               (long long)wrong);
    teardown(&b);
    dtr_mesh_destroy(ma), dtr_mesh_destroy(mb);
    MPI_Finalize();
    return wrong != 0;
}
