/*
 * The executor on the Gloo backend, random cases, with no MPI anywhere: launched as N plain
 * processes by tools/dtr_launch.sh (RANK, WORLD_SIZE, DTR_GLOO_STORE). Every rank draws the
 * same cases as mpi_exec_test (tests/support/exec_cases.h), plans each with both strategies,
 * runs the plan and checks every element it holds, that its input is intact and that nothing
 * was written past its output. Cases alternate between two contexts: one met through the
 * launcher's file store, one through a key-value store given as callbacks (a directory of
 * files here, the way a framework's store would serve it); and between the blocking and
 * the non-blocking calls.
 *
 * Usage: tools/dtr_launch.sh -n N gloo_exec_test [--cases N] [--seed S] [--memory host|fake]
 * Each rank prints its failing cases (with the seed and case number to rerun them) and
 * exits non-zero on any, then the paths its groups took (dtr_gloo_paths); rank 0 prints the
 * summary.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtr.h"
#include "backends/gloo/dtr_gloo.h"
#include "tests/support/exec_cases.h"
#include "tests/support/plan_util.h"

/* ---- a key-value store given as callbacks: one file per key, written whole by rename ---- */

static int kv_path(const char *dir, const char *key, char *path, size_t len) {
    int n = snprintf(path, len, "%s/kv.", dir);
    for (const char *k = key; *k != '\0' && (size_t)n + 3 < len; k++)
        n += snprintf(path + n, len - (size_t)n, "%02x", (unsigned char)*k);
    return (size_t)n + 3 < len ? 0 : -1;
}

static int kv_set(void *user, const char *key, const void *value, size_t len) {
    char path[4096], tmp[4200];
    if (kv_path(user, key, path, sizeof path) != 0) return -1;
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) return -1;
    size_t w = fwrite(value, 1, len, f);
    if (fclose(f) != 0 || w != len) return -1;
    return rename(tmp, path);
}

