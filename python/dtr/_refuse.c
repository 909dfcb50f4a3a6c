/*
 * A rank's refused arguments shared with the other ranks of its call (dtr_refuse): the
 * exception this rank raises stays its own, and the call's other ranks fail at once instead
 * of waiting for it (docs/python.md, "One rank's bad argument").
 */
#include "_core.h"

#include <stdio.h>

PyObject *dtrpy_refuse(dtrpy_context_t *c, const dtr_mesh_t *mesh, unsigned dims,
                       const dtr_mesh_t *to) {
    if (c == NULL || mesh == NULL || !PyErr_Occurred()) return NULL;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *text = value != NULL ? PyObject_Str(value) : NULL;
    const char *msg = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
    if (msg == NULL) PyErr_Clear();
    char what[512];
    snprintf(what, sizeof what, "%s", msg != NULL ? msg : "an argument was refused");
    Py_XDECREF(text);
    DTRPY_CALL(c, (void)dtr_refuse(c->ctx, mesh, dims, to, DTR_ERR_INVALID_ARGUMENT, what));
    PyErr_Restore(type, value, tb);
    return NULL;
}

PyObject *dtrpy_refuse_parse(PyObject *args, PyObject *kw, Py_ssize_t mesh_pos, bool group) {
    dtrpy_as_argument_error();
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *mesh_obj = args != NULL && PyTuple_Check(args) && PyTuple_GET_SIZE(args) > mesh_pos
                             ? PyTuple_GET_ITEM(args, mesh_pos)
                         : kw != NULL ? PyDict_GetItemString(kw, "mesh") : NULL;
    PyObject *to_obj = kw != NULL ? PyDict_GetItemString(kw, "to_mesh") : NULL;
    dtrpy_mesh_t *mesh = NULL, *to = NULL;
    dtrpy_context_t *c = NULL;
    if (mesh_obj != NULL && dtrpy_mesh_of(mesh_obj, "mesh", &mesh) == 0 &&
        (to_obj == NULL || to_obj == Py_None || dtrpy_mesh_of(to_obj, "to_mesh", &to) == 0))
        c = dtrpy_mesh_context(mesh);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    if (c == NULL) return NULL;
    unsigned dims = group ? (1u << dtr_mesh_ndims(mesh->mesh)) - 1 : DTR_DIMS_MESH;
    return dtrpy_refuse(c, mesh->mesh, dims, group || to == NULL ? NULL : to->mesh);
}

