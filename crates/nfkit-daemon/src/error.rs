//! The daemon's errors (starting it, its files); request errors are
//! gRPC statuses made in [`crate::status`].

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{path}: {msg}")]
    Config { path: PathBuf, msg: String },
    #[error("{what} {path}: {cause}")]
    Io {
        what: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}: not valid JSON: {cause}")]
    Json {
        path: PathBuf,
        cause: serde_json::Error,
    },
    #[error("{0}: another nfkitd answers there")]
    Running(PathBuf),
    #[error("serving gRPC: {0}")]
    Serve(String),
}
