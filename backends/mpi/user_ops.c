/* The MPI backend's user reduction functions (user_ops.h). */
#include "backends/mpi/user_ops.h"

#include "numeric/numeric.h"

/* inout = in op inout, halves widened to f32 and rounded once per pair, through the
 * vectorised loop of the shared-memory reductions (f16 3x faster than one element at a
 * time; the figures, and why not f32 instead: docs/executor.md). */
#define DTR__HALF_FN(name, dtype, op)                                                    \
    static void name(void *in, void *inout, int *len, MPI_Datatype *type) {             \
        (void)type;                                                                      \
        const void *pair[2] = {in, inout};                                               \
        dtr__reduce_n(dtype, op, pair, 2, inout, *len);                                  \
    }
DTR__HALF_FN(dtr__f16_sum, DTR_F16, DTR_REDUCE_SUM)
DTR__HALF_FN(dtr__f16_max, DTR_F16, DTR_REDUCE_MAX)
DTR__HALF_FN(dtr__f16_min, DTR_F16, DTR_REDUCE_MIN)
DTR__HALF_FN(dtr__f16_prod, DTR_F16, DTR_REDUCE_PRODUCT)
DTR__HALF_FN(dtr__bf16_sum, DTR_BF16, DTR_REDUCE_SUM)
DTR__HALF_FN(dtr__bf16_max, DTR_BF16, DTR_REDUCE_MAX)
DTR__HALF_FN(dtr__bf16_min, DTR_BF16, DTR_REDUCE_MIN)
DTR__HALF_FN(dtr__bf16_prod, DTR_BF16, DTR_REDUCE_PRODUCT)
DTR__HALF_FN(dtr__u8_max, DTR_U8, DTR_REDUCE_MAX)
DTR__HALF_FN(dtr__u8_min, DTR_U8, DTR_REDUCE_MIN)

static MPI_User_function *const dtr__half_fns[2][4] = {
    {dtr__f16_sum, dtr__f16_max, dtr__f16_min, dtr__f16_prod},
    {dtr__bf16_sum, dtr__bf16_max, dtr__bf16_min, dtr__bf16_prod},
};

MPI_User_function *dtr__mpi_user_fn(dtr_dtype_t dtype, int slot) {
    if (dtype == DTR_U8) return slot == 1 ? dtr__u8_max : slot == 2 ? dtr__u8_min : NULL;
    if ((dtype != DTR_F16 && dtype != DTR_BF16) || slot < 0 || slot > 3) return NULL;
    return dtr__half_fns[dtype == DTR_BF16][slot];
}
