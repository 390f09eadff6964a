//! Load-time refusal of stack and map-value accesses that can never be
//! in bounds (kernel profile with the kernel's limits).
//!
//! Each function reached by an entry is interpreted abstractly over the
//! register values of `regs` (scalar intervals and known bits; pointers to
//! a stack frame, a map value or a ring-buffer record with an offset
//! interval; everything else unknown), with branch refinement on
//! conditional jumps, joins where paths meet and widening after a few
//! rounds at the same instruction, so the fixpoint takes a few passes over
//! the function. Functions are visited callers first; a callee starts from
//! the join of the arguments of every call to it.
//!
//! An access is refused when it is outside its frame (`-512..0`) or value
//! for *every* offset its pointer may have: then every run reaching it
//! faults, and the kernel's verifier, which follows each path with bounds
//! at least as tight, refuses it as well. An access that is only possibly
//! out of bounds (say after a join of two paths the kernel would check
//! one by one) is left to the run-time check, so the VM does not refuse a
//! program the kernel accepts. The error names the instruction and
//! gives the kernel's reason.

#![forbid(unsafe_code)]

use super::absval::{alu, Scalar};
use super::regs::{
    branch, forget_packet, join_into, unlink, CtxKind, Ptr, Region, Regs, Val, PKT_LEN,
};
use super::{reachable, CallGraph, Ctx, EntryInfo};
use crate::config::FRAME_SIZE;
use crate::error::{LoadError, Rule};
use nfkit_isa::{AluOp, AtomicOp, CallKind, Insn, LddwKind, Operand, Width};
use nfkit_object::{MapKind, MapType};

/// Joins at one instruction before bounds that move are widened.
const WIDEN_AFTER: u32 = 3;
/// Steps allowed per instruction of a function before the analysis of it
/// gives up (and leaves every access to the run-time check).
const STEPS_PER_INSN: usize = 64;

/// What the analysis gives the rest of the VM, per op.
pub(super) struct Facts {
    /// A run may reach the op (false where the analysis proved a
    /// function's op unreachable).
    pub may_run: Vec<bool>,
    /// The op's packet access is in bounds on every run: its pointer is
    /// the packet's `data` (loaded from the entry's own context) plus an
    /// offset, and a comparison with `data_end` on every path to it showed
    /// the bytes exist (the JIT leaves out the run-time check there).
    pub packet_proven: Vec<bool>,
    /// The op is a plain 4-byte load of an `xdp_md` field (`data`,
    /// `data_end`, `data_meta`, `ingress_ifindex`, `rx_queue_index`)
    /// through the entry's own context pointer on every run: native code
    /// reads it from its context table.
    pub ctx_field: Vec<bool>,
}

/// Marks each entry that reaches an access out of bounds on every value
/// (`EntryInfo::refused`); fails when no entry is left. Gives what it
/// found per op ([`Facts`]).
pub(super) fn refuse_out_of_bounds(
    cx: &Ctx,
    entries: &mut [EntryInfo],
    graph: &CallGraph,
) -> Result<Facts, LoadError> {
    let nf = cx.funcs.len();
    let mut live = vec![false; nf];
    for e in entries.iter().filter(|e| e.refused.is_none()) {
        for (f, r) in reachable(graph, e.func).into_iter().enumerate() {
            live[f] |= r;
        }
    }
    let (order, cyclic) = callers_first(graph, &live);
    let unknown = unknown_regs();
    // Entries, callbacks, functions only other objects call and those on
    // a cycle start unknown; the others from their calls' arguments.
    let mut fixed_start = cyclic.clone();
    let mut called = vec![false; nf];
    for &(c, _) in graph.callees.iter().flatten() {
        called[c] = true;
    }
    for e in entries.iter() {
        fixed_start[e.func] = true;
    }
    let mut start: Vec<Option<Regs>> = (0..nf)
        .map(|f| (fixed_start[f] || !called[f] || graph.is_callback[f]).then_some(unknown))
        .collect();
    // An entry function nothing calls starts with its context in r1.
    for (f, kind) in entry_contexts(entries, nf) {
        if let (Some(regs), false, false, false) =
            (&mut start[f], called[f], graph.is_callback[f], cyclic[f])
        {
            regs[1] = Val::Ctx(kind);
        }
    }
    let mut errors: Vec<Option<LoadError>> = vec![None; nf];
    let mut may_run = vec![true; cx.image.insns.len()];
    let mut packet_proven = vec![false; cx.image.insns.len()];
    let mut ctx_field = vec![false; cx.image.insns.len()];
    for f in order {
        // A subprogram no reachable call reaches is never run (and the
        // kernel never looks at it).
        let Some(init) = start[f] else {
            may_run[cx.funcs[f].start_op..cx.funcs[f].end_op].fill(false);
            continue;
        };
        let (err, calls, reached, proven, fields) = analyse(cx, f, init);
        errors[f] = err;
        let ops = cx.funcs[f].start_op..cx.funcs[f].end_op;
        if let Some(reached) = reached {
            may_run[ops.clone()].copy_from_slice(&reached);
        }
        if let Some(fields) = fields {
            ctx_field[ops.clone()].copy_from_slice(&fields);
        }
        if let Some(proven) = proven {
            packet_proven[ops].copy_from_slice(&proven);
        }
        for (callee, args) in calls {
            if fixed_start[callee] || graph.is_callback[callee] {
                continue;
            }
            match &mut start[callee] {
                Some(old) => {
                    join_into(old, &args, false);
                }
                slot => *slot = Some(args),
            }
        }
    }
    for e in entries.iter_mut().filter(|e| e.refused.is_none()) {
        let reach = reachable(graph, e.func);
        e.refused = (0..nf).find_map(|f| if reach[f] { errors[f].clone() } else { None });
    }
    match entries.iter().find_map(|e| e.refused.clone()) {
        Some(first) if entries.iter().all(|e| e.refused.is_some()) => Err(first),
        _ => Ok(Facts {
            may_run,
            packet_proven,
            ctx_field,
        }),
    }
}

