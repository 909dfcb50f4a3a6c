/*
 * The shared-memory path of the MPI and Gloo backends, for the all-to-all and all-gather
 * (strided or not) and for the reductions: when every member of a group runs on one node,
 * the members map one POSIX shared-memory segment and move their pieces through it
 * themselves. The backend only helps the members meet (dtr__shm_create's exchange); the
 * bytes never go through it.
 * - All-to-all: a sender reads its strided rows straight into a ring of cache-sized chunks
 *   per receiver (with software prefetch), the receiver copies each chunk to its place: the
 *   same two copies Open MPI's shared-memory transport makes for a contiguous message, where
 *   MPI_Alltoallw's datatype engine reads the strided rows with no prefetch.
 * - All-gather: a sender copies its piece once into one ring that every other member reads
 *   from, each straight to the piece's strided place: n + 1 copies of a piece per member
 *   where Open MPI's all-gather makes 2n - 1 (into and out of its FIFO), and no unpack
 *   pass (docs/executor.md).
 * - Reduce-scatter and all-reduce: a member copies its contributions to every other
 *   member's piece into its ring, chunk by chunk; each member reduces its own piece from
 *   every ring in one pass (each input read once, widened halves rounded once) in member
 *   order; an all-reduce's owner puts its result back in its ring for the others to copy.
 *
 * A group's members run one operation at a time on it, in the same order (the backend
 * contract), plus at most one argument agreement; the chunk counters carry over from one
 * operation to the next. Starting an operation writes this member's first chunks (as many as
 * the rings take) and reads nothing of the others'; progress and wait read.
 */
#ifndef DTR_BACKENDS_SHM_SHM_H
#define DTR_BACKENDS_SHM_SHM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"
#include "runtime/backend.h"

typedef struct dtr__shm dtr__shm_t;

/* Groups of more members than this keep the backend's own transfers (MPI_Alltoallw, MPI's
 * strided gather or the slices; Gloo's pairs): the rings would not stay in cache. */
#define DTR__SHM_MAX_MEMBERS 16

/* The chunk bytes the backends default to: 8 to 64 KiB measured alike (docs/executor.md). */
#define DTR__SHM_CHUNK 32768
/*
 * The reduction ring's default bytes per member. Larger rings let members that are not
 * scheduled together (more ranks than cores) fall less in step: on 4 ranks of 2 cores an
 * f32 16 MiB reduce-scatter took 7-17 ms with 1 MiB, 9-12 with 8 MiB (docs/executor-bench.md).
 */
#define DTR__SHM_RING (4 << 20)

/*
 * How the members meet: a blocking all-gather over the group, each member's `bytes` bytes
 * from `mine` into `all` (member k's at k * bytes), DTR_OK or the backend's error.
 */
typedef dtr_status_t (*dtr__shm_exchange_fn)(void *arg, const void *mine, int64_t bytes,
                                             void *all);

/*
 * Collective over the group (n members, this one `me`), whose members the caller knows to
 * share a node (every member passes the same answer): maps the group's segment with chunks
 * of `chunk` bytes and a reduction ring of about `ring` bytes per member, the members
 * meeting through `exchange` (twice: the segment's name, then whether all mapped it). *out is
 * NULL, with DTR_OK, where n is outside 2..DTR__SHM_MAX_MEMBERS or any member could not map
 * the segment (every member then gets NULL). Errors are the exchange's.
 */
DTR_INTERNAL_EXPORT dtr_status_t dtr__shm_create(dtr__shm_exchange_fn exchange, void *arg, int n,
                                                 int me, int64_t chunk, int64_t ring,
                                                 dtr__shm_t **out);

/*
 * A key naming this process's node for a backend without a node split of its own (Gloo):
 * the host name, the kernel's boot id and the identity of /dev/shm, where segments live, so
 * that two containers on one host with separate /dev/shm mounts differ. Members whose keys
 * are all equal share a node.
 */
DTR_INTERNAL_EXPORT void dtr__shm_node_key(char key[256]);

/* Unmaps the segment (local: no other member takes part). NULL is a no-op. */
DTR_INTERNAL_EXPORT void dtr__shm_destroy(dtr__shm_t *s);

/*
 * Starts an all-to-all of the other members' pieces: piece k of the send side is `bytes`
 * bytes read as rows of sblock bytes, srow apart, from send + k * sblock; piece k of the
 * receive side is written likewise at recv + k * rblock (rows of rblock, rrow apart). This
 * member's own piece is not moved. DTR_ERR_BACKEND while the previous operation is not
 * complete: the members would no longer agree on which chunk is which.
 */
DTR_INTERNAL_EXPORT dtr_status_t dtr__shm_start(dtr__shm_t *s, const void *send, int64_t sblock, int64_t srow,
                            void *recv, int64_t rblock, int64_t rrow, int64_t bytes);

/*
 * Starts an all-to-all of pieces that may differ in size: to member k, scounts[k] bytes at
 * send + sdispls[k]; from member k, rcounts[k] bytes into recv + rdispls[k] (member k's
 * scounts[me] is this member's rcounts[k]). This member's own piece is not moved (the
 * caller copies it). DTR_ERR_BACKEND while the previous operation is not complete.
 */
DTR_INTERNAL_EXPORT dtr_status_t dtr__shm_start_v(dtr__shm_t *s, const void *send,
                                                  const int64_t *scounts, const int64_t *sdispls,
                                                  void *recv, const int64_t *rcounts,
                                                  const int64_t *rdispls);

/*
 * Starts an all-gather: every member sends `bytes` contiguous bytes; member k's piece is
 * written at recv + k * block as rows of block bytes, row apart (this member's own piece
 * too). DTR_ERR_BACKEND while the previous operation is not complete.
 */