static int kv_get(void *user, const char *key, void *buf, size_t cap, size_t *len) {
    char path[4096];
    if (kv_path(user, key, path, sizeof path) != 0) return -1;
    for (int tries = 0; tries < 60000; tries++) { /* a minute */
        FILE *f = fopen(path, "rb");
        if (f != NULL) {
            fseek(f, 0, SEEK_END);
            long size = ftell(f);
            rewind(f);
            size_t got = fread(buf, 1, cap < (size_t)size ? cap : (size_t)size, f);
            fclose(f);
            *len = (size_t)size;
            return got == (cap < (size_t)size ? cap : (size_t)size) ? 0 : -1;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return -1;
}

/* ---- the run --------------------------------------------------------------------------- */

typedef struct {
    int rank, world, cases;
    uint64_t seed;
    const char *memory;
    dtr_context_t *ctx[2]; /* [0] the file store, [1] the callbacks */
    char kv_dir[4096];
    dtr_gloo_store_t kv;
} run_t;

static int setup(run_t *r, int argc, char **argv) {
    r->cases = 100;
    r->seed = 20261121;
    r->memory = "host";
    for (int k = 1; k + 1 < argc; k += 2) {
        if (strcmp(argv[k], "--cases") == 0) r->cases = atoi(argv[k + 1]);
        if (strcmp(argv[k], "--seed") == 0) r->seed = strtoull(argv[k + 1], NULL, 10);
        if (strcmp(argv[k], "--memory") == 0) r->memory = argv[k + 1];
    }
    if (dtr_context_create_gloo_env(&r->ctx[0]) != DTR_OK) {
        printf("gloo exec: FAIL: context from the environment: %s\n", dtr_last_error());
        return 2;
    }
    r->rank = dtr_context_rank(r->ctx[0]);
    r->world = atoi(getenv("WORLD_SIZE"));
    snprintf(r->kv_dir, sizeof r->kv_dir, "%s", getenv("DTR_GLOO_STORE"));
    r->kv = (dtr_gloo_store_t){.set = kv_set, .get = kv_get, .user = r->kv_dir};
    dtr_gloo_options_t o = {.store = &r->kv, .prefix = "callbacks"};
    if (dtr_context_create_gloo(r->rank, r->world, &o, &r->ctx[1]) != DTR_OK) {
        printf("gloo exec: FAIL: rank %d: context over the callback store: %s\n", r->rank,
               dtr_last_error());
        return 2;
    }
    char why[512] = "";
    int sp = space_new(r->memory, &space_ops, &space_state, why, sizeof why);
    if (sp != 0) {
        printf("gloo exec (memory %s): FAIL: %s\n", r->memory, why);
        return 2;
    }
    for (int k = 0; k < 2 && space_ops != NULL; k++) {
        const dtr_memory_ops_t *ops;
        void *st;
        if (space_new(r->memory, &ops, &st, why, sizeof why) != 0 ||
            dtr_context_set_memory(r->ctx[k], ops, st) != DTR_OK) {
            printf("gloo exec: FAIL: memory %s: %s %s\n", r->memory, why, dtr_last_error());
            return 2;
        }
    }
    return -1;
}

/* Case `index` with strategy s (0 optimal, 1 compat), on this rank. */
static void run_strategy(const run_t *r, int index, int s, const test_case_t *c,
                         const dtr_spec_t *src, const dtr_spec_t *dst, tally_t *t,
                         int kinds[DTR_STEP_KIND_LAST]) {
    dtr_strategy_t strategy = s == 0 ? DTR_STRATEGY_OPTIMAL : DTR_STRATEGY_COMPAT;
    dtr_cost_model_t bytes_only;
    cost_bytes_only(&bytes_only);
    dtr_plan_options_t opts = {.strategy = strategy, .cost = c->blocked ? &bytes_only : NULL};
    dtr_plan_t *plan = malloc(sizeof *plan);
    if (dtr_plan_create(src, dst, &opts, plan) != DTR_OK) {
        t->skipped++; /* an invalid change, or compat refusing an unsafe plan */
        free(plan);
        return;
    }
    for (int k = 0; k < plan->nsteps; k++) kinds[plan->steps[k].kind]++;
    int variant = (index + s) % 4;
    bool callbacks = variant & 1, nonblocking = variant & 2;
    static const int64_t slices[] = {0, 1, 5, 48, 4096};
    if (dtr_context_set_slice_bytes(r->ctx[callbacks], slices[pick(5)]) != DTR_OK) t->failures++;
    char why[512] = "";
    dtr_fill_t fill = {.kind = index % 2 ? DTR_FILL_RANDOM : DTR_FILL_PATTERN,
                       .seed = r->seed * 1000003ull + (uint64_t)index};
    int bad = run_plan(r->ctx[callbacks], plan, src, dst, &fill, r->rank, nonblocking, why,
                       sizeof why);
    char how[96];
    snprintf(how, sizeof how, "%s store, %s, fill %s", callbacks ? "callback" : "file",
             nonblocking ? "non-blocking" : "blocking",
             fill.kind == DTR_FILL_RANDOM ? "random" : "pattern");
    if (bad) report(r->rank, r->seed, index, dtr_strategy_name(strategy), how, c, why);
    t->plans++;
    t->failures += bad;
    free(plan);
}

int main(int argc, char **argv) {
    run_t r = {0};
    int rc = setup(&r, argc, argv);
    if (rc >= 0) return rc;
    tally_t t = {0};
    int kinds[DTR_STEP_KIND_LAST] = {0};
    for (int index = 0; index < r.cases; index++) {
        test_case_t c;
        dtr_mesh_t *mesh = NULL;
        dtr_spec_t src, dst;
        if (case_specs(r.seed, index, r.world, &c, &mesh, &src, &dst) != DTR_OK) {
            printf("FAIL seed %llu case %d: setup: %s\n", (unsigned long long)r.seed, index,
                   dtr_last_error());
            t.failures++;
        } else {
            for (int s = 0; s < 2; s++) run_strategy(&r, index, s, &c, &src, &dst, &t, kinds);
        }
        dtr_mesh_destroy(mesh);
        free(c.ranks);
    }
    if (r.rank == 0) {
        printf("gloo exec on %d ranks (memory %s): %d cases, %d plans run, %d skipped (invalid "
               "or refused), seed %llu\n  steps run by kind:",
               r.world, r.memory, r.cases, t.plans, t.skipped, (unsigned long long)r.seed);
        for (int k = 0; k < DTR_STEP_KIND_LAST; k++)
            printf(" %s %d", dtr_step_kind_info((dtr_step_kind_t)k)->name, kinds[k]);
        printf("\n");
    }
    /* every rank's tally (the launcher fails the run where any rank failed) */
    printf("  rank %d: plans on %d ranks: %d passed, %d failed\n", r.rank, r.world,
           t.plans - t.failures, t.failures);
    /* which paths ran (gloo_exec_test.sh checks them against DTR_GLOO_SHM) */
    dtr_gloo_paths_t p[2] = {{0}, {0}};
    for (int k = 0; k < 2; k++)
        if (dtr_gloo_paths(r.ctx[k], &p[k]) != DTR_OK) printf("FAIL paths: %s\n", dtr_last_error());
    printf("  rank %d: paths: %d groups, %d with shared memory, %lld segment ops, %lld gloo ops\n",
           r.rank, p[0].groups + p[1].groups, p[0].shared_memory + p[1].shared_memory,
           (long long)(p[0].shm_ops + p[1].shm_ops), (long long)(p[0].gloo_ops + p[1].gloo_ops));
    dtr_context_destroy(r.ctx[0]);
    dtr_context_destroy(r.ctx[1]);
    if (space_ops != NULL) space_ops->destroy(space_state);
    return t.failures > 0 ? 1 : 0;
}
