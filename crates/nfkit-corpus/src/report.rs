//! Where the benches of `make bench` leave their reports:
//! `target/nfkit-bench/NAME` (under `CARGO_TARGET_DIR` when it is set),
//! which the Makefile prints at the end of the run.

use std::path::{Path, PathBuf};

/// The report directory, `target/nfkit-bench` of this workspace.
pub fn bench_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("nfkit-bench")
}

/// Writes `text` as report `name` in [`bench_dir`]; a failure is said on
/// stderr (a bench's table is printed anyway) and gives `None`.
pub fn write_bench_report(name: &str, text: &str) -> Option<PathBuf> {
    let dir = bench_dir();
    let path = dir.join(name);
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
        Ok(()) => Some(path),
        Err(e) => {
            eprintln!("writing the bench report {}: {e}", path.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_directory_is_the_workspace_target_unless_overridden() {
        if std::env::var_os("CARGO_TARGET_DIR").is_none() {
            let d = bench_dir();
            assert!(d.ends_with("target/nfkit-bench"), "{}", d.display());
            assert!(d
                .parent()
                .and_then(Path::parent)
                .is_some_and(|w| w.join("Cargo.toml").exists()));
        }
    }
}
