#!/usr/bin/env bash
# `make test-offload`: boots a qemu guest with Debian's kernel (cls_flower,
# act_gact, act_mirred, sch_ingress and veth as modules) and a small
# initramfs (busybox, iproute2's ip and tc, the nfkit binary, the test
# programs and pcaps), and runs `nfkit offload check` there on a veth
# pair: per frame, "flower rules (skip_hw), then the program" must decide
# like the program alone, and flower must pick the model's rule.
# KVM when /dev/kvm works, else TCG. Results: target/offload-guest/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OFFLOAD_GUEST_DIR:-$ROOT/target/offload-guest}
NFKIT=${NFKIT:-$ROOT/target/release/nfkit}
RANDOM_FRAMES=${OFFLOAD_RANDOM:-300}

# The newest installed Debian kernel that has cls_flower as a module.
KVER=""
for d in $(ls /lib/modules | sort -V); do
    if [ -f "/boot/vmlinuz-$d" ] && [ -n "$(find "/lib/modules/$d" -name 'cls_flower.ko*' | head -1)" ]; then
        KVER=$d
    fi
done
if [ -z "$KVER" ]; then
    echo "no Debian kernel with cls_flower: run scripts/install-deps.sh --offload" >&2
    exit 1
fi
echo "==> guest kernel $KVER"

rm -rf "$OUT"
mkdir -p "$OUT"
bash "$(dirname "$0")/initramfs.sh" "$KVER" "$OUT" "$NFKIT" "$RANDOM_FRAMES"

QEMU=(-m 1024 -smp 1 -nographic -no-reboot -nic none
    -kernel "/boot/vmlinuz-$KVER" -initrd "$OUT/initramfs.cpio.gz"
    -append "console=ttyS0 panic=-1 quiet loglevel=3")
START=$(date +%s)
ACCEL=tcg
if [ -r /dev/kvm ] && [ -w /dev/kvm ] && [ "${OFFLOAD_NO_KVM:-}" = "" ]; then
    # KVM only if the guest reaches its init within 30 s (nested
    # virtualisation may be missing or too slow): else TCG.
    timeout "${OFFLOAD_TIMEOUT:-1200}" qemu-system-x86_64 -accel kvm -cpu host "${QEMU[@]}" \
        >"$OUT/console.log" 2>&1 &
    QPID=$!
    for _ in $(seq 60); do
        grep -q OFFLOAD-BOOT "$OUT/console.log" 2>/dev/null && break
        kill -0 $QPID 2>/dev/null || break
        sleep 0.5
    done
    if grep -q OFFLOAD-BOOT "$OUT/console.log" 2>/dev/null; then
        ACCEL=kvm
        wait $QPID || true
    else
        echo "==> KVM did not boot the guest in 30 s: TCG"
        kill $QPID 2>/dev/null || true
        wait $QPID 2>/dev/null || true
        START=$(date +%s)
    fi
fi
if [ "$ACCEL" = tcg ]; then
    echo "==> booting under TCG"
    timeout "${OFFLOAD_TIMEOUT:-1200}" qemu-system-x86_64 -accel tcg -cpu max "${QEMU[@]}" \
        >"$OUT/console.log" 2>&1 || true
fi
END=$(date +%s)
echo "==> guest ran $((END - START)) s ($ACCEL)"
grep -a '^OFFLOAD-' "$OUT/console.log" | tr -d '\r' >"$OUT/results.txt" || true
grep -a '^OFFLOAD-RESULT ' "$OUT/results.txt" | sed 's/^OFFLOAD-RESULT //' >"$OUT/results.jsonl" || true
grep -a 'OFFLOAD-\(BOOT\|ACCEL\)' "$OUT/results.txt" || true
if ! grep -q '^OFFLOAD-DONE' "$OUT/results.txt"; then
    echo "the guest did not finish; console:" >&2
    tail -40 "$OUT/console.log" >&2
    exit 1
