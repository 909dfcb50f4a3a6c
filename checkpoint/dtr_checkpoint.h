/*
 * Checkpoints in the safetensors format, read straight into a layout.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of JSON (each
 * tensor's "dtype", "shape" and "data_offsets" [begin, end) into the data that follows, and
 * an optional "__metadata__" of strings), then the raw little-endian data. A large model
 * comes as several files beside a `model.safetensors.index.json` whose "weight_map" names
 * the file of each tensor.
 *
 * dtr_checkpoint_open reads and checks the headers only (nothing of the data): every tensor
 * of a known dtype whose shape is its byte count, offsets inside the data, neither
 * overlapping nor leaving gaps, names unique across the files. A file that breaks any of
 * this is refused with the file, the tensor and the value named (DTR_ERR_PARSE), never read
 * past. dtr_checkpoint_read_block then reads one rank's block of one tensor, as a spec lays
 * it out, straight from the file: only the bytes of that block, nothing staged. Long runs
 * (a block whose rows are whole in the file) are read by pread; a block of short rows (a
 * later dim's shard: runs under 64 KiB, 256 KiB or more in all) is copied out of a
 * read-only mapping of the file, 16 MiB of it mapped at a time, so that only its rows'
 * bytes are copied, in one system call per window. A file another process truncates while
 * it is mapped raises SIGBUS, as with every mapped reader (the safetensors package,
 * torch.load(mmap=True)); DTR_CHECKPOINT_MMAP=0 in the environment reads by pread alone
 * (runs close together batched into one preadv, the gaps between them read into scratch),
 * where a truncation is DTR_ERR_IO.
 *
 * Calls on one checkpoint may run on several threads at once (pread has no file position).
 */
#ifndef DTR_CHECKPOINT_H
#define DTR_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"
#include "runtime/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dtr_checkpoint dtr_checkpoint_t;

/* One tensor of an open checkpoint. Strings are the checkpoint's, valid until it closes. */
typedef struct {
    const char *name;
    const char *format_dtype; /* as the file says it: "F32", "BF16", "I16" */
    dtr_dtype_t dtype;        /* DTR_DTYPE_LAST where dtr has none (BOOL, I8, I16, U16, ...) */
    int ndim;                 /* 0 for a scalar */
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int64_t bytes;            /* its data's size */
    const char *file;         /* the path of the file that holds it (its first piece's) */
    int64_t offset;           /* where its data starts in that file (from the file's start) */
    int64_t npieces;          /* 1; in a checkpoint dtr saved, the blocks it was saved as */
    const char *placements;   /* a saved checkpoint's placements ("S(0),R"); else NULL */
} dtr_checkpoint_tensor_t;

/* What dtr_checkpoint_read_block did: the block's bytes (in the file's dtype), its
 * contiguous runs in the files, the system calls that read them (runs close together share
 * one preadv; a mapped window counts one), and the bytes those read (by preadv, the gaps of
 * at most 64 KiB between batched runs included: the other blocks' bytes, never kept; by a
 * mapping, the runs' bytes alone). */
typedef struct {
    int64_t bytes, runs, reads, file_bytes;
} dtr_checkpoint_read_stats_t;

/* Opens `path`: a .safetensors file, or a directory holding model.safetensors.index.json
 * (its weight_map's files) or else every *.safetensors file in it. Reads and checks every
 * header (above); *out written only on success, the caller closes it. DTR_ERR_IO for a path
 * that cannot be opened or read (errno's reason), DTR_ERR_PARSE for a malformed file or
 * index, DTR_ERR_UNSUPPORTED for a tensor of more than DTR_MAX_TENSOR_DIMS dims. */
DTR_API dtr_status_t dtr_checkpoint_open(const char *path, dtr_checkpoint_t **out);
DTR_API void dtr_checkpoint_close(dtr_checkpoint_t *ck); /* NULL is a no-op */

/* Its tensors, sorted by name (bytewise), and its files. */
DTR_API int64_t dtr_checkpoint_count(const dtr_checkpoint_t *ck);
DTR_API dtr_status_t dtr_checkpoint_tensor(const dtr_checkpoint_t *ck, int64_t index,
                                           dtr_checkpoint_tensor_t *out);
