#!/usr/bin/env bash
# Installs dtr for programs built outside the project: headers, libraries, pkg-config and
# CMake files, the CLI and the docs, under one prefix and nowhere else; optionally a Debian
# package of the same tree. Builds with Bazel first (tools/setup.sh installs what that needs).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: bash tools/install.sh --prefix DIR [--mpi openmpi|mpich] [--no-cuda] [--deb OUTDIR]
                               [--maintainer 'NAME <EMAIL>']

  --prefix DIR   where to install (created if missing); nothing is written outside it:
                   DIR/include/dtr/   dtr.h (the whole API), dtr_mpi.h, dtr_core.h (layouts
                                      and plans alone), dtr_checkpoint.h (safetensors
                                      checkpoints), where Gloo was found dtr_gloo.h, and
                                      where CUDA was found dtr_cuda.h, dtr_nccl.h
                   DIR/lib/           libdtr.so.X.Y.Z (SONAME libdtr.so.X) and its links,
                                      libdtr.a, libdtr_core.so* (no MPI), libdtr_gloo.so*
                                      (the Gloo backend: Debian's libgloo0),
                                      libdtr_cuda.so*, libdtr_nccl.so*
                   DIR/lib/pkgconfig/ dtr.pc, dtr-core.pc (dtr-gloo.pc, dtr-cuda.pc,
                                      dtr-nccl.pc)
                   DIR/lib/cmake/dtr/ dtrConfig.cmake, dtrConfigVersion.cmake
                   DIR/bin/dtr        the CLI (finds libdtr.so in ../lib; --backend gloo
                                      loads libdtr_gloo.so from there)
                   DIR/share/man/man1/dtr.1  its man page (`man dtr` with DIR/share/man on
                                      MANPATH, or from DIR/bin on PATH)
                   DIR/share/doc/dtr/ README, LICENSE (BSD-3-Clause), CHANGELOG.md, docs
  --mpi NAME     the MPI to build for: openmpi (default) or mpich; the two are not ABI
                 compatible, so a tree is for one of them (dtr.pc's `mpi` variable says which)
  --no-cuda      leave out the CUDA memory space and the NCCL backend even where the CUDA
                 toolkit is found
  --deb OUTDIR   also write OUTDIR/dtr_VERSION_amd64.deb (dtr-mpich_... for --mpi mpich):
                 the same tree under /usr, CPU only, with its dependencies declared and
                 the licence in /usr/share/doc/dtr/copyright
  --maintainer 'NAME <EMAIL>'
                 the package's Maintainer field; default: DEBFULLNAME and DEBEMAIL where
                 set (Debian's convention), else the author of the checkout's last commit
  --help         this text

The installed files are relocatable (dtr.pc and dtrConfig.cmake find the tree from their
own place), so the tree may be moved or unpacked elsewhere. docs/integration.md says how to
link against it.
EOF
}

prefix="" mpi=openmpi cuda=1 deb="" maintainer=""
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }; prefix=$2; shift 2 ;;
    --mpi) [ $# -ge 2 ] || { echo "install.sh: --mpi needs openmpi or mpich" >&2; exit 2; }; mpi=$2; shift 2 ;;
    --no-cuda) cuda=0; shift ;;
    --deb) [ $# -ge 2 ] || { echo "install.sh: --deb needs a directory" >&2; exit 2; }; deb=$2; shift 2 ;;
    --maintainer) [ $# -ge 2 ] || { echo "install.sh: --maintainer needs 'NAME <EMAIL>'" >&2; exit 2; }; maintainer=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$prefix" ] || { echo "install.sh: --prefix DIR is required (see --help)" >&2; exit 2; }
if [ -z "$maintainer" ] && [ -n "${DEBEMAIL:-}" ]; then
    maintainer="${DEBFULLNAME:-dtr maintainers} <$DEBEMAIL>"
elif [ -z "$maintainer" ]; then
    maintainer=$(git -C "$(dirname "$0")/.." log -1 --format='%an <%ae>' 2>/dev/null || true)
fi
if [ -n "$deb" ] && ! [[ "$maintainer" =~ ^[^\<\>]+\ \<[^@\<\>\ ]+@[^@\<\>\ ]+\>$ ]]; then
    echo "install.sh: --maintainer: '$maintainer' is not 'NAME <EMAIL>' (set --maintainer or DEBEMAIL)" >&2
    exit 2
fi
case $mpi in
openmpi) mpi_name="Open MPI" mpi_pkg=ompi-c mpicc=mpicc.openmpi flags=() ;;
mpich) mpi_name="MPICH" mpi_pkg=mpich mpicc=mpicc.mpich flags=(--config=mpich) ;;
*) echo "install.sh: --mpi: '$mpi' is not openmpi or mpich" >&2; exit 2 ;;
esac
[ "$cuda" -eq 1 ] || flags+=(--config=nocuda)

