//! Every NF passes the running kernel's verifier for each hook it is built
//! for, in its three forms: the standalone program (`xdp_`/`tc_`/`sock_`
//! `<name>`), the dynamic entry (`dyn_<name>`), and as a global function
//! called from another program: both programs call `nf_<name>` as a real
//! call (weak, so never inlined; tests/signatures.rs), and the kernel
//! verifies a global function once, separately, against its BTF signature,
//! exactly as when a chain calls it. (tests/kernel_diff.rs also loads the
//! caller, a chain-like program, with many NFs.) Classifier objects load
//! with both their forms. Uses `bpftool prog loadall` (needs root and
//! bpffs, as CI has); pins are removed again.

use nfkit_nf::catalogue;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Pins(Vec<PathBuf>);

impl Drop for Pins {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// `bpftool prog loadall obj pin`; the pinned program names.
fn loadall(obj: &Path, tag: &str, pins: &mut Pins) -> Result<Vec<String>, String> {
    let pin =
        PathBuf::from("/sys/fs/bpf").join(format!("nfkit-nf-load-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&pin);
    pins.0.push(pin.clone());
    let o = Command::new("bpftool")
        .args(["prog", "loadall"])
        .arg(obj)
        .arg(&pin)
        .output()
        .map_err(|e| format!("bpftool: {e}"))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        let tail: Vec<&str> = err.lines().rev().take(15).collect();
        return Err(format!(
            "{tag}: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    let mut names: Vec<String> = std::fs::read_dir(&pin)
        .map_err(|e| format!("{}: {e}", pin.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    let _ = std::fs::remove_dir_all(&pin);
    Ok(names)
}

fn ensure_bpffs() {
    let mounted = std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf"))
        })
        .unwrap_or(false);
    if !mounted {
        let _ = Command::new("mount")
            .args(["-t", "bpf", "bpf", "/sys/fs/bpf"])
            .status();
    }
}

#[test]
fn every_module_object_loads_with_all_its_programs() {
    ensure_bpffs();
    let mut pins = Pins(Vec::new());
    for m in catalogue() {
        let doc = m.doc().expect("doc");
        for o in m.objects {
            let names = loadall(
                Path::new(o.path),
                &format!("{}-{}", m.name, o.hook),
                &mut pins,
            )
            .unwrap_or_else(|e| panic!("kernel refused {} for {}:\n{e}", m.name, o.hook));
            for nf in doc
                .nfs
                .iter()
                .filter(|n| n.hooks.iter().any(|h| h == o.hook.name()))
            {
                for p in [
                    format!("{}{}", o.hook.standalone_prefix(), nf.name),
                    format!("dyn_{}", nf.name),
                ] {
                    assert!(names.contains(&p), "{}: {p} not loaded ({names:?})", m.name);
                }
            }
            for c in &doc.classifiers {
                assert!(
                    names.contains(&c.name) && names.contains(&format!("dyn_{}", c.name)),
                    "{}",
                    c.name
                );
            }
        }
    }
}
