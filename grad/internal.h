/* What grad/'s files share (grad.c defines these). */
#ifndef DTR_GRAD_INTERNAL_H
#define DTR_GRAD_INTERNAL_H

#include <stdint.h>

#include "core/status.h"
#include "dtensor/dtensor.h"
#include "runtime/group.h"
#include "runtime/runtime.h"

/* INVALID_ARGUMENT from func naming `name` unless t is f32, f64, f16 or bf16. */
dtr_status_t dtr__float_arg(dtr_dtype_t t, const char *func, const char *name);

/* UNSUPPORTED from func naming desc->factor when ctx has a memory space and pre or post is
 * not a whole number (a space's divide takes an integer: memory.h). */
dtr_status_t dtr__space_factors(const dtr_context_t *ctx, double factor, double pre,
                                double post, const char *func);

/* bytes rounded up to DTR_FUSED_ALIGN: the slices of a fused buffer. */
int64_t dtr__fused_align(int64_t bytes);

/* The context's slots (runtime/group.h) the two collectives use. */
enum { DTR__SLOT_RS = 0, DTR__SLOT_AR = 1 };

/* One parameter as [outer, len, inner] around its shard dim. */
typedef struct {
    int64_t item;               /* its dtype's bytes */
    int64_t outer, len, inner;
    int64_t chunk, rows;        /* padded rows per rank; this rank's real rows */
    int64_t piece;              /* outer * chunk * inner elements */
    int64_t offset;             /* its view in the fused buffer (reduce dtype), bytes */
    int64_t goffset;            /* its piece in a gathered block (its dtype), bytes */
} dtr__gparam_t;

/*
 * Parameters laid out as a group's fused buffer, for span lists over them (group_spans.c
 * defines these): n parameters, all of pdtype, parameter i's piece at m[i].offset of a
 * block of `block` bytes of rdtype per member of an rs-member shard group (a reducer is a
 * group of one parameter at offset 0). A list has at most dtr__layout_most(l, members)
 * spans, members being rs for a send list and 1 for a receive list.
 *   send: every member's block in member order, each parameter's rows read where they lie
 *         in grads[i] (pdtype elements), zeros for padding rows and alignment gaps;
 *   recv: this member's block written into outs[i] (its real rows, pdtype elements), the
 *         padding and gaps into `trash` (DTR__TRASH bytes, rewritten, never read).
 * Both return the count.
 */
typedef struct {
    const dtr__gparam_t *m;
    int n;
    int64_t rs, block;
    dtr_dtype_t pdtype, rdtype;
} dtr__glayout_t;

enum { DTR__TRASH = 1 << 16 };
int64_t dtr__layout_most(const dtr__glayout_t *l, int64_t members);
int64_t dtr__layout_send(const dtr__glayout_t *l, const void *const *grads, dtr_span_t *sp);
int64_t dtr__layout_recv(const dtr__glayout_t *l, void *const *outs, char *trash,
                         dtr_span_t *sp);

#endif
