//! Compiles every `corpus/*.c` with clang (`-O2 -g -target bpf -mcpu=v3`)
//! into OUT_DIR and generates the table `src/lib.rs` includes; likewise
//! `examples/c/*.c` (the examples written by hand) into a second table.

use std::path::{Path, PathBuf};
use std::process::Command;

fn multiarch_include() -> Option<String> {
    let out = Command::new("uname").arg("-m").output().ok()?;
    let arch = String::from_utf8(out.stdout).ok()?.trim().to_string();
    Some(format!("/usr/include/{arch}-linux-gnu"))
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-env-changed=CLANG");
    build_dir(&manifest.join("../../corpus"), &out, &out.join("table.rs"));
    let hand = out.join("examples_c");
    std::fs::create_dir_all(&hand).expect("OUT_DIR/examples_c");
    build_dir(
        &manifest.join("../../examples/c"),
        &hand,
        &out.join("examples_c.rs"),
    );
}

/// Compiles every `*.c` of `corpus` into `out`; writes their table to `table_path`.
/// `corpus` is on the include path (examples/c/*.c include its headers,
/// e.g. `ddos_common.h`); every file of it, headers too, reruns the build.
fn build_dir(corpus: &Path, out: &Path, table_path: &Path) {
    println!("cargo:rerun-if-changed={}", corpus.display());
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    let mut sources: Vec<PathBuf> = std::fs::read_dir(corpus)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", corpus.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    for entry in std::fs::read_dir(corpus).into_iter().flatten().flatten() {
        println!("cargo:rerun-if-changed={}", entry.path().display());
    }
    let mut table = String::from("&[\n");
    for src in &sources {
        let stem = src
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("utf-8 file name");
        let obj = out.join(format!("{stem}.o"));
        let mut cmd = Command::new(&clang);
        cmd.args(["-O2", "-g", "-target", "bpf", "-mcpu=v3"]);
        cmd.arg("-I").arg(corpus);
        if let Some(inc) = multiarch_include() {
            cmd.arg(format!("-I{inc}"));
        }
        cmd.arg("-c").arg(src).arg("-o").arg(&obj);
        let status = cmd
            .status()
            .unwrap_or_else(|e| panic!("cannot run {clang} (install clang and libbpf-dev): {e}"));
        if !status.success() {
            panic!("{clang} failed on {}", src.display());
        }
        table.push_str(&format!(
            "    Entry {{ name: {stem:?}, source: include_str!({:?}), object: include_bytes!({:?}), path: {:?} }},\n",
            path_str(src),
            path_str(&obj),
            path_str(&obj),
        ));
    }
    table.push_str("]\n");
    std::fs::write(table_path, table).expect("write table");
}

fn path_str(p: &Path) -> String {
    p.canonicalize()
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}
