//! Load-time checks and translation: everything that can be known about a
//! program before it runs. Rejects what can never run — bad jump and call
//! targets, reads of registers nothing wrote on any path, writes to r10,
//! unknown or disallowed helpers, ends without `exit`, oversized programs,
//! bad map references, call chains deeper than allowed — each error
//! naming the instruction (slot and `function+offset`) and the rule.
//!
//! [`check`] runs the phases in order, the first error ending it:
//!
//! 1. structure: size, slots (`decode`), functions (the Image's and
//!    every call target), entries;
//! 2. per-instruction rules (`insn_rules`): targets, r10, supported
//!    kinds, helpers, map references; they also give the call graph;
//! 3. per-program-type rules (kernel profile): helpers and `LD_ABS`
//!    allowed for each entry's type;
//! 4. control flow per function (`function_flow`): falling off the
//!    end, registers read before any path writes them;
//! 5. (kernel profile with the kernel's limits) stack and map-value
//!    accesses out of bounds on every value (`bounds`), refusing the
//!    entries that reach them;
//! 6. call graph (`call_depth`): frames, recursion, stack budget;
//!
//! and then translates the instructions (`translate_all`).

#![forbid(unsafe_code)]

mod absval;
mod bounds;
mod regs;

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
    /// Index among the entries.
    pub index: usize,
    pub prog_type: ProgType,
    /// Index into [`Program::funcs`].
    pub func: usize,
    /// First op.
    pub start_op: usize,
    /// Why this entry cannot run (a helper it reaches is unknown or not
    /// allowed for its type), when other entries of the Image can: the
    /// load succeeds, running this entry fails with this error.
    pub refused: Option<LoadError>,
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
    // Structure: instructions, slots, functions, entries.
    let mut cx = decode(image)?;
    let fstarts = function_starts(&cx)?;
    cx.set_functions(&fstarts);
    let mut entries = entries(&cx, &fstarts)?;
    // Per-instruction rules, and the call graph they find.
    let graph = insn_rules(&cx, config)?;
    // Helpers (and, in the kernel profile, what the program type allows)
    // are checked per entry, over what the entry reaches: an entry that
    // breaks them is refused, the load fails only if every entry is.
    for e in &mut entries {
        e.refused = entry_rules(&cx, e, &graph, config).err();
    }
    if let Some(first) = entries.iter().find_map(|e| e.refused.clone()) {
        if entries.iter().all(|e| e.refused.is_some()) {
            return Err(first);
        }
    }
    // Control flow inside each function, then across calls.
    for fi in 0..cx.funcs.len() {
        function_flow(&cx, fi, &entries, &graph, config)?;
    }
    // Ops a run may reach (all, unless the bounds analysis knows better).
    let mut may_run = vec![true; cx.image.insns.len()];
    let mut packet_proven = vec![false; cx.image.insns.len()];
    let mut ctx_field = vec![false; cx.image.insns.len()];
    if config.profile == Profile::Kernel && config.kernel_compat {
        let facts = bounds::refuse_out_of_bounds(&cx, &mut entries, &graph)?;
        may_run = facts.may_run;
        packet_proven = facts.packet_proven;
        ctx_field = facts.ctx_field;
    }
    call_depth(&cx, &entries, &graph, config, &may_run)?;
    let mut program = translate_all(cx);
    program.packet_proven = packet_proven;
    program.ctx_field = ctx_field;
    Ok(Checked { program, entries })
}

/// Size limits and the slot table: the checker's context before functions
/// are known.
fn decode(image: &Image) -> Result<Ctx<'_>, LoadError> {
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
    Ok(Ctx {
        image,
        starts,
        slot_op,
        funcs: Vec::new(),
        op_func: Vec::new(),
    })
}

