//! The compiled examples in the kernel: each object passes the verifier
//! and gives, packet by packet, the same verdict (and packet) as in the
//! VM, through `BPF_PROG_TEST_RUN`. Needs root; skipped otherwise.

mod common;
use common::*;
use nfkit_lang::runner::run_capture;
use nfkit_lang::{compile, Options};
use std::path::Path;

#[test]
fn examples_give_the_same_verdicts_in_the_kernel() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for name in [
        "ddos",
        "dscp_dispatch",
        "flow_limiter",
        "tcp_options",
        "port_stats",
    ] {
        let src = std::fs::read_to_string(dir.join(format!("{name}.py"))).expect("script");
        let c = compile(name, &src, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let input: Vec<(u64, Vec<u8>)> = nfkit_pcap::read_file(dir.join(format!("{name}.pcap")))
            .expect("pcap")
            .into_iter()
            .map(|p| (p.ts_ns, p.data))
            .collect();
        let vm = run_capture(&c, &input, false).expect("vm");
        let k = kernel_run(&c, &input)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", nfkit_lang::listing::listing(&c)));
        for (i, (l, (code, _))) in vm.lines.iter().zip(&k).enumerate() {
            assert_eq!(
                l.code,
                *code,
                "{name}: packet {} verdict (VM {} / kernel {code})",
                i + 1,
                l.verdict
            );
        }
        let kept: Vec<&Vec<u8>> = k
            .iter()
            .filter(|(c, _)| (2..=4).contains(c))
            .map(|(_, d)| d)
            .collect();
        let vm_out: Vec<&Vec<u8>> = vm.out.iter().map(|(_, d)| d).collect();
        assert_eq!(vm_out, kept, "{name}: output packets");
    }
}

#[test]
fn compiled_objects_load_through_libbpf() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let tmp = std::env::temp_dir().join(format!("nfkit-lang-obj-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("tmp");
    for name in [
        "ddos",
        "dscp_dispatch",
        "flow_limiter",
        "tcp_options",
        "port_stats",
    ] {
        let src = std::fs::read_to_string(dir.join(format!("{name}.py"))).expect("script");
        let c = compile(name, &src, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let bytes = nfkit_object::write_object(&c.image).expect("ELF");
        let path = tmp.join(format!("{name}.o"));
        std::fs::write(&path, bytes).expect("write");
        let loaded =
            nfkit_kernel::load_object_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            loaded
                .prog("every_packet")
                .or(loaded.prog("by_dscp"))
                .is_some(),
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
