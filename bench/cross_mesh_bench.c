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
 * --block-scale B: the destinations are block-scaled f8e4m3 (a dtr_change with
 * block_scale B: the amax all-reduced on A, quantized there, fp8 bytes and scales moved), as
 * a batch and one change per tensor; gather-then-slice moves the source dtype and does not
 * quantize (what it would add is left out: its figure is a floor). Each destination element
 * is checked against gather-then-slice's value: |q * scale - x| within half an fp8 step
 * (2^-4 |x|, or scale * 2^-10 below the normals), with each block's scale taken from the
 * whole scales tensor gathered on B; the exact quantizer is tests/numeric/test_fp8.c's. The
 * limit then is the busiest rank's source block read once and output written once.
 *
 * Digests (redistribute/executor/executor.h, dtr_digest_local): every rank's share of each
 * source and each result, one MPI_Allreduce of them all, timed as a fourth form, and equal
 * per tensor; with --block-scale what the change sent (dtr_change_sent: each tensor and its
 * scales as the source ranks quantized them) against what arrived; "n/a" for a Partial
 * source, which holds no values until reduced (then only the results are digested).
 *
 * Usage: mpirun -n N cross_mesh_bench --list gpt2-medium|moe|uniform:SIZE:COUNT
 *          --mesh A --ranks LIST --to-mesh B --to-ranks LIST [--from P] [--to P] [--relabel]
 *          [--staging-cap BYTES] [--dtype f32|bf16] [--block-scale B] [--iters N]
 * gpt2-medium: GPT-2 medium's 292 tensors (355M parameters), each --from on A (default
 * S(0),P) and, on B, as tensor parallelism shards them: the embedding by vocabulary (S(0)),
 * the attention's and MLP's first weights by column (S(1)), their second by row (S(0)), the
 * first ones' biases S(0), norms and the other biases R. moe: a mixture of experts shaped
 * like DeepSeek-V3 at a smaller width (dim 1024, 64 experts of hidden 256, 4 layers, 32768
 * words; 306M parameters), each layer's experts stacked as [64, 1024, 256] (w1, w3) and
 * [64, 256, 1024] (w2) tensors as grouped-GEMM layers hold them, so --from S(0) shards them
 * by expert; on B by column (w1, w3: S(2)) and row (w2: S(1)), attention as GPT-2's, router
 * and norms R. uniform:SIZE:COUNT: COUNT tensors of SIZE (16K, 16M: rows of 1024 f32),
 * --from -> --to. --dtype bf16: the source dtype (not with a Partial source: MPI has no bf16
 * sum for gather-then-slice). Prints one JSON line (rank 0).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "backends/mpi/dtr_mpi.h"
#include "bench/copy_probe.h"

typedef struct {
    int64_t shape[3];
    int ndim;
    const char *to;
} tdesc_t;

typedef struct {
    const char *list, *mesh, *ranks, *to_mesh, *to_ranks, *from, *to, *dtype;
    bool relabel;
    int64_t cap, block;
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
    t[*n] = (tdesc_t){{r, c, 0}, c > 0 ? 2 : 1, to};
    ++*n;
}

static void add3(tdesc_t *t, int *n, int64_t e, int64_t r, int64_t c, const char *to) {
    t[*n] = (tdesc_t){{e, r, c}, 3, to};
    ++*n;
}

/* The MoE list (the header): DeepSeek-V3's shape at width 1024. */
static int moe_list(tdesc_t *t) {
    const int64_t d = 1024, h = 256, e = 64, v = 32768;
    int n = 0;
    add(t, &n, v, d, "S(0)"); /* embedding: by vocabulary */
    for (int layer = 0; layer < 4; layer++) {
        add(t, &n, d, 0, "R");                                 /* attention norm */
        add(t, &n, d, 3 * d, "S(1)"), add(t, &n, d, d, "S(0)"); /* wqkv by column, wo by row */
        add(t, &n, d, 0, "R"), add(t, &n, e, d, "R");          /* expert norm, router */
        add3(t, &n, e, d, h, "S(2)"), add3(t, &n, e, d, h, "S(2)"); /* w1, w3 by column */
        add3(t, &n, e, h, d, "S(1)");                          /* w2 by row */
    }
    add(t, &n, d, 0, "R"), add(t, &n, d, v, "S(1)"); /* final norm; output by column */
    return n;
}

