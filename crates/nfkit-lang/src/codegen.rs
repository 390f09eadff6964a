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

use crate::check::{BPF_LOOP_ABOVE, BPF_LOOP_MAX};
use crate::ir::walk::{walk_block, walk_expr, walk_stmt, Visit};
use crate::ir::{BinOp, Chain, CmpOp, Expr, ExprKind, MapRmw, Program, Stmt, StmtKind};
use crate::types::Ty;
use nfkit_isa::{
    AluOp, AtomicOp, ByteOrder, CallKind, Cond, Insn, LddwKind, Operand, Reg, Size, Width,
};
use nfkit_nf::Hook;
use std::collections::BTreeMap;

/// Helper ids.
const MAP_LOOKUP: i32 = 1;
const MAP_UPDATE: i32 = 2;
const MAP_DELETE: i32 = 3;
const SKB_STORE_BYTES: i32 = 9;
const SKB_LOAD_BYTES: i32 = 26;
const SKB_LOAD_BYTES_RELATIVE: i32 = 68;
const TAIL_CALL: i32 = 12;

/// The classifier object's end of a dynamic chain (docs/abi.md §5).
pub const DYN_FINISH: &str = "nfkit_dyn_finish";
/// `struct nf_frame` (docs/abi.md §5): offsets and the number of stack
/// slots a chain can keep across an NF call.
const FRAME_RESULT: i16 = 32;
const FRAME_CONT: i16 = 40;
const FRAME_LOCALS: i16 = 56;
pub const FRAME_SLOTS: i32 = 56;
/// Tail calls the kernel allows per packet, and the NF calls that fit:
/// one tail call into the chain, then two per NF call (into the NF's
/// dynamic entry and back to the chain's next segment).
pub const TAIL_CALL_LIMIT: u64 = 33;
pub const DYN_MAX_NF_CALLS: u64 = (TAIL_CALL_LIMIT - 1) / 2;
const LOOP: i32 = 181;

/// The caller's block of a `bpf_loop` (offsets from its start): the
/// spilled ctx, the status the callback leaves, the value of a `return`
/// or verdict, the start value of a `range` loop variable.
const BLK_CTX: i16 = 0;
const BLK_STATUS: i16 = 8;
const BLK_VALUE: i16 = 16;
const BLK_START: i16 = 24;
const BLK_SIZE: i32 = 32;
/// Statuses: still running (the iterations ran out: the cap), ended
/// (condition false or `break`), `return` with a value, the function's
/// exit with r0 (verdict), fault.
const ST_ENDED: i32 = 1;
const ST_RETURN: i32 = 2;
const ST_EXIT: i32 = 3;
const ST_FAULT: i32 = 4;

/// Largest packet offset a chain can access: the verifier tracks packet
/// ranges only while offset + size stays below 64 KiB; larger offsets
/// are a fault.
pub const MAX_PKT_OFF: i32 = 0x7fff;

/// Largest stack frame of one generated function.
pub const MAX_FRAME: i32 = 512;

/// A symbolic reference of one instruction, resolved when linking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ref {
    /// `lddw` of map `i` of the object ([`Maps`] order).
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

/// Slots of `nfkit_progs` for a dynamic build (docs/abi.md §5): the NFs'
/// dynamic entries already placed, where new NFs go, and the bank the
/// chain segments are written to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynSlots {
    /// NF symbol (`nf_tb_dst`) -> slot of its dynamic entry.
    pub nfs: BTreeMap<String, u32>,
    /// Slots new NFs may take: `nf_first..nf_end`.
    pub nf_first: u32,
    pub nf_end: u32,
    /// Slots of segments after the first of each chain: `seg_first..seg_end`.
    pub seg_first: u32,
    pub seg_end: u32,
}

impl Default for DynSlots {
    fn default() -> DynSlots {
        DynSlots {
            nfs: BTreeMap::new(),
            nf_first: 64,
            nf_end: 256,
            seg_first: 256,
            seg_end: 640,
        }
    }
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
    #[error("chain '{chain}' (dynamic mode) can make {calls} NF calls on one packet; tail calls allow {DYN_MAX_NF_CALLS} (use static mode, or fewer calls in loops)")]
    TailCalls { chain: String, calls: u64 },
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

/// Generates every chain of `prog` for `hook`.
pub fn generate(prog: &Program, hook: Hook) -> Result<Generated, GenError> {
    let mut maps: Vec<ObjMap> = (0..prog.maps.len()).map(ObjMap::User).collect();
    let mut funcs = Vec::new();
    // bpf_loop callbacks come after the chains and the dispatcher.
    let mut callbacks = Vec::new();
    // With a classifier only the dispatched chains become functions (the
    // others exist inlined); a library keeps every chain.
    let dispatched = prog.dispatched();
    let emitted: Vec<usize> = if prog.classifier.is_some() {
        dispatched.clone()
    } else {
        (0..prog.chains.len()).collect()
    };
    let cb_base = emitted.len() + usize::from(prog.classifier.is_some());
    for &i in &emitted {
        let mut g = Gen::new(prog, hook, &mut maps, &prog.chains[i].name);
        g.cb_next = cb_base + callbacks.len();
        g.chain_function(i)?;
        let cbs = std::mem::take(&mut g.callbacks);
        funcs.push(g.finish()?);
        callbacks.extend(cbs);
    }
    if prog.classifier.is_some() {
        let order: Vec<usize> = (0..dispatched.len()).collect();
        funcs.push(dispatcher(&order));
    }
    funcs.extend(callbacks);
    Ok(Generated {
        funcs,
        maps,
        nf_slots: BTreeMap::new(),
    })
}

/// Generates the dispatched chains of `prog` for dynamic mode
/// (docs/abi.md §5): each chain as segments split at its NF calls, the
/// first at slot = chain id, the others at slots of `slots`' segment
/// bank; NFs without a slot get one.
pub fn generate_dynamic(
    prog: &Program,
    hook: Hook,
    slots: &DynSlots,
) -> Result<Generated, GenError> {
    let mut maps: Vec<ObjMap> = (0..prog.maps.len()).map(ObjMap::User).collect();
    let mut nf_slots = BTreeMap::new();
    for nf in &prog.nfs {
        if nf_slots.contains_key(&nf.symbol) {
            continue;
        }
        let slot = match slots.nfs.get(&nf.symbol) {
            Some(&s) => s,
            None => (slots.nf_first..slots.nf_end)
                .find(|s| !slots.nfs.values().any(|x| x == s) && !nf_slots.values().any(|x| x == s))
                .ok_or_else(|| GenError::NoSlot {
                    what: format!("NF {}", nf.symbol),
                })?,
        };
        nf_slots.insert(nf.symbol.clone(), slot);
    }
    let mut funcs = Vec::new();
    let mut callbacks = Vec::new();
    let mut next_seg = slots.seg_first;
    for (id, &ci) in prog.dispatched().iter().enumerate() {
        let chain = &prog.chains[ci];
        let calls = nf_calls_block(prog, &chain.body, 0);
        if calls > DYN_MAX_NF_CALLS {
            return Err(GenError::TailCalls {
                chain: chain.name.clone(),
                calls,
            });
        }
        let mut g = Gen::new(prog, hook, &mut maps, &chain.name);
        // Callbacks are numbered once the segments are counted.
        g.cb_next = CB_PENDING + callbacks.len();
        g.dynamic = Some(DynGen {
            nf_slots: nf_slots.clone(),
            next_seg,
            seg_end: slots.seg_end,
            sites: Vec::new(),
            entry: 0,
            body: 0,
            error: None,
        });
        g.chain_function(ci)?;
        let cbs = std::mem::take(&mut g.callbacks);
        let segs = g.segments(id as u32)?;
        next_seg += segs.len() as u32 - 1;
        funcs.extend(segs);
        callbacks.extend(cbs);
    }
    // bpf_loop callbacks after the segments (NF calls inside them are
    // direct calls: a callback cannot tail-call).
    let base = funcs.len();
    funcs.extend(callbacks);
    for f in &mut funcs {
        for (_, r) in &mut f.refs {
            if let Ref::Func(k) | Ref::FuncAddr(k) = r {
                if *k >= CB_PENDING {
                    *k = *k - CB_PENDING + base;
                }
            }
        }
    }
    Ok(Generated {
        funcs,
        maps,
        nf_slots,
    })
}

/// Placeholder base of callback function indexes in dynamic mode.
const CB_PENDING: usize = 1 << 30;

/// The most tail-called NF calls one run of `body` can make (loops
/// count their iterations, at least `min_trips` each; chain calls are
/// inlined, so their bodies count). With `min_trips` 1 it tells whether
/// `body` has a call site at all, even in a loop proven to run 0 times.
fn nf_calls_block(prog: &Program, body: &[Stmt], min_trips: u32) -> u64 {
    let mut v = NfCalls {
        prog,
        min_trips,
        n: 0,
    };
    walk_block(&mut v, body);
    v.n
}

/// [`nf_calls_block`] of one statement.
fn nf_calls_stmt(prog: &Program, s: &Stmt, min_trips: u32) -> u64 {
    nf_calls_block(prog, std::slice::from_ref(s), min_trips)
}

/// Counts NF calls on the worst path: the larger branch of an `if`, a
/// loop's body times its trips; a loop run by `bpf_loop` calls its NFs
/// directly (no tail calls) and counts 0.
struct NfCalls<'p> {
    prog: &'p Program,
    min_trips: u32,
    n: u64,
}

