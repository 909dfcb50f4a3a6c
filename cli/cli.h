/* Shared pieces of the dtr command-line tool. The CLI is thin: it parses flags, calls the
 * library, and prints; every rule lives in the library. */
#ifndef DTR_CLI_CLI_H
#define DTR_CLI_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "dtr.h"

/* Exit codes (dtr --help lists them): 0 success; 1 a run failed or did not verify; 2 bad
 * usage or bad arguments; 3 the change was refused: well-formed, but the planner has no
 * plan for it (P(sum) -> P(avg), S -> P, compat where the seed plan would misplace data).
 * A checker can tell a refusal from a crash without running dtr plan first. */
enum { DTR_EXIT_OK = 0, DTR_EXIT_FAIL = 1, DTR_EXIT_USAGE = 2, DTR_EXIT_REFUSED = 3 };

/* After a failed dtr_plan_create / dtr_batch_plan_create on specs the CLI built itself:
 * prints "dtr <cmd>: <what>: <the library's error>" (no "<what>: " when what is NULL) as
 * one line on stderr and returns the exit code of the status's class (core/status.h):
 * DTR_EXIT_REFUSED for a refusal, DTR_EXIT_USAGE for a bad argument, DTR_EXIT_FAIL when
 * memory ran out. */
int dtr_cli_plan_error(const char *cmd, const char *what);

typedef struct {
    const char *name;
    const char *summary;
    int (*main)(int argc, char **argv); /* argv[0] is the command's name */
    void (*help)(FILE *out);
} dtr_cli_command_t;

extern const dtr_cli_command_t dtr_cli_layout;

/* For each option getopt_long returned (c its code): DTR_EXIT_USAGE, naming the flag, the
 * second time the same flag comes (it would silently replace the first value); seen: a
 * zeroed array of DTR_CLI_SEEN bytes per parse. */
#define DTR_CLI_SEEN 512
struct option;
int dtr_cli_once(const char *cmd, const struct option *options, int c, unsigned char *seen);

/* Prints the formatted text and a newline on stderr as one line: control characters of the
 * text it quotes (a user's argument, a file name) written as escapes (\n, \x01). Every
 * error line of the CLI goes through it. */
void dtr_cli_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "dtr <cmd>: <message>" as one line on stderr and returns DTR_EXIT_USAGE. */
int dtr_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* For getopt_long's ':' (missing value) and '?' (unknown option) results, and for operands
 * left after the options (pass c = 0): prints the one-line error and returns
 * DTR_EXIT_USAGE. */
int dtr_cli_option_error(const char *cmd, int c, char **argv);

/* Same, after a failed library call on a flag's value: "dtr <cmd>: <flag>: <last error>". */
int dtr_cli_lib_error(const char *cmd, const char *flag);

/* A flag's integer value in lo..hi: whole text, base 10, no overflow. On failure prints
 * "dtr <cmd>: <flag>: '<text>' is not <what>" and returns DTR_EXIT_USAGE. */
int dtr_cli_parse_int(const char *cmd, const char *flag, const char *text, int64_t lo,
                      int64_t hi, const char *what, int64_t *out);

/* A flag's finite number (> 0 when `positive`); errors as dtr_cli_parse_int. */
int dtr_cli_parse_number(const char *cmd, const char *flag, const char *text, bool positive,
                         const char *what, double *out);

/* Parses flag's "0,1,2,3" into a malloc'd array. Returns 0, or prints a usage error naming
 * the flag and returns 2. */
int dtr_cli_parse_ranks(const char *cmd, const char *flag, const char *text, int **ranks,
                        int64_t *n);

/* The common spec flags: --mesh, --shape, --placements (or another name), --dtype, --ranks. */
typedef struct {
    const char *mesh;
    const char *shape;
    const char *placements;
    const char *placements_flag; /* NULL: "--placements" */
    const char *dtype;
    const char *ranks;
} dtr_cli_spec_args_t;

/* getopt_long entries for the spec flags every command takes (placements differ per
 * command), and the switch arm that stores them: true if c was one of them. */
#define DTR_CLI_SPEC_OPTIONS                                                              \
    {"mesh", required_argument, NULL, 'm'}, {"shape", required_argument, NULL, 's'},      \
        {"dtype", required_argument, NULL, 'd'}, {"ranks", required_argument, NULL, 'r'}
