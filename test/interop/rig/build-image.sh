#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the interop suite's guest image: Debian 12's kernel and an initramfs with the Linux
# RoCE stack (rdma_rxe, ib_uverbs, rdma_cm / rdma_ucm) and stock rdma-core user space
# (ibv_*_pingpong, perftest, rdmacm-utils, `rdma` from iproute2). doc/interop.md, "The rig".
#
# Usage: build-image.sh [-f] IMAGE_DIR
#   -f   rebuild even when IMAGE_DIR holds an image made by this version of the script
# Writes IMAGE_DIR/vmlinux (the kernel, uncompressed: qemu boots it directly), vmlinuz (as
# Debian ships it), initramfs.cpio.gz and image.id (this script's sha256: a changed script
# rebuilds, an unchanged one returns at once). The .deb files stay in IMAGE_DIR/debs and are
# reused. Packages come from the machine's apt sources with `apt-get download` (run
# `apt-get update` once); nothing is installed on the host and nothing outside IMAGE_DIR is
# written. Two builds into the same IMAGE_DIR wait for each other (flock).
#
# The guest's /init reads from the kernel command line (boot-guest.sh sets them):
#   uroce.ip=A.B.C.D/NN  eth0's address      uroce.mtu=N    eth0's MTU (1500)
#   uroce.rxe=0          no rxe0             uroce.shell=1  a shell on the console at the end
# and runs /share/cmd.sh from the 9p share tagged "uroce" (output also to /share/output.log,
# exit status to /share/rc).
set -euo pipefail

usage() {
  echo "usage: $0 [-f] IMAGE_DIR" >&2
  exit 2
}
die() {
  echo "build-image: $*" >&2
  exit 1
}
FORCE=0
while getopts f o; do
  case $o in
    f) FORCE=1 ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
for t in apt-get apt-cache dpkg-deb tar xz gzip cpio readelf depmod modinfo flock sha256sum; do
  command -v "$t" >/dev/null || die "'$t' not found (scripts/install-deps.sh installs it)"
done
mkdir -p "$1" || die "cannot create $1"
OUT=$(cd "$1" && pwd)
ID=$(sha256sum <"${BASH_SOURCE[0]}" | cut -c1-16)

exec 9>"$OUT/.lock"
flock 9
if [ "$FORCE" = 0 ] && [ "$(cat "$OUT/image.id" 2>/dev/null)" = "$ID" ] &&
  [ -s "$OUT/vmlinux" ] && [ -s "$OUT/initramfs.cpio.gz" ]; then
  echo "[image] $OUT is up to date (image.id $ID)"
  exit 0
fi
T0=$(date +%s)
step() { echo "[image] $(($(date +%s) - T0)) s: $*"; }

# The packages, with every library their binaries load (the check below fails on a missing one).
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$KPKG" ] || die "apt-cache knows no linux-image-amd64 (run apt-get update)"
PKGS=(
  busybox-static dash libc6                                   # shell, applets
  kmod libkmod2 liblzma5 libzstd1 libssl3                     # modprobe
  iproute2 libmnl0 libbsd0 libmd0 libcap2 libelf1 libbpf1 zlib1g libtirpc3 libgssapi-krb5-2
  libkrb5-3 libk5crypto3 libcom-err2 libkrb5support0 libkeyutils1 libdb5.3 libselinux1
  libpcre2-8-0 libxtables12                                   # ip, rdma, tc
  libibverbs1 ibverbs-providers ibverbs-utils libnl-3-200 libnl-route-3-200
  librdmacm1 rdmacm-utils perftest libibumad3 libpci3 libudev1 # rdma-core tools
  libgcc-s1  # dlopen()ed by glibc for pthread_cancel / pthread_exit (rping's threads)
)
DEBS=$OUT/debs
mkdir -p "$DEBS"
need=()
for p in "$KPKG" "${PKGS[@]}"; do
  compgen -G "$DEBS/${p}_*.deb" >/dev/null || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  step "apt-get download ${need[*]}"
  (cd "$DEBS" && apt-get -q -o APT::Sandbox::User=root download "${need[@]}") >"$OUT/download.log" 2>&1 ||
    { tail -5 "$OUT/download.log" >&2; die "apt-get download failed (log: $OUT/download.log)"; }
