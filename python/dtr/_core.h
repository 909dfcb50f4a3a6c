/*
 * dtr._core: the extension module under `import dtr`, on the CPython API.
 *
 *   _core.c   the module: its function table and setup
 *   _error.c  dtr.Error and its subclasses
 *   _refuse.c a rank's refused arguments shared with its call's other ranks (dtr_refuse)
 *   _mesh.c   the MPI contexts (one per communicator) and dtr.Mesh
 *   _store.c  the Gloo backend over a Python store (torch's, torchrun's, dtr/_store.py's)
 *   _engine.c the "torch" backend: torch.distributed's collectives as dtr's engine
 *   _spec.c   arguments into dtr's values: shapes, dtypes, placements (cached), specs
 *   _plan.c   dtr.layout, dtr.plan and the Plan object
 *   _move.c   dtr.redistribute, dtr.redistribute_many and the Request of async_op
 *   _bench.c  the same change in a C loop, for the binding's benchmark
 *   _grad.c   gradient reduction: the DDP hooks' all-reduce, FSDP/HSDP reduce-scatter
 *   _digest.c dtr.digest: a tensor's layout-independent digest (proof of delivery)
 *   _device.c device memory: a Mesh's device= (memory spaces by name), device arrays in as
 *             buffers at device addresses, dtr.DeviceArray
 *   _checkpoint.c  dtr.load: a safetensors checkpoint's blocks for this rank
 *
 * Arrays come in through the buffer protocol (numpy; a torch tensor through the Python
 * helpers in dtr/_arrays.py, which hand over a numpy view of it; a device array as a
 * _DeviceView, a buffer whose address only the context's memory space reads). Every
 * collective call releases the GIL while it runs.
 */
#ifndef DTR_PY_CORE_H
#define DTR_PY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

#include <dtr/dtr.h>
#include <dtr/dtr_gloo.h>

#ifdef DTR_PY_MPI /* (the MPI dtr was built for: "openmpi" or "mpich"; setup.py) */
#include <mpi.h>
#include <dtr/dtr_mpi.h>
#else
/* Built without MPI (python/build_lib.py found none): backend 'mpi' is refused when a Mesh is
 * made, so no handle below is ever other than this placeholder. */
typedef int MPI_Comm;
#define MPI_COMM_NULL 0
#endif

/* A device's text: "cpu", "cuda:0" (a memory space's name, ':', the device's index). */
#define DTRPY_DEVICE_MAX 48

/* One dtr context over one communicator (backend mpi) or over the job a launcher started
 * (another backend, by name), shared by every Mesh on it. */
typedef struct {
    PyObject_HEAD
    dtr_context_t *ctx;
    PyObject *comm; /* the mpi4py communicator (None without MPI) */
    MPI_Comm mcomm; /* its handle (MPI_COMM_NULL without MPI) */
    int rank, size; /* in comm, or in the job */
    /* dtr uses a context from one thread at a time (docs/integration.md, "Threads") and
     * every call below releases the GIL: each call into the context holds this lock. */
    PyThread_type_lock lock;
    PyObject *store; /* the Python store a Gloo context meets through (NULL: none) */
    void *inflight;  /* the dtrpy_request_t in flight on it (one at most; borrowed) or NULL */
    const dtr_memory_info_t *space; /* its memory space (NULL: host) and that state */
    void *space_state;
    void (*complete)(void *inflight); /* completes it (_move.c's; set with it) */
    bool nccl; /* dtr's own NCCL context: a mesh is split at its first use (_store.c) */
} dtrpy_context_t;

/* Runs the statement, a call into context c, with the GIL released and c's lock held (taken after
 * the GIL is let go, so a thread waiting for the lock never holds the GIL). */
#define DTRPY_CALL(c, ...)                                                                 \
    do {                                                                                    \
        Py_BEGIN_ALLOW_THREADS                                                              \
        PyThread_acquire_lock((c)->lock, WAIT_LOCK);                                        \
        __VA_ARGS__;                                                                        \
        PyThread_release_lock((c)->lock);                                                   \
        Py_END_ALLOW_THREADS                                                                \
    } while (0)