bool dtr_cli_spec_option(int c, const char *value, dtr_cli_spec_args_t *args);

/* Builds the mesh from --mesh and --ranks; on failure prints the one-line error and returns
 * DTR_EXIT_USAGE with *mesh NULL. */
int dtr_cli_build_mesh(const char *cmd, const dtr_cli_spec_args_t *args, dtr_mesh_t **mesh);

/* Builds a mesh and spec from the flags; on failure prints the one-line error and returns
 * DTR_EXIT_USAGE with *mesh NULL. The caller destroys *mesh. */
int dtr_cli_build_spec(const char *cmd, const dtr_cli_spec_args_t *args, dtr_mesh_t **mesh,
                       dtr_spec_t *spec);

/* A spec like `like` (mesh, shape, dtype) with other placements, from flag's text. Prints
 * the error and returns DTR_EXIT_USAGE on failure. */
int dtr_cli_other_spec(const char *cmd, const char *flag, const char *text,
                       const dtr_spec_t *like, dtr_spec_t *out);

/* dtr_cli_target_mesh: the destination mesh of --to-mesh and --to-ranks, into *mesh_b (the
 * caller destroys it). dtr_cli_target_spec: the target spec of a change from src: the --to
 * placements on src's mesh, or (to_mesh set) on the mesh --to-mesh and --to-ranks make
 * (*mesh_b, which the caller destroys; NULL otherwise), in --to-dtype where given. Both
 * print the error naming the flag and return DTR_EXIT_USAGE on failure. */
int dtr_cli_target_mesh(const char *cmd, const char *to_mesh, const char *to_ranks,
                        dtr_mesh_t **mesh_b);
int dtr_cli_target_spec(const char *cmd, const char *to, const char *to_mesh,
                        const char *to_ranks, const char *to_dtype, const dtr_spec_t *src,
                        dtr_mesh_t **mesh_b, dtr_spec_t *dst);

/* --to-dtype TEXT (NULL: nothing to do): spec, the target, in that dtype (a cast). Prints
 * the error and returns DTR_EXIT_USAGE on failure. */
int dtr_cli_cast_spec(const char *cmd, const char *text, dtr_spec_t *spec);

/* --backward-dtype TEXT (NULL: not given) into *out; only with --backward. */
int dtr_cli_backward_dtype(const char *cmd, const char *text, bool backward, dtr_dtype_t *out);

/* Reads a --batch FILE (batch_file.c): a JSON list of {"shape", "dtype", "from", "to"}
 * into n specs each side, the sources on mesh, the destinations on mesh_b (NULL: mesh)
 * (malloc'd; the caller frees both). On failure prints the one-line error naming the file,
 * line and entry and returns DTR_EXIT_USAGE. */
int dtr_cli_batch_load(const char *cmd, const char *path, const dtr_mesh_t *mesh,
                       const dtr_mesh_t *mesh_b, dtr_spec_t **src, dtr_spec_t **dst, int *n);
/* A parameter of a --model FILE (batch_file.c): its shape (f32, shard dim 0) and its
 * group's name ("#<index>" when none is given). */
typedef struct {
    dtr_param_desc_t desc;
    char group[64];
} dtr_cli_param_t;
/* Reads a --model FILE: a JSON list of {"shape", "group"} into n parameters
 * (malloc'd; the caller frees). Errors as for dtr_cli_batch_load. */
int dtr_cli_model_load(const char *cmd, const char *path, dtr_cli_param_t **params, int *n);
/* 'dtr grad --model' (cmd_grad_model.c). */
int dtr_cli_grad_model(int argc, char **argv, int rank, int world);
/* The batch forms of the commands (cmd_plan.c and cmd_run_batch.c). */
int dtr_cli_run_batch(int argc, char **argv, int rank, int world);
/* The median of v[0..n) (sorts v); 0 for n = 0. */
double dtr_cli_median(double *v, int n);
/* {"all_gather":1,...} from counts by step kind (collective kinds only). */
void dtr_cli_json_counts(FILE *out, const int *count);

extern const dtr_cli_command_t dtr_cli_plan;
extern const dtr_cli_command_t dtr_cli_run;

