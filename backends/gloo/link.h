/*
 * What the Gloo backend (gloo.c) asks of Gloo itself, in C: Gloo is C++, and this header is
 * the only door between the two (link.cc holds every line of C++). A store is Gloo's
 * rendezvous store (a FileStore, or the caller's callbacks); a device is its TCP transport;
 * a link is a fully connected Gloo context over some ranks; a transfer is one operation's
 * posted sends and receives between the link's members, moved by Gloo's own I/O thread.
 *
 * Every function returns 0, or DTR__GLOO_FAIL / DTR__GLOO_TIMEOUT with Gloo's message in
 * err (what it threw), and never throws.
 */
#ifndef DTR_BACKENDS_GLOO_LINK_H
#define DTR_BACKENDS_GLOO_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "backends/gloo/dtr_gloo.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DTR__GLOO_FAIL 1
#define DTR__GLOO_TIMEOUT 2

typedef struct dtr__gloo_store dtr__gloo_store_t;
typedef struct dtr__gloo_device dtr__gloo_device_t;
typedef struct dtr__gloo_link dtr__gloo_link_t;
typedef struct dtr__gloo_xfer dtr__gloo_xfer_t;

/* A store over a directory every rank sees (Gloo's FileStore), or over the caller's
 * callbacks (copied: the callbacks and `user` must outlive the store). */
int dtr__gloo_store_file(const char *dir, dtr__gloo_store_t **out, char *err, size_t len);
int dtr__gloo_store_user(const dtr_gloo_store_t *cb, dtr__gloo_store_t **out, char *err,
                         size_t len);
void dtr__gloo_store_free(dtr__gloo_store_t *s);

/* The TCP transport listening on `hostname` (or on interface `iface`; both NULL: this
 * machine's host name, as Gloo resolves it). */
int dtr__gloo_device_open(const char *hostname, const char *iface, dtr__gloo_device_t **out,
                          char *err, size_t len);
void dtr__gloo_device_free(dtr__gloo_device_t *d);

/* Connects `size` ranks (this one `rank`) through keys under `prefix` in the store:
 * collective over exactly those ranks; each operation's wait is bounded by timeout_ms. */
int dtr__gloo_connect(dtr__gloo_store_t *s, dtr__gloo_device_t *d, const char *prefix, int rank,
                      int size, int64_t timeout_ms, dtr__gloo_link_t **out, char *err,
                      size_t len);
void dtr__gloo_link_free(dtr__gloo_link_t *l);

/*
 * Posts one operation's transfers and returns: to each other member p, scount[p] bytes from
 * send + sdispl[p]; from each other member p, rcount[p] bytes into recv + rdispl[p]
 * (arrays of the link's size; this rank's own entries and zero counts are skipped). `tag`
 * tells the operation apart from the link's others (every member posts the same tags in
 * the same order). *out is NULL where nothing was posted.
 */
int dtr__gloo_post(dtr__gloo_link_t *l, uint32_t tag, const void *send, const int64_t *sdispl,
                   const int64_t *scount, void *recv, const int64_t *rdispl,
                   const int64_t *rcount, dtr__gloo_xfer_t **out, char *err, size_t len);

/* Waits until the transfer's sends and receives have completed, then frees it (also on
 * failure; NULL: nothing to wait for). */
int dtr__gloo_finish(dtr__gloo_xfer_t *x, char *err, size_t len);

#ifdef __cplusplus
}
#endif

#endif