/* The index of tensor `name`; DTR_ERR_INVALID_ARGUMENT naming it where there is none. */
DTR_API dtr_status_t dtr_checkpoint_find(const dtr_checkpoint_t *ck, const char *name,
                                         int64_t *index);
/* The mesh a checkpoint dtr saved was saved from ("2x2"); NULL for plain safetensors. */
DTR_API const char *dtr_checkpoint_mesh(const dtr_checkpoint_t *ck);
/* A value of the first file's "__metadata__" (the index's "metadata" for a directory with
 * an index); NULL where the key is absent. */
DTR_API const char *dtr_checkpoint_metadata(const dtr_checkpoint_t *ck, const char *key);
/* How many key, value pairs that metadata holds, and pair i of them (*key and *value owned by
 * the checkpoint; INVALID_ARGUMENT for i out of range): what a writer copies to keep it. */
DTR_API int64_t dtr_checkpoint_metadata_count(const dtr_checkpoint_t *ck);
DTR_API dtr_status_t dtr_checkpoint_metadata_at(const dtr_checkpoint_t *ck, int64_t i,
                                                const char **key, const char **value);

/*
 * Reads rank `rank`'s block of tensor `index` as `spec` lays it out (dtr_spec_layout: the
 * box local_shape at global_offset, row-major) into `out` (out_bytes at least the block's
 * bytes). The spec's shape and dtype must be the tensor's; a Partial placement is refused
 * (a file holds whole values, not addends), as is a rank outside the spec's mesh. stats
 * (may be NULL) gets what was read (above). On failure *out and *stats are
 * untouched, except where the file fails mid-read (DTR_ERR_IO: a file shortened since it
 * was opened, or the disk's error), which leaves *out partly written.
 */
DTR_API dtr_status_t dtr_checkpoint_read_block(const dtr_checkpoint_t *ck, int64_t index,
                                               const dtr_spec_t *spec, int rank, void *out,
                                               size_t out_bytes,
                                               dtr_checkpoint_read_stats_t *stats);

/* The host staging of dtr_checkpoint_read_block_to where the caller passes 0: 16 MiB. */
#define DTR_CHECKPOINT_STAGING ((size_t)16 << 20)

/*
 * The same read into memory of a space (space NULL: host memory, as above): `out` is the
 * space's memory (a CUDA device pointer on dtr_memory_cuda_ops, with its state). The block
 * goes through a host staging buffer of at most staging_bytes (0: DTR_CHECKPOINT_STAGING) in
 * chunks that are contiguous in the block (whole trailing rows where they fit): each chunk
 * read from the files, cast where spec->dtype is not the file's, and handed to the space's
 * copy; the space is synced before the call returns, so the block is complete in out. On
 * host memory a cast goes through the same staging (never a block-sized buffer). A piece
 * of a saved checkpoint is checked against its checksum where one chunk reads it whole.
 * Errors as dtr_checkpoint_read_block's, and the space's own (its copy or sync failing,
 * which leaves out partly written); staging_bytes less than one element (its bytes as
 * read plus as cast) is DTR_ERR_INVALID_ARGUMENT. (dtr_checkpoint_read_block is this call
 * with space NULL: the details of both begin "dtr_checkpoint_read_block: ".)
 */
DTR_API dtr_status_t dtr_checkpoint_read_block_to(const dtr_checkpoint_t *ck, int64_t index,
                                                  const dtr_spec_t *spec, int rank,
                                                  const dtr_memory_ops_t *space, void *state,
                                                  void *out, size_t out_bytes,
                                                  size_t staging_bytes,
                                                  dtr_checkpoint_read_stats_t *stats);

/* ---- placement rules ----------------------------------------------------------------- */

/*
 * Which placements each tensor takes, the way a parallelize plan says it: a JSON list of
 * {"match": GLOB, "placements": "S(0),R"[, "dtype": "bf16"]}, one placement per mesh dim;
 * the first rule whose GLOB matches the tensor's name (fnmatch, no flags) wins; "dtype"
 * casts on load (between float dtypes). Unknown keys, placements not one per mesh dim and
 * unknown dtypes are refused naming the rule (DTR_ERR_PARSE); a rules file that cannot be
 * opened is DTR_ERR_IO with the path and the system's reason.
 */