/* ---- the job a running command is a rank of (cli_job.c) ---- */
/* Joins the job, then runs body with this rank and the job's size, then leaves. The job is
 * MPI's (MPI_Init ... MPI_Finalize: mpirun started it) for --backend mpi (the default) and
 * nccl; for another backend (gloo) it is that backend's, over RANK and WORLD_SIZE (a
 * launcher such as tools/dtr_launch.sh started it), and a failure to join is printed and
 * returned as an exit code. Ranks other than 0 have stderr silenced until the body calls
 * dtr_cli_restore_stderr (argument errors are the same everywhere: only rank 0 prints
 * them). */
int dtr_cli_job_main(const char *cmd, int (*body)(int argc, char **argv, int rank, int world),
                     int argc, char **argv);
/* Whether the job is MPI's; the backend it was started for ("mpi", "nccl", "gloo"); its
 * size. */
bool dtr_cli_job_mpi(void);
const char *dtr_cli_job_backend(void);
int dtr_cli_job_world(void);
/* A new context over the job on its backend, on host memory. */
dtr_status_t dtr_cli_job_context(dtr_context_t **ctx);
/* The command's own collectives over every rank of the job (a failure ends the process):
 * an all-reduce in place (I32, I64, F64 or U8; SUM, MAX or MIN), a barrier, len bytes of
 * every rank into rank 0's all (world * len bytes; all unused elsewhere), and len bytes of
 * root's buf into every rank's. */
void dtr_cli_job_reduce(void *buf, int count, dtr_dtype_t dtype, dtr_reduce_op_t op);
void dtr_cli_job_barrier(void);
/* all[k] = the largest mine[k] over the ranks (all may be mine). */
void dtr_cli_job_max(const double *mine, double *all, int count);
void dtr_cli_job_gather(const void *mine, size_t len, void *all);
void dtr_cli_job_bcast(void *buf, size_t len, int root);
/* MPI_Gatherv's form: len bytes of every rank into rank 0's all at at[r] (lens and at are
 * rank 0's, its own gather of the lens). */
void dtr_cli_job_gatherv(const void *mine, int len, void *all, const int *lens, const int *at);
/* Seconds on a clock every rank reads alike (MPI_Wtime, or the monotonic clock). */
double dtr_cli_job_now(void);
/* Which mesh dims cross nodes (dtr_mpi_mesh_across_nodes; without MPI, from the ranks' host
 * names). Collective. */
dtr_status_t dtr_cli_job_across_nodes(const dtr_mesh_t *mesh, uint32_t *across);
void dtr_cli_quiet_stderr(void);
void dtr_cli_restore_stderr(void);
/* Collective over the job: false if st failed on any rank; rank 0 then prints each distinct
 * "<what>: <error>" once, with the ranks that failed so: "dtr <cmd>: ranks 0-3: <what>:
 * <error>" (a failure every rank has is one line, not one a rank). */
int dtr_cli_all_ok(const char *cmd, dtr_status_t st, int rank, const char *what);
/* dtr_cli_all_code for the filling of a run's buffers: out of memory names the bytes
 * (oom_bytes: the tensor's source block twice, its target block once), other errors as
 * "fill: <error>"; the exit code from the error's class, as a single change's. */
int dtr_cli_fill_code(const char *cmd, dtr_status_t st, int rank, size_t oom_bytes);
/* The same with this rank's own message (bad: it failed), for failures outside the library. */
int dtr_cli_all_ok_msg(const char *cmd, int bad, int rank, const char *msg);
/* The arguments' verdict over the job, once, before a command's first collective: rc is this
 * rank's exit code from its own checks of the arguments; returns the highest over the job.
 * Rank 0 prints what the other ranks said (dtr_cli_last_said) where it differs from its
 * own, so a bad argument on one rank fails every rank at once instead of leaving the others
 * in a collective. A rank whose checks failed returns from its command before the call;
 * dtr_cli_job_main then makes it for it (dtr_cli_args_agreed says whether it was made). */
int dtr_cli_agree_args(const char *cmd, int rc, int rank);
bool dtr_cli_args_agreed(void);
/* dtr_cli_agree_args's collective for checks a command makes later, rank by rank with
 * stderr quiet off rank 0: the highest rc over the job, rank 0 printing the messages
 * (dtr_cli_last_said) of the other ranks that differ from its own. */
