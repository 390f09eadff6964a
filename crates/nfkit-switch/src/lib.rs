//! nfkit's software switch: the same chain scripts that run in the
//! kernel, run on real ports by worker threads in nfkit's VM
//! (docs/switch.md).
//!
//! * [`engine`]: [`Switch`] — the script loaded once, N pinned workers
//!   each with its own VM runner, receive queues and a transmit queue on
//!   every port (the crossbar), flow-hash dispatch for ports with fewer
//!   queues than workers; [`SwitchConfig`].
//! * [`action`]: what each verdict does in the switch (ports numbered
//!   from 1; PASS/HOST to the host port; FLOOD; CONTROLLER).
//! * [`code`]: new code to load: a compiled script or a chain object.
//! * [`controller`]: the bounded controller channel.
//! * [`counters`]: per-worker counters and their sum, [`Stats`].
//! * [`flow`]: the flow hash of dispatch.
//! * [`latency`]: receive-to-transmit time per frame, per worker
//!   ([`Switch::latency`]).
//! * [`maps`]: the running version's maps by name, read and written
//!   while it runs ([`Switch::map_get`], ...; [`maps::MapOpError`]).
//! * [`pin`]: pinning workers to CPUs.
//! * [`pipeline`]: the `post` position, run per output port.
//! * [`reload`]: hitless reloads ([`Switch::reload`]): versions of the
//!   chain, published to the workers through an epoch.
//! * [`update`]: authenticated live updates ([`Switch::update`]): the
//!   message verified (crate `nfkit-update`), refusals counted and
//!   logged, code published as a reload, entries written.
//! * [`port`]: the port contract ([`port::RxQueue`], [`port::TxQueue`],
//!   [`port::OpenPort`]), the port kinds ([`port::PortSpec`]), opening
//!   any of them ([`port::any`]), the pcap ports ([`port::pcap`]) and
//!   the live kinds ([`port::open`]: [`port::afxdp`], [`port::afpacket`],
//!   [`port::tap`]).
//! * [`error`] holds [`SwitchError`].

pub mod action;
pub mod code;
pub mod controller;
pub mod counters;
pub mod engine;
pub mod error;
pub mod flow;
pub mod latency;
pub mod maps;
pub mod pin;
pub mod pipeline;
pub mod port;
pub mod reload;
pub mod update;

pub use counters::Stats;
pub use engine::{Switch, SwitchConfig};
pub use error::SwitchError;
pub use reload::{ReloadReport, Version};
pub use update::{Stages, UpdateAuth, UpdateError, UpdateReport};
