/*
 * The Gloo backend: the executor on CPU buffers over Gloo (the library PyTorch runs its CPU
 * collectives on; Debian's libgloo-dev), with no MPI anywhere, for jobs that torchrun, Slurm
 * or a framework launch. Built only where Bazel found Gloo (third_party/gloo/).
 *
 * Ranks meet through a rendezvous store: a directory every rank sees (Gloo's FileStore), or
 * a key-value store of the caller's given as two callbacks (so a framework's own store, such
 * as PyTorch's TCPStore, serves it). Creating a context connects all `size` ranks (collective
 * over them); each mesh dim's group, and the whole mesh, then gets its own Gloo context the
 * first time a dtr context runs a plan on the mesh, connected through keys under the
 * context's prefix (collective over the group's ranks only, as the executor requires).
 *
 * The operations post every send and receive on Gloo's TCP pairs and return; Gloo's I/O
 * thread moves the bytes while the caller goes on, and test/wait complete them. Gathers and
 * all-to-alls go straight between the members' buffers (any displacements, so no padding);
 * reduce-scatters gather each member's piece, then reduce in member order (halves widened
 * to f32 and rounded once per combination, integers wrapping, as the MPI backend's
 * shared-memory path does), so that every member of an all-reduce (a reduce-scatter, then an
 * all-gather) holds the same bits whatever the timing. P(avg) is reduced as SUM and divided
 * by the executor. Errors come back as DTR_ERR_BACKEND (DTR_ERR_TIMEOUT past the deadline)
 * with Gloo's message; nothing aborts.
 *
 * Inside a node, a group whose members all run on this host (the same host name, boot id and
 * /dev/shm) of 2 to 16 members maps one POSIX shared-memory segment when it is created and
 * moves its gathers and all-to-alls (equal pieces or not), strided pieces, span lists and
 * reductions through it, as the MPI backend's shared-memory path does (backends/shm/shm.h):
 * no TCP, no copy through Gloo's buffers. Groups across hosts, and groups of more than 16
 * members, keep Gloo's pairs. DTR_GLOO_SHM=0 turns the segment off; DTR_GLOO_SHM_CHUNK
 * and DTR_GLOO_SHM_RING size it as DTR_MPI_SHM_CHUNK / _RING do the MPI backend's.
 */
#ifndef DTR_BACKENDS_GLOO_DTR_GLOO_H
#define DTR_BACKENDS_GLOO_DTR_GLOO_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/backend.h"
#include "runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A key-value store of the caller's. set stores len bytes of value under key; get waits
 * until key has been set (by any rank; the store's own timeout bounds the wait), copies at
 * most cap bytes of its value into buf and sets *len to the value's whole length (where
 * that exceeds cap, dtr calls get again with a buffer of that length). Both return 0 on
 * success, anything else on failure (the call that needed them then fails). They are called
 * from the thread that creates a context or runs a plan, never concurrently for one context.
 */
typedef struct dtr_gloo_store {
    int (*set)(void *user, const char *key, const void *value, size_t len);
    int (*get)(void *user, const char *key, void *buf, size_t cap, size_t *len);
    void *user;
} dtr_gloo_store_t;

/* How a Gloo context finds its peers. Zeroed fields take the defaults. */
typedef struct dtr_gloo_options {
    /* A directory every rank sees and that holds no other job's keys (Gloo's FileStore);
     * or NULL with `store` set. Exactly one of the two. */
    const char *file_store;
    /* The caller's store (copied; its callbacks and user must outlive the context). */
    const dtr_gloo_store_t *store;
    /* What every key of this context starts with (NULL: "dtr"): two contexts on one store
     * at the same time need two prefixes. */
    const char *prefix;
    /* The address this rank listens on (NULL: $DTR_GLOO_HOSTNAME, else the interface
     * $DTR_GLOO_IFACE, else this machine's host name as the resolver gives it). */
    const char *hostname;
    /* The longest wait of one operation and of the rendezvous, in seconds (0: $DTR_TIMEOUT_S,
     * else 600 s; a DTR_TIMEOUT_S of 0 waits without end). */
    double timeout_s;
} dtr_gloo_options_t;

/* A context over `size` ranks, this one `rank` (0 <= rank < size): collective over all of
 * them (each connects to every other). Mesh ranks are these ranks. Memory space: host.
 * *out written only on success; on failure, DTR_ERR_INVALID_ARGUMENT naming the argument or
 * DTR_ERR_BACKEND / DTR_ERR_TIMEOUT with Gloo's message. */
DTR_API dtr_status_t dtr_context_create_gloo(int rank, int size, const dtr_gloo_options_t *opts,
                                             dtr_context_t **out);

/* The same from the environment a launcher sets (torchrun's names): RANK, WORLD_SIZE, and
 * DTR_GLOO_STORE (the file store's directory; tools/dtr_launch.sh makes one), optionally
 * DTR_GLOO_PREFIX (default "dtr"). The k-th context a process makes this way (k >= 1) meets
 * under PREFIX.k, so that one job may make several, every rank in the same order. A missing
 * or malformed variable is DTR_ERR_INVALID_ARGUMENT naming it. Also reached by name:
 * dtr_context_create_named("gloo", &ctx) (runtime/runtime.h), which loads libdtr_gloo.so. */
DTR_API dtr_status_t dtr_context_create_gloo_env(dtr_context_t **out);

/* What a Gloo context's groups of two or more members ran so far, on this rank: such groups
 * and those of them with a shared-memory segment, operations through the segments and
 * through Gloo's transfers. */
typedef struct dtr_gloo_paths {
    int groups, shared_memory;
    int64_t shm_ops, gloo_ops;
} dtr_gloo_paths_t;

/* ctx must be a Gloo context (DTR_ERR_INVALID_ARGUMENT naming it otherwise). */
DTR_API dtr_status_t dtr_gloo_paths(const dtr_context_t *ctx, dtr_gloo_paths_t *out);

#ifdef __cplusplus
}
#endif

#endif
