//! Code generation: the typed IR straight into eBPF instructions.
//!
//! Every chain becomes a function with the NF calling convention (r1 =
//! ctx, r2..r5 = arguments, r0 = the u64 result); chain-to-chain calls
//! are inlined. Inside a function r9 keeps ctx, locals live in 8-byte
//! stack slots in canonical form (zero-extended unsigned, sign-extended
//! signed), expressions evaluate into r0 with spills to stack
//! temporaries. NF calls are real calls; a result with bit 63 set (a
//! verdict or a fault) jumps straight to the function's exit, which ends
//! the whole chain. Packet pointers are loaded from ctx for every access
//! (so they are never stale after a call) and bounds-checked the way the
//! verifier wants; a failed check, a missing info block or an exceeded
//! loop cap returns `NF_FAULT`.
//!
//! A loop whose cap is above [`BPF_LOOP_ABOVE`] runs through the
//! `bpf_loop` helper: its body becomes a static callback `long cb(u64
//! index, void *blk)`, where `blk` points at a block of the caller's
//! stack (the spilled ctx, a status, a value, the loop variable's start);
//! the callback reaches the chain's locals through that pointer (kept in
//! r8; its index in r7) and reports how the loop ended in the status,
//! which the caller acts on after `bpf_loop` returns.
//!
//! The parts follow docs/language.md:

/// Instructions, labels, stack slots; one function's code assembled.
mod emit;

/// `generate`: every chain as a function (static mode).
mod module;

/// The dispatcher `nfkit_dispatch` the classifier calls.
mod classifier;

/// Statements: assignments, `if`, `break`/`continue`, `return`, verdicts.
mod statements;

/// Counted loops (a proven bound, or a cap counter).
mod loops;

/// Expressions into r0; conditions as branches.
mod expressions;

/// NF calls (real calls) and chain calls (inlined).
mod calls;

/// Packet reads and writes, the info block, per-CPU slots.
mod packet;

/// Map lookups, updates, read-modify-writes, deletes.
mod maps;

/// Loops run through the `bpf_loop` helper: the callback and its block.
mod bpf_loop;

/// Dynamic mode: chains as segments split at NF calls (tail calls).
mod dynamic;

pub use dynamic::{
    generate_dynamic, DynSlots, DYN_END, DYN_FINISH, DYN_MAX_NF_CALLS, DYN_MAX_NF_CALLS_SHARED,
    FRAME_SLOTS, TAIL_CALL_LIMIT,
};
pub use maps::map_size;
pub use module::generate;
pub use packet::MAX_PKT_OFF;

use crate::check::BPF_LOOP_ABOVE;
use crate::ir::Program;
use dynamic::DynGen;
use nfkit_isa::{Insn, Reg};
use nfkit_nf::Hook;
use std::collections::BTreeMap;

/// Largest stack frame of one generated function.
pub const MAX_FRAME: i32 = 512;

/// A symbolic reference of one instruction, resolved when linking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ref {
    /// `lddw` of map `i` of the object ([`Generated::maps`] order).
    Map(usize),
    /// Call of the NF with this symbol.
    Nf(String),
    /// Call of generated function `i`.
    Func(usize),
    /// `lddw` of the address of generated function `i` (a callback).
    FuncAddr(usize),
}

/// The maps a generated object uses: the script's, then shared ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjMap {
    /// A map of the script (index into [`Program::maps`]).
    User(usize),
    /// `nfkit_pktinfo`.
    PktInfo,
    /// `nfkit_nest`.
    Nest,
    /// `nfkit_frame` (dynamic mode).
    Frame,
    /// `nfkit_progs` (dynamic mode).
    Progs,
}

/// One generated function.
#[derive(Clone, Debug, PartialEq)]
pub struct GenFunc {
    pub name: String,
    pub insns: Vec<Insn>,
    /// (instruction index, reference).
    pub refs: Vec<(usize, Ref)>,
    /// (instruction index, script line, column) where a statement starts.
    pub lines: Vec<(usize, u32, u32)>,
    /// Bytes of stack used.
    pub stack: u32,
    /// True for the dispatcher (global symbol).
    pub global: bool,
    /// Dynamic mode: this function is an entry program (a chain segment)
    /// to be placed at this slot of `nfkit_progs`.
    pub slot: Option<u32>,
    /// True for a `bpf_loop` callback (`long cb(u64 index, void *ctx)`).
    pub callback: bool,
}

