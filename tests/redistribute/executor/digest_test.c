/* The digest (redistribute/executor/digest.c): dtr_digest_mix pinned to values an independent
 * implementation gives (python/tests/test_digest.py computes them in Python); the shares of a
 * mesh's ranks add up to the digest of the whole tensor for random meshes, shapes (empty and
 * uneven shards), dtypes and placements, so any two layouts of one tensor agree; one flipped
 * bit or two swapped elements change it; a Partial placement, a wrong byte count and a NULL
 * block refused by name, the share untouched. Seeded (DTR_SEED; printed with a failing case). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"

static uint64_t seed_state;

static uint64_t next(void) { /* splitmix64 */
    uint64_t z = (seed_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

Test(digest, mix_pinned) {
    cr_expect_eq(dtr_digest_mix(0, 0, 0), 0x6393d51c06c618dcull);
    cr_expect_eq(dtr_digest_mix(1, 0, 0), 0xc6ffe416e9a5dfeeull);
    cr_expect_eq(dtr_digest_mix(0, 1, 0), 0x8d82751399f55d54ull);
    cr_expect_eq(dtr_digest_mix(0, 0, 1), 0x7831bc99e7d6ec19ull);
    cr_expect_eq(dtr_digest_mix(12345, 0x3f800000, 0), 0x088f48bb16ced2b4ull);
    cr_expect_eq(dtr_digest_mix(1ull << 40, ~0ull, 7), 0x47b945d997d8f2cfull);
}

/* The digest of the whole tensor (n elements of `size` bytes at p), element by element. */
static uint64_t whole(const unsigned char *p, int64_t n, int size) {
    uint64_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t w[2] = {0, 0};
        memcpy(w, p + i * size, (size_t)size);
        sum += dtr_digest_mix((uint64_t)i, w[0], w[1]);
    }
    return sum;
}

/* Copies rank's block of spec out of the whole tensor `full` into `out`. */
static void block_of(const dtr_spec_t *s, const dtr_layout_t *l, const unsigned char *full,
                     unsigned char *out, int size) {
    int nd = s->ndim;
    int64_t at[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t e = 0; e < l->numel; e++) {
        int64_t flat = 0;
        for (int d = 0; d < nd; d++) flat = flat * s->shape[d] + l->global_offset[d] + at[d];
        memcpy(out + e * size, full + flat * size, (size_t)size);
        for (int d = nd - 1; d >= 0 && ++at[d] == l->local_shape[d]; d--) at[d] = 0;
    }
}

/* The sum of every rank's share of spec over the whole tensor `full`. */
static uint64_t shares(const dtr_spec_t *s, const unsigned char *full, int size) {
    uint64_t sum = 0;
    for (int64_t r = 0; r < dtr_mesh_nranks(s->mesh); r++) {
        dtr_layout_t l;
        cr_assert_eq(dtr_spec_layout(s, (int)r, &l), DTR_OK, "%s", dtr_last_error());
        unsigned char *b = malloc((size_t)l.bytes + 1);
        block_of(s, &l, full, b, size);
        uint64_t part = 0xdead;
        cr_assert_eq(dtr_digest_local(s, (int)r, b, l.bytes, &part), DTR_OK, "%s",
                     dtr_last_error());
        sum += part;
        free(b);
    }
    return sum;
}