DTR_INTERNAL_EXPORT dtr_status_t dtr__shm_gather_start(dtr__shm_t *s, const void *send, int64_t bytes, void *recv,
                                   int64_t block, int64_t row);

/*
 * Where a reduction's buffers sit in a shared allocation (dtr_context_alloc on the MPI
 * backend, backends/mpi/shared.c), which every member maps: the allocation's number (the
 * same on every rank; -1: the buffer is not in one), the buffer's offset in this member's
 * part, the parts' bytes, and where each member's part is mapped in this process.
 * Where every member's send buffer (and for an all-reduce its receive buffer) is in the same
 * allocation, a reduction reads the members' buffers where they are instead of copying
 * them through the rings (shm_direct.c): each member posts the places at the start, and all
 * decide from the posted places alone, so they always decide alike.
 */
typedef struct {
    int64_t serial[2]; /* [0] send, [1] receive */
    int64_t off[2];
    int64_t part_bytes[2];
    char *part[2][DTR__SHM_MAX_MEMBERS];
} dtr__shm_shared_t;

/*
 * dtr__shm_start where the send buffer may sit in a shared allocation (shared: its place,
 * NULL: none): where every member's does, with the same geometry, each member copies its
 * pieces straight out of the others' send buffers (shm_a2a.c), else the ring form
 * runs; the members decide alike from the places they post. (The MPI backend's alone, in
 * libdtr itself: not exported to the companion libraries.)
 */
dtr_status_t dtr__shm_start_direct(dtr__shm_t *s, const void *send, int64_t sblock,
                                   int64_t srow, void *recv, int64_t rblock, int64_t rrow,
                                   int64_t bytes, const dtr__shm_shared_t *shared);

/*
 * Starts a reduce-scatter: member k's piece is counts[k] elements of esize bytes, the
 * pieces back to back in every member's send; this member's reduced piece goes to recv.
 * The elements are combined in member order (dtr__reduce_n), so the result is the same
 * whatever the timing. op is SUM, MAX, MIN or PRODUCT. shared (NULL: none) says where
 * send and recv sit in shared allocations. DTR_ERR_BACKEND while the previous operation is
 * not complete.
 */
DTR_INTERNAL_EXPORT dtr_status_t dtr__shm_reduce_scatter_start(dtr__shm_t *s, const void *send, void *recv,
                                           const int64_t *counts, dtr_dtype_t dtype,
                                           dtr_reduce_op_t op, int64_t esize,
                                           const dtr__shm_shared_t *shared);

/*
 * Starts an all-reduce of count elements: member k reduces the k-th of n near-equal pieces
 * (in member order, as the reduce-scatter) and every other member copies that result, so
 * all members hold the same bits. send may equal recv.
 */
DTR_INTERNAL_EXPORT dtr_status_t dtr__shm_all_reduce_start(dtr__shm_t *s, const void *send, void *recv,
                                       int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                       int64_t esize, const dtr__shm_shared_t *shared);

/*
 * Starts a gather or reduction whose pieces are span lists (dtr_spans_op_t, backend.h): the
 * same moves as the forms above, reading and writing the spans in place of one buffer.
 * esize: the dtype's bytes. DTR_ERR_INVALID_ARGUMENT where the lists' bytes differ from what
 * the counts make; DTR_ERR_BACKEND while the previous operation is not complete.
 */
DTR_INTERNAL_EXPORT dtr_status_t dtr__shm_spans_start(dtr__shm_t *s, const dtr_spans_op_t *op, int64_t esize);

/* Reductions of the group that read the members' buffers where they are (shm_direct.c);
 * 0 for NULL. Read without stopping one that is running. */
int64_t dtr__shm_direct_ops(const dtr__shm_t *s);

/* An all-reduce of at most this many bytes per member can take the tiny form. */
#define DTR__SHM_TINY_MAX 1024

/*
 * Starts an all-reduce of count elements (count * esize <= DTR__SHM_TINY_MAX) in one
 * exchange: every member publishes its input and reduces every member's, in member order,
 * itself (the same bits everywhere). For the small all-reduces (the argument agreement's,
 * a bias gradient's) this costs one cache-line exchange where the piecewise all-reduce
 * takes two rounds.
 */
DTR_INTERNAL_EXPORT dtr_status_t dtr__shm_tiny_all_reduce_start(dtr__shm_t *s, const void *send, void *recv,
                                            int64_t count, dtr_dtype_t dtype,
                                            dtr_reduce_op_t op, int64_t esize);

/*
 * The runtime's argument agreement (runtime/agree.c) (an all-reduce under MAX of three int64) in one
 * exchange of a cache line per member, on lines of its own: it may run while another
 * operation of the group has been started. Returns the agreement's number for
 * dtr__shm_agree_progress, which is true (and fills recv) once every member has written.
 */
uint64_t dtr__shm_agree_start(dtr__shm_t *s, const int64_t *send);
bool dtr__shm_agree_progress(dtr__shm_t *s, uint64_t a, int64_t *recv);

/*
 * Cancels the running operation, started but never progressed: what its start wrote (this
 * member's first chunks, published) is taken back, as if it had never started. Every member
 * must cancel it (a failed argument agreement), none having read another's chunks.
 */
void dtr__shm_cancel(dtr__shm_t *s);

/* Moves what it can without waiting; true once the operation is complete. *moved says
 * whether it moved anything. */
DTR_INTERNAL_EXPORT bool dtr__shm_progress(dtr__shm_t *s, bool *moved);

/* Completes the operation, yielding the CPU while peers are behind. */
DTR_INTERNAL_EXPORT void dtr__shm_wait(dtr__shm_t *s);

#endif
