#!/bin/sh
# The guest's /init: modules, a veth pair, then `nfkit offload check` on
# each program; results on the console as OFFLOAD-RESULT lines.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
echo "OFFLOAD-BOOT $(cat /proc/uptime | cut -d' ' -f1) s, kernel $(cat /proc/sys/kernel/osrelease)"
while read -r m; do
    insmod "$m" || echo "OFFLOAD-ERROR insmod $m"
done </modules.order
ip link set lo up
# Two pairs: ofl0/ofl1 carry the test, ofl2/ofl3 give the test programs'
# redirect targets (ifindex 3 to 5) a device. Peers this ip names
# veth0, veth1 are renamed.
for pair in "ofl0 ofl1" "ofl2 ofl3"; do
    set -- $pair
    ip link add "$1" type veth peer name "$2" 2>/dev/null
    ip link show "$2" >/dev/null 2>&1 || ip link set "$(ip -o link | grep -o "veth[0-9]*@$1" | cut -d@ -f1)" name "$2"
    ip link set "$1" up
    ip link set "$2" up
done
echo "OFFLOAD-LINKS $(ip -o link | cut -d: -f1,2 | tr '\n' ' ')"
i=0
while [ $i -lt 50 ] && ! ip link show ofl0 | grep -q 'state UP'; do sleep 0.1; i=$((i+1)); done
cd /work
PCAPS="--pcap ddos.pcap --pcap dscp_dispatch.pcap --pcap flow_limiter.pcap --pcap port_stats.pcap --pcap tcp_options.pcap"
for p in acl.o tcpflags.o v6frag.o ethertype.o rewrite.o tcpnat.o ddos.py; do
    out=$(nfkit offload check "$p" --dev ofl0 --peer ofl1 $PCAPS --random @RANDOM@ --json 2>/tmp/err)
    rc=$?
    if [ -n "$out" ]; then
        echo "OFFLOAD-RESULT $out"
    else
        echo "OFFLOAD-ERROR $p rc=$rc $(tr '\n' ' ' </tmp/err)"
    fi
done
# The firewall NF's xdp_acl with its rule table filled (as the offload
# crate's firewall_nf_standalone test fills it): TCP to 23 and UDP to 53
# dropped, TCP from 1000-1999 passed, a source-prefix drop rule.
ACL="--map-set nf_firewall_acl:00000000:000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000ffff1700170006010000000000000000000001000080"
ACL="$ACL --map-set nf_firewall_acl:01000000:000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000ffff3500350011010000000000000000000001000080"
ACL="$ACL --map-set nf_firewall_acl:02000000:00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000e803cf070000ffff06010000000000000000000002000080"
ACL="$ACL --map-set nf_firewall_acl:03000000:00000000000000000000ffff0a000000ffffffffffffffffffffffffff00000000000000000000000000000000000000000000000000000000000000000000000000ffff0000ffff00010000000000000000000001000080"
out=$(nfkit offload check firewall.o --section xdp_acl $ACL --dev ofl0 --peer ofl1 $PCAPS --random @RANDOM@ --json 2>/tmp/err)
rc=$?
if [ -n "$out" ]; then
    echo "OFFLOAD-RESULT $out"
else
    echo "OFFLOAD-ERROR firewall.o rc=$rc $(tr '\n' ' ' </tmp/err)"
fi
# Map-driven sync on the kernel's flower: the blacklist deployed on ofl2,
# its rules watched (10 ms polling) while its maps are filled and emptied.
export NFKIT_STATE_DIR=/run/nfkit NFKIT_PIN_ROOT=/sys/fs/bpf/nfkit
nfkit deploy blacklist.o --dev ofl2 >/dev/null 2>/tmp/err || echo "OFFLOAD-ERROR deploy $(tr '\n' ' ' </tmp/err)"
nfkit offload blacklist.o --dev ofl2 --skip-hw --watch --interval 10 --watch-for 15 --json >/tmp/watch.out 2>/tmp/watch.err &
WATCH=$!
sleep 2
change() {
    echo "OFFLOAD-WATCH-CHANGE $(gdate +%s%N) $*"
    nfkit map "$@" --dev ofl2 >/dev/null 2>>/tmp/watch.err
    sleep 1
}
change set src_prefixes 18000000c0a80100 1
change set src_prefixes 080000000a000000 1
change set dst_block cb007109 1
echo "OFFLOAD-WATCH-STATUS $(nfkit offload status --json | tr -d '\n')"
change delete src_prefixes 18000000c0a80100
echo "OFFLOAD-WATCH-STATUS $(nfkit offload status --json | tr -d '\n')"
wait $WATCH
while read -r l; do echo "OFFLOAD-WATCH $l"; done </tmp/watch.out
[ -s /tmp/watch.err ] && echo "OFFLOAD-WATCH-ERR $(tr '\n' ' ' </tmp/watch.err)"
# Software cost per packet: the same TCP frames (port 23, which the ACL
# drops) sent from ofl1 as fast as possible with nothing on ofl0, with the
# ACL's flower rules (skip_hw), and with the ACL as native XDP; each
# three times, alternating.
FLOW="proto=tcp,src=198.18.0.1,dst=198.18.0.2,sport=1000,dport=23,len=16"
cost() {
    echo "OFFLOAD-COST $1 $(nfkit send --dev ofl1 --flows "$FLOW" --count 20000 --engine packet --json 2>/dev/null | tr -d '\n ')"
}
for round in 1 2 3; do
    cost none
    nfkit offload acl.o --dev ofl0 --skip-hw >/dev/null 2>&1 && cost flower
    nfkit offload remove --dev ofl0 >/dev/null 2>&1
    nfkit deploy acl.o --dev ofl0 >/dev/null 2>&1 && cost xdp
    nfkit undeploy --dev ofl0 >/dev/null 2>&1
done
echo "OFFLOAD-DONE $(cat /proc/uptime | cut -d' ' -f1) s"
poweroff -f
