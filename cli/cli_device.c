/* --backend and --device of the commands that run under mpirun (dtr run, dtr grad): the
 * flags' checks, the context they ask for, and the command's copies of its buffers on the
 * GPU (cli.h). */
#include <mpi.h>
#include <string.h>

#include "backends/mpi/dtr_mpi.h"
#include "cli/cli.h"
#if defined(DTR_CLI_DLOPEN)
#include <dlfcn.h>
#elif defined(DTR_HAVE_CUDA)
#include "backends/cuda/dtr_cuda.h"
#endif
#if defined(DTR_HAVE_NCCL) && !defined(DTR_CLI_DLOPEN)
#include "backends/nccl/dtr_nccl.h"
#endif

#if defined(DTR_CLI_DLOPEN)
/* The installed CLI links libdtr.so alone, so that it starts where CUDA is absent; --device
 * cuda and --backend nccl load libdtr_cuda.so.0 and libdtr_nccl.so.0 (installed beside
 * libdtr.so, found through the CLI's RUNPATH) when a run asks for them. */
static struct {
    int (*count)(void);
    const dtr_memory_ops_t *(*ops)(void);
    dtr_status_t (*create)(int device, void *stream, void **state);
    dtr_status_t (*nccl)(MPI_Comm comm, int device, void *stream, dtr_context_t **out);
} dtr__gpu;

/* dlsym into *fn (POSIX's way to a function pointer); false where the symbol is missing. */
static bool dtr__sym(void *lib, const char *name, void *fn) {
    void *p = dlsym(lib, name);
    memcpy(fn, &p, sizeof p);
    return p != NULL;
}

