#!/usr/bin/env bash
# `make demo`: nfkit stopping a flood on a real (virtual) network.
#
# Builds three network namespaces joined by veth pairs:
#
#   nfkit-demo-snd            nfkit-demo-sut                 nfkit-demo-rcv
#   [s0 198.18.1.1] ---- [i0 198.18.1.254   o0 198.18.2.254] ---- [r0 198.18.2.1]
#    sender                system under test: forwards          receiver
#                          i0 -> o0; examples/ddos.py on i0
#                          (XDP, generic mode)
#                          [c0 ifindex 7] ----------------------- [c1] collector
#
# deploys the DDoS example chain on i0, sends legitimate traffic from three
# sources and a flood from two more (raw frames from `nfkit send`), and
# prints every second the chain's verdict counters, the blacklist and what
# the receiver and the collector saw. Everything it creates is named
# nfkit-demo-* and removed on exit, failure or Ctrl-C (and leftovers of an
# interrupted run are removed first). Pins and state live in their own
# directories (/sys/fs/bpf/nfkit-demo, /run/nfkit-demo), so the demo never
# touches a real deployment.
#
# Environment: NFKIT (the binary; default target/release/nfkit, or under
# CARGO_TARGET_DIR), DEMO_BACKEND=vm to skip the kernel.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
NFKIT=${NFKIT:-${CARGO_TARGET_DIR:-$ROOT/target}/release/nfkit}
P=nfkit-demo
SND=$P-snd SUT=$P-sut RCV=$P-rcv
export NFKIT_PIN_ROOT=/sys/fs/bpf/$P NFKIT_STATE_DIR=/run/$P
# Directly, not through an nfkitd that may run on this host (part 6
# starts one of its own and names it).
export NFKIT_DAEMON=off
SCRIPT=examples/ddos.py
DST=198.18.2.1
LEGIT=(198.18.1.11 198.18.1.12 198.18.1.13)
FLOOD=(198.18.1.66 198.18.1.67)
TRAFFIC_S=11     # legitimate traffic runs this long
FLOOD_AT=3       # the flood starts at this second ...
FLOOD_S=5        # ... and lasts this long
BLACKLIST_S=10   # BLACKLIST_NS in the script: offenders stay this long
TMP=""
PIDS=()

say() { printf '%s\n' "$*"; }
title() { printf '\n\033[1m%s\033[0m\n' "$*"; }

# Removes everything the demo may have created; safe to run any time.
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
    if [ -n "$TMP" ] && [ -S "$TMP/nfkitd/nfkitd.sock" ] && [ -x "$NFKIT" ]; then
        "$NFKIT" daemon stop --socket "$TMP/nfkitd/nfkitd.sock" >/dev/null 2>&1 || true
    fi
    if [ -e "$NFKIT_STATE_DIR/state.json" ] && [ -x "$NFKIT" ] && [ -e /run/netns/$SUT ]; then
        nsenter --net=/run/netns/$SUT "$NFKIT" undeploy >/dev/null 2>&1 || true
    fi
    local ns
    for ns in $SND $SUT $RCV; do
        ip netns del "$ns" 2>/dev/null || true
    done
    # Deleting the namespaces removes their veths; these catch ends that
    # an interrupted run left in the root namespace.
    local dev
    for dev in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^$P-" || true); do
        ip link del "$dev" 2>/dev/null || true
    done
    rm -rf "$NFKIT_PIN_ROOT" "$NFKIT_STATE_DIR"
    [ -n "$TMP" ] && rm -rf "$TMP"
    return 0
}

on_exit() {
    local rc=$?
    trap - EXIT INT TERM
    cleanup
    if [ "$rc" != 0 ]; then
        say "demo failed (exit $rc); everything it created was removed"
    fi
    exit "$rc"
}

if [ "$(id -u)" != 0 ]; then
    say "make demo needs root (network namespaces, XDP): run it with sudo" >&2
    exit 1
fi
if [ ! -x "$NFKIT" ]; then
    say "no nfkit binary at $NFKIT: run 'make demo' (it builds it) or set NFKIT" >&2
    exit 1
fi

cleanup
trap on_exit EXIT
trap 'exit 130' INT TERM
TMP=$(mktemp -d "/tmp/$P.XXXXXX")

