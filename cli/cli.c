#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

static char dtr__last_said[384];

const char *dtr_cli_last_said(void) { return dtr__last_said; }

void dtr_cli_say(const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t n = strlen(line) < sizeof dtr__last_said ? strlen(line) : sizeof dtr__last_said - 1;
    memcpy(dtr__last_said, line, n);
    dtr__last_said[n] = '\0';
    /* one line whatever the text quoted in it holds: control bytes written as escapes */
    char out[4 * sizeof line];
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)line; *p != '\0'; p++) {
        if (*p == '\n' || *p == '\t' || *p == '\r')
            k += (size_t)sprintf(out + k, "\\%c", *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r');
        else if (*p < 0x20 || *p == 0x7f)
            k += (size_t)sprintf(out + k, "\\x%02x", *p);
        else
            out[k++] = (char)*p;
    }
    out[k] = '\0';
    fprintf(stderr, "%s\n", out);
}

void *dtr_cli_host_alloc(size_t bytes) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && bytes / (size_t)page >= (size_t)pages) return NULL;
    return malloc(bytes);
}

int dtr_cli_usage_error(const char *cmd, const char *fmt, ...) {
    char msg[1900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dtr_cli_say("dtr %s: %s", cmd, msg);
    return DTR_EXIT_USAGE;
}

int dtr_cli_parse_int(const char *cmd, const char *flag, const char *text, int64_t lo,
                      int64_t hi, const char *what, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
        return dtr_cli_usage_error(cmd, "%s: '%s' is not %s", flag, text, what);
    *out = (int64_t)v;
    return DTR_EXIT_OK;
}

int dtr_cli_parse_number(const char *cmd, const char *flag, const char *text, bool positive,
                         const char *what, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(v) || (positive && !(v > 0)))
        return dtr_cli_usage_error(cmd, "%s: '%s' is not %s", flag, text, what);
    *out = v;
    return DTR_EXIT_OK;
}

int dtr_cli_once(const char *cmd, const struct option *options, int c, unsigned char *seen) {
    if (c < 0 || c >= DTR_CLI_SEEN || c == ':' || c == '?' || c == 'h') return DTR_EXIT_OK;
    if (!seen[c]) {
        seen[c] = 1;
        return DTR_EXIT_OK;
    }
    const char *name = NULL;
    for (int k = 0; options[k].name != NULL && name == NULL; k++)
        if (options[k].flag == NULL && options[k].val == c) name = options[k].name;
    return dtr_cli_usage_error(cmd, "--%s: given twice (each flag once: the second would "
                                    "replace the first)", name != NULL ? name : "?");
}

int dtr_cli_option_error(const char *cmd, int c, char **argv) {
    if (c == ':')
        return dtr_cli_usage_error(cmd, "%s needs a value (see 'dtr %s --help')", argv[optind - 1],
                                   cmd);
    if (c != 0)
        return dtr_cli_usage_error(cmd, "unknown option '%s' (see 'dtr %s --help')",
                                   argv[optind - 1], cmd);
    return dtr_cli_usage_error(cmd, "unexpected argument '%s' (see 'dtr %s --help')", argv[optind],
                               cmd);
}

int dtr_cli_plan_error(const char *cmd, const char *what) {
    dtr_cli_say("dtr %s: %s%s%s", cmd, what != NULL ? what : "", what != NULL ? ": " : "",
                dtr_last_error());
    return dtr_error_class_exit_code(dtr_status_class(dtr_last_status()));
}

int dtr_cli_lib_error(const char *cmd, const char *flag) {
    if (flag != NULL) return dtr_cli_usage_error(cmd, "%s: %s", flag, dtr_last_error());
    return dtr_cli_usage_error(cmd, "%s", dtr_last_error());
}

int dtr_cli_parse_ranks(const char *cmd, const char *flag, const char *text, int **ranks,
                        int64_t *n) {
    int64_t count = 1;
    for (const char *p = text; *p; p++) count += (*p == ',');
    int *list = malloc((size_t)count * sizeof *list);
    if (list == NULL) return dtr_cli_usage_error(cmd, "%s: out of memory", flag);
    const char *p = text;
    for (int64_t i = 0; i < count; i++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        while (*end == ' ') end++;
        if (end == p || errno != 0 || v < INT_MIN || v > INT_MAX || (*end != ',' && *end != '\0')) {
            free(list);
            return dtr_cli_usage_error(
                cmd, "%s \"%s\": item %lld is not an integer (ranks are comma-separated)",
                flag, text, (long long)i);
        }
        list[i] = (int)v;
        p = end + 1;
    }
    *ranks = list;
    *n = count;
    return DTR_EXIT_OK;
}