/// Code generation errors.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    #[error("chain '{chain}' needs {bytes} bytes of stack (limit {MAX_FRAME}): {why}")]
    Stack {
        chain: String,
        bytes: u32,
        why: String,
    },
    #[error("jump too far in chain '{0}'")]
    JumpTooFar(String),
    #[error("chain '{chain}' (dynamic mode): {bytes} bytes of locals and temporaries are live across the NF call at line {line}; a call frame keeps {} bytes", FRAME_SLOTS * 8)]
    DynFrame {
        chain: String,
        bytes: u32,
        line: u32,
    },
    #[error("chain '{chain}' (dynamic mode) can make {calls} NF calls on one packet; tail calls allow {limit} (use static mode, or fewer calls in loops)")]
    TailCalls {
        chain: String,
        calls: u64,
        limit: u64,
    },
    #[error("dynamic mode: no free slot in nfkit_progs for {what}")]
    NoSlot { what: String },
    #[error("chain '{chain}', line {line}: a loop compiled to bpf_loop inside the body of another bpf_loop (through a chain call) is not supported; give one of them a cap of at most {BPF_LOOP_ABOVE}")]
    NestedLoop { chain: String, line: u32 },
}

/// Generated code of a whole program.
#[derive(Clone, Debug, PartialEq)]
pub struct Generated {
    /// One function per dispatched chain (chain-id order; every chain when
    /// the script has no classifier), then the dispatcher `nfkit_dispatch`.
    /// Dynamic mode: the segments of every dispatched chain, each an
    /// entry program with its slot.
    pub funcs: Vec<GenFunc>,
    pub maps: Vec<ObjMap>,
    /// Dynamic mode: the slot of every NF the chains call.
    pub nf_slots: BTreeMap<String, u32>,
}

/// A jump target (index into the labels of a [`Gen`]).
type Label = usize;

/// Loop targets.
struct LoopCtx {
    brk: Label,
    cont: Label,
    /// The iteration counter's stack slot and cap, when it has one: a
    /// dynamic segment resuming inside the loop re-checks it, so that the
    /// verifier sees a bounded counter (restored values are unknown).
    bound: Option<(u32, i16)>,
}

/// Inlining context of one chain instance.
struct Frame {
    /// Offset of local 0 from `reg` (locals at base - 8 * (i + 1)).
    base: i32,
    /// The register locals are addressed from: r10, or (in a `bpf_loop`
    /// callback) r8, the pointer to the caller's block.
    reg: Reg,
    /// Where `return` goes (None: the function's own exit).
    ret: Option<Label>,
    chain: usize,
    loops: Vec<LoopCtx>,
}

/// The generator of one function (a chain, a segment set or a callback).
struct Gen<'a> {
    prog: &'a Program,
    hook: Hook,
    maps: &'a mut Vec<ObjMap>,
    name: String,
    insns: Vec<Insn>,
    refs: Vec<(usize, Ref)>,
    lines: Vec<(usize, u32, u32)>,
    /// Label -> instruction index.
    labels: Vec<Option<usize>>,
    /// (instruction index, label) of jumps to patch.
    fixups: Vec<(usize, Label)>,
    /// Bytes of stack in use / most ever used.
    used: i32,
    max_used: i32,
    frames: Vec<Frame>,
    exit: Label,
    fault: Label,
    /// Inline stack, for the error path of deep nesting.
    inline_path: Vec<String>,
    /// Dynamic mode (segments at NF calls).
    dynamic: Option<DynGen>,
    /// Callbacks generated for `bpf_loop`s, and the function index the
    /// next one gets.
    callbacks: Vec<GenFunc>,
    cb_next: usize,
    /// True while generating a callback.
    in_callback: bool,
    /// The first error of a statement.
    error: Option<GenError>,
}
