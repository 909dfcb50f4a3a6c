/*
 * dtr.digest: the layout-independent 64-bit digest of a whole tensor from this rank's block
 * (dtr_digest, redistribute/executor/executor.h), for proof that a change delivered.
 */
#include "_core.h"

PyObject *dtrpy_digest(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"local", "mesh", "placements", "shape", NULL};
    PyObject *local, *mesh_obj, *placements, *shape_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$O:digest", names, &local, &mesh_obj,
                                     &placements, &shape_obj))
        return dtrpy_refuse_parse(args, kw, 1, true);
    dtrpy_mesh_t *mesh;
    if (dtrpy_mesh_of(mesh_obj, "mesh", &mesh) < 0) return NULL;
    dtrpy_context_t *c = dtrpy_mesh_context(mesh);
    if (c == NULL) return NULL;
    int64_t coord[DTR_MAX_MESH_DIMS];
    if (dtr_mesh_coord(mesh->mesh, c->rank, coord) != DTR_OK) Py_RETURN_NONE; /* not on it */
    /* From here a refused argument fails the mesh's other ranks too. */
    unsigned dims = (1u << dtr_mesh_ndims(mesh->mesh)) - 1;
    Py_buffer view;
    dtr_dtype_t dtype;
    PyObject *kind = NULL;
    if (dtrpy_buffer(local, "local", false, &view, &dtype, &kind) < 0)
        return dtrpy_refuse(c, mesh->mesh, dims, NULL);
    Py_XDECREF(kind);
    int64_t lshape[DTR_MAX_TENSOR_DIMS], shape[DTR_MAX_TENSOR_DIMS];
    int lndim = view.ndim, ndim = 0;
    for (int d = 0; d < lndim && d < DTR_MAX_TENSOR_DIMS; d++) lshape[d] = (int64_t)view.shape[d];
    bool given = shape_obj != Py_None;
    dtr_spec_t spec;
    if ((given ? dtrpy_shape(shape_obj, "shape", shape, &ndim)
               : dtrpy_infer_shape(mesh->mesh, placements, "placements", lshape, lndim, shape,
                                   &ndim)) < 0 ||
        dtrpy_spec(&spec, mesh, placements, "placements", shape, ndim, dtype) < 0 ||
        dtrpy_check_local("local", lshape, lndim, &spec, c->rank, given) < 0) {
        PyBuffer_Release(&view);
        return dtrpy_refuse(c, mesh->mesh, dims, NULL);
    }
    uint64_t digest = 0;
    dtr_status_t st;
    DTRPY_CALL(c, st = dtr_digest(c->ctx, &spec, view.buf, (int64_t)view.len, &digest));
    PyBuffer_Release(&view);
    if (st != DTR_OK) return dtrpy_raise(st);
    return PyLong_FromUnsignedLongLong(digest);
}
