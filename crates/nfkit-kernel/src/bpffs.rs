//! bpffs: where pinned programs, maps and links live. nfkit pins under
//! [`PIN_DIR`]; [`ensure_bpffs`] mounts bpffs at [`BPFFS`] when it is not.

use crate::error::KernelError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where bpffs is mounted.
pub const BPFFS: &str = "/sys/fs/bpf";
/// nfkit's own directory on bpffs.
pub const PIN_DIR: &str = "/sys/fs/bpf/nfkit";

/// Is a bpf filesystem mounted at `path` (per /proc/self/mounts)?
pub fn is_bpffs(path: &Path) -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    mounts.lines().any(|l| {
        let mut f = l.split_whitespace();
        let (_dev, dir, fstype) = (f.next(), f.next(), f.next());
        dir.is_some_and(|d| Path::new(d) == path) && fstype == Some("bpf")
    })
}

/// Mounts bpffs at [`BPFFS`] unless it is there, and creates
/// [`PIN_DIR`]; returns that directory.
pub fn ensure_bpffs() -> Result<PathBuf, KernelError> {
    let root = Path::new(BPFFS);
    let err = |msg: String| KernelError::Bpffs {
        path: BPFFS.to_string(),
        msg,
    };
    if !is_bpffs(root) {
        std::fs::create_dir_all(root).map_err(|e| err(format!("cannot create: {e}")))?;
        let out = Command::new("mount")
            .args(["-t", "bpf", "bpf", BPFFS])
            .output()
            .map_err(|e| err(format!("cannot run mount: {e}")))?;
        if !out.status.success() {
            return Err(err(format!(
                "mount -t bpf failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    std::fs::create_dir_all(PIN_DIR).map_err(|e| KernelError::Bpffs {
        path: PIN_DIR.to_string(),
        msg: format!("cannot create: {e}"),
    })?;
    Ok(PathBuf::from(PIN_DIR))
}
