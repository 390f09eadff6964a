//! Test traffic for nfkit: build Ethernet frames, send them on an
//! interface (optionally inside a named network namespace) with nfkit's
//! XDP live-frame generator or a raw packet socket, and count what
//! arrives on another one with nfkit's counting XDP program or a raw
//! packet socket.
//!
//! * [`frame`]: UDP and TCP over IPv4 and IPv6 with correct checksums
//!   ([`FrameSpec`], [`build`]), and [`parse`](frame::parse) for the
//!   fields a receiver counts by.
//! * [`seq`]: sequence stamps in UDP payloads ([`stamp`](seq::stamp),
//!   [`read`](seq::read)), so a receiver can tell lost and duplicated
//!   frames apart.
//! * [`flows`]: the `--flows` text format ([`parse_flows`]).
//! * [`send`](mod@send): the paced sender, live or packet engine
//!   ([`send`], [`SendOptions`], [`Engine`], [`SendReport`]).
//! * [`recv`](mod@recv): the counting receiver, XDP or packet engine
//!   ([`Receiver`], [`RecvEngine`], [`RecvReport`]), and [`Capture`].
//! * [`xdp`]: the XDP programs (`bpf/*.c`, built by `build.rs`) and
//!   their loaders: generator, counter, a devmap forwarder and a
//!   pass-all program for benchmarks and tests.
//! * [`stop_on_signals`]: a flag SIGINT and SIGTERM set, for both to
//!   stop cleanly.
//! * [`error`] holds [`TrafficError`].
//! * `sys` (private): the crate's only `unsafe` code (AF_PACKET
//!   sockets, `setns`, interface ioctls, timer slack, signal handler,
//!   live-frame test runs, CPU pinning, BPF run-time statistics).

#![deny(unsafe_code)]

pub mod error;
pub mod flows;
pub mod frame;
pub mod recv;
pub mod send;
pub mod seq;
mod sys;
pub mod xdp;

pub use error::TrafficError;
pub use flows::parse_flows;
pub use frame::{build, FrameSpec, Mac, Proto};
pub use recv::{Capture, Receiver, RecvEngine, RecvOptions, RecvReport, StreamReport};
pub use send::{send, Engine, SendOptions, SendReport, Source};

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Installs a SIGINT and SIGTERM handler that sets the returned flag
/// (pass it as [`SendOptions::stop`], or poll it and stop a
/// [`Receiver`]). A second signal ends the process as usual.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>, TrafficError> {
    sys::stop_on_signals().map_err(|e| TrafficError::os("installing the signal handler", e))
}
