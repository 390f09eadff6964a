# nfkit: `make demo` runs the main job, `make test` runs the whole suite.
# Both install what they need first (Debian packages, Rust).
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo

.PHONY: all deps build demo test lint bench rtl-bench soak experiment clean test-offload

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	$(CARGO) build --release --bin nfkit

demo: build
	@bash scripts/install-deps.sh --demo
	@bash scripts/demo.sh

# clippy in the release profile shares build-script outputs (libbpf, clang-built
# NFs and corpus) with the release test build that follows.
lint: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

# `make test` checks formatting, then builds and runs everything with clippy's
# lints applied during that build (see scripts/run-tests.sh).
test: deps
	$(CARGO) fmt --all --check
	@CARGO="$(CARGO)" bash scripts/run-tests.sh
	@bash scripts/test-summary.sh

# Every crate's benches; among them nfkit-vm's `engines` (every VM engine,
# rbpf and native C on the same programs, against issue 14's goals), whose
# table is printed again at the end (NFKIT_BENCH_QUICK=1: a few seconds),
# and nfkit-traffic's `traffic` (send/recv engines, rate accuracy, kernel
# forwarding measured with the live sender; root, about 30 s),
# nfkit-switch's `swap` (signed updates' swap time, 1 and 2 workers), and
# nfkit-bench's `tables` (exact/LPM/ternary tables of 16 to 64k entries
# against no table: VM interp and JIT, kernel test runs).
bench: deps
	@bash scripts/install-deps.sh --bench
	$(CARGO) bench --workspace
	@cat "$${CARGO_TARGET_DIR:-target}/nfkit-bench/vm-engines.md"
	@cat "$${CARGO_TARGET_DIR:-target}/nfkit-bench/traffic.md" 2>/dev/null || true
	@cat "$${CARGO_TARGET_DIR:-target}/nfkit-bench/switch-swap.md" 2>/dev/null || true
	@cat "$${CARGO_TARGET_DIR:-target}/nfkit-bench/tables.md" 2>/dev/null || true
	@cat "$${CARGO_TARGET_DIR:-target}/nfkit-bench/daemon-load.md" 2>/dev/null || true

# The RTL core (docs/rtl.md): cycles per packet, CPI and stalls on the
# Verilated model, and one engine's resources from Yosys synth_xilinx
# (about two minutes); the table goes to target/nfkit-bench/rtl.md.
rtl-bench: deps
	NFKIT_RTL_SYNTH=1 $(CARGO) bench -p nfkit-rtl --bench rtl

# A million random and mutated hostile programs through the VM's JIT;
# none may escape (sentinel memory intact, no crash). Not part of `test`.
soak: deps
	$(CARGO) run --release -p nfkit-vm --example soak -- --programs 1000000

# The bag-server experiment (docs/bag.md): kernel vs user-space filtering,
# reduced sweep, a few minutes; needs root. EXPERIMENT_OUT to move it,
# EXPERIMENT_ARGS for more (--reps N, --full).
EXPERIMENT_OUT ?= target/bag-experiment
experiment: build
	./target/release/nfkit bag experiment --out $(EXPERIMENT_OUT) $(EXPERIMENT_ARGS)
	@echo "results in $(EXPERIMENT_OUT): report.md, runs.csv, summary.csv, main.svg, packets.svg, rate.svg, loss.svg"

# Offload (docs/offload.md): boots a qemu guest whose Debian kernel has
# cls_flower and checks the flower rules of the test programs and the DDoS
# example frame by frame against the programs (KVM or TCG; a few minutes
# under TCG). Not part of `test`.
test-offload: deps
	@bash scripts/install-deps.sh --offload
	$(CARGO) build --release --bin nfkit
	bash scripts/offload-guest/run.sh

clean:
	$(CARGO) clean