Test(digest, shares_add_up_to_the_whole) {
    const char *env = getenv("DTR_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 10) : 20261129;
    seed_state = seed;
    printf("digest_test: seed %llu (DTR_SEED)\n", (unsigned long long)seed);
    for (int c = 0; c < 400; c++) {
        int mdims = 1 + (int)(next() % 3), nd = (int)(next() % 4);
        int64_t msizes[3], shape[4], numel = 1;
        for (int i = 0; i < mdims; i++) msizes[i] = 1 + (int64_t)(next() % 3);
        /* (every other case a long last dim: rows of 16 and more take the AVX-512 loop) */
        for (int d = 0; d < nd; d++)
            numel *= (shape[d] = (int64_t)(next() % (c % 5 == 0 ? 3 : d == nd - 1 && c % 2 ? 90 : 9)));
        dtr_dtype_t dt = (dtr_dtype_t)(next() % DTR_DTYPE_LAST);
        int size = dtr_dtype_info(dt)->size;
        dtr_mesh_t *m = NULL;
        cr_assert_eq(dtr_mesh_create(mdims, msizes, NULL, 0, &m), DTR_OK, "%s", dtr_last_error());
        unsigned char *full = malloc((size_t)(numel * size) + 1);
        for (int64_t i = 0; i < numel * size; i++) full[i] = (unsigned char)next();
        uint64_t want = whole(full, numel, size);
        for (int k = 0; k < 3; k++) { /* three layouts of the same tensor */
            dtr_placement_t p[3];
            for (int i = 0; i < mdims; i++)
                p[i] = nd > 0 && next() % 3 != 0 ? dtr_shard((int32_t)(next() % (uint64_t)nd))
                                                  : dtr_replicate();
            dtr_spec_t s;
            cr_assert_eq(dtr_spec_init(&s, m, p, mdims, shape, nd, dt), DTR_OK, "%s",
                         dtr_last_error());
            char pt[128] = "", mt[64];
            dtr_placements_format(p, mdims, pt, sizeof pt);
            dtr_mesh_format(m, mt, sizeof mt);
            cr_expect_eq(shares(&s, full, size), want,
                         "seed %llu case %d: mesh %s %s shape of %d dims, %s: shares %llx, whole %llx",
                         (unsigned long long)seed, c, mt, pt, nd, dtr_dtype_name(dt),
                         (unsigned long long)shares(&s, full, size), (unsigned long long)want);
        }
        if (numel >= 2) { /* a flipped bit, two swapped different elements: another digest */
            full[next() % (uint64_t)(numel * size)] ^= (unsigned char)(1u << (next() % 8));
            cr_expect_neq(whole(full, numel, size), want, "seed %llu case %d: a flipped bit",
                          (unsigned long long)seed, c);
            uint64_t flipped = whole(full, numel, size);
            if (memcmp(full, full + size, (size_t)size) != 0) {
                unsigned char t[16];
                memcpy(t, full, (size_t)size);
                memcpy(full, full + size, (size_t)size);
                memcpy(full + size, t, (size_t)size);
                cr_expect_neq(whole(full, numel, size), flipped,
                              "seed %llu case %d: two elements swapped", (unsigned long long)seed, c);
            }
        }
        free(full);
        dtr_mesh_destroy(m);
    }
}

Test(digest, refusals) {
    dtr_mesh_t *m = NULL;
    int64_t sizes[] = {2, 2}, shape[] = {4, 6};
    cr_assert_eq(dtr_mesh_create(2, sizes, NULL, 0, &m), DTR_OK);
    dtr_placement_t p[] = {dtr_shard(0), dtr_partial(DTR_REDUCE_SUM)};
    dtr_spec_t s;
    cr_assert_eq(dtr_spec_init(&s, m, p, 2, shape, 2, DTR_F32), DTR_OK);
    float buf[24] = {0};
    uint64_t part = 7;
    cr_expect_eq(dtr_digest_local(&s, 0, buf, 48, &part), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "dtr_digest_local: spec: a Partial placement (mesh dim 1) "
                                       "has no values to digest until it is reduced") != NULL,
              "%s", dtr_last_error());
    p[1] = dtr_replicate();
    cr_assert_eq(dtr_spec_init(&s, m, p, 2, shape, 2, DTR_F32), DTR_OK);
    cr_expect_eq(dtr_digest_local(&s, 0, buf, 40, &part), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(),
                     "dtr_digest_local: bytes: 40, but rank 0's block of this spec holds 48") != NULL,
              "%s", dtr_last_error());
    cr_expect_eq(dtr_digest_local(&s, 0, NULL, 48, &part), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "local: must not be NULL") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_digest_local(&s, 9, buf, 48, &part), DTR_ERR_NOT_IN_MESH, "%s",
                 dtr_last_error());
    cr_expect_eq(part, 7, "the share was written on failure");
    cr_expect_eq(dtr_digest_local(&s, 1, buf, 48, &part), DTR_OK); /* (a replica: 0) */
    cr_expect_eq(part, 0);
    dtr_mesh_destroy(m);
}
