//! What a run gives back: [`RunResult`] (r0 or the fault, the packet
//! afterwards, redirect, `trace_printk` output, counts) and, for traced
//! runs, one [`TraceStep`] per executed instruction: its registers
//! changed, the memory it touched, the helper it called. Every type here
//! prints as text for people ([`fmt::Display`]); [`RunResult::trace_lines`]
//! gives a whole trace.

#![forbid(unsafe_code)]

use crate::ctx::SkbFields;
use crate::error::{RunError, RunErrorKind};
pub use crate::helpers::net::{CloneRedirect, PerfEvent};
pub use crate::helpers::tunnel::TunnelKey;
use nfkit_isa::disasm::format_insn;
use nfkit_isa::{Insn, Syntax};
use std::fmt;

/// Where a program sent the packet (`bpf_redirect`, `bpf_redirect_map`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `bpf_redirect(ifindex, flags)`.
    Ifindex { ifindex: u32, flags: u64 },
    /// `bpf_redirect_map(devmap, key, flags)`; `ifindex` is the first
    /// 4 bytes of the entry's value.
    Map {
        map: usize,
        key: u32,
        ifindex: Option<u32>,
    },
    /// `bpf_redirect_map` with `BPF_F_BROADCAST`.
    Broadcast { map: usize, exclude_ingress: bool },
    /// `bpf_redirect_map(cpumap, cpu, flags)`: to the queue of CPU `cpu`.
    Cpu { map: usize, cpu: u32 },
    /// `bpf_redirect_map(xskmap, key, flags)`: to the AF_XDP socket in
    /// slot `key`.
    Xsk { map: usize, key: u32 },
}

impl fmt::Display for Redirect {
    /// `ifindex 3`, `map #0 key 1 (ifindex 3)`, `broadcast through map #0`,
    /// `cpu 2 (map #1)`, `xsk map #2 key 3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Redirect::Ifindex { ifindex, flags: 0 } => write!(f, "ifindex {ifindex}"),
            Redirect::Ifindex { ifindex, flags } => {
                write!(f, "ifindex {ifindex} (flags {flags:#x})")
            }
            Redirect::Map {
                map,
                key,
                ifindex: Some(i),
            } => write!(f, "map #{map} key {key} (ifindex {i})"),
            Redirect::Map { map, key, .. } => write!(f, "map #{map} key {key}"),
            Redirect::Broadcast {
                map,
                exclude_ingress,
            } => {
                write!(f, "broadcast through map #{map}")?;
                if *exclude_ingress {
                    f.write_str(", excluding the ingress device")?;
                }
                Ok(())
            }
            Redirect::Cpu { map, cpu } => write!(f, "cpu {cpu} (map #{map})"),
            Redirect::Xsk { map, key } => write!(f, "xsk map #{map} key {key}"),
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// r0 at the entry's `exit`, or why the run failed.
    pub result: Result<u64, RunError>,
    /// The packet afterwards (`data..data_end`), or the conformance
    /// memory afterwards for [`Context::Raw`](crate::Context::Raw).
    pub packet: Vec<u8>,
    /// XDP metadata afterwards (`data_meta..data`).
    pub meta: Vec<u8>,
    /// How far `data` moved (`bpf_xdp_adjust_head`); negative when the
    /// packet grew at the front.
    pub head_delta: i64,
    /// Redirect target set by a helper during the run.
    pub redirect: Option<Redirect>,
    /// Writable `__sk_buff` fields afterwards (socket filter / TC).
    pub skb: Option<SkbFields>,
    /// `bpf_trace_printk` output, one entry per call.
    pub printk: Vec<String>,
    /// `bpf_perf_event_output` records, in order.
    pub perf_events: Vec<PerfEvent>,
    /// `bpf_clone_redirect` copies, in order.
    pub clones: Vec<CloneRedirect>,
    /// The socket buffer's tunnel metadata afterwards (the run's, or what
    /// `bpf_skb_set_tunnel_key` set).
    pub tunnel_key: Option<TunnelKey>,
    /// Instructions executed (helper calls count as one).
    pub insns: u64,
    /// The engine that ran the program.
    pub engine: crate::config::Engine,
    /// Every executed instruction (when [`RunOptions::trace`](crate::RunOptions::trace)
    /// is set), at most [`TRACE_LIMIT`] of them.
    pub trace: Vec<TraceStep>,
}

