/*
 * dtr reshard: a checkpoint (safetensors, or one dtr saved on any number of ranks) into
 * --mesh's layout on the job's ranks by a rules file, each rank reading only the pieces
 * that meet its blocks and writing them as its own file beside a manifest; or, with
 * --consolidate, into ordinary whole-tensor safetensors files. The library does the work
 * (checkpoint/dtr_checkpoint.h); this parses flags and rules, and reports.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/dtr_checkpoint.h"
#include "cli/cli.h"

static void dtr__reshard_help(FILE *out) {
    fputs("usage: mpirun -n M dtr reshard --from SRC --to DIR --mesh MESH --rules FILE\n"
          "       mpirun -n M dtr reshard --from SRC --to DIR --consolidate\n"
          "                               [--max-file-bytes N]\n"
          "       dtr_launch.sh -n M dtr reshard ... --backend gloo\n"
          "\n"
          "A checkpoint into another layout, straight from its files: each rank reads only\n"
          "the bytes of the pieces that meet its blocks (nothing is gathered on one rank).\n"
          "\n"
          "  --from SRC            a .safetensors file; a directory of them, with or without\n"
          "                        model.safetensors.index.json; or a checkpoint dtr saved\n"
          "                        (its dtr.manifest.json), on any number of ranks\n"
          "  --to DIR              where to write: missing or empty (an existing non-empty\n"
          "                        directory is refused); nothing is left there on failure\n"
          "  --mesh MESH           the mesh to save on, e.g. 2x2: as many ranks as the job\n"
          "  --rules FILE          each tensor's placements (and optionally dtype): a JSON\n"
          "                        list of {\"match\": GLOB, \"placements\": \"S(0),R\"[,\n"
          "                        \"dtype\": \"bf16\"]}; the first rule whose GLOB matches\n"
          "                        the name (fnmatch) wins; a tensor no rule matches is an\n"
          "                        error. Rank 0 prints the rule each tensor took.\n"
          "  --consolidate         write whole tensors as plain safetensors (model.safetensors,\n"
          "                        or model-0000k-of-0000n.safetensors and an index past\n"
          "                        --max-file-bytes, default 5000000000), the files shared\n"
          "                        out over the ranks; no --mesh or --rules\n"
          "  --backend B           how the ranks agree: mpi (default: under mpirun) or gloo\n"
          "                        (no MPI: under tools/dtr_launch.sh or torchrun, which set\n"
          "                        RANK, WORLD_SIZE and DTR_GLOO_STORE)\n"
          "\n"
          "Saved, DIR holds rank-RRRRR-of-NNNNN.safetensors (each rank's blocks; replicas\n"
          "once) and dtr.manifest.json (the mesh, each tensor's placements and pieces, an\n"
          "XXH3-64 per piece, checked when a later load reads a piece whole).\n"
          "Long runs print progress on stderr (tensors done, bytes, GB/s).\n"
          "\n"
          "examples:\n"
          "  mpirun -n 4 dtr reshard --from model.safetensors --to tp4 --mesh 2x2 --rules r.json\n"
          "  mpirun -n 2 dtr reshard --from tp4 --to tp2 --mesh 2 --rules r2.json\n"
          "  mpirun -n 3 dtr reshard --from tp2 --to whole --consolidate\n",
          out);
}

typedef struct {
    const char *from, *to, *mesh, *rules, *max_bytes, *backend;
    bool consolidate;
} dtr__rs_args_t;

static int dtr__rs_args(int argc, char **argv, dtr__rs_args_t *a) {
    static const struct option options[] = {
        {"from", required_argument, NULL, 'f'},    {"to", required_argument, NULL, 't'},
        {"mesh", required_argument, NULL, 'm'},    {"rules", required_argument, NULL, 'r'},
        {"consolidate", no_argument, NULL, 'c'},   {"max-file-bytes", required_argument, NULL, 'x'},
        {"backend", required_argument, NULL, 'b'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    a->max_bytes = "5000000000";
    optind = 1;
    opterr = 0;
    unsigned char seen[DTR_CLI_SEEN] = {0};
    for (int c; (c = getopt_long(argc, argv, ":", options, NULL)) != -1;) {
        if (dtr_cli_once("reshard", options, c, seen) != DTR_EXIT_OK) return DTR_EXIT_USAGE;
        switch (c) {
        case 'f': a->from = optarg; break;
        case 't': a->to = optarg; break;
        case 'm': a->mesh = optarg; break;
        case 'r': a->rules = optarg; break;
        case 'c': a->consolidate = true; break;
        case 'x': a->max_bytes = optarg; break;
        case 'b': a->backend = optarg; break;
        default: return dtr_cli_option_error("reshard", c, argv);
        }
    }
    if (optind < argc) return dtr_cli_option_error("reshard", 0, argv);
    if (a->backend != NULL && strcmp(a->backend, "mpi") != 0 && strcmp(a->backend, "gloo") != 0)
        return dtr_cli_usage_error("reshard", "--backend: '%s' is not mpi or gloo", a->backend);
    if (a->from == NULL) return dtr_cli_usage_error("reshard", "--from: missing");
    if (a->to == NULL) return dtr_cli_usage_error("reshard", "--to: missing");
    if (a->consolidate && (a->mesh != NULL || a->rules != NULL))
        return dtr_cli_usage_error("reshard", "%s: not with --consolidate (whole tensors)",
                                   a->mesh != NULL ? "--mesh" : "--rules");
    if (!a->consolidate && (a->mesh == NULL || a->rules == NULL))
        return dtr_cli_usage_error("reshard", "%s: missing (or --consolidate)",
                                   a->mesh == NULL ? "--mesh" : "--rules");
    return DTR_EXIT_OK;
}

/* --to on rank 0: missing (made here; *made set) or an empty directory. */
static int dtr__rs_target(const char *to, bool *made) {
    DIR *d = opendir(to);
    if (d == NULL) {
        if (errno != ENOENT) return dtr_cli_usage_error("reshard", "--to: %s: %s", to, strerror(errno));
        if (mkdir(to, 0755) != 0)
            return dtr_cli_usage_error("reshard", "--to: %s: %s", to, strerror(errno));
        *made = true;
        return DTR_EXIT_OK;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) break;
    closedir(d);
    if (e != NULL)
        return dtr_cli_usage_error("reshard", "--to: %s exists and is not empty", to);
    return DTR_EXIT_OK;
}

