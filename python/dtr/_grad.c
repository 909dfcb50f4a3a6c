/*
 * Gradient reduction as PyTorch users meet it: the DDP hooks' reductions in place
 * (dtr/torch.py wraps them as communication hooks) and FSDP/HSDP's reduce-scatter of a list
 * of gradients with dtr's divide factors (grad/param_group.h).
 */
#include "_core.h"

#include <string.h>

/* Mesh dims as a mask: None (all of the mesh's) or a sequence of dims. */
static int dtrpy_dims(PyObject *obj, const char *what, const dtrpy_mesh_t *mesh, unsigned *mask) {
    int nd = dtr_mesh_ndims(mesh->mesh);
    if (obj == NULL || obj == Py_None) {
        *mask = (1u << nd) - 1;
        return 0;
    }
    int64_t dims[DTR_MAX_TENSOR_DIMS];
    int n = 0;
    if (dtrpy_shape(obj, what, dims, &n) < 0) return -1;
    unsigned m = 0;
    if (n == 0)
        return dtrpy_arg_error("%s: no mesh dim (a reduction over none would leave this rank "
                               "out of its group's call)", what), -1;
    for (int i = 0; i < n; i++) {
        if (dims[i] >= nd)
            return dtrpy_arg_error("%s: mesh dim %lld of a %d-dim mesh", what,
                                   (long long)dims[i], nd), -1;
        if (m & (1u << dims[i]))
            return dtrpy_arg_error("%s: mesh dim %lld named twice", what, (long long)dims[i]),
                   -1;
        m |= 1u << dims[i];
    }
    *mask = m; /* (only on success) */
    return 0;
}

static PyObject *dtrpy_grad_hook(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"buf", "mesh", "kind", "dims", NULL};
    PyObject *buf, *mesh_obj, *dims_obj = NULL;
    const char *kind = "allreduce";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|sO:grad_hook", names, &buf, &mesh_obj, &kind,
                                     &dims_obj))
        return dtrpy_refuse_parse(args, kw, 1, true);
    dtr_grad_hook_fn fn = strcmp(kind, "allreduce") == 0 ? dtr_hook_all_reduce
                          : strcmp(kind, "fp16") == 0    ? dtr_hook_fp16_compress
                          : strcmp(kind, "bf16") == 0    ? dtr_hook_bf16_compress
                                                         : NULL;
    dtrpy_mesh_t *mesh;
    if (dtrpy_mesh_of(mesh_obj, "mesh", &mesh) < 0) return NULL;
    dtrpy_context_t *c = dtrpy_mesh_context(mesh);
    if (c == NULL) return NULL;
    /* From here a refused argument fails the group's other ranks too (dims unknown: all). */
    unsigned dims = (1u << dtr_mesh_ndims(mesh->mesh)) - 1;
    if (dtrpy_dims(dims_obj, "dims", mesh, &dims) < 0) return dtrpy_refuse(c, mesh->mesh, dims, NULL);
    if (fn == NULL) {
        dtrpy_arg_error("kind: '%s' is not allreduce, fp16 or bf16", kind);
        return dtrpy_refuse(c, mesh->mesh, dims, NULL);
    }
    Py_buffer view;
    dtr_dtype_t dtype;
    PyObject *k = NULL;
    if (dtrpy_buffer(buf, "buf", true, &view, &dtype, &k) < 0)
        return dtrpy_refuse(c, mesh->mesh, dims, NULL);
    Py_XDECREF(k);
    int64_t count = (int64_t)(view.len / dtr_dtype_info(dtype)->size);
    dtr_status_t st;
    DTRPY_CALL(c, st = fn(NULL, c->ctx, mesh->mesh, dims, view.buf, count, dtype));
    PyBuffer_Release(&view);
    if (st != DTR_OK) return dtrpy_raise(st);
    return Py_NewRef(buf);
}

/* The arguments of reduce_scatter_grads that describe the group (not the buffers). */
typedef struct {
    PyObject *shard_dims, *replicate_dims, *reduce_dtype, *factor;
    int shard_dim, force_sum;
} dtrpy_group_args_t;

