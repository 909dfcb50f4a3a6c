#!/usr/bin/env bash
# The GPU pack on a bare machine without a GPU, so that it cannot rot between GPU runs:
# tools/gpu_device_pack.sh packs into a folder of the checkout, then its run.sh runs in a
# chroot that holds only what a GPU machine with nothing but its driver and CUDA runtime has:
# the C library, Debian's essential tools (bash, coreutils, grep, sed, findutils, tar, gzip,
# ldconfig) and the libraries they load, NCCL where PyTorch's wheel puts it (a copy of the
# build machine's), the checkout's tracked files and the pack; no ssh, no Criterion, no MPI,
# no GPU. Every part must start, end with exit 0 and say "no GPU"; no library may be missing
# and no MPI component noise printed; the output folder holds at most 8 files, the parts'
# logs in parts.tar. Ends with "gpu_pack: N passed, N failed".
#
# Usage: bash tests/tools/gpu_pack_test.sh   (root: unshare, mount and chroot; from the checkout)
set -u
cd "$(dirname "$0")/../.."
pass=0 fail=0
ok() {
    if eval "$2"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $1"
    fi
}
finish() {
    echo "gpu_pack: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
pack=.gpu_pack_test
root=$(mktemp -d)
trap 'rm -rf "$root" "$pack"' EXIT
if ! bash tools/gpu_device_pack.sh "$pack" >"$root.log" 2>&1; then
    cat "$root.log"
    rm -f "$root.log"
    fail=1
    finish
    exit 1
fi
rm -f "$root.log"
kib=$(du -sk "$pack" | cut -f1)
ok "the pack is $kib KiB, under the 60 MiB that leave room in the device tool's 64 MiB carry" \
    '[ "$kib" -lt $((60 * 1024)) ]'

# The bare root: the essential packages' files and the libraries their programs load, with
# /bin, /sbin, /lib and /lib64 in /usr as Debian 12 and Ubuntu lay them out.
for d in bin sbin lib lib64; do
    mkdir -p "$root/usr/$d"
    ln -s "usr/$d" "$root/$d"
done
for p in libc6 libc-bin coreutils bash grep sed findutils tar gzip; do
    dpkg -L "$p" | while read -r f; do
        [ -d "$f" ] && [ ! -L "$f" ] && continue
        case $f in /usr/share/doc/* | /usr/share/man/* | /usr/share/info/* | /usr/share/locale/*) continue ;; esac
        mkdir -p "$root$(dirname "$f")"
        cp -a "$f" "$root$f"
    done
done
for f in "$root"/usr/bin/* "$root"/usr/sbin/*; do ldd "$f" 2>/dev/null; done |
    awk '/=> \//{print $3}' | sort -u | while read -r l; do
    [ -e "$root$l" ] || { mkdir -p "$root$(dirname "$l")"; cp -L "$l" "$root$l"; }
done
nccl=$(find /usr/local/cuda/lib /usr/local/cuda/lib64 /usr/lib -name 'libnccl.so.2' 2>/dev/null | head -1)
mkdir -p "$root/opt/torch/nvidia/nccl/lib" "$root/work" "$root/out" "$root/proc" "$root/dev" "$root/sys" \
    "$root/tmp" "$root/etc" "$root/root"
[ -n "$nccl" ] && cp -L "$nccl" "$root/opt/torch/nvidia/nccl/lib/"
echo "root:x:0:0:root:/root:/bin/bash" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"
echo "127.0.0.1 localhost" >"$root/etc/hosts"
git ls-files -z | xargs -0 cp -a --parents -t "$root/work"
cp -a "$pack" "$root/work/.dev"
ok "no ssh, rsh, mpirun or Criterion in the bare root" \
    '[ ! -e "$root/usr/bin/ssh" ] && [ ! -e "$root/usr/bin/mpirun" ] && ! ls "$root"/usr/lib/x86_64-linux-gnu/libcriterion* >/dev/null 2>&1'

# The run, as the device tool runs it: from the checkout's root, OUT an empty folder.
unshare --mount --fork bash -c '
    mount --rbind /dev "$0/dev" && mount -t proc proc "$0/proc" && mount --rbind /sys "$0/sys" &&
    mount -t tmpfs tmpfs "$0/tmp" &&
    exec chroot "$0" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root OUT=/out \
        DTR_PACK_DEADLINE_S=400 DTR_PACK_CASES=20 /bin/bash -c "cd /work && bash .dev/run.sh"' \
    "$root" >"$root/run.txt" 2>&1
rc=$?
log="$root/out/log.txt"
sed 's/^/  /' "$log" 2>/dev/null | head -120
ok "run.sh exits 0 (exit $rc)" '[ $rc -eq 0 ]'
ok "log.txt came back" '[ -s "$log" ]'
ok "the output folder holds at most 8 files" '[ "$(find "$root/out" -type f | wc -l)" -le 8 ]'
mkdir -p "$root/parts"
tar -xf "$root/out/parts.tar" -C "$root/parts" 2>/dev/null
for p in info kernels grad nccl adopt checkpoint model exec premul bench; do
    ok "part $p started" 'grep -q "^== $p (at " "$log"'
done
# each part's summary line (a part may run several binaries)
for s in info kernels grad_cuda group_cuda exec_nccl-id exec_nccl-comm adopt checkpoint \
    grad_model gpu_test premul_nccl premul_cuda bench; do
    ok "$s ends with exit 0 and says no GPU" 'grep -qx "$s: exit 0 (no GPU)" "$log"'
    [ "$s" = info ] || ok "$s: its log is in parts.tar" '[ -f "$root/parts/$s.txt" ]'
done
ok "the run finished, nothing skipped for the deadline" 'grep -qx "done at [0-9]*s" "$log"'
all=$(cat "$log" "$root"/parts/*.txt "$root/run.txt" 2>/dev/null)
ok "no library missing" '! grep -q "error while loading shared libraries" <<<"$all"'
ok "no rsh agent looked for" '! grep -qi "rsh.*not found" <<<"$all"'
ok "no MPI component noise" '! grep -q "unable to open mca_" <<<"$all"'
ok "NCCL's version printed" 'grep -qE "^NCCL: .*libnccl.so.2 \(NCCL version [0-9]" "$log"'
ok "the binaries say why they skip" '[ "$(grep -c "no GPU visible" <<<"$all")" -ge 8 ]'
if [ "$fail" -gt 0 ]; then
    echo "  the chroot's own output:"
    tail -20 "$root/run.txt" | sed 's/^/  /'
fi
finish
