#!/usr/bin/env bash
# Checks an installed dtr tree the way its users receive it, with nothing from the source
# tree but these test programs. Usage: run.sh PREFIX openmpi|mpich [DEB]
#   exports    libdtr.so exports exactly the DTR_API functions of the installed headers plus
#              the documented internal exports, all dtr_*; ldd names no CUDA library
#   versions   pkg-config --modversion dtr, dtr --version and the CMake package agree
#   pkgconfig  consumer.c built with `mpicc $(pkg-config --cflags --libs dtr)`, 4 ranks
#   cmake      find_package(dtr) + dtr::dtr and dtr::dtr_static, 4 ranks each
#   core       libdtr_core: its exports are dtr_core.h's, ldd names no MPI; core_consumer.c
#              built with plain gcc and pkg-config dtr-core, and with CMake's dtr::core
#              while MPI is disabled for CMake
#   c++        every installed header in g++ -std=c++17 -Wall -Wextra -pedantic -Werror
#   abi        programs built against copies of the installed headers in which one struct
#              has another size are refused by dtr_check_headers (dtr_mpi_check_headers
#              for dtr_mpi.h's struct), naming it; the unchanged headers pass
#   cli        the installed dtr runs from bin/ with no library path set; --device cuda loads
#              libdtr_cuda.so.0 (exact run, or "no GPU visible"), and a copy of the tree without
#              it refuses --device cuda by name and still runs on cpu
#   gloo       (where the tree has libdtr_gloo.so) ldd libdtr.so names no Gloo; the installed
#              dtr verifies a change with --backend gloo under tools/dtr_launch.sh (no MPI);
#              gloo_consumer.c built with gcc and pkg-config dtr-gloo runs on 3 processes
#              (a context by name, one from dtr_gloo.h); dtr-gloo.pc, CMake's dtr::gloo
#   man        `man dtr` finds share/man/man1/dtr.1 (MANPATH, or bin/ on PATH) and the page
#              holds every command's section and every flag of its --help
#   deb        (with DEB) its file list and dependencies, `apt-get -s install` of it, and
#              consumer.c built from its unpacked tree
# Ends with "install: N passed, N failed".
set -u
prefix=$(cd "$1" && pwd) mpi=$2 deb=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
case $mpi in
openmpi) mpicc=mpicc.openmpi launch=(mpirun.openmpi --oversubscribe) mpilib=libopenmpi3 ;;
mpich) mpicc=mpicc.mpich launch=(mpirun.mpich) mpilib=libmpich12 ;;
*) echo "run.sh: MPI '$mpi' is not openmpi or mpich" >&2; exit 2 ;;
esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# run4 LABEL PROGRAM: runs PROGRAM on 4 ranks; passes if it printed "N passed, 0 failed".
run4() {
    local label=$1 out
    shift
    out=$(timeout 120 "${launch[@]}" -n 4 "$@" 2>&1)
    local rc=$?
    if [ $rc -eq 0 ] && grep -qE '^consumer: [1-9][0-9]* passed, 0 failed$' <<<"$out"; then
        ok "$label: $(grep -E '^consumer:' <<<"$out")"
    else
        bad "$label (exit $rc): $out"
    fi
}

# --- tools/install.sh refuses bad arguments by name, before building anything ---------------
inst=$here/../../tools/install.sh
for args in "|install.sh: --prefix DIR is required" "--prefix $work/x --mpi lam|install.sh: --mpi: 'lam' is not openmpi or mpich" \
    "--prefix $work/x --frob|install.sh: unknown argument '--frob'" "--prefix|install.sh: --prefix needs a directory" \
    "--prefix $work/x --deb $work/x --maintainer nobody|install.sh: --maintainer: 'nobody' is not 'NAME <EMAIL>'"; do
    # shellcheck disable=SC2086
    err=$(bash "$inst" ${args%%|*} 2>&1 >/dev/null)
    rc=$?
    [ $rc -eq 2 ] && grep -qF "${args#*|}" <<<"$err" && [ ! -e "$work/x" ] &&
        ok "install.sh ${args%%|*}: exit 2, '${args#*|}', nothing written" || bad "install.sh ${args%%|*}: exit $rc: $err"