impl NfCalls<'_> {
    fn add(&mut self, k: u64) {
        self.n = self.n.saturating_add(k);
    }

    /// The count of what `f` visits, on its own.
    fn apart(&mut self, f: impl FnOnce(&mut Self)) -> u64 {
        let outer = std::mem::take(&mut self.n);
        f(self);
        std::mem::replace(&mut self.n, outer)
    }
}

impl Visit for NfCalls<'_> {
    fn visit_stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::If { cond, then, els } => {
                self.visit_expr(cond);
                let a = self.apart(|v| walk_block(v, then));
                let b = self.apart(|v| walk_block(v, els));
                self.add(a.max(b));
            }
            StmtKind::Loop {
                cap: Some((c, _)), ..
            } if *c > BPF_LOOP_ABOVE => {}
            StmtKind::Loop {
                cond,
                body,
                step,
                trips,
                ..
            } => {
                let once = self.apart(|v| {
                    v.visit_expr(cond);
                    walk_block(v, body);
                    walk_block(v, step);
                });
                let last = self.apart(|v| v.visit_expr(cond));
                let trips = u64::from((*trips).max(self.min_trips));
                self.add(once.saturating_mul(trips).saturating_add(last));
            }
            _ => walk_stmt(self, s),
        }
    }

    fn visit_expr(&mut self, x: &Expr) {
        match &x.kind {
            ExprKind::IfExp(c, a, b) => {
                self.visit_expr(c);
                let a = self.apart(|v| v.visit_expr(a));
                let b = self.apart(|v| v.visit_expr(b));
                self.add(a.max(b));
            }
            ExprKind::CallNf { .. } => {
                self.add(1);
                walk_expr(self, x);
            }
            ExprKind::CallChain { chain, .. } => {
                let prog = self.prog;
                walk_block(self, &prog.chains[*chain].body);
                walk_expr(self, x);
            }
            _ => walk_expr(self, x),
        }
    }
}

/// `nfkit_dispatch(ctx, chain_id, ...)`: calls the chain with that id
/// (`chains[id]`: the index of its generated function).
fn dispatcher(chains: &[usize]) -> GenFunc {
    let mut insns = Vec::new();
    let mut refs = Vec::new();
    // if r2 == k goto call_k (patched below)
    let n = chains.len();
    for (k, _) in chains.iter().enumerate() {
        // Each call block is 6 instructions; the jumps skip the remaining
        // tests and the default return (2 instructions).
        let off = (n - k - 1) + 2 + k * 6;
        insns.push(Insn::Jmp {
            width: Width::W64,
            cond: Cond::Eq,
            dst: Reg::R2,
            src: Operand::Imm(k as i32),
            off: off as i16,
        });
    }
    insns.push(mov_imm(Reg::R0, 0));
    insns.push(Insn::Exit);
    for &c in chains {
        for r in [Reg::R2, Reg::R3, Reg::R4, Reg::R5] {
            insns.push(mov_imm(r, 0));
        }
        refs.push((insns.len(), Ref::Func(c)));
        insns.push(Insn::Call {
            kind: CallKind::Local,
            imm: -1,
        });
        insns.push(Insn::Exit);
    }
    GenFunc {
        name: "nfkit_dispatch".into(),
        insns,
        refs,
        lines: Vec::new(),
        stack: 0,
        global: true,
        slot: None,
        callback: false,
    }
}

fn mov_imm(dst: Reg, v: i32) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst,
        src: Operand::Imm(v),
    }
}

fn mov_reg(dst: Reg, src: Reg) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst,
        src: Operand::Reg(src),
    }
}

fn alu(op: AluOp, dst: Reg, src: Operand) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op,
        dst,
        src,
    }
}

fn ldx(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::Ldx {
        size,
        signed: false,
        dst,
        src,
        off,
    }
}

fn stx(size: Size, dst: Reg, off: i16, src: Reg) -> Insn {
    Insn::Stx {
        size,
        dst,
        src,
        off,
    }
}

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

/// Dynamic mode: the NF call sites that end segments.
struct DynGen {
    nf_slots: BTreeMap<String, u32>,
    /// Slot of the next segment (the continuation of the next call site).
    next_seg: u32,
    seg_end: u32,
    sites: Vec<Site>,
    /// Target of the first instruction (a `ja`): where a segment starts.
    entry: Label,
    /// The chain's own start (segment 0).
    body: Label,
    error: Option<GenError>,
}

/// One NF call site of a dynamic chain.
#[derive(Clone)]
struct Site {
    /// The instruction after the call (where the next segment resumes).
    resume: Label,
    /// The next segment's prologue.
    start: Label,
    /// Bytes of stack live across the call (copied to the frame).
    saved: i32,
    /// Counters (cap, stack slot) of the loops around the call.
    bounds: Vec<(u32, i16)>,
    /// The next segment's slot.
    slot: u32,
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

impl<'a> Gen<'a> {
    fn new(prog: &'a Program, hook: Hook, maps: &'a mut Vec<ObjMap>, name: &str) -> Gen<'a> {
        let mut g = Gen {
            prog,
            hook,
            maps,
            name: name.to_string(),
            insns: Vec::new(),
            refs: Vec::new(),
            lines: Vec::new(),
            labels: Vec::new(),
            fixups: Vec::new(),
            used: 0,
            max_used: 0,
            frames: Vec::new(),
            exit: 0,
            fault: 0,
            inline_path: vec![name.to_string()],
            dynamic: None,
            callbacks: Vec::new(),
            cb_next: 0,
            in_callback: false,
            error: None,
        };
        g.exit = g.label();
        g.fault = g.label();
        g
    }

    fn label(&mut self) -> Label {
        self.labels.push(None);
        self.labels.len() - 1
    }

    fn bind(&mut self, l: Label) {
        self.labels[l] = Some(self.insns.len());
    }

    fn emit(&mut self, i: Insn) {
        self.insns.push(i);
    }

    fn jmp(&mut self, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.emit(Insn::Ja { off: 0 });
    }

    fn jcond(&mut self, cond: Cond, dst: Reg, src: Operand, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.emit(Insn::Jmp {
            width: Width::W64,
            cond,
            dst,
            src,
            off: 0,
        });
    }

    /// Allocates an 8-byte stack slot; its offset from r10.
    fn alloc(&mut self, bytes: i32) -> i16 {
        self.used += bytes;
        self.max_used = self.max_used.max(self.used);
        (-self.used).clamp(i16::MIN as i32, 0) as i16
    }

    fn free(&mut self, bytes: i32) {
        self.used -= bytes;
    }

    fn map_index(&mut self, m: ObjMap) -> usize {
        match self.maps.iter().position(|x| *x == m) {
            Some(i) => i,
            None => {
                self.maps.push(m);
                self.maps.len() - 1
            }
        }
    }

    fn load_map(&mut self, dst: Reg, m: ObjMap) {
        let i = self.map_index(m);
        self.refs.push((self.insns.len(), Ref::Map(i)));
        self.emit(Insn::Lddw {
            kind: LddwKind::MapFd,
            dst,
            imm: 0,
            next_imm: 0,
        });
    }

