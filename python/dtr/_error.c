/*
 * dtr's exceptions: dtr.Error and its subclasses, raised from a status and its detail.
 */
#include "_core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

PyObject *dtrpy_error, *dtrpy_argument_error, *dtrpy_refused_error, *dtrpy_backend_error,
    *dtrpy_timeout_error, *dtrpy_file_error;

/* ---- errors ---------------------------------------------------------------------------- */

/* The exception of a status: its class's, from the library's table (core/status.h). */
static PyObject *dtrpy_error_class(dtr_status_t st) {
    const char *name = dtr_error_class_python(dtr_status_class(st));
    const struct {
        const char *name;
        PyObject *cls;
    } classes[] = {{"ArgumentError", dtrpy_argument_error}, {"RefusedError", dtrpy_refused_error},
                   {"BackendError", dtrpy_backend_error}, {"TimeoutError", dtrpy_timeout_error},
                   {"FileError", dtrpy_file_error}};
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (strcmp(name, classes[i].name) == 0) return classes[i].cls;
    return dtrpy_error;
}

static PyObject *dtrpy_raise_obj(PyObject *cls, const char *status, PyObject *text) {
    if (text == NULL) return NULL;
    PyObject *e = PyObject_CallOneArg(cls, text);
    Py_DECREF(text);
    if (e == NULL) return NULL;
    PyObject *s = PyUnicode_FromString(status);
    if (s == NULL || PyObject_SetAttrString(e, "status", s) < 0) {
        Py_XDECREF(s);
        Py_DECREF(e);
        return NULL;
    }
    Py_DECREF(s);
    PyErr_SetObject(cls, e);
    Py_DECREF(e);
    return NULL;
}

/* ---- a Python callback's failure, kept for the error the library returns ---------- */

_Thread_local char dtrpy_callback_why[256];
/* the callback raised dtr.TimeoutError (a store's key never set): the call raises it too */
static _Thread_local bool dtrpy_callback_timeout;

void dtrpy_keep_error(const char *call) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    dtrpy_callback_timeout = type != NULL && PyType_Check(type) &&
                             PyType_IsSubtype((PyTypeObject *)type,
                                              (PyTypeObject *)dtrpy_timeout_error);
    PyObject *text = value != NULL ? PyObject_Str(value) : NULL;
    const char *t = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
    snprintf(dtrpy_callback_why, sizeof dtrpy_callback_why, "%s raised %s: %.160s", call,
             type != NULL ? ((PyTypeObject *)type)->tp_name : "an error", t != NULL ? t : "");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
}

PyObject *dtrpy_raise(dtr_status_t st) {
    PyObject *text = PyUnicode_DecodeUTF8(dtr_last_error(), (Py_ssize_t)strlen(dtr_last_error()),
                                          "replace");
    PyObject *cls = dtrpy_error_class(st);
    if (text != NULL && dtrpy_callback_why[0] != '\0') { /* a Python callback's reason */
        Py_SETREF(text, PyUnicode_FromFormat("%U (%s)", text, dtrpy_callback_why));
        dtrpy_callback_why[0] = '\0';
        if (dtrpy_callback_timeout) cls = dtrpy_timeout_error;
        dtrpy_callback_timeout = false;
    }
    return dtrpy_raise_obj(cls, dtr_status_name(st), text);
}

/* (PyUnicode_FromFormat's conversions: %s %d %ld %lld %zd %R ...) */
PyObject *dtrpy_arg_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyObject *text = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    return dtrpy_raise_obj(dtrpy_argument_error, "DTR_ERR_INVALID_ARGUMENT", text);
}

PyObject *dtrpy_as_argument_error(void) {
    if (!PyErr_Occurred() || PyErr_ExceptionMatches(dtrpy_error) ||
        !(PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError) ||
          PyErr_ExceptionMatches(PyExc_OverflowError)))
        return NULL;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *text = value != NULL ? PyObject_Str(value) : NULL;
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return dtrpy_raise_obj(dtrpy_argument_error, "DTR_ERR_INVALID_ARGUMENT", text);
}

