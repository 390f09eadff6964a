//! Load-time checks and translation: everything that can be known about a
//! program before it runs. Rejects what can never run — bad jump and call
//! targets, reads of registers nothing wrote on any path, writes to r10,
//! unknown or disallowed helpers, ends without `exit`, oversized programs,
//! bad map references, call chains deeper than allowed — each error
//! naming the instruction (slot and `function+offset`) and the rule.

#![forbid(unsafe_code)]

use crate::config::{Profile, VmConfig, FRAME_SIZE, MAX_INSNS};
use crate::error::{LoadError, Rule};
use crate::helpers::table;
use crate::mem;
use crate::prog::{translate, Func, Program};
use nfkit_isa::{AluOp, AtomicOp, CallKind, Insn, LddwKind, Operand, Reg};
use nfkit_object::{Image, MapKind, MapType, ProgType};

/// An entry program of the loaded VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryInfo {
    pub name: String,
    pub prog_type: ProgType,
    /// Index into [`Program::funcs`].
    pub func: usize,
    /// First op.
    pub start_op: usize,
}

/// The result of a successful check.
#[derive(Clone, Debug)]
pub struct Checked {
    pub program: Program,
    pub entries: Vec<EntryInfo>,
}

struct Ctx<'a> {
    image: &'a Image,
    starts: Vec<usize>,
    /// Op index of each slot (`None` for second slots of `lddw`).
    slot_op: Vec<Option<usize>>,
    funcs: Vec<Func>,
    op_func: Vec<u32>,
}

impl Ctx<'_> {
    fn err(&self, op: usize, rule: Rule, detail: impl Into<String>) -> LoadError {
        let slot = self.starts.get(op).copied().unwrap_or(0);
        let location = match self
            .op_func
            .get(op)
            .and_then(|&f| self.funcs.get(f as usize))
        {
            Some(f) => format!("{}+{}", f.name, slot - f.start_slot),
            None => self.image.describe_slot(slot),
        };
        LoadError::Insn {
            slot,
            location,
            rule,
            detail: detail.into(),
        }
    }

    /// Target op of a relative slot offset from op `i`, if it is an
    /// instruction boundary of the program.
    fn target(&self, i: usize, rel: i64) -> Result<usize, String> {
        let t = self.starts[i] as i64 + 1 + rel;
        if t < 0 || t as usize >= self.slot_op.len() {
            return Err(format!("target slot {t} is outside the program"));
        }
        self.slot_op[t as usize]
            .ok_or_else(|| format!("target slot {t} is the second slot of an lddw"))
    }
}

fn bit(r: Reg) -> u16 {
    1 << r.num()
}

/// Registers an instruction reads and writes (bitmasks), for the
/// uninitialised-register analysis. Calls are handled by the caller.
fn reads_writes(insn: &Insn) -> (u16, u16) {
    let opnd = |o: &Operand| match o {
        Operand::Reg(r) => bit(*r),
        Operand::Imm(_) => 0,
    };
    match insn {
        Insn::Alu { op, dst, src, .. } => match op {
            AluOp::Mov | AluOp::MovSx(_) => (opnd(src), bit(*dst)),
            AluOp::Neg => (bit(*dst), bit(*dst)),
            _ => (bit(*dst) | opnd(src), bit(*dst)),
        },
        Insn::Endian { dst, .. } => (bit(*dst), bit(*dst)),
        Insn::AddrSpaceCast { dst, src, .. } => (bit(*src), bit(*dst)),
        Insn::Ldx { dst, src, .. } => (bit(*src), bit(*dst)),
        Insn::St { dst, .. } => (bit(*dst), 0),
        Insn::Stx { dst, src, .. } => (bit(*dst) | bit(*src), 0),
        Insn::Atomic { op, dst, src, .. } => match op {
            AtomicOp::CmpXchg => (bit(*dst) | bit(*src) | 1, 1),
            AtomicOp::Xchg
            | AtomicOp::Add { fetch: true }
            | AtomicOp::Or { fetch: true }
            | AtomicOp::And { fetch: true }
            | AtomicOp::Xor { fetch: true } => (bit(*dst) | bit(*src), bit(*src)),
            _ => (bit(*dst) | bit(*src), 0),
        },
        Insn::Lddw { dst, .. } => (0, bit(*dst)),
        Insn::LdAbs { .. } => (0, 1),
        Insn::LdInd { src, .. } => (bit(*src), 1),
        Insn::Jmp { dst, src, .. } => (bit(*dst) | opnd(src), 0),
        Insn::Callx { reg } => (bit(*reg), 1),
        Insn::Exit => (1, 0),
        Insn::Ja { .. } | Insn::Gotol { .. } | Insn::MayGoto { .. } | Insn::Call { .. } => (0, 0),
    }
}

