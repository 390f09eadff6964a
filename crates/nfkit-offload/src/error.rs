//! Errors of the analysis: what cannot even start (the path-level
//! limits are not errors: such paths go to software with a reason).

/// Why a program cannot be analysed.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    #[error("no entry program called `{0}` in the image")]
    NoEntry(String),
    #[error("entry `{entry}` is a {prog_type} program; offload analyses XDP programs")]
    NotXdp { entry: String, prog_type: String },
    #[error("entry `{0}` names function {1}, which the image does not have")]
    BadFunction(String, usize),
    #[error("slot {slot} ({at}): jump or call to slot {target}, outside the program or inside an instruction")]
    BadTarget {
        slot: usize,
        at: String,
        target: i64,
    },
}