src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
bash tools/setup.sh
echo "install.sh: building (bazel build ${flags[*]} //dist/... //cli:dtr_installed)" >&2
bazel build --noshow_progress "${flags[@]}" //dist/... //cli:dtr_installed //:version_number 2>&1 |
    grep -E '^(ERROR|FAILED)|error:' >&2 || true
bin=$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)
[ -f "$bin/dist/libdtr.so" ] && [ -f "$bin/cli/dtr_installed" ] ||
    { echo "install.sh: the build failed (run the bazel command above for the details)" >&2; exit 1; }
# the numbers (file names, CMake) and the full string ("0.9.1-dev" in a tree past a release:
# pkg-config, the Debian package as 0.9.1~dev, which sorts before the release)
full=$(sed -n 's/^#define DTR_VERSION_STRING "\(.*\)"$/\1/p' "$bin/dtr_version.h")
version=${full%%-*}
major=${version%%.*}
# Whether this configuration built the CUDA libraries (stale ones may lie in bazel-bin).
has_cuda=$(grep -c '^CUDA_AVAILABLE = True' "$(bazel info "${flags[@]}" output_base 2>/dev/null)/external/local_cuda/defs.bzl" || true)
[ "$cuda" -eq 1 ] || has_cuda=0
# Whether Bazel found Gloo (Debian's libgloo-dev) for libdtr_gloo.so.
has_gloo=$(grep -c '^GLOO_AVAILABLE = True' "$(bazel info "${flags[@]}" output_base 2>/dev/null)/external/gloo/defs.bzl" || true)
cuda_lib=$(sed -n 's/^CUDA_PATH = "\(.*\)"$/\1/p' "$(bazel info output_base 2>/dev/null)/external/local_cuda/defs.bzl")/lib64