static int dtrpy_group_desc(const dtrpy_group_args_t *a, const dtrpy_mesh_t *mesh,
                            dtr_param_group_desc_t *desc) {
    memset(desc, 0, sizeof *desc);
    desc->mesh = mesh->mesh;
    if (dtrpy_dims(a->shard_dims, "shard_dims", mesh, &desc->shard_dims) < 0) return -1;
    if (a->replicate_dims == NULL || a->replicate_dims == Py_None) desc->replicate_dims = 0;
    else if (dtrpy_dims(a->replicate_dims, "replicate_dims", mesh, &desc->replicate_dims) < 0)
        return -1;
    desc->factor = 0;
    if (a->factor != NULL && a->factor != Py_None) {
        desc->factor = PyFloat_AsDouble(a->factor);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return dtrpy_arg_error("factor: expected a number"), -1;
        }
        /* (the library reads <= 0 as unset, which would divide by the group size) */
        if (!(desc->factor > 0) || desc->factor == Py_HUGE_VAL)
            return dtrpy_arg_error("factor: %R, must be a finite number > 0 (None: divide by "
                                   "the group size)", a->factor), -1;
    }
    desc->force_sum = a->force_sum;
    return 0;
}

/* Each parameter's shard as a new array (of its gradient's kind) and its buffer. */
static int dtrpy_group_outs(dtr_param_group_t *g, int n, PyObject **kinds,
                            const dtr_param_desc_t *params, PyObject *results, Py_buffer *views) {
    for (int i = 0; i < n; i++) {
        int64_t numel, shape[DTR_MAX_TENSOR_DIMS];
        dtr_status_t st = dtr_param_group_param(g, i, &numel, shape, NULL);
        if (st != DTR_OK) return dtrpy_raise(st), -1;
        PyObject *r = NULL;
        if (dtrpy_alloc(shape, params[i].ndim, params[i].dtype, kinds[i], &r, &views[i]) < 0)
            return -1;
        PyList_SET_ITEM(results, i, r);
    }
    return 0;
}

