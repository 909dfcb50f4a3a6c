/* A check of the CUDA build switch: nvcc-compiled code linked into a C test. */
#ifndef DTR_TESTS_CUDA_PROBE_H
#define DTR_TESTS_CUDA_PROBE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the number of visible GPUs (0 with a reason in why[0..len) when none can be
 * used). With a GPU, runs a kernel that writes i*i into n ints and returns -1 if any
 * value read back is wrong. */
int dtr_test_cuda_probe(int n, char *why, int len);

#ifdef __cplusplus
}
#endif

#endif