/* What the fill callback needs: the source, each item's tensor index, what was read. */
typedef struct {
    const dtr_checkpoint_t *ck;
    const int64_t *src;
    const dtr_checkpoint_item_t *items;
    int rank;
    int64_t read, written, done, total; /* written: the blocks handed to the writer */
    dtr_cli_progress_t prog;
    double start;
} dtr__rs_fill_t;

static dtr_status_t dtr__rs_fill(void *arg, int64_t item, void *block, size_t bytes) {
    dtr__rs_fill_t *f = arg;
    dtr_checkpoint_read_stats_t st;
    dtr_status_t s = dtr_checkpoint_read_block(f->ck, f->src[item], f->items[item].spec,
                                               f->items[item].spec->mesh != NULL ? f->rank : 0,
                                               block, bytes, &st);
    if (s != DTR_OK) return s;
    f->read += st.bytes;
    f->written += (int64_t)bytes;
    f->done++;
    if (f->rank == 0) {
        double s = dtr_cli_job_now() - f->start;
        char what[128];
        snprintf(what, sizeof what, "tensors (rank 0: %.3f GB read, %.2f GB/s)",
                 (double)f->read * 1e-9, s > 0 ? (double)f->read * 1e-9 / s : 0.0);
        dtr_cli_progress(&f->prog, "reshard", what, f->done, f->total);
    }
    return DTR_OK;
}

/* Each tensor's spec under the rules (dtr_checkpoint_rules_spec); rank 0 prints the rule
 * each took. */
