//! Dynamic mode (docs/abi.md §5; docs/language.md, implementation
//! notes): each chain split at its NF calls into segments that
//! tail-call the NFs' dynamic entries and resume through the per-CPU
//! call frame.

use super::calls::Arg;
use super::emit::{ldx, local_off, mov_imm, mov_reg, stx};
use super::{Gen, GenError, GenFunc, Generated, Label, ObjMap, Ref};
use crate::check::BPF_LOOP_ABOVE;
use crate::ir::walk::{walk_block, walk_expr, walk_stmt, Visit};
use crate::ir::{Expr, ExprKind, Program, Stmt, StmtKind};
use nfkit_isa::{Cond, Insn, Operand, Reg, Size};
use nfkit_nf::Hook;
use std::collections::BTreeMap;

/// Helper id of `bpf_tail_call`.
const TAIL_CALL: i32 = 12;

/// The classifier object's end of a dynamic chain (docs/abi.md §5),
/// which finds the chain's id in the call frame (shared entries).
pub const DYN_FINISH: &str = "nfkit_dyn_finish";
/// The same, given the chain's id (per-call-site segments: a constant).
pub const DYN_END: &str = "nfkit_dyn_end";

/// `struct nf_frame` (docs/abi.md §5): offsets and the number of stack
/// slots a chain can keep across an NF call.
const FRAME_RESULT: i16 = 32;
const FRAME_CONT: i16 = 40;
const FRAME_CALLS: i16 = 44;
const FRAME_CHAIN: i16 = 48;
const FRAME_LOCALS: i16 = 56;
pub const FRAME_SLOTS: i32 = 56;

/// Tail calls the kernel allows per packet, and the NF calls that fit:
/// one tail call into the chain, then one per NF call (into the next
/// segment, which runs the NF first).
pub const TAIL_CALL_LIMIT: u64 = 33;
pub const DYN_MAX_NF_CALLS: u64 = TAIL_CALL_LIMIT - 1;
/// With shared entries ([`DynSlots::shared_entries`]) two tail calls per
/// NF call (into the NF's dynamic entry and back to the next segment).
pub const DYN_MAX_NF_CALLS_SHARED: u64 = (TAIL_CALL_LIMIT - 1) / 2;

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
    /// Every call site tail-calls the NF's shared dynamic entry
    /// `dyn_<name>`, which returns through a variable-key tail call, and
    /// calls are not inlined: the build before each call site had its own
    /// entry, kept to measure against (`--bench ddos`, `--bench calls`).
    pub shared_entries: bool,
    /// After inlining, the passes sound per program (lookups once, dead
    /// registers and stack stores: `nfkit_object::Passes::PerProgram`).
    /// On by default since one tail call per NF call (segments run the
    /// NFs themselves): over seven runs of `--bench ddos` on the DDoS
    /// example they took 1-2 ns off both paths (docs/cost.md); with the
    /// per-call-site entries before, they cost 2-6 ns on the legitimate
    /// path.
    pub passes: bool,
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
        let limit = if slots.shared_entries {
            DYN_MAX_NF_CALLS_SHARED
        } else {
            DYN_MAX_NF_CALLS
        };
        if calls > limit {
            return Err(GenError::TailCalls {
                chain: chain.name.clone(),
                calls,
                limit,
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
            shared: slots.shared_entries,
            chain_id: id as u32,
            entry: 0,
            body: 0,
            error: None,
        });
        g.chain_function(ci)?;
        let cbs = std::mem::take(&mut g.callbacks);
        let (segs, next) = g.segments(id as u32)?;
        next_seg = next.max(next_seg);
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
pub(super) fn nf_calls_stmt(prog: &Program, s: &Stmt, min_trips: u32) -> u64 {
    nf_calls_block(prog, std::slice::from_ref(s), min_trips)
}

/// Counts NF calls on the worst path: the larger branch of an `if`, a
/// loop's body times its trips; a loop run by `bpf_loop` calls its NFs
/// directly (no tail calls) and counts 0.
pub(super) struct NfCalls<'p> {
    prog: &'p Program,
    min_trips: u32,
    n: u64,
}

/// Dynamic mode: the NF call sites that end segments.
pub(super) struct DynGen {
    nf_slots: BTreeMap<String, u32>,
    /// Slot of the next segment (the continuation of the next call site).
    next_seg: u32,
    seg_end: u32,
    sites: Vec<Site>,
    /// [`DynSlots::shared_entries`].
    shared: bool,
    /// The chain's id (the slot of its first segment).
    chain_id: u32,
    /// Target of the first instruction (a `ja`): where a segment starts.
    entry: Label,
    /// The chain's own start (segment 0).
    body: Label,
    error: Option<GenError>,
}

