/* NCCL contexts made without MPI: from an ncclUniqueId and over an adopted ncclComm_t, their
 * mesh splits and streams. Without a GPU, every argument error is named, and a valid call
 * says no GPU is visible (nothing written to *out); with one, a world of one rank made each
 * way runs a plan on device memory and gives the exact result. */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <string.h>

#include "dtr.h"
#include "backends/cuda/dtr_cuda.h"
#include "backends/nccl/dtr_nccl.h"
#include "tests/support/plan_util.h"
#include "tests/support/solo_backend.h"

static dtr_context_t *const UNTOUCHED = (dtr_context_t *)0x5a5a;

static void refused(dtr_status_t st, dtr_context_t *out, const char *needle) {
    cr_expect_eq(st, DTR_ERR_INVALID_ARGUMENT, "status %s: %s", dtr_status_name(st),
                 dtr_last_error());
    cr_expect(strstr(dtr_last_error(), needle) != NULL, "'%s' not in: %s", needle,
              dtr_last_error());
    cr_expect_eq(out, UNTOUCHED, "*out written on failure");
}

Test(nccl_adopt, arguments_are_named) {
    dtr_context_t *out = UNTOUCHED;
    unsigned char id[128] = {0};
    refused(dtr_context_create_nccl_id(NULL, 128, 0, 1, 0, NULL, &out), out, "unique_id");
    refused(dtr_context_create_nccl_id(id, 7, 0, 1, 0, NULL, &out), out,
            "id_bytes: 7, an ncclUniqueId is 128 bytes");
    refused(dtr_context_create_nccl_id(id, 128, 3, 2, 0, NULL, &out), out, "rank 3 of size 2");
    refused(dtr_context_create_nccl_id(id, 128, 0, 0, 0, NULL, &out), out, "rank 0 of size 0");
    refused(dtr_context_create_nccl_id(id, 128, 0, 1, 0, NULL, NULL), UNTOUCHED, "out");
    refused(dtr_context_create_nccl_comm(NULL, 0, NULL, &out), out, "comm");
    dtr_mesh_t *mesh = NULL;
    cr_assert_eq(dtr_mesh_parse("1", NULL, 0, &mesh), DTR_OK);
    refused(dtr_nccl_split_mesh(NULL, mesh), UNTOUCHED, "ctx");
    refused(dtr_nccl_set_stream(NULL, NULL), UNTOUCHED, "ctx");
    /* a context of another backend is not NCCL's */
    dtr_context_t *solo = NULL;
    cr_assert_eq(dtr_context_create(&solo_backend_ops, NULL, &solo), DTR_OK, "%s", dtr_last_error());
    refused(dtr_nccl_split_mesh(solo, mesh), UNTOUCHED, "ctx: not an NCCL context");
    refused(dtr_nccl_set_stream(solo, NULL), UNTOUCHED, "ctx: not an NCCL context");
    refused(dtr_nccl_wait_stream(NULL, (void *)1), UNTOUCHED, "ctx");
    refused(dtr_nccl_wait_stream(solo, NULL), UNTOUCHED, "stream");
    refused(dtr_nccl_wait_stream(solo, (void *)1), UNTOUCHED, "ctx: not an NCCL context");
    dtr_context_destroy(solo);
    dtr_mesh_destroy(mesh);
    unsigned char small[64];
    size_t len = 77;
    refused(dtr_nccl_unique_id(small, sizeof small, &len), UNTOUCHED,
            "cap: 64 bytes, an ncclUniqueId is 128");
    refused(dtr_nccl_unique_id(NULL, 128, &len), UNTOUCHED, "id");
    refused(dtr_nccl_unique_id(id, sizeof id, NULL), UNTOUCHED, "len");
    cr_expect_eq(len, 77, "*len written on failure");
}