static int dtr__rs_specs(const dtr_checkpoint_t *ck, const dtr_mesh_t *mesh,
                         const dtr_checkpoint_rules_t *rules, int rank, dtr_spec_t *specs,
                         dtr_checkpoint_item_t *items, int64_t *src) {
    for (int64_t i = 0; i < dtr_checkpoint_count(ck); i++) {
        dtr_checkpoint_tensor_t t;
        dtr_checkpoint_tensor(ck, i, &t);
        if (t.name[0] == '\0')
            return dtr_cli_usage_error("reshard", "--from: tensor %lld has an empty name (a "
                                                  "checkpoint cannot name it)", (long long)i);
        int k = -1;
        if (dtr_checkpoint_rules_spec(rules, ck, i, mesh, &specs[i], &k) != DTR_OK)
            return dtr_cli_lib_error("reshard", "--rules");
        items[i] = (dtr_checkpoint_item_t){t.name, &specs[i], NULL};
        src[i] = i;
        char shape[128] = "";
        dtr_shape_format(t.shape, t.ndim, shape, sizeof shape);
        if (rank == 0)
            printf("  %-40s %-14s %-6s rule %d (%s)\n", t.name, shape, dtr_dtype_name(t.dtype),
                   k, dtr_checkpoint_rules_describe(rules, k));
    }
    return DTR_EXIT_OK;
}

/* Rank 0's summary of what was read and written. */
static void dtr__rs_report(const char *what, const dtr__rs_args_t *a, int64_t ntensors,
                           const dtr__rs_fill_t *f, int nfiles, int rank, int world) {
    int64_t maxread = f->read, total = f->written;
    dtr_cli_job_reduce(&maxread, 1, DTR_I64, DTR_REDUCE_MAX);
    dtr_cli_job_reduce(&total, 1, DTR_I64, DTR_REDUCE_SUM);
    double all = dtr_cli_job_now() - f->start;
    dtr_cli_job_reduce(&all, 1, DTR_F64, DTR_REDUCE_MAX);
    if (rank == 0)
        printf("dtr reshard: %lld tensors from %s to %s %s on %d ranks: %lld bytes in %d "
               "file%s; each rank read at most %lld bytes; %.3f s, %.2f GB/s written\n",
               (long long)ntensors, a->from, a->to, what, world, (long long)total, nfiles,
               nfiles == 1 ? "" : "s", (long long)maxread, all, all > 0 ? (double)total / all / 1e9 : 0.0);
}

/* On failure: every rank's files out of --to, and --to itself if this run made it. */
static void dtr__rs_undo(const char *to, bool made, int rank) {
    dtr_cli_job_barrier();
    if (rank != 0) return;
    DIR *d = opendir(to);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", to, e->d_name);
        unlink(p);
    }
    if (d != NULL) closedir(d);
    if (made) rmdir(to);
}

/* The files a save wrote into dir (rank 0's count for the report). */
static int dtr__rs_count_files(const char *dir) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        n += strstr(e->d_name, ".safetensors") != NULL || strcmp(e->d_name, "dtr.manifest.json") == 0;
    if (d != NULL) closedir(d);
    return n;
}

/* Saves on the mesh: the library's collective save (dtr_checkpoint_save), each rank's
 * blocks read from the source by the fill callback. */