/// The context kind of each entry function whose entries agree on one
/// (XDP or TC; socket filters cannot reach the packet directly).
fn entry_contexts(entries: &[EntryInfo], nf: usize) -> Vec<(usize, CtxKind)> {
    use nfkit_object::ProgType;
    let mut kinds: Vec<Option<Option<CtxKind>>> = vec![None; nf];
    for e in entries {
        let kind = match e.prog_type {
            ProgType::Xdp => Some(CtxKind::Xdp),
            ProgType::SchedCls | ProgType::SchedAct => Some(CtxKind::Skb),
            _ => None,
        };
        if let Some(slot) = kinds.get_mut(e.func) {
            *slot = match *slot {
                None => Some(kind),
                Some(k) if k == kind => Some(k),
                Some(_) => Some(None),
            };
        }
    }
    kinds
        .into_iter()
        .enumerate()
        .filter_map(|(f, k)| Some((f, k??)))
        .collect()
}

/// Every register unknown but `r10`, the frame pointer; no packet bytes
/// known.
fn unknown_regs() -> Regs {
    let mut r = [Val::Unknown; 12];
    r[10] = Val::stack(0);
    r[PKT_LEN] = Val::Scalar(Scalar::konst(0));
    r
}

/// The live functions, each after all its callers; and those on a call
/// cycle (which start from unknown arguments).
fn callers_first(graph: &CallGraph, live: &[bool]) -> (Vec<usize>, Vec<bool>) {
    let nf = live.len();
    let mut indeg = vec![0usize; nf];
    for (f, cs) in graph.callees.iter().enumerate() {
        if live[f] {
            for &(c, _) in cs {
                indeg[c] += 1;
            }
        }
    }
    let mut ready: Vec<usize> = (0..nf).filter(|&f| live[f] && indeg[f] == 0).collect();
    let mut order = Vec::new();
    while let Some(f) = ready.pop() {
        order.push(f);
        for &(c, _) in &graph.callees[f] {
            indeg[c] -= 1;
            if indeg[c] == 0 {
                ready.push(c);
            }
        }
    }
    let mut cyclic = vec![false; nf];
    let mut placed = vec![false; nf];
    for &f in &order {
        placed[f] = true;
    }
    for f in 0..nf {
        if live[f] && !placed[f] {
            cyclic[f] = true;
            order.push(f);
        }
    }
    (order, cyclic)
}

/// What [`analyse`] finds in a function: the first access out of bounds
/// on every value, the arguments of each call, which ops a run may reach
/// and which packet accesses are proven in bounds (`None` when the
/// analysis gave up).
type Found = (
    Option<LoadError>,
    Vec<(usize, Regs)>,
    Option<Vec<bool>>,
    Option<Vec<bool>>,
    Option<Vec<bool>>,
);

/// The registers before each op of one function, for the ops reached:
/// an index per op into one arena of registers, filled as ops are
/// reached (registers are large, about 1 kB: a slot per op, written
/// up front, cost more than the analysis of a straight-line op).
struct States {
    slot: Vec<u32>,
    regs: Vec<Regs>,
}

const UNREACHED: u32 = u32::MAX;

thread_local! {
    /// The arena of the last analysis on this thread, kept for the next
    /// one (only its memory: it is cleared before use).
    static ARENA: std::cell::Cell<Vec<Regs>> = const { std::cell::Cell::new(Vec::new()) };
}

impl States {
    fn new(n: usize, init: Regs) -> States {
        let mut regs = ARENA.with(std::cell::Cell::take);
        regs.clear();
        regs.push(init);
        let mut slot = vec![UNREACHED; n];
        slot[0] = 0;
        States { slot, regs }
    }

    fn get(&self, k: usize) -> Option<&Regs> {
        match self.slot[k] {
            UNREACHED => None,
            x => Some(&self.regs[x as usize]),
        }
    }

    fn get_mut(&mut self, k: usize) -> Option<&mut Regs> {
        match self.slot[k] {
            UNREACHED => None,
            x => Some(&mut self.regs[x as usize]),
        }
    }

    fn is_some(&self, k: usize) -> bool {
        self.slot[k] != UNREACHED
    }

    /// Op `k` reached for the first time, with `regs`.
    fn set(&mut self, k: usize, regs: Regs) {
        self.slot[k] = self.regs.len() as u32;
        self.regs.push(regs);
    }