    fn call_helper(&mut self, id: i32) {
        self.emit(Insn::Call {
            kind: CallKind::Helper,
            imm: id,
        });
    }

    fn konst(&mut self, dst: Reg, v: u64) {
        if (v as i64) >= i32::MIN as i64 && (v as i64) <= i32::MAX as i64 {
            self.emit(mov_imm(dst, v as i64 as i32));
        } else {
            self.emit(Insn::lddw(dst, v));
        }
    }

    fn finish(mut self) -> Result<GenFunc, GenError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.check_frame()?;
        self.code(self.name.clone(), None, None)
    }

    fn check_frame(&self) -> Result<(), GenError> {
        if self.max_used > MAX_FRAME {
            return Err(GenError::Stack {
                chain: self.name.clone(),
                bytes: self.max_used as u32,
                why: format!(
                    "locals and temporaries of {} (chain calls are inlined)",
                    self.inline_path.join(" -> ")
                ),
            });
        }
        Ok(())
    }

    /// The generated code as a function named `name`: with `entry` =
    /// (label, target) the label is re-pointed first (where a dynamic
    /// segment starts); code no path reaches is dropped (the kernel
    /// refuses it) and jumps are resolved.
    fn code(
        &self,
        name: String,
        entry: Option<(Label, Label)>,
        slot: Option<u32>,
    ) -> Result<GenFunc, GenError> {
        let mut labels = self.labels.clone();
        if let Some((l, to)) = entry {
            labels[l] = labels[to];
        }
        // Jump targets as instruction indices.
        let n = self.insns.len();
        let mut target: Vec<Option<usize>> = vec![None; n];
        for &(at, l) in &self.fixups {
            target[at] = Some(labels[l].unwrap_or(n).min(n.saturating_sub(1)));
        }
        // The kernel refuses unreachable instructions: keep only what a
        // path from the first instruction reaches.
        let mut live = vec![false; n];
        let mut work = vec![0usize];
        while let Some(i) = work.pop() {
            if i >= n || live[i] {
                continue;
            }
            live[i] = true;
            if let Some(t) = target[i] {
                work.push(t);
            }
            if !self.insns[i].ends_block() {
                work.push(i + 1);
            }
        }
        let mut new_index = vec![0usize; n + 1];
        let mut k = 0;
        for i in 0..n {
            new_index[i] = k;
            if live[i] {
                k += 1;
            }
        }
        new_index[n] = k;
        let mut insns = Vec::with_capacity(k);
        let mut targets = Vec::with_capacity(k);
        for i in 0..n {
            if live[i] {
                insns.push(self.insns[i]);
                targets.push(target[i].map(|t| new_index[t]));
            }
        }
        let refs = self
            .refs
            .iter()
            .filter(|(i, _)| live.get(*i).copied().unwrap_or(false))
            .map(|(i, r)| (new_index[*i], r.clone()))
            .collect();
        let mut lines: Vec<(usize, u32, u32)> = Vec::new();
        for &(i, l, c) in &self.lines {
            let ni = new_index[i.min(n)];
            if ni >= k {
                continue;
            }
            if lines.last().is_some_and(|x| x.0 == ni) {
                lines.pop();
            }
            lines.push((ni, l, c));
        }
        let slots = nfkit_isa::slot_offsets(&insns);
        for (at, t) in targets.iter().enumerate() {
            let Some(t) = *t else { continue };
            let rel = slots[t] as i64 - slots[at] as i64 - 1;
            let rel = i16::try_from(rel).map_err(|_| GenError::JumpTooFar(self.name.clone()))?;
            match &mut insns[at] {
                Insn::Ja { off } | Insn::Jmp { off, .. } => *off = rel,
                _ => {}
            }
        }
        Ok(GenFunc {
            name,
            insns,
            refs,
            lines,
            stack: self.max_used as u32,
            global: false,
            slot,
            callback: self.in_callback,
        })
    }

    /// Dynamic mode: the chain (chain id `id`) as its segments, segment 0
    /// first (at slot `id`), then one per NF call site.
    fn segments(mut self, id: u32) -> Result<Vec<GenFunc>, GenError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.check_frame()?;
        let Some(d) = self.dynamic.take() else {
            return Ok(vec![self.finish()?]);
        };
        if let Some(e) = d.error {
            return Err(e);
        }
        let short: String = self.name.chars().take(8).collect();
        let mut out = vec![self.code(
            format!("c{id}s0_{short}"),
            Some((d.entry, d.body)),
            Some(id),
        )?];
        for (k, site) in d.sites.iter().enumerate() {
            out.push(self.code(
                format!("c{id}s{}_{short}", k + 1),
                Some((d.entry, site.start)),
                Some(site.slot),
            )?);
        }
        Ok(out)
    }

    // ------------------------------------------------------------------

    fn chain_function(&mut self, ci: usize) -> Result<(), GenError> {
        let c: &Chain = &self.prog.chains[ci];
        self.lines.push((0, c.line, 0));
        // Dynamic mode: every segment's first instruction jumps to where
        // it starts (the chain's start for segment 0); a tail-called
        // program gets no arguments, so parameters start at 0.
        let dynamic = self.dynamic.is_some();
        if dynamic {
            let entry = self.label();
            let body = self.label();
            self.jmp(entry);
            self.bind(body);
            if let Some(d) = self.dynamic.as_mut() {
                d.entry = entry;
                d.body = body;
            }
        }
        self.emit(mov_reg(Reg::R9, Reg::R1));
        let n = c.locals.len() as i32;
        let base = 0;
        self.alloc(8 * n);
        let nparams = if dynamic { 0 } else { c.params.len() };
        for (i, r) in [Reg::R2, Reg::R3, Reg::R4, Reg::R5]
            .into_iter()
            .enumerate()
            .take(nparams)
        {
            // Parameters arrive as u64: bring them into their type.
            let ty = c.params[i].1;
            self.emit(mov_reg(Reg::R0, r));
            self.normalize(ty);
            self.emit(stx(Size::DW, Reg::FP, local_off(base, i), Reg::R0));
        }
        for i in nparams..c.locals.len() {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: local_off(base, i),
                imm: 0,
            });
        }
        self.frames.push(Frame {
            base,
            reg: Reg::FP,
            ret: None,
            chain: ci,
            loops: Vec::new(),
        });
        let body = &self.prog.chains[ci].body;
        self.block(body);
        // Falling off the end returns 0.
        self.emit(mov_imm(Reg::R0, 0));
        self.bind(self.exit);
        if dynamic {
            // The chain's end: the classifier object counts the result
            // and turns it into the hook's return code.
            self.emit(mov_reg(Reg::R2, Reg::R0));
            self.emit(mov_reg(Reg::R1, Reg::R9));
            for r in [Reg::R3, Reg::R4, Reg::R5] {
                self.emit(mov_imm(r, 0));
            }
            self.refs
                .push((self.insns.len(), Ref::Nf(DYN_FINISH.to_string())));
            self.emit(Insn::Call {
                kind: CallKind::Local,
                imm: -1,
            });
            self.emit(Insn::Exit);
            self.bind(self.fault);
            self.emit(mov_imm(Reg::R0, -1));
            let exit = self.exit;
            self.jmp(exit);
            self.resume_prologues();
        } else {
            self.emit(Insn::Exit);
            self.bind(self.fault);
            self.emit(mov_imm(Reg::R0, -1));
            self.emit(Insn::Exit);
        }
        self.frames.pop();
        Ok(())
    }

    /// Dynamic mode: the start of each segment after the first: ctx into
    /// r9, the stack slots back from the frame, the NF's result into r0,
    /// then on after the call site.
    fn resume_prologues(&mut self) {
        let sites: Vec<Site> = self
            .dynamic
            .as_ref()
            .map(|d| d.sites.clone())
            .unwrap_or_default();
        let used = self.used;
        for Site {
            start,
            resume,
            saved,
            bounds,
            ..
        } in sites
        {
            self.bind(start);
            self.emit(mov_reg(Reg::R9, Reg::R1));
            self.used = saved;
            self.percpu_slot(ObjMap::Frame);
            for j in 0..(saved / 8).min(FRAME_SLOTS) {
                self.emit(ldx(Size::DW, Reg::R1, Reg::R0, FRAME_LOCALS + 8 * j as i16));
                self.emit(stx(Size::DW, Reg::FP, local_off(0, j as usize), Reg::R1));
            }
            self.emit(ldx(Size::DW, Reg::R0, Reg::R0, FRAME_RESULT));
            // Loop counters came back as unknown values: bound them again.
            let fault = self.fault;
            for (n, off) in bounds {
                self.emit(ldx(Size::DW, Reg::R1, Reg::FP, off));
                self.jcond(Cond::Gt, Reg::R1, Operand::Imm(n as i32), fault);
            }
            self.jmp(resume);
        }
        self.used = used;
    }

    fn frame(&self) -> &Frame {
        // A frame always exists while generating statements.
        &self.frames[self.frames.len() - 1]
    }

    fn local(&self, i: usize) -> i16 {
        local_off(self.frame().base, i)
    }

    /// The register locals of the current frame are addressed from.
    fn lreg(&self) -> Reg {
        self.frame().reg
    }

    fn block(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        self.lines.push((self.insns.len(), s.line, s.col));
        match &s.kind {
            StmtKind::Assign { local, value } => {
                self.expr(value);
                let o = self.local(*local);
                let r = self.lreg();
                self.emit(stx(Size::DW, r, o, Reg::R0));
            }
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::If { cond, then, els } => {
                let l_else = self.label();
                let l_end = self.label();
                self.branch_false(cond, l_else);
                self.block(then);
                if !els.is_empty() {
                    self.jmp(l_end);
                }
                self.bind(l_else);
                self.block(els);
                self.bind(l_end);
            }
            StmtKind::Loop {
                cond,
                body,
                step,
                cap,
                ..
            } => {
                if let Some((n, _)) = cap.filter(|c| c.0 > BPF_LOOP_ABOVE) {
                    return self.bpf_loop(s, cond, body, step, n);
                }
                // Dynamic mode: a loop with NF calls (segments resume
                // inside it) needs a counter even when its bound is
                // proven; it lives in a temporary slot.
                let mut temp = false;
                let counted: Option<(u32, i16)> = match cap {
                    Some((n, counter)) => Some((*n, self.local(*counter))),
                    None if self.dynamic.is_some()
                        && !self.in_callback
                        && nf_calls_stmt(self.prog, s, 1) > 0 =>
                    {
                        temp = true;
                        let trips = match &s.kind {
                            StmtKind::Loop { trips, .. } => *trips,
                            _ => 0,
                        };
                        Some((trips, self.alloc(8)))
                    }
                    None => None,
                };
                if let Some((_, o)) = counted {
                    self.emit(Insn::St {
                        size: Size::DW,
                        dst: self.lreg(),
                        off: o,
                        imm: 0,
                    });
                }
                let top = self.label();
                let brk = self.label();
                let cont = self.label();
                self.bind(top);
                self.branch_false(cond, brk);
                if let Some((n, o)) = counted {
                    let r = self.lreg();
                    self.emit(ldx(Size::DW, Reg::R1, r, o));
                    let fault = self.fault;
                    self.jcond(Cond::Ge, Reg::R1, Operand::Imm(n as i32), fault);
                    self.emit(alu(AluOp::Add, Reg::R1, Operand::Imm(1)));
                    self.emit(stx(Size::DW, r, o, Reg::R1));
                }
                let fi = self.frames.len() - 1;
                self.frames[fi].loops.push(LoopCtx {
                    brk,
                    cont,
                    bound: counted,
                });
                self.block(body);
                self.frames[fi].loops.pop();
                self.bind(cont);
                self.block(step);
                self.jmp(top);
                self.bind(brk);
                if temp {
                    self.free(8);
                }
            }
            StmtKind::Break => {
                if let Some(l) = self.frame().loops.last().map(|l| l.brk) {
                    self.jmp(l);
                }
            }
            StmtKind::Continue => {
                if let Some(l) = self.frame().loops.last().map(|l| l.cont) {
                    self.jmp(l);
                }
            }
            StmtKind::Return(e) => {
                self.expr(e);
                match self.frame().ret {
                    Some(l) => self.jmp(l),
                    None => {
                        // A plain value has bit 63 clear.
                        self.emit(alu(AluOp::Lsh, Reg::R0, Operand::Imm(1)));
                        self.emit(alu(AluOp::Rsh, Reg::R0, Operand::Imm(1)));
                        let l = self.exit;
                        self.jmp(l);
                    }
                }
            }
            StmtKind::Verdict(e) => {
                self.expr(e);
                let l = self.exit;
                self.jmp(l);
            }
            StmtKind::MapSet { map, key, value } => {
                let k = self.spill_expr(key);
                let v = self.spill_expr(value);
                self.load_map(Reg::R1, ObjMap::User(*map));
                self.fp_addr(Reg::R2, k);
                self.fp_addr(Reg::R3, v);
                self.emit(mov_imm(Reg::R4, 0));
                self.call_helper(MAP_UPDATE);
                self.free(16);
            }
            StmtKind::MapDel { map, key } => {
                let k = self.spill_expr(key);
                self.load_map(Reg::R1, ObjMap::User(*map));
                self.fp_addr(Reg::R2, k);
                self.call_helper(MAP_DELETE);
                self.free(8);
            }
            StmtKind::MapRmw {
                map,
                key,
                op,
                value,
            } => self.map_rmw(*map, key, *op, value),
            StmtKind::PktWrite { size, off, value } => self.pkt_write(*size, off, value),
        }
    }

    /// A loop through `bpf_loop(cap + 1, cb, &blk, 0)`; the
    /// callback ends the loop (returns 1) on a false condition, `break`,
    /// `return`, a verdict or a fault, and with index == cap (the cap
    /// exceeded: a fault).
    fn bpf_loop(&mut self, s: &Stmt, cond: &Expr, body: &[Stmt], step: &[Stmt], cap: u32) {
        if self.in_callback {
            let e = GenError::NestedLoop {
                chain: self.name.clone(),
                line: s.line,
            };
            self.error.get_or_insert(e);
            return;
        }
        let blk = self.alloc(BLK_SIZE);
        let (base, reg, chain, ret) = {
            let f = self.frame();
            (f.base, f.reg, f.chain, f.ret)
        };
        let derived = derived_var(body, step);
        self.emit(stx(Size::DW, Reg::FP, blk + BLK_CTX, Reg::R9));
        for off in [BLK_STATUS, BLK_VALUE] {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: blk + off,
                imm: 0,
            });
        }
        if let Some((l, _, _)) = derived {
            self.emit(ldx(Size::DW, Reg::R0, reg, local_off(base, l)));
            self.emit(stx(Size::DW, Reg::FP, blk + BLK_START, Reg::R0));
        }
        // The callback: locals through the block pointer.
        let index = self.cb_next + self.callbacks.len();
        let name = format!("{}__loop{}", self.name, self.callbacks.len());
        let (prog, hook) = (self.prog, self.hook);
        let mut sub = Gen::new(prog, hook, &mut *self.maps, &name);
        sub.in_callback = true;
        sub.inline_path = self.inline_path.clone();
        let frame = Frame {
            base: base - blk as i32,
            reg: Reg::R8,
            ret: None,
            chain,
            loops: Vec::new(),
        };
        sub.callback(s, frame, cond, body, step, cap, derived);
        match sub.finish() {
            Ok(f) => self.callbacks.push(f),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        let nr = cap.saturating_add(1).min(BPF_LOOP_MAX);
        self.emit(mov_imm(Reg::R1, nr as i32));
        self.refs.push((self.insns.len(), Ref::FuncAddr(index)));
        self.emit(Insn::Lddw {
            kind: LddwKind::Func,
            dst: Reg::R2,
            imm: 0,
            next_imm: 0,
        });
        self.fp_addr(Reg::R3, blk);
        self.emit(mov_imm(Reg::R4, 0));
        self.call_helper(LOOP);
        // How the loop ended.
        let after = self.label();
        let (exit, fault) = (self.exit, self.fault);
        self.emit(ldx(Size::DW, Reg::R1, Reg::FP, blk + BLK_STATUS));
        self.jcond(Cond::Eq, Reg::R1, Operand::Imm(ST_ENDED), after);
        self.emit(ldx(Size::DW, Reg::R0, Reg::FP, blk + BLK_VALUE));
        self.jcond(Cond::Eq, Reg::R1, Operand::Imm(ST_EXIT), exit);
        // Still running (the cap) or a fault.
        self.jcond(Cond::Ne, Reg::R1, Operand::Imm(ST_RETURN), fault);
        match ret {
            Some(l) => self.jmp(l),
            None => {
                // A plain value has bit 63 clear.
                self.emit(alu(AluOp::Lsh, Reg::R0, Operand::Imm(1)));
                self.emit(alu(AluOp::Rsh, Reg::R0, Operand::Imm(1)));
                self.jmp(exit);
            }
        }
        self.bind(after);
        self.free(BLK_SIZE);
    }

    /// The body of a `bpf_loop` callback (r1 = index, r2 = the block).
    #[allow(clippy::too_many_arguments)]
    fn callback(
        &mut self,
        s: &Stmt,
        mut frame: Frame,
        cond: &Expr,
        body: &[Stmt],
        step: &[Stmt],
        cap: u32,
        derived: Option<(usize, u64, Ty)>,
    ) {
        self.lines.push((0, s.line, s.col));
        self.emit(mov_reg(Reg::R7, Reg::R1));
        self.emit(mov_reg(Reg::R8, Reg::R2));
        self.emit(ldx(Size::DW, Reg::R9, Reg::R8, BLK_CTX));
        let done = self.label();
        let cont = self.label();
        let ret = self.label();
        frame.ret = Some(ret);
        frame.loops.push(LoopCtx {
            brk: done,
            cont,
            bound: None,
        });
        self.frames.push(frame);
        if let Some((l, stepv, ty)) = derived {
            // var = start + index * step
            self.emit(mov_reg(Reg::R0, Reg::R7));
            self.konst(Reg::R1, stepv);
            self.emit(alu(AluOp::Mul, Reg::R0, Operand::Reg(Reg::R1)));
            self.emit(ldx(Size::DW, Reg::R1, Reg::R8, BLK_START));
            self.emit(alu(AluOp::Add, Reg::R0, Operand::Reg(Reg::R1)));
            self.normalize(ty);
            let o = self.local(l);
            self.emit(stx(Size::DW, Reg::R8, o, Reg::R0));
        }
        // The verifier verifies the callback until its state at the call
        // repeats; a local that changes every iteration (a counter started
        // at a constant) would make it walk every iteration. Adding the
        // index >> 23 (always 0: bpf_loop runs at most 2^23 iterations,
        // unknown to the verifier) makes every local the loop assigns an
        // unknown value of its type; no generated check relies on a
        // local's range.
        let mut carried = Vec::new();
        assigned(body, &mut carried);
        assigned(step, &mut carried);
        carried.retain(|l| derived.is_none_or(|d| d.0 != *l));
        if !carried.is_empty() {
            self.emit(mov_reg(Reg::R6, Reg::R7));
            self.emit(alu(AluOp::Rsh, Reg::R6, Operand::Imm(23)));
        }
        for l in carried {
            let ty = self.prog.chains[self.frame().chain].locals[l].1;
            let o = self.local(l);
            self.emit(ldx(Size::DW, Reg::R0, Reg::R8, o));
            self.emit(alu(AluOp::Add, Reg::R0, Operand::Reg(Reg::R6)));
            self.normalize(ty);
            self.emit(stx(Size::DW, Reg::R8, o, Reg::R0));
        }
        self.branch_false(cond, done);
        let fault = self.fault;
        self.jcond(Cond::Ge, Reg::R7, Operand::Imm(cap as i32), fault);
        self.block(body);
        self.bind(cont);
        if derived.is_none() {
            self.block(step);
        }
        self.emit(mov_imm(Reg::R0, 0));
        self.emit(Insn::Exit);
        let status = |g: &mut Gen, st: i32| {
            g.emit(Insn::St {
                size: Size::DW,
                dst: Reg::R8,
                off: BLK_STATUS,
                imm: st,
            });
            g.emit(mov_imm(Reg::R0, 1));
            g.emit(Insn::Exit);
        };
        self.bind(done);
        status(self, ST_ENDED);
        self.bind(ret);
        self.emit(stx(Size::DW, Reg::R8, BLK_VALUE, Reg::R0));
        status(self, ST_RETURN);
        self.bind(self.exit);
        self.emit(stx(Size::DW, Reg::R8, BLK_VALUE, Reg::R0));
        status(self, ST_EXIT);
        self.bind(self.fault);
        status(self, ST_FAULT);
        self.frames.pop();
    }

    fn fp_addr(&mut self, dst: Reg, off: i16) {
        self.emit(mov_reg(dst, Reg::FP));
        self.emit(alu(AluOp::Add, dst, Operand::Imm(off as i32)));
    }

    /// Evaluates `e` into a new 8-byte stack slot (freed by the caller).
    fn spill_expr(&mut self, e: &Expr) -> i16 {
        self.expr(e);
        let o = self.alloc(8);
        self.emit(stx(Size::DW, Reg::FP, o, Reg::R0));
        o
    }

    fn map_rmw(&mut self, map: usize, key: &Expr, op: MapRmw, value: &Expr) {
        let vt = self.prog.maps[map].value;
        let k = self.spill_expr(key);
        self.expr(value);
        if op == MapRmw::Sub {
            self.emit(alu(AluOp::Neg, Reg::R0, Operand::Imm(0)));
        }
        let v = self.alloc(8);
        self.emit(stx(Size::DW, Reg::FP, v, Reg::R0));
        self.load_map(Reg::R1, ObjMap::User(map));
        self.fp_addr(Reg::R2, k);
        self.call_helper(MAP_LOOKUP);
        let l_ins = self.label();
        let l_end = self.label();
        self.jcond(Cond::Eq, Reg::R0, Operand::Imm(0), l_ins);
        self.emit(ldx(Size::DW, Reg::R1, Reg::FP, v));
        let size = map_size(vt);
        let aop = match op {
            MapRmw::Add | MapRmw::Sub => AtomicOp::Add { fetch: false },
            MapRmw::Or => AtomicOp::Or { fetch: false },
            MapRmw::And => AtomicOp::And { fetch: false },
            MapRmw::Xor => AtomicOp::Xor { fetch: false },
        };
        if matches!(size, Size::W | Size::DW) {
            self.emit(Insn::Atomic {
                size,
                op: aop,
                dst: Reg::R0,
                src: Reg::R1,
                off: 0,
            });
        } else {
            let aluop = match op {
                MapRmw::Add | MapRmw::Sub => AluOp::Add,
                MapRmw::Or => AluOp::Or,
                MapRmw::And => AluOp::And,
                MapRmw::Xor => AluOp::Xor,
            };
            self.emit(ldx(size, Reg::R2, Reg::R0, 0));
            self.emit(alu(aluop, Reg::R2, Operand::Reg(Reg::R1)));
            self.emit(stx(size, Reg::R0, 0, Reg::R2));
        }
        self.jmp(l_end);
        self.bind(l_ins);
        if op == MapRmw::And {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: v,
                imm: 0,
            });
        }
        self.load_map(Reg::R1, ObjMap::User(map));
        self.fp_addr(Reg::R2, k);
        self.fp_addr(Reg::R3, v);
        self.emit(mov_imm(Reg::R4, 1)); // BPF_NOEXIST
        self.call_helper(MAP_UPDATE);
        self.bind(l_end);
        self.free(16);
    }

    // ------------------------------------------------------------------
    // Packet access.

    /// Loads data / data_end of the context into r1 / r2 (XDP, TC).
    fn pkt_ptrs(&mut self) {
        let (d, e) = match self.hook {
            Hook::Xdp => (0, 4),
            _ => (76, 80),
        };
        self.emit(ldx(Size::W, Reg::R1, Reg::R9, d));
        self.emit(ldx(Size::W, Reg::R2, Reg::R9, e));
    }

    /// With the offset in r0: r1 = packet pointer with `size` readable
    /// bytes, or a jump to `miss`.
    fn pkt_check(&mut self, size: Size, miss: Label) {
        self.jcond(Cond::Gt, Reg::R0, Operand::Imm(MAX_PKT_OFF), miss);
        self.pkt_ptrs();
        self.emit(alu(AluOp::Add, Reg::R1, Operand::Reg(Reg::R0)));
        self.emit(mov_reg(Reg::R3, Reg::R1));
        self.emit(alu(AluOp::Add, Reg::R3, Operand::Imm(size.bytes() as i32)));
        self.jcond(Cond::Gt, Reg::R3, Operand::Reg(Reg::R2), miss);
    }

    fn swap(&mut self, r: Reg, size: Size) {
        if size != Size::B {
            self.emit(Insn::Endian {
                order: ByteOrder::Be,
                bits: size.bits() as u8,
                dst: r,
            });
        }
    }

    fn pkt_read(&mut self, size: Size, off: &Expr) {
        self.expr(off);
        let fault = self.fault;
        match self.hook {
            Hook::Xdp => {
                self.pkt_check(size, fault);
                self.emit(ldx(size, Reg::R0, Reg::R1, 0));
            }
            Hook::Tc => {
                // Direct access when the bytes are in the linear part, else
                // bpf_skb_load_bytes.
                let slow = self.label();
                let done = self.label();
                let o = self.alloc(8);
                self.emit(stx(Size::DW, Reg::FP, o, Reg::R0));
                self.pkt_check(size, slow);
                self.emit(ldx(size, Reg::R0, Reg::R1, 0));
                self.jmp(done);
                self.bind(slow);
                self.jcond(Cond::Gt, Reg::R0, Operand::Imm(MAX_PKT_OFF), fault);
                self.emit(mov_reg(Reg::R2, Reg::R0));
                self.emit(mov_reg(Reg::R1, Reg::R9));
                self.fp_addr(Reg::R3, o);
                self.emit(mov_imm(Reg::R4, size.bytes() as i32));
                self.call_helper(SKB_LOAD_BYTES);
                self.jcond(Cond::Ne, Reg::R0, Operand::Imm(0), fault);
                self.emit(ldx(size, Reg::R0, Reg::FP, o));
                self.bind(done);
                self.free(8);
            }
            Hook::Socket => {
                let o = self.alloc(8);
                self.jcond(Cond::Gt, Reg::R0, Operand::Imm(MAX_PKT_OFF), fault);
                self.emit(mov_reg(Reg::R2, Reg::R0));
                self.emit(mov_reg(Reg::R1, Reg::R9));
                self.fp_addr(Reg::R3, o);
                self.emit(mov_imm(Reg::R4, size.bytes() as i32));
                self.emit(mov_imm(Reg::R5, 1)); // BPF_HDR_START_NET
                self.call_helper(SKB_LOAD_BYTES_RELATIVE);
                self.jcond(Cond::Ne, Reg::R0, Operand::Imm(0), fault);
                self.emit(ldx(size, Reg::R0, Reg::FP, o));
                self.free(8);
            }
        }
        self.swap(Reg::R0, size);
    }

    fn pkt_write(&mut self, size: Size, off: &Expr, value: &Expr) {
        let v = self.spill_expr(value);
        self.expr(off);
        let fault = self.fault;
        match self.hook {
            Hook::Xdp => {
                self.pkt_check(size, fault);
                self.emit(ldx(Size::DW, Reg::R3, Reg::FP, v));
                self.swap(Reg::R3, size);
                self.emit(stx(size, Reg::R1, 0, Reg::R3));
            }
            _ => {
                // bpf_skb_store_bytes handles linear and paged data alike.
                self.jcond(Cond::Gt, Reg::R0, Operand::Imm(MAX_PKT_OFF), fault);
                self.emit(mov_reg(Reg::R2, Reg::R0));
                self.emit(ldx(Size::DW, Reg::R3, Reg::FP, v));
                self.swap(Reg::R3, size);
                self.emit(stx(Size::DW, Reg::FP, v, Reg::R3));
                self.emit(mov_reg(Reg::R1, Reg::R9));
                self.fp_addr(Reg::R3, v);
                self.emit(mov_imm(Reg::R4, size.bytes() as i32));
                self.emit(mov_imm(Reg::R5, 0));
                self.call_helper(SKB_STORE_BYTES);
                self.jcond(Cond::Ne, Reg::R0, Operand::Imm(0), fault);
            }
        }
        self.free(8);
    }

    /// r0 = pointer to the packet info block (or a fault).
    fn pkt_info(&mut self) {
        self.percpu_slot(ObjMap::PktInfo);
    }

    /// r0 = pointer to this hook's and nesting depth's slot of per-CPU
    /// map `m` (the info block, the call frame), or a fault.
    fn percpu_slot(&mut self, m: ObjMap) {
        let k = self.alloc(8);
        if self.hook == Hook::Xdp {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: k,
                imm: 0,
            });
        } else {
            // slot = hook * 4 + min(depth - 1, 3) (depth from nfkit_nest).
            let hid = self.hook.id() as i32;
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: k,
                imm: hid,
            });
            self.load_map(Reg::R1, ObjMap::Nest);
            self.fp_addr(Reg::R2, k);
            self.call_helper(MAP_LOOKUP);
            let zero = self.label();
            let set = self.label();
            self.emit(mov_imm(Reg::R1, 0));
            self.jcond(Cond::Eq, Reg::R0, Operand::Imm(0), set);
            self.emit(ldx(Size::W, Reg::R1, Reg::R0, 0));
            self.jcond(Cond::Eq, Reg::R1, Operand::Imm(0), set);
            self.emit(alu(AluOp::Sub, Reg::R1, Operand::Imm(1)));
            self.jcond(Cond::Le, Reg::R1, Operand::Imm(3), set);
            self.emit(mov_imm(Reg::R1, 3));
            self.bind(zero);
            self.bind(set);
            self.emit(alu(AluOp::Add, Reg::R1, Operand::Imm(hid * 4)));
            self.emit(stx(Size::DW, Reg::FP, k, Reg::R1));
        }
        self.load_map(Reg::R1, m);
        self.fp_addr(Reg::R2, k);
        self.call_helper(MAP_LOOKUP);
        let fault = self.fault;
        self.jcond(Cond::Eq, Reg::R0, Operand::Imm(0), fault);
        self.free(8);
    }

    // ------------------------------------------------------------------
    // Expressions: the value in r0.

    /// Brings r0 into the canonical form of `ty`.
    fn normalize(&mut self, ty: Ty) {
        match ty {
            Ty::U64 | Ty::S64 => {}
            Ty::U32 => self.emit(Insn::Alu {
                width: Width::W32,
                op: AluOp::Mov,
                dst: Reg::R0,
                src: Operand::Reg(Reg::R0),
            }),
            Ty::U16 => self.emit(alu(AluOp::And, Reg::R0, Operand::Imm(0xffff))),
            Ty::U8 => self.emit(alu(AluOp::And, Reg::R0, Operand::Imm(0xff))),
            Ty::S8 | Ty::S16 | Ty::S32 => {
                let sh = 64 - ty.bits() as i32;
                self.emit(alu(AluOp::Lsh, Reg::R0, Operand::Imm(sh)));
                self.emit(alu(AluOp::Arsh, Reg::R0, Operand::Imm(sh)));
            }
            Ty::Bool => {
                self.emit(Insn::Jmp {
                    width: Width::W64,
                    cond: Cond::Eq,
                    dst: Reg::R0,
                    src: Operand::Imm(0),
                    off: 1,
                });
                self.emit(mov_imm(Reg::R0, 1));
            }
        }
    }

    /// A simple right operand: an immediate, or a local loaded into r1.
    fn operand(&mut self, e: &Expr) -> Option<Operand> {
        match &e.kind {
            ExprKind::Const(v)
                if (*v as i64) >= i32::MIN as i64 && (*v as i64) <= i32::MAX as i64 =>
            {
                Some(Operand::Imm(*v as i64 as i32))
            }
            ExprKind::Local(l) => {
                let o = self.local(*l);
                let r = self.lreg();
                self.emit(ldx(Size::DW, Reg::R1, r, o));
                Some(Operand::Reg(Reg::R1))
            }
            _ => None,
        }
    }

    /// r0 = a, and the second operand as an immediate or in r1.
    fn pair(&mut self, a: &Expr, b: &Expr) -> Operand {
        let simple = matches!(b.kind, ExprKind::Const(_) | ExprKind::Local(_));
        if simple {
            self.expr(a);
            if let Some(op) = self.operand(b) {
                return op;
            }
            self.konst(Reg::R1, b.as_const().unwrap_or(0));
            return Operand::Reg(Reg::R1);
        }
        let t = self.spill_expr(a);
        self.expr(b);
        self.emit(mov_reg(Reg::R1, Reg::R0));
        self.emit(ldx(Size::DW, Reg::R0, Reg::FP, t));
        self.free(8);
        Operand::Reg(Reg::R1)
    }

    fn cond_of(op: CmpOp, signed: bool) -> Cond {
        match (op, signed) {
            (CmpOp::Eq, _) => Cond::Eq,
            (CmpOp::Ne, _) => Cond::Ne,
            (CmpOp::Lt, false) => Cond::Lt,
            (CmpOp::Le, false) => Cond::Le,
            (CmpOp::Gt, false) => Cond::Gt,
            (CmpOp::Ge, false) => Cond::Ge,
            (CmpOp::Lt, true) => Cond::Slt,
            (CmpOp::Le, true) => Cond::Sle,
            (CmpOp::Gt, true) => Cond::Sgt,
            (CmpOp::Ge, true) => Cond::Sge,
        }
    }

    fn negate(op: CmpOp) -> CmpOp {
        match op {
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Le => CmpOp::Gt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Ge => CmpOp::Lt,
        }
    }

    /// Jumps to `l` when `c` is false.
    fn branch_false(&mut self, c: &Expr, l: Label) {
        match &c.kind {
            ExprKind::Cmp(op, a, b) => {
                let src = self.pair(a, b);
                let cond = Self::cond_of(Self::negate(*op), a.ty.signed());
                self.jcond(cond, Reg::R0, src, l);
            }
            ExprKind::Not(x) => self.branch_true(x, l),
            ExprKind::And(a, b) => {
                self.branch_false(a, l);
                self.branch_false(b, l);
            }
            ExprKind::Or(a, b) => {
                let t = self.label();
                self.branch_true(a, t);
                self.branch_false(b, l);
                self.bind(t);
            }
            _ => {
                self.expr(c);
                self.jcond(Cond::Eq, Reg::R0, Operand::Imm(0), l);
            }
        }
    }

    /// Jumps to `l` when `c` is true.
    fn branch_true(&mut self, c: &Expr, l: Label) {
        match &c.kind {
            ExprKind::Cmp(op, a, b) => {
                let src = self.pair(a, b);
                let cond = Self::cond_of(*op, a.ty.signed());
                self.jcond(cond, Reg::R0, src, l);
            }
            ExprKind::Not(x) => self.branch_false(x, l),
            ExprKind::Or(a, b) => {
                self.branch_true(a, l);
                self.branch_true(b, l);
            }
            ExprKind::And(a, b) => {
                let f = self.label();
                self.branch_false(a, f);
                self.branch_true(b, l);
                self.bind(f);
            }
            _ => {
                self.expr(c);
                self.jcond(Cond::Ne, Reg::R0, Operand::Imm(0), l);
            }
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Const(v) => self.konst(Reg::R0, *v),
            ExprKind::Local(l) => {
                let o = self.local(*l);
                let r = self.lreg();
                self.emit(ldx(Size::DW, Reg::R0, r, o));
            }
            ExprKind::Bin(op, a, b) => self.binop(*op, e.ty, a, b),
            ExprKind::Neg(x) => {
                self.expr(x);
                self.emit(alu(AluOp::Neg, Reg::R0, Operand::Imm(0)));
                self.normalize(e.ty);
            }
            ExprKind::Inv(x) => {
                self.expr(x);
                self.emit(alu(AluOp::Xor, Reg::R0, Operand::Imm(-1)));
                self.normalize(e.ty);
            }
            ExprKind::Not(x) => {
                self.expr(x);
                self.emit(alu(AluOp::Xor, Reg::R0, Operand::Imm(1)));
            }
            ExprKind::Cmp(..) | ExprKind::And(..) | ExprKind::Or(..) => {
                let f = self.label();
                let end = self.label();
                self.branch_false(e, f);
                self.emit(mov_imm(Reg::R0, 1));
                self.jmp(end);
                self.bind(f);
                self.emit(mov_imm(Reg::R0, 0));
                self.bind(end);
            }
            ExprKind::IfExp(c, a, b) => {
                let f = self.label();
                let end = self.label();
                self.branch_false(c, f);
                self.expr(a);
                self.jmp(end);
                self.bind(f);
                self.expr(b);
                self.bind(end);
            }
            ExprKind::Cast(x) => {
                self.expr(x);
                self.normalize(e.ty);
            }
            ExprKind::CallNf { nf, args } => self.call_nf(*nf, args),
            ExprKind::CallChain { chain, args } => self.call_chain(*chain, args),
            ExprKind::PktRead { size, off } => self.pkt_read(*size, off),
            ExprKind::PktLen => {
                if self.hook == Hook::Xdp {
                    self.pkt_info();
                    self.emit(ldx(Size::W, Reg::R0, Reg::R0, 48));
                } else {
                    self.emit(ldx(Size::W, Reg::R0, Reg::R9, 0));
                }
            }
            ExprKind::PktInfo { off, size } => {
                self.pkt_info();
                self.emit(ldx(*size, Reg::R0, Reg::R0, *off));
            }
            ExprKind::MapGet { map, key, default } => {
                let vt = self.prog.maps[*map].value;
                let d = default.as_ref().map(|d| self.spill_expr(d));
                let k = self.spill_expr(key);
                self.load_map(Reg::R1, ObjMap::User(*map));
                self.fp_addr(Reg::R2, k);
                self.call_helper(MAP_LOOKUP);
                let miss = self.label();
                let end = self.label();
                self.jcond(Cond::Eq, Reg::R0, Operand::Imm(0), miss);
                self.emit(ldx(map_size(vt), Reg::R0, Reg::R0, 0));
                self.normalize(vt);
                self.jmp(end);
                self.bind(miss);
                match d {
                    Some(o) => self.emit(ldx(Size::DW, Reg::R0, Reg::FP, o)),
                    None => self.emit(mov_imm(Reg::R0, 0)),
                }
                self.bind(end);
                self.free(if d.is_some() { 16 } else { 8 });
            }
            ExprKind::MapHas { map, key, negate } => {
                let k = self.spill_expr(key);
                self.load_map(Reg::R1, ObjMap::User(*map));
                self.fp_addr(Reg::R2, k);
                self.call_helper(MAP_LOOKUP);
                // r0 = (r0 != 0) ^ negate
                self.emit(Insn::Jmp {
                    width: Width::W64,
                    cond: Cond::Eq,
                    dst: Reg::R0,
                    src: Operand::Imm(0),
                    off: 1,
                });
                self.emit(mov_imm(Reg::R0, 1));
                if *negate {
                    self.emit(alu(AluOp::Xor, Reg::R0, Operand::Imm(1)));
                }
                self.free(8);
            }
        }
    }

    fn binop(&mut self, op: BinOp, ty: Ty, a: &Expr, b: &Expr) {
        let signed = ty.signed();
        if matches!(op, BinOp::Div | BinOp::Mod) && b.as_const() == Some(0) {
            // x // 0 == 0, x % 0 == x.
            self.expr(a);
            if op == BinOp::Div {
                self.emit(mov_imm(Reg::R0, 0));
            }
            return;
        }
        let mut src = self.pair(a, b);
        let aop = match op {
            BinOp::Add => AluOp::Add,
            BinOp::Sub => AluOp::Sub,
            BinOp::Mul => AluOp::Mul,
            BinOp::Div => {
                if signed {
                    AluOp::SDiv
                } else {
                    AluOp::Div
                }
            }
            BinOp::Mod => {
                if signed {
                    AluOp::SMod
                } else {
                    AluOp::Mod
                }
            }
            BinOp::And => AluOp::And,
            BinOp::Or => AluOp::Or,
            BinOp::Xor => AluOp::Xor,
            BinOp::Shl => AluOp::Lsh,
            BinOp::Shr => {
                if signed {
                    AluOp::Arsh
                } else {
                    AluOp::Rsh
                }
            }
        };
        if matches!(op, BinOp::Shl | BinOp::Shr) {
            let mask = ty.bits() as i32 - 1;
            src = match src {
                Operand::Imm(k) => Operand::Imm(k & mask),
                Operand::Reg(r) => {
                    self.emit(alu(AluOp::And, r, Operand::Imm(mask)));
                    Operand::Reg(r)
                }
            };
        }
        if matches!(op, BinOp::Div | BinOp::Mod) {
            if let Operand::Imm(k) = src {
                // Register divisors only: the verifier and the VM agree on
                // x/0 with registers.
                self.emit(mov_imm(Reg::R1, k));
                src = Operand::Reg(Reg::R1);
            }
        }
        self.emit(alu(aop, Reg::R0, src));
        self.normalize(ty);
    }

    fn call_nf(&mut self, nf: usize, args: &[Expr]) {
        let mut slots = Vec::new();
        for a in args {
            slots.push(self.spill_expr(a));
        }
        if self.dynamic.is_some() {
            self.tail_call_nf(nf, &slots);
        } else {
            let regs = [Reg::R2, Reg::R3, Reg::R4, Reg::R5];
            for (i, r) in regs.into_iter().enumerate() {
                match slots.get(i) {
                    Some(&o) => self.emit(ldx(Size::DW, r, Reg::FP, o)),
                    None => self.emit(mov_imm(r, 0)),
                }
            }
            self.emit(mov_reg(Reg::R1, Reg::R9));
            let sym = self.prog.nfs[nf].symbol.clone();
            self.refs.push((self.insns.len(), Ref::Nf(sym)));
            self.emit(Insn::Call {
                kind: CallKind::Local,
                imm: -1,
            });
        }
        self.free(8 * slots.len() as i32);
        // A verdict or a fault ends the whole chain.
        let exit = self.exit;
        self.jcond(Cond::Slt, Reg::R0, Operand::Imm(0), exit);
    }

    /// Dynamic mode: the NF call ends this segment. The arguments (in
    /// stack slots `args`) and every stack slot in use go to the call
    /// frame, the continuation is the next segment's slot, and the NF's
    /// dynamic entry is tail-called; the next segment resumes right
    /// after (r0 = the NF's value: a verdict never comes back).
    fn tail_call_nf(&mut self, nf: usize, args: &[i16]) {
        let saved = self.used;
        let sym = &self.prog.nfs[nf].symbol;
        let line = self.lines.last().map_or(0, |l| l.1);
        let resume = self.label();
        let start = self.label();
        let name = self.name.clone();
        let Some(d) = self.dynamic.as_mut() else {
            return;
        };
        let nf_slot = d.nf_slots.get(sym).copied().unwrap_or(0);
        let slot = d.next_seg;
        if d.error.is_none() {
            if saved > FRAME_SLOTS * 8 {
                d.error = Some(GenError::DynFrame {
                    chain: name,
                    bytes: saved as u32,
                    line,
                });
            } else if slot >= d.seg_end {
                d.error = Some(GenError::NoSlot {
                    what: format!("a segment of chain '{name}'"),
                });
            }
        }
        d.next_seg += 1;
        let bounds = self
            .frames
            .iter()
            .flat_map(|f| f.loops.iter().filter_map(|l| l.bound))
            .collect();
        let Some(d) = self.dynamic.as_mut() else {
            return;
        };
        d.sites.push(Site {
            resume,
            start,
            saved,
            bounds,
            slot,
        });
        self.percpu_slot(ObjMap::Frame);
        for i in 0..4i16 {
            match args.get(i as usize) {
                Some(&o) => {
                    self.emit(ldx(Size::DW, Reg::R1, Reg::FP, o));
                    self.emit(stx(Size::DW, Reg::R0, 8 * i, Reg::R1));
                }
                None => self.emit(Insn::St {
                    size: Size::DW,
                    dst: Reg::R0,
                    off: 8 * i,
                    imm: 0,
                }),
            }
        }
        for j in 0..(saved / 8).min(FRAME_SLOTS) {
            self.emit(ldx(Size::DW, Reg::R1, Reg::FP, local_off(0, j as usize)));
            self.emit(stx(Size::DW, Reg::R0, FRAME_LOCALS + 8 * j as i16, Reg::R1));
        }
        self.emit(Insn::St {
            size: Size::W,
            dst: Reg::R0,
            off: FRAME_CONT,
            imm: slot as i32,
        });
        self.emit(mov_reg(Reg::R1, Reg::R9));
        self.load_map(Reg::R2, ObjMap::Progs);
        self.emit(mov_imm(Reg::R3, nf_slot as i32));
        self.call_helper(TAIL_CALL);
        // Only a failed tail call comes back: a fault.
        let fault = self.fault;
        self.jmp(fault);
        self.bind(resume);
    }

    fn call_chain(&mut self, chain: usize, args: &[Expr]) {
        let callee = &self.prog.chains[chain];
        let n = callee.locals.len() as i32;
        let nparams = callee.params.len();
        // Arguments are evaluated in the caller's frame into temporaries.
        let mut tmps = Vec::new();
        for a in args {
            tmps.push(self.spill_expr(a));
        }
        let before = self.used;
        self.alloc(8 * n);
        let base = before;
        for (i, &t) in tmps.iter().enumerate().take(nparams) {
            self.emit(ldx(Size::DW, Reg::R0, Reg::FP, t));
            self.emit(stx(Size::DW, Reg::FP, local_off(-base, i), Reg::R0));
        }
        for i in nparams..callee.locals.len() {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: local_off(-base, i),
                imm: 0,
            });
        }
        let ret = self.label();
        self.frames.push(Frame {
            base: -base,
            reg: Reg::FP,
            ret: Some(ret),
            chain,
            loops: Vec::new(),
        });
        self.inline_path.push(callee.name.clone());
        let body = &self.prog.chains[chain].body;
        self.block(body);
        self.emit(mov_imm(Reg::R0, 0));
        self.bind(ret);
        self.frames.pop();
        self.free(8 * n);
        self.free(8 * tmps.len() as i32);
    }
}

