/* The Gloo backend's unhappy paths in one process: bad arguments and environments named,
 * a store whose callbacks fail, a peer that never comes (the deadline), and *out never
 * written on failure; and a context of one rank that runs a plan. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtr.h"
#include "backends/gloo/dtr_gloo.h"
#include "tests/support/plan_util.h"
#include "tests/support/solo_backend.h"

static dtr_context_t *const UNTOUCHED = (dtr_context_t *)0x5a5a;

static char store_dir[64];

static void make_store(void) {
    snprintf(store_dir, sizeof store_dir, "/tmp/dtr_gloo_test.XXXXXX");
    cr_assert_not_null(mkdtemp(store_dir));
}

static void remove_store(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", store_dir);
    cr_assert_eq(system(cmd), 0);
}

/* st is DTR_ERR_INVALID_ARGUMENT, the message holds `needle`, *out is untouched. */
static void expect_refused(dtr_status_t st, dtr_context_t *out, const char *needle) {
    cr_expect_eq(st, DTR_ERR_INVALID_ARGUMENT, "status %s (%s)", dtr_status_name(st),
                 dtr_last_error());
    cr_expect(strstr(dtr_last_error(), needle) != NULL, "'%s' not in: %s", needle,
              dtr_last_error());
    cr_expect_eq(out, UNTOUCHED, "*out written on failure");
}