# lay_out DIR CUDA: the installed tree under DIR (CUDA 1: with the CUDA and NCCL parts).
lay_out() {
    local d=$1 with_cuda=$2 lib
    mkdir -p "$d/include/dtr" "$d/lib/pkgconfig" "$d/lib/cmake/dtr" "$d/bin" "$d/share/doc/dtr"
    python3 dist/flatten_header.py "$d/include/dtr/dtr.h" dtr.h --dir . --dir "$bin"
    python3 dist/flatten_header.py "$d/include/dtr/dtr_mpi.h" backends/mpi/dtr_mpi.h \
        --dir . --dir "$bin" --as dtr.h=dtr.h
    python3 dist/flatten_header.py "$d/include/dtr/dtr_core.h" dtr_core.h --dir . --dir "$bin"
    python3 dist/flatten_header.py "$d/include/dtr/dtr_checkpoint.h" checkpoint/dtr_checkpoint.h \
        --dir . --dir "$bin" --as dtr.h=dtr.h
    local libs=(libdtr libdtr_core)
    if [ "$has_gloo" -eq 1 ]; then
        libs+=(libdtr_gloo)
        python3 dist/flatten_header.py "$d/include/dtr/dtr_gloo.h" backends/gloo/dtr_gloo.h \
            --dir . --dir "$bin" --as dtr.h=dtr.h
    fi
    if [ "$with_cuda" -eq 1 ]; then
        libs+=(libdtr_cuda libdtr_nccl)
        python3 dist/flatten_header.py "$d/include/dtr/dtr_cuda.h" backends/cuda/dtr_cuda.h \
            --dir . --dir "$bin" --as dtr.h=dtr.h
        python3 dist/flatten_header.py "$d/include/dtr/dtr_nccl.h" backends/nccl/dtr_nccl.h \
            --dir . --dir "$bin" --as dtr.h=dtr.h --as dtr_cuda.h=backends/cuda/dtr_cuda.h
    fi
    for lib in "${libs[@]}"; do
        install -m 755 "$bin/dist/$lib.so" "$d/lib/$lib.so.$version"
        ln -sf "$lib.so.$version" "$d/lib/$lib.so.$major"
        ln -sf "$lib.so.$major" "$d/lib/$lib.so"
    done
    install -m 644 "$bin/dist/libdtr.a" "$d/lib/libdtr.a"
    install -m 755 "$bin/cli/dtr_installed" "$d/bin/dtr"
    mkdir -p "$d/share/man/man1"
    bash tools/man.sh "$d/bin/dtr" "$d/share/man/man1/dtr.1"
    local subst=(-e "s|@VERSION@|$version|g" -e "s|@FULL_VERSION@|$full|g" -e "s|@MAJOR@|$major|g" -e "s|@MPI@|$mpi|g"
        -e "s|@MPI_NAME@|$mpi_name|g" -e "s|@MPI_PKG@|$mpi_pkg|g" -e "s|@MPICC@|$mpicc|g"
        -e "s|@CUDA_LIB@|$cuda_lib|g")
    sed "${subst[@]}" dist/dtr.pc.in >"$d/lib/pkgconfig/dtr.pc"
    sed "${subst[@]}" dist/dtr-core.pc.in >"$d/lib/pkgconfig/dtr-core.pc"
    [ "$has_gloo" -eq 0 ] || sed "${subst[@]}" dist/dtr-gloo.pc.in >"$d/lib/pkgconfig/dtr-gloo.pc"
    if [ "$with_cuda" -eq 1 ]; then
        sed "${subst[@]}" dist/dtr-cuda.pc.in >"$d/lib/pkgconfig/dtr-cuda.pc"
        sed "${subst[@]}" dist/dtr-nccl.pc.in >"$d/lib/pkgconfig/dtr-nccl.pc"
    fi
    sed "${subst[@]}" dist/dtrConfig.cmake.in >"$d/lib/cmake/dtr/dtrConfig.cmake"
    # 0.x: a new minor version may change the ABI (docs/integration.md), so only the same
    # MAJOR.MINOR satisfies a request.
    local compat=SameMinorVersion
    [ "$major" -eq 0 ] || compat=SameMajorVersion
    cmake -DOUT="$d/lib/cmake/dtr/dtrConfigVersion.cmake" -DVERSION="$version" \
        -DCOMPAT="$compat" -P dist/version_file.cmake
    install -m 644 README.md LICENSE CHANGELOG.md docs/*.md "$d/share/doc/dtr/"
    [ -d examples ] && cp -r examples "$d/share/doc/dtr/"
    return 0
}

mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
lay_out "$prefix" "$has_cuda"
echo "install.sh: dtr $full for $mpi_name installed in $prefix" >&2

# deb_depends FILE...: "pkg (>= version)" for every Debian package whose library the
# files load (their NEEDED entries, libdtr's own left out), comma-separated.
deb_depends() {
    local f lib path pkg deps=()
    for lib in $(for f in "$@"; do readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; done | sort -u); do
        case $lib in libdtr*) continue ;; esac
        path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
        [ -n "$path" ] || { echo "install.sh: --deb: $lib not found by ldconfig" >&2; exit 1; }
        pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1)
        [ -n "$pkg" ] || pkg=$(dpkg -S "$(readlink -f "$path")" | head -1 | cut -d: -f1)
        deps+=("$pkg (>= $(dpkg-query -W -f='${Version}' "$pkg"))")
    done
    printf '%s\n' "${deps[@]}" | sort -u | paste -sd, | sed 's/,/, /g'
}

if [ -n "$deb" ]; then
    mkdir -p "$deb"
    deb=$(cd "$deb" && pwd)
    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' EXIT
    lay_out "$stage/usr" 0
    pkg=dtr conflicts=dtr-mpich dev=libopenmpi-dev
    [ "$mpi" = openmpi ] || pkg=dtr-mpich conflicts=dtr dev=libmpich-dev
    depends="$(deb_depends "$stage/usr/lib/libdtr.so.$version" "$stage/usr/bin/dtr"), $dev"
    mkdir -p "$stage/DEBIAN"
    cat >"$stage/DEBIAN/control" <<EOF
Package: $pkg
Version: ${full/-/\~}
Architecture: amd64
Maintainer: $maintainer
Section: libdevel
Priority: optional
Depends: $depends
Recommends: pkg-config, cmake$([ "$has_gloo" -eq 0 ] || echo ", libgloo0")
Conflicts: $conflicts
Installed-Size: $(du -sk "$stage/usr" | cut -f1)
Description: DTensor placement and redistribution library and CLI ($mpi_name)
 dtr describes how a tensor is spread over a mesh of devices (sharded, replicated or
 partial) and moves it from one layout to another with the fewest bytes. This package
 holds libdtr.so.$major, libdtr.a, <dtr/dtr.h>, <dtr/dtr_mpi.h>, dtr.pc, the CMake
 package dtr::dtr and the dtr CLI, built for $mpi_name, CPU only.
EOF
    # Debian's machine-readable copyright file names the licence of what the package holds.
    {
        printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n'
        printf 'Upstream-Name: dtr\n\nFiles: *\nCopyright: 2026 the dtr authors\nLicense: BSD-3-Clause\n'
        sed -n '/^Redistribution/,$p' LICENSE | sed 's/^$/./; s/^/ /'
    } >"$stage/usr/share/doc/dtr/copyright"
    dpkg-deb --root-owner-group --build "$stage" "$deb/${pkg}_${full/-/\~}_amd64.deb" >&2
fi