/* The tensor list: GPT-2 medium's, the MoE's, or COUNT uniform ones. */
static int tensor_list(const args_t *a, tdesc_t *t) {
    int n = 0;
    if (strcmp(a->list, "moe") == 0) return moe_list(t);
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
        fprintf(stderr, "cross_mesh_bench: --list: gpt2-medium, moe or uniform:SIZE{K,M}:COUNT\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int64_t rows = unit == 'K' ? size / 4 : size * 256; /* rows of 1024 f32 */
    for (int k = 0; k < count; k++) add(t, &n, rows > 0 ? rows : 1, 1024, a->to);
    return n;
}

static dtr_spec_t spec(const dtr_mesh_t *m, const char *text, const tdesc_t *t, dtr_dtype_t dt) {
    dtr_placement_t p[8];
    int np;
    dtr_spec_t s;
    if (dtr_placements_parse(text, p, 8, &np) != DTR_OK) die(text);
    if (dtr_spec_init(&s, m, p, np, t->shape, t->ndim, dt) != DTR_OK) die(text);
    return s;
}

static size_t esize(const dtr_spec_t *s) { return (size_t)dtr_dtype_info(s->dtype)->size; }

static int64_t numel(const dtr_spec_t *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
    return n;
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
    copy_probe_t p = {0};
    if (!copy_probe(64ll << 20, 7, 3, 0, &p)) die("the copy probe's arena");
    return p.gbps;
}

/* The run's state: the specs and plans, this rank's buffers, and gather-then-slice's groups
 * and scratch. */
typedef struct {
    int n;
    int64_t block;         /* --block-scale: 0 none */
    bool partial;          /* a Partial source: no digest of it (no values until reduced) */
    dtr_spec_t *src, *dst; /* dst as the batch delivers it (relabeled where asked) */
    dtr_spec_t *gdst, *sc; /* dst in the source dtype (gather-then-slice's); the scales */
    dtr_cross_plan_t *batch, **one;
    dtr_change_t *change, **one_change; /* --block-scale's forms */
    dtr_context_t *ctx;
    char **in, **out, **ref; /* the source block; dtr's result (then the scales); gather's */
    size_t *in_bytes, *out_bytes, *ref_bytes; /* (out_bytes: 2n with --block-scale) */
    int64_t total;
    MPI_Comm comm_p, comm_s; /* A's ranks sharing every coordinate but the Partial (Shard) dims */
    MPI_Comm comm_b;         /* B's ranks (--block-scale's check gathers the scales) */
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

/* The groups of A's ranks gather-then-slice uses (every tensor has the same --from), and B's. */
static void groups(bench_t *b, int rank) {
    const dtr_spec_t *s = &b->src[0];
    int64_t coord[8];
    bool in_b = dtr_mesh_coord(b->dst[0].mesh, rank, coord) == DTR_OK;
    MPI_Comm_split(MPI_COMM_WORLD, in_b ? 0 : MPI_UNDEFINED, rank, &b->comm_b);
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

/* Source block k: small integers (exact sums), f32 or bf16 (a float's high half). */
static void fill(const dtr_spec_t *s, const dtr_layout_t *l, int k, int rank, char *buf) {
    int nd = s->ndim;
    int64_t idx[8] = {0};
    for (int64_t e = 0; e < l->numel; e++) {
        int64_t g = 0;
        for (int d = 0; d < nd; d++) g = g * 7 + l->global_offset[d] + idx[d];
        float v = (float)((g * 13 + k * 5 + rank * 3) % 11 - 5);
        if (s->dtype == DTR_BF16) {
            uint32_t bits;
            memcpy(&bits, &v, 4);
            uint16_t hi = (uint16_t)(bits >> 16);
            memcpy(buf + 2 * e, &hi, 2);
        } else {
            memcpy(buf + 4 * e, &v, 4);
        }
        for (int d = nd - 1; d >= 0 && ++idx[d] == l->local_shape[d]; d--) idx[d] = 0;
    }
}

/* Every rank's buffers; the source blocks filled. */
static void setup(bench_t *b, int rank) {
    size_t n = (size_t)b->n, most = 0, outs = b->block > 0 ? 2 * n : n;
    b->in = calloc(n, sizeof *b->in), b->out = calloc(outs, sizeof *b->out), b->ref = calloc(n, sizeof *b->ref);
    b->in_bytes = calloc(n, sizeof *b->in_bytes), b->out_bytes = calloc(outs, sizeof *b->out_bytes);
    b->ref_bytes = calloc(n, sizeof *b->ref_bytes);
    for (int k = 0; k < b->n; k++) {
        dtr_layout_t sl = {0}, dl = {0}, gl = {0}, cl = {0};
        dtr_spec_layout(&b->src[k], rank, &sl);
        dtr_spec_layout(&b->dst[k], rank, &dl);
        dtr_spec_layout(&b->gdst[k], rank, &gl);
        size_t whole = (size_t)numel(&b->src[k]) * esize(&b->src[k]);
        b->total += (int64_t)whole;
        if (whole > most) most = whole;
        b->in_bytes[k] = (size_t)sl.bytes, b->out_bytes[k] = (size_t)dl.bytes, b->ref_bytes[k] = (size_t)gl.bytes;
        b->in[k] = malloc(b->in_bytes[k] + 4), b->out[k] = malloc(b->out_bytes[k] + 4);
        b->ref[k] = malloc(b->ref_bytes[k] + 4);
        if (b->block > 0) {
            dtr_spec_layout(&b->sc[k], rank, &cl);
            b->out_bytes[n + (size_t)k] = (size_t)cl.bytes;
            b->out[n + (size_t)k] = malloc((size_t)cl.bytes + 4);
        }
        fill(&b->src[k], &sl, k, rank, b->in[k]);
    }
    b->red = malloc(most), b->gathered = malloc(most), b->whole = malloc(most), b->inbox = malloc(most);
    memset(b->whole, 0, most), memset(b->inbox, 0, most), memset(b->gathered, 0, most), memset(b->red, 0, most);
    groups(b, rank);
}

/* Block l of tensor s between its own buffer and the whole (row-major, s's shape). */
static void block_copy(const dtr_layout_t *l, const dtr_spec_t *s, char *whole, char *block, bool out) {
    int nd = s->ndim;
    size_t es = esize(s), run = (size_t)l->local_shape[nd - 1] * es;
    int64_t idx[8] = {0}, rows = 1;
    for (int d = 0; d < nd - 1; d++) rows *= l->local_shape[d];
    if (l->numel == 0) return;
    for (int64_t r = 0; r < rows; r++) {
        int64_t at = 0;
        for (int d = 0; d < nd; d++) at = at * s->shape[d] + l->global_offset[d] + idx[d];
        char *w = whole + (size_t)at * es, *blk = block + (size_t)r * run;
        if (out)
            memcpy(blk, w, run);
        else
            memcpy(w, blk, run);
        for (int d = nd - 2; d >= 0 && ++idx[d] == l->local_shape[d]; d--) idx[d] = 0;
    }
}

/* Tensor k by gather-then-slice: reduce, all-gather, the whole to each destination, slice
 * (in the source dtype: gdst). */
static void gather_one(bench_t *b, int k, int rank) {
    const dtr_spec_t *s = &b->src[k], *d = &b->gdst[k];
    int64_t whole = numel(s) * (int64_t)esize(s);
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
            block_copy(&lm, s, b->whole, b->gathered + b->displs[m], false);
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
        block_copy(&l, s, from == rank ? b->whole : b->inbox, b->ref[k], true);
}

/* One change of --block-scale's forms: the batch (k -1) or tensor k's own. */
static dtr_status_t run_change(bench_t *b, int k) {
    size_t n = (size_t)b->n;
    if (k < 0)
        return dtr_change_run(b->ctx, b->change, (const void *const *)b->in, b->in_bytes,
                              (void *const *)b->out, b->out_bytes);
    const void *in[1] = {b->in[k]};
    void *out[2] = {b->out[k], b->out[n + (size_t)k]};
    size_t out_bytes[2] = {b->out_bytes[k], b->out_bytes[n + (size_t)k]};
    return dtr_change_run(b->ctx, b->one_change[k], in, &b->in_bytes[k], out, out_bytes);
}

/* Every rank's digest share of each tensor a form moves, summed over the job in one
 * all-reduce (a rank outside a mesh adds 0): each source (s[k]) and result (s[n + k]); with
 * --block-scale the 2n tensors the batch's change sent (dtr_change_sent: the quantized ones,
 * then their scales; s[0..2n)) and the 2n that arrived (s[2n..4n)). */
static void share(const dtr_spec_t *s, int rank, const void *buf, size_t bytes, uint64_t *to) {
    dtr_layout_t l;
    if (dtr_spec_layout(s, rank, &l) == DTR_OK &&
        dtr_digest_local(s, rank, buf, (int64_t)bytes, to) != DTR_OK)
        die("digest");
}

static void digests(bench_t *b, int rank, uint64_t *sum) {
    int n = b->n, m = b->block > 0 ? 4 * n : 2 * n;
    uint64_t *mine = calloc((size_t)m, sizeof *mine);
    for (int k = 0; k < n && b->block > 0; k++)
        for (int j = k; j < 2 * n; j += n) {
            dtr_spec_t s;
            const void *buf;
            size_t bytes;
            if (dtr_change_sent(b->change, j, &s, &buf, &bytes) != DTR_OK) die("sent");
            share(&s, rank, buf, bytes, &mine[j]);
            share(j < n ? &b->dst[k] : &b->sc[k], rank, b->out[j], b->out_bytes[j], &mine[2 * n + j]);
        }
    for (int k = 0; k < n && b->block == 0; k++) {
        if (!b->partial) share(&b->src[k], rank, b->in[k], b->in_bytes[k], &mine[k]);
        share(&b->dst[k], rank, b->out[k], b->out_bytes[k], &mine[n + k]);
    }
    MPI_Allreduce(mine, sum, m, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    free(mine);
}

/* One run of form f: 0 the batch, 1 one plan at a time, 2 gather-then-slice, 3 digests. */
static void run_form(bench_t *b, int f, int rank) {
    dtr_status_t st = DTR_OK;
    if (f == 0)
        st = b->block > 0 ? run_change(b, -1)
                          : dtr_redistribute_cross_batch(b->ctx, b->batch, (const void *const *)b->in, b->in_bytes,
                                                         (void *const *)b->out, b->out_bytes);
    for (int k = 0; f == 1 && k < b->n && st == DTR_OK; k++)
        st = b->block > 0 ? run_change(b, k)
                          : dtr_redistribute_cross(b->ctx, b->one[k], b->in[k], b->in_bytes[k], b->out[k], b->out_bytes[k]);
    for (int k = 0; f == 2 && k < b->n; k++) gather_one(b, k, rank);
    if (f == 3) {
        uint64_t *sum = malloc(sizeof *sum * (size_t)(4 * b->n));
        digests(b, rank, sum);
        free(sum);
    }
    if (st != DTR_OK) die("run");
}

/* An f8e4m3 code's value. */
static float e4m3(uint8_t q) {
    int e = (q >> 3) & 15, m = q & 7;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    return q & 0x80 ? -v : v;
}

static float source_value(const dtr_spec_t *s, const char *buf, int64_t e) {
    float v;
    if (s->dtype == DTR_BF16) {
        uint16_t hi;
        memcpy(&hi, buf + 2 * e, 2);
        uint32_t bits = (uint32_t)hi << 16;
        memcpy(&v, &bits, 4);
    } else {
        memcpy(&v, buf + 4 * e, 4);
    }
    return v;
}

/* --block-scale: tensor k's elements on this rank out of half an fp8 step of gather's value,
 * each with its block's scale from the whole scales tensor (gathered over B into scales). */
static int64_t check_fp8(bench_t *b, int k, int rank, float *scales) {
    const dtr_spec_t *d = &b->dst[k], *c = &b->sc[k];
    dtr_layout_t l, cl;
    if (dtr_spec_layout(d, rank, &l) != DTR_OK) return 0;
    int nb, me = 0, nd = d->ndim;
    MPI_Comm_size(b->comm_b, &nb);
    int *counts = calloc((size_t)nb, sizeof *counts), *displs = calloc((size_t)nb, sizeof *displs);
    int *world = calloc((size_t)nb, sizeof *world);
    MPI_Allgather(&rank, 1, MPI_INT, world, 1, MPI_INT, b->comm_b);
    char *all = malloc((size_t)numel(c) * 4 * (size_t)nb + 4);
    for (int m = 0; m < nb; m++) {
        dtr_spec_layout(c, world[m], &cl);
        counts[m] = (int)cl.bytes, displs[m] = me, me += (int)cl.bytes;
    }
    MPI_Allgatherv(b->out[b->n + k], (int)b->out_bytes[b->n + k], MPI_BYTE, all, counts, displs, MPI_BYTE, b->comm_b);
    for (int m = 0; m < nb; m++) {
        dtr_spec_layout(c, world[m], &cl);
        block_copy(&cl, c, (char *)scales, all + displs[m], false);
    }
    int64_t bad = 0, idx[8] = {0};
    for (int64_t e = 0; e < l.numel; e++) {
        int64_t at = 0;
        for (int i = 0; i < nd; i++) {
            int64_t g = l.global_offset[i] + idx[i];
            at = at * c->shape[i] + (i >= nd - 2 ? g / b->block : g);
        }
        float s = scales[at], x = source_value(&b->gdst[k], b->ref[k], e);
        float got = e4m3((uint8_t)b->out[k][e]) * s;
        bad += !(fabsf(got - x) <= fabsf(x) * 0.0626f + s * 0x1p-10f * 1.01f);
        for (int i = nd - 1; i >= 0 && ++idx[i] == l.local_shape[i]; i--) idx[i] = 0;
    }
    free(counts), free(displs), free(world), free(all);
    return bad;
}

/* What differs on this rank from gather-then-slice's result: bytes, or with --block-scale
 * elements out of tolerance. */
static int64_t compare(bench_t *b, int rank) {
    int64_t diff = 0;
    if (b->block > 0) {
        size_t most = 4;
        for (int k = 0; k < b->n; k++)
            if ((size_t)numel(&b->sc[k]) * 4 > most) most = (size_t)numel(&b->sc[k]) * 4;
        float *scales = malloc(most);
        for (int k = 0; k < b->n && b->comm_b != MPI_COMM_NULL; k++) diff += check_fp8(b, k, rank, scales);
        free(scales);
        return diff;
    }
    for (int k = 0; k < b->n; k++)
        for (size_t e = 0; e < b->out_bytes[k]; e++) diff += b->ref[k][e] != b->out[k][e];
    return diff;
}

/* Runs gather-then-slice once, then each of dtr's forms, comparing their results with its
 * (what differs on this rank, returned); then iters timed rounds, the forms alternating
 * (each in each position in turn: what runs before a form warms or cools its caches); the
 * slowest rank's medians into med. */
static int64_t run_all(bench_t *b, int iters, double *med) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int64_t diff = 0;
    size_t outs = b->block > 0 ? 2 * (size_t)b->n : (size_t)b->n;
    run_form(b, 2, rank); /* the reference */
    for (int f = 0; f < 2; f++) {
        for (size_t k = 0; k < outs; k++) memset(b->out[k], 0xee, b->out_bytes[k]);
        run_form(b, f, rank);
        diff += compare(b, rank);
    }
    double *t = malloc(sizeof *t * (size_t)(4 * iters));
    for (int it = 0; it < iters; it++)
        for (int j = 0; j < 4; j++) {
            int f = (j + it) % 4; /* each form first, ..., fourth in turn */
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime(), dt, slowest;
            run_form(b, f, rank);
            dt = MPI_Wtime() - t0;
            MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            t[f * iters + it] = slowest * 1e6;
        }
    for (int f = 0; f < 4; f++) {
        qsort(t + f * iters, (size_t)iters, sizeof *t, by_value);
        med[f] = t[f * iters + iters / 2];
    }
    free(t);
    return diff;
}

static void teardown(bench_t *b) {
    size_t outs = b->block > 0 ? 2 * (size_t)b->n : (size_t)b->n;
    for (int k = 0; k < b->n; k++) {
        free(b->in[k]), free(b->ref[k]);
        if (b->one != NULL) dtr_cross_plan_destroy(b->one[k]);
        if (b->one_change != NULL) dtr_change_destroy(b->one_change[k]);
    }
    for (size_t k = 0; k < outs; k++) free(b->out[k]);
    free(b->in), free(b->out), free(b->ref), free(b->in_bytes), free(b->out_bytes), free(b->ref_bytes);
    free(b->one), free(b->one_change);
    free(b->red), free(b->gathered), free(b->whole), free(b->inbox), free(b->s_world), free(b->counts), free(b->displs);
    free(b->src), free(b->dst), free(b->gdst), free(b->sc);
    if (b->comm_p != MPI_COMM_NULL) MPI_Comm_free(&b->comm_p);
    if (b->comm_s != MPI_COMM_NULL) MPI_Comm_free(&b->comm_s);
    if (b->comm_b != MPI_COMM_NULL) MPI_Comm_free(&b->comm_b);
    dtr_cross_plan_destroy(b->batch);
    dtr_change_destroy(b->change);
    dtr_context_destroy(b->ctx);
}

static void parse(int argc, char **argv, args_t *a) {
    *a = (args_t){.from = "S(0),P", .to = "S(1)", .dtype = "f32", .iters = 5};
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
        else if (strcmp(argv[k], "--dtype") == 0) a->dtype = v;
        else if (strcmp(argv[k], "--block-scale") == 0) a->block = atoll(v);
        else if (strcmp(argv[k], "--iters") == 0) a->iters = atoi(v);
        k++;
    }
    bool bf16 = strcmp(a->dtype, "bf16") == 0;
    if (a->list == NULL || a->mesh == NULL || a->to_mesh == NULL || a->iters < 1 || a->iters > 1000 ||
        (!bf16 && strcmp(a->dtype, "f32") != 0) || a->block < 0 || (bf16 && strchr(a->from, 'P') != NULL)) {
        fprintf(stderr, "usage: mpirun -n N cross_mesh_bench --list L --mesh A [--ranks R] "
                        "--to-mesh B [--to-ranks R] [--from P] [--to P] [--relabel] "
                        "[--staging-cap BYTES] [--dtype f32|bf16 (bf16: no Partial --from)] "
                        "[--block-scale B] [--iters N]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* The plans: the batch and one per tensor, as cross plans or (--block-scale) changes; dst
 * as the batch delivers it, gdst and sc from it. */
static void plans(bench_t *b, const args_t *a) {
    int n = b->n;
    b->gdst = calloc((size_t)n, sizeof *b->gdst), b->sc = calloc((size_t)n, sizeof *b->sc);
    if (b->block > 0) {
        dtr_change_options_t co = {.relabel = a->relabel, .staging_cap_bytes = a->cap, .between_meshes = true,
                                   .many = true, .block_scale = b->block};
        if (dtr_change_create(n, b->src, b->dst, &co, &b->change) != DTR_OK) die("plan");
        b->one_change = calloc((size_t)n, sizeof *b->one_change);
        co.relabel = false, co.many = false;
        for (int k = 0; k < n; k++) {
            dtr_change_dst(b->change, k, &b->dst[k]);
            dtr_change_scales(b->change, k, &b->sc[k]);
            if (dtr_change_create(1, &b->src[k], &b->dst[k], &co, &b->one_change[k]) != DTR_OK) die("plan one");
        }
    } else {
        dtr_cross_options_t opts = {.relabel = a->relabel, .staging_cap_bytes = a->cap};
        if (dtr_cross_plan_create_batch(n, b->src, b->dst, &opts, &b->batch) != DTR_OK) die("plan");
        b->one = calloc((size_t)n, sizeof *b->one);
        opts.relabel = false;
        for (int k = 0; k < n; k++) {
            dtr_cross_plan_dst(b->batch, k, &b->dst[k]);
            if (dtr_cross_plan_create(&b->src[k], &b->dst[k], &opts, &b->one[k]) != DTR_OK) die("plan one");
        }
    }
    for (int k = 0; k < n; k++) b->gdst[k] = b->dst[k], b->gdst[k].dtype = b->src[k].dtype;
}

/* Whether every tensor's result digest equals its source's (with --block-scale: what was
 * sent; "n/a" for a Partial source). */
static const char *digests_agree(bench_t *b, int rank) {
    if (b->partial) return "n/a";
    int m = b->block > 0 ? 2 * b->n : b->n;
    uint64_t *sum = malloc(sizeof *sum * (size_t)(2 * m));
    digests(b, rank, sum);
    bool same = true;
    for (int k = 0; k < m; k++) same = same && sum[k] == sum[m + k];
    free(sum);
    return same ? "equal" : "DIFFER";
}

/* The limit's bytes on this rank: its output read and written once (a move), or with
 * --block-scale its source block read and its output (with the scales) written once. */
static int64_t limit_bytes(const bench_t *b) {
    int64_t mine = 0;
    for (int k = 0; k < b->n; k++)
        mine += b->block > 0 ? (int64_t)(b->in_bytes[k] + b->out_bytes[k] + b->out_bytes[b->n + k])
                             : 2 * (int64_t)b->out_bytes[k];
    return mine;
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
    dtr_dtype_t dt = strcmp(a.dtype, "bf16") == 0 ? DTR_BF16 : DTR_F32;
    bench_t b = {.n = n, .block = a.block, .partial = strchr(a.from, 'P') != NULL};
    b.src = calloc((size_t)n, sizeof *b.src), b.dst = calloc((size_t)n, sizeof *b.dst);
    for (int k = 0; k < n; k++)
        b.src[k] = spec(ma, a.from, &td[k], dt), b.dst[k] = spec(mb, td[k].to, &td[k], a.block > 0 ? DTR_F8E4M3 : dt);
    plans(&b, &a);
    if (dtr_context_create_mpi(MPI_COMM_WORLD, &b.ctx) != DTR_OK) die("context");
    setup(&b, rank);
    double gbps = copy_gbps(), med[4];
    int64_t diff = run_all(&b, a.iters, med);
    const char *agree = digests_agree(&b, rank);
    int64_t scratch = dtr_context_scratch_bytes(b.ctx), most = 0, wrong = 0;
    MPI_Allreduce(&scratch, &most, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&diff, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(b.block > 0 ? dtr_change_cross_plan(b.change) : b.batch, &f);
    int64_t mine = limit_bytes(&b), most_bytes = 0;
    MPI_Allreduce(&mine, &most_bytes, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    double limit = (double)most_bytes / (gbps * 1e3);
    if (rank == 0)
        printf("{\"tensors\":%d,\"bytes\":%lld,\"ranks\":%d,\"dtype\":\"%s\",\"block_scale\":%lld,"
               "\"batch_us\":%.1f,\"one_by_one_us\":%.1f,"
               "\"gather_us\":%.1f,\"digest_us\":%.1f,\"digests\":\"%s\",\"limit_us\":%.1f,\"copy_gbps\":%.2f,"
               "\"limit_bytes_max\":%lld,\"recv_bytes_max\":%lld,"
               "\"messages\":%lld,\"rounds\":%lld,\"cap\":%lld,\"staging_bytes_max\":%lld,"
               "\"peak_extra_bytes\":%lld,\"scratch_bytes_max\":%lld,\"relabel_saved_bytes\":%lld,"
               "\"gather_over_batch\":%.2f,\"one_by_one_over_batch\":%.2f,\"batch_over_limit\":%.2f,"
               "\"mismatched_bytes\":%lld}\n",
               n, (long long)b.total, world, a.dtype, (long long)a.block, med[0], med[1], med[2], med[3], agree,
               limit, gbps, (long long)most_bytes,
               (long long)f.recv_bytes_max, (long long)f.messages, (long long)f.rounds, (long long)a.cap,
               (long long)f.staging_bytes_max, (long long)f.peak_extra_bytes, (long long)most,
               (long long)f.relabel_saved_bytes, med[2] / med[0], med[1] / med[0], limit > 0 ? med[0] / limit : 0.0,
               (long long)wrong);
    teardown(&b);
    dtr_mesh_destroy(ma), dtr_mesh_destroy(mb);
    MPI_Finalize();
    return wrong != 0 || strcmp(agree, "DIFFER") == 0;
}