int dtr_cli_build_mesh(const char *cmd, const dtr_cli_spec_args_t *args, dtr_mesh_t **mesh) {
    *mesh = NULL;
    if (args->mesh == NULL) return dtr_cli_usage_error(cmd, "--mesh is required (e.g. --mesh 2x2)");
    int *ranks = NULL;
    int64_t nranks = 0;
    if (args->ranks != NULL) {
        int rc = dtr_cli_parse_ranks(cmd, "--ranks", args->ranks, &ranks, &nranks);
        if (rc != DTR_EXIT_OK) return rc;
    }
    dtr_status_t st = dtr_mesh_parse(args->mesh, ranks, nranks, mesh);
    free(ranks);
    if (st != DTR_OK)
        return dtr_cli_lib_error(cmd, args->ranks != NULL ? "--mesh/--ranks" : "--mesh");
    return DTR_EXIT_OK;
}

int dtr_cli_build_spec(const char *cmd, const dtr_cli_spec_args_t *args, dtr_mesh_t **mesh,
                       dtr_spec_t *spec) {
    *mesh = NULL;
    if (args->mesh == NULL) return dtr_cli_usage_error(cmd, "--mesh is required (e.g. --mesh 2x2)");
    if (args->shape == NULL)
        return dtr_cli_usage_error(cmd, "--shape is required (e.g. --shape 64x64)");
    const char *pflag = args->placements_flag != NULL ? args->placements_flag : "--placements";
    if (args->placements == NULL)
        return dtr_cli_usage_error(cmd, "%s is required (e.g. %s 'S(0),R')", pflag, pflag);
    int rc = dtr_cli_build_mesh(cmd, args, mesh);
    if (rc != DTR_EXIT_OK) return rc;

    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim;
    dtr_placement_t placements[DTR_MAX_MESH_DIMS];
    int nplacements;
    dtr_dtype_t dtype = DTR_F32;
    const char *bad_flag = NULL;
    if (dtr_shape_parse(args->shape, shape, DTR_MAX_TENSOR_DIMS, &ndim) != DTR_OK)
        bad_flag = "--shape";
    else if (dtr_placements_parse(args->placements, placements, DTR_MAX_MESH_DIMS,
                                  &nplacements) != DTR_OK)
        bad_flag = pflag;
    else if (args->dtype != NULL && dtr_dtype_parse(args->dtype, &dtype) != DTR_OK)
        bad_flag = "--dtype";
    if (bad_flag != NULL) {
        dtr_mesh_destroy(*mesh);
        *mesh = NULL;
        return dtr_cli_lib_error(cmd, bad_flag);
    }
    if (dtr_spec_init(spec, *mesh, placements, nplacements, shape, ndim, dtype) != DTR_OK) {
        dtr_mesh_destroy(*mesh);
        *mesh = NULL;
        return dtr_cli_lib_error(cmd, pflag);
    }
    return DTR_EXIT_OK;
}

int dtr_cli_other_spec(const char *cmd, const char *flag, const char *text,
                       const dtr_spec_t *like, dtr_spec_t *out) {
    if (text == NULL) return dtr_cli_usage_error(cmd, "%s is required (e.g. %s 'R')", flag, flag);
    dtr_placement_t placements[DTR_MAX_MESH_DIMS];
    int n;
    if (dtr_placements_parse(text, placements, DTR_MAX_MESH_DIMS, &n) != DTR_OK ||
        dtr_spec_init(out, like->mesh, placements, n, like->shape, like->ndim, like->dtype) !=
            DTR_OK)
        return dtr_cli_lib_error(cmd, flag);
    return DTR_EXIT_OK;
}

int dtr_cli_target_mesh(const char *cmd, const char *to_mesh, const char *to_ranks,
                        dtr_mesh_t **mesh_b) {
    int *ranks = NULL;
    int64_t nranks = 0;
    int rc = to_ranks != NULL ? dtr_cli_parse_ranks(cmd, "--to-ranks", to_ranks, &ranks, &nranks)
                              : DTR_EXIT_OK;
    if (rc != DTR_EXIT_OK) return rc;
    dtr_status_t st = dtr_mesh_parse(to_mesh, ranks, nranks, mesh_b);
    free(ranks);
    if (st != DTR_OK) return dtr_cli_lib_error(cmd, to_ranks != NULL ? "--to-mesh/--to-ranks" : "--to-mesh");
    return DTR_EXIT_OK;
}

