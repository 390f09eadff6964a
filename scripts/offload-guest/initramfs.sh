#!/usr/bin/env bash
# initramfs.sh KVER OUT NFKIT RANDOM: the guest's initramfs in
# OUT/initramfs.cpio.gz: busybox, ip and tc with their libraries, the
# modules flower needs (with their dependencies, from modules.dep), the
# nfkit binary with its libraries, the test programs built by clang, the
# example pcaps and the init script (guest-init.sh).
set -euo pipefail
KVER=$1
OUT=$2
NFKIT=$3
RANDOM_FRAMES=$4
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
R="$OUT/root"
mkdir -p "$R"/{bin,sbin,proc,sys,dev,tmp,run,work,lib64,lib/modules/"$KVER"}

cp /bin/busybox "$R/bin/busybox"
for a in sh mount mkdir cat echo sleep insmod poweroff ls date grep dmesg; do
    ln -sf busybox "$R/bin/$a"
done

# Binaries and every library they load.
copy_bin() {
    cp "$1" "$R/bin/${2:-$(basename "$1")}"
    ldd "$1" | grep -o '/[^ ]*' | while read -r lib; do
        mkdir -p "$R$(dirname "$lib")"
        cp -L "$lib" "$R$lib"
    done
}
copy_bin "$NFKIT"
strip "$R/bin/$(basename "$NFKIT")"
copy_bin "$(command -v ip)"
copy_bin "$(command -v tc)"
# coreutils date as gdate: busybox's has no nanoseconds (%N).
copy_bin "$(command -v date)" gdate

# Modules and their dependencies, in load order.
M=/lib/modules/$KVER
: >"$R/modules.order"
declare -A seen
add_mod() {
    local rel=$1
    [ -n "${seen[$rel]:-}" ] && return
    seen[$rel]=1
    local deps
    deps=$(grep -E "^$rel:" "$M/modules.dep" | cut -d: -f2)
    for d in $deps; do add_mod "$d"; done
    mkdir -p "$R/lib/modules/$KVER/$(dirname "$rel")"
    case "$rel" in
        *.xz) xz -dc "$M/$rel" >"$R/lib/modules/$KVER/${rel%.xz}"; rel=${rel%.xz} ;;
        *.zst) zstd -qdc "$M/$rel" >"$R/lib/modules/$KVER/${rel%.zst}"; rel=${rel%.zst} ;;
        *) cp "$M/$rel" "$R/lib/modules/$KVER/$rel" ;;
    esac
    echo "/lib/modules/$KVER/$rel" >>"$R/modules.order"
}
# crc32c_generic before act_csum: its libcrc32c asks the crypto API for
# crc32c at load, and the guest has no modprobe to fetch it then.
for m in veth sch_ingress cls_flower cls_u32 act_gact act_mirred act_pedit crc32c_generic act_csum; do
    rel=$(grep -oE "^[^:]*/$m\.ko(\.xz|\.zst)?:" "$M/modules.dep" | tr -d :)
    add_mod "$rel"
done

# The test programs (the offload crate's), the DDoS example and pcaps.
PROGS="$ROOT/crates/nfkit-offload/tests/progs"
for p in acl tcpflags v6frag ethertype blacklist rewrite tcpnat; do
    clang -O2 -g -target bpf -mcpu=v3 -I"$PROGS" -I"$ROOT/corpus" -I"/usr/include/$(uname -m)-linux-gnu" \
        -c "$PROGS/$p.c" -o "$R/work/$p.o"
done
# The catalogue's firewall NF built as nfkit-nf's build does for XDP: its
# standalone `xdp_acl` export, checked with a filled rule table.
clang -O2 -g -target bpf -mcpu=v3 -DNF_HOOK_XDP -I "$ROOT/nf/include" \
    -I"/usr/include/$(uname -m)-linux-gnu" -c "$ROOT/nf/firewall.c" -o "$R/work/firewall.o"
cp "$ROOT/examples/ddos.py" "$R/work/"
for p in ddos dscp_dispatch flow_limiter port_stats tcp_options; do
    cp "$ROOT/examples/$p.pcap" "$R/work/"
done
sed "s/@RANDOM@/$RANDOM_FRAMES/" "$(dirname "$0")/guest-init.sh" >"$R/init"
chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 >"$OUT/initramfs.cpio.gz")
echo "==> initramfs $(du -h "$OUT/initramfs.cpio.gz" | cut -f1)"
