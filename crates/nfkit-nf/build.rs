//! Builds the NF catalogue: every `nf/*.c` is checked for complete doc
//! blocks (src/docblock.rs) and compiled by clang once per hook the module
//! declares (`@hooks`), with
//! `clang -O2 -g -target bpf -mcpu=v3 -DNF_HOOK_<HOOK> -I nf/include
//! -I/usr/include/<arch>-linux-gnu`. The objects land in OUT_DIR and the
//! generated `catalogue.rs` embeds them (with the sources) in the library.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "src/docblock.rs"]
#[allow(dead_code)]
mod docblock;

fn multiarch_include() -> Option<String> {
    let out = Command::new("uname").arg("-m").output().ok()?;
    let arch = String::from_utf8(out.stdout).ok()?.trim().to_string();
    Some(format!("/usr/include/{arch}-linux-gnu"))
}

fn path_str(p: &Path) -> String {
    p.canonicalize()
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

fn hook_variant(h: &str) -> &'static str {
    match h {
        "xdp" => "Hook::Xdp",
        "tc" => "Hook::Tc",
        "switch" => "Hook::Switch",
        _ => "Hook::Socket",
    }
}

/// `clang -O2 -g -target bpf -mcpu=v3 -DNF_HOOK_<HOOK> -I include [-I arch] -c src -o obj`.
fn compile(
    clang: &str,
    src: &Path,
    hook: &str,
    include: &Path,
    arch_inc: Option<&str>,
    obj: &Path,
) {
    let mut cmd = Command::new(clang);
    cmd.args(["-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall"])
        .arg(format!("-DNF_HOOK_{}", hook.to_uppercase()))
        .arg("-I")
        .arg(include);
    if let Some(inc) = arch_inc {
        cmd.arg(format!("-I{inc}"));
    }
    cmd.arg("-c").arg(src).arg("-o").arg(obj);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {clang} (install clang and libbpf-dev): {e}"));
    if !status.success() {
        panic!("{clang} failed on {} for hook {hook}", src.display());
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let nf_dir = manifest.join("../../nf");
    let include = nf_dir.join("include");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-changed={}", nf_dir.display());
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed=src/docblock.rs");
    println!("cargo:rerun-if-changed=src/caller.c");
    for dir in [&nf_dir, &include] {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            println!("cargo:rerun-if-changed={}", entry.path().display());
        }
    }
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&nf_dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", nf_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    let arch_inc = multiarch_include();
    // nfkit.h and the parts it includes, as one text.
    let header_parts = [
        include.join("nfkit.h"),
        include.join("nfkit/abi.h"),
        include.join("nfkit/parse.h"),
        include.join("nfkit/export.h"),
    ];
    let header: String = header_parts
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
        })
        .collect();

    let mut table = String::from("&[\n");
    for src in &sources {
        let stem = src
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("utf-8 file name");
        let text = std::fs::read_to_string(src)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", src.display()));
        let doc = docblock::parse_source_with(&format!("nf/{stem}.c"), &text, &[&header])
            .unwrap_or_else(|e| panic!("NF documentation error: {e}"));
        if doc.name != stem {
            panic!(
                "nf/{stem}.c: @module {} must be the file name {stem}",
                doc.name
            );
        }
        let mut objects = String::new();
        // A module with classifiers built for XDP is built once more for
        // the software switch (-DNF_HOOK_SWITCH: its entry programs return
        // the resolved verdict); the switch uses the XDP builds of NFs.
        let mut hooks = doc.hooks.clone();
        if !doc.classifiers.is_empty() && hooks.iter().any(|h| h == "xdp") {
            hooks.push("switch".to_string());
        }
        for hook in &hooks {
            let obj = out.join(format!("{stem}.{hook}.o"));
            let mut cmd = Command::new(&clang);
            cmd.args(["-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall"])
                .arg(format!("-DNF_HOOK_{}", hook.to_uppercase()))
                .arg("-I")
                .arg(&include);
            if let Some(inc) = &arch_inc {
                cmd.arg(format!("-I{inc}"));
            }
            cmd.arg("-c").arg(src).arg("-o").arg(&obj);
            let status = cmd.status().unwrap_or_else(|e| {
                panic!("cannot run {clang} (install clang and libbpf-dev): {e}")
            });
            if !status.success() {
                panic!("{clang} failed on {} for hook {hook}", src.display());
            }
            objects.push_str(&format!(
                "            HookObj {{ hook: {}, object: include_bytes!({:?}), path: {:?} }},\n",
                hook_variant(hook),
                path_str(&obj),
                path_str(&obj),
            ));
        }
        table.push_str(&format!(
            "    ModuleObj {{\n        name: {stem:?},\n        module: \"nf.{stem}\",\n        source: include_str!({:?}),\n        objects: &[\n{objects}        ],\n    }},\n",
            path_str(src),
        ));
    }
    table.push_str("]\n");

    // The caller (src/caller.c), once per hook.
    let caller = manifest.join("src/caller.c");
    let mut callers = String::from("&[\n");
    for hook in docblock::HOOK_NAMES {
        let obj = out.join(format!("caller.{hook}.o"));
        compile(&clang, &caller, hook, &include, arch_inc.as_deref(), &obj);
        callers.push_str(&format!(
            "    HookObj {{ hook: {}, object: include_bytes!({:?}), path: {:?} }},\n",
            hook_variant(hook),
            path_str(&obj),
            path_str(&obj),
        ));
    }
    callers.push_str("]\n");
    std::fs::write(out.join("callers.rs"), callers).expect("write callers.rs");
    std::fs::write(out.join("catalogue.rs"), table).expect("write catalogue.rs");
    std::fs::write(
        out.join("header.rs"),
        format!(
            "concat!({})\n",
            header_parts
                .iter()
                .map(|p| format!("include_str!({:?})", path_str(p)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
    .expect("write header.rs");
}
