"""Test rules shared by the tests/ tree."""

def criterion_test(name, srcs, deps = [], linkopts = [], **kwargs):
    """A single-process Criterion test linked against the dtr library.

    Criterion finds tests through ELF sections nothing references, so the optimised link's
    --gc-sections would drop them all and the binary would pass having run nothing; keep
    them. tools/test.sh also fails any Criterion target that reports zero tests.
    """
    native.cc_test(
        name = name,
        srcs = srcs,
        deps = deps + ["//:dtr", "@criterion"],
        linkopts = ["-Wl,--no-gc-sections"] + linkopts,
        **kwargs
    )