int dtr_cli_report_said(const char *cmd, int rc, int rank);
/* The collective behind dtr_cli_all_ok* and dtr_cli_agree_args: code is this rank's exit
 * code (0: it did not fail), msg its message; returns the highest over the job, rank 0
 * having printed each distinct message once with the ranks that gave it (others: only the
 * other ranks' messages that differ from rank 0's own, which it printed itself). */
int dtr_cli_job_report(const char *cmd, int code, int rank, const char *msg, bool others);
/* The last line dtr_cli_say printed on this rank ("" if none). */
const char *dtr_cli_last_said(void);
/* malloc(bytes) for a tensor's block, or NULL where bytes alone reach the machine's physical
 * memory: a machine that overcommits (vm.overcommit_memory=1) grants any size, and the
 * process is killed when it touches the pages instead of being told "out of memory". */
void *dtr_cli_host_alloc(size_t bytes);
/* dtr_cli_all_ok's collective, returning the exit code instead: DTR_EXIT_OK, or the highest
 * over the ranks that failed, each from its status's class (2 for a file or an argument, 3
 * for a refusal, 1 for a run failure). */
int dtr_cli_all_code(const char *cmd, dtr_status_t st, int rank, const char *what);
/* DTR_EXIT_OK if every rank of the mesh is in the job, else prints why (naming `flag`, the
 * option that gave the mesh) and returns DTR_EXIT_USAGE. */
int dtr_cli_mesh_fits(const char *cmd, const char *flag, const dtr_mesh_t *mesh, int world);
/* The MPI backend's groups over the job (dtr_mpi_groups), each counted once, by its first
 * member: [0] groups with a shared-memory segment (all members on one node), [1] their
 * operations through it, [2] their operations through MPI, [3] groups without one (across
 * nodes), [4] their operations through MPI's flat calls, [5] their reductions in the
 * hierarchical form (a segment inside each node, MPI across), [6] of [1], the reductions that
 * read the members' buffers where they are (dtr_context_alloc memory). Collective. */
void dtr_cli_mpi_paths(long long sums[7]);
/* The cost-model flags of dtr plan and dtr run (NULL: not given). */
typedef struct {
    const char *alpha, *bandwidth, *local, *inter_alpha, *inter_bandwidth;
} dtr_cli_cost_flags_t;
/* The cost model from the DTR_* variables and --alpha-us, --bandwidth-gbps, --local-gbps,
 * each checked on its own so that an error names its flag. An exit code. */
int dtr_cli_cost_flags(const char *cmd, const dtr_cli_cost_flags_t *f, dtr_cost_model_t *cost);
/* --inter-alpha-us and --inter-bandwidth-gbps (f->inter_*) for the mesh dims `across`, each
 * checked on its own so that an error names its flag. An exit code. */
int dtr_cli_inter_cost(const char *cmd, uint32_t across, const dtr_cli_cost_flags_t *f,
                       dtr_cost_model_t *cost);
/* The cost model a run plans with (collective): dtr_cli_cost_flags, with the mesh dims
 * nodes_of names given inter-node figures (f->inter_*, else DTR_* or the defaults; "auto":
 * those MPI says cross nodes; "none"; or a list, "0,2"). *across gets the mesh dims that do
 * cross, *planned those planned as crossing. An exit code; errors name the flag. */
int dtr_cli_node_cost(const char *cmd, const dtr_mesh_t *mesh, const char *nodes_of,
                      const dtr_cli_cost_flags_t *f, dtr_cost_model_t *cost, uint32_t *across,
                      uint32_t *planned);

/* ---- --backend mpi|gloo|nccl and --device cpu|cuda (cli_device.c) --------------------- */

typedef struct {
    bool nccl, gloo, cuda;
    const char *device; /* "cpu" or "cuda" */
    /* --device cuda: the command's own CUDA memory state for its copies of host buffers
     * (ops NULL: --device cpu, the host buffers themselves) */
    const dtr_memory_ops_t *ops;
    void *state;
} dtr_cli_engine_t;

/* Checks the flags (device NULL: cuda for nccl, else cpu), refusing what this build lacks:
 * DTR_EXIT_USAGE with the message, or DTR_EXIT_OK. */
int dtr_cli_engine_args(const char *cmd, const char *backend, const char *device,
                        dtr_cli_engine_t *e);
/* The context they ask for (MPI on host; MPI staged over CUDA memory; NCCL), GPU rank % the
 * GPUs visible; with no GPU visible, the driver's reason as the error. */
