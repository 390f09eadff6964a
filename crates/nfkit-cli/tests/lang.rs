//! `nfkit compile`, `nfkit check` and `nfkit run SCRIPT`: the chain
//! language from the command line.

use std::path::{Path, PathBuf};
use std::process::Command;

fn nfkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file in a directory of the build's own temporary space (under
/// target/, so nothing is left in /tmp).
fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lang-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d.join(name)
}

#[test]
fn run_script_prints_the_examples_expected_report_and_writes_packets() {
    for name in ["ddos", "dscp_dispatch", "tcp_options"] {
        let ex = root().join("examples");
        let out = tmp(&format!("{name}.out.pcap"));
        let o = nfkit()
            .arg("run")
            .arg(ex.join(format!("{name}.py")))
            .arg("--pcap")
            .arg(ex.join(format!("{name}.pcap")))
            .arg("--out")
            .arg(&out)
            .output()
            .expect("nfkit run");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let want = std::fs::read_to_string(ex.join(format!("{name}.expected"))).expect("expected");
        // The report, then the line naming the engine that ran it.
        let text = String::from_utf8_lossy(&o.stdout);
        let (report, engine) = text
            .trim_end_matches('\n')
            .rsplit_once('\n')
            .expect("lines");
        assert_eq!(format!("{report}\n"), want);
        assert!(engine.starts_with("engine: "), "{engine}");
        let got = std::fs::read(&out).expect("out pcap");
        let want = std::fs::read(ex.join(format!("{name}.out.pcap"))).expect("out pcap");
        assert_eq!(got, want, "{name}: output packets");
    }
}

#[test]
fn run_script_json_and_trace() {
    let ex = root().join("examples");
    let o = nfkit()
        .args(["run", "--json", "--trace"])
        .arg(ex.join("dscp_dispatch.py"))
        .arg("--pcap")
        .arg(ex.join("dscp_dispatch.pcap"))
        .output()
        .expect("nfkit run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["packets"], 8);
    assert_eq!(v["per_packet"][0]["chain"], "voice");
    assert_eq!(v["per_packet"][0]["verdict"], "REDIRECT");
    assert_eq!(v["maps"]["per_class"][0]["value"], 3);
}

#[test]
fn compile_writes_an_object_and_emits_asm_with_script_lines() {
    let script = root().join("examples/ddos.py");
    let obj = tmp("ddos.o");
    let o = nfkit()
        .arg("compile")
        .arg(&script)
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("compile");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&obj).expect("object");
    assert!(bytes.starts_with(b"\x7fELF"));
    let img = nfkit_object::Image::from_elf(&bytes, "ddos.o").expect("reads back");
    assert!(img.entry("every_packet").is_some());
    // Static mode inlines the chain into the classifier; its lines stay.
    assert!(img
        .line_info
        .iter()
        .any(|l| l.text.contains("def mitigate")));
    assert!(img
        .line_info
        .iter()
        .any(|l| l.text.contains("tb_dst(DST_RATE, DST_BURST)")));
    let o = nfkit()
        .arg("compile")
        .arg(&script)
        .args(["--emit", "asm"])
        .output()
        .expect("asm");
    assert!(o.status.success());
    let asm = String::from_utf8_lossy(&o.stdout);
    assert!(asm.contains("mitigate:"), "{asm}");
    assert!(
        asm.contains("; ") && asm.contains("if tb_dst(DST_RATE, DST_BURST) == 0:"),
        "{asm}"
    );
    assert!(
        asm.contains("call -1  # nf_tb_dst") || asm.contains("nf_tb_dst"),
        "{asm}"
    );
}

#[test]
fn check_reports_errors_and_warnings() {
    let bad = tmp("bad.py");
    std::fs::write(&bad, "def main(a: u32, b: u32) -> u32:\n    return a / b\n").expect("write");
    let o = nfkit().arg("check").arg(&bad).output().expect("check");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.py:2:12: error: '/' is not supported"),
        "{err}"
    );
    assert!(
        err.contains("    return a / b\n           ^\n  help: use '//'"),
        "{err}"
    );
    let o = nfkit()
        .arg("check")
        .arg(root().join("examples/tcp_options.py"))
        .output()
        .expect("check");
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning: 'while' loop"));
    assert!(o.stdout.is_empty());
}