    /// Op `k` reached for the first time with a copy of op `from`'s
    /// registers (copied once, in place); the copy, to change.
    fn copy(&mut self, from: usize, k: usize) -> &mut Regs {
        let x = self.slot[from] as usize;
        self.slot[k] = self.regs.len() as u32;
        self.regs.extend_from_within(x..x + 1);
        let last = self.regs.len() - 1;
        &mut self.regs[last]
    }

    fn iter(&self) -> impl Iterator<Item = Option<&Regs>> + '_ {
        (0..self.slot.len()).map(|k| self.get(k))
    }
}

impl Drop for States {
    fn drop(&mut self) {
        let regs = std::mem::take(&mut self.regs);
        ARENA.with(|a| a.set(regs));
    }
}

/// The fixpoint over function `f` from `init`.
fn analyse(cx: &Ctx, f: usize, init: Regs) -> Found {
    if forward_only(cx, f) {
        return analyse_forward(cx, f, init);
    }
    analyse_worklist(cx, f, init)
}

/// [`analyse`] by a worklist of ops, smallest first (any function).
fn analyse_worklist(cx: &Ctx, f: usize, init: Regs) -> Found {
    let func = &cx.funcs[f];
    let (start, n) = (func.start_op, func.end_op - func.start_op);
    let mut state = States::new(n, init);
    let mut joins = vec![0u32; n];
    // The ops to visit, smallest first, each once at a time.
    let mut work = Worklist::new(start, n);
    let mut steps = 0usize;
    let give_up = STEPS_PER_INSN * n + 1024;
    while let Some(i) = work.pop() {
        steps += 1;
        if steps > give_up {
            return (None, calls_unknown(cx, f), None, None, None);
        }
        // Registers are large: borrowed, not copied, on the way. A
        // straight-line op whose next op has no state yet writes that
        // state in place (one copy; the general path below copies the
        // registers into the successor, out of it and into the slot).
        let insn = &cx.image.insns[i];
        let (here, k) = (i - start, i + 1 - start);
        if straight_line(insn) && k < n && state.is_some(here) && !state.is_some(k) {
            transfer(cx, i, insn, state.copy(here, k));
            work.insert(i + 1);
            continue;
        }
        let Some(regs) = state.get(here) else {
            continue;
        };
        // A straight-line op into a reached op: its registers made in a
        // scratch file (one copy) and joined from there. (Past the
        // function's end there is nothing to give.)
        if straight_line(insn) {
            if k < n {
                let mut scratch = *regs;
                transfer(cx, i, insn, &mut scratch);
                arrive(&mut state, &mut joins, &mut work, start, k, &scratch);
            }
            continue;
        }
        let next = successors(cx, i, regs);
        for (t, out) in next.iter().flatten() {
            if let Some(k) = t.checked_sub(start).filter(|&k| k < n) {
                arrive(&mut state, &mut joins, &mut work, start, k, out);
            }
        }
    }
    let mut err = None;
    let mut calls = Vec::new();
    for (k, regs) in state.iter().enumerate() {
        let Some(regs) = regs else { continue };
        let i = start + k;
        if err.is_none() {
            err = access_error(cx, i, regs);
        }
        calls.extend(call_args(cx, i, regs));
    }
    let reached = state.iter().map(|r| r.is_some()).collect();
    let proven = state
        .iter()
        .enumerate()
        .map(|(k, r)| r.is_some_and(|r| packet_in_bounds(cx, start + k, r)))
        .collect();
    let fields = state
        .iter()
        .enumerate()
        .map(|(k, r)| r.is_some_and(|r| xdp_ctx_field(cx, start + k, r)))
        .collect();
    (err, calls, Some(reached), Some(proven), Some(fields))
}

/// An edge of the worklist's analysis into op `k` (of the function
/// starting at op `start`) with registers `out`: they become the op's
/// (first edge) or are joined into them (counted; widened after
/// [`WIDEN_AFTER`]); the op is queued if that changed anything.
fn arrive(
    state: &mut States,
    joins: &mut [u32],
    work: &mut Worklist,
    start: usize,
    k: usize,
    out: &Regs,
) {
    match state.get_mut(k) {
        Some(old) => {
            joins[k] += 1;
            if join_into(old, out, joins[k] > WIDEN_AFTER) {
                work.insert(start + k);
            }
        }
        None => {
            state.set(k, *out);
            work.insert(start + k);
        }
    }
}

/// The callee of op `i` if it is a call of a function here, with the
/// arguments `regs` (before it) pass (the rest unknown).
fn call_args(cx: &Ctx, i: usize, regs: &Regs) -> Option<(usize, Regs)> {
    let rel = cx.image.insns[i].call_offset()?;
    match (cx.target(i, rel), &cx.image.insns[i]) {
        (Ok(t), Insn::Call { .. }) => {
            let mut args = unknown_regs();
            args[1..6].copy_from_slice(&regs[1..6]);
            Some((cx.op_func[t] as usize, args))
        }
        _ => None,
    }
}

/// Whether every jump of function `f` that lands in it goes forward
/// (no loop): then [`analyse_forward`] gives what [`analyse`]'s worklist
/// would.
fn forward_only(cx: &Ctx, f: usize) -> bool {
    let func = &cx.funcs[f];
    (func.start_op..func.end_op).all(|i| {
        let Some(rel) = cx.image.insns[i].jump_offset() else {
            return true;
        };
        match cx.target(i, rel) {
            Ok(t) => t > i || t < func.start_op || t >= func.end_op,
            Err(_) => true,
        }
    })
}