dtr_status_t dtr_cli_engine_context(dtr_cli_engine_t *e, int rank, dtr_context_t **ctx);
/* Collective over the job, before dtr_cli_engine_context: DTR_EXIT_OK where every rank has
 * the same engine (host, CUDA through MPI, NCCL); else DTR_EXIT_USAGE on every rank, rank 0
 * saying so (their contexts would be made by different collectives, and wait forever). */
int dtr_cli_agree_engine(const char *cmd, const dtr_cli_engine_t *e);
/* A copy of host's bytes in the command's space (*p = host on --device cpu); a copy in
 * (then a sync, before the context's stream reads it) or out; the copy freed (nothing when
 * p is host); the state destroyed. A copy out must follow dtr_context_sync of the context
 * whose call wrote p. */
dtr_status_t dtr_cli_dev_put(const dtr_cli_engine_t *e, void *host, size_t bytes, void **p);
dtr_status_t dtr_cli_dev_in(const dtr_cli_engine_t *e, void *p, const void *host,
                            size_t bytes);
dtr_status_t dtr_cli_dev_get(const dtr_cli_engine_t *e, void *host, const void *p,
                             size_t bytes);
void dtr_cli_dev_free(const dtr_cli_engine_t *e, void *p, const void *host);
void dtr_cli_engine_end(dtr_cli_engine_t *e);

extern const dtr_cli_command_t dtr_cli_grad;
extern const dtr_cli_command_t dtr_cli_reshard; /* cmd_reshard.c */

/* Progress of a long loop, on stderr: nothing in its first 3 seconds, then at most every 2
 * seconds "dtr CMD: WHAT: DONE of TOTAL done, LEFT left (S s)" (DTR_PROGRESS_S sets both
 * to its value; 0: after every step). Zero-initialise p; call it after each step (rank 0
 * only, under mpirun). */
typedef struct {
    double start, last;
} dtr_cli_progress_t;
void dtr_cli_progress(dtr_cli_progress_t *p, const char *cmd, const char *what, long long done,
                      long long total);

/* JSON output helpers (compact, one object per line). Every --json object follows the one
 * table of docs/json.md: it starts with dtr_cli_json_begin, and a key means the same type
 * wherever it appears. */
#define DTR_CLI_JSON_SCHEMA 1
/* {"schema":1,"command":"CMD","mesh":[sizes] and, where the ranks are not 0..N-1 in order,
 * "ranks":[...]: the caller goes on with ,"key":... and closes the object. */
void dtr_cli_json_begin(FILE *out, const char *cmd, const dtr_mesh_t *mesh);
/* The same from the mesh's text ("2x4"; "mesh":[] where it does not parse). */
void dtr_cli_json_begin_text(FILE *out, const char *cmd, const char *mesh);
/* ,"shape":[..],"dtype":"..","to_dtype":"..","from":"..","to":".." of a change. */
void dtr_cli_json_change(FILE *out, const dtr_spec_t *src, const dtr_spec_t *dst);
/* ,"key":"text" with text escaped as a JSON string. */
void dtr_cli_json_str(FILE *out, const char *key, const char *text);
/* The members of the JSON object print(arg, f) writes, after a comma (its braces dropped):
 * a library object spliced into the CLI's. DTR_OK or print's status. */
dtr_status_t dtr_cli_json_splice(FILE *out, dtr_status_t (*print)(const void *arg, FILE *f),
                                 const void *arg);
/* --svg PATH: what draw(arg, f) writes, to stdout for "-"; into a regular file (new or not)
 * through a temporary file beside it renamed once whole, so a failure leaves no file and the
 * one there as it was, with its mode; through a symlink to where it leads; into a device or
 * FIFO as it is. An error naming --svg and the path: exit 2 (draw's own: exit 3). */
int dtr_cli_write_svg(const char *cmd, const char *path,
                      dtr_status_t (*draw)(const void *arg, FILE *f), const void *arg);
void dtr_cli_json_i64_array(FILE *out, const int64_t *v, int n);
void dtr_cli_json_placements(FILE *out, const dtr_placement_t *p, int n);
/* {"all_gather":1,...}: a plan's steps that communicate, by kind. */
void dtr_cli_json_collectives(FILE *out, const dtr_plan_t *plan);

#endif