Test(gloo_errors, arguments_are_named) {
    dtr_context_t *out = UNTOUCHED;
    dtr_gloo_options_t o = {.file_store = "/tmp"};
    expect_refused(dtr_context_create_gloo(0, 1, NULL, &out), out, "opts");
    expect_refused(dtr_context_create_gloo(0, 1, &o, NULL), UNTOUCHED, "out");
    expect_refused(dtr_context_create_gloo(-1, 2, &o, &out), out, "rank -1 of size 2");
    expect_refused(dtr_context_create_gloo(2, 2, &o, &out), out, "rank 2 of size 2");
    expect_refused(dtr_context_create_gloo(0, 0, &o, &out), out, "need 0 <= rank < size");
    dtr_gloo_options_t none = {0};
    expect_refused(dtr_context_create_gloo(0, 1, &none, &out), out, "exactly one");
    dtr_gloo_store_t half = {.set = NULL};
    dtr_gloo_options_t both = {.file_store = "/tmp", .store = &half};
    expect_refused(dtr_context_create_gloo(0, 1, &both, &out), out, "exactly one");
    dtr_gloo_options_t cb = {.store = &half};
    expect_refused(dtr_context_create_gloo(0, 1, &cb, &out), out, "set and get");
    dtr_gloo_options_t empty = {.file_store = ""};
    expect_refused(dtr_context_create_gloo(0, 1, &empty, &out), out, "file_store: empty");
    dtr_gloo_options_t t = {.file_store = "/tmp", .timeout_s = -1};
    expect_refused(dtr_context_create_gloo(0, 1, &t, &out), out, "timeout_s");
    char longp[200];
    memset(longp, 'p', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    dtr_gloo_options_t lp = {.file_store = "/tmp", .prefix = longp};
    expect_refused(dtr_context_create_gloo(0, 1, &lp, &out), out, "prefix");
}

Test(gloo_errors, the_environment_is_named) {
    dtr_context_t *out = UNTOUCHED;
    unsetenv("WORLD_SIZE");
    unsetenv("RANK");
    unsetenv("DTR_GLOO_STORE");
    expect_refused(dtr_context_create_gloo_env(&out), out, "WORLD_SIZE is not set");
    setenv("WORLD_SIZE", "two", 1);
    expect_refused(dtr_context_create_gloo_env(&out), out, "WORLD_SIZE: \"two\"");
    setenv("WORLD_SIZE", "2", 1);
    expect_refused(dtr_context_create_gloo_env(&out), out, "RANK is not set");
    setenv("RANK", "2", 1);
    expect_refused(dtr_context_create_gloo_env(&out), out, "RANK: \"2\" is not an integer in [0, 1]");
    setenv("RANK", "1", 1);
    expect_refused(dtr_context_create_gloo_env(&out), out, "DTR_GLOO_STORE is not set");
    setenv("DTR_GLOO_STORE", "/nonexistent/dir", 1);
    expect_refused(dtr_context_create_gloo_env(&out), out,
                   "DTR_GLOO_STORE: '/nonexistent/dir' is not a directory");
    unsetenv("DTR_GLOO_STORE");
    dtr_gloo_options_t o = {.file_store = "/nonexistent/dir"};
    expect_refused(dtr_context_create_gloo(0, 1, &o, &out), out,
                   "opts->file_store: '/nonexistent/dir' is not a directory");
}

static int failing_set(void *user, const char *key, const void *value, size_t len) {
    (void)user, (void)key, (void)value, (void)len;
    return -1;
}

static int never_get(void *user, const char *key, void *buf, size_t cap, size_t *len) {
    (void)user, (void)key, (void)buf, (void)cap, (void)len;
    return -1;
}

Test(gloo_errors, a_failing_store_fails_the_creation) {
    dtr_context_t *out = UNTOUCHED;
    dtr_gloo_store_t kv = {.set = failing_set, .get = never_get};
    dtr_gloo_options_t o = {.store = &kv};
    dtr_status_t st = dtr_context_create_gloo(0, 2, &o, &out);
    cr_expect_eq(st, DTR_ERR_BACKEND, "status %s", dtr_status_name(st));
    cr_expect(strstr(dtr_last_error(), "set callback failed") != NULL, "%s", dtr_last_error());
    cr_expect_eq(out, UNTOUCHED);
}

Test(gloo_errors, a_peer_that_never_comes_times_out) {
    make_store();
    dtr_context_t *out = UNTOUCHED;
    dtr_gloo_options_t o = {.file_store = store_dir, .timeout_s = 1};
    dtr_status_t st = dtr_context_create_gloo(0, 2, &o, &out);
    cr_expect(st == DTR_ERR_TIMEOUT || st == DTR_ERR_BACKEND, "status %s", dtr_status_name(st));
    cr_expect(strstr(dtr_last_error(), "connecting the ranks") != NULL, "%s", dtr_last_error());
    cr_expect_eq(out, UNTOUCHED);
    remove_store();
}

/* One rank: the groups are local, every step a copy; the plan's result checked exactly. */
Test(gloo_errors, one_rank_runs_a_plan) {
    make_store();
    dtr_context_t *ctx = NULL;
    dtr_gloo_options_t o = {.file_store = store_dir};
    cr_assert_eq(dtr_context_create_gloo(0, 1, &o, &ctx), DTR_OK, "%s", dtr_last_error());
    cr_expect_str_eq(dtr_context_backend(ctx), "gloo");
    cr_expect_eq(dtr_context_rank(ctx), 0);
    dtr_mesh_t *mesh = NULL;
    dtr_spec_t src, dst;
    dtr_plan_t plan;
    cr_assert_eq(change_from("1", "4x3", "P(sum)", "S(1)", DTR_F32, &mesh, &src, &dst), DTR_OK,
                 "%s", dtr_last_error());
    cr_assert_eq(dtr_plan_create(&src, &dst, NULL, &plan), DTR_OK, "%s", dtr_last_error());
    float in[12], out[12] = {0};
    for (int k = 0; k < 12; k++) in[k] = (float)k * 0.5f;
    cr_assert_eq(dtr_redistribute(ctx, &plan, in, sizeof in, out, sizeof out), DTR_OK, "%s",
                 dtr_last_error());
    cr_expect_eq(memcmp(in, out, sizeof in), 0);
    /* a group of one moves nothing: no group counted, no path taken */
    dtr_gloo_paths_t paths = {.groups = -1};
    cr_assert_eq(dtr_gloo_paths(ctx, &paths), DTR_OK, "%s", dtr_last_error());
    cr_expect_eq(paths.groups + paths.shared_memory + paths.shm_ops + paths.gloo_ops, 0);
    cr_expect_eq(dtr_gloo_paths(ctx, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "out") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_gloo_paths(NULL, &paths), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "ctx") != NULL, "%s", dtr_last_error());
    dtr_context_destroy(ctx);
    dtr_mesh_destroy(mesh);
    remove_store();
}