/* A unique id needs no GPU: 128 bytes, not all zero, two calls two ids. */
Test(nccl_adopt, unique_ids_are_made_without_a_gpu) {
    unsigned char a[200], b[200], zero[128] = {0};
    memset(a, 0xee, sizeof a);
    size_t la = 0, lb = 0;
    cr_assert_eq(dtr_nccl_unique_id(a, sizeof a, &la), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_nccl_unique_id(b, sizeof b, &lb), DTR_OK, "%s", dtr_last_error());
    cr_expect_eq(la, 128);
    cr_expect_eq(lb, 128);
    cr_expect_neq(memcmp(a, zero, 128), 0, "an id of zeros");
    cr_expect_neq(memcmp(a, b, 128), 0, "two calls made the same id");
    cr_expect_eq(a[128], 0xee, "written past the id");
}

/* P(sum) -> R on a 1-rank mesh, on device memory: the input comes back exactly. */
static void one_rank_plan(dtr_context_t *ctx) {
    dtr_mesh_t *mesh = NULL;
    dtr_spec_t src, dst;
    dtr_plan_t plan;
    cr_assert_eq(change_from("1", "6x5", "P(sum)", "R", DTR_F32, &mesh, &src, &dst), DTR_OK);
    cr_assert_eq(dtr_nccl_split_mesh(ctx, mesh), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_plan_create(&src, &dst, NULL, &plan), DTR_OK, "%s", dtr_last_error());
    float host[30], back[30];
    for (int k = 0; k < 30; k++) host[k] = (float)k * 0.25f - 3;
    void *din = NULL, *dout = NULL;
    cr_assert_eq(cudaMalloc(&din, sizeof host), cudaSuccess);
    cr_assert_eq(cudaMalloc(&dout, sizeof host), cudaSuccess);
    cr_assert_eq(cudaMemcpy(din, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
    cr_assert_eq(dtr_redistribute(ctx, &plan, din, sizeof host, dout, sizeof host), DTR_OK, "%s",
                 dtr_last_error());
    cr_assert_eq(dtr_context_sync(ctx), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(cudaMemcpy(back, dout, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_expect_eq(memcmp(host, back, sizeof host), 0, "the result differs from the input");
    cr_expect_eq(dtr_nccl_set_stream(ctx, NULL), DTR_OK, "%s", dtr_last_error());
    cudaFree(din);
    cudaFree(dout);
    dtr_mesh_destroy(mesh);
}

Test(nccl_adopt, from_a_unique_id_and_from_a_communicator) {
    ncclUniqueId id;
    dtr_context_t *ctx = UNTOUCHED;
    if (dtr_cuda_device_count() < 1) {
        /* no GPU: a valid call says so, by name, and writes nothing */
        memset(&id, 0, sizeof id);
        dtr_status_t st = dtr_context_create_nccl_id(&id, sizeof id, 0, 1, 0, NULL, &ctx);
        cr_expect_eq(st, DTR_ERR_UNSUPPORTED, "status %s", dtr_status_name(st));
        cr_expect(strstr(dtr_last_error(), "no GPU visible") != NULL, "%s", dtr_last_error());
        cr_expect_eq(ctx, UNTOUCHED);
        cr_log_info("no GPU visible: the contexts' runs are left to a GPU machine");
        return;
    }
    cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
    cr_assert_eq(dtr_context_create_nccl_id(&id, sizeof id, 0, 1, 0, NULL, &ctx), DTR_OK, "%s",
                 dtr_last_error());
    one_rank_plan(ctx);
    dtr_context_destroy(ctx);
    ncclComm_t comm;
    cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
    cr_assert_eq(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
    cr_assert_eq(dtr_context_create_nccl_comm(comm, 0, NULL, &ctx), DTR_OK, "%s", dtr_last_error());
    one_rank_plan(ctx);
    dtr_context_destroy(ctx);
    cr_expect_eq(ncclCommDestroy(comm), ncclSuccess, "the adopted communicator outlives the context");
}
