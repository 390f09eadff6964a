//! Compiles the benchmarks' C programs with clang (`-O2 -g -target bpf
//! -mcpu=v3`) into OUT_DIR:
//! * `c/bnop.c` (a no-op NF, built like the catalogue with the NF header
//!   for the XDP hook) as `nf/bnop.xdp.o`, a directory on the NF search path;
//! * `c/tail_nop.c` (N no-op programs tail-calling each other) and
//!   `c/ddos_tail.c` (the DDoS example as a tail-call pipeline);
//! * `examples/c/ddos.c` (the DDoS example by hand, one program) when it
//!   exists; `NFKIT_BENCH_HAND_C` names its object, or is empty.
//!
//! `examples/c` is on the include path: `ddos_tail.c` and `ddos.c` share
//! `examples/c/ddos_common.h` (maps, parsing, buckets, sampling).

use std::path::{Path, PathBuf};
use std::process::Command;

fn multiarch_include() -> Option<String> {
    let out = Command::new("uname").arg("-m").output().ok()?;
    let arch = String::from_utf8(out.stdout).ok()?.trim().to_string();
    Some(format!("/usr/include/{arch}-linux-gnu"))
}

fn clang(src: &Path, obj: &Path, include: &[&Path]) -> Result<(), String> {
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    let mut cmd = Command::new(&clang);
    cmd.args(["-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall"])
        .arg("-DNF_HOOK_XDP");
    for dir in include {
        cmd.arg("-I").arg(dir);
    }
    if let Some(inc) = multiarch_include() {
        cmd.arg(format!("-I{inc}"));
    }
    cmd.arg("-c").arg(src).arg("-o").arg(obj);
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {clang} (install clang and libbpf-dev): {e}"))?;
    if !status.success() {
        return Err(format!("{clang} failed on {}", src.display()));
    }
    Ok(())
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let include = manifest.join("../../nf/include");
    let c = manifest.join("c");
    let examples = manifest.join("../../examples");
    let examples_c = examples.join("c");
    println!("cargo:rerun-if-changed={}", c.display());
    println!("cargo:rerun-if-changed={}", include.display());
    for header in ["ddos_common.h", "hand_common.h"] {
        println!(
            "cargo:rerun-if-changed={}",
            examples_c.join(header).display()
        );
    }
    let include: [&Path; 2] = [&include, &examples_c];
    println!("cargo:rerun-if-env-changed=CLANG");
    let nfdir = out.join("nf");
    std::fs::create_dir_all(&nfdir).expect("OUT_DIR/nf");
    for (src, obj) in [
        ("bnop.c", nfdir.join("bnop.xdp.o")),
        ("tail_nop.c", out.join("tail_nop.o")),
        ("ddos_tail.c", out.join("ddos_tail.o")),
    ] {
        let src = c.join(src);
        println!("cargo:rerun-if-changed={}", src.display());
        if let Err(e) = clang(&src, &obj, &include) {
            panic!("{e}");
        }
    }
    // The hand-written C example, when it is there (and compiles).
    let hand = examples_c.join("ddos.c");
    println!("cargo:rerun-if-changed={}", examples.display());
    println!("cargo:rerun-if-changed={}", examples_c.display());
    let mut hand_obj = String::new();
    if hand.is_file() {
        println!("cargo:rerun-if-changed={}", hand.display());
        let obj = out.join("ddos_hand.o");
        match clang(&hand, &obj, &include) {
            Ok(()) => hand_obj = obj.display().to_string(),
            Err(e) => println!("cargo:warning=hand-written C DDoS left out: {e}"),
        }
    }
    println!("cargo:rustc-env=NFKIT_BENCH_HAND_C={hand_obj}");
}