/// [`analyse`] of a function without loops ([`forward_only`]), in one
/// pass in op order, keeping registers only for the ops a jump lands on
/// (and the first): a straight-line op transforms the registers of the
/// op before it in place, where the worklist keeps a 1 kB copy per op.
///
/// It finds exactly what the worklist does. That pops the smallest op
/// first and every edge goes forward, so each op is visited once, after
/// every op before it that reaches it: its registers are final when it
/// is visited, the first edge to reach it sets them and each later one
/// joins into them (counted, widened after [`WIDEN_AFTER`]) in the order
/// of the ops they leave — jumps from ops before it, then the edges of
/// the op before it (its jump, then its fall-through). This pass joins
/// the same values in the same order with the same counts.
fn analyse_forward(cx: &Ctx, f: usize, init: Regs) -> Found {
    let func = &cx.funcs[f];
    let (start, n) = (func.start_op, func.end_op - func.start_op);
    // Registers of jump targets (and op 0), joined as edges arrive.
    let mut state = States::new(n, init);
    let mut joins = vec![0u32; n];
    // The fall-through edge into the next op.
    let mut fall: Option<Regs> = None;
    let mut err = None;
    let mut calls = Vec::new();
    let mut reached = vec![false; n];
    let mut proven = vec![false; n];
    let mut fields = vec![false; n];
    let arrive =
        |state: &mut States, joins: &mut [u32], k: usize, regs: Regs| match state.get_mut(k) {
            Some(old) => {
                joins[k] += 1;
                join_into(old, &regs, joins[k] > WIDEN_AFTER);
            }
            None => state.set(k, regs),
        };
    for k in 0..n {
        let i = start + k;
        // The registers before op i: the fall-through's, or (where
        // jumps land too) joined into the target's.
        let mut cur = match (fall.take(), state.is_some(k)) {
            (Some(r), true) => {
                arrive(&mut state, &mut joins, k, r);
                state.get(k).copied()
            }
            (None, true) => state.get(k).copied(),
            (r, false) => r,
        };
        let Some(regs) = cur.as_mut() else {
            continue;
        };
        reached[k] = true;
        if err.is_none() {
            err = access_error(cx, i, regs);
        }
        calls.extend(call_args(cx, i, regs));
        proven[k] = packet_in_bounds(cx, i, regs);
        fields[k] = xdp_ctx_field(cx, i, regs);
        let insn = &cx.image.insns[i];
        let target = || {
            insn.jump_offset()
                .and_then(|rel| cx.target(i, rel).ok())
                .and_then(|t| t.checked_sub(start))
                .filter(|&t| t < n)
        };
        match *insn {
            Insn::Exit => {}
            Insn::Ja { .. } | Insn::Gotol { .. } => {
                if let Some(t) = target() {
                    arrive(&mut state, &mut joins, t, *regs);
                }
            }
            Insn::MayGoto { .. } => {
                if let Some(t) = target() {
                    arrive(&mut state, &mut joins, t, *regs);
                }
                fall = cur;
            }
            Insn::Jmp { .. } => {
                let [taken, next] = successors(cx, i, regs);
                if let (Some((_, r)), Some(t)) = (taken, target()) {
                    arrive(&mut state, &mut joins, t, r);
                }
                fall = next.map(|(_, r)| r);
            }
            _ => {
                transfer(cx, i, insn, regs);
                fall = cur;
            }
        }
    }
    (err, calls, Some(reached), Some(proven), Some(fields))
}

/// Op `i` (registers `regs` before it) is a plain 4-byte load of one of
/// the first five `xdp_md` fields through the entry's context pointer.
fn xdp_ctx_field(cx: &Ctx, i: usize, regs: &Regs) -> bool {
    let Insn::Ldx {
        size,
        signed: false,
        src,
        off,
        ..
    } = cx.image.insns[i]
    else {
        return false;
    };
    size.bytes() == 4
        && matches!(off, 0 | 4 | 8 | 12 | 16)
        && regs[src.num() as usize] == Val::Ctx(super::regs::CtxKind::Xdp)
}

/// Op `i` (registers `regs` before it) loads or stores through a packet
/// pointer inside the bytes comparisons with `data_end` have shown.
fn packet_in_bounds(cx: &Ctx, i: usize, regs: &Regs) -> bool {
    let (base, off, size) = match cx.image.insns[i] {
        Insn::Ldx { size, src, off, .. } => (src, off, size.bytes()),
        Insn::St { size, dst, off, .. } | Insn::Stx { size, dst, off, .. } => {
            (dst, off, size.bytes())
        }
        _ => return false,
    };
    let Val::Ptr(p) = regs[base.num() as usize] else {
        return false;
    };
    let Some(known) = regs[PKT_LEN].scalar() else {
        return false;
    };
    if p.region != Region::Packet || p.maybe_null.is_some() {
        return false;
    }
    let at = p.fixed as i128 + off as i128;
    let (lo, hi) = (at + p.var.lo as i128, at + p.var.hi as i128 + size as i128);
    // At or above `data`, and below what comparisons showed: bytes from
    // `data`, or bytes from the pointer itself.
    lo >= 0
        && (hi <= known.lo as i128 || (off >= 0 && off as i128 + size as i128 <= p.range as i128))
}

