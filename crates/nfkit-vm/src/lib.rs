//! nfkit's userspace eBPF VM: runs an [`Image`](nfkit_object::Image)
//! outside the kernel, as correct as the kernel and safe against any
//! program.
//!
//! # Using it
//!
//! ```no_run
//! use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};
//! # fn demo(image: &nfkit_object::Image, frame: &[u8]) -> Result<(), nfkit_vm::LoadError> {
//! let vm = Vm::new(image, VmConfig::kernel())?;        // check + translate + create maps
//! let mut runner = vm.runner();                        // one per thread
//! let res = runner.run("xdp_prog", Context::Xdp(XdpMd::new(frame)), &RunOptions::default());
//! match &res.result {
//!     Ok(code) => println!("returned {code}, packet now {} bytes", res.packet.len()),
//!     Err(e) => println!("fault: {e}"),                 // names instruction and address
//! }
//! let counters = vm.map("counters");                   // control plane: lookup/update/delete
//! # let _ = counters; Ok(()) }
//! ```
//!
//! * [`Vm::new`] checks the program ([`check`]): jump and call targets,
//!   uninitialised registers, r10 writes, helpers per profile and program
//!   type, falling off a function, size, map references, call depth (and
//!   in kernel-compatible mode the stack budget and recursion). Errors
//!   ([`LoadError`]) name the instruction and the rule.
//! * [`Vm::run`] / [`Runner::run`] run an entry on a [`Context`] (XDP,
//!   socket buffer, the conformance suite's raw memory) and give a
//!   [`RunResult`]: r0 or a [`RunError`] (instruction, `function+offset`,
//!   address, fault code), the packet afterwards, redirect target,
//!   `trace_printk` output, instruction count, optional trace.
//! * [`Runner::run_packet`] runs on the caller's own packet buffer with a
//!   [`PacketCtx`] and gives a small [`RunOutcome`]: no allocation per
//!   run, the buffer rewritten only when the program may have changed it
//!   (the per-packet path of a switch). XDP runs on a runner set up by
//!   an earlier run of the same shape take a shorter path (`vm::fast`).
//! * [`Vm::maps`] reaches the maps ([`maps::Map`]): shared between threads,
//!   readable and writable from Rust with the kernel's flags and errors.
//! * `Vm` is `Send + Sync` and cheap to clone; runs on several threads
//!   share the maps, and atomics on map values are real atomics.
//!
//! # Modules, in the order a program meets them
//!
//! * Configuring: [`config`]: [`VmConfig`], [`Profile`], [`RunOptions`],
//!   pinnable [`Clock`] and [`Rng`].
//! * Loading: [`check`] (the load-time checks, phase by phase, and the
//!   translation) into [`prog`] (the pre-decoded op form the interpreter
//!   dispatches on); [`vm`]: [`Vm`], the loaded program with its maps.
//! * Running: [`vm`]: `Vm::run`, a run's phases (prepare, execute,
//!   finish); `runner`: [`Runner`]; `facts`: what a program can touch,
//!   read at load (so runs clear only that); `interp`: the interpreter loop; `trace`: recording
//!   traced runs; [`result`]: [`RunResult`], [`Redirect`] and the trace
//!   ([`TraceStep`]: registers, [`MemAccess`], [`HelperCall`]), each
//!   printable as text.
//! * What programs touch: [`mem`], the address space (regions, checked
//!   accesses; its child `mem::unsafe_region` holds the crate's
//!   `unsafe` code besides the JIT and `vm::fast`'s two packet copies:
//!   guard-paged buffers, atomic accesses); [`ctx`],
//!   contexts and their access rules; [`maps`], map types; [`helpers`],
//!   helper functions and per-profile tables.
//! * Errors: [`error`]: [`LoadError`], [`RunError`].

#![deny(unsafe_code)]

pub mod check;
pub mod config;
pub mod ctx;
pub mod error;
mod facts;
pub mod helpers;
mod interp;
mod jit;
pub mod maps;
pub mod mem;
pub mod prog;
pub mod result;
mod runner;
mod trace;
pub mod vm;

pub use config::{
    Clock, Engine, EngineUse, FixedClock, FixedRng, Profile, RealClock, Rng, RunOptions, SeqRng,
    VmConfig,
};
pub use ctx::{Context, PacketCtx, SkBuff, SkbFields, XdpMd};
pub use error::{LoadError, Rule, RunError, RunErrorKind};
pub use helpers::fib::{FibParseError, FibTable};
pub use maps::{Map, MapError, Maps};
pub use result::{
    AccessKind, CloneRedirect, HelperCall, MemAccess, MemRegion, PerfEvent, Redirect, RegChange,
    RunOutcome, RunResult, TraceStep, TunnelKey,
};
pub use vm::{EntryRef, LoadTimes, Runner, Vm};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}
    #[test]
    fn vm_is_send_and_sync() {
        assert_send_sync::<super::Vm>();
        assert_send_sync::<super::Runner>();
    }
}