typedef struct dtr_checkpoint_rules dtr_checkpoint_rules_t;
DTR_API dtr_status_t dtr_checkpoint_rules_load(const char *path, int mesh_ndims,
                                               dtr_checkpoint_rules_t **out);
DTR_API dtr_status_t dtr_checkpoint_rules_parse(const char *json, int mesh_ndims,
                                                dtr_checkpoint_rules_t **out);
DTR_API void dtr_checkpoint_rules_destroy(dtr_checkpoint_rules_t *rules);
/* Tensor `index`'s spec on `mesh` under the first rule that matches its name (*rule: its
 * index; may be NULL). A tensor no rule matches is DTR_ERR_INVALID_ARGUMENT naming it; a
 * rule it cannot take (a shard dim it lacks) names the tensor, its shape and the rule. */
DTR_API dtr_status_t dtr_checkpoint_rules_spec(const dtr_checkpoint_rules_t *rules,
                                               const dtr_checkpoint_t *ck, int64_t index,
                                               const dtr_mesh_t *mesh, dtr_spec_t *spec,
                                               int *rule);
/* Rule k as text ("'*.c_attn.weight': S(0),S(1) as bf16"); NULL out of range. */
DTR_API const char *dtr_checkpoint_rules_describe(const dtr_checkpoint_rules_t *rules, int k);

/* ---- saving ------------------------------------------------------------------------ */

/* One tensor to save: its name, its spec (global shape, dtype, placements on the mesh every
 * item shares; nothing Partial) and this rank's block (the spec's layout, row-major), or
 * NULL to have the fill callback write it. */
typedef struct {
    const char *name;
    const dtr_spec_t *spec;
    const void *data;
} dtr_checkpoint_item_t;

/* Writes items[item]'s block (bytes of it) into block; an error stops the save. */
typedef dtr_status_t (*dtr_checkpoint_fill_fn)(void *arg, int64_t item, void *block,
                                               size_t bytes);

/*
 * Writes rank `rank`'s blocks as dir/rank-RRRRR-of-NNNNN.safetensors (N the mesh's ranks, R
 * the rank's place on the mesh, row-major):
 * a plain safetensors file, one tensor per item under the item's name holding this rank's
 * block, except replicas (a block is saved by the rank at coordinate 0 of every mesh dim the
 * item is replicated on). A rank with nothing to save writes no file. Blocks come from
 * items[].data or fill, one at a time, into one buffer of the largest block. The file is
 * written as a .partial and renamed when complete; on failure it is removed. *record gets
 * the rank's pieces (file, each block's box and XXH3-64) as JSON text for
 * dtr_checkpoint_save_manifest (free() it). Not collective: every rank calls it, then one
 * rank writes the manifest from all the records.
 */
DTR_API dtr_status_t dtr_checkpoint_save_rank(const char *dir, int rank, int64_t nitems,
                                              const dtr_checkpoint_item_t *items,
                                              dtr_checkpoint_fill_fn fill, void *arg,
                                              char **record);

/* Writes rank's blocks of the items (replicas as above) to `path` as one plain safetensors
 * file, even where it holds none: with every item on a one-rank mesh, whole tensors
 * (`dtr reshard --consolidate`). Written as path.partial and renamed when complete. */
DTR_API dtr_status_t dtr_checkpoint_write_file(const char *path, int rank, int64_t nitems,
                                               const dtr_checkpoint_item_t *items,
                                               dtr_checkpoint_fill_fn fill, void *arg);

/* The same two with `metadata` (key, value, ..., NULL; NULL: none) as each written file's
 * "__metadata__" (strings; a reader of the directory takes the first file's): what `dtr
 * reshard` and `--consolidate` carry over from their source (e.g. {"format": "pt"}). */
DTR_API dtr_status_t dtr_checkpoint_save_rank_meta(const char *dir, int rank, int64_t nitems,
                                                   const dtr_checkpoint_item_t *items,
                                                   dtr_checkpoint_fill_fn fill, void *arg,
                                                   const char *const *metadata, char **record);
DTR_API dtr_status_t dtr_checkpoint_write_file_meta(const char *path, int rank, int64_t nitems,
                                                    const dtr_checkpoint_item_t *items,
                                                    dtr_checkpoint_fill_fn fill, void *arg,
                                                    const char *const *metadata);

