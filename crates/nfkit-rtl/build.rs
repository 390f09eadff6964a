//! Builds the RTL core (`../../rtl/*.sv`) into a C++ model with Verilator
//! and the C ABI shim (`csrc/shim.cpp`) around it, both linked into this
//! crate, and sets `cfg(nfkit_rtl_model)`. Without `verilator` on PATH (or
//! with `NFKIT_RTL_NO_VERILATOR=1`) nothing is built and the crate's runs
//! report that Verilator is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

const TOP: &str = "ebpf_top";
/// Map lines of the simulated model (`layout::LINES`).
const LINES: usize = 1024;
/// Maps and key bytes of the simulated model (`layout::NMAPS`,
/// `layout::KEY_BYTES`: the chains declare up to 20 maps, keys up to 48
/// bytes).
const NMAPS: usize = 32;
const KEY_BYTES: usize = 48;
/// The switch top (`rtl/ebpf_switch.sv`), its own model: ports and
/// engines per port (eBPFlow's 4 x 4) and one coprocessor for the maps
/// of all engines, with the single engine's map parameters.
const SWITCH_TOP: &str = "ebpf_switch";
const SWITCH_PORTS: usize = 4;
const SWITCH_ENGINES: usize = 4;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(nfkit_rtl_model)");
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let rtl = manifest.join("../../rtl");
    println!("cargo:rerun-if-changed={}", rtl.display());
    println!("cargo:rerun-if-changed=csrc/shim.cpp");
    println!("cargo:rerun-if-changed=csrc/switch.cpp");
    println!("cargo:rerun-if-env-changed=NFKIT_RTL_NO_VERILATOR");
    // Rebuilt when Verilator appears or changes (a missing path makes
    // cargo rerun this script, which is cheap without Verilator).
    let tool = find_on_path("verilator").unwrap_or_else(|| PathBuf::from("/usr/bin/verilator"));
    println!("cargo:rerun-if-changed={}", tool.display());
    if std::env::var_os("NFKIT_RTL_NO_VERILATOR").is_some_and(|v| v != "0") {
        return;
    }
    let Some(root) = verilator_root() else {
        println!("cargo:warning=verilator not installed: nfkit-rtl builds without the RTL model (run scripts/install-deps.sh)");
        return;
    };
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mdir = out.join("verilated");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&rtl)
        .expect("rtl/ holds the core's sources")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sv"))
        .collect();
    sources.sort();

    // The model: -O2 rather than Verilator's -Os, two make jobs (the
    // machine's cores are shared), VCD tracing compiled in (off at run time
    // unless asked for).
    let status = Command::new("verilator")
        .args(["--cc", "--build", "-j", "2", "--no-timing", "--trace"])
        .args(["--top-module", TOP, "--prefix", &format!("V{TOP}")])
        // The coprocessor's map lines (the sources default to eBPFlow's
        // 32, what `nfkit rtl synth` synthesises).
        .arg(format!("-GLINES={LINES}"))
        .arg(format!("-GNMAPS={NMAPS}"))
        .arg(format!("-GKEY_BYTES={KEY_BYTES}"))
        .args(["-MAKEFLAGS", "OPT_FAST=-O2"])
        .arg(format!("-I{}", rtl.display()))
        .arg("--Mdir")
        .arg(&mdir)
        .args(&sources)
        .status()
        .expect("running verilator");
    assert!(status.success(), "verilator failed to build the RTL model");

    // Rust links static libraries named lib*.a.
    let model = out.join(format!("libv{TOP}_model.a"));
    std::fs::copy(mdir.join(format!("V{TOP}__ALL.a")), &model).expect("copying the model library");

    // The switch: 16 engines, no tracing (one engine's VCD is the
    // single-engine model's job).
    let sdir = out.join("verilated_switch");
    let status = Command::new("verilator")
        .args(["--cc", "--build", "-j", "2", "--no-timing"])
        .args([
            "--top-module",
            SWITCH_TOP,
            "--prefix",
            &format!("V{SWITCH_TOP}"),
        ])
        .arg(format!("-GPORTS={SWITCH_PORTS}"))
        .arg(format!("-GENGINES={SWITCH_ENGINES}"))
        .arg(format!("-GLINES={LINES}"))
        .arg(format!("-GNMAPS={NMAPS}"))
        .arg(format!("-GKEY_BYTES={KEY_BYTES}"))
        .args(["-MAKEFLAGS", "OPT_FAST=-O2"])
        .arg(format!("-I{}", rtl.display()))
        .arg("--Mdir")
        .arg(&sdir)
        .args(&sources)
        .status()
        .expect("running verilator");
    assert!(
        status.success(),
        "verilator failed to build the switch model"
    );
    std::fs::copy(
        sdir.join(format!("V{SWITCH_TOP}__ALL.a")),
        out.join(format!("libv{SWITCH_TOP}_model.a")),
    )
    .expect("copying the switch model library");
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        .warnings(false)
        .define("NFKIT_SW_PORTS", SWITCH_PORTS.to_string().as_str())
        .define("NFKIT_SW_ENGINES", SWITCH_ENGINES.to_string().as_str())
        .define("NFKIT_NMAPS", NMAPS.to_string().as_str())
        .define("NFKIT_LINES", LINES.to_string().as_str())
        .define("NFKIT_KEY_WORDS", (KEY_BYTES / 4).to_string().as_str())
        .include(&sdir)
        .include(root.join("include"))
        .include(root.join("include/vltstd"))
        .file("csrc/switch.cpp")
        .compile("nfkit_rtl_switch_shim");

    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        .warnings(false)
        .define("VM_TRACE", "1")
        .define("NFKIT_NMAPS", NMAPS.to_string().as_str())
        .define("NFKIT_KEY_WORDS", (KEY_BYTES / 4).to_string().as_str())
        .include(&mdir)
        .include(root.join("include"))
        .include(root.join("include/vltstd"))
        .file("csrc/shim.cpp")
        // Verilator's runtime (its --build makes only the model's library).
        .file(root.join("include/verilated.cpp"))
        .file(root.join("include/verilated_vcd_c.cpp"))
        .file(root.join("include/verilated_threads.cpp"))
        .compile("nfkit_rtl_shim");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-search=native={}", mdir.display());
    println!("cargo:rustc-link-lib=static=v{TOP}_model");
    println!("cargo:rustc-link-lib=static=v{SWITCH_TOP}_model");
    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:rustc-cfg=nfkit_rtl_model");
}

/// `name` in one of PATH's directories.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Verilator's install root, if `verilator` runs.
fn verilator_root() -> Option<PathBuf> {
    let out = Command::new("verilator")
        .arg("--getenv")
        .arg("VERILATOR_ROOT")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let root = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    Path::new(&root)
        .join("include/verilated.h")
        .exists()
        .then_some(root)
}
