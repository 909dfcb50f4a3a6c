"""nvcc through Bazel 4 without rules_cuda: a genrule per .cu file, wrapped in a cc_library.

Only call these where CUDA_AVAILABLE (from @local_cuda//:defs.bzl) is true, e.g.

    load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE")
    load("//third_party/cuda:cuda.bzl", "cuda_library")
    if CUDA_AVAILABLE:
        cuda_library(name = "kernels", srcs = ["pack.cu"], hdrs = ["pack.h"])

so machines without the toolkit build everything else unchanged.
"""

load("@local_cuda//:defs.bzl", "NVCC")

# Machine code for Ampere (A100, sm_80; runs on sm_86/sm_89 too) and Hopper (H100/H200,
# sm_90), plus Hopper's PTX so newer GPUs (Blackwell) can JIT it. docs/gpu.md lists them.
CUDA_GENCODE = " ".join([
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
])

def cuda_library(name, srcs, hdrs = [], deps = [], nvcc_flags = [], **kwargs):
    objs = []
    for src in srcs:
        obj = "_%s_%s.o" % (name, src.replace("/", "_").replace(".cu", ""))
        native.genrule(
            name = obj.replace(".", "_"),
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = " ".join([
                NVCC,
                "-c -O3 -std=c++17 -Xcompiler -fPIC,-fvisibility=hidden",
                CUDA_GENCODE,
                "-I.",
                " ".join(nvcc_flags),
                "-o $@ $(location %s)" % src,
            ]),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        **kwargs
    )
