//! Errors of the catalogue and the search path, each naming what and where.

use crate::docblock::DocError;

/// What went wrong finding or reading an NF module.
#[derive(Debug, thiserror::Error)]
pub enum NfError {
    #[error("cannot read NF directory {path}: {cause}")]
    Dir { path: String, cause: std::io::Error },
    #[error("cannot read NF object {path}: {cause}")]
    Io { path: String, cause: std::io::Error },
    #[error("NF object {path}: {cause}")]
    Object {
        path: String,
        cause: Box<nfkit_object::Error>,
    },
    /// The documentation does not parse (its text embedded: not a `source()`).
    #[error("NF documentation: {0}")]
    Doc(DocError),
    #[error("{path} has no function {symbol}")]
    NoSymbol { path: String, symbol: String },
    #[error("no {what} on the NF search path")]
    NotFound { what: String },
    #[error("linking {what}: {cause}")]
    Link {
        what: String,
        cause: Box<nfkit_object::LinkError>,
    },
    #[error("bad NF name `{0}`: expected NAME or MODULE.NAME (e.g. tb_dst or nf.meter.tb_dst)")]
    BadName(String),
}

impl From<DocError> for NfError {
    fn from(e: DocError) -> NfError {
        NfError::Doc(e)
    }
}