/// Offset of local `i` in a frame based at `base` (<= 0 from r10; > 0
/// from the block pointer of a `bpf_loop` callback).
fn local_off(base: i32, i: usize) -> i16 {
    (base - 8 * (i as i32 + 1)).clamp(i16::MIN as i32, i16::MAX as i32) as i16
}

/// The loop variable of a `range` loop whose value can be derived from
/// the iteration index (`var = start + index * step`): (local, step,
/// type), when `step` is `var = var + const` and `body` never assigns
/// `var`. The verifier then sees an unknown index instead of a constant
/// that changes every iteration, and verifies the callback once.
fn derived_var(body: &[Stmt], step: &[Stmt]) -> Option<(usize, u64, Ty)> {
    let [Stmt {
        kind: StmtKind::Assign { local, value },
        ..
    }] = step
    else {
        return None;
    };
    let ExprKind::Bin(BinOp::Add, a, b) = &value.kind else {
        return None;
    };
    let c = b.as_const()?;
    let mut set = Vec::new();
    assigned(body, &mut set);
    if a.kind != ExprKind::Local(*local) || set.contains(local) {
        return None;
    }
    Some((*local, c, value.ty))
}

/// Adds the locals the statements of `body` assign to `out` (in the
/// order of their first assignment).
fn assigned(body: &[Stmt], out: &mut Vec<usize>) {
    struct Assigned<'o>(&'o mut Vec<usize>);
    impl Visit for Assigned<'_> {
        fn visit_stmt(&mut self, s: &Stmt) {
            if let StmtKind::Assign { local, .. } = s.kind {
                if !self.0.contains(&local) {
                    self.0.push(local);
                }
            }
            walk_stmt(self, s);
        }

        // Expressions assign nothing.
        fn visit_expr(&mut self, _: &Expr) {}
    }
    walk_block(&mut Assigned(out), body);
}

/// The memory size of a map value of type `ty`.
pub fn map_size(ty: Ty) -> Size {
    match ty.bytes() {
        1 => Size::B,
        2 => Size::H,
        4 => Size::W,
        _ => Size::DW,
    }
}
