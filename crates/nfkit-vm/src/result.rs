//! What a run gives back: [`RunResult`] (r0 or the fault, the packet
//! afterwards, redirect, `trace_printk` output, counts) and, for traced
//! runs, one [`TraceStep`] per executed instruction.

#![forbid(unsafe_code)]

use crate::ctx::SkbFields;
use crate::error::{RunError, RunErrorKind};
use nfkit_isa::Insn;

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
}

/// One register change of a traced instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegChange {
    pub reg: u8,
    pub old: u64,
    pub new: u64,
}

/// One executed instruction of a traced run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceStep {
    /// Op index (see [`Vm::location`](crate::Vm::location)).
    pub op: usize,
    /// Slot index in the Image.
    pub slot: usize,
    pub insn: Option<Insn>,
    pub changes: Vec<RegChange>,
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
    /// Instructions executed (helper calls count as one).
    pub insns: u64,
    /// Every executed instruction (when [`RunOptions::trace`](crate::RunOptions::trace) is set).
    pub trace: Vec<TraceStep>,
}

impl RunResult {
    /// A run that could not start: no instruction ran.
    pub(crate) fn setup_failed(kind: RunErrorKind) -> RunResult {
        RunResult {
            result: Err(RunError {
                slot: 0,
                location: String::new(),
                kind,
                fault_code: 0,
            }),
            packet: Vec::new(),
            meta: Vec::new(),
            head_delta: 0,
            redirect: None,
            skb: None,
            printk: Vec::new(),
            insns: 0,
            trace: Vec::new(),
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