fi
python3 - "$OUT/results.jsonl" "$((END - START)) s ($ACCEL)" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = 0
print(f"{'program':<14} {'rules':>5} {'frames':>6} {'by flower':>9} {'disagree':>8} {'unlike model':>12} {'bytes checked':>13} {'bytes differ':>12} {'lost':>4} {'ms':>7}  outside assumptions: frames, disagree, unlike model")
for r in rows:
    name = r["source"].rsplit("/", 1)[-1]
    print(f"{name:<14} {r['rules']:>5} {r['frames']:>6} {r['by_rules']:>9} {r['disagreements']:>8} {r['model_mismatches']:>12} {r['bytes_checked']:>13} {r['byte_mismatches']:>12} {r['lost']:>4} {r['ms']:>7}  {r['outside_assumptions']}, {r['outside_disagreements']}, {r['outside_model_mismatches']}")
    for d in r["first_disagreements"] + r["first_model_mismatches"] + r["first_byte_mismatches"]:
        print("   ", d)
    for d in r["first_outside"][:2]:
        print("    (outside)", d)
    bad += not r["agree"]
print(f"{len(rows)} programs, {sum(r['frames'] for r in rows)} frames, {sum(r['by_rules'] for r in rows)} decided by flower, guest run {sys.argv[2]}")
# A program that gave no result (its check failed to start) fails too.
errors = [l for l in open(sys.argv[1].replace("results.jsonl", "results.txt")) if l.startswith("OFFLOAD-ERROR")]
for l in errors:
    print(l.rstrip())
sys.exit(1 if bad or not rows or errors else 0)
PY
# Map-driven sync: each map change, the rule change it caused, latency.
python3 - "$OUT/results.txt" <<'PY'
import json, sys
lines = [l.rstrip("\n") for l in open(sys.argv[1])]
changes = [l.split(" ", 2) for l in lines if l.startswith("OFFLOAD-WATCH-CHANGE ")]
events = [json.loads(l.split(" ", 1)[1]) for l in lines if l.startswith("OFFLOAD-WATCH {")]
events = [e for e in events if e.get("event") == "rules changed"]
status = [json.loads(l.split(" ", 1)[1]) for l in lines if l.startswith("OFFLOAD-WATCH-STATUS ")]
for l in lines:
    if l.startswith("OFFLOAD-WATCH-ERR") or l.startswith("OFFLOAD-ERROR"):
        print(l)
ok = len(events) == len(changes) and len(changes) > 0
for (_, t0, what), e in zip(changes, events):
    lat = (e["applied_unix_ns"] - int(t0)) / 1e6
    print(f"map {what}: {e['removed']} rules out, {e['added']} in, {e['rules']} now; change to rule {lat:.1f} ms (derive {e['derive_us']} us, netlink {e['apply_us']} us)")
    for c in e["changed"]:
        print("   ", c)
for s in status:
    rules = s[0]["rules"] if s else []
    print(f"status: {len(rules)} rules in the kernel: " + "; ".join(f"prio {r['prio']} {r['pattern']} {r['action']}" for r in rules))
    ok = ok and s and len(rules) == s[0]["expected_rules"] and all(r["kind"] in ("flower", "u32") for r in rules)
    # A u32 guard's match is decoded (value/mask at its byte).
    ok = ok and all(r.get("u32_match", "").startswith("u8 ") for r in rules if r["kind"] == "u32")
sys.exit(0 if ok else 1)
PY
# Cost per packet: the send rate with nothing, flower drop, XDP drop.
python3 - "$OUT/results.txt" <<'PY'
import json, sys, statistics
runs = {}
for l in open(sys.argv[1]):
    if l.startswith("OFFLOAD-COST "):
        _, what, rep = l.rstrip("\n").split(" ", 2)
        try:
            runs.setdefault(what, []).append(json.loads(rep)["achieved_pps"])
        except ValueError:
            pass
if not runs:
    sys.exit(0)
base = statistics.median(runs.get("none", [0])) or 1
for what in ("none", "flower", "xdp"):
    pps = runs.get(what, [])
    if pps:
        m = statistics.median(pps)
        extra = 1e9 / m - 1e9 / base
        print(f"send+receive cost, {what:<6}: {1e9 / m / 1000:.1f} us/packet (median of {len(pps)}, {m:.0f} pps), {extra / 1000:+.1f} us vs nothing")
PY