static int dtr__rs_save(const dtr__rs_args_t *a, const dtr_checkpoint_t *ck, const dtr_mesh_t *mesh,
                        const dtr_checkpoint_rules_t *rules, int rank, int world, bool made) {
    int64_t n = dtr_checkpoint_count(ck);
    dtr_spec_t *specs = calloc((size_t)n + 1, sizeof *specs);
    dtr_checkpoint_item_t *items = calloc((size_t)n + 1, sizeof *items);
    int64_t *src = calloc((size_t)n + 1, sizeof *src);
    if (specs == NULL || items == NULL || src == NULL) return DTR_EXIT_FAIL;
    int rc = dtr__rs_specs(ck, mesh, rules, rank, specs, items, src);
    dtr_cli_restore_stderr(); /* from here each rank says what failed on it */
    dtr__rs_fill_t f = {.ck = ck, .src = src, .items = items, .rank = rank, .total = n,
                        .start = dtr_cli_job_now()};
    rc = dtr_cli_report_said("reshard", rc, rank);
    dtr_context_t *ctx = NULL;
    if (rc == DTR_EXIT_OK &&
        !dtr_cli_all_ok("reshard", dtr_cli_job_context(&ctx), rank, "the job's context"))
        rc = DTR_EXIT_FAIL;
    if (rc == DTR_EXIT_OK) {
        const char **meta = dtr_checkpoint_metadata_carried(ck);
        dtr_status_t st = dtr_checkpoint_save(ctx, mesh, a->to, n, items, dtr__rs_fill, &f,
                                              meta);
        free(meta);
        /* the rank that failed says why; the others' DTR_ERR_REMOTE only point at it */
        if (!dtr_cli_all_ok("reshard", st == DTR_ERR_REMOTE ? DTR_OK : st, rank, "saving"))
            rc = DTR_EXIT_FAIL;
    }
    dtr_context_destroy(ctx);
    if (rc == DTR_EXIT_OK) {
        char what[160] = "as ";
        dtr_mesh_format(mesh, what + 3, sizeof what - 3);
        dtr__rs_report(what, a, n, &f, rank == 0 ? dtr__rs_count_files(a->to) : 0, rank, world);
    } else {
        dtr__rs_undo(a->to, made, rank);
    }
    free(specs);
    free(items);
    free(src);
    return rc;
}

/* Whole tensors into plain safetensors files (the library's consolidation, its files shared
 * out: file k written by rank k mod the job's ranks, the index by rank 0). */
static int dtr__rs_consolidate(const dtr__rs_args_t *a, const dtr_checkpoint_t *ck, int rank,
                               int world, bool made) {
    int64_t n = dtr_checkpoint_count(ck), max = 0;
    int rc = dtr_cli_parse_int("reshard", "--max-file-bytes", a->max_bytes, 1, INT64_C(1) << 50,
                               "a byte count 1..2^50", &max);
    int *file_of = calloc((size_t)n + 1, sizeof *file_of), nfiles = 1;
    if (rc == DTR_EXIT_OK && file_of == NULL) rc = dtr_cli_usage_error("reshard", "out of memory");
    if (rc == DTR_EXIT_OK && dtr_checkpoint_consolidate_plan(ck, max, file_of, &nfiles) != DTR_OK)
        rc = dtr_cli_lib_error("reshard", "--from");
    for (int64_t i = 0; rc == DTR_EXIT_OK && i < n; i++) {
        dtr_checkpoint_tensor_t t;
        dtr_checkpoint_tensor(ck, i, &t);
        if (t.dtype == DTR_DTYPE_LAST)
            rc = dtr_cli_usage_error("reshard", "tensor '%s': dtype %s: dtr cannot move it",
                                     t.name, t.format_dtype);
    }
    dtr_cli_restore_stderr(); /* from here each rank says what failed on it */
    dtr__rs_fill_t f = {.ck = ck, .rank = 0, .total = n, .start = dtr_cli_job_now()};
    dtr_status_t st = DTR_OK;
    for (int k = rank; rc == DTR_EXIT_OK && st == DTR_OK && k < nfiles; k += world) {
        st = dtr_checkpoint_consolidate_file(ck, a->to, file_of, nfiles, k);
        for (int64_t i = 0; st == DTR_OK && i < n; i++) {
            dtr_checkpoint_tensor_t t;
            dtr_checkpoint_tensor(ck, i, &t);
            if (file_of[i] != k) continue;
            f.read += t.bytes, f.written += t.bytes, f.done++;
        }
        if (rank == 0) dtr_cli_progress(&f.prog, "reshard", "files", k + 1, nfiles);
    }
    rc = dtr_cli_report_said("reshard", rc, rank);
    if (rc == DTR_EXIT_OK && !dtr_cli_all_ok("reshard", st, rank, "writing whole tensors"))
        rc = DTR_EXIT_FAIL;
    if (rc == DTR_EXIT_OK && nfiles > 1) {
        st = rank == 0 ? dtr_checkpoint_write_index(ck, a->to, file_of, nfiles) : DTR_OK;
        if (!dtr_cli_all_ok("reshard", st, rank, "writing the index")) rc = DTR_EXIT_FAIL;
    }
    if (rc == DTR_EXIT_OK)
        dtr__rs_report("consolidated", a, n, &f, nfiles + (nfiles > 1), rank, world);
    else
        dtr__rs_undo(a->to, made, rank);
    free(file_of);
    return rc;
}

