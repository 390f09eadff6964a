#!/usr/bin/env bash
# `make test`'s run: builds every test binary, then runs them all, with the
# Yosys synthesis of one RTL engine (one core for about four minutes, most of
# it in techmap) beside the rest instead of after it. The exit code is
# nonzero if either part failed.
#
# Clippy's lints run inside that one build: cargo compiles the workspace's own
# crates through `clippy-driver` (rustc with clippy's lints, full code
# generation), so a lint is an error of the test build and the workspace is
# not compiled a second time in check mode (about 6 minutes on 2 cores).
# Dependencies are compiled by plain rustc. `make lint` runs `cargo clippy
# --all-targets` the usual way, benches included.
set -uo pipefail
cd "$(dirname "$0")/.."
CARGO="${CARGO:-cargo}"
if [ -z "${NFKIT_NO_CLIPPY:-}" ] && command -v clippy-driver >/dev/null; then
    export RUSTC_WORKSPACE_WRAPPER=clippy-driver
    # `-D warnings`, in the form cargo-clippy hands its arguments to the driver.
    export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
else
    echo "==> clippy-driver not found: the test build runs without clippy's lints" >&2
fi
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