done
bash "$inst" --help | grep -q '^usage: bash tools/install.sh --prefix DIR' && ok "install.sh --help" || bad "install.sh --help"

# --- exports: the public API and nothing outside dtr_ -----------------------------------
lib=$prefix/lib/libdtr.so.0
nm -D --defined-only "$lib" | awk '{print $3}' | sort -u >"$work/exported"
sed -nE 's/.*DTR_API[^(]*[^a-z_0-9](dtr_[a-z_0-9]+) *\(.*/\1/p' \
    "$prefix/include/dtr/dtr.h" "$prefix/include/dtr/dtr_mpi.h" \
    "$prefix/include/dtr/dtr_checkpoint.h" | sort -u >"$work/declared"
# (the shared-memory path's, for libdtr_gloo.so: backends/shm/shm.h)
printf '%s\n' dtr__env_bytes dtr__env_timeout dtr__error dtr__fnv dtr__mpi_error dtr__now dtr__reduce_n dtr__store \
    dtr__shm_all_reduce_start dtr__shm_create dtr__shm_destroy dtr__shm_gather_start \
    dtr__shm_node_key dtr__shm_progress dtr__shm_reduce_scatter_start dtr__shm_spans_start \
    dtr__shm_start dtr__shm_start_v dtr__shm_tiny_all_reduce_start dtr__shm_wait | sort >"$work/internal"
outside=$(grep -vc '^dtr_' "$work/exported")
missing=$(comm -13 "$work/exported" "$work/declared")
extra=$(comm -23 "$work/exported" "$work/declared" | comm -23 - "$work/internal")
if [ "$outside" -eq 0 ] && [ -z "$missing" ] && [ -z "$extra" ]; then
    ok "exports: $(wc -l <"$work/exported") symbols: $(wc -l <"$work/declared") declared DTR_API, $(wc -l <"$work/internal") internal for the companion libraries, 0 outside dtr_"
else
    bad "exports: $outside outside dtr_; declared but not exported: ${missing:-none}; exported but not declared: ${extra:-none}"
fi
if ldd "$lib" | grep -qiE 'cuda|nccl'; then bad "ldd libdtr.so.0 names CUDA: $(ldd "$lib")"; else ok "ldd libdtr.so.0: no CUDA or NCCL library"; fi
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libdtr.so.0 ] && ok "SONAME $soname" || bad "SONAME '$soname', want libdtr.so.0"

# --- versions agree ----------------------------------------------------------------------
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
pc_version=$(pkg-config --modversion dtr)
cli_version=$("$prefix/bin/dtr" --version | awk '{print $2}')
lib_version=$(basename "$(readlink -f "$lib")" | sed 's/^libdtr\.so\.//')
mkdir -p "$work/cm"
cmake -S "$here/cmake" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1
cm_version=$(sed -n 's/^-- dtr \([0-9.]*\) for .*/\1/p' "$work/cmake.log")
# the full string ("0.9.1-dev" in a tree past a release) from pkg-config and the CLI, its
# numbers in the CMake package and the file name
if [ -n "$pc_version" ] && [ "$pc_version" = "$cli_version" ] && [ "${pc_version%%-*}" = "$cm_version" ] &&
    [ "${pc_version%%-*}" = "$lib_version" ]; then
    ok "versions: pkg-config $pc_version, dtr --version $cli_version, CMake $cm_version, libdtr.so.$lib_version"
else
    bad "versions: pkg-config '$pc_version', dtr --version '$cli_version', CMake '$cm_version', library '$lib_version'"
fi
[ "$(pkg-config --variable=mpi dtr)" = "$mpi" ] && ok "dtr.pc says mpi=$mpi" || bad "dtr.pc mpi=$(pkg-config --variable=mpi dtr)"

# --- a C program with mpicc and pkg-config alone ------------------------------------------
# shellcheck disable=SC2046
if "$mpicc" -Wall -Wextra -Werror "$here/consumer.c" $(pkg-config --cflags --libs dtr) \
    -o "$work/consumer_pc" 2>"$work/cc.log"; then
    LD_LIBRARY_PATH=$prefix/lib run4 "pkgconfig: $mpicc consumer.c \$(pkg-config --cflags --libs dtr)" "$work/consumer_pc"
else
    bad "pkgconfig: $mpicc failed: $(cat "$work/cc.log")"