/// What a run on the caller's packet buffer gives back
/// ([`Runner::run_packet`](crate::Runner::run_packet)): made without
/// allocating (an error's text aside). The packet afterwards is in the
/// caller's buffer; `trace_printk` lines, perf records, clones and the
/// tunnel key stay in the runner until its next run.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// r0 at the entry's `exit`, or why the run failed.
    pub result: Result<u64, RunError>,
    /// How far `data` moved (`bpf_xdp_adjust_head`); negative when the
    /// packet grew at the front.
    pub head_delta: i64,
    /// The caller's buffer was rewritten from the run's packet: the
    /// program may have changed it (it can store to the packet, call a
    /// helper that may write it, or moved its ends). False: the buffer
    /// is untouched, and the program cannot have changed the packet.
    pub packet_written: bool,
    /// Redirect target set by a helper during the run.
    pub redirect: Option<Redirect>,
    /// Writable `__sk_buff` fields afterwards (socket filter / TC).
    pub skb: Option<SkbFields>,
    /// Instructions executed (helper calls count as one).
    pub insns: u64,
    /// The engine that ran the program.
    pub engine: crate::config::Engine,
}

impl RunOutcome {
    /// A run that could not start: no instruction ran.
    pub(crate) fn setup_failed(kind: RunErrorKind) -> RunOutcome {
        RunOutcome {
            result: Err(RunError {
                slot: 0,
                location: String::new(),
                kind,
                fault_code: 0,
            }),
            head_delta: 0,
            packet_written: false,
            redirect: None,
            skb: None,
            insns: 0,
            engine: crate::config::Engine::Interp,
        }
    }

    /// r0, if the run ended normally.
    pub fn r0(&self) -> Option<u64> {
        self.result.as_ref().ok().copied()
    }

    /// The hook's return code: r0, or the fault code after an error.
    pub fn code(&self) -> u64 {
        match &self.result {
            Ok(v) => *v,
            Err(e) => e.fault_code,
        }
    }
}

/// Most trace steps kept for one run.
pub const TRACE_LIMIT: usize = 1_000_000;

impl RunResult {
    /// r0, if the run ended normally.
    pub fn r0(&self) -> Option<u64> {
        self.result.as_ref().ok().copied()
    }

    /// The hook's return code: r0, or the fault code after an error.
    pub fn code(&self) -> u64 {
        match &self.result {
            Ok(v) => *v,
            Err(e) => e.fault_code,
        }
    }

    /// The trace as text: a `function:` line wherever the run enters a
    /// function (at the start, calls, tail calls, returns), then each step
    /// as [`TraceStep`] prints it, indented by two spaces.
    pub fn trace_lines(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.trace.len() + 1);
        for s in &self.trace {
            if let Some(f) = &s.enters {
                out.push(format!("{f}:"));
            }
            out.push(format!("  {s}"));
        }
        out
    }
}

/// One executed instruction of a traced run.
///
/// Prints as `pc: disassembly ; effects`, e.g.
/// `   12: r3 = *(u16 *)(r2 + 12)    ; read packet+12 (2 bytes) = 0x8, r3 = 0x8 (was 0x0)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceStep {
    /// Op index (see [`Vm::location`](crate::Vm::location)).
    pub op: usize,
    /// Slot index in the Image (the pc as the disassembly counts).
    pub slot: usize,
    pub insn: Option<Insn>,
    /// The function this step is in, when the previous step was in
    /// another one (or there was none).
    pub enters: Option<String>,
    /// Registers r0-r10 the instruction changed.
    pub changes: Vec<RegChange>,
    /// The memory a load, store or atomic touched (not when it faulted).
    pub mem: Option<MemAccess>,
    /// The helper a `call` or `callx` called.
    pub helper: Option<HelperCall>,
    /// The instruction faulted: the run ends here, without its effects.
    pub faulted: bool,
}

