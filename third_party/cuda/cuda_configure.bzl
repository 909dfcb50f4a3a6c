"""Detects the CUDA toolkit (and NCCL) on the build machine, offline.

Generates @<name> with:
  defs.bzl   CUDA_AVAILABLE (bool), NVCC (path or ""), CUDA_PATH
  BUILD      :cuda_headers, :cudart, :nccl (empty libraries when CUDA is absent)

Where nvcc is absent every CUDA target is skipped by the BUILD files that load defs.bzl,
so the rest of the build is unchanged. DTR_CUDA=0 in the environment turns detection off
(`bazel build --repo_env=DTR_CUDA=0`); CUDA_PATH picks another toolkit.
"""

def _cuda_configure_impl(ctx):
    cuda_path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    enabled = ctx.os.environ.get("DTR_CUDA", "1") != "0"
    nvcc = ctx.path(cuda_path + "/bin/nvcc")
    nccl_h = ctx.path(cuda_path + "/include/nccl.h")
    if not nccl_h.exists:
        nccl_h = ctx.path("/usr/include/nccl.h")
    available = enabled and nvcc.exists
    has_nccl = available and nccl_h.exists

    if available:
        ctx.symlink(cuda_path + "/include", "include")
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh"]),
    includes = ["include"],
)
cc_library(
    name = "cudart",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcudart"],
    deps = [":cuda_headers"],
)
cc_library(
    name = "nccl",
    linkopts = {nccl_link},
    deps = [":cuda_headers"],
)
""".format(
            lib = cuda_path + "/lib64",
            nccl_link = '["-lnccl"]' if has_nccl else "[]",
        ))
    else:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "cuda_headers")
cc_library(name = "cudart")
cc_library(name = "nccl")
""")

    ctx.file("defs.bzl", """
CUDA_AVAILABLE = {available}
NCCL_AVAILABLE = {has_nccl}
CUDA_PATH = "{cuda_path}"
NVCC = "{nvcc}"
""".format(
        available = available,
        has_nccl = has_nccl,
        cuda_path = cuda_path if available else "",
        nvcc = str(nvcc) if available else "",
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "DTR_CUDA"],
    local = True,
)
