/*
 * One `dtr run` of a single change, in phases over one state: cmd_run.c parses the flags
 * (change.h), sets up the specs, the plan, the context and the buffers, runs the plan and
 * times it; run_check.c fills the sources, checks the results on every rank and runs the
 * backward plan; run_report.c prints the result as text or JSON on rank 0.
 */
#ifndef DTR_CLI_RUN_H
#define DTR_CLI_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/change.h"
#include "cli/cli.h"
#include "pattern/pattern.h"

/* --digest's figures for one tensor, the same on every rank: its source's digest (none of a
 * Partial source) and its result's. */
typedef struct {
    bool has_src;
    uint64_t src, dst;
} dtr_cli_digest_t;

/* One rank's check: its report, and whether its input was written. */
typedef struct {
    dtr_pattern_report_t rep;
    int64_t input_changed;
} dtr_cli_verdict_t;

/* Where the source values come from: --fill, or --input (every rank's block loaded for
 * --verify). */
typedef struct {
    dtr_fill_t fill;
    const char *input;          /* --input DIR, or NULL */
    dtr_fill_blocks_t *blocks;  /* every rank's block, for --verify with --input */
} dtr_cli_source_t;

typedef struct {
    const dtr_cli_change_t *o;
    int rank, world;
    dtr_cli_engine_t eng;
    /* the change */
    dtr_mesh_t *mesh;
    dtr_spec_t src, dst;
    dtr_cost_model_t cost;
    dtr_plan_options_t opts;
    uint32_t across, planned_across; /* mesh dims that cross nodes; planned as crossing */
    dtr_change_t *change;  /* the library's change object, and its plan */
    const dtr_plan_t *plan;
    dtr_plan_t *bplan; /* --backward */
    /* this rank's side */
    dtr_context_t *ctx;
    bool inside; /* the rank is in the mesh */
    size_t in_bytes, out_bytes;
    unsigned char *in, *copy, *out; /* host buffers: source, its copy, result */
    void *din, *dout;               /* what the run reads and writes (device or shared) */
    void *sin, *sout;               /* --buffers shared: the context's allocations */
    double *times;                  /* 2 x iters: the run's, then the baseline's */
    dtr_cli_source_t data;
    /* the verdicts, over every rank (rank 0) */
    dtr_cli_verdict_t *all; /* each rank's forward verdict (rank 0) */
    dtr_cli_verdict_t fwd, bwd;
    int first_bad;          /* the first rank whose forward check failed, or -1 */
    int fail_code;          /* a set-up failure's exit code (0: DTR_EXIT_FAIL) */
    bool ok;                /* verified forward and backward (or no --verify) */
    dtr_cli_digest_t digest; /* --digest's */
    /* the timing and the paths the MPI backend took */
    double med, base;
    bool mpi;
    long long paths[7];
    int steps_across;
} dtr_cli_run_t;

/* run_check.c */
/* Fills this rank's block of spec (the forward source, or the gradient with suffix
 * "grad_in"), and with verify loads what the check needs. */
dtr_status_t dtr_cli_source_fill(dtr_cli_source_t *d, const dtr_spec_t *spec, const char *suffix,
                                 int rank, bool verify, void *buf, size_t bytes);
/* --dump: bytes to DIR/rank<R>.<what> (nothing for dir NULL); prints the error and returns
 * false on failure. */
bool dtr_cli_dump(const char *dir, int rank, const char *what, const void *p, size_t n);
/* --dump of a batch's n tensors: DIR/rank<R>.<K>.in where this rank holds a block of src[K],
 * DIR/rank<R>.<K>.out where it holds one of dst[K] (as delivered). */
bool dtr_cli_dump_tensors(const char *dir, int rank, int n, const dtr_spec_t *src,
                          const dtr_spec_t *dst, void *const *in, const size_t *in_bytes,
                          void *const *out, const size_t *out_bytes);
/* Whether ok holds on every rank (collective). */
bool dtr_cli_all_true(bool ok);
/* The forward result: dumped, checked on every rank (--verify), the verdicts gathered on
 * rank 0 (r->all, r->fwd, r->first_bad). Collective; false where a rank failed (it said
 * why). */
bool dtr_cli_run_check(dtr_cli_run_t *r);
/* --backward: the gradient's plan made, run and checked (r->bplan, r->bwd). Collective;
 * false where a rank failed. */
bool dtr_cli_run_backward(dtr_cli_run_t *r);

/* run_digest.c: --digest in every form. The usage error (exit 2) where a destination of the
 * n is Partial, else DTR_EXIT_OK. */
int dtr_cli_digest_refuse(int n, const dtr_spec_t *dst);
/* Each of the n tensors' digests (dtr_digest on its source's mesh and its result's) into
 * *d (n of them, the caller frees), on every rank. Collective over the job; false where a
 * rank failed (each said why). */
bool dtr_cli_digests(dtr_context_t *ctx, int rank, int n, const dtr_spec_t *src,
                     const dtr_spec_t *dst, void *const *in, const size_t *in_bytes,
                     void *const *out, const size_t *out_bytes, dtr_cli_digest_t **d);
/* Whether one tensor's digests are compared (a source digest, no cast) and differ. */
bool dtr_cli_digest_bad(const dtr_cli_digest_t *d, const dtr_spec_t *src, const dtr_spec_t *dst);
/* Whether any of the n failed so; with say, its line on stderr. */
bool dtr_cli_digest_failed(int n, const dtr_cli_digest_t *d, const dtr_spec_t *src,
                           const dtr_spec_t *dst, bool say);
/* The JSON members (",\"digest_src\":...,\"digest_dst\":..." for one tensor; for a batch
 * ",\"digests\":[{...}, ...]") and the text line. */
void dtr_cli_digest_json(FILE *f, int n, bool batch, const dtr_cli_digest_t *d);
void dtr_cli_digest_text(FILE *f, int n, bool batch, const dtr_cli_digest_t *d,
                         const dtr_spec_t *src, const dtr_spec_t *dst);

/* run_report.c: the result on rank 0 (text, or one JSON object), and the failure lines on
 * stderr. */
void dtr_cli_run_report(const dtr_cli_run_t *r);

/* A change between meshes' result (run_cross.c), as rank 0 reports it. */
typedef struct {
    const dtr_cli_change_t *o;
    const dtr_cross_plan_t *plan;
    const dtr_spec_t *src, *dst; /* tensor 0's (dst as the plan delivers it) */
    int world;
    bool batch;
    dtr_cli_verdict_t sum;       /* over every rank and tensor */
    int first_bad, bad_tensor;   /* the first rank that failed (-1: none), and its tensor */
    dtr_cli_verdict_t bad;       /* that rank's verdict on that tensor */
    double med, one_by_one;      /* medians (us): the plan; a batch's tensors one at a time */
    const dtr_cli_digest_t *digests; /* --digest's, one per tensor (NULL: none) */
    int ntensors;
    const dtr_spec_t *srcs, *dsts;   /* every tensor's */
    int64_t block_scale;             /* --block-scale (0: none) */
} dtr_cli_cross_result_t;

/* run_cross_report.c: a change between meshes' result on rank 0 (text, or one JSON object)
 * and its failure line on stderr. */
void dtr_cli_cross_report(const dtr_cli_cross_result_t *r);

/* run_cross.c: dtr run --to-mesh (and dtr run --batch FILE --to-mesh), after the flags were
 * checked. An exit code. */
int dtr_cli_run_cross(const dtr_cli_change_t *o, int rank, int world);

#endif
