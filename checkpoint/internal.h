/*
 * Inside the checkpoint module:
 *   safetensors.c  one file's header: the bytes after the length, parsed (Jansson) and
 *                  checked against the data's size; no I/O, so the fuzzer runs it on any
 *                  bytes (fuzz/fuzz_safetensors.c)
 *   file.c         one file opened, its header read and checked
 *   open.c         files and directories (the index), the tensors sorted, lookups
 *   manifest.c     a checkpoint dtr saved: its manifest against its files
 *   read.c         one rank's block of a tensor by pread (the pieces that meet it)
 *   save.c         each rank's file, the manifest
 */
#ifndef DTR_CHECKPOINT_INTERNAL_H
#define DTR_CHECKPOINT_INTERNAL_H

#include <stdbool.h>

#include "checkpoint/dtr_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "core/common.h"

typedef struct {
    char *path;
    int fd;
    int64_t size;       /* at open */
    int64_t data_start; /* 8 + the header's length */
    dtr__st_header_t header; /* its tensors (names kept for the manifest's checks) */
} dtr__ck_file_t;

/* A box of a tensor held in one file: the whole tensor in a plain safetensors file, one
 * rank's block in a checkpoint dtr saved. Its bytes are its box, row-major, at `data`. */
typedef struct {
    int file;
    int64_t data; /* the piece's first byte in the file */
    int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS];
    bool has_checksum;
    uint64_t checksum; /* XXH3-64 of its bytes */
} dtr__ck_piece_t;

typedef struct {
    char *name;
    char format_dtype[16];
    dtr_dtype_t dtype; /* DTR_DTYPE_LAST: none in dtr */
    int ndim;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int64_t bytes;
    dtr__ck_piece_t *pieces;
    int64_t npieces;
    char *placements; /* a saved checkpoint's, as text ("S(0),R"); else NULL */
} dtr__ck_tensor_t;

struct dtr_checkpoint {
    dtr__ck_file_t *files;
    int nfiles;
    dtr__ck_tensor_t *tensors; /* sorted by name */
    int64_t ntensors;
    char **meta; /* key, value pairs */
    int64_t nmeta;
    char *mesh; /* a saved checkpoint's mesh, as text ("2x2"); else NULL */
};

/* file.c: appends a file (header parsed and checked) to ck; its index in *file. */
dtr_status_t dtr__ck_add_file(dtr_checkpoint_t *ck, const char *path, int *file);
/* manifest.c: a checkpoint dtr saved (dir/dtr.manifest.json and the files it names). */
dtr_status_t dtr__ck_add_manifest(dtr_checkpoint_t *ck, const char *dir, const char *path);
/* save.c: the items' checks (names unique and non-empty, one mesh, a dtype the format has,
 * nothing Partial) and rank's coordinate on their mesh into coord; errors under
 * dtr_checkpoint_save_rank's name. */
dtr_status_t dtr__ck_save_args(int rank, int64_t nitems, const dtr_checkpoint_item_t *items,
                               int64_t *coord);
/* The name of a saved checkpoint's manifest, in its directory. */
#define DTR__CK_MANIFEST "dtr.manifest.json"
#endif