static int dtr__reshard_body(int argc, char **argv, int rank, int world) {
    dtr__rs_args_t a;
    int rc = dtr__rs_args(argc, argv, &a);
    dtr_mesh_t *mesh = NULL;
    dtr_checkpoint_rules_t *rules = NULL;
    if (rc == DTR_EXIT_OK && !a.consolidate) {
        if (dtr_mesh_parse(a.mesh, NULL, 0, &mesh) != DTR_OK)
            rc = dtr_cli_lib_error("reshard", "--mesh");
        else if (dtr_mesh_nranks(mesh) != world)
            rc = dtr_cli_usage_error("reshard", "--mesh: %lld ranks, the job has %d (run under "
                                                "'%s %lld')",
                                     (long long)dtr_mesh_nranks(mesh), world,
                                     dtr_cli_job_mpi() ? "mpirun -n" : "dtr_launch.sh -n",
                                     (long long)dtr_mesh_nranks(mesh));
        else if (dtr_checkpoint_rules_load(a.rules, dtr_mesh_ndims(mesh), &rules) != DTR_OK)
            rc = dtr_cli_lib_error("reshard", "--rules");
    }
    rc = dtr_cli_agree_args("reshard", rc, rank); /* (before the first collective) */
    bool made = false;
    if (rc == DTR_EXIT_OK && rank == 0) rc = dtr__rs_target(a.to, &made);
    dtr_cli_job_bcast(&rc, sizeof rc, 0);
    dtr_checkpoint_t *ck = NULL;
    if (rc == DTR_EXIT_OK) { /* (rank 0 speaks for all: every rank reads the same files) */
        dtr_status_t st = dtr_checkpoint_open(a.from, &ck);
        rc = dtr_cli_all_code("reshard", st, rank, "--from"); /* (unreadable: 2) */
        if (rc == DTR_EXIT_OK && dtr_checkpoint_count(ck) == 0)
            rc = dtr_cli_usage_error("reshard", "--from: '%s' holds no tensors (nothing to "
                                                "reshard)", a.from);
        if (rc != DTR_EXIT_OK) dtr__rs_undo(a.to, made, rank);
    }
    if (rc == DTR_EXIT_OK && rank == 0 && !a.consolidate)
        printf("dtr reshard: %lld tensors of %s onto %s by %s:\n",
               (long long)dtr_checkpoint_count(ck), a.from, a.mesh, a.rules);
    if (rc == DTR_EXIT_OK)
        rc = a.consolidate ? dtr__rs_consolidate(&a, ck, rank, world, made)
                           : dtr__rs_save(&a, ck, mesh, rules, rank, world, made);
    dtr_checkpoint_close(ck);
    dtr_mesh_destroy(mesh);
    dtr_checkpoint_rules_destroy(rules);
    return rc;
}

static int dtr__reshard_main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            dtr__reshard_help(stdout);
            return DTR_EXIT_OK;
        }
    return dtr_cli_job_main("reshard", dtr__reshard_body, argc, argv);
}

const dtr_cli_command_t dtr_cli_reshard = {
    .name = "reshard",
    .summary = "a safetensors checkpoint into another layout, N ranks to M, or consolidated",
    .main = dtr__reshard_main,
    .help = dtr__reshard_help,
};