fi
newest() { ls -v "$DEBS/${1}"_*.deb | tail -1; }

WORK=$OUT/build.tmp
rm -rf "$WORK"
ROOT=$WORK/root KTREE=$WORK/kernel
mkdir -p "$ROOT" "$KTREE"
trap 'rm -rf "$WORK"' EXIT

# --- user space: every package into ROOT, without documentation
step "extracting ${#PKGS[@]} packages"
for p in "${PKGS[@]}"; do
  dpkg-deb --fsys-tarfile "$(newest "$p")" | tar -x -C "$ROOT" --exclude=./usr/share/doc \
    --exclude=./usr/share/man --exclude=./usr/share/locale --exclude=./usr/share/lintian \
    --exclude=./usr/share/bug --exclude=./usr/share/info --exclude=./usr/lib/x86_64-linux-gnu/gconv
done
rm -f "$ROOT"/usr/lib/x86_64-linux-gnu/tc/{m_xt,q_atm}.so  # tc plugins for libraries left out
mkdir -p "$ROOT"/{proc,sys,dev,tmp,run,share,root,etc}
# dash is /bin/sh: Debian's busybox-static runs its own applet for a command name (ip,
# modprobe, ...) even when a real binary of that name is in PATH; dash follows PATH.
ln -sf dash "$ROOT/bin/sh"
nlinks=0
for a in $("$ROOT/bin/busybox" --list-full); do
  n=${a##*/}
  for d in bin sbin usr/bin usr/sbin; do
    [ -e "$ROOT/$d/$n" ] || [ -L "$ROOT/$d/$n" ] && continue 2
  done
  mkdir -p "$ROOT/${a%/*}"
  ln -s /bin/busybox "$ROOT/$a"
  nlinks=$((nlinks + 1))
done
step "$nlinks busybox applets where no real binary has the name"
echo "root:x:0:0:root:/root:/bin/sh" >"$ROOT/etc/passwd"
echo "root:x:0:" >"$ROOT/etc/group"
echo "127.0.0.1 localhost" >"$ROOT/etc/hosts"

# Every shared library an ELF file in the image asks for must be in the image.
missing=""
while IFS= read -r -d '' f; do
  for so in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [ -e "$ROOT/lib/x86_64-linux-gnu/$so" ] || [ -e "$ROOT/usr/lib/x86_64-linux-gnu/$so" ] ||
      missing="$missing ${f#"$ROOT"}:$so"
  done
done < <(find "$ROOT/bin" "$ROOT/sbin" "$ROOT/usr/bin" "$ROOT/usr/sbin" "$ROOT/lib" "$ROOT/usr/lib" \
  -type f \( -perm -u+x -o -name '*.so*' \) -print0)
[ -z "$missing" ] || die "libraries missing from the image (add their packages to PKGS):$missing"
step "every binary's shared libraries are in the image"

# --- kernel: the image, and the modules the guest loads with what they depend on
step "extracting $KPKG"
dpkg-deb --fsys-tarfile "$(newest "$KPKG")" | tar -x -C "$KTREE" ./boot ./lib/modules
KVER=$(ls "$KTREE/lib/modules")
cp "$KTREE/boot/vmlinuz-$KVER" "$WORK/vmlinuz"
# Debian's bzImage holds an XZ stream: the plain ELF inside boots through qemu's PVH entry,
# which skips the BIOS and the decompression (about 4 s less under TCG).
off=$(LC_ALL=C grep -m1 -obUaP '\xfd7zXZ\x00' "$WORK/vmlinuz" | cut -d: -f1) ||
  die "no XZ stream in vmlinuz-$KVER"
xz -dc --single-stream < <(tail -c +$((off + 1)) "$WORK/vmlinuz") >"$WORK/vmlinux" ||
  die "cannot decompress vmlinuz-$KVER"
MODS=(virtio_pci virtio_net 9pnet_virtio 9p crc32_generic rdma_rxe ib_uverbs rdma_cm rdma_ucm ib_umad)
declare -A path_of
while IFS= read -r -d '' f; do
  n=${f##*/}
  n=${n%%.ko*}
  path_of[${n//-/_}]=${f#"$KTREE/"}
done < <(find "$KTREE/lib/modules/$KVER" -name '*.ko*' -print0)
declare -A taken
todo=("${MODS[@]}")
while [ ${#todo[@]} -gt 0 ]; do
  m=${todo[0]//-/_}
  todo=("${todo[@]:1}")
  [ -z "${taken[$m]:-}" ] || continue
  if [ -z "${path_of[$m]:-}" ]; then
    grep -q "/${m}.ko" "$KTREE/lib/modules/$KVER/modules.builtin" || die "no module $m in $KPKG"
    taken[$m]=builtin
    continue
  fi
  taken[$m]=${path_of[$m]}
  mkdir -p "$ROOT/$(dirname "${path_of[$m]}")"
  cp "$KTREE/${path_of[$m]}" "$ROOT/${path_of[$m]}"
  IFS=, read -ra deps <<<"$(modinfo -F depends "$KTREE/${path_of[$m]}")"
  todo+=("${deps[@]}")
done
cp "$KTREE/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} "$ROOT/lib/modules/$KVER/"
depmod -b "$ROOT" "$KVER"
step "kernel $KVER, ${#taken[@]} modules: ${!taken[*]}"

cat >"$ROOT/init" <<'EOF'
#!/bin/sh
# The guest's init (test/interop/rig/build-image.sh): network, rxe0, /share/cmd.sh, power off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts
mount -t devpts devpts /dev/pts
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "[guest $(up) s] $*"; }
IP="" MTU=1500 RXE=1 SHELL_AT_END=0
for o in $(cat /proc/cmdline); do
  case $o in
    uroce.ip=*) IP=${o#*=} ;;
    uroce.mtu=*) MTU=${o#*=} ;;
    uroce.rxe=*) RXE=${o#*=} ;;
    uroce.shell=*) SHELL_AT_END=${o#*=} ;;
  esac
done
for m in virtio_pci virtio_net 9pnet_virtio 9p crc32_generic rdma_rxe ib_uverbs rdma_ucm ib_umad; do
  modprobe "$m" || say "modprobe $m failed"
done
ip link set lo up
if [ -n "$IP" ]; then
  ip link set eth0 mtu "$MTU" up && ip addr add "$IP" dev eth0 && say "eth0 $IP mtu $MTU"
  if [ "$RXE" != 0 ]; then
    rdma link add rxe0 type rxe netdev eth0 && say "rxe0 on eth0"
  fi
fi
if mount -t 9p -o trans=virtio,version=9p2000.L uroce /share 2>/dev/null && [ -f /share/cmd.sh ]; then
  say "running /share/cmd.sh"
  cd /tmp
  { sh /share/cmd.sh 2>&1; echo $? >/share/rc; } | tee /share/output.log
  say "cmd.sh exit $(cat /share/rc)"
fi
[ "$SHELL_AT_END" = 1 ] && setsid cttyhack sh
sync
say "poweroff"
poweroff -f
EOF
chmod +x "$ROOT/init"

step "packing the initramfs"
(cd "$ROOT" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 | gzip -1) >"$WORK/initramfs.cpio.gz"
rm -f "$OUT/image.id"
mv -f "$WORK/vmlinux" "$WORK/vmlinuz" "$WORK/initramfs.cpio.gz" "$OUT/"
echo "$ID" >"$OUT/image.id"
step "done: $OUT/vmlinux, initramfs.cpio.gz $(du -h "$OUT/initramfs.cpio.gz" | cut -f1) (image.id $ID)"