typedef struct {
    PyObject_HEAD
    dtr_mesh_t *mesh;
    PyObject *comm;             /* NULL: mpi4py's COMM_WORLD */
    char backend[DTR_BACKEND_NAME_MAX + 1]; /* "mpi", or a backend without MPI ("gloo") */
    char device[DTRPY_DEVICE_MAX];          /* "cpu", or a memory space's "cuda:0" */
    dtrpy_context_t *context;   /* NULL until the first collective call */
    PyObject *dim_names;        /* a tuple of str, one a dim, or NULL */
    PyObject *weak;
} dtrpy_mesh_t;

/* The mesh's context, made at the first collective call (collective over the communicator),
 * after checking that every rank of the mesh is in the communicator. Borrowed. */
dtrpy_context_t *dtrpy_mesh_context(dtrpy_mesh_t *m);
/* obj as a dtr.Mesh, or ArgumentError naming `what`. */
int dtrpy_mesh_of(PyObject *obj, const char *what, dtrpy_mesh_t **out);

extern PyTypeObject dtrpy_mesh_type;
extern PyTypeObject dtrpy_plan_type;
extern PyTypeObject dtrpy_request_type;

/* The exceptions (dtr.Error and its subclasses). */
extern PyObject *dtrpy_error, *dtrpy_argument_error, *dtrpy_refused_error,
    *dtrpy_backend_error, *dtrpy_timeout_error, *dtrpy_file_error;

int dtrpy_error_module_init(PyObject *module);
int dtrpy_mesh_module_init(PyObject *module);
/* Destroys every context (at exit, before mpi4py finalizes MPI). */
PyObject *dtrpy_shutdown(PyObject *self, PyObject *noargs);

/* Raises the exception of a dtr status with dtr_last_error()'s detail; returns NULL. */
PyObject *dtrpy_raise(dtr_status_t st);
/* Why this thread's last call into Python from the library failed (a store's, the torch
 * engine's; "" when none did): dtrpy_raise adds it to the error's message and clears it. */
extern _Thread_local char dtrpy_callback_why[256];
/* The pending Python exception, cleared, into dtrpy_callback_why as "CALL raised TYPE: text". */
void dtrpy_keep_error(const char *call);
/* Raises dtr.ArgumentError with a formatted message; returns NULL. */
PyObject *dtrpy_arg_error(const char *fmt, ...);
/* The TypeError, ValueError or OverflowError pending (CPython's argument parsing, a
 * conversion) raised again as dtr.ArgumentError with its message, so that every wrong value
 * is one class (an ArgumentError is a TypeError and a ValueError too); another exception is
 * left as it is. Returns NULL. */
PyObject *dtrpy_as_argument_error(void);
/* ---- _refuse.c ---- */

/* With an exception set for this rank's arguments to a collective call it has not made:
 * joins the call's argument agreement on c (dtr_refuse: mesh, dims, to as there), so that
 * the other ranks' call fails at once and the next call pairs, then leaves the exception
 * set. Returns NULL. */
PyObject *dtrpy_refuse(dtrpy_context_t *c, const dtr_mesh_t *mesh, unsigned dims,
                       const dtr_mesh_t *to);
/* The same after the call's arguments did not even parse (a wrong type, an unknown keyword):
 * the mesh taken from position mesh_pos or keyword "mesh" (and "to_mesh"), where it is a
 * dtr.Mesh; a group call (group true) over all its dims, else over the mesh. NULL. */
PyObject *dtrpy_refuse_parse(PyObject *args, PyObject *kw, Py_ssize_t mesh_pos, bool group);

/* ---- _spec.c ---- */

/* 0 where obj is NULL, None, True or False; else -1 with ArgumentError naming `what` (a flag
 * whose truth test could raise is refused rather than asked). */