/// Every function `f` calls, from unknown arguments.
fn calls_unknown(cx: &Ctx, f: usize) -> Vec<(usize, Regs)> {
    let func = &cx.funcs[f];
    (func.start_op..func.end_op)
        .filter_map(|i| match cx.image.insns[i] {
            Insn::Call {
                kind: CallKind::Local,
                ..
            } => {
                let rel = cx.image.insns[i].call_offset()?;
                let t = cx.target(i, rel).ok()?;
                Some((cx.op_func[t] as usize, unknown_regs()))
            }
            _ => None,
        })
        .collect()
}

/// The ops of one function still to visit: a set popped smallest first
/// (as a `BTreeSet` would be), kept in a heap and a bitmap that are
/// allocated once per function, not per node.
struct Worklist {
    start: usize,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<usize>>,
    queued: Vec<bool>,
}

impl Worklist {
    fn new(start: usize, n: usize) -> Worklist {
        let mut w = Worklist {
            start,
            heap: std::collections::BinaryHeap::with_capacity(n.min(1024)),
            queued: vec![false; n],
        };
        w.insert(start);
        w
    }

    /// Queues op `i` (of the function) unless it is queued already.
    fn insert(&mut self, i: usize) {
        if let Some(q) = self.queued.get_mut(i - self.start) {
            if !*q {
                *q = true;
                self.heap.push(std::cmp::Reverse(i));
            }
        }
    }

    fn pop(&mut self) -> Option<usize> {
        let std::cmp::Reverse(i) = self.heap.pop()?;
        self.queued[i - self.start] = false;
        Some(i)
    }
}

/// Whether `insn` only falls through (what [`successors`] runs
/// [`transfer`] for).
fn straight_line(insn: &Insn) -> bool {
    !matches!(
        insn,
        Insn::Exit | Insn::Ja { .. } | Insn::Gotol { .. } | Insn::MayGoto { .. } | Insn::Jmp { .. }
    )
}

/// The (up to two) successors of op `i` with their registers.
fn successors(cx: &Ctx, i: usize, regs: &Regs) -> [Option<(usize, Regs)>; 2] {
    let insn = &cx.image.insns[i];
    let jump = || insn.jump_offset().and_then(|rel| cx.target(i, rel).ok());
    match *insn {
        Insn::Exit => [None, None],
        Insn::Ja { .. } | Insn::Gotol { .. } => [jump().map(|t| (t, *regs)), None],
        Insn::MayGoto { .. } => [jump().map(|t| (t, *regs)), Some((i + 1, *regs))],
        Insn::Jmp {
            width,
            cond,
            dst,
            src,
            ..
        } => {
            let (sv, sreg) = match src {
                Operand::Reg(r) => (regs[r.num() as usize], Some(r.num() as usize)),
                Operand::Imm(k) if width == Width::W32 => {
                    (Val::Scalar(Scalar::konst(k as u32 as i64)), None)
                }
                Operand::Imm(k) => (Val::Scalar(Scalar::konst(k as i64)), None),
            };
            let w32 = width == Width::W32;
            let (taken, fall) = branch(regs, cond, w32, dst.num() as usize, sv, sreg);
            [jump().zip(taken), fall.map(|r| (i + 1, r))]
        }
        _ => {
            let mut out = *regs;
            transfer(cx, i, insn, &mut out);
            [Some((i + 1, out)), None]
        }
    }
}

/// The registers after straight-line instruction `insn` (op `i`).
fn transfer(cx: &Ctx, i: usize, insn: &Insn, r: &mut Regs) {
    transfer_values(cx, i, insn, r);
    for w in written(insn) {
        unlink(r, w);
    }
    // `rd = rs` of a packet pointer: rd is rs plus 0.
    if let Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst,
        src: Operand::Reg(s),
    } = *insn
    {
        if let Val::Ptr(p) = &mut r[dst.num() as usize] {
            if p.region == Region::Packet && dst != s {
                p.link = Some((s.num(), 0));
            }
        }
    }
}

/// The registers `insn` writes (a range: no allocation per step).
fn written(insn: &Insn) -> std::ops::Range<usize> {
    let one = |r: usize| r..r + 1;
    match *insn {
        Insn::Alu { dst, .. }
        | Insn::Endian { dst, .. }
        | Insn::AddrSpaceCast { dst, .. }
        | Insn::Ldx { dst, .. }
        | Insn::Lddw { dst, .. } => one(dst.num() as usize),
        Insn::Atomic { op, src, .. } => match op {
            AtomicOp::CmpXchg => one(0),
            AtomicOp::Xchg
            | AtomicOp::Add { fetch: true }
            | AtomicOp::Or { fetch: true }
            | AtomicOp::And { fetch: true }
            | AtomicOp::Xor { fetch: true } => one(src.num() as usize),
            _ => 0..0,
        },
        Insn::LdAbs { .. } | Insn::LdInd { .. } | Insn::Call { .. } | Insn::Callx { .. } => 0..6,
        _ => 0..0,
    }
}

