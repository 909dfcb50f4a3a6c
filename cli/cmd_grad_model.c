/*
 * dtr grad --model: a model's synthetic gradients reduced three ways, side by side in one
 * run: per tensor (a dtr_reducer per parameter, today's path), as parameter groups (one
 * group per layer, pushed through the pipeline in backward order), and by a bare baseline
 * (one reduce-scatter of the same total bytes per microbatch, plus one all-reduce: the
 * collectives alone). Both real paths are verified against the exact means. With --device
 * cuda (or --backend nccl) every gradient, output and baseline buffer is on the GPU (the
 * fills and the checks copy through host memory, outside the timed region).
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/mpi/dtr_mpi.h"
#include "cli/cli.h"

typedef struct {
    const char *mode, *model;
    int mode_k; /* 0 ddp, 1 fsdp, 2 hsdp */
    dtr_dtype_t dtype;
    int64_t microbatches, iters, warmup;
    bool verify, json;
    dtr_cli_spec_args_t spec;
    dtr_cli_engine_t eng; /* --backend, --device */
} dtr__model_args_t;

/* GPT-2 small (124M) from its configuration: 12 layers, 768 wide, 50257 vocabulary, 1024
 * positions, MLP 4 x 768; the LM head is tied to wte. Groups: "root" (wte, wpe, ln_f) and
 * one per transformer block, as FSDP wraps it. */
static int dtr__gpt2_small(dtr_cli_param_t **out, int *n) {
    const int64_t E = 768, V = 50257, P = 1024, L = 12;
    dtr_cli_param_t *p = calloc(4 + 12 * L, sizeof *p);
    if (p == NULL) return -1;
    int k = 0;
#define DTR__PARAM(g, ...)                                                                  \
    do {                                                                                   \
        int64_t s_[] = {__VA_ARGS__};                                                      \
        p[k].desc.ndim = (int)(sizeof s_ / sizeof s_[0]);                                  \
        memcpy(p[k].desc.shape, s_, sizeof s_);                                            \
        p[k].desc.dtype = DTR_F32;                                                         \
        snprintf(p[k].group, sizeof p[k].group, "%s", g);                                  \
        k++;                                                                               \
    } while (0)
    DTR__PARAM("root", V, E);
    DTR__PARAM("root", P, E);
    for (int64_t l = 0; l < L; l++) {
        char g[16];
        snprintf(g, sizeof g, "h.%lld", (long long)l);
        DTR__PARAM(g, E);            /* ln_1.weight */
        DTR__PARAM(g, E);            /* ln_1.bias */
        DTR__PARAM(g, E, 3 * E);     /* attn.c_attn.weight */
        DTR__PARAM(g, 3 * E);        /* attn.c_attn.bias */
        DTR__PARAM(g, E, E);         /* attn.c_proj.weight */
        DTR__PARAM(g, E);            /* attn.c_proj.bias */
        DTR__PARAM(g, E);            /* ln_2.weight */
        DTR__PARAM(g, E);            /* ln_2.bias */
        DTR__PARAM(g, E, 4 * E);     /* mlp.c_fc.weight */
        DTR__PARAM(g, 4 * E);        /* mlp.c_fc.bias */
        DTR__PARAM(g, 4 * E, E);     /* mlp.c_proj.weight */
        DTR__PARAM(g, E);            /* mlp.c_proj.bias */
    }
    DTR__PARAM("root", E); /* ln_f.weight */
    DTR__PARAM("root", E); /* ln_f.bias */
#undef DTR__PARAM
    *out = p;
    *n = k;
    return 0;
}

