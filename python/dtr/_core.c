/*
 * The module dtr._core: its functions and its setup (docs/python.md).
 */
#include "_core.h"

/* ---- the module ---------------------------------------------------------------------- */

static PyObject *dtrpy_version(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyUnicode_FromString(dtr_version_string());
}

static PyObject *dtrpy_mpi_library(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
#ifdef DTR_PY_MPI
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    return PyUnicode_FromStringAndSize(v, len);
#else
    Py_RETURN_NONE;
#endif
}

static PyObject *dtrpy_has_backend(PyObject *self, PyObject *name) {
    (void)self;
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s == NULL) return dtrpy_arg_error("name: expected a backend's name (str)");
    dtr_backend_info_t info;
    int found = dtr_backend_find(s, &info) == DTR_OK; /* (loads libdtr_gloo.so for "gloo") */
    return PyBool_FromLong(found);
}

/* Keeps obj alive for good: never released, not even at exit (dtr/_engine.py says why). */
static PyObject *dtrpy_immortal(PyObject *self, PyObject *obj) {
    (void)self;
    Py_INCREF(obj);
    Py_RETURN_NONE;
}

static PyMethodDef dtrpy_methods[] = {
    {"_immortal", dtrpy_immortal, METH_O, "Keeps obj alive for good (never released)."},
    {"digest", (PyCFunction)(void (*)(void))dtrpy_digest, METH_VARARGS | METH_KEYWORDS,
     "digest(local, mesh, placements, *, shape=None)\n--\n\n"
     "The 64-bit digest of the whole tensor whose block here is `local`, placed by\n"
     "`placements` on `mesh` (shape: the global shape; default inferred as even shards),\n"
     "the same for any layout of the same values: proof that a change delivered. Collective\n"
     "over the mesh's ranks; None on a rank outside it. A Partial placement is refused."},
    {"has_backend", dtrpy_has_backend, METH_O,
     "Whether this dtr has the backend `name` (\"gloo\": libdtr_gloo.so beside libdtr.so)."},
    {"version", dtrpy_version, METH_NOARGS, "The loaded library's version (\"0.9.1-dev\")."},
    {"mpi_library", dtrpy_mpi_library, METH_NOARGS, "The MPI library dtr was built with (None: built without MPI)."},
    {"_shutdown", dtrpy_shutdown, METH_NOARGS, "Destroys every context (at exit)."},
    {"layout", (PyCFunction)(void (*)(void))dtrpy_layout, METH_VARARGS | METH_KEYWORDS,
     "Each rank's (rank, coordinate, local_shape, global_offset, bytes); see dtr.layout."},
    {"_layout_svg", dtrpy_layout_svg, METH_VARARGS,
     "_layout_svg(mesh, shape, placements, dtype): the layout's picture (SVG text)."},
    {"plan", (PyCFunction)(void (*)(void))dtrpy_plan, METH_VARARGS | METH_KEYWORDS,
     "The Plan of a change; see dtr.plan."},
    {"redistribute", (PyCFunction)(void (*)(void))dtrpy_redistribute,
     METH_VARARGS | METH_KEYWORDS,
     "redistribute(local, mesh, src, dst, *, shape=None, out=None, async_op=False,\n"
     "             to_mesh=None, dtype=None, to_dtype=None, relabel=False, staging_cap=None,\n"
     "             block_scale=None)\n"
     "--\n\n"
     "Moves this rank's block `local` (a numpy array or a torch CPU tensor) of a tensor\n"
     "placed by `src` on `mesh` to its block placed by `dst` (on `to_mesh` where given), and\n"
     "returns it (a new array of local's kind, or `out` filled). Collective: every rank of\n"
     "the mesh's communicator calls it; one outside both meshes gets None at once, as does a\n"
     "rank that holds no destination block. `shape` is the global shape (default: inferred\n"
     "from local as even shards). `dtype` names the source dtype on a rank with no source\n"
     "block; `to_dtype` casts. async_op=True returns a Request (wait() gives the result).\n"
     "block_scale=B with to_dtype \"f8e4m3\" or \"f8e5m2\": block-scaled fp8 (DeepSeek-V3's\n"
     "weights), the result the tuple (weights, scales): one f32 scale per B x B block of the\n"
     "last two dims, laid out by dst's placements (docs/cross-mesh.md, \"Block-scaled\n"
     "fp8\"). The GIL is released while data moves."},
    {"redistribute_many", (PyCFunction)(void (*)(void))dtrpy_redistribute_many,
     METH_VARARGS | METH_KEYWORDS,
     "redistribute_many(locals, mesh, src, dst, *, shapes=None, outs=None, to_mesh=None,\n"
     "                  dtypes=None, to_dtypes=None, relabel=False, staging_cap=None,\n"
     "                  async_op=False, block_scale=None)\n"
     "--\n\n"
     "Moves many tensors at once, their collectives coalesced (one plan for the batch).\n"
     "src, dst, shapes, outs, dtypes and to_dtypes are lists of one entry per tensor, or one\n"
     "value for all. to_dtypes casts (between meshes: during the move; within one mesh a\n"
     "batch does not cast yet). Returns the list of results; with async_op=True a\n"
     "dtr.Request in flight whose wait() returns it. block_scale=B: every tensor block-scaled\n"
     "into its fp8 to_dtypes entry, each result a tuple (weights, scales), as for\n"
     "dtr.redistribute."},
    {"load", (PyCFunction)(void (*)(void))dtrpy_load, METH_VARARGS | METH_KEYWORDS,
     "load(path, mesh, rules, rules_path, names=None, rank=None, kind=None, each=None)\n"
     "--\n\n"
     "This rank's blocks of a checkpoint's tensors by name (use dtr.load)."},
    {"save", (PyCFunction)dtrpy_save, METH_VARARGS,
     "save(path, blocks, mesh, placements, shapes, metadata)\n--\n\n"
     "Every rank's blocks into one checkpoint, collectively (use dtr.save)."},
    {"consolidate", (PyCFunction)dtrpy_consolidate, METH_VARARGS,
     "consolidate(path, to, max_file_bytes)\n--\n\n"
     "A checkpoint into whole tensors as plain safetensors files (use dtr.consolidate)."},
    {"load_metadata", (PyCFunction)dtrpy_load_metadata, METH_VARARGS,
     "load_metadata(path)\n--\n\n"
     "A checkpoint's metadata as dtr.load's path reads it: the first file's \"__metadata__\"\n"
     "(beside an index, its \"metadata\" too), a dict of str, e.g. {'format': 'pt'}."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef dtrpy_module = {
    PyModuleDef_HEAD_INIT, "dtr._core", "dtr's extension module (use `import dtr`).", -1,
    dtrpy_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void) {
    PyObject *m = PyModule_Create(&dtrpy_module);
    if (m == NULL) return NULL;
    if (dtrpy_error_module_init(m) < 0 || dtrpy_mesh_module_init(m) < 0 ||
        dtrpy_spec_module_init(m) < 0 || dtrpy_plan_module_init(m) < 0 ||
        dtrpy_move_module_init(m) < 0 || dtrpy_grad_module_init(m) < 0 ||
        dtrpy_device_module_init(m) < 0 ||
        dtrpy_bench_module_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
