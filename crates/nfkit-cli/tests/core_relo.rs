//! A CO-RE relocation that the kernel's BTF cannot satisfy refuses, by
//! name, only the program that needs it (issue 13): `nfkit run` of that
//! program says which relocation and why; another program of the same
//! object runs; `nfkit disasm` and `nfkit object show` show each
//! relocation beside its instruction, with its value when it has one.

mod common;
use common::Dir;
use nfkit_pcap::Packet;
use std::path::Path;
use std::process::{Command, Output};

fn nfkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .output()
        .expect("run nfkit")
}

/// `tests/progs/NAME.c` built with clang into `dir`.
fn build(dir: &Dir, name: &str) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/progs/{name}.c"));
    let out = dir.path(&format!("{name}.o"));
    nfkit_corpus::BpfBuild::new(src)
        .arg("-mcpu=v3")
        .out(&out)
        .object_file()
        .unwrap_or_else(|e| panic!("{e}"));
    out
}

#[test]
fn unresolved_relocation_refuses_only_the_program_that_needs_it() {
    let dir = Dir::new("core-cli-unresolved");
    let obj = build(&dir, "core_unresolved");
    let pcap = dir.path("in.pcap");
    let frames: Vec<Packet> = [40usize, 80]
        .iter()
        .enumerate()
        .map(|(i, &n)| Packet {
            ts_ns: i as u64 * 1000,
            data: vec![0x45; n],
        })
        .collect();
    nfkit_pcap::write_file(&pcap, &frames).expect("write pcap");

    let bad = nfkit(&["run", &obj, "--section", "xdp_nope", "--pcap", &pcap]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success(), "xdp_nope must be refused: {err}");
    for want in [
        "CO-RE relocation",
        "xdp_nope",
        "byte_off struct iphdr___nope::missing_field",
        "field not found in the kernel's BTF (access 0:0)",
    ] {
        assert!(err.contains(want), "missing `{want}` in: {err}");
    }

    let good = nfkit(&[
        "run",
        &obj,
        "--section",
        "xdp_fine",
        "--pcap",
        &pcap,
        "--json",
    ]);
    let out = String::from_utf8_lossy(&good.stdout);
    assert!(
        good.status.success(),
        "xdp_fine runs: {out}{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    // Both frames hold 0x45 where the kernel's iphdr has `ttl`.
    assert_eq!(v["counts"]["XDP_TX"], 2, "{out}");

    let dis = nfkit(&["disasm", &obj]);
    let text = String::from_utf8_lossy(&dis.stdout);
    assert!(dis.status.success());
    assert!(
        text.contains("; CO-RE byte_off struct iphdr___nope::missing_field (unresolved: field not found in the kernel's BTF (access 0:0))"),
        "{text}"
    );
    assert!(
        text.contains("; CO-RE byte_off struct iphdr___mine::ttl = 8"),
        "{text}"
    );

    let show = nfkit(&["object", "show", &obj]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success(), "object show exits 0");
    assert!(text.contains("CO-RE relocations (2):"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("  xdp_fine+")
            && l.ends_with("  CO-RE byte_off struct iphdr___mine::ttl = 8")),
        "{text}"
    );
}
