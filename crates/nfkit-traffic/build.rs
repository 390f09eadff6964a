//! Compiles the crate's XDP programs (`bpf/gen.c`, the live-frame
//! generator; `bpf/count.c`, the counting receiver; `bpf/fwd.c`, the
//! benchmarks' devmap forwarder) with `clang -O2 -g -target bpf
//! -mcpu=v3` into OUT_DIR, where `src/xdp.rs` embeds them.

use std::path::PathBuf;
use std::process::Command;

fn multiarch_include() -> Option<String> {
    let out = Command::new("uname").arg("-m").output().ok()?;
    let arch = String::from_utf8(out.stdout).ok()?.trim().to_string();
    Some(format!("/usr/include/{arch}-linux-gnu"))
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    println!("cargo:rerun-if-env-changed=CLANG");
    let arch = multiarch_include();
    for name in ["gen", "count", "fwd"] {
        let src = manifest.join("bpf").join(format!("{name}.c"));
        println!("cargo:rerun-if-changed={}", src.display());
        let mut cmd = Command::new(&clang);
        cmd.args(["-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall"]);
        if let Some(inc) = &arch {
            cmd.arg(format!("-I{inc}"));
        }
        cmd.arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(out.join(format!("{name}.o")));
        let status = cmd
            .status()
            .unwrap_or_else(|e| panic!("cannot run {clang} (install clang and libbpf-dev): {e}"));
        if !status.success() {
            panic!("{clang} failed on {}", src.display());
        }
    }
}
