//! nfkit's eBPF processor in RTL (`rtl/`, SystemVerilog), simulated with
//! Verilator and driven from Rust.
//!
//! * [`program`]: [`Program`], an entry of an [`Image`](nfkit_object::Image)
//!   checked against the core's instruction subset ([`subset`]) and
//!   encoded for its instruction memory.
//! * [`subset`]: what the core runs, and the loader's refusals, each
//!   naming the instruction or helper it lacks.
//! * [`layout`]: the data memory map (metadata, packet, stack) and the
//!   address regions programs see (the VM's: `region << 32 | offset`).
//! * [`core`]: [`Core`], one engine's model: load a program (or stage one
//!   into the double-buffered instruction memory while packets run), run
//!   it on a packet (raw or XDP [`Ctx`], written before the start or
//!   streamed in), get [`RunResult`] (r0 or a [`Fault`], the packet
//!   afterwards, cycles, retired instructions, [`Stalls`] by cause, the
//!   retired pcs, the instruction memory version).
//! * [`maps`]: the coprocessor's maps (exact match, LPM, array) placed
//!   from an image's map definitions ([`MapTable`], refusing by name what
//!   exceeds its parameters), and their contents from the host side
//!   ([`Core::map_lookup`], [`Core::map_update`], [`Core::map_delete`],
//!   [`Core::map_entries`]).
//! * [`action`]: the action module's settings and answer
//!   ([`ActionConfig`], [`ActionOut`], [`Decision`]).
//! * [`result`]: [`RunResult`], [`Stalls`], [`Fault`].
//! * [`switch`]: [`Switch`], the switch top (ports × engines, round-robin
//!   demux, output arbiters and crossbar, one shared double-buffered
//!   instruction memory): packets offered on ports, their runs and the
//!   copies leaving each output.
//! * [`synth`]: Yosys `synth_xilinx` of one engine ([`sources`]: the RTL,
//!   embedded): LUTs, flip-flops, block RAM, DSPs.
//! * [`error`]: [`RtlError`], including [`RtlError::NotInstalled`] when the
//!   crate was built without Verilator.
//! * `model`: the C ABI of the Verilated model (`csrc/shim.cpp`).

pub mod action;
pub mod core;
pub mod error;
pub mod layout;
pub mod maps;
mod model;
pub mod program;
pub mod result;
pub mod sources;
pub mod subset;
pub mod switch;
pub mod synth;

pub use crate::action::{ActionConfig, ActionOut, Decision};
pub use crate::core::{Core, Ctx, RunInput};
pub use error::RtlError;
pub use maps::{MapDef, MapKind, MapOpError, MapTable};
pub use program::Program;
pub use result::{Fault, FaultKind, Redirect, RunResult, Stalls};
pub use switch::{Output, Switch, SwitchOutput, SwitchPacket, SwitchRun};

/// Whether this build holds the Verilated model (Verilator was installed
/// when the crate was built).
pub const fn model_available() -> bool {
    cfg!(nfkit_rtl_model)
}