int dtrpy_error_module_init(PyObject *m) {
    dtrpy_error = PyErr_NewExceptionWithDoc(
        "dtr.Error", "A dtr call failed; .status is dtr's status name (DTR_ERR_...).", NULL,
        NULL);
    if (dtrpy_error == NULL) return -1;
    PyObject *arg_bases = Py_BuildValue("(OOO)", dtrpy_error, PyExc_ValueError, PyExc_TypeError);
    PyObject *timeout_bases = Py_BuildValue("(OO)", dtrpy_error, PyExc_TimeoutError);
    PyObject *file_bases = Py_BuildValue("(OO)", dtrpy_error, PyExc_OSError);
    if (arg_bases == NULL || timeout_bases == NULL || file_bases == NULL) return -1;
    dtrpy_argument_error = PyErr_NewExceptionWithDoc(
        "dtr.ArgumentError", "An argument is wrong (its name is in the message).", arg_bases,
        NULL);
    dtrpy_refused_error = PyErr_NewExceptionWithDoc(
        "dtr.RefusedError", "dtr refuses this change (docs/semantics.md says why).",
        dtrpy_error, NULL);
    dtrpy_backend_error = PyErr_NewExceptionWithDoc(
        "dtr.BackendError",
        "The communication failed, or the ranks disagreed on a collective call's arguments.",
        dtrpy_error, NULL);
    dtrpy_timeout_error = PyErr_NewExceptionWithDoc(
        "dtr.TimeoutError", "A collective missed its deadline (the context is then aborted).",
        timeout_bases, NULL);
    dtrpy_file_error = PyErr_NewExceptionWithDoc(
        "dtr.FileError", "A file could not be opened or read (a checkpoint's: the path and "
                         "the system's reason are in the message).", file_bases, NULL);
    Py_DECREF(arg_bases);
    Py_DECREF(timeout_bases);
    Py_DECREF(file_bases);
    if (dtrpy_argument_error == NULL || dtrpy_refused_error == NULL ||
        dtrpy_backend_error == NULL || dtrpy_timeout_error == NULL || dtrpy_file_error == NULL)
        return -1;
    /* Each class's own status for errors the package raises itself (dtr_status_name's
     * name; an instance raised from a dtr status carries that one). */
    const struct {
        PyObject *cls;
        const char *status;
    } defaults[] = {{dtrpy_error, "DTR_ERR_INTERNAL"},
                    {dtrpy_argument_error, "DTR_ERR_INVALID_ARGUMENT"},
                    {dtrpy_refused_error, "DTR_ERR_UNSUPPORTED"},
                    {dtrpy_backend_error, "DTR_ERR_BACKEND"},
                    {dtrpy_timeout_error, "DTR_ERR_TIMEOUT"},
                    {dtrpy_file_error, "DTR_ERR_IO"}};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        PyObject *s = PyUnicode_FromString(defaults[i].status);
        int rc = s == NULL ? -1 : PyObject_SetAttrString(defaults[i].cls, "status", s);
        Py_XDECREF(s);
        if (rc < 0) return -1;
    }
    if (PyModule_AddObjectRef(m, "Error", dtrpy_error) < 0 ||
        PyModule_AddObjectRef(m, "ArgumentError", dtrpy_argument_error) < 0 ||
        PyModule_AddObjectRef(m, "RefusedError", dtrpy_refused_error) < 0 ||
        PyModule_AddObjectRef(m, "BackendError", dtrpy_backend_error) < 0 ||
        PyModule_AddObjectRef(m, "TimeoutError", dtrpy_timeout_error) < 0 ||
        PyModule_AddObjectRef(m, "FileError", dtrpy_file_error) < 0)
        return -1;
    return 0;
}