impl fmt::Display for TraceStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self
            .insn
            .as_ref()
            .map_or_else(|| "?".into(), |i| format_insn(i, Syntax::Llvm));
        let mut effects: Vec<String> = Vec::new();
        if let Some(m) = &self.mem {
            effects.push(m.to_string());
        }
        if let Some(h) = &self.helper {
            effects.push(h.to_string());
        }
        effects.extend(self.changes.iter().map(RegChange::to_string));
        if self.faulted {
            effects.push("faulted".into());
        }
        if effects.is_empty() {
            write!(f, "{:>5}: {text}", self.slot)
        } else {
            write!(f, "{:>5}: {text:<32} ; {}", self.slot, effects.join(", "))
        }
    }
}

/// One register change of a traced instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegChange {
    pub reg: u8,
    pub old: u64,
    pub new: u64,
}

impl fmt::Display for RegChange {
    /// `r1 = 0x1c (was 0x0)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{} = {:#x} (was {:#x})", self.reg, self.new, self.old)
    }
}

/// How an instruction touched memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    /// A load (`ldx`).
    Read,
    /// A store (`st`, `stx`).
    Write,
    /// An atomic read-modify-write (`lock ...`).
    Atomic,
}

impl AccessKind {
    /// `read`, `write`, `atomic`.
    pub fn name(self) -> &'static str {
        match self {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
            AccessKind::Atomic => "atomic",
        }
    }
}

/// The memory region of an access, as a program sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemRegion {
    /// The context (`xdp_md`, `__sk_buff`); offsets are field offsets.
    Ctx,
    /// The packet; offsets count from `data` (metadata is below 0).
    Packet,
    /// The conformance suite's raw memory; offsets from its start.
    Memory,
    /// The stack; offsets count from the current frame's `r10`.
    Stack,
    /// The value of a map entry; offsets count from the value's start.
    Map(String),
    /// A global-data section (`.bss`, `.data`, `.rodata`).
    Global(String),
    /// Any other region (a ring-buffer record), by name; offsets from
    /// its start.
    Other(String),
}

impl fmt::Display for MemRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemRegion::Ctx => f.write_str("ctx"),
            MemRegion::Packet => f.write_str("packet"),
            MemRegion::Memory => f.write_str("memory"),
            MemRegion::Stack => f.write_str("stack"),
            MemRegion::Map(name) => write!(f, "map {name}"),
            MemRegion::Global(name) => write!(f, "global {name}"),
            MemRegion::Other(name) => f.write_str(name),
        }
    }
}

/// The memory one traced instruction read or wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemAccess {
    pub kind: AccessKind,
    pub region: MemRegion,
    /// Offset in the region (see [`MemRegion`] for where it counts from).
    pub offset: i64,
    /// Bytes accessed.
    pub size: usize,
    /// The value read, or the value the memory holds after a write or an
    /// atomic.
    pub value: u64,
    /// What the memory held before a write or an atomic (when readable).
    pub old: Option<u64>,
}

impl fmt::Display for MemAccess {
    /// `read packet+12 (2 bytes) = 0x8`,
    /// `write stack fp-8 (8 bytes) = 0x1 (was 0x0)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = if self.size == 1 { "byte" } else { "bytes" };
        // Stack offsets count from the frame pointer: `stack fp-8`.
        let fp = if self.region == MemRegion::Stack {
            " fp"
        } else {
            ""
        };
        write!(
            f,
            "{} {}{fp}{:+} ({} {bytes}) = {:#x}",
            self.kind.name(),
            self.region,
            self.offset,
            self.size,
            self.value
        )?;
        if let Some(old) = self.old {
            write!(f, " (was {old:#x})")?;
        }
        Ok(())
    }
}

/// A helper call of a traced run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelperCall {
    /// The helper's id.
    pub id: i64,
    /// Its name without `bpf_` (`map_lookup_elem`), if it has one.
    pub name: Option<&'static str>,
    /// r0 after it returned; `None` when it went on elsewhere instead
    /// (a tail call taken, a `bpf_loop` callback) or ended the run.
    pub ret: Option<u64>,
}

impl fmt::Display for HelperCall {
    /// `bpf_ktime_get_ns returned 0x3b9aca00`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name {
            Some(n) => write!(f, "bpf_{n}")?,
            None => write!(f, "helper {}", self.id)?,
        }
        match self.ret {
            Some(r) => write!(f, " returned {r:#x}"),
            None => f.write_str(" did not return here"),
        }
    }
}