/* A context of another backend (tests/support/solo_backend.h) is not a Gloo context. */
Test(gloo_errors, paths_of_another_backend) {
    dtr_context_t *ctx = NULL;
    cr_assert_eq(dtr_context_create(&solo_backend_ops, NULL, &ctx), DTR_OK, "%s", dtr_last_error());
    dtr_gloo_paths_t paths = {.groups = 7};
    cr_expect_eq(dtr_gloo_paths(ctx, &paths), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "ctx: a context of backend 'solo', not gloo") != NULL,
              "%s", dtr_last_error());
    cr_expect_eq(paths.groups, 7, "*out written on failure");
    dtr_context_destroy(ctx);
}

/* The shared-memory path's sizes from the environment, refused by name. */
Test(gloo_errors, shm_sizes_are_named) {
    dtr_gloo_options_t o = {.file_store = "/tmp"};
    const char *cases[][3] = {{"DTR_GLOO_SHM_CHUNK", "0", "DTR_GLOO_SHM_CHUNK: \"0\""},
                              {"DTR_GLOO_SHM_CHUNK", "32k", "DTR_GLOO_SHM_CHUNK: \"32k\" is not a byte count from 1 to 16 MiB"},
                              {"DTR_GLOO_SHM_RING", "4095", "DTR_GLOO_SHM_RING: \"4095\""},
                              {"DTR_GLOO_SHM", "off", "DTR_GLOO_SHM: \"off\" is not 0 or 1"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        dtr_context_t *out = UNTOUCHED;
        setenv(cases[k][0], cases[k][1], 1);
        expect_refused(dtr_context_create_gloo(0, 1, &o, &out), out, cases[k][2]);
        unsetenv(cases[k][0]);
    }
}

/* By name (registry.c): the row this code registered, its environment named as
 * dtr_context_create_gloo_env names it, and two contexts from one environment (on more
 * ranks, each meets under its own prefix: dtr, dtr.1; the CLI's and Python's runs under
 * tools/dtr_launch.sh make two and more). */
Test(gloo_errors, by_name_one_rank_twice) {
    dtr_backend_info_t row;
    cr_assert_eq(dtr_backend_find("gloo", &row), DTR_OK, "%s", dtr_last_error());
    cr_expect_str_eq(row.name, "gloo");
    cr_expect_str_eq(row.memory, "host");
    cr_expect_eq(row.caps, DTR_BACKEND_CAP_CONCURRENT | DTR_BACKEND_CAP_SPANS_CAST |
                               DTR_BACKEND_CAP_SPANS_SCALE);
    cr_expect(strstr(row.launch, "DTR_GLOO_STORE") != NULL, "%s", row.launch);
    dtr_context_t *out = UNTOUCHED;
    unsetenv("WORLD_SIZE");
    expect_refused(dtr_context_create_named("gloo", &out), out, "WORLD_SIZE is not set");
    make_store();
    setenv("WORLD_SIZE", "1", 1);
    setenv("RANK", "0", 1);
    setenv("DTR_GLOO_STORE", store_dir, 1);
    unsetenv("DTR_GLOO_PREFIX");
    dtr_context_t *a = NULL, *b = NULL;
    cr_assert_eq(dtr_context_create_named("gloo", &a), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_context_create_named("gloo", &b), DTR_OK, "%s", dtr_last_error());
    cr_expect_str_eq(dtr_context_backend(b), "gloo");
    dtr_context_destroy(a);
    dtr_context_destroy(b);
    remove_store();
}
