//! The nfkit C corpus: the small packet programs of `corpus/*.c`,
//! compiled by clang at build time (`-O2 -g -target bpf -mcpu=v3`).
//!
//! For tests only (ELF reader, disassembler, VM-vs-kernel differential
//! runs): [`objects`] gives each object's name and bytes, [`ENTRIES`] also
//! the C source and the path of the compiled object (for tools such as
//! `llvm-objdump` and `bpftool`).

#![forbid(unsafe_code)]

pub mod clang;
pub mod report;
pub mod rng;
pub use clang::{vmlinux_h, BpfBuild, BuildError};
pub use report::{bench_dir, write_bench_report};
pub use rng::Xorshift;

/// One compiled corpus program.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// File stem: `xdp_port_filter` for `corpus/xdp_port_filter.c`.
    pub name: &'static str,
    /// The C source.
    pub source: &'static str,
    /// The ELF object clang produced.
    pub object: &'static [u8],
    /// Where that object is on disk (in the build's OUT_DIR).
    pub path: &'static str,
}

/// Every corpus program, sorted by name.
pub static ENTRIES: &[Entry] = include!(concat!(env!("OUT_DIR"), "/table.rs"));

/// The examples written by hand (`examples/c/*.c`: `ddos` for
/// `examples/ddos.py`), sorted by name: the baselines of the chain
/// language's benchmark and the programs its tests compare with.
pub static EXAMPLES_C: &[Entry] = include!(concat!(env!("OUT_DIR"), "/examples_c.rs"));

/// The hand-written C version of example `name`.
pub fn example_c(name: &str) -> Option<&'static Entry> {
    EXAMPLES_C.iter().find(|e| e.name == name)
}

/// `(name, object bytes)` of every corpus program.
pub fn objects() -> Vec<(&'static str, &'static [u8])> {
    ENTRIES.iter().map(|e| (e.name, e.object)).collect()
}

/// The corpus program called `name`.
pub fn get(name: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.name == name)
}

/// Corpus objects that libbpf 1.x (and so `bpftool prog loadall`)
/// refuses as they are: legacy `maps` section definitions. nfkit reads
/// them, and its ELF writer turns them into loadable BTF-defined maps.
pub const LIBBPF_REFUSES: &[&str] = &["xdp_legacy_maps"];

#[cfg(test)]
mod tests {
    #[test]
    fn corpus_is_complete() {
        assert!(super::ENTRIES.len() >= 12);
        for e in super::ENTRIES {
            assert_eq!(&e.object[..4], b"\x7fELF", "{}", e.name);
            assert!(e.source.contains("SEC("), "{}", e.name);
        }
    }
}