fi

# --- a CMake project ----------------------------------------------------------------------
if grep -q '^-- dtr ' "$work/cmake.log" && cmake --build "$work/cm" >"$work/build.log" 2>&1; then
    LD_LIBRARY_PATH=$prefix/lib run4 "cmake: dtr::dtr" "$work/cm/consumer_shared"
    run4 "cmake: dtr::dtr_static (libdtr.a)" "$work/cm/consumer_static"
    if ldd "$work/cm/consumer_static" | grep -q libdtr; then bad "cmake: the static consumer loads libdtr.so"; else ok "cmake: the static consumer does not load libdtr.so"; fi
else
    bad "cmake: $(cat "$work/cmake.log" "$work/build.log" 2>/dev/null | tail -20)"
fi

# --- the planning layer alone: libdtr_core, with no MPI anywhere ---------------------------
core=$prefix/lib/libdtr_core.so.0
nm -D --defined-only "$core" | awk '{print $3}' | sort -u >"$work/core_exported"
sed -nE 's/.*DTR_API[^(]*[^a-z_0-9](dtr_[a-z_0-9]+) *\(.*/\1/p' "$prefix/include/dtr/dtr_core.h" |
    sort -u >"$work/core_declared"
missing=$(comm -13 "$work/core_exported" "$work/core_declared")
extra=$(comm -23 "$work/core_exported" "$work/core_declared" | comm -23 - "$work/internal")
beyond=$(comm -23 "$work/core_exported" "$work/exported")
if [ -z "$missing" ] && [ -z "$extra" ] && [ -z "$beyond" ]; then
    ok "core: libdtr_core.so.0 exports the $(wc -l <"$work/core_declared") DTR_API functions of dtr_core.h (all also in libdtr.so)"
else
    bad "core: declared but not exported: ${missing:-none}; exported but not declared: ${extra:-none}; not in libdtr: ${beyond:-none}"
fi
if ldd "$core" | grep -qiE 'mpi|cuda|nccl|gloo'; then bad "core: ldd libdtr_core.so.0: $(ldd "$core")"; else ok "core: ldd libdtr_core.so.0 names no MPI, CUDA, NCCL or Gloo library"; fi
[ "$(pkg-config --modversion dtr-core)" = "$pc_version" ] && ok "core: dtr-core.pc $pc_version" || bad "core: dtr-core.pc version '$(pkg-config --modversion dtr-core)'"
# shellcheck disable=SC2046
if gcc -Wall -Wextra -Werror "$here/core_consumer.c" $(pkg-config --cflags --libs dtr-core) \
    -o "$work/core_pc" 2>"$work/core_cc.log"; then
    out=$(LD_LIBRARY_PATH=$prefix/lib "$work/core_pc" 2>&1)
    libs=$(LD_LIBRARY_PATH=$prefix/lib ldd "$work/core_pc")
    if grep -qE '^core_consumer: [1-9][0-9]* passed, 0 failed$' <<<"$out" && ! grep -qiE 'mpi|cuda|nccl' <<<"$libs"; then
        ok "core: gcc core_consumer.c \$(pkg-config --cflags --libs dtr-core): $out; ldd names no MPI"
    else
        bad "core: pkg-config consumer printed: $out; ldd: $libs"
    fi
else
    bad "core: gcc failed: $(cat "$work/core_cc.log")"
fi
if cmake -S "$here/cmake_core" -B "$work/cmc" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=TRUE >"$work/cmc.log" 2>&1 && cmake --build "$work/cmc" >>"$work/cmc.log" 2>&1; then
    out=$(LD_LIBRARY_PATH=$prefix/lib "$work/cmc/core_consumer" 2>&1)
    if grep -qE '^core_consumer: [1-9][0-9]* passed, 0 failed$' <<<"$out" &&
        ! LD_LIBRARY_PATH=$prefix/lib ldd "$work/cmc/core_consumer" | grep -qi mpi; then
        ok "core: find_package(dtr COMPONENTS core) with MPI disabled, dtr::core: $out"
    else
        bad "core: the CMake consumer printed: $out"
    fi
else
    bad "core: cmake: $(tail -20 "$work/cmc.log")"
fi