int dtrpy_flag_ok(PyObject *obj, const char *what);
/* obj as an integer in lo..hi (an int, or anything with __index__: numpy's integers; not a
 * bool, float or str); otherwise ArgumentError naming `what` and the range. */
int dtrpy_int(PyObject *obj, const char *what, int64_t lo, int64_t hi, int64_t *out);
/* obj's text as UTF-8 (a str), refusing one that holds a NUL (C would read only up to it);
 * NULL with ArgumentError naming `what`. Valid while obj lives. */
const char *dtrpy_text(PyObject *obj, const char *what);

/* A shape: a sequence of ints, an int, or text ("16x8"). 0, or -1 with ArgumentError naming
 * `what`. */
int dtrpy_shape(PyObject *obj, const char *what, int64_t *shape, int *ndim);
/* A dtype: dtr's names and aliases ("f32", "float32"), a numpy dtype or a torch dtype. */
int dtrpy_dtype(PyObject *obj, const char *what, dtr_dtype_t *out);
/* Placements for a mesh of `ndims` dims: text ("S(0),R"), or a sequence of texts, dtr's
 * placement objects or torch's. Parsed once per distinct hashable value (cached). */
int dtrpy_placements(PyObject *obj, const char *what, int ndims, dtr_placement_t *out);
/* A spec, with the error naming `what` (dtr_spec_init's detail after it). */
int dtrpy_spec(dtr_spec_t *out, const dtrpy_mesh_t *mesh, PyObject *placements,
               const char *what, const int64_t *shape, int ndim, dtr_dtype_t dtype);
/* The global shape of a tensor whose block here has shape local[0..lndim), as DTensor
 * infers it: every Shard of `placements` (errors name `what`) multiplies its dim by the mesh
 * dim's size (even shards). */
int dtrpy_infer_shape(const dtr_mesh_t *mesh, PyObject *placements, const char *what,
                      const int64_t *local, int lndim, int64_t *shape, int *ndim);
/* ArgumentError naming `what` unless local[0..ndim) is rank's block of spec (given_shape
 * false: the message says the global shape was inferred as even shards). */
int dtrpy_check_local(const char *what, const int64_t *local, int ndim, const dtr_spec_t *spec,
                      int rank, bool given_shape);
/* An argument of a batch given per tensor (a list or tuple of n entries, each a str, a list,
 * a tuple, an array or None) or once for all: entry i, or obj itself (NULL where not given). */
PyObject *dtrpy_each(PyObject *obj, Py_ssize_t i, Py_ssize_t n);
/* A dtype argument of a batch (dtypes, to_dtypes): a list or tuple is one entry per tensor,
 * anything else one value for all; *item (borrowed, NULL where not given) and its name for
 * errors into label; -1 (an ArgumentError) for a list of another length. */
int dtrpy_each_dtype(PyObject *obj, Py_ssize_t i, Py_ssize_t n, const char *name,
                     PyObject **item, char *label, size_t cap);
/* "(16, 8)" for messages. */
void dtrpy_format_shape(const int64_t *shape, int ndim, char *buf, size_t len);
/* A tuple of ints. */
PyObject *dtrpy_tuple(const int64_t *v, int n);
/* The helper dtr/_arrays.py registered under `name` (borrowed), or NULL with an error. */
PyObject *dtrpy_helper(const char *name);
int dtrpy_spec_module_init(PyObject *module);

/* ---- _store.c ---- */

/* The job dtr/_store.py's job() found: its store, this rank, the job's size, the keys'
 * prefix, and libdtr_gloo's create. */
typedef struct {
    PyObject *store; /* borrowed from the job tuple */
    int rank, size;
    char prefix[64];
    dtr_status_t (*create)(int, int, const dtr_gloo_options_t *, dtr_context_t **);
} dtrpy_job_t;
/* job (a tuple (store, rank, size, prefix)) into *out, loading the backend ('gloo' or
 * 'nccl'); -1 with an error set. */
int dtrpy_job_of(PyObject *job, const char *backend, dtrpy_job_t *out);
/* A Gloo context over the job's store (collective over its ranks); called without the GIL,
 * the store's callbacks take it. */
