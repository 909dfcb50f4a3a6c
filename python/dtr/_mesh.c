/*
 * One dtr context per communicator (made at the first collective call on it), and dtr.Mesh.
 */
#include "_core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static PyObject *dtrpy_contexts; /* comm.py2f() (mpi), or the backend's name -> context */

static dtr_status_t dtrpy_context_create_mpi(MPI_Comm comm, dtr_context_t **out) {
#ifdef DTR_PY_MPI
    return dtr_context_create_mpi(comm, out);
#else
    (void)comm, (void)out;
    return DTR_ERR_UNSUPPORTED; /* (unreachable: backend 'mpi' is refused without MPI) */
#endif
}

/* ---- contexts -------------------------------------------------------------------------- */

static void dtrpy_context_close(dtrpy_context_t *c) {
    int finalized = 0;
    /* a request still in flight (held at exit) completes first: its wait needs the context */
    if (c->inflight != NULL && c->ctx != NULL) c->complete(c->inflight);
#ifdef DTR_PY_MPI
    if (c->mcomm != MPI_COMM_NULL) MPI_Finalized(&finalized);
#endif
    if (c->ctx != NULL && !finalized) DTRPY_CALL(c, dtr_context_destroy(c->ctx));
    c->ctx = NULL; /* (after MPI_Finalize nothing can be freed: left to the exit) */
}

static void dtrpy_context_dealloc(dtrpy_context_t *c) {
    dtrpy_context_close(c);
    if (c->lock != NULL) PyThread_free_lock(c->lock);
    Py_XDECREF(c->comm);
    Py_XDECREF(c->store); /* (after the context that called it is gone) */
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyTypeObject dtrpy_context_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dtr._Context",
    .tp_basicsize = sizeof(dtrpy_context_t),
    .tp_dealloc = (destructor)dtrpy_context_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "dtr's context over one communicator (internal).",
};

/* mpi4py and dtr must run on one MPI library: their handles are not interchangeable. */
static int dtrpy_check_mpi(PyObject *mpi) {
#ifndef DTR_PY_MPI
    (void)mpi;
    return 0; /* (unreachable: backend 'mpi' is refused without MPI) */
#else
    char ours[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ours, &len);
    PyObject *theirs = PyObject_CallMethod(mpi, "Get_library_version", NULL);
    if (theirs == NULL) return -1;
    const char *t = PyUnicode_AsUTF8(theirs);
    int same = t != NULL && strncmp(t, ours, 24) == 0;
    if (!same && t != NULL) {
        char a[64], b[64];
        snprintf(a, sizeof a, "%.40s", t);
        snprintf(b, sizeof b, "%.40s", ours);
        for (char *p = a; *p; p++) if (*p == '\n' || *p == ',') *p = '\0';
        for (char *p = b; *p; p++) if (*p == '\n' || *p == ',') *p = '\0';
        PyErr_Format(dtrpy_error,
                     "mpi4py runs on '%s' but dtr was built for '%s': build both for one MPI "
                     "(pip install --no-binary mpi4py mpi4py; DTR_MPI=mpich for dtr's MPICH build)",
                     a, b);
    }
    Py_DECREF(theirs);
    return same ? 0 : -1;
#endif
}