/* Writes dir/dtr.manifest.json (the mesh; each item's dtype, shape and placements; its pieces
 * from records[r], rank r's record, NULL for none) so dtr_checkpoint_open reads the
 * directory as one checkpoint on any number of ranks. */
DTR_API dtr_status_t dtr_checkpoint_save_manifest(const char *dir, int64_t nitems,
                                                  const dtr_checkpoint_item_t *items,
                                                  const char *const *records, int nrecords);

/*
 * Saves on a mesh as one collective call over every rank of `mesh` (each with the same
 * items, names and specs, and its own blocks; fill and metadata as for
 * dtr_checkpoint_save_rank_meta), on the context's backend: every rank writes its file
 * into `dir` (a new or empty directory; made where absent), then the mesh's first rank writes
 * the manifest from every rank's record, so dtr_checkpoint_open reads `dir` on any mesh.
 * Arguments are agreed first: a rank's bad argument (a non-empty `dir`, an item on another
 * mesh) fails every rank before anything is written, the others with DTR_ERR_REMOTE naming
 * it; a `dir`, items or metadata that differ between ranks fail every rank alike. A failure while writing takes every file back (and `dir` where this call made it).
 * The records are gathered by all-reduce: each rank holds the mesh's ranks times the longest
 * record (about 100 bytes per block it saves) for a moment. The context's memory must be
 * the host's (dtr_context_set_memory not called).
 */
struct dtr_context; /* dtr_context_t (runtime/runtime.h) */
DTR_API dtr_status_t dtr_checkpoint_save(struct dtr_context *ctx, const dtr_mesh_t *mesh,
                                         const char *dir, int64_t nitems,
                                         const dtr_checkpoint_item_t *items,
                                         dtr_checkpoint_fill_fn fill, void *arg,
                                         const char *const *metadata);

/* ---- consolidation (consolidate.c) -------------------------------------------------- */

/* The metadata a copy of ck carries over: key, value, ..., NULL (malloc'd: free() the array,
 * not the strings, which are ck's; NULL where there is none), less an index's "total_size",
 * which the writer of an index computes anew. For the `metadata` of the _meta writers. */
DTR_API const char **dtr_checkpoint_metadata_carried(const dtr_checkpoint_t *ck);

/*
 * A checkpoint (any form dtr_checkpoint_open reads: one saved on any mesh too) into whole
 * tensors as plain safetensors files in `to` (missing, or an empty directory; a non-empty
 * one is DTR_ERR_INVALID_ARGUMENT and untouched): `to`/model.safetensors, or past
 * max_file_bytes (0: one file) model-0000K-of-0000N.safetensors in the checkpoint's order
 * with model.safetensors.index.json (its weight_map, and metadata with total_size). Each
 * file carries the source's metadata (less total_size). Each tensor is read whole, one at a
 * time. On failure nothing is left in `to` (nor `to` itself where this call made it). One
 * process; the three calls below share the files out over ranks (`dtr reshard
 * --consolidate`: file k on rank k mod the ranks, then the index on one).
 */
DTR_API dtr_status_t dtr_checkpoint_consolidate(const char *from, const char *to,
                                                int64_t max_file_bytes);
/* The split: file_of[i] (dtr_checkpoint_count(ck) entries, the caller's) gets tensor i's
 * file, a new one past max_file_bytes; *nfiles their count. Pure. */
DTR_API dtr_status_t dtr_checkpoint_consolidate_plan(const dtr_checkpoint_t *ck,
                                                     int64_t max_file_bytes, int *file_of,
                                                     int *nfiles);
/* Writes file k (0 <= k < nfiles) of the split into dir (existing), its tensors read whole
 * from ck (written as .partial and renamed; removed on failure). DTR_ERR_UNSUPPORTED for a
 * tensor of a dtype dtr cannot move. */
DTR_API dtr_status_t dtr_checkpoint_consolidate_file(const dtr_checkpoint_t *ck, const char *dir,
                                                     const int *file_of, int nfiles, int k);
/* Writes dir/model.safetensors.index.json for the split (nfiles > 1). */
DTR_API dtr_status_t dtr_checkpoint_write_index(const dtr_checkpoint_t *ck, const char *dir,
                                                const int *file_of, int nfiles);

#ifdef __cplusplus
}
#endif

#endif