# ---------------------------------------------------------------- testbed
title "1. Testbed: three namespaces joined by veth pairs (198.18.0.0/15)"
for ns in $SND $SUT $RCV; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # No IPv6 chatter (router solicitations...) on the demo links.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip link add $P-s0 netns $SND type veth peer name $P-i0 netns $SUT
ip link add $P-o0 netns $SUT type veth peer name $P-r0 netns $RCV
# The chain redirects sampled blacklisted packets to ifindex 7: the collector.
ip -n $SUT link add $P-c0 index 7 type veth peer name $P-c1 netns $RCV
ip -n $SND addr add 198.18.1.1/24 dev $P-s0
ip -n $SUT addr add 198.18.1.254/24 dev $P-i0
ip -n $SUT addr add 198.18.2.254/24 dev $P-o0
ip -n $RCV addr add $DST/24 dev $P-r0
for l in $SND:s0 $SUT:i0 $SUT:o0 $SUT:c0 $RCV:r0 $RCV:c1; do
    ip -n "${l%%:*}" link set "$P-${l##*:}" up
done
ip netns exec $SUT sysctl -qw net.ipv4.ip_forward=1 \
    net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 net.ipv4.conf.$P-i0.rp_filter=0
SUT_MAC=$(ip -n $SUT -o link show dev $P-i0 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
say "  $SND  $P-s0 198.18.1.1  --veth-->  $SUT  $P-i0 198.18.1.254 ($SUT_MAC)"
say "  $SUT  $P-o0 198.18.2.254  --veth-->  $RCV  $P-r0 $DST   (IP forwarding in $SUT)"
say "  $SUT  $P-c0 (ifindex 7)  --veth-->  $RCV  $P-c1   (collector for sampled offenders)"

flows() { # flows SRC...: one UDP flow per source towards the receiver
    local spec="" i=0 s
    for s in "$@"; do
        spec+="src=$s,dst=$DST,sport=$((40000 + i)),dport=9000,len=64,dmac=$SUT_MAC;"
        i=$((i + 1))
    done
    printf '%s' "$spec"
}

# ---------------------------------------------------------------- deploy
BACKEND=vm
if [ "${DEMO_BACKEND:-kernel}" != vm ] && "$NFKIT" deploy --help >/dev/null 2>&1; then
    mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
    title "2. Deploy $SCRIPT on $P-i0 (XDP, generic mode; dynamic mode: the NFs are loaded once, the chain's own code can be replaced live)"
    if nsenter --net=/run/netns/$SUT "$NFKIT" deploy "$SCRIPT" --dev $P-i0 --hook xdp-generic --mode dynamic | sed 's/^/  /'; then
        BACKEND=kernel
    else
        say "  nfkit deploy failed: falling back to the userspace VM"
    fi
fi

# ---------------------------------------------------------------- VM fallback
if [ "$BACKEND" = vm ]; then
    title "Backend: nfkit's userspace VM (the kernel backend is not available here)"
    say "The same traffic as the kernel demo, written to a pcap by nfkit send --write"
    say "(legitimate: ${#LEGIT[@]} sources x 15 packets/s for ${TRAFFIC_S}s; flood: ${#FLOOD[@]} sources"
    say " x 500 packets/s from second $FLOOD_AT for ${FLOOD_S}s), then run through the chain:"
    "$NFKIT" send --write "$TMP/demo.pcap" --flows "$(flows "${LEGIT[@]}")" \
        --rate $((15 * ${#LEGIT[@]})) --duration $TRAFFIC_S --seq --stream 1 | sed 's/^/  /'
    "$NFKIT" send --write "$TMP/demo.pcap" --append --at $FLOOD_AT --flows "$(flows "${FLOOD[@]}")" \
        --rate $((500 * ${#FLOOD[@]})) --duration $FLOOD_S --seq --stream 2 | sed 's/^/  /'
    say "nfkit run $SCRIPT --pcap demo.pcap:"
    "$NFKIT" run "$SCRIPT" --pcap "$TMP/demo.pcap" --out "$TMP/passed.pcap" | sed 's/^/  /'
    say ""
    say "counters: 0 = PASSED, 1 = DROPPED, 2 = REDIRECTED to the collector (ifindex 7)."
    say "backend: VM (no packets went through the kernel; nothing was deployed)"
    exit 0
fi

# ---------------------------------------------------------------- traffic
DUR=$((TRAFFIC_S + 2))
title "3. Traffic: ${#LEGIT[@]} legitimate sources at 15 packets/s each for ${TRAFFIC_S}s;"
say "   ${#FLOOD[@]} flooding sources at 500 packets/s each from second $FLOOD_AT for ${FLOOD_S}s"
say "   (the chain allows 100 packets/s per destination, then 20 per source-destination pair)"
"$NFKIT" recv --netns $RCV --dev $P-r0 --duration $DUR --every 1 >"$TMP/rcv" 2>&1 &
PIDS+=($!)
"$NFKIT" recv --netns $RCV --dev $P-c1 --duration $DUR --every 1 >"$TMP/col" 2>&1 &
PIDS+=($!)
sleep 0.3
# The packet engine: the chain on i0 runs in generic XDP, and a veth
# whose peer has no native XDP program drops live-engine frames.
"$NFKIT" send --engine packet --netns $SND --dev $P-s0 --flows "$(flows "${LEGIT[@]}")" \
    --rate $((15 * ${#LEGIT[@]})) --duration $TRAFFIC_S --seq --stream 1 >"$TMP/legit" 2>&1 &
PIDS+=($!)
(sleep $FLOOD_AT && exec "$NFKIT" send --engine packet --netns $SND --dev $P-s0 --flows "$(flows "${FLOOD[@]}")" \
    --rate $((500 * ${#FLOOD[@]})) --duration $FLOOD_S --seq --stream 2) >"$TMP/flood" 2>&1 &
PIDS+=($!)

counter() { # counter INDEX: the total of one verdict counter
    "$NFKIT" map dump counters --dev $P-i0 2>/dev/null | awk -v k="$1" -F'[: ]+' '$1 == k {print $2}'
}
blacklist() { # the blacklisted sources: `ADDR: expires in N s` lines of the set
    "$NFKIT" map dump nf_sets_src --dev $P-i0 2>/dev/null | grep -v ': expired' |
        sed -E 's/: .*$//' | tr '\n' ' ' || true
}
offenders() { # every source the set holds, expired or not: who was blacklisted during the run
    "$NFKIT" map dump nf_sets_src --dev $P-i0 2>/dev/null |
        sed -E 's/: .*$//' | tr '\n' ' ' || true
}
last_line() { grep -E '^ *[0-9.]+s ' "$1" 2>/dev/null | tail -n1 | sed -E 's/^ *[0-9.]+s +//' || true; }

SWAP_AT=$((FLOOD_AT + FLOOD_S + 1))
title "4. Live (every second): verdicts in the chain's counters map, blacklist, receivers"
for t in $(seq 1 $((DUR - 1))); do
    sleep 1
    if [ "$t" = "$SWAP_AT" ]; then
        say "  -- t=${t}s: the chain is replaced live (nfkit deploy --mode dynamic again; same NF programs, new chain segments):"
        nsenter --net=/run/netns/$SUT "$NFKIT" deploy "$SCRIPT" --dev $P-i0 --hook xdp-generic --mode dynamic |
            grep -v 'maps kept' | sed 's/^/     /'
    fi
    printf ' t=%2ds  PASS %5s  DROP %5s  REDIRECT %4s | blacklist: %-28s\n' "$t" \
        "$(counter 0)" "$(counter 1)" "$(counter 2)" "$(blacklist)"
    printf '        receiver: %s\n' "$(last_line "$TMP/rcv")"
done
for pid in "${PIDS[@]}"; do wait "$pid"; done
PIDS=()

# ---------------------------------------------------------------- summary
title "5. What happened"
say "sent, legitimate: $(head -n1 "$TMP/legit")"
say "sent, flood:      $(head -n1 "$TMP/flood")"
say "receiver ($P-r0):"
sed -n '/^received/,$p' "$TMP/rcv" | sed 's/^/  /'
say "collector ($P-c1, one blacklisted packet in 10):"
sed -n '/^received/,$p' "$TMP/col" | sed 's/^/  /'
say "chain counters: PASS $(counter 0), DROP $(counter 1), REDIRECT $(counter 2)"
say "blacklisted during the run: $(offenders)"
say "blacklist now (entries last ${BLACKLIST_S}s): $(blacklist)"
cat <<EOF

nfkit compiled $SCRIPT (a chain of NFs from its catalogue: per-destination and
per-pair token buckets, a source set with expiry, a sampler) into eBPF and
attached it to $P-i0 in XDP generic mode, in dynamic mode: each NF is a
program of its own, loaded once, and the chain's code is a few small
segments that call them through tail calls. At t=${SWAP_AT}s the chain was
replaced under traffic by one update of a program array (the "switch" time
above), without reloading an NF and without losing a packet (stream 1 at the
receiver has nothing missing). While the legitimate sources stayed under 100
packets/s per destination, everything passed. When the
flood pushed the destination out of profile, each source got its own budget
of 20 packets/s: the flooding sources ran out of it, went into the blacklist
(stream 2 shows how few of their packets got through), and from then on were
dropped in XDP before the kernel's IP stack saw them, one in ten redirected to
the collector. The legitimate sources (stream 1) kept their traffic flowing.
backend: kernel (XDP generic on a veth, pinned under $NFKIT_PIN_ROOT)
EOF

# The same traffic through the userspace VM, for comparison.
"$NFKIT" send --write "$TMP/demo.pcap" --flows "$(flows "${LEGIT[@]}")" \
    --rate $((15 * ${#LEGIT[@]})) --duration $TRAFFIC_S --seq --stream 1 >/dev/null
"$NFKIT" send --write "$TMP/demo.pcap" --append --at $FLOOD_AT --flows "$(flows "${FLOOD[@]}")" \
    --rate $((500 * ${#FLOOD[@]})) --duration $FLOOD_S --seq --stream 2 >/dev/null
say "the same traffic in nfkit's userspace VM (nfkit run on a pcap of it):"
"$NFKIT" run "$SCRIPT" --pcap "$TMP/demo.pcap" | grep -E 'packets:|mitigate:' | sed 's/^ */  /'

# ---------------------------------------------------------------- daemon
title "6. The same through nfkitd: start it, deploy through it, nfkit top, stop it"
DRUN=$TMP/nfkitd
mkdir -p "$DRUN"
printf 'run_dir = "%s"\ndata_dir = "%s"\npin_root = "%s"\nstate_dir = "%s"\n' \
    "$DRUN" "$DRUN/data" "$NFKIT_PIN_ROOT" "$NFKIT_STATE_DIR" >"$DRUN/nfkitd.toml"
"$NFKIT" daemon start --config "$DRUN/nfkitd.toml" | sed 's/^/  /'
export NFKIT_DAEMON=$DRUN/nfkitd.sock
"$NFKIT" daemon status | sed 's/^/  /'
say "  nfkit deploy through nfkitd (a live swap of the running chain; the same output as directly):"
"$NFKIT" deploy "$SCRIPT" --dev $P-i0 --netns $SUT --hook xdp-generic --mode dynamic | sed 's/^/  /'
"$NFKIT" send --engine packet --netns $SND --dev $P-s0 --flows "$(flows "${LEGIT[@]}")" \
    --rate $((15 * ${#LEGIT[@]})) --duration 3 >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.5
say "  nfkit top --once (two samples 2 s apart, read through nfkitd):"
"$NFKIT" top --once --interval 2000 --entries 3 | sed 's/^/  /'
say "  audit log: $(wc -l <"$DRUN/data/audit.log") record(s), the last:"
tail -n1 "$DRUN/data/audit.log" | sed 's/^/    /'
say "  nfkit graph --deployed (classifier -> chains -> NFs -> maps, read through nfkitd):"
"$NFKIT" graph --deployed -o "$DRUN/deployed.dot"
say "    $DRUN/deployed.dot: $(grep -c -- ' -> ' "$DRUN/deployed.dot") edges; $(grep -o 'chain:[a-z_0-9]*' "$DRUN/deployed.dot" | sort -u | tr '\n' ' ')"
if command -v dot >/dev/null 2>&1; then
    "$NFKIT" graph --deployed --format svg -o "$DRUN/deployed.svg" &&
        say "    $DRUN/deployed.svg: $(wc -c <"$DRUN/deployed.svg") bytes of SVG (Graphviz)"
fi
"$NFKIT" daemon stop | sed 's/^/  /'
export NFKIT_DAEMON=off

title "7. Clean up: nfkit undeploy, delete the namespaces"
nsenter --net=/run/netns/$SUT "$NFKIT" undeploy
