# nfkit: `make demo` runs the main job, `make test` runs the whole suite.
# Both install what they need first (Debian packages, Rust).
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo

.PHONY: all deps build demo test lint bench soak clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	$(CARGO) build --release --bin nfkit

demo: build
	@bash scripts/demo.sh

# clippy in the release profile shares build-script outputs (libbpf, clang-built
# NFs and corpus) with the release test build that follows.
lint: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

test: deps lint
	$(CARGO) test --workspace --release -- --test-threads=2
	@bash scripts/test-summary.sh

bench: deps
	$(CARGO) bench --workspace

# A million random and mutated hostile programs through the VM's JIT;
# none may escape (sentinel memory intact, no crash). Not part of `test`.
soak: deps
	$(CARGO) run --release -p nfkit-vm --example soak -- --programs 1000000

clean:
	$(CARGO) clean