/// The register values after `insn` (links aside).
fn transfer_values(cx: &Ctx, i: usize, insn: &Insn, r: &mut Regs) {
    let clobber = |r: &mut Regs| r[1..6].fill(Val::Unknown);
    match *insn {
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => {
            let b = match src {
                Operand::Reg(s) => r[s.num() as usize],
                Operand::Imm(k) => Val::Scalar(Scalar::konst(k as i64)),
            };
            let d = dst.num() as usize;
            r[d] = alu_val(op, width, r[d], b);
        }
        Insn::Endian { bits, dst, .. } => {
            r[dst.num() as usize] = Val::Scalar(Scalar::unsigned_bytes(bits as usize / 8));
        }
        Insn::AddrSpaceCast { dst, .. } => r[dst.num() as usize] = Val::Unknown,
        Insn::Ldx {
            size,
            signed,
            dst,
            src,
            off,
        } => {
            let n = size.bytes();
            if let Some(v) = context_field(r[src.num() as usize], off, n, signed) {
                r[dst.num() as usize] = v;
                return;
            }
            let known = read_only_const(cx, r[src.num() as usize], off, n, signed);
            r[dst.num() as usize] = match (known, n, signed) {
                (Some(v), ..) => Val::Scalar(Scalar::konst(v)),
                (None, 8, _) => Val::Unknown,
                (None, _, true) => Val::Scalar(Scalar::signed_bytes(n)),
                _ => Val::Scalar(Scalar::unsigned_bytes(n)),
            };
        }
        Insn::St { .. } | Insn::Stx { .. } => {}
        Insn::Atomic { op, src, .. } => match op {
            AtomicOp::CmpXchg => r[0] = Val::Unknown,
            AtomicOp::Xchg
            | AtomicOp::Add { fetch: true }
            | AtomicOp::Or { fetch: true }
            | AtomicOp::And { fetch: true }
            | AtomicOp::Xor { fetch: true } => r[src.num() as usize] = Val::Unknown,
            _ => {}
        },
        Insn::Lddw {
            kind,
            dst,
            imm,
            next_imm,
        } => r[dst.num() as usize] = lddw_val(cx, kind, imm, next_imm),
        Insn::LdAbs { size, .. } | Insn::LdInd { size, .. } => {
            clobber(r);
            r[0] = Val::Scalar(Scalar::unsigned_bytes(size.bytes()));
        }
        Insn::Call {
            kind: CallKind::Helper,
            imm,
        } => {
            let v = helper_result(cx, i, imm, r);
            if !keeps_packet(imm) {
                forget_packet(r);
            }
            clobber(r);
            r[0] = v;
        }
        Insn::Call { .. } | Insn::Callx { .. } => {
            forget_packet(r);
            clobber(r);
            r[0] = Val::Unknown;
        }
        Insn::Ja { .. }
        | Insn::Gotol { .. }
        | Insn::Jmp { .. }
        | Insn::MayGoto { .. }
        | Insn::Exit => {}
    }
}

/// What a 4-byte load of the context's `data` or `data_end` gives.
fn context_field(base: Val, off: i16, n: usize, signed: bool) -> Option<Val> {
    let Val::Ctx(kind) = base else {
        return None;
    };
    let (data, end) = kind.data_fields();
    match (off as i64, n, signed) {
        (o, 4, false) if o == data => Some(Val::Ptr(Ptr::new(
            Region::Packet,
            0,
            Scalar::konst(0),
            None,
        ))),
        (o, 4, false) if o == end => Some(Val::PacketEnd),
        _ => Some(Val::Unknown),
    }
}

/// Helpers that neither move nor resize the packet (the kernel's
/// `bpf_helper_changes_pkt_data` is false for them): packet pointers
/// stay valid across them.
fn keeps_packet(id: i32) -> bool {
    matches!(
        id,
        // map lookup/update/delete, ktime, trace_printk, prandom, cpu id,
        // tail call, redirect, perf_event_output, redirect_map, ringbuf
        // output/reserve/submit/discard/query, ktime boot/coarse, lookup
        // percpu
        1 | 2 | 3 | 5 | 6 | 7 | 8 | 12 | 23 | 25 | 51 | 125 | 130..=134 | 160 | 195
    )
}

/// `a op= b`: scalar arithmetic, pointer plus or minus a scalar; other
/// operations on pointers give an unknown (32-bit ones a 32-bit scalar).
fn alu_val(op: AluOp, width: Width, a: Val, b: Val) -> Val {
    let w64 = width == Width::W64;
    match (op, a, b) {
        (AluOp::Mov, _, b) if w64 => b,
        (AluOp::Add, Val::Ptr(p), Val::Scalar(s)) | (AluOp::Add, Val::Scalar(s), Val::Ptr(p))
            if w64 =>
        {
            Val::ptr_add(p, s)
        }
        (AluOp::Sub, Val::Ptr(p), Val::Scalar(s)) if w64 => {
            Val::ptr_add(p, Scalar::konst(0).sub(s))
        }
        (AluOp::Add | AluOp::Sub, Val::Scalar(x), Val::Scalar(y)) => {
            Val::Scalar(alu(op, width, x, y))
        }
        (AluOp::Add | AluOp::Sub | AluOp::Mov, _, _) if w64 => Val::Unknown,
        // Anything else yields a scalar (the kernel allows no other
        // arithmetic on pointers).
        (_, a, b) => {
            let a = a.scalar().unwrap_or(Scalar::ANY);
            let b = b.scalar().unwrap_or(Scalar::ANY);
            Val::Scalar(alu(op, width, a, b))
        }
    }
}

