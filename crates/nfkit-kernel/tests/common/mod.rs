//! Shared by the kernel tests (here, and in nfkit-cli's tests, which
//! include this file through their own `tests/common/mod.rs`): the root
//! check, a private bpffs mount and state directory, `tc` in a namespace.
#![allow(dead_code)]

use nfkit_kernel::deploy::Paths;
use nfkit_kernel::testbed::Netns;
use std::path::PathBuf;
use std::process::Command;

pub use nfkit_kernel::is_root;

/// A private bpffs mount and state directory
/// (`$TMPDIR/nfkit-TAG-PID/{bpf,state}`), unmounted and removed on drop.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("nfkit-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bpf")).expect("scratch dir");
        let s = Scratch { dir };
        let ok = Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(s.bpf())
            .status()
            .is_ok_and(|st| st.success());
        assert!(ok, "mount bpffs");
        s
    }

    /// The bpffs mount (`NFKIT_PIN_ROOT`).
    pub fn bpf(&self) -> PathBuf {
        self.dir.join("bpf")
    }

    /// The state directory (`NFKIT_STATE_DIR`).
    pub fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// The same two places as `nfkit_kernel::deploy` takes them.
    pub fn paths(&self) -> Paths {
        Paths {
            pin_root: self.bpf(),
            state_file: self.state().join("state.json"),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.bpf()).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `tc -n NS ARGS`: its stdout.
pub fn tc(ns: &Netns, args: &[&str]) -> String {
    let out = Command::new("tc")
        .args(["-n", ns.name()])
        .args(args)
        .output()
        .expect("tc");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds nfkit-kernel's `tests/progs/NAME.c` with clang (`-O2 -g
/// -target bpf`, the corpus's `common.h` on the include path); the
/// object's bytes.
pub fn compile(name: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../nfkit-kernel");
    nfkit_corpus::BpfBuild::new(dir.join(format!("tests/progs/{name}.c")))
        .include(dir.join("../../corpus"))
        .bytes()
        .unwrap_or_else(|e| panic!("{e}"))
}