static int dtr__gpu_load(const char *cmd, bool nccl) {
    void *cu = dlopen("libdtr_cuda.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (cu == NULL)
        return dtr_cli_usage_error(cmd, "--device cuda: this install has no CUDA library (%s): "
                                        "install dtr where the CUDA toolkit is "
                                        "(tools/install.sh), or run on --device cpu", dlerror());
    if (!dtr__sym(cu, "dtr_cuda_device_count", &dtr__gpu.count) ||
        !dtr__sym(cu, "dtr_memory_cuda_ops", &dtr__gpu.ops) ||
        !dtr__sym(cu, "dtr_memory_cuda_create", &dtr__gpu.create))
        return dtr_cli_usage_error(cmd, "--device cuda: libdtr_cuda.so.0 lacks a function "
                                        "(%s): not this version's library", dlerror());
    if (!nccl) return DTR_EXIT_OK;
    void *nc = dlopen("libdtr_nccl.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (nc == NULL)
        return dtr_cli_usage_error(cmd, "--backend nccl: this install has no NCCL library "
                                        "(%s): install dtr where NCCL is (tools/install.sh)",
                                   dlerror());
    if (!dtr__sym(nc, "dtr_context_create_nccl", &dtr__gpu.nccl))
        return dtr_cli_usage_error(cmd, "--backend nccl: libdtr_nccl.so.0 lacks "
                                        "dtr_context_create_nccl: not this version's library");
    return DTR_EXIT_OK;
}
#define DTR__GPU 1
#define DTR__NCCL 1
#define dtr_cuda_device_count() dtr__gpu.count()
#define dtr_memory_cuda_ops() dtr__gpu.ops()
#define dtr_memory_cuda_create(d, s, st) dtr__gpu.create((d), (s), (st))
#define dtr_context_create_nccl(c, d, s, x) dtr__gpu.nccl((c), (d), (s), (x))
#else
#if defined(DTR_HAVE_CUDA)
#define DTR__GPU 1
#endif
#if defined(DTR_HAVE_NCCL)
#define DTR__NCCL 1
#endif
#endif

int dtr_cli_engine_args(const char *cmd, const char *backend, const char *device,
                        dtr_cli_engine_t *e) {
    e->nccl = strcmp(backend, "nccl") == 0;
    e->gloo = strcmp(backend, "gloo") == 0;
    if (!e->nccl && !e->gloo && strcmp(backend, "mpi") != 0)
        return dtr_cli_usage_error(cmd, "--backend: '%s' is not mpi, gloo or nccl", backend);
    if (device == NULL) device = e->nccl ? "cuda" : "cpu";
    e->cuda = strcmp(device, "cuda") == 0;
    e->device = e->cuda ? "cuda" : "cpu";
    if (!e->cuda && strcmp(device, "cpu") != 0)
        return dtr_cli_usage_error(cmd, "--device: '%s' is not cpu or cuda", device);
    if (e->nccl && !e->cuda)
        return dtr_cli_usage_error(cmd, "--backend nccl: runs on GPU buffers only (--device "
                                        "cuda), not --device cpu");
    if (e->gloo && e->cuda)
        return dtr_cli_usage_error(cmd, "--backend gloo: runs on CPU buffers only (--device "
                                        "cpu), not --device cuda");
#if defined(DTR_CLI_DLOPEN)
    if (e->cuda) return dtr__gpu_load(cmd, e->nccl);
#endif
#if !defined(DTR__GPU)
    if (e->cuda)
        return dtr_cli_usage_error(cmd, "--device cuda: this dtr was built without CUDA (nvcc "
                                        "was not found at build time)");
#endif
#if !defined(DTR__NCCL)
    if (e->nccl)
        return dtr_cli_usage_error(cmd, "--backend nccl: this dtr was built without NCCL "
                                        "(nccl.h was not found at build time)");
#endif
    return DTR_EXIT_OK;
}

int dtr_cli_agree_engine(const char *cmd, const dtr_cli_engine_t *e) {
    int code[2] = {(int)e->cuda + 2 * (int)e->nccl, 0};
    code[1] = -code[0];
    dtr_cli_job_reduce(code, 2, DTR_I32, DTR_REDUCE_MAX);
    if (code[0] == -code[1]) return DTR_EXIT_OK;
    return dtr_cli_usage_error(cmd, "--backend, --device: the ranks were given different ones "
                                    "(host memory on some, CUDA or NCCL on others): give every "
                                    "rank the same");
}

#define DTR__TRY(call)                                                                    \
    do {                                                                                   \
        dtr_status_t dtr__st = (call);                                                     \
        if (dtr__st != DTR_OK) return dtr__st;                                             \
    } while (0)

dtr_status_t dtr_cli_engine_context(dtr_cli_engine_t *e, int rank, dtr_context_t **ctx) {
    e->ops = NULL;
    e->state = NULL;
    if (!e->cuda) return dtr_cli_job_context(ctx);
#if defined(DTR__GPU)
    int gpus = dtr_cuda_device_count();
    if (gpus < 1) return dtr_memory_cuda_create(0, NULL, &e->state); /* "no GPU visible" */
    DTR__TRY(dtr_memory_cuda_create(rank % gpus, NULL, &e->state));
    e->ops = dtr_memory_cuda_ops();
#if defined(DTR__NCCL)
    if (e->nccl) return dtr_context_create_nccl(MPI_COMM_WORLD, rank % gpus, NULL, ctx);
#endif
    void *mem = NULL;
    DTR__TRY(dtr_memory_cuda_create(rank % gpus, NULL, &mem));
    dtr_status_t st = dtr_context_create_mpi(MPI_COMM_WORLD, ctx);
    if (st == DTR_OK) return dtr_context_set_memory(*ctx, dtr_memory_cuda_ops(), mem);
    dtr_memory_cuda_ops()->destroy(mem);
    return st;
#else
    (void)rank;
    (void)ctx;
    return DTR_ERR_UNSUPPORTED; /* refused with the arguments */
#endif
}

dtr_status_t dtr_cli_dev_put(const dtr_cli_engine_t *e, void *host, size_t bytes, void **p) {
    if (e->ops == NULL) {
        *p = host;
        return DTR_OK;
    }
    *p = NULL;
    DTR__TRY(e->ops->alloc(e->state, (int64_t)bytes + 1, p));
    return dtr_cli_dev_in(e, *p, host, bytes);
}

dtr_status_t dtr_cli_dev_in(const dtr_cli_engine_t *e, void *p, const void *host,
                            size_t bytes) {
    if (e->ops == NULL || bytes == 0) return DTR_OK;
    DTR__TRY(e->ops->copy(e->state, p, host, (int64_t)bytes, DTR_COPY_FROM_HOST));
    return e->ops->sync(e->state); /* before the context's stream reads it */
}

dtr_status_t dtr_cli_dev_get(const dtr_cli_engine_t *e, void *host, const void *p,
                             size_t bytes) {
    if (e->ops == NULL || bytes == 0) return DTR_OK;
    return e->ops->copy(e->state, host, p, (int64_t)bytes, DTR_COPY_TO_HOST);
}

void dtr_cli_dev_free(const dtr_cli_engine_t *e, void *p, const void *host) {
    if (e->ops != NULL && p != NULL && p != host) e->ops->free(e->state, p);
}

void dtr_cli_engine_end(dtr_cli_engine_t *e) {
    if (e->ops != NULL) e->ops->destroy(e->state);
    e->ops = NULL;
    e->state = NULL;
}