/// One NF call site of a dynamic chain.
#[derive(Clone)]
pub(super) struct Site {
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
    /// The NF called, its arguments, the script line of the call.
    nf: usize,
    args: Vec<Arg>,
    line: u32,
    /// Whether the call passes anything through the call frame.
    frame: bool,
}

impl Gen<'_> {
    /// The first instruction of every segment: a jump to where it starts
    /// (re-pointed per segment; the chain's start for segment 0).
    pub(super) fn dyn_entry(&mut self) {
        let entry = self.label();
        let body = self.label();
        self.jmp(entry);
        self.bind(body);
        let Some(d) = self.dynamic.as_mut() else {
            return;
        };
        d.entry = entry;
        d.body = body;
        if d.shared {
            // The NFs' shared entries count their calls in the frame and
            // end the chain with the frame's chain id: segment 0 sets both.
            let id = d.chain_id as i32;
            self.emit(mov_reg(Reg::R9, Reg::R1));
            self.percpu_slot(ObjMap::Frame);
            self.emit(Insn::St {
                size: Size::W,
                dst: Reg::R0,
                off: FRAME_CHAIN,
                imm: id,
            });
            self.emit(Insn::St {
                size: Size::W,
                dst: Reg::R0,
                off: FRAME_CALLS,
                imm: 0,
            });
            self.emit(mov_reg(Reg::R1, Reg::R9));
        }
    }

    /// r0 (a verdict, a fault or the chain's result) to
    /// `nfkit_dyn_finish`, which the program returns; then the fault
    /// path (r0 = -1, back to the call above).
    fn finish_or_fault(&mut self) {
        self.emit(mov_reg(Reg::R2, Reg::R0));
        self.emit(mov_reg(Reg::R1, Reg::R9));
        let (shared, id) = self
            .dynamic
            .as_ref()
            .map_or((true, 0), |d| (d.shared, d.chain_id));
        let (end, r3) = if shared {
            (DYN_FINISH, 0)
        } else {
            (DYN_END, id as i32)
        };
        self.emit(mov_imm(Reg::R3, r3));
        for r in [Reg::R4, Reg::R5] {
            self.emit(mov_imm(r, 0));
        }
        self.call_local(end.to_string());
        self.emit(Insn::Exit);
        self.bind(self.fault);
        self.emit(mov_imm(Reg::R0, -1));
        let exit = self.exit;
        self.jmp(exit);
    }

    /// The chain's end (r0 = its result): the classifier object counts
    /// the result and turns it into the hook's return code; then the
    /// fault path and the prologues of the later segments.
    pub(super) fn dyn_end(&mut self) {
        self.finish_or_fault();
        self.resume_prologues();
    }

    /// Dynamic mode: the chain (chain id `id`) as its segments, segment 0
    /// first (at slot `id`), then one per NF call site (segment k+1 runs
    /// call site k's NF, then the chain on); and the first segment slot
    /// left free.
    pub(super) fn segments(mut self, id: u32) -> Result<(Vec<GenFunc>, u32), GenError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.check_frame()?;
        let Some(d) = self.dynamic.take() else {
            return Ok((vec![self.finish()?], 0));
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
        Ok((out, d.next_seg))
    }

    /// Dynamic mode: the start of each segment after the first: ctx into
    /// r9; with per-site code the call site's NF first (its arguments
    /// as immediates or from the frame, the NF inlined when linking, its
    /// value in r0); with shared entries the NF's value from the frame's
    /// `result`; then the stack slots back from the frame and on after
    /// the call site (where a verdict or fault in r0 ends the chain).
    fn resume_prologues(&mut self) {
        let (sites, shared) = self
            .dynamic
            .as_ref()
            .map(|d| (d.sites.clone(), d.shared))
            .unwrap_or_default();
        let used = self.used;
        for site in sites {
            self.bind(site.start);
            self.emit(mov_reg(Reg::R9, Reg::R1));
            self.used = site.saved;
            if site.frame {
                self.percpu_slot(ObjMap::Frame);
            }
            if !shared {
                self.lines.push((self.insns.len(), site.line, 0));
                if site.frame {
                    self.emit(mov_reg(Reg::R6, Reg::R0));
                }
                let regs = [Reg::R2, Reg::R3, Reg::R4, Reg::R5];
                for (i, r) in regs.into_iter().enumerate() {
                    match site.args.get(i) {
                        Some(&Arg::Const(v)) => self.konst(r, v),
                        Some(&Arg::Slot(_)) => self.emit(ldx(Size::DW, r, Reg::R6, 8 * i as i16)),
                        None => self.emit(mov_imm(r, 0)),
                    }
                }
                self.emit(mov_reg(Reg::R1, Reg::R9));
                self.call_local(self.prog.nfs[site.nf].symbol.clone());
            }
            let frame = if shared { Reg::R0 } else { Reg::R6 };
            for j in 0..(site.saved / 8).min(FRAME_SLOTS) {
                self.emit(ldx(Size::DW, Reg::R1, frame, FRAME_LOCALS + 8 * j as i16));
                self.emit(stx(Size::DW, Reg::FP, local_off(0, j as usize), Reg::R1));
            }
            if shared {
                self.emit(ldx(Size::DW, Reg::R0, Reg::R0, FRAME_RESULT));
            }
            // Loop counters came back as unknown values: bound them again.
            let fault = self.fault;
            for (n, off) in site.bounds {
                self.emit(ldx(Size::DW, Reg::R1, Reg::FP, off));
                self.jcond(Cond::Gt, Reg::R1, Operand::Imm(n as i32), fault);
            }
            self.jmp(site.resume);
        }
        self.used = used;
    }

    /// Dynamic mode: the NF call ends this segment. The arguments that
    /// are not constants (in stack slots) and every stack slot in use go
    /// to the call frame, and the next segment (which runs the NF with
    /// the constant arguments as immediates, then resumes right after
    /// the call, r0 = the NF's value) is tail-called with a constant key:
    /// one tail call per NF call, which the kernel makes a direct jump.
    pub(super) fn tail_call_nf(&mut self, nf: usize, args: &[Arg]) {
        let saved = self.used;
        let line = self.lines.last().map_or(0, |l| l.1);
        let resume = self.label();
        let start = self.label();
        let name = self.name.clone();
        let Some(d) = self.dynamic.as_mut() else {
            return;
        };
        // One slot per call site: the next segment, which runs the NF
        // first (with shared entries the call site tail-calls the NF's
        // entry, which tail-calls the next segment through `cont`).
        let shared = d.shared;
        let slot = d.next_seg;
        let entry = if shared {
            let sym = &self.prog.nfs[nf].symbol;
            d.nf_slots.get(sym).copied().unwrap_or(0)
        } else {
            slot
        };
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
        d.next_seg = d.next_seg.saturating_add(1);
        let bounds = self
            .frames
            .iter()
            .flat_map(|f| f.loops.iter().filter_map(|l| l.bound))
            .collect();
        let Some(d) = self.dynamic.as_mut() else {
            return;
        };
        // Per-site segments need the frame only for what they pass
        // through it: arguments that are not constants and stack slots.
        let frame = shared || saved > 0 || args.iter().any(|a| matches!(a, Arg::Slot(_)));
        d.sites.push(Site {
            resume,
            start,
            saved,
            bounds,
            slot,
            nf,
            args: args.to_vec(),
            line,
            frame,
        });
        if frame {
            self.percpu_slot(ObjMap::Frame);
        }
        for i in 0..4usize {
            match args.get(i) {
                Some(&Arg::Slot(o)) => {
                    self.emit(ldx(Size::DW, Reg::R1, Reg::FP, o));
                    self.emit(stx(Size::DW, Reg::R0, 8 * i as i16, Reg::R1));
                }
                // The next segment loads constants itself; the shared
                // entry reads every argument from the frame.
                Some(&Arg::Const(v)) if shared => {
                    self.konst(Reg::R1, v);
                    self.emit(stx(Size::DW, Reg::R0, 8 * i as i16, Reg::R1));
                }
                None if shared => self.emit(Insn::St {
                    size: Size::DW,
                    dst: Reg::R0,
                    off: 8 * i as i16,
                    imm: 0,
                }),
                _ => {}
            }
        }
        for j in 0..(saved / 8).min(FRAME_SLOTS) {
            self.emit(ldx(Size::DW, Reg::R1, Reg::FP, local_off(0, j as usize)));
            self.emit(stx(Size::DW, Reg::R0, FRAME_LOCALS + 8 * j as i16, Reg::R1));
        }
        if shared {
            // The shared entry tail-calls the continuation it reads here.
            self.emit(Insn::St {
                size: Size::W,
                dst: Reg::R0,
                off: FRAME_CONT,
                imm: slot as i32,
            });
        }
        self.emit(mov_reg(Reg::R1, Reg::R9));
        self.load_map(Reg::R2, ObjMap::Progs);
        self.emit(mov_imm(Reg::R3, entry as i32));
        self.call_helper(TAIL_CALL);
        // Only a failed tail call comes back: a fault.
        let fault = self.fault;
        self.jmp(fault);
        self.bind(resume);
    }
}

impl Default for DynSlots {
    fn default() -> DynSlots {
        DynSlots {
            nfs: BTreeMap::new(),
            nf_first: 64,
            nf_end: 256,
            seg_first: 256,
            seg_end: 640,
            shared_entries: false,
            passes: true,
        }
    }
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
