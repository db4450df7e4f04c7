#!/usr/bin/env bash
# Installs every Debian 12 package uroce needs to build, test and benchmark.
# Idempotent and non-interactive. Must run as root (or through sudo).
set -euo pipefail

PKGS=(
  # build
  build-essential meson ninja-build pkg-config clang clang-format lld
  libclang-rt-14-dev llvm
  # libraries
  libdpdk-dev libisal-dev libdeflate-dev zlib1g-dev libibverbs-dev libpcap-dev
  # dpdk-telemetry.py and dpdk-dumpcap against a running uroced (test/integration)
  dpdk-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # independent wire checkers used by the tests
  python3 python3-scapy tshark
  python3-matplotlib  # apps/uroce-perf/uroce-perf-plot: charts of uroce-perf's JSON results
  # rdma-core tools run unmodified over the shim, and network tooling for tests
  ibverbs-utils perftest rdma-core iproute2 ucx-utils libfabric-bin
  # rdma_cm programs over the drop-in librdmacm (drivers/rdmacm: its headers; test cm_apps)
  librdmacm-dev rdmacm-utils
  python3-pyverbs  # rdma-core 44's own test suite (test/verbs/pyverbs.sh), run over the shim
  # uroced integration test (test/integration): ARP and ND probes from the Linux side
  iputils-arping iputils-ping ndisc6
  # the installed tree's test (test/install): systemd-analyze verify on the service unit
  systemd
  # interop suite (test/interop, doc/interop.md): rxe guests under qemu, from the in-tree rig
  # (test/interop/rig). Its image build runs apt-get download / apt-cache (apt), dpkg-deb,
  # tar, gzip, xz, cpio, readelf (binutils), depmod and modinfo (kmod), flock (util-linux);
  # nftables drops frames where the kernel has no tc netem (also the uroced loss test,
  # test/integration/uroced_loss.sh)
  qemu-system-x86 apt dpkg tar gzip xz-utils cpio binutils kmod util-linux nftables
)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