const ARG_REGS: u16 = 0b11_1110;
const FP: u16 = 1 << 10;

/// Checks `image` and translates it for the interpreter.
pub fn check(image: &Image, config: &VmConfig) -> Result<Checked, LoadError> {
    let insns = &image.insns;
    if insns.len() > MAX_INSNS {
        return Err(LoadError::TooLarge {
            count: insns.len(),
            limit: MAX_INSNS,
        });
    }
    if insns.is_empty() {
        return Err(LoadError::Image("the program has no instructions".into()));
    }
    let starts = nfkit_isa::slot_offsets(insns);
    let total = nfkit_isa::slot_count(insns);
    let mut slot_op = vec![None; total];
    for (i, &s) in starts.iter().enumerate() {
        slot_op[s] = Some(i);
    }
    let mut cx = Ctx {
        image,
        starts,
        slot_op,
        funcs: Vec::new(),
        op_func: Vec::new(),
    };

    // Function boundaries: the Image's functions plus every call target.
    let mut fstarts: Vec<usize> = vec![0];
    for f in &image.functions {
        if f.start >= total || cx.slot_op[f.start].is_none() {
            return Err(LoadError::Image(format!(
                "function {} starts at slot {}, which is no instruction",
                f.name, f.start
            )));
        }
        fstarts.push(f.start);
    }
    let mut call_targets = Vec::new();
    for (i, insn) in insns.iter().enumerate() {
        if let Some(rel) = insn.call_offset() {
            match cx.target(i, rel) {
                Ok(t) => call_targets.push(cx.starts[t]),
                Err(why) => {
                    // Function boundaries are not known yet: name the slot.
                    let slot = cx.starts[i];
                    return Err(LoadError::Insn {
                        slot,
                        location: image.describe_slot(slot),
                        rule: Rule::CallTarget,
                        detail: why,
                    });
                }
            }
        }
    }
    fstarts.extend(&call_targets);
    fstarts.sort_unstable();
    fstarts.dedup();
    for (k, &s) in fstarts.iter().enumerate() {
        let end_slot = fstarts.get(k + 1).copied().unwrap_or(total);
        let name = match image.functions.iter().find(|f| f.start == s) {
            Some(f) => f.name.clone(),
            None => match image.function_at(s) {
                Some(p) => format!("{}@{}", p.name, s - p.start),
                None => format!("sub_{s}"),
            },
        };
        let start_op = cx.slot_op[s].unwrap_or(0);
        let end_op = if end_slot == total {
            insns.len()
        } else {
            cx.slot_op[end_slot].unwrap_or(insns.len())
        };
        cx.funcs.push(Func {
            name,
            start_slot: s,
            end_slot,
            start_op,
            end_op,
        });
    }
    cx.op_func = vec![0; insns.len()];
    for (fi, f) in cx.funcs.iter().enumerate() {
        for o in f.start_op..f.end_op {
            cx.op_func[o] = fi as u32;
        }
    }

    // Entries.
    let mut entries = Vec::new();
    if image.entries.is_empty() {
        entries.push(EntryInfo {
            name: cx.funcs[0].name.clone(),
            prog_type: ProgType::Unspec,
            func: 0,
            start_op: 0,
        });
    }
    for e in &image.entries {
        let f = image.functions.get(e.function).ok_or_else(|| {
            LoadError::Image(format!(
                "entry {} names function {}, which does not exist",
                e.name, e.function
            ))
        })?;
        let func = fstarts.binary_search(&f.start).unwrap_or(0);
        entries.push(EntryInfo {
            name: e.name.clone(),
            prog_type: e.prog_type,
            func,
            start_op: cx.funcs[func].start_op,
        });
    }

    // Per-instruction rules, successors, and the call graph.
    let nfuncs = cx.funcs.len();
    let mut callees: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nfuncs]; // (callee, call op)
                                                                          // Functions whose address is taken (callbacks: their r0 is read).
    let mut is_callback = vec![false; nfuncs];
    for (i, insn) in insns.iter().enumerate() {
        let f = cx.op_func[i] as usize;
        let func = &cx.funcs[f];
        if let Some(rel) = insn.jump_offset() {
            let t = cx
                .target(i, rel)
                .map_err(|why| cx.err(i, Rule::JumpTarget, why))?;
            if t < func.start_op || t >= func.end_op {
                return Err(cx.err(
                    i,
                    Rule::JumpTarget,
                    format!(
                        "target slot {} is outside function {}",
                        cx.starts[t], func.name
                    ),
                ));
            }
        }
        if let Some(rel) = insn.call_offset() {
            let t = cx
                .target(i, rel)
                .map_err(|why| cx.err(i, Rule::CallTarget, why))?;
            callees[f].push((cx.op_func[t] as usize, i));
            if matches!(insn, Insn::Lddw { .. }) {
                is_callback[cx.op_func[t] as usize] = true;
            }
        }
        let (_, writes) = reads_writes(insn);
        if writes & FP != 0 {
            return Err(cx.err(i, Rule::FramePointerWrite, "r10 is read-only"));
        }
        match *insn {
            Insn::AddrSpaceCast { .. } => {
                return Err(cx.err(
                    i,
                    Rule::Unsupported,
                    "addr_space_cast (arena) is not supported",
                ))
            }
            Insn::Call {
                kind: CallKind::Kfunc,
                imm,
            } => {
                return Err(cx.err(
                    i,
                    Rule::Unsupported,
                    format!("kfunc call (BTF id {imm}) is not supported"),
                ))
            }
            Insn::Call {
                kind: CallKind::Helper,
                imm,
            } if table::lookup(config.profile, imm as i64).is_none() => {
                return Err(cx.err(
                    i,
                    Rule::UnknownHelper,
                    format!(
                        "helper {imm}{} is not available in the {:?} profile",
                        nfkit_isa::helpers::helper_name(imm)
                            .map(|n| format!(" ({n})"))
                            .unwrap_or_default(),
                        config.profile
                    ),
                ));
            }
            Insn::Lddw {
                kind,
                imm,
                next_imm,
                ..
            } => match kind {
                LddwKind::Imm64 | LddwKind::Func => {}
                LddwKind::MapIdx | LddwKind::MapIdxValue => {
                    let m = usize::try_from(imm)
                        .ok()
                        .and_then(|m| image.maps.get(m))
                        .ok_or_else(|| {
                            cx.err(
                                i,
                                Rule::MapIndex,
                                format!("map index {imm} out of range ({} maps)", image.maps.len()),
                            )
                        })?;
                    if kind == LddwKind::MapIdxValue {
                        let arrayish = matches!(m.map_type, MapType::Array)
                            || matches!(m.kind, MapKind::Global { .. });
                        if !arrayish {
                            return Err(cx.err(
                                i,
                                Rule::MapIndex,
                                format!(
                                    "direct value access to map {} of type {}",
                                    m.name,
                                    m.map_type.name()
                                ),
                            ));
                        }
                        if next_imm < 0 || next_imm as u32 >= m.value_size.max(1) {
                            return Err(cx.err(
                                i,
                                Rule::MapIndex,
                                format!(
                                    "offset {next_imm} outside the {}-byte value of map {}",
                                    m.value_size, m.name
                                ),
                            ));
                        }
                    }
                }
                LddwKind::MapFd | LddwKind::MapValue | LddwKind::BtfId => {
                    return Err(cx.err(
                        i,
                        Rule::Lddw,
                        format!(
                            "lddw of kind {kind:?} must be bound to the Image's maps by the linker"
                        ),
                    ))
                }
            },
            Insn::Alu {
                op: AluOp::Div | AluOp::SDiv | AluOp::Mod | AluOp::SMod,
                src: Operand::Imm(0),
                ..
            } if config.kernel_compat => {
                return Err(cx.err(i, Rule::DivByZero, "division by zero immediate"))
            }
            _ => {}
        }
    }

    // Which functions each entry reaches; helper and LD_ABS availability
    // per program type.
    let reach = |from: usize| {
        let mut seen = vec![false; nfuncs];
        let mut stack = vec![from];
        seen[from] = true;
        while let Some(f) = stack.pop() {
            for &(c, _) in &callees[f] {
                if !seen[c] {
                    seen[c] = true;
                    stack.push(c);
                }
            }
        }
        seen
    };
    if config.profile == Profile::Kernel {
        for e in &entries {
            let seen = reach(e.func);
            for (i, insn) in insns.iter().enumerate() {
                if !seen[cx.op_func[i] as usize] {
                    continue;
                }
                match *insn {
                    Insn::Call {
                        kind: CallKind::Helper,
                        imm,
                    } => {
                        if let Some(h) = table::lookup(config.profile, imm as i64) {
                            if e.prog_type != ProgType::Unspec && !h.avail.allows(e.prog_type) {
                                return Err(cx.err(
                                    i,
                                    Rule::HelperNotAllowed,
                                    format!(
                                        "bpf_{} cannot be called from {} program {}",
                                        h.name,
                                        e.prog_type.name(),
                                        e.name
                                    ),
                                ));
                            }
                        }
                    }
                    Insn::LdAbs { .. } | Insn::LdInd { .. } => {
                        let skb = matches!(
                            e.prog_type,
                            ProgType::SocketFilter | ProgType::SchedCls | ProgType::SchedAct
                        );
                        if !skb && e.prog_type != ProgType::Unspec {
                            return Err(cx.err(
                                i,
                                Rule::LdAbs,
                                format!(
                                    "{} program {} has no socket buffer",
                                    e.prog_type.name(),
                                    e.name
                                ),
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    // Control flow inside each function: falling off the end, and
    // registers read where no path wrote them.
    let is_entry: Vec<bool> = (0..nfuncs)
        .map(|f| entries.iter().any(|e| e.func == f))
        .collect();
    let is_callee: Vec<bool> = (0..nfuncs)
        .map(|f| callees.iter().any(|cs| cs.iter().any(|&(c, _)| c == f)))
        .collect();
    for (fi, func) in cx.funcs.iter().enumerate() {
        // A subprogram may return nothing (a `void` function): the
        // kernel checks r0 only at the exits of entries and callbacks.
        let exit_reads_r0 = is_entry[fi] || is_callback[fi] || !is_callee[fi];
        let mut init: u16 = FP;
        if is_entry[fi] || !is_callee[fi] {
            init |= 1 << 1;
            if config.profile == Profile::Conformance {
                init |= 1 << 2;
            }
        }
        // A function nothing here calls (a global function other
        // objects call, like the classifier's `nfkit_dyn_finish`) takes
        // its arguments from its callers there.
        if is_callee[fi] || !is_entry[fi] {
            init |= ARG_REGS;
        }
        let n = func.end_op - func.start_op;
        let mut state: Vec<Option<u16>> = vec![None; n];
        let mut needs: Vec<u16> = vec![0; n];
        state[0] = Some(init);
        let mut work = vec![func.start_op];
        while let Some(i) = work.pop() {
            let Some(s) = state[i - func.start_op] else {
                continue;
            };
            let insn = &insns[i];
            let (mut reads, mut writes) = reads_writes(insn);
            let mut clobber = 0u16;
            match *insn {
                Insn::Call {
                    kind: CallKind::Helper,
                    imm,
                } => {
                    let args = table::lookup(config.profile, imm as i64).map_or(0, |h| h.args);
                    reads = ((1u16 << (args + 1)) - 2) & ARG_REGS;
                    writes = 1;
                    clobber = ARG_REGS;
                }
                Insn::Call { .. }
                | Insn::Callx { .. }
                | Insn::LdAbs { .. }
                | Insn::LdInd { .. } => {
                    clobber = ARG_REGS;
                    writes |= 1;
                }
                Insn::Exit if !exit_reads_r0 => reads = 0,
                _ => {}
            }
            needs[i - func.start_op] = reads;
            let out = (s & !clobber) | writes;
            let mut succ: [Option<usize>; 2] = [None, None];
            if !matches!(insn, Insn::Exit | Insn::Ja { .. } | Insn::Gotol { .. }) {
                if i + 1 >= func.end_op {
                    return Err(cx.err(
                        i,
                        Rule::FallOff,
                        format!("no exit or jump ends function {}", func.name),
                    ));
                }
                succ[0] = Some(i + 1);
            }
            if let Some(rel) = insn.jump_offset() {
                succ[1] = cx.target(i, rel).ok();
            }
            for t in succ.into_iter().flatten() {
                let k = t - func.start_op;
                let new = state[k].map_or(out, |old| old | out);
                if state[k] != Some(new) {
                    state[k] = Some(new);
                    work.push(t);
                }
            }
        }
        // With the fixpoint reached: a register no path writes.
        for (k, (st, need)) in state.iter().zip(&needs).enumerate() {
            let missing = st.map_or(0, |s| need & !s);
            if missing != 0 {
                let r = missing.trailing_zeros();
                return Err(cx.err(
                    func.start_op + k,
                    Rule::UninitRead,
                    format!("r{r} is read but no path to here writes it"),
                ));
            }
        }
    }

    // Call depth, recursion, and (kernel mode) the stack budget.
    let stack_use: Vec<usize> = cx
        .funcs
        .iter()
        .map(|f| stack_depth(&insns[f.start_op..f.end_op]))
        .collect();
    // depth[f] = (frames, stack bytes) of the deepest path from f.
    let mut memo: Vec<Option<(usize, usize)>> = vec![None; nfuncs];
    let mut on_path = vec![false; nfuncs];
    for e in &entries {
        let (frames, bytes) = deepest(
            e.func,
            &callees,
            &stack_use,
            &mut memo,
            &mut on_path,
            config,
            &cx,
        )?;
        if frames > config.max_frames {
            let call = callees[e.func].first().map_or(e.start_op, |&(_, op)| op);
            return Err(cx.err(
                call,
                Rule::CallDepth,
                format!(
                    "entry {} reaches {frames} call frames, more than {}",
                    e.name, config.max_frames
                ),
            ));
        }
        if config.kernel_compat && bytes > FRAME_SIZE {
            return Err(cx.err(
                e.start_op,
                Rule::StackSize,
                format!(
                    "entry {} uses {bytes} bytes of stack on its deepest call path, more than {FRAME_SIZE}",
                    e.name
                ),
            ));
        }
    }

    // Translate.
    let mut ops = Vec::with_capacity(insns.len());
    for (i, insn) in insns.iter().enumerate() {
        let target = |rel: i64| cx.target(i, rel).unwrap_or(0);
        let faddr = |rel: i64| mem::addr(mem::FUNCS, cx.target(i, rel).unwrap_or(0) as u64);
        ops.push(translate(insn, target, faddr));
    }
    Ok(Checked {
        program: Program {
            ops,
            op_slot: cx.starts.clone(),
            insns: insns.clone(),
            funcs: cx.funcs,
            op_func: cx.op_func,
        },
        entries,
    })
}

/// Frames and stack bytes of the deepest call path starting at `f`.
fn deepest(
    f: usize,
    callees: &[Vec<(usize, usize)>],
    stack_use: &[usize],
    memo: &mut Vec<Option<(usize, usize)>>,
    on_path: &mut Vec<bool>,
    config: &VmConfig,
    cx: &Ctx,
) -> Result<(usize, usize), LoadError> {
    if let Some(d) = memo[f] {
        return Ok(d);
    }
    on_path[f] = true;
    let mut best = (1, stack_use[f]);
    for &(c, op) in &callees[f] {
        if on_path[c] {
            if config.kernel_compat {
                on_path[f] = false;
                return Err(cx.err(
                    op,
                    Rule::Recursion,
                    format!("function {} is called recursively", cx.funcs[c].name),
                ));
            }
            // Recursion is bounded at run time by the frame limit.
            continue;
        }
        let (fr, by) = deepest(c, callees, stack_use, memo, on_path, config, cx)?;
        if 1 + fr > config.max_frames {
            on_path[f] = false;
            return Err(cx.err(
                op,
                Rule::CallDepth,
                format!(
                    "this call leads to {} call frames, more than {}",
                    1 + fr,
                    config.max_frames
                ),
            ));
        }
        best.0 = best.0.max(1 + fr);
        best.1 = best.1.max(stack_use[f] + by);
    }
    on_path[f] = false;
    memo[f] = Some(best);
    Ok(best)
}

/// Bytes of stack a function uses, as the kernel rounds it (a multiple of
/// 32, at least 32 when any is used): the deepest `r10`-relative access,
/// following registers set to `r10 + constant` in straight-line code.
fn stack_depth(insns: &[Insn]) -> usize {
    let mut fp_off: [Option<i64>; 11] = [None; 11];
    fp_off[10] = Some(0);
    let mut deepest: i64 = 0;
    let mut note = |base: Option<i64>, off: i16| {
        if let Some(b) = base {
            deepest = deepest.max(-(b + off as i64));
        }
    };
    for insn in insns {
        match *insn {
            Insn::Ldx { src, off, dst, .. } => {
                note(fp_off[src.num() as usize], off);
                fp_off[dst.num() as usize] = None;
            }
            Insn::St { dst, off, .. }
            | Insn::Stx { dst, off, .. }
            | Insn::Atomic { dst, off, .. } => note(fp_off[dst.num() as usize], off),
            Insn::Alu {
                op: AluOp::Mov,
                dst,
                src: Operand::Reg(s),
                width: nfkit_isa::Width::W64,
            } => fp_off[dst.num() as usize] = fp_off[s.num() as usize],
            Insn::Alu {
                op: AluOp::Add,
                dst,
                src: Operand::Imm(k),
                width: nfkit_isa::Width::W64,
            } => {
                let d = dst.num() as usize;
                fp_off[d] = fp_off[d].map(|b| b + k as i64);
                note(fp_off[d], 0);
            }
            Insn::Call { .. } | Insn::Callx { .. } => {
                for r in fp_off.iter_mut().take(6) {
                    *r = None;
                }
            }
            _ => {
                let (_, w) = reads_writes(insn);
                for (r, slot) in fp_off.iter_mut().enumerate().take(10) {
                    if w & (1 << r) != 0 {
                        *slot = None;
                    }
                }
            }
        }
    }
    let d = deepest.clamp(0, 1 << 20) as usize;
    if d == 0 {
        0
    } else {
        d.div_ceil(32) * 32
    }
}
