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

def mpi_test(name, binary, ranks, size = "medium", args = [], env = {}, **kwargs):
    """A test executable run once under mpirun on `ranks` ranks (tests/support/mpi_run.sh).

    The executable prints its "N passed, N failed" tally (tests/support/mpi_check.h).
    """
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests/support:mpi_run.sh"],
        args = [str(ranks), "$(location %s)" % binary] + args,
        data = [binary],
        env = env,
        **kwargs
    )

def launch_cases_tests(binary, variants, size = "medium"):
    """mpi_cases_tests' runs with the processes started by tools/dtr_launch.sh instead of
    mpirun (no MPI: a backend such as gloo, named in each variant's "args")."""
    for name, v in variants.items():
        native.sh_test(
            name = name,
            size = size,
            srcs = ["//tests/support:mpi_cases.sh"],
            args = ["--launch", "$(location //tools:dtr_launch.sh)", "$(location %s)" % binary] +
                   v.get("args", []),
            data = [binary, "//tools:dtr_launch.sh"],
            env = v.get("env", {}),
        )

def mpi_cases_tests(binary, variants, size = "medium"):
    """The random-case runs of one executable (tests/support/mpi_cases.sh: 2, 4 and 8 ranks).

    variants maps each test's name to what sets it apart from the others, and nothing else:
    its environment ("env", e.g. DTR_EXEC_SPECS, the ranks and cases, or a backend switch)
    and extra arguments to every run ("args", e.g. ["--memory", "fake"]).
    """
    for name, v in variants.items():
        native.sh_test(
            name = name,
            size = size,
            srcs = ["//tests/support:mpi_cases.sh"],
            args = ["$(location %s)" % binary] + v.get("args", []),
            data = [binary],
            env = v.get("env", {}),
        )