dtr_status_t dtrpy_job_create(const dtrpy_job_t *job, dtr_context_t **out);
/* backend 'nccl': libdtr_nccl.so loaded and its calls found, or -1 with an error set. */
int dtrpy_nccl_load(void);
/* The job's ncclUniqueId into id (cap bytes), *len its size: rank 0 makes it and sets it in
 * the job's store under "PREFIX/nccl_id", the others get it (waiting, as the store waits).
 * With the GIL; -1 with an error set. */
int dtrpy_nccl_id(const dtrpy_job_t *job, unsigned char *id, size_t cap, size_t *len);
/* An NCCL context over the job's ranks from that id, on GPU `device` (collective over them:
 * ncclCommInitRank). Without the GIL. */
dtr_status_t dtrpy_nccl_create(const dtrpy_job_t *job, int device, const void *id, size_t len,
                               dtr_context_t **out);
/* c's memory space as NCCL's context has it (CUDA on its stream): set_stream and wait_stream
 * reach the context's stream. */
void dtrpy_nccl_attach(dtrpy_context_t *c, const dtr_memory_info_t *cuda);
/* The NCCL communicators of the mesh's groups (dtr_nccl_split_mesh): collective over every
 * rank of the job. Without the GIL. */
dtr_status_t dtrpy_nccl_split(dtrpy_context_t *c, const dtr_mesh_t *mesh);

/* ---- _engine.c ---- */

/* The torch engine's state over engine (dtr/_engine.py's Engine) for a mesh on `device`
 * into *state, its world's size into *size; -1 with an error set (ArgumentError for torch
 * on nccl and a mesh on host memory). On nccl and a CUDA device the engine's collectives
 * take the device buffers themselves; otherwise host ones (a device space stages). */
int dtrpy_engine_of(PyObject *engine, const char *device, void **state, int *size);
/* A context over the torch engine (collective over nothing: torch's groups are made as
 * plans need them), with DTR_BACKEND_CAP_DEVICE where its buffers are CUDA ones; takes
 * state, also on failure. Called without the GIL. */
dtr_status_t dtrpy_engine_create(void *state, dtr_context_t **out);

/* ---- _plan.c ---- */

/* The plan options every call uses (the cost model read from the environment at import). */
const dtr_plan_options_t *dtrpy_plan_options(void);
dtr_plan_cache_t *dtrpy_plan_cache(void);
int dtrpy_plan_module_init(PyObject *module);
PyObject *dtrpy_layout(PyObject *self, PyObject *args, PyObject *kw);
PyObject *dtrpy_layout_svg(PyObject *self, PyObject *args);
PyObject *dtrpy_plan(PyObject *self, PyObject *args, PyObject *kw);

/* ---- _move.c ---- */

int dtrpy_move_module_init(PyObject *module);
PyObject *dtrpy_redistribute(PyObject *self, PyObject *args, PyObject *kw);
PyObject *dtrpy_redistribute_many(PyObject *self, PyObject *args, PyObject *kw);

/* ---- _digest.c ---- */

PyObject *dtrpy_digest(PyObject *self, PyObject *args, PyObject *kw);

/* ---- _buffer.c ---- */

/* A C-contiguous buffer of obj (writable: refused otherwise; an input that is not contiguous
 * is copied) and its dtype; kind: NULL for numpy, else what results are made as ("torch",
 * "numpy" for ml_dtypes' arrays, "torch@cuda:0" or "array@cuda:0" on a device). A device
 * array is refused by name: this is for calls that read their arrays on the host
 * (_device.c, as dtrpy_buffer_on's "cpu"). */
int dtrpy_buffer(PyObject *obj, const char *what, bool writable, Py_buffer *view,
                 dtr_dtype_t *dtype, PyObject **kind);
/* The same, device arrays too (a _DeviceView's buffer, its kind naming the device). */
int dtrpy_buffer_any(PyObject *obj, const char *what, bool writable, Py_buffer *view,
                     dtr_dtype_t *dtype, PyObject **kind);
