/*
 * The planner's rules of the four local kinds, which move nothing between ranks:
 * local_chunk (R -> S(d): keep this rank's chunk), local_scale (R -> P(sum): divide by the
 * mesh dim's size), local_relabel (values and blocks kept: R -> P(avg|max|min), or any change
 * on mesh dims of one rank) and local_zero_fill (S(d) -> P(sum): this rank's chunk in zeros
 * of the extent it was cut from). Their time is the bytes they write at the local rate; a
 * relabel writes nothing.
 */
#include "redistribute/planner/internal.h"

static __int128 dtr__local_recv_terms(const dtr__ctx_t *ctx, const dtr_step_t *s,
                                      const dtr__term_t *const *t) {
    (void)ctx;
    (void)s;
    (void)t;
    return 0;
}

static double dtr__local_time(const dtr__ctx_t *ctx, const dtr_step_t *s, unsigned links) {
    (void)links;
    return (double)s->extra_bytes_max / (ctx->cost->local_gbps * 1e3);
}

const dtr__kind_t dtr__kind_local_chunk = {
    .info = {"local_chunk", false, "R -> S(d): keep this rank's chunk"},
    .seed = true,
    .chunks = true,
    .follows = true,
    .recv_terms = dtr__local_recv_terms,
    .time = dtr__local_time,
};

const dtr__kind_t dtr__kind_local_scale = {
    .info = {"local_scale", false, "R -> P(sum): divide by the mesh dim size"},
    .seed = true,
    .follows = true,
    .recv_terms = dtr__local_recv_terms,
    .time = dtr__local_time,
};

const dtr__kind_t dtr__kind_local_relabel = {
    .info = {"local_relabel", false,
             "R -> P(avg|max|min), or any change on mesh dims of one rank: every block and "
             "value stays"},
    .keeps_block = true,
    .seed = true,
    .follows = true,
    .recv_terms = dtr__local_recv_terms,
};

const dtr__kind_t dtr__kind_local_zero_fill = {
    .info = {"local_zero_fill", false,
             "S(d) -> P(sum): this rank's chunk, zeros elsewhere in the extent of d it was cut "
             "from"},
    .follows = true,
    .recv_terms = dtr__local_recv_terms,
    .time = dtr__local_time,
};