# --- the worked example: 2x2 (DP x TP) against one rank ------------------------------------
ex=$here/../../examples/tensor_parallel_mlp
if cmake -S "$ex" -B "$work/mlp" -DCMAKE_PREFIX_PATH="$prefix" >"$work/mlp.log" 2>&1 &&
    cmake --build "$work/mlp" >>"$work/mlp.log" 2>&1; then
    dist=$(LD_LIBRARY_PATH=$prefix/lib timeout 120 "${launch[@]}" -n 4 "$work/mlp/mlp" 2x2 2>&1)
    single=$(LD_LIBRARY_PATH=$prefix/lib timeout 120 "${launch[@]}" -n 1 "$work/mlp/mlp" 1x1 2>&1)
    # step 0 bit for bit (its arithmetic is exact), every step within 1e-13 relative
    verdict=$(paste -d' ' <(grep '^step' <<<"$dist") <(grep '^step' <<<"$single") | awk '
        NF != 10 { bad = 1 } { n++ }
        $1 == "step" && $2 == 0 && $5 != $10 { bad = 1 }
        { d = $4 - $9; if (d < 0) d = -d; r = d / ($9 < 0 ? -$9 : $9); if (r > 1e-13) bad = 1;
          if (r > worst) worst = r }
        END { if (n != 4) bad = 1; printf "%s %d %.1e\n", bad ? "bad" : "ok", n, worst }')
    read -r v nsteps worst <<<"$verdict"
    if [ "$v" = ok ]; then
        ok "example: tensor_parallel_mlp on 2x2 and on 1 rank: $nsteps steps, step 0 equal to the bit, largest relative difference $worst"
    else
        bad "example: 2x2 printed: $dist; 1 rank printed: $single"
    fi
else
    bad "example: build: $(tail -20 "$work/mlp.log")"
fi

# --- every header from C++ -----------------------------------------------------------------
# MPI's own C++ bindings (removed from the standard in MPI-3, still in Open MPI's mpi.h)
# do not pass -Werror; C++ programs that use MPI's C API skip them as both MPIs document.
cxxdefs=(-DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX)
[ -f "$prefix/include/dtr/dtr_cuda.h" ] && cxxdefs+=(-DDTR_TEST_CUDA)
# shellcheck disable=SC2046
if g++ -std=c++17 -Wall -Wextra -pedantic -Werror "${cxxdefs[@]}" "$here/all_headers.cpp" \
    $(pkg-config --cflags --libs dtr) -o "$work/cxx" 2>"$work/cxx.log"; then
    out=$(LD_LIBRARY_PATH=$prefix/lib "$work/cxx" 2>&1)
    [ "$out" = "c++: dtr $pc_version, DTR_ERR_PARSE" ] && ok "c++: $(ls "$prefix/include/dtr" | wc -l) headers in g++ -std=c++17 -pedantic -Werror; ran: $out" || bad "c++ program printed: $out"
else
    bad "c++: $(head -20 "$work/cxx.log")"
fi

# --- abi: a struct of another size in the headers is refused, by name --------------------------
cat >"$work/abi.c" <<'EOF'
#include <stdio.h>
#include <dtr/dtr_mpi.h>
int main(void) {
    dtr_status_t a = dtr_check_headers();
    printf("dtr: %s\n", a == DTR_OK ? "ok" : dtr_last_error());
    dtr_status_t b = dtr_mpi_check_headers();
    printf("mpi: %s\n", b == DTR_OK ? "ok" : dtr_last_error());
    return a != DTR_OK || b != DTR_OK;
}
EOF
# abi_case LABEL STRUCT EXPECT: the installed headers with an int added to STRUCT's fields
# (none for STRUCT "-"), the program built against them and run; EXPECT is a line of its
# output, and it exits 0 for "-", 1 otherwise.
abi_case() {
    local label=$1 struct=$2 expect=$3 inc=$work/abi_inc/$1 out rc want=1
    [ "$struct" = - ] && want=0
    mkdir -p "$inc/dtr"
    cp "$prefix"/include/dtr/*.h "$inc/dtr/"
    [ "$struct" = - ] || sed -i "s/^} $struct;/    int abi_test_extra;\n} $struct;/" "$inc/dtr/dtr.h" "$inc/dtr/dtr_mpi.h"
    if ! "$mpicc" -I"$inc" "$work/abi.c" -L"$prefix/lib" -ldtr -o "$work/abi_$label" 2>"$work/abi.log"; then
        bad "abi $label: build: $(head -5 "$work/abi.log")"
        return
    fi
    out=$(LD_LIBRARY_PATH=$prefix/lib "$work/abi_$label" 2>&1)
    rc=$?
    if [ $rc -eq $want ] && grep -qF -- "$expect" <<<"$out"; then
        ok "abi $label: exit $rc: $(tr '\n' ' ' <<<"$out")"
    else
        bad "abi $label: exit $rc (want $want), no '$expect' in: $out"
    fi
}
# the sizes the library was built with, from the unchanged headers
printf '#include <stdio.h>\n#include <dtr/dtr_mpi.h>\nint main(void) { printf("%%zu %%zu %%zu\\n", sizeof(dtr_span_t), sizeof(dtr_batch_plan_t), sizeof(dtr_mpi_group_info_t)); return 0; }\n' >"$work/abi_sizes.c"
"$mpicc" -I"$prefix/include" "$work/abi_sizes.c" -o "$work/abi_sizes" 2>"$work/abi.log" || bad "abi: sizes: $(cat "$work/abi.log")"
read -r span_size batch_size group_size < <("$work/abi_sizes")
v=$pc_version
abi_case same - "dtr: ok"$'\n'"mpi: ok"
abi_case span dtr_span_t "dtr: dtr_abi_check: sizeof(dtr_span_t) is $((span_size + 8)) in the headers and $span_size in library $v"
abi_case batch dtr_batch_plan_t "dtr: dtr_abi_check: sizeof(dtr_batch_plan_t) is $((batch_size + 8)) in the headers and $batch_size in library $v"
abi_case mpi dtr_mpi_group_info_t "mpi: dtr_mpi_abi_check: sizeof(dtr_mpi_group_info_t) is $((group_size + 8)) in the headers and $group_size in library $v"

# --- the installed CLI ----------------------------------------------------------------------
out=$(env -u LD_LIBRARY_PATH "$prefix/bin/dtr" plan --mesh 2x2 --shape 8x8 --from 'S(0),S(1)' --to 'S(1),S(0)' --json 2>&1)
grep -q '"steps":\[{"mesh_dim":-1,"kind":"exchange"' <<<"$out" && ok "cli: bin/dtr plan runs (libdtr.so from ../lib)" || bad "cli: $out"
out=$(env -u LD_LIBRARY_PATH timeout 60 "${launch[@]}" -n 4 "$prefix/bin/dtr" run --mesh 2x2 --shape 16x8 --from 'S(0),R' --to 'R,S(1)' --verify --iters 2 2>&1)
grep -q 'verified: all' <<<"$out" && ok "cli: mpirun -n 4 bin/dtr run --verify" || bad "cli run: $out"

# --- Gloo: no MPI, the processes started by tools/dtr_launch.sh -----------------------------
if [ -e "$prefix/lib/libdtr_gloo.so.0" ]; then
    if ldd "$lib" | grep -qi gloo; then bad "gloo: ldd libdtr.so.0 names Gloo: $(ldd "$lib")"; else ok "gloo: ldd libdtr.so.0 names no Gloo library (libdtr_gloo.so.0 is apart)"; fi
    launcher=$here/../../tools/dtr_launch.sh
    out=$(env -u LD_LIBRARY_PATH timeout 60 bash "$launcher" -n 4 "$prefix/bin/dtr" run --backend gloo --mesh 2x2 --shape 16x9 --from 'S(0),P' --to 'R,S(1)' --fill random --verify --iters 2 2>&1)
    grep -q 'verified: all' <<<"$out" && grep -q '4 ranks (gloo backend' <<<"$out" && ok "gloo: dtr_launch.sh -n 4 bin/dtr run --backend gloo --verify" || bad "gloo: cli run: $out"
    # shellcheck disable=SC2046
    if gcc -Wall -Wextra -Werror "$here/gloo_consumer.c" $(pkg-config --cflags --libs dtr-gloo) \
        -o "$work/gloo_pc" 2>"$work/gloo_cc.log"; then
        out=$(LD_LIBRARY_PATH=$prefix/lib timeout 60 bash "$launcher" -n 3 "$work/gloo_pc" 2>&1)
        if [ "$(grep -c '^gloo_consumer: 6 passed, 0 failed$' <<<"$out")" -eq 3 ]; then
            ok "gloo: gcc gloo_consumer.c \$(pkg-config --cflags --libs dtr-gloo) on 3 processes: 6 passed each"
        else
            bad "gloo: the consumer printed: $out"
        fi
    else
        bad "gloo: gcc failed: $(cat "$work/gloo_cc.log")"
    fi
    [ "$(pkg-config --modversion dtr-gloo)" = "$pc_version" ] && ok "gloo: dtr-gloo.pc $pc_version" || bad "gloo: dtr-gloo.pc version '$(pkg-config --modversion dtr-gloo)'"
    grep -q 'dtr::gloo' "$prefix/lib/cmake/dtr/dtrConfig.cmake" && ok "gloo: dtrConfig.cmake defines dtr::gloo" || bad "gloo: no dtr::gloo in dtrConfig.cmake"
fi

# --- the installed CLI loads CUDA and NCCL when a run asks (one install for CPU and GPU) ----
gpu_run=(run --mesh 1 --shape 8 --from R --to R --device cuda --verify --iters 1)
if [ -e "$prefix/lib/libdtr_cuda.so.0" ]; then
    out=$(env -u LD_LIBRARY_PATH timeout 60 "${launch[@]}" -n 1 "$prefix/bin/dtr" "${gpu_run[@]}" 2>&1)
    rc=$?
    if { [ $rc -eq 0 ] && grep -q 'verified: all' <<<"$out"; } ||
        { [ $rc -eq 1 ] && grep -q 'no GPU visible' <<<"$out"; }; then
        ok "cli: bin/dtr run --device cuda loads libdtr_cuda.so.0: exit $rc ($(grep -oE 'verified: all|no GPU visible' <<<"$out" | head -1))"
    else
        bad "cli: bin/dtr run --device cuda: exit $rc: $out"
    fi
fi
# the same tree without the CUDA libraries (a CPU-only install): the run says so, exit 2
cp -a "$prefix" "$work/cpu_only"
rm -f "$work"/cpu_only/lib/libdtr_cuda.so* "$work"/cpu_only/lib/libdtr_nccl.so*
out=$(env -u LD_LIBRARY_PATH timeout 60 "${launch[@]}" -n 1 "$work/cpu_only/bin/dtr" "${gpu_run[@]}" 2>&1)
rc=$?
if [ $rc -eq 2 ] && grep -q 'dtr run: --device cuda: this install has no CUDA library (libdtr_cuda.so.0' <<<"$out"; then
    ok "cli: without libdtr_cuda.so.0, --device cuda is refused by name (exit 2)"
else
    bad "cli: a CPU-only tree's --device cuda: exit $rc: $out"
fi
out=$(env -u LD_LIBRARY_PATH timeout 60 "${launch[@]}" -n 2 "$work/cpu_only/bin/dtr" run --mesh 2 --shape 8 --from 'S(0)' --to R --verify --iters 1 2>&1)
grep -q 'verified: all' <<<"$out" && ok "cli: a CPU-only tree runs on cpu" || bad "cli: a CPU-only tree's run: $out"

# --- the man page: `man dtr` from the tree, every command and flag of the help in it -------
manpath=$(MANPATH=$prefix/share/man man -w dtr 2>&1)
page=$(MANPATH=$prefix/share/man MANWIDTH=200 man -P cat dtr 2>/dev/null)
flags_missing=""
for cmd in layout plan run grad; do
    grep -q "COMMAND: DTR ${cmd^^}" <<<"$page" || flags_missing+=" (section of $cmd)"
    for f in $("$prefix/bin/dtr" "$cmd" --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
        grep -qF -- "$f" <<<"$page" || flags_missing+=" $cmd $f"
    done
done
if [ "$manpath" = "$prefix/share/man/man1/dtr.1" ] && grep -q '^NAME' <<<"$page" && [ -z "$flags_missing" ]; then
    ok "man: MANPATH=\$prefix/share/man man dtr: $(wc -l <<<"$page") lines, every command's section and flags"
else
    bad "man: man -w said '$manpath'; missing:${flags_missing:- none}; page starts: $(head -3 <<<"$page")"
fi
# PATH alone finds it too (man looks in ../share/man beside each bin/ on PATH)
[ "$(PATH=$prefix/bin:$PATH man -w dtr 2>&1)" = "$prefix/share/man/man1/dtr.1" ] && ok "man: found through PATH=\$prefix/bin" || bad "man: through PATH: $(PATH=$prefix/bin:$PATH man -w dtr 2>&1)"

# --- the licence ---------------------------------------------------------------------------
lic=$(pkg-config --variable=license dtr)
if [ "$lic" = BSD-3-Clause ] && grep -q '^License: BSD-3-Clause$' "$prefix/lib/pkgconfig/dtr.pc" &&
    grep -q '^BSD 3-Clause License$' "$prefix/share/doc/dtr/LICENSE" && [ -s "$prefix/share/doc/dtr/CHANGELOG.md" ]; then
    ok "licence: dtr.pc says $lic; share/doc/dtr has LICENSE and CHANGELOG.md"
else
    bad "licence: dtr.pc says '$lic'; $(ls "$prefix/share/doc/dtr")"
fi

# --- the Debian package ---------------------------------------------------------------------
if [ -n "$deb" ]; then
    maint=$(dpkg-deb -f "$deb" Maintainer)
    copyright=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/doc/dtr/copyright 2>/dev/null)
    if [[ "$maint" =~ ^[^\<]+\ \<[^@\ ]+@[^@\ ]+\>$ ]] && [[ "$maint" != *localhost* ]] &&
        grep -q '^License: BSD-3-Clause$' <<<"$copyright" && grep -q 'Neither the name' <<<"$copyright"; then
        ok "deb: Maintainer: $maint; usr/share/doc/dtr/copyright: BSD-3-Clause"
    else
        bad "deb: Maintainer '$maint'; copyright: $(head -5 <<<"$copyright")"
    fi
    contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
    want="./usr/lib/libdtr.so.0 ./usr/lib/libdtr.a ./usr/include/dtr/dtr.h ./usr/include/dtr/dtr_mpi.h ./usr/lib/pkgconfig/dtr.pc ./usr/lib/cmake/dtr/dtrConfig.cmake ./usr/bin/dtr"
    missing=""
    for f in $want; do grep -qx "$f" <<<"$contents" || missing="$missing $f"; done
    outside=$(grep -vE '^\./(usr/|$)' <<<"$contents" | head -3)
    [ -z "$missing" ] && [ -z "$outside" ] && ok "deb: $(wc -l <<<"$contents") entries, all under /usr" || bad "deb: missing:$missing outside /usr: $outside"
    debv=$(dpkg-deb -f "$deb" Version)
    [ "$debv" = "${pc_version/-/\~}" ] && ok "deb: Version $debv" || bad "deb: Version '$debv', want '${pc_version/-/\~}'"
    depends=$(dpkg-deb -f "$deb" Depends)
    grep -q "$mpilib" <<<"$depends" && ! grep -qi cuda <<<"$depends" && ok "deb: Depends: $depends" || bad "deb: Depends: $depends"
    if apt-get install -s "$deb" >"$work/apt.log" 2>&1 && grep -q '^Inst dtr' "$work/apt.log"; then
        ok "deb: apt-get install -s: $(grep '^Inst dtr' "$work/apt.log")"
    else
        bad "deb: apt-get install -s: $(tail -5 "$work/apt.log")"
    fi
    dpkg-deb -x "$deb" "$work/root"
    # shellcheck disable=SC2046
    if PKG_CONFIG_PATH=$work/root/usr/lib/pkgconfig "$mpicc" "$here/consumer.c" \
        $(PKG_CONFIG_PATH=$work/root/usr/lib/pkgconfig pkg-config --cflags --libs dtr) -o "$work/consumer_deb" 2>"$work/deb.log"; then
        LD_LIBRARY_PATH=$work/root/usr/lib run4 "deb: consumer.c built from the unpacked package" "$work/consumer_deb"
    else
        bad "deb: build from the unpacked package: $(cat "$work/deb.log")"
    fi
fi

echo "install ($mpi): $pass passed, $fail failed"
[ "$fail" -eq 0 ]