/* A new host array of `kind` (numpy's, "numpy", "torch", "torch@DEVICE") and a writable
 * buffer of it. */
int dtrpy_alloc_host(const int64_t *shape, int ndim, dtr_dtype_t dtype, PyObject *kind,
                     PyObject **result, Py_buffer *view);
/* A new array of `kind` (as dtrpy_buffer gives it; "array@DEVICE" a DeviceArray, _device.c)
 * and a writable buffer of it. */
int dtrpy_alloc(const int64_t *shape, int ndim, dtr_dtype_t dtype, PyObject *kind,
                PyObject **result, Py_buffer *view);

/* ---- _device.c ---- */

/* device= of a Mesh: None or "cpu", or a memory space's name with an optional index
 * ("cuda", "cuda:1"), its space found (RefusedError where this dtr has none: a build without
 * CUDA) and the index checked; the canonical text ("cpu", "cuda:1") into out. 0 or -1. */
int dtrpy_device_parse(PyObject *obj, char *out, size_t cap);
/* Puts a new context on device's memory space (none for "cpu"): c->space, c->space_state.
 * Called without the GIL. */
dtr_status_t dtrpy_space_attach(dtrpy_context_t *c, const char *device);
/* dtrpy_buffer_any, and the array's device checked against `device` (the mesh's): an error
 * naming `what` and both devices where they differ. A kind "array@*" (an array by
 * __cuda_array_interface__, which does not say its device) becomes the mesh's device. */
int dtrpy_buffer_on(PyObject *obj, const char *what, bool writable, const char *device,
                    Py_buffer *view, dtr_dtype_t *dtype, PyObject **kind);
/* The kind of the results of a rank without an input on `device` ("torch@cuda:0" where
 * torch is imported, else "array@DEVICE"). New reference. */
PyObject *dtrpy_default_kind(const char *device);
/* A new dtr.DeviceArray of kind "array@DEVICE" and a buffer of it. */
int dtrpy_device_alloc(const int64_t *shape, int ndim, dtr_dtype_t dtype, PyObject *kind,
                       PyObject **result, Py_buffer *view);
/* Before a call on c whose arrays are of `kind`: the space's stream set to torch's current
 * one for torch tensors ("torch@cuda:0"), else back to the space's own. 0, or -1 with an
 * error. */
int dtrpy_device_stream(dtrpy_context_t *c, PyObject *kind);
/* Then for each input: the space's stream waits for its producer's stream, where it names
 * one (__cuda_array_interface__'s "stream", DLPack's export). 0, or -1 with an error. */
int dtrpy_device_wait(dtrpy_context_t *c, const Py_buffer *in);
/* Whether a result of `kind` needs the context synchronised before the call returns (a
 * DeviceArray: no stream of the caller's orders what reads it next). */
bool dtrpy_device_settles(PyObject *kind);
/* Whether obj is a _DeviceView, and the producer stream it waits for (borrowed; None). */
bool dtrpy_is_devview(PyObject *obj);
PyObject *dtrpy_devview_stream(PyObject *view_obj);
int dtrpy_device_module_init(PyObject *module);

/* ---- _grad.c ---- */

int dtrpy_grad_module_init(PyObject *module);

/* ---- _bench.c: the C loop bench/python_bench.py measures the binding against ---- */

int dtrpy_bench_module_init(PyObject *module);

/* ---- _checkpoint.c ---- */

/* dtr._core.load (dtr.load in dtr/__init__.py). */
PyObject *dtrpy_load(PyObject *self, PyObject *args, PyObject *kw);
/* dtr.load_metadata(path): the checkpoint's "__metadata__" as a dict of str. */
PyObject *dtrpy_load_metadata(PyObject *self, PyObject *args);
PyObject *dtrpy_consolidate(PyObject *self, PyObject *args);
PyObject *dtrpy_save(PyObject *self, PyObject *args);

#endif
