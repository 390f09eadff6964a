//! What one run of the core gives.

use std::fmt;

/// Stall cycles by cause, and branch bubbles: a conditional jump whose
/// outcome the branch history table mispredicted costs one (it resolves
/// in EXE and flushes the instruction fetched after it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stalls {
    /// A load followed by a user of its result.
    pub load_use: u64,
    /// The multi-cycle divider busy.
    pub div: u64,
    /// A `call` waiting in EXE for the coprocessor's answer.
    pub call: u64,
    /// A packet access waiting for its bytes to stream in.
    pub rx: u64,
    /// A map value access waiting for the switch's shared value memory
    /// (0 on a single engine, whose values are its own).
    pub values: u64,
    /// Mispredicted conditional jumps (each flushes IF/ID: one bubble).
    pub flushes: u64,
}

/// Why a run stopped without reaching `exit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// A load or store outside the metadata, packet and stack windows.
    Memory,
    /// An opcode the core does not decode.
    Illegal,
    /// A call to a helper the coprocessor does not serve.
    Helper,
    /// The cycle budget ran out.
    Budget,
    /// A map ran out of lines where the VM would still have answered: one
    /// the loader sized down below its declared entries, or an LRU hash
    /// that would have to evict (the coprocessor keeps no use order).
    Capacity,
    /// A fault code this crate does not know.
    Other(u32),
}

/// A fault: what and at which slot (of the program).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub pc: usize,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            FaultKind::Memory => "memory access outside the metadata, packet and stack".to_string(),
            FaultKind::Illegal => "illegal instruction".to_string(),
            FaultKind::Helper => "helper not served by the coprocessor".to_string(),
            FaultKind::Budget => "cycle budget exhausted".to_string(),
            FaultKind::Capacity => {
                "a map sized down by the loader, or an LRU map that would evict, needed more entries than its lines".to_string()
            }
            FaultKind::Other(c) => format!("fault code {c}"),
        };
        write!(f, "{what} at slot {}", self.pc)
    }
}

impl FaultKind {
    pub(crate) fn from_code(code: u32) -> FaultKind {
        match code {
            1 => FaultKind::Memory,
            2 => FaultKind::Illegal,
            3 => FaultKind::Helper,
            4 => FaultKind::Budget,
            5 => FaultKind::Capacity,
            c => FaultKind::Other(c),
        }
    }
}

/// One run: r0 or the fault, the packet afterwards, and the counters.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub result: Result<u64, Fault>,
    /// The packet buffer's window afterwards.
    pub packet: Vec<u8>,
    /// Clock cycles from start to the end of the run.
    pub cycles: u64,
    /// Instructions retired (`lddw` counts once).
    pub retired: u64,
    /// The instruction memory version (0 or 1) the run used.
    pub version: u8,
    pub stalls: Stalls,
    /// The pc (program slot) of every retired instruction, in order, when
    /// asked for.
    pub trace: Vec<usize>,
    /// Map operations served (lookup, update, delete) and the
    /// coprocessor's cycles for them, from request to answer.
    pub map_ops: [u64; 3],
    pub map_cycles: [u64; 3],
    /// The output port `bpf_redirect` set (the action module's port).
    pub out_port: Option<u32>,
    /// The last redirect the run set (`bpf_redirect` or `bpf_redirect_map`).
    pub redirect: Option<Redirect>,
    /// The action module's answer: nfkit's action and where the packet
    /// goes ([`crate::Core::set_action`] sets how it reads r0).
    pub action: crate::action::ActionOut,
    /// Through the engine's port FSM ([`crate::RunInput::via_port`]):
    /// cycles from the offer to the core's start (the metadata rows);
    /// else 0. Not in `cycles`.
    pub fsm_cycles: u64,
}

/// Where a run redirected the packet (the action module's input).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `bpf_redirect`: this port.
    Port(u32),
    /// `bpf_redirect_map` to an entry of a devmap (the program's map
    /// index, the entry's index).
    Map { map: usize, key: u32 },
    /// `bpf_redirect_map` with `BPF_F_BROADCAST`: every port of the devmap.
    Broadcast { map: usize, exclude_ingress: bool },
}

impl Redirect {
    /// From the shim's encoding (`model::RunOut::redirect`).
    pub(crate) fn decode(v: u64) -> Option<Redirect> {
        let map = ((v >> 32) & 0xff) as usize;
        match v >> 48 {
            1 => Some(Redirect::Port(v as u32)),
            2 => Some(Redirect::Map { map, key: v as u32 }),
            3 => Some(Redirect::Broadcast {
                map,
                exclude_ingress: v >> 47 & 1 == 1,
            }),
            _ => None,
        }
    }
}

impl RunResult {
    /// Cycles per retired instruction.
    pub fn cpi(&self) -> f64 {
        if self.retired == 0 {
            0.0
        } else {
            self.cycles as f64 / self.retired as f64
        }
    }
}
