"""Detects Gloo (Debian's libgloo-dev) on the build machine, offline.

Generates @<name> with:
  defs.bzl   GLOO_AVAILABLE (bool)
  BUILD      :gloo (the headers on the default include path, -lgloo; empty without Gloo)

Where Gloo is absent the targets that load defs.bzl are skipped, so the rest of the build is
unchanged (tools/setup.sh installs libgloo-dev). DTR_GLOO=0 turns detection off
(`bazel build --repo_env=DTR_GLOO=0`).
"""

def _gloo_configure_impl(ctx):
    enabled = ctx.os.environ.get("DTR_GLOO", "1") != "0"
    header = ctx.path("/usr/include/gloo/rendezvous/file_store.h")
    lib = ctx.path("/usr/lib/libgloo.so")
    if not lib.exists:
        lib = ctx.path("/usr/lib/x86_64-linux-gnu/libgloo.so")
    available = enabled and header.exists and lib.exists
    if available:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "gloo",
    linkopts = ["-L{dir}", "-lgloo", "-lstdc++"],
)
""".format(dir = str(lib.dirname)))
    else:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "gloo")
""")
    ctx.file("defs.bzl", "GLOO_AVAILABLE = {}\n".format(available))

gloo_configure = repository_rule(
    implementation = _gloo_configure_impl,
    environ = ["DTR_GLOO"],
    local = True,
)