/// The value an `n`-byte load at `base + off` reads when `base` points
/// at a known offset of read-only global data (`.rodata`, frozen before
/// the program loads): the kernel reads such loads as constants, and so
/// does not look at branches they rule out.
fn read_only_const(cx: &Ctx, base: Val, off: i16, n: usize, signed: bool) -> Option<i64> {
    let Val::Ptr(Ptr {
        region: Region::MapValue { map, size },
        fixed,
        var,
        maybe_null: None,
        ..
    }) = base
    else {
        return None;
    };
    let spec = cx.image.maps.get(map as usize)?;
    if !matches!(
        spec.kind,
        MapKind::Global {
            read_only: true,
            ..
        }
    ) {
        return None;
    }
    let at = fixed
        .checked_add(var.as_const()?)?
        .checked_add(off as i64)?;
    let at = usize::try_from(at).ok()?;
    if at + n > size as usize {
        return None;
    }
    let data = spec.data.as_deref().unwrap_or(&[]);
    let mut bytes = [0u8; 8];
    for (k, b) in bytes.iter_mut().take(n).enumerate() {
        *b = data.get(at + k).copied().unwrap_or(0);
    }
    let v = u64::from_le_bytes(bytes);
    let shift = 64 - 8 * n as u32;
    Some(if signed {
        ((v << shift) as i64) >> shift
    } else {
        v as i64
    })
}

/// What an `lddw` loads: a constant, a map, a pointer into a map value.
fn lddw_val(cx: &Ctx, kind: LddwKind, imm: i32, next_imm: i32) -> Val {
    match kind {
        LddwKind::Imm64 => Val::Scalar(Scalar::konst(Insn::imm64(imm, next_imm) as i64)),
        LddwKind::MapIdx => Val::Map(imm as u32),
        LddwKind::MapIdxValue => match usize::try_from(imm).ok().and_then(|m| cx.image.maps.get(m))
        {
            Some(m) => Val::Ptr(Ptr::new(
                Region::MapValue {
                    map: imm as u32,
                    size: m.value_size,
                },
                next_imm as i64,
                Scalar::konst(0),
                None,
            )),
            None => Val::Unknown,
        },
        _ => Val::Unknown,
    }
}

/// `r0` after helper `id` at op `i`: map lookups give a map value
/// pointer (or null), `bpf_ringbuf_reserve` of a known size a record (or
/// null).
fn helper_result(cx: &Ctx, i: usize, id: i32, r: &Regs) -> Val {
    let maybe = |region| Val::Ptr(Ptr::new(region, 0, Scalar::konst(0), Some(i as u32)));
    match (id, r[1], r[2]) {
        // bpf_map_lookup_elem, bpf_map_lookup_percpu_elem
        (1 | 195, Val::Map(m), _) => match cx.image.maps.get(m as usize) {
            Some(spec) if plain_values(spec.map_type) => maybe(Region::MapValue {
                map: m,
                size: spec.value_size,
            }),
            _ => Val::Unknown,
        },
        // bpf_ringbuf_reserve
        (131, Val::Map(_), Val::Scalar(s)) => match s.as_const() {
            Some(n) if (1..=i64::from(u32::MAX)).contains(&n) => {
                maybe(Region::Mem { size: n as u32 })
            }
            _ => Val::Unknown,
        },
        _ => Val::Unknown,
    }
}

/// Map types whose lookups return a pointer to one plain value.
fn plain_values(t: MapType) -> bool {
    matches!(
        t,
        MapType::Hash
            | MapType::Array
            | MapType::PercpuHash
            | MapType::PercpuArray
            | MapType::LruHash
            | MapType::LruPercpuHash
            | MapType::LpmTrie
    )
}

/// How an instruction touches memory.
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    Read,
    Write,
}

/// One memory access: base register, offset, bytes, how.
type Access = (u8, i16, usize, How);

/// The memory op `i` touches (with `regs` before it): base register,
/// offset, bytes, how (at most two, in an array: this runs for every op
/// of every analysis). Map helpers read their key (and
/// `bpf_map_update_elem` its value) through pointer arguments: the kernel
/// reports those as reads.
fn accesses(cx: &Ctx, i: usize, regs: &Regs) -> [Option<Access>; 2] {
    match cx.image.insns[i] {
        Insn::Ldx { size, src, off, .. } => [Some((src.num(), off, size.bytes(), How::Read)), None],
        Insn::St { size, dst, off, .. } | Insn::Stx { size, dst, off, .. } => {
            [Some((dst.num(), off, size.bytes(), How::Write)), None]
        }
        Insn::Atomic { size, dst, off, .. } => {
            [Some((dst.num(), off, size.bytes(), How::Read)), None]
        }
        Insn::Call {
            kind: CallKind::Helper,
            imm,
        } => {
            let Val::Map(m) = regs[1] else {
                return [None, None];
            };
            let Some(spec) = cx.image.maps.get(m as usize) else {
                return [None, None];
            };
            let key = (2, 0, spec.key_size as usize, How::Read);
            let value = (3, 0, spec.value_size as usize, How::Read);
            let [a, b] = match imm {
                // lookup, update, delete, lookup_percpu
                2 if plain_values(spec.map_type) => [Some(key), Some(value)],
                1..=3 | 195 => [Some(key), None],
                _ => [None, None],
            };
            // Empty accesses are none (the first kept first).
            let keep = |x: Option<Access>| x.filter(|a| a.2 > 0);
            match (keep(a), keep(b)) {
                (None, b) => [b, None],
                (a, b) => [a, b],
            }
        }
        _ => [None, None],
    }
}

