//! The crate's errors.

use std::path::PathBuf;

/// Why a datagram is not a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("unknown command")]
    Unknown,
    #[error("command bytes are not ASCII")]
    NotAscii,
    #[error("{command} takes {want} bytes, got {len}")]
    Length {
        command: &'static str,
        len: usize,
        want: usize,
    },
}

/// Errors of the server, the clients and the experiment.
#[derive(Debug, thiserror::Error)]
pub enum BagError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("filter script {file}: {cause}")]
    Compile { file: String, cause: String },
    #[error("{0}")]
    Kernel(#[from] nfkit_kernel::KernelError),
    #[error("unknown behaviour `{0}` (thor, odin, loki, njord, sylvie, sif, frey, frigg)")]
    Behaviour(String),
    #[error("{0}")]
    Config(String),
    #[error("plot {path}: {msg}")]
    Plot { path: PathBuf, msg: String },
    #[error("{0}")]
    Thread(&'static str),
}

/// `BagError::Io` with a description of what was being done.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BagError {
    let what = what.into();
    move |source| BagError::Io { what, source }
}
