//! Errors of the catalogue and the search path, each naming what and where.

use crate::docblock::DocError;

/// What went wrong finding or reading an NF module.
#[derive(Debug, thiserror::Error)]
pub enum NfError {
    #[error("cannot read NF directory {path}: {source}")]
    Dir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read NF object {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("NF object {path}: {source}")]
    Object {
        path: String,
        #[source]
        source: Box<nfkit_object::Error>,
    },
    #[error("NF documentation: {0}")]
    Doc(#[from] DocError),
    #[error("{path} has no function {symbol}")]
    NoSymbol { path: String, symbol: String },
    #[error("no {what} on the NF search path")]
    NotFound { what: String },
    #[error("linking {what}: {source}")]
    Link {
        what: String,
        #[source]
        source: Box<nfkit_object::LinkError>,
    },
    #[error("bad NF name `{0}`: expected NAME or MODULE.NAME (e.g. tb_dst or nf.meter.tb_dst)")]
    BadName(String),
}