/// The refusal of op `i` if it accesses memory out of bounds on every
/// offset its pointer may have (with `regs` before it).
fn access_error(cx: &Ctx, i: usize, regs: &Regs) -> Option<LoadError> {
    accesses(cx, i, regs)
        .into_iter()
        .flatten()
        .find_map(|(reg, off, size, how)| out_of_bounds(cx, i, regs, reg, off, size, how))
}

/// The refusal of access `size` bytes at `reg + off` of op `i`, if out
/// of bounds on every value of `reg`.
fn out_of_bounds(
    cx: &Ctx,
    i: usize,
    regs: &Regs,
    reg: u8,
    off: i16,
    size: usize,
    how: How,
) -> Option<LoadError> {
    let Val::Ptr(p) = regs[reg as usize] else {
        return None;
    };
    if p.maybe_null.is_some() {
        return None;
    }
    let size = size as i128;
    let fixed = p.fixed as i128 + off as i128;
    let (lo, hi) = (fixed + p.var.lo as i128, fixed + p.var.hi as i128);
    let (ok_lo, ok_hi) = match p.region {
        Region::Stack => (-(FRAME_SIZE as i128), -size),
        Region::MapValue { size: v, .. } | Region::Mem { size: v } => (0, v as i128 - size),
        // Packet accesses are checked at run time.
        Region::Packet => return None,
    };
    if hi >= ok_lo && lo <= ok_hi {
        return None;
    }
    let known = p.var.as_const();
    let (rule, detail) = match p.region {
        Region::Stack => {
            let what = if how == How::Write {
                "write to"
            } else {
                "read from"
            };
            let detail = match known {
                Some(_) => format!("invalid {what} stack R{reg} off={lo} size={size}"),
                None => format!(
                    "invalid variable-offset {what} stack R{reg} var_off=({:#x}; {:#x}) off={fixed} size={size}",
                    p.var.tn.value, p.var.tn.mask
                ),
            };
            (Rule::StackAccess, detail)
        }
        Region::MapValue { size: v, .. } => {
            let detail = if known.is_none() && p.var.lo < 0 && lo < 0 {
                format!("R{reg} min value is negative, either use unsigned index or do a if (index >=0) check.")
            } else {
                format!("invalid access to map value, value_size={v} off={lo} size={size}")
            };
            (Rule::MapValueAccess, detail)
        }
        Region::Mem { size: v } => (
            Rule::MemAccess,
            format!("invalid access to memory, mem_size={v} off={lo} size={size}"),
        ),
        Region::Packet => return None,
    };
    Some(cx.err(i, rule, detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain script compiled for the switch (classifier linked): the
    /// swap bench's update program.
    fn chain_image() -> nfkit_object::Image {
        let source = "from nf.classify import every_packet\n\
                      def main() -> u64:\n\
                      \x20   Packet.write_u8(46, u8(66))\n\
                      \x20   return TX\n\
                      every_packet(main)\n";
        let opts = nfkit_lang::Options {
            hook: Some(nfkit_abi::Hook::Switch),
            ..nfkit_lang::Options::default()
        };
        match nfkit_lang::compile("b.py", source, &opts) {
            Ok(c) => c.image,
            Err(e) => panic!("compiling the chain script: {e}"),
        }
    }

    /// The one-pass analysis of loop-free functions finds what the
    /// worklist finds, on every function of the corpus objects, the C
    /// examples and a chain script, from unknown registers and from
    /// each context.
    #[test]
    fn forward_pass_matches_the_worklist() {
        let mut compared = 0;
        let objects = nfkit_corpus::objects()
            .into_iter()
            .chain(nfkit_corpus::EXAMPLES_C.iter().map(|e| (e.name, e.object)));
        let images = objects
            .filter_map(|(name, bytes)| {
                Some((name, nfkit_object::Image::from_elf(bytes, name).ok()?))
            })
            .chain([("chain script", chain_image())]);
        for (name, image) in images {
            let Ok(mut cx) = super::super::decode(&image) else {
                continue;
            };
            let Ok(fstarts) = super::super::function_starts(&cx) else {
                continue;
            };
            cx.set_functions(&fstarts);
            for f in 0..cx.funcs.len() {
                if !forward_only(&cx, f) {
                    continue;
                }
                for r1 in [None, Some(CtxKind::Xdp), Some(CtxKind::Skb)] {
                    let mut init = unknown_regs();
                    if let Some(k) = r1 {
                        init[1] = Val::Ctx(k);
                    }
                    let a = format!("{:?}", analyse_worklist(&cx, f, init));
                    let b = format!("{:?}", analyse_forward(&cx, f, init));
                    assert_eq!(a, b, "{name}: function {}", cx.funcs[f].name);
                    compared += 1;
                }
            }
        }
        assert!(compared >= 60, "only {compared} analyses compared");
    }
}
