#!/usr/bin/env bash
# `make test`'s run: builds every test binary, then runs them all, with the
# Yosys synthesis of one RTL engine (one core for about four minutes, most of
# it in techmap) beside the rest instead of after it. The exit code is
# nonzero if either part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
CARGO="${CARGO:-cargo}"
SYNTH_TEST=one_engine_synthesises_into_block_ram_dsps_and_a_few_thousand_luts

$CARGO test --workspace --release --no-run || exit $?

synth_log=$(mktemp)
$CARGO test --workspace --release --test synth -- --exact "$SYNTH_TEST" >"$synth_log" 2>&1 &
synth_pid=$!

$CARGO test --workspace --release -- --test-threads=2 --skip "$SYNTH_TEST"
rc=$?

wait "$synth_pid"
synth_rc=$?
echo "==> the RTL synthesis test (run beside the rest):"
cat "$synth_log"
rm -f "$synth_log"
[ "$rc" = 0 ] || exit "$rc"
exit "$synth_rc"