static PyObject *dtrpy_reduce_scatter_grads(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"grads", "mesh", "shard_dims", "replicate_dims", "shard_dim",
                            "reduce_dtype", "factor", "force_sum", NULL};
    PyObject *grads, *mesh_obj;
    dtrpy_group_args_t a = {NULL, NULL, NULL, NULL, 0, 0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$OOiOOp:reduce_scatter_grads", names, &grads,
                                     &mesh_obj, &a.shard_dims, &a.replicate_dims, &a.shard_dim,
                                     &a.reduce_dtype, &a.factor, &a.force_sum))
        return dtrpy_refuse_parse(args, kw, 1, true);
    dtrpy_mesh_t *mesh;
    dtr_param_group_desc_t desc;
    if (dtrpy_mesh_of(mesh_obj, "mesh", &mesh) < 0) return NULL;
    dtrpy_context_t *c = dtrpy_mesh_context(mesh);
    if (c == NULL) return NULL;
    /* From here a refused argument fails the group's other ranks too (dims unknown: all). */
    unsigned all = (1u << dtr_mesh_ndims(mesh->mesh)) - 1;
    if (dtrpy_group_desc(&a, mesh, &desc) < 0) return dtrpy_refuse(c, mesh->mesh, all, NULL);
    unsigned dims = desc.shard_dims | desc.replicate_dims;
    PyObject *seq = PySequence_Tuple(grads);
    if (seq == NULL) {
        PyErr_Clear();
        dtrpy_arg_error("grads: expected a list of arrays, got %s", Py_TYPE(grads)->tp_name);
        return dtrpy_refuse(c, mesh->mesh, dims, NULL);
    }
    int n = (int)PySequence_Fast_GET_SIZE(seq);
    dtr_param_desc_t *params = PyMem_Calloc((size_t)n + 1, sizeof *params);
    Py_buffer *in = PyMem_Calloc((size_t)n + 1, sizeof *in), *outv = PyMem_Calloc((size_t)n + 1, sizeof *outv);
    PyObject **kinds = PyMem_Calloc((size_t)n + 1, sizeof *kinds);
    const void **gp = PyMem_Calloc((size_t)n + 1, sizeof *gp);
    void **op = PyMem_Calloc((size_t)n + 1, sizeof *op);
    size_t *gb = PyMem_Calloc((size_t)n + 1, sizeof *gb), *ob = PyMem_Calloc((size_t)n + 1, sizeof *ob);
    PyObject *results = PyList_New(n);
    int got = 0, outs = 0, bad = !params || !in || !outv || !kinds || !gp || !op || !gb || !ob || !results;
    if (bad && !PyErr_Occurred()) PyErr_NoMemory();
    for (int i = 0; !bad && i < n; i++, got++) {
        char what[40];
        snprintf(what, sizeof what, "grads[%d]", i);
        bad = dtrpy_buffer(PySequence_Fast_GET_ITEM(seq, i), what, false, &in[i], &params[i].dtype,
                           &kinds[i]) < 0;
        if (bad) break;
        params[i].ndim = in[i].ndim;
        for (int d = 0; d < in[i].ndim && d < DTR_MAX_TENSOR_DIMS; d++) params[i].shape[d] = in[i].shape[d];
        params[i].shard_dim = a.shard_dim;
        gp[i] = in[i].buf;
        gb[i] = (size_t)in[i].len;
    }
    desc.nparams = n;
    desc.params = params;
    desc.reduce_dtype = n > 0 ? params[0].dtype : DTR_F32;
    if (!bad && a.reduce_dtype != NULL && a.reduce_dtype != Py_None)
        bad = dtrpy_dtype(a.reduce_dtype, "reduce_dtype", &desc.reduce_dtype) < 0;
    dtr_param_group_t *g = NULL;
    dtr_status_t st = DTR_OK;
    if (!bad && (st = dtr_param_group_create(c->ctx, &desc, &g)) != DTR_OK) bad = (dtrpy_raise(st), 1);
    if (!bad) {
        bad = dtrpy_group_outs(g, n, kinds, params, results, outv) < 0;
        outs = bad ? 0 : n;
    }
    for (int i = 0; !bad && i < n; i++) op[i] = outv[i].buf, ob[i] = (size_t)outv[i].len;
    bool called = !bad;
    if (!bad) {
        DTRPY_CALL(c, st = dtr_param_group_reduce(g, gp, gb, true, op, ob));
        if (st != DTR_OK) bad = (dtrpy_raise(st), 1);
    }
    if (!called) dtrpy_refuse(c, mesh->mesh, dims, NULL);
    dtr_param_group_destroy(g);
    for (int i = 0; i < got; i++) PyBuffer_Release(&in[i]);
    for (int i = 0; i < outs; i++) PyBuffer_Release(&outv[i]);
    for (int i = 0; kinds != NULL && i < n; i++) Py_XDECREF(kinds[i]);
    PyMem_Free(params), PyMem_Free(in), PyMem_Free(outv), PyMem_Free(kinds);
    PyMem_Free(gp), PyMem_Free(op), PyMem_Free(gb), PyMem_Free(ob);
    Py_DECREF(seq);
    if (bad) Py_CLEAR(results);
    return results;
}

static PyMethodDef dtrpy_grad_methods[] = {
    {"grad_hook", (PyCFunction)(void (*)(void))dtrpy_grad_hook, METH_VARARGS | METH_KEYWORDS,
     "grad_hook(buf, mesh, kind='allreduce', dims=None)\n--\n\n"
     "Reduces buf in place to its mean over the mesh dims `dims` (default all), as PyTorch's\n"
     "DDP hooks do: 'allreduce' divides then sums; 'fp16' / 'bf16' do it in that precision\n"
     "and cast back. Returns buf. Collective over the group."},
    {"reduce_scatter_grads", (PyCFunction)(void (*)(void))dtrpy_reduce_scatter_grads,
     METH_VARARGS | METH_KEYWORDS,
     "reduce_scatter_grads(grads, mesh, *, shard_dims=None, replicate_dims=None, shard_dim=0,\n"
     "                     reduce_dtype=None, factor=None, force_sum=False)\n--\n\n"
     "FSDP's (HSDP's, with replicate_dims) reduction of full gradients: each rank gets its\n"
     "shard (torch.chunk of shard_dim over the shard group) of the mean, with FSDP2's divide\n"
     "factors. One fused reduce-scatter for the list. Returns the list of shards."},
    {NULL, NULL, 0, NULL},
};

int dtrpy_grad_module_init(PyObject *module) {
    return PyModule_AddFunctions(module, dtrpy_grad_methods);
}
