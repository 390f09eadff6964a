//! The bag-server experiment (docs/bag.md): does dropping invalid
//! requests to a UDP server in a kernel socket filter beat checking
//! them in user space? Built from nfkit's parts: the filter is a chain
//! script (`examples/bag/filter.py`) compiled for the `socket` hook.
//!
//! * [`wire`]: the wire format and the user-space validity check.
//! * [`filter`]: the kernel filter (compile, attach, swap, counters).
//! * [`server`]: the bag server and its measurements.
//! * [`client`]: the seed's client behaviours, rate-controlled.
//! * [`stats`]: means and Student-t confidence intervals.
//! * [`experiment`]: the sweep, its CSV, plots and report.
//! * [`sys`]: the crate's `unsafe` calls (affinity, CPU time, sockets).

pub mod client;
pub mod error;
pub mod experiment;
pub mod filter;
pub mod plot;
pub mod report;
pub mod server;
pub mod stats;
pub mod sys;
pub mod wire;

pub use error::{BagError, WireError};