int dtr_cli_target_spec(const char *cmd, const char *to, const char *to_mesh,
                        const char *to_ranks, const char *to_dtype, const dtr_spec_t *src,
                        dtr_mesh_t **mesh_b, dtr_spec_t *dst) {
    *mesh_b = NULL;
    int rc;
    if (to_mesh == NULL) {
        if (to_ranks != NULL)
            return dtr_cli_usage_error(cmd, "--to-ranks: goes with --to-mesh (the destination "
                                            "mesh's ranks)");
        rc = dtr_cli_other_spec(cmd, "--to", to, src, dst);
    } else {
        if ((rc = dtr_cli_target_mesh(cmd, to_mesh, to_ranks, mesh_b)) != DTR_EXIT_OK) return rc;
        dtr_spec_t like = *src;
        like.mesh = *mesh_b;
        rc = dtr_cli_other_spec(cmd, "--to", to, &like, dst);
    }
    if (rc == DTR_EXIT_OK) rc = dtr_cli_cast_spec(cmd, to_dtype, dst);
    if (rc != DTR_EXIT_OK) {
        dtr_mesh_destroy(*mesh_b);
        *mesh_b = NULL;
    }
    return rc;
}

int dtr_cli_cast_spec(const char *cmd, const char *text, dtr_spec_t *spec) {
    if (text == NULL) return DTR_EXIT_OK;
    dtr_dtype_t dtype;
    if (dtr_dtype_parse(text, &dtype) != DTR_OK ||
        dtr_spec_init(spec, spec->mesh, spec->placements, dtr_mesh_ndims(spec->mesh), spec->shape,
                      spec->ndim, dtype) != DTR_OK)
        return dtr_cli_lib_error(cmd, "--to-dtype");
    return DTR_EXIT_OK;
}

int dtr_cli_backward_dtype(const char *cmd, const char *text, bool backward, dtr_dtype_t *out) {
    if (text == NULL) return DTR_EXIT_OK;
    if (!backward)
        return dtr_cli_usage_error(cmd, "--backward-dtype: only with --backward (it is the dtype "
                                        "of the gradient's steps)");
    if (dtr_dtype_parse(text, out) != DTR_OK) return dtr_cli_lib_error(cmd, "--backward-dtype");
    return DTR_EXIT_OK;
}

void dtr_cli_json_i64_array(FILE *out, const int64_t *v, int n) {
    fputc('[', out);
    for (int i = 0; i < n; i++) fprintf(out, "%s%lld", i ? "," : "", (long long)v[i]);
    fputc(']', out);
}

void dtr_cli_progress(dtr_cli_progress_t *p, const char *cmd, const char *what, long long done,
                      long long total) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    if (p->start == 0) p->start = p->last = now;
    /* DTR_PROGRESS_S: the quiet start and the least interval (default 3 and 2 seconds) */
    const char *env = getenv("DTR_PROGRESS_S");
    double after = env != NULL && *env != '\0' ? atof(env) : 3, every = env != NULL && *env != '\0' ? after : 2;
    if (now - p->start < after || now - p->last < every || done >= total) return;
    p->last = now;
    fprintf(stderr, "dtr %s: %s: %lld of %lld done, %lld left (%.0f s)\n", cmd, what, done, total,
            total - done, now - p->start);
}

int dtr_cli_cost_flags(const char *cmd, const dtr_cli_cost_flags_t *f, dtr_cost_model_t *cost) {
    if (dtr_cost_model_from_env(cost) != DTR_OK) return dtr_cli_lib_error(cmd, NULL);
    if (dtr_cost_model_set(cost, f->alpha, NULL, NULL) != DTR_OK)
        return dtr_cli_lib_error(cmd, "--alpha-us");
    if (dtr_cost_model_set(cost, NULL, f->bandwidth, NULL) != DTR_OK)
        return dtr_cli_lib_error(cmd, "--bandwidth-gbps");
    if (dtr_cost_model_set(cost, NULL, NULL, f->local) != DTR_OK)
        return dtr_cli_lib_error(cmd, "--local-gbps");
    return DTR_EXIT_OK;
}