/// Function boundaries (first slots, sorted): the Image's functions plus
/// every call target.
fn function_starts(cx: &Ctx) -> Result<Vec<usize>, LoadError> {
    let image = cx.image;
    let total = cx.slot_op.len();
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
    for (i, insn) in image.insns.iter().enumerate() {
        if let Some(rel) = insn.call_offset() {
            match cx.target(i, rel) {
                Ok(t) => fstarts.push(cx.starts[t]),
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
    fstarts.sort_unstable();
    fstarts.dedup();
    Ok(fstarts)
}

impl Ctx<'_> {
    /// Fills `funcs` and `op_func` from the functions' first slots.
    fn set_functions(&mut self, fstarts: &[usize]) {
        let (image, insns) = (self.image, &self.image.insns);
        let total = self.slot_op.len();
        for (k, &s) in fstarts.iter().enumerate() {
            let end_slot = fstarts.get(k + 1).copied().unwrap_or(total);
            let name = match image.functions.iter().find(|f| f.start == s) {
                Some(f) => f.name.clone(),
                None => match image.function_at(s) {
                    Some(p) => format!("{}@{}", p.name, s - p.start),
                    None => format!("sub_{s}"),
                },
            };
            let start_op = self.slot_op[s].unwrap_or(0);
            let end_op = if end_slot == total {
                insns.len()
            } else {
                self.slot_op[end_slot].unwrap_or(insns.len())
            };
            self.funcs.push(Func {
                name,
                start_slot: s,
                end_slot,
                start_op,
                end_op,
            });
        }
        self.op_func = vec![0; insns.len()];
        for (fi, f) in self.funcs.iter().enumerate() {
            for o in f.start_op..f.end_op {
                self.op_func[o] = fi as u32;
            }
        }
    }
}

/// The entry programs (one unnamed entry at op 0 if the Image has none).
fn entries(cx: &Ctx, fstarts: &[usize]) -> Result<Vec<EntryInfo>, LoadError> {
    let image = cx.image;
    let mut entries = Vec::new();
    if image.entries.is_empty() {
        entries.push(EntryInfo {
            index: entries.len(),
            name: cx.funcs[0].name.clone(),
            prog_type: ProgType::Unspec,
            func: 0,
            start_op: 0,
            refused: None,
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
            index: entries.len(),
            name: e.name.clone(),
            prog_type: e.prog_type,
            func,
            start_op: cx.funcs[func].start_op,
            refused: None,
        });
    }
    Ok(entries)
}

/// Who calls whom.
struct CallGraph {
    /// Per function: (callee, op of the call).
    callees: Vec<Vec<(usize, usize)>>,
    /// Functions whose address is taken (callbacks: their r0 is read).
    is_callback: Vec<bool>,
}

/// Checks every instruction on its own (jump and call targets, r10
/// writes, supported kinds, helpers of the profile, map references,
/// division by a zero immediate) and builds the call graph.
fn insn_rules(cx: &Ctx, config: &VmConfig) -> Result<CallGraph, LoadError> {
    let nfuncs = cx.funcs.len();
    let mut graph = CallGraph {
        callees: vec![Vec::new(); nfuncs],
        is_callback: vec![false; nfuncs],
    };
    for (i, insn) in cx.image.insns.iter().enumerate() {
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
            graph.callees[f].push((cx.op_func[t] as usize, i));
            if matches!(insn, Insn::Lddw { .. }) {
                graph.is_callback[cx.op_func[t] as usize] = true;
            }
        }
        let (_, writes) = reads_writes(insn);
        if writes & FP != 0 {
            return Err(cx.err(i, Rule::FramePointerWrite, "r10 is read-only"));
        }
        insn_kind_rules(cx, i, insn, config)?;
    }
    Ok(graph)
}

/// The rules of instruction `i` that depend on its kind alone.
fn insn_kind_rules(cx: &Ctx, i: usize, insn: &Insn, config: &VmConfig) -> Result<(), LoadError> {
    match *insn {
        Insn::AddrSpaceCast { .. } => Err(cx.err(
            i,
            Rule::Unsupported,
            "addr_space_cast (arena) is not supported",
        )),
        Insn::Call {
            kind: CallKind::Kfunc,
            imm,
        } => Err(cx.err(
            i,
            Rule::Unsupported,
            format!("kfunc call (BTF id {imm}) is not supported"),
        )),
        Insn::Lddw {
            kind,
            imm,
            next_imm,
            ..
        } => lddw_rules(cx, i, kind, imm, next_imm),
        Insn::Alu {
            op: AluOp::Div | AluOp::SDiv | AluOp::Mod | AluOp::SMod,
            src: Operand::Imm(0),
            ..
        } if config.kernel_compat => Err(cx.err(i, Rule::DivByZero, "division by zero immediate")),
        _ => Ok(()),
    }
}

/// An `lddw` at `i` of `kind`: map references name a map of the Image
/// (and, for direct value access, an array or global inside its value);
/// unlinked kinds are refused.
fn lddw_rules(
    cx: &Ctx,
    i: usize,
    kind: LddwKind,
    imm: i32,
    next_imm: i32,
) -> Result<(), LoadError> {
    let image = cx.image;
    match kind {
        LddwKind::Imm64 | LddwKind::Func => Ok(()),
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
            if kind != LddwKind::MapIdxValue {
                return Ok(());
            }
            let arrayish =
                matches!(m.map_type, MapType::Array) || matches!(m.kind, MapKind::Global { .. });
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
            Ok(())
        }
        LddwKind::MapFd | LddwKind::MapValue | LddwKind::BtfId => Err(cx.err(
            i,
            Rule::Lddw,
            format!("lddw of kind {kind:?} must be bound to the Image's maps by the linker"),
        )),
    }
}

