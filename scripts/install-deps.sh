#!/usr/bin/env bash
# Installs what nfkit needs on a Debian machine, only what is missing:
# the BPF toolchain (clang, llvm, bpftool, libbpf headers), the libraries the
# vendored libbpf links against (libelf, zlib), iproute2 for the testbeds, strace (to
# read what `tc` itself sends, against which the offload's pedit encoding is tested),
# Verilator, Yosys and g++ for the RTL core (rtl/, nfkit-rtl), mold (a fast linker
# for the suite's ~190 test binaries, scripts/link-cc), and Rust with
# rustfmt and clippy.
set -euo pipefail

PKGS=(clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev pkg-config iproute2 make gcc linux-libc-dev verilator yosys g++ strace mold)
# `--bench`: also the peers `make bench` measures against (DPDK's rte_bpf).
if [ "${1:-}" = "--bench" ]; then
    PKGS+=(libdpdk-dev)
fi
# `--demo`: Graphviz, for the SVG `make demo` draws with `nfkit graph`.
if [ "${1:-}" = "--demo" ]; then
    PKGS+=(graphviz)
fi
# `--offload`: the qemu guest of `make test-offload` (a Debian kernel whose
# cls_flower is a module, qemu to boot it, busybox for its initramfs).
if [ "${1:-}" = "--offload" ]; then
    PKGS+=(qemu-system-x86 linux-image-amd64 busybox-static cpio)
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi

missing=()
for p in "${PKGS[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        :
    else
        echo "==> installing Rust (rustup, stable)"
        curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component rustfmt,clippy
    fi
fi
export PATH="$HOME/.cargo/bin:$PATH"
if command -v rustup >/dev/null 2>&1; then
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
    done
fi

# bpffs, for pinning and for the kernel tests.
if [ "$(id -u)" = 0 ] && ! mount | grep -q 'type bpf'; then
    mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
fi
