/* Runs where the CUDA toolkit was found at build time: a kernel round trip on a GPU, or a
 * clean skip with the reason when no GPU is visible (build machines and CI have none). */
#include <stdio.h>

#include "tests/backends/cuda/probe.h"

int main(void) {
    char why[256] = "";
    int n = dtr_test_cuda_probe(1000, why, sizeof why);
    if (n == 0) {
        printf("cuda probe: skipped, no GPU visible (%s)\n", why);
        printf("cuda probe: 0 passed, 0 failed, 1 skipped\n");
        return 0;
    }
    printf("cuda probe: %d GPU(s), kernel round trip %s\n", n > 0 ? n : 0, n > 0 ? "ok" : "WRONG");
    printf("cuda probe: %d passed, %d failed\n", n > 0, n < 0);
    return n > 0 ? 0 : 1;
}
