#include <cstdio>
#include <cuda_runtime.h>

#include "tests/backends/cuda/probe.h"

__global__ static void squares(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i * i;
}

extern "C" int dtr_test_cuda_probe(int n, char *why, int len) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        snprintf(why, (size_t)len, "cudaGetDeviceCount: %s",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return 0;
    }
    int *dev = nullptr;
    if (cudaMalloc(&dev, sizeof(int) * (size_t)n) != cudaSuccess) return -1;
    squares<<<(n + 255) / 256, 256>>>(dev, n);
    int *host = new int[n];
    err = cudaMemcpy(host, dev, sizeof(int) * (size_t)n, cudaMemcpyDeviceToHost);
    int bad = err != cudaSuccess;
    for (int i = 0; !bad && i < n; i++) bad = host[i] != i * i;
    delete[] host;
    cudaFree(dev);
    return bad ? -1 : count;
}