/* An integer environment variable in [lo, hi] into *out; -1 with ArgumentError naming it. */
static int dtrpy_env_int(const char *name, const char *backend, long lo, long hi, int *out) {
    const char *v = getenv(name);
    char *end = NULL;
    long x = v != NULL ? strtol(v, &end, 10) : 0;
    if (v == NULL || *v == '\0' || *end != '\0' || x < lo || x > hi) {
        dtrpy_arg_error("backend '%s': %s is %s%.40s%s (a launcher sets it: "
                        "tools/dtr_launch.sh, torchrun)", backend, name, v ? "'" : "not set",
                        v ? v : "", v ? "', not a rank count or rank" : "");
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* The context kept under key, or a new one kept there: over the mpi4py communicator comm
 * (collective over it), or, comm None, over the job on the backend `name` (collective over
 * the job's ranks, WORLD_SIZE of them); on `device`'s memory space. New reference; steals
 * key. */
static dtrpy_context_t *dtrpy_context_kept(PyObject *key, PyObject *comm, const char *name,
                                           const char *device) {
    if (strcmp(device, "cpu") != 0) /* (a context per device: its memory space is its own) */
        key = Py_BuildValue("(Ns)", key, device);
    if (key == NULL) return NULL;
    PyObject *found = PyDict_GetItemWithError(dtrpy_contexts, key);
    if (found != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        Py_XINCREF(found);
        return (dtrpy_context_t *)found;
    }
    int size = 0;
    MPI_Comm mc = MPI_COMM_NULL;
    PyObject *found_job = NULL; /* gloo: the job's store (dtr/_store.py), or None */
    dtrpy_job_t job = {0};
    void *engine = NULL; /* torch: the engine's state */
    bool nccl = strcmp(name, "nccl") == 0; /* (job() never gives it None) */
    unsigned char id[256];                 /* nccl: the job's unique id */
    size_t id_len = 0;
    if (comm != Py_None) {
#ifdef DTR_PY_MPI
        PyObject *f = PyTuple_Check(key) ? PyTuple_GET_ITEM(key, 0) : key; /* (py2f's) */
        mc = MPI_Comm_f2c((MPI_Fint)PyLong_AsLong(f));
        MPI_Comm_size(mc, &size);
#endif
    } else if (strcmp(name, "torch") == 0) {
        PyObject *f = dtrpy_helper("torch_engine");
        PyObject *e = f == NULL ? NULL : PyObject_CallNoArgs(f);
        int rc = e == NULL ? -1 : dtrpy_engine_of(e, device, &engine, &size);
        Py_XDECREF(e);
        if (rc < 0) {
            Py_DECREF(key);
            return NULL;
        }
    } else if (strcmp(name, "gloo") == 0 || strcmp(name, "nccl") == 0) {
        PyObject *f = dtrpy_helper("job_store");
        found_job = f == NULL ? NULL : PyObject_CallFunction(f, "s", name);
        if (found_job == NULL || (found_job != Py_None && dtrpy_job_of(found_job, name, &job) < 0) ||
            (nccl && dtrpy_nccl_id(&job, id, sizeof id, &id_len) < 0) ||
            (found_job == Py_None && dtrpy_env_int("WORLD_SIZE", name, 1, INT32_MAX, &size) < 0)) {
            Py_XDECREF(found_job);
            Py_DECREF(key);
            return NULL;
        }
        if (found_job != Py_None) size = job.size;
    } else if (dtrpy_env_int("WORLD_SIZE", name, 1, INT32_MAX, &size) < 0) {
        Py_DECREF(key);
        return NULL;
    }
    dtrpy_context_t *c = PyObject_New(dtrpy_context_t, &dtrpy_context_type);
    if (c == NULL) {
        if (engine != NULL) dtrpy_engine_create(engine, NULL); /* (frees it) */
        Py_XDECREF(found_job);
        Py_DECREF(key);
        return NULL;
    }
    c->ctx = NULL;
    c->lock = PyThread_allocate_lock();
    c->comm = Py_NewRef(comm);
    c->mcomm = mc;
    c->size = size;
    c->store = job.store != NULL ? Py_NewRef(job.store) : NULL;
    c->inflight = NULL;
    c->complete = NULL;
    c->space = NULL;
    c->space_state = NULL;
    c->nccl = false;
    dtr_status_t st = DTR_ERR_OUT_OF_MEMORY;
    if (c->lock != NULL) {
        Py_BEGIN_ALLOW_THREADS
        st = comm != Py_None    ? dtrpy_context_create_mpi(mc, &c->ctx)
             : engine != NULL   ? dtrpy_engine_create(engine, &c->ctx)
             : nccl             ? dtrpy_nccl_create(&job, atoi(device + 5), id, id_len, &c->ctx)
             : c->store != NULL ? dtrpy_job_create(&job, &c->ctx)
                                : dtr_context_create_named(name, &c->ctx);
        if (st == DTR_OK) st = dtrpy_space_attach(c, device);
        Py_END_ALLOW_THREADS
    } else if (engine != NULL) {
        dtrpy_engine_create(engine, NULL); /* (frees it) */
    }
    Py_XDECREF(found_job);
    c->rank = dtr_context_rank(c->ctx);
    if (st != DTR_OK || PyDict_SetItem(dtrpy_contexts, key, (PyObject *)c) < 0) {
        if (st != DTR_OK) dtrpy_raise(st);
        Py_DECREF(key);
        Py_DECREF(c);
        return NULL;
    }
    Py_DECREF(key);
    return c;
}

/* The context over comm on device: the one already made, or a new one (collective over
 * comm). */
static dtrpy_context_t *dtrpy_context_for(PyObject *comm, const char *device) {
    PyObject *key = PyObject_CallMethod(comm, "py2f", NULL);
    return key == NULL ? NULL : dtrpy_context_kept(key, comm, "mpi", device);
}

/* The context over the job on a backend without MPI, on device (collective over the job's
 * ranks the first time). New reference. */
static dtrpy_context_t *dtrpy_context_named(const char *name, const char *device) {
    PyObject *key = PyUnicode_FromString(name);
    return key == NULL ? NULL : dtrpy_context_kept(key, Py_None, name, device);
}

PyObject *dtrpy_shutdown(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dtrpy_contexts, &pos, &key, &value))
        dtrpy_context_close((dtrpy_context_t *)value);
    PyDict_Clear(dtrpy_contexts);
    Py_RETURN_NONE;
}

/* ---- dtr.Mesh ------------------------------------------------------------------------- */

static void dtrpy_mesh_dealloc(dtrpy_mesh_t *m) {
    if (m->weak != NULL) PyObject_ClearWeakRefs((PyObject *)m);
    dtr_mesh_destroy(m->mesh);
    Py_XDECREF(m->context);
    Py_XDECREF(m->comm);
    Py_XDECREF(m->dim_names);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

/* ranks: None (0..n-1) or a sequence of n ints. */
static int dtrpy_ranks(PyObject *obj, int64_t n, int **out) {
    *out = NULL;
    if (obj == Py_None) return 0;
    PyObject *seq = PySequence_Tuple(obj);
    if (seq == NULL) {
        PyErr_Clear();
        dtrpy_arg_error("ranks: expected a sequence of ints, got %s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len != n) {
        Py_DECREF(seq);
        dtrpy_arg_error("ranks: %zd ranks for a mesh of %lld", len, (long long)n);
        return -1;
    }
    int *r = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
    if (r == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        char what[40];
        int64_t v;
        snprintf(what, sizeof what, "ranks[%zd]", i);
        if (dtrpy_int(PySequence_Fast_GET_ITEM(seq, i), what, 0, INT32_MAX, &v) < 0) {
            PyMem_Free(r);
            Py_DECREF(seq);
            return -1;
        }
        r[i] = (int)v;
    }
    Py_DECREF(seq);
    *out = r;
    return 0;
}

/* dim_names=: a sequence of ndims distinct str, kept as a tuple in m->dim_names. */
static int dtrpy_dim_names(dtrpy_mesh_t *m, PyObject *obj, int ndims) {
    PyObject *t = PyUnicode_Check(obj) ? NULL : PySequence_Tuple(obj);
    if (t == NULL) {
        PyErr_Clear();
        dtrpy_arg_error("dim_names: expected a sequence of str, got %s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t len = PyTuple_GET_SIZE(t);
    for (Py_ssize_t i = 0; i < len && len == ndims; i++) {
        PyObject *a = PyTuple_GET_ITEM(t, i);
        if (!PyUnicode_Check(a)) {
            dtrpy_arg_error("dim_names[%zd]: expected a str, got %s", i, Py_TYPE(a)->tp_name);
            Py_DECREF(t);
            return -1;
        }
        for (Py_ssize_t j = 0; j < i; j++)
            if (PyUnicode_Compare(a, PyTuple_GET_ITEM(t, j)) == 0) {
                dtrpy_arg_error("dim_names: '%U' names two dims", a);
                Py_DECREF(t);
                return -1;
            }
    }
    if (len != ndims) {
        dtrpy_arg_error("dim_names: %zd names for a mesh of %d dims", len, ndims);
        Py_DECREF(t);
        return -1;
    }
    Py_XSETREF(m->dim_names, t);
    return 0;
}

#if !defined(DTR_PY_MPI) && !defined(DTR_PY_WHY_NO_MPI)
#define DTR_PY_WHY_NO_MPI "no MPI found" /* (setup.py defines the reason) */
#endif

#ifndef DTR_PY_MPI
/* backend=None where dtr was built without MPI: "gloo" where libdtr_gloo.so is there, else
 * "torch"; "mpi" asked for: BackendError saying why there is none. */
static int dtrpy_mesh_no_mpi(dtrpy_mesh_t *m, PyObject *backend) {
    dtr_backend_info_t info;
    if (backend == Py_None) {
        int gloo = dtr_backend_find("gloo", &info) == DTR_OK;
        snprintf(m->backend, sizeof m->backend, "%s", gloo ? "gloo" : "torch");
        return 0;
    }
    PyErr_SetString(dtrpy_backend_error,
                    "backend 'mpi': this dtr was built without MPI (when pip built it: "
                    DTR_PY_WHY_NO_MPI "); under torchrun use backend='gloo' or 'torch'");
    return -1;
}
#endif

/* device= of backend 'nccl': None is "cuda" (an interned text, borrowed as *device is). */
static int dtrpy_nccl_device(PyObject **device) {
    static PyObject *cuda;
    if (*device != Py_None) return 0;
    if (cuda == NULL && (cuda = PyUnicode_InternFromString("cuda")) == NULL) return -1;
    *device = cuda;
    return 0;
}

/* backend=: None or "mpi" (over comm, mpi4py's), or a backend without MPI over the job a
 * launcher started, on host memory ("gloo"). Built without MPI, None is another backend
 * (dtrpy_mesh_no_mpi). */
static int dtrpy_mesh_backend(dtrpy_mesh_t *m, PyObject *backend, PyObject *comm) {
    snprintf(m->backend, sizeof m->backend, "mpi");
#ifndef DTR_PY_MPI
    if (backend == Py_None || (PyUnicode_Check(backend) &&
                               PyUnicode_CompareWithASCIIString(backend, "mpi") == 0))
        return dtrpy_mesh_no_mpi(m, backend);
#endif
    if (backend == Py_None) return 0;
    Py_ssize_t len = 0;
    const char *name = PyUnicode_Check(backend) ? PyUnicode_AsUTF8AndSize(backend, &len) : NULL;
    if (name == NULL || (size_t)len != strlen(name)) {
        PyErr_Clear();
        dtrpy_arg_error("backend: expected a name such as 'mpi' or 'gloo', got %s",
                        name != NULL ? "text holding a NUL" : Py_TYPE(backend)->tp_name);
        return -1;
    }
    if (strcmp(name, "mpi") == 0) return 0;
    if (strcmp(name, "torch") == 0) { /* (this package's own: dtr/_engine.py) */
        if (comm != Py_None) {
            dtrpy_arg_error("comm: an mpi4py communicator goes with backend 'mpi'; backend "
                            "'torch' runs on torch.distributed's process groups");
            return -1;
        }
        snprintf(m->backend, sizeof m->backend, "torch");
        return 0;
    }
    if (strcmp(name, "nccl") == 0 && dtrpy_nccl_load() < 0) return -1;
    dtr_backend_info_t info;
    if (dtr_backend_find(name, &info) != DTR_OK) {
#ifdef DTR_PY_WHY_NO_GLOO
        if (strcmp(name, "gloo") == 0)
            return dtrpy_arg_error("backend 'gloo': this dtr was built without Gloo (when pip "
                                   "built it: %s)", DTR_PY_WHY_NO_GLOO), -1;
#endif
        dtrpy_arg_error("backend: %s", dtr_last_error());
        return -1;
    }
    if (strcmp(info.memory, "host") != 0 && strcmp(name, "nccl") != 0) {
        dtrpy_arg_error("backend: '%s' moves %s buffers; this package moves host arrays "
                        "(mpi or gloo) and CUDA ones (nccl)", name, info.memory);
        return -1;
    }
    if (comm != Py_None) {
        dtrpy_arg_error("comm: an mpi4py communicator goes with backend 'mpi'; backend '%s' "
                        "runs over the job its launcher started (RANK, WORLD_SIZE)", name);
        return -1;
    }
    snprintf(m->backend, sizeof m->backend, "%s", name);
    return 0;
}

static int dtrpy_mesh_init(dtrpy_mesh_t *m, PyObject *args, PyObject *kw) {
    static char *names[] = {"shape", "ranks", "comm", "backend", "dim_names", "device", NULL};
    PyObject *shape_obj, *ranks_obj = Py_None, *comm = Py_None, *backend = Py_None;
    PyObject *dim_names = Py_None, *device = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO$OO:Mesh", names, &shape_obj, &ranks_obj,
                                     &comm, &backend, &dim_names, &device)) {
        dtrpy_as_argument_error();
        return -1;
    }
    if (m->mesh != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Mesh: already initialised");
        return -1;
    }
    bool nccl = false;
    if (dtrpy_mesh_backend(m, backend, comm) < 0 ||
        ((nccl = strcmp(m->backend, "nccl") == 0) && dtrpy_nccl_device(&device) < 0) ||
        dtrpy_device_parse(device, m->device, sizeof m->device) < 0)
        return -1;
    if (nccl && strncmp(m->device, "cuda:", 5) != 0)
        return dtrpy_arg_error("device: '%s', but backend 'nccl' moves CUDA buffers (give "
                               "device='cuda', or leave it out)", m->device), -1;
    int64_t sizes[DTR_MAX_TENSOR_DIMS];
    int ndims = 0;
    if (dtrpy_shape(shape_obj, "shape", sizes, &ndims) < 0) return -1;
    int64_t n = 1;
    for (int i = 0; i < ndims; i++) n = sizes[i] > 0 && n <= INT32_MAX ? n * sizes[i] : 0;
    if (dim_names != Py_None && dtrpy_dim_names(m, dim_names, ndims) < 0) return -1;
    int *ranks = NULL;
    if (n > 0 && dtrpy_ranks(ranks_obj, n, &ranks) < 0) return -1;
    dtr_status_t st = dtr_mesh_create(ndims, sizes, ranks, n, &m->mesh);
    PyMem_Free(ranks);
    if (st != DTR_OK) {
        dtrpy_raise(st);
        return -1;
    }
    if (comm != Py_None) {
        /* an intracommunicator (a Group or an Intercomm has py2f too, and every collective
         * would then fail) */
        PyObject *mpi = PyImport_ImportModule("mpi4py.MPI");
        PyObject *intra = mpi == NULL ? NULL : PyObject_GetAttrString(mpi, "Intracomm");
        Py_XDECREF(mpi);
        int is = intra == NULL ? -1 : PyObject_IsInstance(comm, intra);
        Py_XDECREF(intra);
        if (is < 0) return -1;
        if (is == 0) {
            dtrpy_arg_error("comm: expected an mpi4py intracommunicator (MPI.Intracomm), got %s",
                            Py_TYPE(comm)->tp_name);
            return -1;
        }
        m->comm = Py_NewRef(comm);
    }
    /* NCCL's groups are split from the job's communicator by every rank of the job, in the
     * same order: here, as torch's DeviceMesh makes its groups */
    return nccl && dtrpy_mesh_context(m) == NULL ? -1 : 0;
}

/* The communicator's rank at position i of the mesh in row-major order. */
static int dtrpy_mesh_rank_of(const dtr_mesh_t *mesh, int64_t i) {
    int64_t coord[DTR_MAX_MESH_DIMS];
    for (int d = dtr_mesh_ndims(mesh) - 1; d >= 0; d--) {
        coord[d] = i % dtr_mesh_size(mesh, d);
        i /= dtr_mesh_size(mesh, d);
    }
    int r = -1;
    dtr_mesh_rank_at(mesh, coord, &r);
    return r;
}

int dtrpy_mesh_of(PyObject *obj, const char *what, dtrpy_mesh_t **out) {
    if (!PyObject_TypeCheck(obj, &dtrpy_mesh_type) || ((dtrpy_mesh_t *)obj)->mesh == NULL) {
        dtrpy_arg_error("%s: expected a dtr.Mesh, got %s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = (dtrpy_mesh_t *)obj;
    return 0;
}

/* The mesh's communicator: its own, or mpi4py's COMM_WORLD (importing mpi4py.MPI, which
 * initialises MPI). New reference. */
static PyObject *dtrpy_mesh_comm(dtrpy_mesh_t *m) {
    if (m->comm != NULL) return Py_NewRef(m->comm);
    if (strcmp(m->backend, "mpi") != 0) Py_RETURN_NONE;
    PyObject *mpi = PyImport_ImportModule("mpi4py.MPI");
    if (mpi == NULL) return NULL;
    PyObject *world = PyObject_GetAttrString(mpi, "COMM_WORLD");
    Py_DECREF(mpi);
    return world;
}

/* The mesh's context on an MPI communicator (mpi4py checked to run on dtr's MPI once). */
static dtrpy_context_t *dtrpy_mesh_context_mpi(dtrpy_mesh_t *m) {
    PyObject *comm = dtrpy_mesh_comm(m);
    if (comm == NULL) return NULL;
    static int checked = 0;
    if (!checked) {
        PyObject *mpi = PyImport_ImportModule("mpi4py.MPI");
        int bad = mpi == NULL || dtrpy_check_mpi(mpi) < 0;
        Py_XDECREF(mpi);
        if (bad) {
            Py_DECREF(comm);
            return NULL;
        }
        checked = 1;
    }
    dtrpy_context_t *c = dtrpy_context_for(comm, m->device);
    Py_DECREF(comm);
    return c;
}

dtrpy_context_t *dtrpy_mesh_context(dtrpy_mesh_t *m) {
    if (m->context != NULL && m->context->ctx != NULL) return m->context;
    Py_CLEAR(m->context); /* (closed by _shutdown: the mesh takes the job's new one) */
    bool mpi = strcmp(m->backend, "mpi") == 0;
    dtrpy_context_t *c = mpi ? dtrpy_mesh_context_mpi(m) : dtrpy_context_named(m->backend, m->device);
    if (c == NULL) return NULL;
    int64_t n = dtr_mesh_nranks(m->mesh);
    for (int64_t i = 0; i < n; i++) {
        int r = dtrpy_mesh_rank_of(m->mesh, i);
        if (r >= c->size) {
            Py_DECREF(c);
            dtrpy_arg_error("mesh: its rank %d is not in the %s of %d ranks (%s at least %d "
                            "%s, or give the mesh other ranks)", r,
                            mpi ? "communicator" : "job", c->size, mpi ? "run with" : "start",
                            r + 1, mpi ? "ranks" : "processes");
            return NULL;
        }
    }
    if (c->nccl) {
        dtr_status_t st;
        DTRPY_CALL(c, st = dtrpy_nccl_split(c, m->mesh));
        if (st != DTR_OK) {
            Py_DECREF(c);
            return (dtrpy_context_t *)dtrpy_raise(st);
        }
    }
    m->context = c;
    return c;
}

static PyObject *dtrpy_mesh_get_shape(dtrpy_mesh_t *m, void *closure) {
    (void)closure;
    if (m->mesh == NULL) return dtrpy_arg_error("Mesh: not initialised (Mesh.__init__ did not run)");
    int64_t s[DTR_MAX_MESH_DIMS];
    int n = dtr_mesh_ndims(m->mesh);
    for (int i = 0; i < n; i++) s[i] = dtr_mesh_size(m->mesh, i);
    return dtrpy_tuple(s, n);
}

static PyObject *dtrpy_mesh_get_ranks(dtrpy_mesh_t *m, void *closure) {
    (void)closure;
    if (m->mesh == NULL) return dtrpy_arg_error("Mesh: not initialised (Mesh.__init__ did not run)");
    int64_t n = dtr_mesh_nranks(m->mesh);
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    if (t == NULL) return NULL;
    for (int64_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, PyLong_FromLong(dtrpy_mesh_rank_of(m->mesh, i)));
    return t;
}

static PyObject *dtrpy_mesh_get_size(dtrpy_mesh_t *m, void *closure) {
    (void)closure;
    if (m->mesh == NULL) return dtrpy_arg_error("Mesh: not initialised (Mesh.__init__ did not run)");
    return PyLong_FromLongLong(dtr_mesh_nranks(m->mesh));
}

static PyObject *dtrpy_mesh_get_ndim(dtrpy_mesh_t *m, void *closure) {
    (void)closure;
    if (m->mesh == NULL) return dtrpy_arg_error("Mesh: not initialised (Mesh.__init__ did not run)");
    return PyLong_FromLong(dtr_mesh_ndims(m->mesh));
}

static PyObject *dtrpy_mesh_get_backend(dtrpy_mesh_t *m, void *closure) {
    (void)closure;
    if (m->mesh == NULL) return dtrpy_arg_error("Mesh: not initialised (Mesh.__init__ did not run)");
    return PyUnicode_FromString(m->backend);
}

static PyObject *dtrpy_mesh_get_device(dtrpy_mesh_t *m, void *closure) {
    (void)closure;
    if (m->mesh == NULL) return dtrpy_arg_error("Mesh: not initialised (Mesh.__init__ did not run)");
    return PyUnicode_FromString(m->device);
}

static PyObject *dtrpy_mesh_get_comm(dtrpy_mesh_t *m, void *closure) {
    (void)closure;
    if (m->mesh == NULL) return dtrpy_arg_error("Mesh: not initialised (Mesh.__init__ did not run)");
    return dtrpy_mesh_comm(m);
}

/* This process's rank in the mesh's communicator. */
static int dtrpy_mesh_my_rank(dtrpy_mesh_t *m, int *rank) {
    if (m->context != NULL) {
        *rank = m->context->rank;
        return 0;
    }
    if (strcmp(m->backend, "mpi") != 0) /* (what the backend will read: no collective here) */
        return dtrpy_env_int("RANK", m->backend, 0, INT32_MAX, rank);
    PyObject *comm = dtrpy_mesh_comm(m);
    if (comm == NULL) return -1;
    PyObject *r = PyObject_CallMethod(comm, "Get_rank", NULL);
    Py_DECREF(comm);
    if (r == NULL) return -1;
    *rank = (int)PyLong_AsLong(r);
    Py_DECREF(r);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *dtrpy_mesh_get_rank(dtrpy_mesh_t *m, void *closure) {
    (void)closure;
    if (m->mesh == NULL) return dtrpy_arg_error("Mesh: not initialised (Mesh.__init__ did not run)");
    int rank;
    if (dtrpy_mesh_my_rank(m, &rank) < 0) return NULL;
    return PyLong_FromLong(rank);
}

static PyObject *dtrpy_mesh_get_coordinate(dtrpy_mesh_t *m, void *closure) {
    (void)closure;
    if (m->mesh == NULL) return dtrpy_arg_error("Mesh: not initialised (Mesh.__init__ did not run)");
    int rank;
    if (dtrpy_mesh_my_rank(m, &rank) < 0) return NULL;
    int64_t coord[DTR_MAX_MESH_DIMS];
    if (dtr_mesh_coord(m->mesh, rank, coord) != DTR_OK) Py_RETURN_NONE;
    return dtrpy_tuple(coord, dtr_mesh_ndims(m->mesh));
}

static PyObject *dtrpy_mesh_get_dim_names(dtrpy_mesh_t *m, void *closure) {
    (void)closure;
    return m->dim_names != NULL ? Py_NewRef(m->dim_names) : Py_NewRef(Py_None);
}

static PyObject *dtrpy_mesh_repr(dtrpy_mesh_t *m) {
    if (m->mesh == NULL) return PyUnicode_FromString("dtr.Mesh(<uninitialised>)");
    PyObject *shape = dtrpy_mesh_get_shape(m, NULL), *ranks = dtrpy_mesh_get_ranks(m, NULL);
    char backend[DTR_BACKEND_NAME_MAX + 16] = "", device[DTRPY_DEVICE_MAX + 16] = "";
    if (strcmp(m->backend, "mpi") != 0) snprintf(backend, sizeof backend, ", backend='%s'", m->backend);
    if (strcmp(m->device, "cpu") != 0) snprintf(device, sizeof device, ", device='%s'", m->device);
    PyObject *r = !(shape && ranks) ? NULL
                                    : PyUnicode_FromFormat("dtr.Mesh(%R, ranks=%R%s%s)", shape,
                                                           ranks, backend, device);
    Py_XDECREF(shape);
    Py_XDECREF(ranks);
    return r;
}

/* Mesh.from_torch(device_mesh, backend=None): dtr/_interop.py's mesh_from_torch. */
static PyObject *dtrpy_mesh_from_torch(PyObject *cls, PyObject *args, PyObject *kw) {
    static char *names[] = {"device_mesh", "backend", NULL};
    PyObject *dm, *backend = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:from_torch", names, &dm, &backend)) {
        dtrpy_as_argument_error();
        return NULL;
    }
    PyObject *f = dtrpy_helper("mesh_from_torch");
    return f == NULL ? NULL : PyObject_CallFunctionObjArgs(f, cls, dm, backend, NULL);
}

static PyMethodDef dtrpy_mesh_methods[] = {
    {"from_torch", (PyCFunction)(void (*)(void))dtrpy_mesh_from_torch,
     METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "Mesh.from_torch(device_mesh, backend=None)\n\n"
     "The dtr.Mesh of a torch DeviceMesh: its shape, global ranks and dim names, on\n"
     "backend 'gloo' (default) over the job torch.distributed runs, through its store."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dtrpy_mesh_getset[] = {
    {"shape", (getter)dtrpy_mesh_get_shape, NULL, "The mesh's dims (a tuple).", NULL},
    {"ranks", (getter)dtrpy_mesh_get_ranks, NULL,
     "The communicator's rank at each position, in row-major mesh order.", NULL},
    {"size", (getter)dtrpy_mesh_get_size, NULL, "How many ranks the mesh holds.", NULL},
    {"ndim", (getter)dtrpy_mesh_get_ndim, NULL, "How many dims the mesh has.", NULL},
    {"dim_names", (getter)dtrpy_mesh_get_dim_names, NULL,
     "The dims' names (a tuple of str, as a torch DeviceMesh's), or None.", NULL},
    {"comm", (getter)dtrpy_mesh_get_comm, NULL,
     "The mpi4py communicator (None on a backend without MPI).", NULL},
    {"backend", (getter)dtrpy_mesh_get_backend, NULL,
     "The backend's name: 'mpi', 'gloo', 'torch' or 'nccl'.",
     NULL},
    {"device", (getter)dtrpy_mesh_get_device, NULL,
     "Where its arrays are: 'cpu', or a device's memory space ('cuda:0').", NULL},
    {"rank", (getter)dtrpy_mesh_get_rank, NULL, "This process's rank in the communicator.",
     NULL},
    {"coordinate", (getter)dtrpy_mesh_get_coordinate, NULL,
     "This process's coordinate in the mesh, or None where it is not in the mesh.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject dtrpy_mesh_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dtr.Mesh",
    .tp_basicsize = sizeof(dtrpy_mesh_t),
    .tp_dealloc = (destructor)dtrpy_mesh_dealloc,
    .tp_repr = (reprfunc)dtrpy_mesh_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Mesh(shape, ranks=None, comm=None, backend=None, *, dim_names=None, "
              "device='cpu')\n\n"
              "An N-D grid of the ranks of an mpi4py communicator (default COMM_WORLD): shape\n"
              "as (2, 4), 8 or '2x4'; ranks in row-major mesh order (default 0..n-1). The first\n"
              "collective call on a communicator sets dtr up on it (collective over it).\n"
              "backend='gloo': no MPI; the ranks are those of the job a launcher started\n"
              "(torchrun, tools/dtr_launch.sh), meeting through torch.distributed's store,\n"
              "torchrun's, DTR_GLOO_STORE's directory or a store of dtr's own at MASTER_ADDR:\n"
              "MASTER_PORT (docs/python.md, \"Under torchrun\"); comm None.\n"
              "backend='torch': the plans' collectives are torch.distributed's own.\n"
              "backend='nccl': dtr's own NCCL contexts on device 'cuda' (its default), over\n"
              "the same job and stores as 'gloo'; making the mesh is collective over every\n"
              "rank of the job (docs/python.md, \"On GPUs\").\n"
              "device='cuda' (or 'cuda:1'): its arrays are GPU memory (torch CUDA tensors,\n"
              "__cuda_array_interface__, __dlpack__; results on the same device), every local\n"
              "step a kernel on torch's current stream (docs/python.md, \"On GPUs\").",
    .tp_weaklistoffset = offsetof(dtrpy_mesh_t, weak),
    .tp_getset = dtrpy_mesh_getset,
    .tp_methods = dtrpy_mesh_methods,
    .tp_init = (initproc)dtrpy_mesh_init,
    .tp_new = PyType_GenericNew,
};

int dtrpy_mesh_module_init(PyObject *m) {
    dtrpy_contexts = PyDict_New();
    if (dtrpy_contexts == NULL || PyType_Ready(&dtrpy_context_type) < 0 ||
        PyType_Ready(&dtrpy_mesh_type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Mesh", (PyObject *)&dtrpy_mesh_type);
}
