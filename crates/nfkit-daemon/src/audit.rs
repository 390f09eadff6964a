//! The audit log: one JSON line per change and per refused request
//! (who, what, on what, the content digest, the result), appended with
//! one write to a file opened `O_APPEND` and flushed to disk before the
//! reply goes out.

use crate::auth::Identity;
use crate::error::DaemonError;
use serde::Serialize;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One line of the log.
#[derive(Clone, Debug, Serialize)]
pub struct Record<'a> {
    /// Unix milliseconds.
    pub ts_ms: u64,
    /// `None`: the connection had no peer credentials.
    pub who: Option<Identity>,
    /// The RPC's full name.
    pub rpc: &'a str,
    /// What it was about (`veth0 xdp`, a map, a chain), when known.
    pub target: &'a str,
    /// `sha256:<hex>` of the deployed or registered source, when any.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub digest: &'a str,
    /// `ok`, `refused` or `failed`.
    pub result: &'a str,
    /// The gRPC status code name (`OK`, `PERMISSION_DENIED`, ...).
    pub code: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub message: &'a str,
}

/// The open log.
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl AuditLog {
    /// Opens (creating, mode 0600) `path` for appending.
    pub fn open(path: &Path) -> Result<AuditLog, DaemonError> {
        let io = |e| DaemonError::Io {
            what: "open audit log",
            path: path.to_path_buf(),
            cause: e,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `r` as one line and syncs it; a failure is told on stderr
    /// (the request's result stands).
    pub fn write(&self, r: &Record<'_>) {
        let Ok(mut line) = serde_json::to_vec(r) else {
            return;
        };
        line.push(b'\n');
        let mut f = match self.file.lock() {
            Ok(f) => f,
            Err(p) => p.into_inner(),
        };
        if let Err(e) = f.write_all(&line).and_then(|()| f.sync_data()) {
            eprintln!("nfkitd: audit log {}: {e}", self.path.display());
        }
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
