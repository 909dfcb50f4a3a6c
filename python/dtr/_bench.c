/*
 * The C side of the binding's benchmark (bench/python_bench.py): the same change run in a
 * loop straight on the C library, in this process, on the caller's arrays, so that the cost
 * per call of dtr.redistribute can be set beside the library's own. Not part of the API.
 */
#include "_core.h"

#include <time.h>

static double dtrpy_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* _c_loop(local, out, mesh, src, dst, shape, iters, barrier): the seconds of each call of
 * dtr_redistribute (planned once, as a C caller does), each after an MPI_Barrier of the
 * mesh's communicator when barrier is true. */
static PyObject *dtrpy_c_loop(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *local, *out, *mesh_obj, *src, *dst, *shape_obj;
    int iters, barrier;
    if (!PyArg_ParseTuple(args, "OOOOOOip:_c_loop", &local, &out, &mesh_obj, &src, &dst,
                          &shape_obj, &iters, &barrier))
        return NULL;
    dtrpy_mesh_t *mesh;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim;
    if (dtrpy_mesh_of(mesh_obj, "mesh", &mesh) < 0 || dtrpy_shape(shape_obj, "shape", shape, &ndim) < 0)
        return NULL;
    dtrpy_context_t *c = dtrpy_mesh_context(mesh);
    Py_buffer in, o;
    dtr_dtype_t dtype, odt;
    PyObject *k1 = NULL, *k2 = NULL;
    if (c == NULL || dtrpy_buffer(local, "local", false, &in, &dtype, &k1) < 0) return NULL;
    if (dtrpy_buffer(out, "out", true, &o, &odt, &k2) < 0) {
        PyBuffer_Release(&in);
        return NULL;
    }
    Py_XDECREF(k1);
    Py_XDECREF(k2);
    dtr_spec_t s, d;
    dtr_plan_t *plan = PyMem_Malloc(sizeof *plan);
    PyObject *times = PyList_New(0);
    dtr_status_t st = DTR_ERR_OUT_OF_MEMORY;
    if (plan != NULL && times != NULL && dtrpy_spec(&s, mesh, src, "src", shape, ndim, dtype) == 0 &&
        dtrpy_spec(&d, mesh, dst, "dst", shape, ndim, dtype) == 0) {
        st = dtr_plan_create(&s, &d, dtrpy_plan_options(), plan);
        MPI_Comm comm = c->mcomm;
        for (int i = 0; st == DTR_OK && i < iters; i++) {
            double t0, t1;
            Py_BEGIN_ALLOW_THREADS
            PyThread_acquire_lock(c->lock, WAIT_LOCK);
#ifdef DTR_PY_MPI
            if (barrier && comm != MPI_COMM_NULL) MPI_Barrier(comm); /* (none without MPI) */
#endif
            t0 = dtrpy_now();
            st = dtr_redistribute(c->ctx, plan, in.buf, (size_t)in.len, o.buf, (size_t)o.len);
            t1 = dtrpy_now();
            PyThread_release_lock(c->lock);
            Py_END_ALLOW_THREADS
            PyObject *x = PyFloat_FromDouble(t1 - t0);
            if (x == NULL || PyList_Append(times, x) < 0) st = DTR_ERR_OUT_OF_MEMORY;
            Py_XDECREF(x);
        }
        if (st != DTR_OK && !PyErr_Occurred()) dtrpy_raise(st);
    }
    PyMem_Free(plan);
    PyBuffer_Release(&in);
    PyBuffer_Release(&o);
    if (PyErr_Occurred()) Py_CLEAR(times);
    return times;
}

static PyMethodDef dtrpy_bench_methods[] = {
    {"_c_loop", dtrpy_c_loop, METH_VARARGS, "The benchmark's C loop (bench/python_bench.py)."},
    {NULL, NULL, 0, NULL},
};

int dtrpy_bench_module_init(PyObject *module) {
    return PyModule_AddFunctions(module, dtrpy_bench_methods);
}
