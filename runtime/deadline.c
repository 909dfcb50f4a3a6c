/*
 * Deadlines: every backend operation completes under the context's timeout, polled with the
 * backend's test from the moment it started. A timeout aborts the context (the operation
 * may still be pending in the backend: context.c keeps its memory) and returns
 * DTR_ERR_TIMEOUT; the caller adds which operation it was.
 */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <stdio.h>

#include "runtime/context.h"

/*
 * Completes (block) or tests one backend operation started at t0, under the context's
 * deadline. With no timeout it is the backend's own wait or test. A timeout aborts the
 * context and returns DTR_ERR_TIMEOUT; the caller adds which operation it was.
 */
dtr_status_t dtr__poll(dtr_context_t *ctx, void *group, dtr_backend_req_t *breq, double t0,
                       bool block, bool *done) {
    const dtr_backend_ops_t *ops = ctx->ops;
    if (ctx->timeout_s <= 0) {
        if (!block) return ops->test(group, breq, done);
        *done = true;
        return ops->wait(group, breq);
    }
    for (unsigned spin = 0;; spin++) {
        *done = false;
        DTR_CHECK(ops->test(group, breq, done));
        if (*done) return DTR_OK;
        /* a wait's first spins read the clock every 16th (a small call waits a few spins,
         * each clock read as long as a test) */
        if (block && spin < 64 && (spin & 15) != 15) continue;
        double waited = dtr__now() - t0;
        if (waited > ctx->timeout_s) {
            ctx->aborted = true;
            snprintf(ctx->abort_msg, sizeof ctx->abort_msg,
                     "no completion within %g s (DTR_TIMEOUT_S or dtr_context_set_timeout); a "
                     "peer failed, stopped or never made this call",
                     ctx->timeout_s);
            return dtr__error(DTR_ERR_TIMEOUT, "deadline", "%s", ctx->abort_msg);
        }
        if (!block) return DTR_OK;
        if (spin >= 64) sched_yield(); /* ranks may share cores: let the peer run */
    }
}

/* One blocking backend operation (the context's gbreq), under the deadline. */
dtr_status_t dtr__wait_op(dtr_context_t *ctx, void *group, dtr_status_t started) {
    if (started != DTR_OK) return started;
    bool done;
    return dtr__poll(ctx, group, &ctx->gbreq, dtr__now(), true, &done);
}
