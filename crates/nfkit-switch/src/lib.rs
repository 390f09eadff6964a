//! nfkit's software switch: the same chain scripts that run in the
//! kernel, run on real ports by worker threads in nfkit's VM.
//!
//! * [`port`]: the port contract ([`port::RxQueue`], [`port::TxQueue`],
//!   [`port::OpenPort`]) and the port kinds ([`port::PortSpec`]).
//! * [`error`] holds [`SwitchError`].

pub mod error;
pub mod port;

pub use error::SwitchError;