static int dtr__model_args(int argc, char **argv, dtr__model_args_t *a) {
    static const struct option options[] = {
        DTR_CLI_SPEC_OPTIONS,
        {"mode", required_argument, NULL, 'M'},
        {"model", required_argument, NULL, 'L'},
        {"microbatches", required_argument, NULL, 'b'},
        {"iters", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'},
        {"verify", no_argument, NULL, 'v'},
        {"json", no_argument, NULL, 'j'},
        {"backend", required_argument, NULL, 'E'},
        {"device", required_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *mb = "1", *iters = "5", *warmup = "1", *backend = "mpi", *device = NULL;
    memset(a, 0, sizeof *a);
    optind = 1;
    opterr = 0;
    unsigned char seen[DTR_CLI_SEEN] = {0};
    for (;;) {
        int c = getopt_long(argc, argv, ":", options, NULL);
        if (c == -1) break;
        if (dtr_cli_once("grad", options, c, seen) != DTR_EXIT_OK) return DTR_EXIT_USAGE;
        switch (c) {
        case 'M': a->mode = optarg; break;
        case 'L': a->model = optarg; break;
        case 'b': mb = optarg; break;
        case 'i': iters = optarg; break;
        case 'w': warmup = optarg; break;
        case 'v': a->verify = true; break;
        case 'j': a->json = true; break;
        case 'E': backend = optarg; break;
        case 'V': device = optarg; break;
        case 's':
            return dtr_cli_usage_error("grad", "--shape: not with --model (the model gives "
                                               "the shapes)");
        default:
            if (c != 'm' && c != 'd' && c != 'r') return dtr_cli_option_error("grad", c, argv);
            dtr_cli_spec_option(c, optarg, &a->spec);
            break;
        }
    }
    if (optind < argc) return dtr_cli_option_error("grad", 0, argv);
    static const char *const modes[] = {"ddp", "fsdp", "hsdp"};
    if (a->mode == NULL) return dtr_cli_usage_error("grad", "--mode: missing (ddp, fsdp or hsdp)");
    while (a->mode_k < 3 && strcmp(a->mode, modes[a->mode_k]) != 0) a->mode_k++;
    if (a->mode_k == 3)
        return dtr_cli_usage_error("grad", "--mode: '%s' is not ddp, fsdp or hsdp", a->mode);
    if (a->spec.mesh == NULL) return dtr_cli_usage_error("grad", "--mesh: missing");
    int erc = dtr_cli_engine_args("grad", backend, device, &a->eng);
    if (erc != DTR_EXIT_OK) return erc;
    a->dtype = DTR_F32;
    if (a->spec.dtype != NULL &&
        (dtr_dtype_parse(a->spec.dtype, &a->dtype) != DTR_OK ||
         (a->dtype != DTR_F32 && a->dtype != DTR_BF16 && a->dtype != DTR_F16)))
        return dtr_cli_usage_error("grad", "--dtype: '%s', must be f32, bf16 or f16",
                                   a->spec.dtype);
    int rc;
    if ((rc = dtr_cli_parse_int("grad", "--microbatches", mb, 1, 1000, "a count 1..1000",
                                &a->microbatches)) != DTR_EXIT_OK ||
        (rc = dtr_cli_parse_int("grad", "--iters", iters, 0, 100000, "a count 0..100000",
                                &a->iters)) != DTR_EXIT_OK ||
        (rc = dtr_cli_parse_int("grad", "--warmup", warmup, 0, 100000, "a count 0..100000",
                                &a->warmup)) != DTR_EXIT_OK)
        return rc;
    return DTR_EXIT_OK;
}

/* Returns a failed status. */
#define DTR__TRY(expr)                                                                     \
    do {                                                                                   \
        dtr_status_t st_ = (expr);                                                         \
        if (st_ != DTR_OK) return st_;                                                     \
    } while (0)

/* Everything one rank holds for the three ways. */
typedef struct {
    const dtr__model_args_t *a;
    dtr_mesh_t *mesh;
    dtr_context_t *ctx;
    unsigned shard, rep;
    int64_t ranks, pos; /* the ranks reduced over; this rank's place on the mesh */
    int n, ngroups;
    dtr_cli_param_t *params;
    int *group_of;   /* parameter -> group, groups numbered by first appearance */
    int *order;      /* parameters grouped: group 0's, then group 1's, ... */
    int *first;      /* group g's parameters are order[first[g] .. first[g + 1]) */
    dtr_reducer_t **red;
    dtr_param_group_t **groups;
    void **grads, **outs;   /* the buffers the reductions see (the GPU's on --device cuda) */
    void **hgrads, **houts; /* their host copies: filled and checked there */
    size_t *grad_bytes, *out_bytes;
    /* the same, listed in `order`: group g's arrays start at first[g] */
    const void **ggrads;
    void **gouts;
    size_t *ggrad_bytes, *gout_bytes;
    char *grad_arena, *out_arena; /* host */
    void *dgrad_arena, *dout_arena; /* the GPU's copies (the host arenas on --device cpu) */
    int64_t gtotal, ototal;         /* the arenas' bytes */
    int64_t numel, base_count; /* all elements; the baseline's elements per member */
    void *base_recv, *base_out, *hbase_recv, *hbase_out;
    dtr_grad_factors_t f;
} dtr__model_t;

static double dtr__mvalue(const dtr__model_t *s, int i, int64_t p, int64_t m, int64_t k) {
    int64_t j = (k % 16 * 7 + p % 16 * 13 + m % 16 * 5 + i % 16 * 3) % 16 - 8;
    return (double)j / (double)s->a->microbatches;
}

/* Groups by name in order of first appearance; the parameters listed group by group. */
static dtr_status_t dtr__model_groups(dtr__model_t *s) {
    s->group_of = malloc((size_t)s->n * sizeof *s->group_of);
    s->order = malloc((size_t)s->n * sizeof *s->order);
    s->first = malloc((size_t)(s->n + 1) * sizeof *s->first);
    if (s->group_of == NULL || s->order == NULL || s->first == NULL) return DTR_ERR_OUT_OF_MEMORY;
    s->ngroups = 0;
    for (int i = 0; i < s->n; i++) {
        int g = 0;
        while (g < i && strcmp(s->params[g].group, s->params[i].group) != 0) g++;
        s->group_of[i] = g < i ? s->group_of[g] : s->ngroups++;
    }
    int at = 0;
    for (int g = 0; g < s->ngroups; g++) {
        s->first[g] = at;
        for (int i = 0; i < s->n; i++)
            if (s->group_of[i] == g) s->order[at++] = i;
    }
    s->first[s->ngroups] = at;
    return DTR_OK;
}

/* The reducers, the groups and the buffers (gradients and outputs in one arena each). */
static dtr_status_t dtr__model_setup(dtr__model_t *s) {
    const dtr__model_args_t *a = s->a;
    DTR__TRY(dtr__model_groups(s));
    s->red = calloc((size_t)s->n, sizeof *s->red);
    s->groups = calloc((size_t)s->ngroups, sizeof *s->groups);
    s->grads = calloc((size_t)s->n, sizeof *s->grads);
    s->outs = calloc((size_t)s->n, sizeof *s->outs);
    s->hgrads = calloc((size_t)s->n, sizeof *s->hgrads);
    s->houts = calloc((size_t)s->n, sizeof *s->houts);
    s->grad_bytes = calloc((size_t)s->n, sizeof *s->grad_bytes);
    s->out_bytes = calloc((size_t)s->n, sizeof *s->out_bytes);
    s->ggrads = calloc((size_t)s->n, sizeof *s->ggrads);
    s->gouts = calloc((size_t)s->n, sizeof *s->gouts);
    s->ggrad_bytes = calloc((size_t)s->n, sizeof *s->ggrad_bytes);
    s->gout_bytes = calloc((size_t)s->n, sizeof *s->gout_bytes);
    if (!s->red || !s->groups || !s->grads || !s->outs || !s->hgrads || !s->houts ||
        !s->grad_bytes || !s->out_bytes || !s->ggrads || !s->gouts || !s->ggrad_bytes || !s->gout_bytes)
        return DTR_ERR_OUT_OF_MEMORY;
    int64_t gtotal = 0, ototal = 0;
    s->numel = 0;
    for (int i = 0; i < s->n; i++) {
        const dtr_param_desc_t *p = &s->params[i].desc;
        dtr_reducer_desc_t d = {.mesh = s->mesh, .shard_dims = s->shard,
                                .replicate_dims = s->rep, .ndim = p->ndim,
                                .shard_dim = p->shard_dim, .param_dtype = p->dtype,
                                .reduce_dtype = a->dtype};
        memcpy(d.shape, p->shape, sizeof d.shape);
        DTR__TRY(dtr_reducer_create(s->ctx, &d, &s->red[i]));
        int64_t numel = 1, shard, item = dtr_dtype_info(p->dtype)->size;
        for (int k = 0; k < p->ndim; k++) numel *= p->shape[k];
        dtr_reducer_info(s->red[i], i == 0 ? &s->f : NULL, &shard, NULL);
        s->numel += numel;
        s->grad_bytes[i] = (size_t)(numel * item);
        s->out_bytes[i] = (size_t)(shard * item);
        gtotal += (numel * item + 63) / 64 * 64;
        ototal += (shard * item + 63) / 64 * 64;
    }
    s->gtotal = gtotal;
    s->ototal = ototal;
    s->grad_arena = calloc(1, (size_t)(gtotal > 0 ? gtotal : 1));
    s->out_arena = calloc(1, (size_t)(ototal > 0 ? ototal : 1));
    if (s->grad_arena == NULL || s->out_arena == NULL) return DTR_ERR_OUT_OF_MEMORY;
    DTR__TRY(dtr_cli_dev_put(&a->eng, s->grad_arena, (size_t)gtotal, &s->dgrad_arena));
    DTR__TRY(dtr_cli_dev_put(&a->eng, s->out_arena, (size_t)ototal, &s->dout_arena));
    int64_t goff = 0, ooff = 0;
    for (int i = 0; i < s->n; i++) {
        s->hgrads[i] = s->grad_arena + goff;
        s->houts[i] = s->out_arena + ooff;
        s->grads[i] = (char *)s->dgrad_arena + goff;
        s->outs[i] = (char *)s->dout_arena + ooff;
        goff += ((int64_t)s->grad_bytes[i] + 63) / 64 * 64;
        ooff += ((int64_t)s->out_bytes[i] + 63) / 64 * 64;
    }
    for (int k = 0; k < s->n; k++) {
        int i = s->order[k];
        s->ggrads[k] = s->grads[i];
        s->gouts[k] = s->outs[i];
        s->ggrad_bytes[k] = s->grad_bytes[i];
        s->gout_bytes[k] = s->out_bytes[i];
    }
    for (int g = 0; g < s->ngroups; g++) {
        int cnt = s->first[g + 1] - s->first[g];
        dtr_param_desc_t *descs = malloc((size_t)cnt * sizeof *descs);
        if (descs == NULL) return DTR_ERR_OUT_OF_MEMORY;
        for (int k = 0; k < cnt; k++) descs[k] = s->params[s->order[s->first[g] + k]].desc;
        dtr_param_group_desc_t d = {.mesh = s->mesh, .shard_dims = s->shard,
                                    .replicate_dims = s->rep, .nparams = cnt, .params = descs,
                                    .reduce_dtype = a->dtype};
        dtr_status_t st = dtr_param_group_create(s->ctx, &d, &s->groups[g]);
        free(descs);
        DTR__TRY(st);
    }
    /* The baseline: every element once, in the reduce dtype, split evenly over the shard
     * group. Its send is the gradient arena read as the reduce dtype (values do not matter). */
    int64_t item = dtr_dtype_info(a->dtype)->size;
    s->base_count = (s->numel + s->f.rs_size - 1) / s->f.rs_size;
    if (s->base_count * s->f.rs_size * item > gtotal) s->base_count = gtotal / item / s->f.rs_size;
    s->hbase_recv = calloc(1, (size_t)(s->base_count * item + 1));
    s->hbase_out = calloc(1, (size_t)(s->base_count * item + 1));
    if (s->hbase_recv == NULL || s->hbase_out == NULL) return DTR_ERR_OUT_OF_MEMORY;
    size_t bbytes = (size_t)(s->base_count * item);
    DTR__TRY(dtr_cli_dev_put(&a->eng, s->hbase_recv, bbytes, &s->base_recv));
    return dtr_cli_dev_put(&a->eng, s->hbase_out, bbytes, &s->base_out);
}

static void dtr__model_free(dtr__model_t *s) {
    for (int i = 0; s->red != NULL && i < s->n; i++) dtr_reducer_destroy(s->red[i]);
    for (int g = 0; s->groups != NULL && g < s->ngroups; g++) dtr_param_group_destroy(s->groups[g]);
    free(s->red);
    free(s->groups);
    free(s->grads);
    free(s->outs);
    free(s->hgrads);
    free(s->houts);
    free(s->grad_bytes);
    free(s->out_bytes);
    free(s->ggrads);
    free(s->gouts);
    free(s->ggrad_bytes);
    free(s->gout_bytes);
    const dtr_cli_engine_t *e = &s->a->eng;
    dtr_cli_dev_free(e, s->dgrad_arena, s->grad_arena);
    dtr_cli_dev_free(e, s->dout_arena, s->out_arena);
    dtr_cli_dev_free(e, s->base_recv, s->hbase_recv);
    dtr_cli_dev_free(e, s->base_out, s->hbase_out);
    free(s->grad_arena);
    free(s->out_arena);
    free(s->hbase_recv);
    free(s->hbase_out);
    free(s->group_of);
    free(s->order);
    free(s->first);
}

/* Microbatch m's gradients (parameters are f32), then copied to the GPU on --device cuda. */
static dtr_status_t dtr__model_fill(dtr__model_t *s, int64_t m) {
    for (int i = 0; i < s->n; i++) {
        float *g = s->hgrads[i];
        for (int64_t k = 0; k < (int64_t)(s->grad_bytes[i] / sizeof *g); k++)
            g[k] = (float)dtr__mvalue(s, i, s->pos, m, k);
    }
    return dtr_cli_dev_in(&s->a->eng, s->dgrad_arena, s->grad_arena, (size_t)s->gtotal);
}

/* One microbatch per tensor: every parameter's reducer, in backward order. */
static dtr_status_t dtr__per_tensor(dtr__model_t *s, bool sync) {
    for (int i = s->n - 1; i >= 0; i--)
        DTR__TRY(dtr_reducer_reduce(s->red[i], s->grads[i], s->grad_bytes[i], sync,
                                     s->outs[i], s->out_bytes[i]));
    return DTR_OK;
}

/* One microbatch as groups: pushed through the pipeline in backward order. */
static dtr_status_t dtr__grouped(dtr__model_t *s, dtr_grad_pipeline_t *p, bool sync) {
    dtr_status_t st = DTR_OK;
    for (int g = s->ngroups - 1; g >= 0 && st == DTR_OK; g--) {
        int f = s->first[g];
        st = dtr_grad_pipeline_push(p, s->groups[g], &s->ggrads[f], &s->ggrad_bytes[f], sync,
                                    &s->gouts[f], &s->gout_bytes[f]);
    }
    dtr_status_t fin = dtr_grad_pipeline_finish(p);
    return st != DTR_OK ? st : fin;
}

/* The collectives alone: one reduce-scatter of every element, one all-reduce (synced). */
static dtr_status_t dtr__baseline(dtr__model_t *s, bool sync) {
    dtr_dtype_t t = s->a->dtype;
    if (s->f.rs_size > 1)
        DTR__TRY(dtr_reduce_scatter(s->ctx, s->mesh, s->shard, s->dgrad_arena, s->base_recv,
                                     s->base_count, t, DTR_REDUCE_SUM));
    /* DDP's all-reduce reads the gradients too: a buffer never written would read the
     * zero page from cache, not the bytes a real reduction reads from memory */
    if (sync && s->f.ar_size > 1)
        DTR__TRY(dtr_all_reduce(s->ctx, s->mesh, s->rep,
                                 s->f.rs_size > 1 ? s->base_recv : s->dgrad_arena, s->base_out,
                                 s->base_count, t, DTR_REDUCE_SUM));
    return DTR_OK;
}

/* Every output element against the exact mean: the largest error, and non-finite count
 * (the outputs copied to host first on --device cuda). */
static dtr_status_t dtr__model_verify(const dtr__model_t *s, double *err) {
    DTR__TRY(dtr_cli_dev_get(&s->a->eng, s->out_arena, s->dout_arena, (size_t)s->ototal));
    int64_t index = 0;
    dtr_mesh_group_index(s->mesh, s->shard, dtr_context_rank(s->ctx), &index);
    for (int i = 0; i < s->n; i++) {
        const dtr_param_desc_t *p = &s->params[i].desc;
        int64_t len = p->shape[0], inner = 1, rows, off;
        for (int d = 1; d < p->ndim; d++) inner *= p->shape[d];
        dtr_chunk(len, s->f.rs_size, index, &rows, &off);
        const float *out = s->houts[i];
        for (int64_t e = 0; e < rows * inner; e++) {
            int64_t k = off * inner + e;
            double want = 0;
            for (int64_t q = 0; q < s->ranks; q++)
                for (int64_t m = 0; m < s->a->microbatches; m++) want += dtr__mvalue(s, i, q, m, k);
            want /= s->f.factor;
            if (!isfinite(out[e])) err[1] += 1;
            else if (fabs(out[e] - want) > err[0]) err[0] = fabs(out[e] - want);
        }
    }
    return DTR_OK;
}

/* Runs one way for every microbatch (the fills untimed); its seconds, slowest rank. */
static dtr_status_t dtr__timed(dtr__model_t *s, int way, dtr_grad_pipeline_t *p, double *secs) {
    double total = 0;
    dtr_status_t st = DTR_OK;
    for (int64_t m = 0; m < s->a->microbatches && st == DTR_OK; m++) {
        bool sync = m == s->a->microbatches - 1;
        if (way != 2) DTR__TRY(dtr__model_fill(s, m));
        dtr_cli_job_barrier();
        double t0 = dtr_cli_job_now();
        st = way == 0 ? dtr__per_tensor(s, sync) : way == 1 ? dtr__grouped(s, p, sync)
                                                            : dtr__baseline(s, sync);
        if (st == DTR_OK) st = dtr_context_sync(s->ctx); /* the GPU's work done */
        dtr_cli_job_barrier();
        total += dtr_cli_job_now() - t0;
    }
    dtr_cli_job_max(&total, secs, 1);
    return st;
}

static void dtr__model_report(const dtr__model_t *s, const char *mesh, bool ok, double err,
                              double tol, const double *med) {
    const dtr__model_args_t *a = s->a;
    const char *ops[2];
    int nops = dtr_grad_ops(&s->f, ops, 2);
    int64_t per = a->microbatches * (s->f.rs_size > 1) + (s->f.ar_size > 1);
    if (a->json) {
        dtr_cli_json_begin_text(stdout, "grad", mesh);
        dtr_cli_json_str(stdout, "model", a->model);
        printf(",\"mode\":\"%s\",\"dtype\":\"%s\",\"backend\":\"%s\",\"device\":\"%s\","
               "\"microbatches\":%lld,\"params\":%d,\"numel\":%lld,\"ngroups\":%d,\"ops\":[",
               a->mode, dtr_dtype_name(a->dtype), dtr_cli_job_backend(), a->eng.device,
               (long long)a->microbatches,
               s->n, (long long)s->numel, s->ngroups);
        for (int k = 0; k < nops; k++) printf("%s\"%s\"", k ? "," : "", ops[k]);
        printf("],\"collectives\":{\"per_tensor\":%lld,\"grouped\":%lld,\"baseline\":%lld},"
               "\"verified\":%s,\"max_abs_err\":%.9g,\"abs_tolerance\":%.9g,\"iters\":%lld,"
               "\"warmup\":%lld,"
               "\"per_tensor_median_us\":%.1f,\"grouped_median_us\":%.1f,"
               "\"baseline_median_us\":%.1f}\n",
               (long long)(per * s->n), (long long)(per * s->ngroups), (long long)per,
               a->verify ? (ok ? "true" : "false") : "null", err, tol, (long long)a->iters,
               (long long)a->warmup,
               med[0] * 1e6, med[1] * 1e6, med[2] * 1e6);
        return;
    }
    printf("dtr grad --model %s: %d parameters (%lld elements) in %d groups; %s on %s, "
           "reduce %s, %lld microbatch%s; %s backend, %s memory\n",
           a->model, s->n, (long long)s->numel, s->ngroups, a->mode, mesh,
           dtr_dtype_name(a->dtype), (long long)a->microbatches,
           a->microbatches == 1 ? "" : "es", dtr_cli_job_backend(), a->eng.device);
    printf("  ops:");
    for (int k = 0; k < nops; k++) printf(" %s", ops[k]);
    printf("; D = %lld\n", (long long)s->f.world);
    printf("  collectives per step: per-tensor %lld, grouped %lld, baseline %lld\n",
           (long long)(per * s->n), (long long)(per * s->ngroups), (long long)per);
    if (a->iters > 0) {
        printf("  median of %lld after %lld warm-up: per-tensor %.1f us, grouped %.1f us, "
               "baseline %.1f us\n", (long long)a->iters, (long long)a->warmup, med[0] * 1e6,
               med[1] * 1e6, med[2] * 1e6);
        printf("  grouped: %.2fx faster than per-tensor, %.2fx the baseline\n",
               med[0] / med[1], med[1] / med[2]);
    }
    if (a->verify && ok)
        printf("  verified: both ways, every element of every shard on every rank is the mean "
               "over %lld ranks and %lld microbatch%s; max abs error %.9g (tolerance %.9g)\n",
               (long long)s->ranks, (long long)a->microbatches,
               a->microbatches == 1 ? "" : "es", err, tol);
}

int dtr_cli_grad_model(int argc, char **argv, int rank, int world) {
    dtr__model_args_t a;
    int rc = dtr__model_args(argc, argv, &a);
    if (rc != DTR_EXIT_OK) return rc;
    dtr__model_t s = {.a = &a};
    rc = dtr_cli_build_mesh("grad", &a.spec, &s.mesh);
    if (rc != DTR_EXIT_OK) return rc;
    int nd = dtr_mesh_ndims(s.mesh);
    unsigned all = (1u << nd) - 1;
    s.ranks = dtr_mesh_nranks(s.mesh);
    if (s.ranks != world)
        rc = dtr_cli_usage_error("grad", "--mesh: %lld ranks, the job has %d (--model runs on "
                                         "every rank)", (long long)s.ranks, world);
    else if (a.mode_k == 2 && nd < 2)
        rc = dtr_cli_usage_error("grad", "--mesh: hsdp needs a mesh of 2 or more dims (the "
                                         "last is the shard group, the others the replicate "
                                         "group)");
    else if (strcmp(a.model, "gpt2-small") == 0)
        rc = dtr__gpt2_small(&s.params, &s.n) == 0 ? DTR_EXIT_OK
                                                   : dtr_cli_usage_error("grad", "out of memory");
    else
        rc = dtr_cli_model_load("grad", a.model, &s.params, &s.n);
    if (rc != DTR_EXIT_OK) goto done_mesh;
    s.shard = a.mode_k == 1 ? all : a.mode_k == 2 ? 1u << (nd - 1) : 0;
    s.rep = all & ~s.shard;
    int64_t coord[DTR_MAX_MESH_DIMS];
    dtr_mesh_coord(s.mesh, rank, coord);
    for (int i = 0; i < nd; i++) s.pos = s.pos * dtr_mesh_size(s.mesh, i) + coord[i];
    char meshtext[64];
    dtr_mesh_format(s.mesh, meshtext, sizeof meshtext);
    rc = dtr_cli_agree_args("grad", rc, rank); /* (before the first collective) */
    if (rc == DTR_EXIT_OK) rc = dtr_cli_agree_engine("grad", &a.eng);
    if (rc != DTR_EXIT_OK) goto done_mesh;

    dtr_cli_restore_stderr();
    rc = DTR_EXIT_FAIL;
    dtr_grad_pipeline_t *pipe = NULL;
    dtr_status_t st = dtr_cli_engine_context(&a.eng, rank, &s.ctx);
    if (st == DTR_OK) st = dtr__model_setup(&s);
    if (st == DTR_OK) st = dtr_grad_pipeline_create(s.ctx, &pipe);
    if (!dtr_cli_all_ok("grad", st, rank, "setup")) goto done;
    double *t[3];
    bool tmem = true;
    for (int w = 0; w < 3; w++) tmem = (t[w] = calloc((size_t)a.iters + 1, sizeof *t[w])) && tmem;
    if (!dtr_cli_all_ok_msg("grad", !tmem, rank, "timing: out of memory")) goto done_t;
    double err[2] = {0, 0}, allerr[2], secs;
    static const char *const ways[] = {"per-tensor", "grouped", "baseline"};
    /* The warm-up rounds (one at least when none is timed: the checked round), then the
     * rounds timed: the three ways side by side in each; the last round is the checked one. */
    int64_t warm = a.iters == 0 && a.warmup == 0 ? 1 : a.warmup;
    dtr_cli_progress_t prog = {0};
    for (int64_t it = -warm; it < a.iters && st == DTR_OK; it++) {
        for (int w = 0; w < 3 && st == DTR_OK; w++) {
            st = dtr__timed(&s, w, pipe, &secs);
            if (!dtr_cli_all_ok("grad", st, rank, ways[w])) goto done_t;
            if (it >= 0) t[w][it] = secs;
            if (a.verify && it == a.iters - 1 && w < 2) st = dtr__model_verify(&s, err);
            if (!dtr_cli_all_ok("grad", st, rank, "the check")) goto done_t;
        }
        if (rank == 0) dtr_cli_progress(&prog, "grad", "rounds", it + warm + 1, warm + a.iters);
    }
    dtr_cli_job_max(err, allerr, 2);
    static const double eps[] = {[DTR_F32] = 0x1p-23, [DTR_F16] = 0x1p-11, [DTR_BF16] = 0x1p-8};
    double levels = ceil(log2((double)(s.ranks * a.microbatches))) + 3;
    double tol = eps[a.dtype] * 8.0 * levels;
    bool ok = !a.verify || (allerr[1] == 0 && allerr[0] <= tol);
    double med[3];
    for (int w = 0; w < 3; w++) med[w] = dtr_cli_median(t[w], (int)a.iters);
    if (rank == 0) {
        dtr__model_report(&s, meshtext, ok, allerr[0], tol, med);
        if (!ok)
            fprintf(stderr, "dtr grad: verification failed: max abs error %.9g (tolerance "
                            "%.9g), %g non-finite\n", allerr[0], tol, allerr[1]);
    }
    rc = ok ? DTR_EXIT_OK : DTR_EXIT_FAIL;
done_t:
    for (int w = 0; w < 3; w++) free(t[w]);
done:
    dtr_grad_pipeline_destroy(pipe);
    dtr__model_free(&s);
    dtr_context_destroy(s.ctx);
    dtr_cli_engine_end(&a.eng);
done_mesh:
    free(s.params);
    dtr_mesh_destroy(s.mesh);
    return rc;
}
