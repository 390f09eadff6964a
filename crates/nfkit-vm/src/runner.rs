//! [`Runner`]: one thread's runs of a [`Vm`] with buffers reused between
//! runs, either with a full [`RunResult`] ([`Runner::run`]) or on the
//! caller's own packet buffer with a small [`RunOutcome`]
//! ([`Runner::run_packet`]: no allocation per run, and the buffer is
//! written back only when the program may have changed the packet).

#![forbid(unsafe_code)]

use crate::config::RunOptions;
use crate::ctx::{Context, PacketCtx};
use crate::result::{CloneRedirect, PerfEvent, RunOutcome, RunResult, TunnelKey};
use crate::vm::{Buffers, EntryRef, Vm};

/// Runs a [`Vm`] many times with buffers reused between runs (one per
/// thread).
pub struct Runner {
    vm: Vm,
    bufs: Option<Box<Buffers>>,
}

impl Runner {
    pub(crate) fn new(vm: Vm, bufs: Box<Buffers>) -> Runner {
        Runner {
            vm,
            bufs: Some(bufs),
        }
    }

    /// Runs entry `entry` on `ctx`.
    pub fn run(&mut self, entry: impl EntryRef, ctx: Context, opts: &RunOptions) -> RunResult {
        let vm = &self.vm;
        // The buffers stay in place (moving them costs a copy per run).
        let bufs = self.bufs.get_or_insert_with(|| vm.take_buffers());
        vm.run_with(bufs, entry, ctx, opts)
    }

    /// Runs entry `entry` on the packet in `packet` (its context from
    /// `ctx`). Afterwards `packet` holds the packet as the program left
    /// it (`data..data_end`; resized if the program moved its ends),
    /// rewritten only when the program may have changed it
    /// ([`RunOutcome::packet_written`]). Allocates nothing once the
    /// runner has served a packet of this size and kind (and `packet`'s
    /// capacity holds the result). `trace_printk` lines, perf records,
    /// clones and the tunnel key are in the runner until its next run;
    /// traced runs keep no trace here (use [`Runner::run`]).
    pub fn run_packet(
        &mut self,
        entry: impl EntryRef,
        packet: &mut Vec<u8>,
        ctx: PacketCtx,
        opts: &RunOptions,
    ) -> RunOutcome {
        let vm = &self.vm;
        let bufs = self.bufs.get_or_insert_with(|| vm.take_buffers());
        vm.run_on(bufs, entry, packet, ctx, opts)
    }

    /// The XDP metadata (`data_meta..data`) the last run left, into `out`
    /// (empty when the last run had no packet).
    pub fn meta(&self, out: &mut Vec<u8>) {
        out.clear();
        if let Some(b) = &self.bufs {
            let p = b.last_shape.pkt;
            if b.last_shape.has_pkt && p.meta < p.data {
                out.resize(p.data - p.meta, 0);
                let _ = b.packet.read(p.meta, out);
            }
        }
    }

    /// `bpf_trace_printk` lines of the last [`Runner::run_packet`].
    pub fn printk(&self) -> &[String] {
        self.machine().map_or(&[], |m| &m.printk)
    }

    /// `bpf_perf_event_output` records of the last [`Runner::run_packet`].
    pub fn perf_events(&self) -> &[PerfEvent] {
        self.machine().map_or(&[], |m| &m.net.perf)
    }

    /// `bpf_clone_redirect` copies of the last [`Runner::run_packet`].
    pub fn clones(&self) -> &[CloneRedirect] {
        self.machine().map_or(&[], |m| &m.net.clones)
    }

    /// The socket buffer's tunnel metadata after the last
    /// [`Runner::run_packet`].
    pub fn tunnel_key(&self) -> Option<&TunnelKey> {
        self.machine().and_then(|m| m.net.tunnel.as_ref())
    }

    /// Whether the last run left the runner armed: the next
    /// [`Runner::run_packet`] of the same entry, context shape and options
    /// runs without resetting the machine (tests use it to know that the
    /// armed path ran).
    #[doc(hidden)]
    pub fn armed(&self) -> bool {
        self.bufs.as_ref().is_some_and(|b| b.armed.is_some())
    }

    /// The machine of the last run, which keeps its side effects.
    fn machine(&self) -> Option<&crate::interp::Machine> {
        self.bufs.as_ref().and_then(|b| b.machine.as_deref())
    }

    pub fn vm(&self) -> &Vm {
        &self.vm
    }
}