int dtr_cli_inter_cost(const char *cmd, uint32_t across, const dtr_cli_cost_flags_t *f,
                       dtr_cost_model_t *cost) {
    dtr_cost_model_t probe = *cost; /* one flag at a time on a copy */
    if (dtr_cost_model_nodes(&probe, across, f->inter_alpha, NULL) != DTR_OK)
        return dtr_cli_lib_error(cmd, "--inter-alpha-us");
    if (dtr_cost_model_nodes(&probe, across, NULL, f->inter_bandwidth) != DTR_OK)
        return dtr_cli_lib_error(cmd, "--inter-bandwidth-gbps");
    if (dtr_cost_model_nodes(cost, across, f->inter_alpha, f->inter_bandwidth) != DTR_OK)
        return dtr_cli_lib_error(cmd, NULL);
    return DTR_EXIT_OK;
}

void dtr_cli_json_str(FILE *out, const char *key, const char *text) {
    fprintf(out, ",\"%s\":\"", key);
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(out, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(out, "\\u%04x", *c);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}

void dtr_cli_json_begin(FILE *out, const char *cmd, const dtr_mesh_t *mesh) {
    fprintf(out, "{\"schema\":%d,\"command\":\"%s\",\"mesh\":[", DTR_CLI_JSON_SCHEMA, cmd);
    int nd = dtr_mesh_ndims(mesh);
    for (int i = 0; i < nd; i++) fprintf(out, "%s%lld", i ? "," : "", (long long)dtr_mesh_size(mesh, i));
    fputc(']', out);
    /* the rank list, where it is not the row-major 0..N-1 */
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, n = dtr_mesh_nranks(mesh);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    bool plain = true;
    for (int64_t p = 0; p < n && ranks != NULL; p++) {
        dtr_mesh_rank_at(mesh, coord, &ranks[p]);
        plain = plain && ranks[p] == p;
        for (int i = nd - 1; i >= 0; i--) {
            if (++coord[i] < dtr_mesh_size(mesh, i)) break;
            coord[i] = 0;
        }
    }
    if (ranks != NULL && !plain) {
        fputs(",\"ranks\":[", out);
        for (int64_t p = 0; p < n; p++) fprintf(out, "%s%d", p ? "," : "", ranks[p]);
        fputc(']', out);
    }
    free(ranks);
}

void dtr_cli_json_begin_text(FILE *out, const char *cmd, const char *mesh) {
    dtr_mesh_t *m = NULL;
    if (mesh != NULL && dtr_mesh_parse(mesh, NULL, 0, &m) == DTR_OK) {
        dtr_cli_json_begin(out, cmd, m);
        dtr_mesh_destroy(m);
    } else {
        fprintf(out, "{\"schema\":%d,\"command\":\"%s\",\"mesh\":[]", DTR_CLI_JSON_SCHEMA, cmd);
    }
}

void dtr_cli_json_change(FILE *out, const dtr_spec_t *src, const dtr_spec_t *dst) {
    char from[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX], to[sizeof from];
    if (dtr_placements_format(src->placements, dtr_mesh_ndims(src->mesh), from, sizeof from) != DTR_OK)
        from[0] = '\0';
    if (dtr_placements_format(dst->placements, dtr_mesh_ndims(dst->mesh), to, sizeof to) != DTR_OK)
        to[0] = '\0';
    fputs(",\"shape\":", out);
    dtr_cli_json_i64_array(out, src->shape, src->ndim);
    fprintf(out, ",\"dtype\":\"%s\",\"to_dtype\":\"%s\"", dtr_dtype_name(src->dtype),
            dtr_dtype_name(dst->dtype));
    dtr_cli_json_str(out, "from", from);
    dtr_cli_json_str(out, "to", to);
}

dtr_status_t dtr_cli_json_splice(FILE *out, dtr_status_t (*print)(const void *arg, FILE *f),
                                 const void *arg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (mem == NULL) return DTR_ERR_OUT_OF_MEMORY;
    dtr_status_t st = print(arg, mem);
    fclose(mem);
    if (st == DTR_OK && len >= 2 && buf[0] == '{' && buf[len - 1] == '}') {
        if (len > 2) {
            fputc(',', out);
            fwrite(buf + 1, 1, len - 2, out);
        }
    } else if (st == DTR_OK) {
        st = DTR_ERR_INTERNAL;
    }
    free(buf);
    return st;
}

/* The path a write to `path` replaces: path itself, or where its symlinks lead (so that a
 * link is written through, not replaced), into buf. */
static const char *dtr__write_target(const char *path, char *buf, size_t len) {
    char *real = realpath(path, NULL);
    if (real == NULL) return path; /* (a new file) */
    snprintf(buf, len, "%s", real);
    free(real);
    return buf;
}

int dtr_cli_write_svg(const char *cmd, const char *path,
                      dtr_status_t (*draw)(const void *arg, FILE *f), const void *arg) {
    if (strcmp(path, "-") == 0) {
        if (draw(arg, stdout) == DTR_OK) return DTR_EXIT_OK;
        return dtr_cli_plan_error(cmd, NULL);
    }
    char target[4096], tmp[4096 + 16];
    struct stat there;
    if (path[0] == '\0') return dtr_cli_usage_error(cmd, "--svg: '' is not a file name");
    const char *to = dtr__write_target(path, target, sizeof target);
    bool exists = stat(to, &there) == 0;
    if (exists && !S_ISREG(there.st_mode)) { /* a device, a FIFO: written into as it is */
        if (S_ISDIR(there.st_mode))
            return dtr_cli_usage_error(cmd, "--svg: '%s' is a directory", path);
        FILE *f = fopen(to, "w");
        if (f == NULL)
            return dtr_cli_usage_error(cmd, "--svg: cannot write '%s' (%s)", path, strerror(errno));
        dtr_status_t st = draw(arg, f);
        if (fclose(f) != 0 && st == DTR_OK)
            return dtr_cli_usage_error(cmd, "--svg: cannot write '%s' (%s)", path, strerror(errno));
        return st == DTR_OK ? DTR_EXIT_OK : dtr_cli_plan_error(cmd, NULL);
    }
    /* a regular file, new or not: written whole beside it under a name of its own, then
     * renamed over it, with its mode (a new one: the umask's) */
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", to) >= (int)sizeof tmp)
        return dtr_cli_usage_error(cmd, "--svg: '%.200s...' is too long a path", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return dtr_cli_usage_error(cmd, "--svg: cannot write '%s' (%s)", path, strerror(errno));
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, exists ? there.st_mode & 07777 : 0666 & ~mask);
    FILE *f = fdopen(fd, "w");
    dtr_status_t st = f != NULL ? draw(arg, f) : DTR_ERR_IO;
    int e = errno;
    bool bad = f == NULL || fclose(f) != 0;
    if (f == NULL) close(fd);
    if (st != DTR_OK || bad || rename(tmp, to) != 0) {
        e = st == DTR_OK && !bad ? errno : e;
        remove(tmp);
        if (st != DTR_OK && st != DTR_ERR_IO) return dtr_cli_plan_error(cmd, NULL);
        return dtr_cli_usage_error(cmd, "--svg: cannot write '%s' (%s)", path, strerror(e));
    }
    return DTR_EXIT_OK;
}

void dtr_cli_json_placements(FILE *out, const dtr_placement_t *p, int n) {
    dtr_placements_print_json(out, p, n);
}

bool dtr_cli_spec_option(int c, const char *value, dtr_cli_spec_args_t *args) {
    switch (c) {
    case 'm': args->mesh = value; return true;
    case 's': args->shape = value; return true;
    case 'd': args->dtype = value; return true;
    case 'r': args->ranks = value; return true;
    default: return false;
    }
}

void dtr_cli_json_counts(FILE *out, const int *count) {
    const char *sep = "";
    fputc('{', out);
    for (int k = 0; k < DTR_STEP_KIND_LAST; k++) {
        const dtr_step_kind_info_t *info = dtr_step_kind_info((dtr_step_kind_t)k);
        if (!info->collective) continue;
        fprintf(out, "%s\"%s\":%d", sep, info->name, count[k]);
        sep = ",";
    }
    fputc('}', out);
}

void dtr_cli_json_collectives(FILE *out, const dtr_plan_t *plan) {
    dtr_cli_json_counts(out, plan->count);
}

static int dtr__cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dtr_cli_median(double *v, int n) {
    if (n == 0) return 0;
    qsort(v, (size_t)n, sizeof *v, dtr__cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