/// Functions reachable from function `from` (itself included).
fn reachable(graph: &CallGraph, from: usize) -> Vec<bool> {
    let mut seen = vec![false; graph.callees.len()];
    let mut stack = vec![from];
    seen[from] = true;
    while let Some(f) = stack.pop() {
        for &(c, _) in &graph.callees[f] {
            if !seen[c] {
                seen[c] = true;
                stack.push(c);
            }
        }
    }
    seen
}

/// The rules of entry `e` over the functions it reaches (its own code,
/// its bpf-to-bpf callees, the callbacks they reference): every helper
/// must exist in the profile; in the kernel profile, helpers and
/// `LD_ABS`/`LD_IND` must be allowed for the entry's program type.
fn entry_rules(
    cx: &Ctx,
    e: &EntryInfo,
    graph: &CallGraph,
    config: &VmConfig,
) -> Result<(), LoadError> {
    let seen = reachable(graph, e.func);
    let kernel = config.profile == Profile::Kernel && e.prog_type != ProgType::Unspec;
    core_relocations(cx, e)?;
    for (i, insn) in cx.image.insns.iter().enumerate() {
        if !seen[cx.op_func[i] as usize] {
            continue;
        }
        match *insn {
            // Poisoned by the linker (an unresolved CO-RE relocation):
            // checked below, on the paths the entry can take.
            Insn::Call {
                kind: CallKind::Helper,
                imm: nfkit_object::co_re::POISON_HELPER,
            } => {}
            Insn::Call {
                kind: CallKind::Helper,
                imm,
            } => match table::lookup(config.profile, imm as i64) {
                None => {
                    return Err(cx.err(
                        i,
                        Rule::UnknownHelper,
                        format!(
                            "helper {imm}{} is not available in the {:?} profile (called by program {})",
                            nfkit_isa::helpers::helper_name(imm)
                                .map(|n| format!(" (bpf_{n})"))
                                .unwrap_or_default(),
                            config.profile,
                            e.name
                        ),
                    ))
                }
                Some(h) if kernel && !h.avail.allows(e.prog_type) => {
                    return Err(cx.err(
                        i,
                        Rule::HelperNotAllowed,
                        format!(
                            "bpf_{} cannot be called from {} program {}",
                            h.name,
                            e.prog_type.name(),
                            e.name
                        ),
                    ))
                }
                Some(_) => {}
            },
            Insn::LdAbs { .. } | Insn::LdInd { .. } if kernel => {
                let skb = matches!(
                    e.prog_type,
                    ProgType::SocketFilter | ProgType::SchedCls | ProgType::SchedAct
                );
                if !skb {
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
    Ok(())
}

/// Control flow inside function `fi`: falling off its end, and registers
/// read where no path wrote them (a forward data-flow fixpoint).
fn function_flow(
    cx: &Ctx,
    fi: usize,
    entries: &[EntryInfo],
    graph: &CallGraph,
    config: &VmConfig,
) -> Result<(), LoadError> {
    let insns = &cx.image.insns;
    let func = &cx.funcs[fi];
    let is_entry = entries.iter().any(|e| e.func == fi);
    let is_callee = graph
        .callees
        .iter()
        .any(|cs| cs.iter().any(|&(c, _)| c == fi));
    // A subprogram may return nothing (a `void` function): the kernel
    // checks r0 only at the exits of entries and callbacks.
    let exit_reads_r0 = is_entry || graph.is_callback[fi] || !is_callee;
    let mut init: u16 = FP;
    if is_entry || !is_callee {
        init |= 1 << 1;
        if config.profile == Profile::Conformance {
            init |= 1 << 2;
        }
    }
    // A function nothing here calls (a global function other objects
    // call, like the classifier's `nfkit_dyn_finish`) takes its arguments
    // from its callers there.
    if is_callee || !is_entry {
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
        let (reads, writes, clobber) = flow_effect(insn, exit_reads_r0, config);
        needs[i - func.start_op] = reads;
        let out = (s & !clobber) | writes;
        let mut succ: [Option<usize>; 2] = [None, None];
        // A poisoned instruction (an unresolved CO-RE relocation) ends
        // the path: the entries that reach it are refused.
        let poisoned = matches!(
            insn,
            Insn::Call {
                kind: CallKind::Helper,
                imm: nfkit_object::co_re::POISON_HELPER
            }
        );
        if !poisoned && !matches!(insn, Insn::Exit | Insn::Ja { .. } | Insn::Gotol { .. }) {
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
    Ok(())
}

/// Refuses entry `e` if it can execute an instruction the linker
/// poisoned (a CO-RE relocation it could not resolve), naming it.
fn core_relocations(cx: &Ctx, e: &EntryInfo) -> Result<(), LoadError> {
    let Some(ei) = cx.image.entries.iter().position(|x| x.name == e.name) else {
        return Ok(());
    };
    let Some(slot) = nfkit_object::co_re::poisons_reached(cx.image, ei)
        .first()
        .copied()
    else {
        return Ok(());
    };
    let why = cx.image.core_site(slot).map_or_else(
        || "instruction poisoned by the linker".to_string(),
        |s| s.result.clone().err().unwrap_or_default(),
    );
    let op = cx.slot_op.get(slot).copied().flatten().unwrap_or(0);
    Err(cx.err(
        op,
        Rule::CoreRelocation,
        format!("{why} (reached by program {})", e.name),
    ))
}

/// Registers `insn` reads, writes and clobbers (bitmasks), calls
/// included: helpers read their arguments and clobber r1-r5.
fn flow_effect(insn: &Insn, exit_reads_r0: bool, config: &VmConfig) -> (u16, u16, u16) {
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
        Insn::Call { .. } | Insn::Callx { .. } | Insn::LdAbs { .. } | Insn::LdInd { .. } => {
            clobber = ARG_REGS;
            writes |= 1;
        }
        Insn::Exit if !exit_reads_r0 => reads = 0,
        _ => {}
    }
    (reads, writes, clobber)
}

/// Call depth, recursion, and (kernel-compatible mode) the stack budget
/// of every entry's deepest call path.
fn call_depth(
    cx: &Ctx,
    entries: &[EntryInfo],
    graph: &CallGraph,
    config: &VmConfig,
    may_run: &[bool],
) -> Result<(), LoadError> {
    let insns = &cx.image.insns;
    let nfuncs = cx.funcs.len();
    let stack_use: Vec<usize> = cx
        .funcs
        .iter()
        .map(|f| stack_depth(&insns[f.start_op..f.end_op], &may_run[f.start_op..f.end_op]))
        .collect();
    let mut walk = DepthWalk {
        cx,
        config,
        callees: &graph.callees,
        stack_use: &stack_use,
        memo: vec![None; nfuncs],
        on_path: vec![false; nfuncs],
    };
    // An entry refused already never runs: its stack does not count.
    for e in entries.iter().filter(|e| e.refused.is_none()) {
        let (frames, bytes) = walk.deepest(e.func)?;
        if frames > config.max_frames {
            let call = graph.callees[e.func]
                .first()
                .map_or(e.start_op, |&(_, op)| op);
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
    Ok(())
}

/// Translates the checked instructions into the interpreter's ops.
fn translate_all(cx: Ctx) -> Program {
    let insns = &cx.image.insns;
    let mut ops = Vec::with_capacity(insns.len());
    for (i, insn) in insns.iter().enumerate() {
        let target = |rel: i64| cx.target(i, rel).unwrap_or(0);
        let faddr = |rel: i64| mem::addr(mem::FUNCS, cx.target(i, rel).unwrap_or(0) as u64);
        ops.push(translate(insn, target, faddr));
    }
    Program {
        ops,
        op_slot: cx.starts,
        insns: insns.clone(),
        funcs: cx.funcs,
        op_func: cx.op_func,
        packet_proven: vec![false; insns.len()],
        ctx_field: vec![false; insns.len()],
    }
}

/// The depth-first walk of the call graph behind `call_depth`.
struct DepthWalk<'a> {
    cx: &'a Ctx<'a>,
    config: &'a VmConfig,
    callees: &'a [Vec<(usize, usize)>],
    stack_use: &'a [usize],
    /// (frames, stack bytes) of the deepest path from each function.
    memo: Vec<Option<(usize, usize)>>,
    on_path: Vec<bool>,
}

impl DepthWalk<'_> {
    /// Frames and stack bytes of the deepest call path starting at `f`.
    fn deepest(&mut self, f: usize) -> Result<(usize, usize), LoadError> {
        if let Some(d) = self.memo[f] {
            return Ok(d);
        }
        self.on_path[f] = true;
        let mut best = (1, self.stack_use[f]);
        for &(c, op) in &self.callees[f] {
            if self.on_path[c] {
                if self.config.kernel_compat {
                    self.on_path[f] = false;
                    return Err(self.cx.err(
                        op,
                        Rule::Recursion,
                        format!("function {} is called recursively", self.cx.funcs[c].name),
                    ));
                }
                // Recursion is bounded at run time by the frame limit.
                continue;
            }
            let (fr, by) = self.deepest(c)?;
            if 1 + fr > self.config.max_frames {
                self.on_path[f] = false;
                return Err(self.cx.err(
                    op,
                    Rule::CallDepth,
                    format!(
                        "this call leads to {} call frames, more than {}",
                        1 + fr,
                        self.config.max_frames
                    ),
                ));
            }
            best.0 = best.0.max(1 + fr);
            best.1 = best.1.max(self.stack_use[f] + by);
        }
        self.on_path[f] = false;
        self.memo[f] = Some(best);
        Ok(best)
    }
}

/// Bytes of stack a function uses, as the kernel rounds it (a multiple of
/// 32, at least 32 when any is used): the deepest `r10`-relative access,
/// following registers set to `r10 + constant` in straight-line code.
/// Instructions no run reaches (`may_run` false: the kernel does not look
/// at them either) only end what registers held.
fn stack_depth(insns: &[Insn], may_run: &[bool]) -> usize {
    let mut fp_off: [Option<i64>; 11] = [None; 11];
    fp_off[10] = Some(0);
    let mut deepest: i64 = 0;
    let mut note = |base: Option<i64>, off: i16| {
        if let Some(b) = base {
            deepest = deepest.max(-(b + off as i64));
        }
    };
    for (insn, &runs) in insns.iter().zip(may_run) {
        if !runs {
            let (_, w) = reads_writes(insn);
            for (r, slot) in fp_off.iter_mut().enumerate().take(10) {
                if w & (1 << r) != 0 {
                    *slot = None;
                }
            }
            continue;
        }
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
