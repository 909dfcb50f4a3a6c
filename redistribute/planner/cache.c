/* The plan cache: a small array searched by hash under a mutex, least recently used out.
 * Planning on a miss happens outside the lock. */
#include <pthread.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "dtensor/mesh.h"
#include "redistribute/planner/internal.h"

/* Everything a plan depends on, zero-padded so it can be compared with memcmp. */
typedef struct {
    uint64_t mesh_hash;
    int64_t mesh_sizes[DTR_MAX_MESH_DIMS];
    int mdims;
    int ndim;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    dtr_placement_t src[DTR_MAX_MESH_DIMS], dst[DTR_MAX_MESH_DIMS];
    int dtype, dst_dtype; /* (they differ for a cast) */
    int strategy;
    int backward;
    dtr_cost_model_t cost;
} dtr__cache_key_t;

typedef struct {
    bool used;
    uint64_t hash;
    uint64_t last_use;
    dtr__cache_key_t key;
    dtr_plan_t plan;
} dtr__cache_entry_t;

struct dtr_plan_cache {
    pthread_mutex_t lock;
    int capacity;
    uint64_t clock;
    dtr__cache_entry_t *entries;
};

dtr_status_t dtr_plan_cache_create(int capacity, dtr_plan_cache_t **out) {
    DTR_CHECK_PTR(out, __func__);
    if (capacity < 1 || capacity > 1 << 20)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "capacity: %d, must be 1..%d",
                          capacity, 1 << 20);
    dtr_plan_cache_t *c = calloc(1, sizeof *c);
    dtr__cache_entry_t *e = calloc((size_t)capacity, sizeof *e);
    if (c == NULL || e == NULL) {
        free(c);
        free(e);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "cache of %d plans", capacity);
    }
    pthread_mutex_init(&c->lock, NULL);
    c->capacity = capacity;
    c->entries = e;
    *out = c;
    return DTR_OK;
}

void dtr_plan_cache_destroy(dtr_plan_cache_t *cache) {
    if (cache == NULL) return;
    pthread_mutex_destroy(&cache->lock);
    free(cache->entries);
    free(cache);
}

/* FNV-1a over 8-byte words (the key is zero-padded, so every byte is defined): a hit hashes
 * a ~500-byte key, and byte-at-a-time hashing was most of its cost. */
static uint64_t dtr__hash_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* *out = *in, but only the steps in use (a plan holds room for DTR_MAX_PLAN_STEPS, ~13 KB;
 * copying all of it was most of a hit's remaining cost). out's steps past nsteps are left
 * as they were. */
static void dtr__plan_copy(dtr_plan_t *out, const dtr_plan_t *in) {
    size_t head = offsetof(dtr_plan_t, steps), tail = offsetof(dtr_plan_t, count);
    memcpy(out, in, head);
    memcpy(out->steps, in->steps, (size_t)in->nsteps * sizeof in->steps[0]);
    memcpy((char *)out + tail, (const char *)in + tail, sizeof *in - tail);
}

dtr_status_t dtr_plan_cache_get(dtr_plan_cache_t *cache, const dtr_spec_t *src,
                                const dtr_spec_t *dst, const dtr_plan_options_t *opts,
                                dtr_plan_t *out, bool *hit) {
    DTR_CHECK_PTR(cache, __func__);
    DTR_CHECK_PTR(out, __func__);
    DTR_CHECK_PTR(src, __func__);
    DTR_CHECK_PTR(dst, __func__);
    if (src->mesh == NULL || dst->mesh == NULL || src->ndim < 0 || src->ndim > DTR_MAX_TENSOR_DIMS)
        return dtr_plan_create(src, dst, opts, out); /* reports the error */

    dtr__cache_key_t key;
    memset(&key, 0, sizeof key);
    key.mesh_hash = dtr__mesh_hash(src->mesh);
    key.mdims = dtr_mesh_ndims(src->mesh);
    for (int i = 0; i < key.mdims; i++) {
        key.mesh_sizes[i] = dtr_mesh_size(src->mesh, i);
        key.src[i] = src->placements[i];
        key.dst[i] = dst->placements[i];
        /* Only the fields a placement kind uses count. */
        if (key.src[i].kind != DTR_SHARD) key.src[i].dim = 0;
        if (key.src[i].kind != DTR_PARTIAL) key.src[i].op = 0;
        if (key.dst[i].kind != DTR_SHARD) key.dst[i].dim = 0;
        if (key.dst[i].kind != DTR_PARTIAL) key.dst[i].op = 0;
    }
    key.ndim = src->ndim;
    memcpy(key.shape, src->shape, (size_t)src->ndim * sizeof(int64_t));
    key.dtype = (int)src->dtype;
    key.dst_dtype = (int)dst->dtype;
    key.strategy = opts != NULL ? (int)opts->strategy : DTR_STRATEGY_OPTIMAL;
    key.backward = opts != NULL && opts->backward;
    dtr_cost_model_t cost;
    if (opts != NULL && opts->cost != NULL)
        cost = *opts->cost;
    else
        DTR_CHECK(dtr_cost_model_from_env(&cost));
    /* field by field: the key is hashed as bytes, and the struct's tail padding is not the
     * caller's to keep clean */
    memcpy(key.cost.alpha_us, cost.alpha_us, sizeof cost.alpha_us);
    memcpy(key.cost.bandwidth_gbps, cost.bandwidth_gbps, sizeof cost.bandwidth_gbps);
    key.cost.local_gbps = cost.local_gbps;
    key.cost.across_nodes = cost.across_nodes;
    /* The destination must match too (shape/mesh), or planning reports why. */
    bool same_pair = dtr_mesh_equal(src->mesh, dst->mesh) && src->ndim == dst->ndim &&
                     memcmp(src->shape, dst->shape, (size_t)src->ndim * sizeof(int64_t)) == 0;
    uint64_t h = dtr__hash_bytes(&key, sizeof key);

    if (same_pair) {
        pthread_mutex_lock(&cache->lock);
        for (int k = 0; k < cache->capacity; k++) {
            dtr__cache_entry_t *e = &cache->entries[k];
            if (e->used && e->hash == h && memcmp(&e->key, &key, sizeof key) == 0) {
                e->last_use = ++cache->clock;
                dtr__plan_copy(out, &e->plan);
                pthread_mutex_unlock(&cache->lock);
                out->src.mesh = src->mesh;
                out->dst.mesh = dst->mesh;
                if (hit != NULL) *hit = true;
                return DTR_OK;
            }
        }
        pthread_mutex_unlock(&cache->lock);
    }

    dtr_plan_options_t o = {.strategy = (dtr_strategy_t)key.strategy, .cost = &key.cost,
                            .backward = key.backward != 0};
    dtr_plan_t plan;
    DTR_CHECK(dtr_plan_create(src, dst, &o, &plan));
    pthread_mutex_lock(&cache->lock);
    dtr__cache_entry_t *victim = &cache->entries[0];
    for (int k = 0; k < cache->capacity; k++) {
        dtr__cache_entry_t *e = &cache->entries[k];
        if (!e->used) {
            victim = e;
            break;
        }
        if (e->last_use < victim->last_use) victim = e;
    }
    victim->used = true;
    victim->hash = h;
    victim->key = key;
    victim->plan = plan;
    victim->last_use = ++cache->clock;
    pthread_mutex_unlock(&cache->lock);
    *out = plan;
    if (hit != NULL) *hit = false;
    return DTR_OK;
}
