//! Function bodies with symbolic targets (jumps as instruction indexes,
//! calls as function indexes), the rewriting of a call site into the
//! callee's body, and the way back into an [`Image`].

use super::InlineError;
use crate::image::{CoreSite, Function, Image, LineInfo};
use nfkit_isa::{AluOp, CallKind, Insn, LddwKind, Operand, Reg, Size, Width};
use std::collections::HashMap;

/// Jump target of a placed callee's `exit`: the continuation.
const END: usize = usize::MAX;

/// One function with its references made symbolic.
#[derive(Clone, Debug, Default)]
pub(super) struct Body {
    pub insns: Vec<Insn>,
    /// Per instruction: the index of a jump's target.
    pub jump: Vec<Option<usize>>,
    /// Per instruction: the function a local call or a function address
    /// refers to.
    pub call: Vec<Option<usize>>,
    /// (instruction index, line record).
    pub lines: Vec<(usize, LineInfo)>,
    /// (instruction index, CO-RE site).
    pub core: Vec<(usize, CoreSite)>,
}

impl Body {
    fn push(&mut self, insn: Insn, jump: Option<usize>, call: Option<usize>) {
        self.insns.push(insn);
        self.jump.push(jump);
        self.call.push(call);
    }

    /// Functions this one calls (local calls only), in order of first call.
    pub fn callees(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, c) in self.insns.iter().zip(&self.call) {
            if let (Some(g), true) = (c, is_local_call(i)) {
                if !out.contains(g) {
                    out.push(*g);
                }
            }
        }
        out
    }

    /// Functions this one calls or takes the address of.
    pub fn targets(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for g in self.call.iter().flatten() {
            if !out.contains(g) {
                out.push(*g);
            }
        }
        out
    }

    /// Number of local calls of `g`.
    pub fn call_sites(&self, g: usize) -> usize {
        self.insns
            .iter()
            .zip(&self.call)
            .filter(|(i, c)| is_local_call(i) && **c == Some(g))
            .count()
    }
}

fn is_local_call(i: &Insn) -> bool {
    matches!(
        i,
        Insn::Call {
            kind: CallKind::Local,
            ..
        }
    )
}

/// The functions of `image` as bodies.
pub(super) fn decode(image: &Image) -> Result<Vec<Body>, InlineError> {
    let slots = nfkit_isa::slot_offsets(&image.insns);
    let total = image.slot_count();
    let mut at_slot = vec![usize::MAX; total + 1];
    for (k, &s) in slots.iter().enumerate() {
        at_slot[s] = k;
    }
    at_slot[total] = image.insns.len();
    let by_start: HashMap<usize, usize> = image
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.start, i))
        .collect();
    let index = |slot: usize, what: &str| -> Result<usize, InlineError> {
        match at_slot.get(slot) {
            Some(&k) if k != usize::MAX => Ok(k),
            _ => Err(InlineError::Layout(format!(
                "{what} at slot {slot} is not an instruction boundary"
            ))),
        }
    };
    let mut bodies = Vec::with_capacity(image.functions.len());
    let mut ranges = Vec::with_capacity(image.functions.len());
    for f in &image.functions {
        let lo = index(f.start, &format!("function {}", f.name))?;
        let hi = index(f.start + f.len, &format!("end of function {}", f.name))?;
        let mut b = Body::default();
        for (k, &insn) in image.insns.iter().enumerate().take(hi).skip(lo) {
            let mut jump = None;
            let mut call = None;
            if let Some(off) = insn.jump_offset() {
                let t = slots[k] as i64 + 1 + off;
                let tk = usize::try_from(t)
                    .ok()
                    .and_then(|t| at_slot.get(t).copied())
                    .filter(|&tk| tk >= lo && tk < hi)
                    .ok_or_else(|| {
                        InlineError::Layout(format!(
                            "jump at {}+{} leaves the function",
                            f.name,
                            slots[k] - f.start
                        ))
                    })?;
                jump = Some(tk - lo);
            }
            if let Some(off) = insn.call_offset() {
                let t = slots[k] as i64 + 1 + off;
                let g = usize::try_from(t)
                    .ok()
                    .and_then(|t| by_start.get(&t).copied())
                    .ok_or_else(|| {
                        InlineError::Layout(format!(
                            "call at {}+{} does not reach a function start",
                            f.name,
                            slots[k] - f.start
                        ))
                    })?;
                call = Some(g);
            }
            b.push(insn, jump, call);
        }
        bodies.push(b);
        ranges.push((f.start, f.start + f.len, lo));
    }
    let owner = |slot: usize| {
        ranges
            .iter()
            .position(|&(s, e, _)| slot >= s && slot < e)
            .map(|fi| (fi, at_slot[slot].wrapping_sub(ranges[fi].2)))
    };
    for l in &image.line_info {
        if let Some((fi, k)) = owner(l.slot) {
            if k < bodies[fi].insns.len() {
                bodies[fi].lines.push((k, l.clone()));
            }
        }
    }
    for c in &image.core_sites {
        if let Some((fi, k)) = owner(c.slot) {
            if k < bodies[fi].insns.len() {
                bodies[fi].core.push((k, c.clone()));
            }
        }
    }
    Ok(bodies)
}

/// Callee-saved registers (r6..r9) an instruction names.
fn callee_saved_named(i: &Insn) -> u16 {
    let mut m = 0u16;
    let mut add = |r: Reg| {
        if (6..=9).contains(&r.num()) {
            m |= 1 << r.num();
        }
    };
    match *i {
        Insn::Alu { dst, src, .. } => {
            add(dst);
            if let Operand::Reg(s) = src {
                add(s);
            }
        }
        Insn::Endian { dst, .. } | Insn::Lddw { dst, .. } => add(dst),
        Insn::AddrSpaceCast { dst, src, .. }
        | Insn::Ldx { dst, src, .. }
        | Insn::Stx { dst, src, .. }
        | Insn::Atomic { dst, src, .. } => {
            add(dst);
            add(src);
        }
        Insn::St { dst, .. } => add(dst),
        Insn::Jmp { dst, src, .. } => {
            add(dst);
            if let Operand::Reg(s) = src {
                add(s);
            }
        }
        Insn::LdInd { src, .. } => add(src),
        Insn::Callx { reg } => add(reg),
        _ => {}
    }
    m
}

/// The callee-saved registers a body touches.
fn saved_regs(b: &Body) -> Vec<Reg> {
    let m = b.insns.iter().fold(0u16, |m, i| m | callee_saved_named(i));
    (6..=9u8)
        .filter(|r| m & (1 << r) != 0)
        .filter_map(Reg::new)
        .collect()
}

fn shift(off: i16, d: i64) -> Result<i16, String> {
    i16::try_from(off as i64 - d).map_err(|_| "a stack offset out of range".to_string())
}

/// `g` placed with its frame `d` bytes below the caller's: instructions
/// with jumps as indexes into the result ([`END`] for its exits), the
/// old-to-new index map.
fn placed(g: &Body, d: i64) -> Result<(Body, Vec<usize>), String> {
    let mut out = Body::default();
    let mut map = Vec::with_capacity(g.insns.len());
    let uses_fp = |r: Reg| r == Reg::FP;
    let mut targets = vec![false; g.insns.len() + 1];
    for t in g.jump.iter().flatten() {
        targets[*t] = true;
    }
    // `rX = r10; rX += k` becomes `rX = r10; rX += k - d` (one add).
    let mut fused = false;
    for (k, &insn) in g.insns.iter().enumerate() {
        if std::mem::take(&mut fused) {
            map.push(out.insns.len() - 1);
            continue;
        }
        map.push(out.insns.len());
        let call = g.call[k];
        let jump = g.jump[k];
        let mut extra = None;
        let insn = match insn {
            Insn::Exit => {
                out.push(Insn::Ja { off: 0 }, Some(END), None);
                continue;
            }
            Insn::Callx { .. } => return Err("it calls through a register (callx)".into()),
            Insn::Ldx {
                size,
                signed,
                dst,
                src,
                off,
            } if uses_fp(src) => Insn::Ldx {
                size,
                signed,
                dst,
                src,
                off: shift(off, d)?,
            },
            Insn::Stx { src, .. } | Insn::Atomic { src, .. } if uses_fp(src) => {
                return Err("it stores the frame pointer".into())
            }
            Insn::Stx {
                size,
                dst,
                src,
                off,
            } if uses_fp(dst) => Insn::Stx {
                size,
                dst,
                src,
                off: shift(off, d)?,
            },
            Insn::St {
                size,
                dst,
                off,
                imm,
            } if uses_fp(dst) => Insn::St {
                size,
                dst,
                off: shift(off, d)?,
                imm,
            },
            Insn::Atomic {
                size,
                op,
                dst,
                src,
                off,
            } if uses_fp(dst) => Insn::Atomic {
                size,
                op,
                dst,
                src,
                off: shift(off, d)?,
            },
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst,
                src: Operand::Reg(s),
            } if uses_fp(s) => {
                let mut add = -d;
                if let Some(Insn::Alu {
                    width: Width::W64,
                    op: AluOp::Add,
                    dst: d2,
                    src: Operand::Imm(k2),
                }) = g.insns.get(k + 1)
                {
                    if *d2 == dst && !targets[k + 1] && i32::try_from(add + *k2 as i64).is_ok() {
                        add += *k2 as i64;
                        fused = true;
                    }
                }
                extra = Some(Insn::Alu {
                    width: Width::W64,
                    op: AluOp::Add,
                    dst,
                    src: Operand::Imm(add as i32),
                });
                insn
            }
            Insn::Alu {
                src: Operand::Reg(s),
                ..
            }
            | Insn::Jmp {
                src: Operand::Reg(s),
                ..
            } if uses_fp(s) => return Err("it computes with the frame pointer".into()),
            Insn::Jmp { dst, .. } if uses_fp(dst) => {
                return Err("it compares the frame pointer".into())
            }
            Insn::AddrSpaceCast { src, .. } | Insn::LdInd { src, .. } if uses_fp(src) => {
                return Err("it computes with the frame pointer".into())
            }
            other => other,
        };
        out.push(insn, jump, call);
        if let Some(e) = extra {
            out.push(e, None, None);
        }
    }
    map.push(out.insns.len());
    for t in out.jump.iter_mut().flatten() {
        if *t != END {
            *t = map[*t];
        }
    }
    for (k, l) in &g.lines {
        out.lines.push((map[*k], l.clone()));
    }
    for (k, c) in &g.core {
        out.core.push((map[*k], c.clone()));
    }
    Ok((out, map))
}

/// `f` with every call of a function in `set` replaced by its body
/// (`bodies`), callee frames placed below `f0` bytes of `f`'s own.
pub(super) fn inline_into(
    f: &Body,
    bodies: &[Body],
    set: &[usize],
    f0: u32,
) -> Result<Body, String> {
    let f0 = i64::from(f0.div_ceil(8) * 8);
    let live = live_out(f);
    let mut out = Body::default();
    let mut newidx = vec![0usize; f.insns.len() + 1];
    // (new index, old target) of the caller's own jumps.
    let mut pending = Vec::new();
    let mut callee_lines = Vec::new();
    for (k, &insn) in f.insns.iter().enumerate() {
        newidx[k] = out.insns.len();
        let g = match f.call[k] {
            Some(g) if is_local_call(&insn) && set.contains(&g) => g,
            _ => {
                if let Some(t) = f.jump[k] {
                    pending.push((out.insns.len(), t));
                }
                out.push(insn, None, f.call[k]);
                continue;
            }
        };
        // Only the registers the callee touches and the caller reads later.
        let saved: Vec<Reg> = saved_regs(&bodies[g])
            .into_iter()
            .filter(|r| live[k] & (1 << r.num()) != 0)
            .collect();
        let spill = |i: usize| -> Result<i16, String> {
            i16::try_from(-(f0 + 8 * (i as i64 + 1)))
                .map_err(|_| "stack offset out of range".into())
        };
        for (i, &r) in saved.iter().enumerate() {
            out.push(
                Insn::Stx {
                    size: Size::DW,
                    dst: Reg::FP,
                    src: r,
                    off: spill(i)?,
                },
                None,
                None,
            );
        }
        let d = f0 + 8 * saved.len() as i64;
        let (p, _) = placed(&bodies[g], d)?;
        let base = out.insns.len();
        let end = base + p.insns.len();
        for ((insn, jump), call) in p.insns.into_iter().zip(p.jump).zip(p.call) {
            let jump = jump.map(|t| if t == END { end } else { base + t });
            out.push(insn, jump, call);
        }
        for (i, &r) in saved.iter().enumerate() {
            out.push(
                Insn::Ldx {
                    size: Size::DW,
                    signed: false,
                    dst: r,
                    src: Reg::FP,
                    off: spill(i)?,
                },
                None,
                None,
            );
        }
        for (k2, l) in p.lines {
            callee_lines.push((base + k2, l));
        }
        for (k2, c) in p.core {
            out.core.push((base + k2, c));
        }
    }
    newidx[f.insns.len()] = out.insns.len();
    for (at, t) in pending {
        out.jump[at] = Some(newidx[t]);
    }
    // A jump to the end of the function (past its last instruction) is
    // not valid eBPF; a placed callee ending the caller jumps there only
    // if the caller's call was its last instruction, which it is not.
    if out.jump.iter().flatten().any(|&t| t >= out.insns.len()) {
        return Err("a call is the caller's last instruction".into());
    }
    for (k, l) in &f.lines {
        out.lines.push((newidx[*k], l.clone()));
    }
    out.lines.extend(callee_lines);
    out.lines.sort_by_key(|(k, _)| *k);
    for (k, c) in &f.core {
        out.core.push((newidx[*k], c.clone()));
    }
    Ok(out)
}

/// Sets a jump's offset; false when it does not fit.
fn set_jump(insn: &mut Insn, off: i64) -> bool {
    match insn {
        Insn::Ja { off: o } | Insn::Jmp { off: o, .. } | Insn::MayGoto { off: o } => {
            match i16::try_from(off) {
                Ok(v) => {
                    *o = v;
                    true
                }
                Err(_) => false,
            }
        }
        Insn::Gotol { imm } => match i32::try_from(off) {
            Ok(v) => {
                *imm = v;
                true
            }
            Err(_) => false,
        },
        _ => false,
    }
}

/// The Image of `bodies`: the functions `roots` reach, in their old order.
pub(super) fn assemble(
    image: &Image,
    bodies: &[Body],
    roots: &[usize],
) -> Result<Image, InlineError> {
    let mut keep = vec![false; bodies.len()];
    let mut work: Vec<usize> = roots.to_vec();
    while let Some(f) = work.pop() {
        if f >= keep.len() || keep[f] {
            continue;
        }
        keep[f] = true;
        work.extend(bodies[f].targets());
    }
    let mut start = vec![0usize; bodies.len()];
    let mut new_index = vec![usize::MAX; bodies.len()];
    let mut functions: Vec<Function> = Vec::new();
    let mut at = 0;
    for (fi, b) in bodies.iter().enumerate() {
        if !keep[fi] {
            continue;
        }
        let len = nfkit_isa::slot_count(&b.insns);
        start[fi] = at;
        new_index[fi] = functions.len();
        functions.push(Function {
            start: at,
            len,
            ..image.functions[fi].clone()
        });
        at += len;
    }
    let mut insns = Vec::new();
    let mut line_info: Vec<LineInfo> = Vec::new();
    let mut core_sites = Vec::new();
    for (fi, b) in bodies.iter().enumerate() {
        if !keep[fi] {
            continue;
        }
        let name = &image.functions[fi].name;
        let los = nfkit_isa::slot_offsets(&b.insns);
        for (k, &insn) in b.insns.iter().enumerate() {
            let mut insn = insn;
            if let Some(t) = b.jump[k] {
                let off = los[t] as i64 - los[k] as i64 - 1;
                if !set_jump(&mut insn, off) {
                    return Err(InlineError::Layout(format!(
                        "jump at {name}+{} out of range",
                        los[k]
                    )));
                }
            }
            if let Some(g) = b.call[k] {
                let off = start[g] as i64 - (start[fi] + los[k]) as i64 - 1;
                let off = i32::try_from(off).map_err(|_| {
                    InlineError::Layout(format!("call at {name}+{} out of range", los[k]))
                })?;
                match &mut insn {
                    Insn::Call {
                        kind: CallKind::Local,
                        imm,
                    }
                    | Insn::Lddw {
                        kind: LddwKind::Func,
                        imm,
                        ..
                    } => *imm = off,
                    _ => {}
                }
            }
            insns.push(insn);
        }
        for (k, l) in &b.lines {
            if let Some(&s) = los.get(*k) {
                line_info.push(LineInfo {
                    slot: start[fi] + s,
                    ..l.clone()
                });
            }
        }
        for (k, c) in &b.core {
            if let Some(&s) = los.get(*k) {
                core_sites.push(CoreSite {
                    slot: start[fi] + s,
                    function: name.clone(),
                    func_slot: s,
                    ..c.clone()
                });
            }
        }
    }
    // One record per slot (the last: an inlined body's first line wins
    // over its call site's), in slot order.
    line_info.sort_by_key(|l| l.slot);
    let mut dedup: Vec<LineInfo> = Vec::with_capacity(line_info.len());
    for l in line_info {
        if dedup.last().is_some_and(|p| p.slot == l.slot) {
            dedup.pop();
        }
        dedup.push(l);
    }
    let mut entries = image.entries.clone();
    for e in &mut entries {
        e.function = new_index[e.function];
    }
    Ok(Image {
        insns,
        functions,
        entries,
        line_info: dedup,
        core_sites,
        ..image.clone()
    })
}

/// Registers an instruction reads and writes (bit masks of r0..r10).
pub(super) fn use_def(i: &Insn) -> (u16, u16) {
    let b = |r: Reg| 1u16 << r.num();
    let args = 0b11_1110u16; // r1..r5
    let scratch = 0b11_1111u16; // r0..r5
    match *i {
        Insn::Alu {
            op: AluOp::Mov | AluOp::MovSx(_),
            dst,
            src,
            ..
        } => (
            match src {
                Operand::Reg(s) => b(s),
                Operand::Imm(_) => 0,
            },
            b(dst),
        ),
        Insn::Alu { dst, src, .. } => (
            b(dst)
                | match src {
                    Operand::Reg(s) => b(s),
                    Operand::Imm(_) => 0,
                },
            b(dst),
        ),
        Insn::Endian { dst, .. } => (b(dst), b(dst)),
        Insn::AddrSpaceCast { dst, src, .. } => (b(src), b(dst)),
        Insn::Ldx { dst, src, .. } => (b(src), b(dst)),
        Insn::St { dst, .. } => (b(dst), 0),
        Insn::Stx { dst, src, .. } => (b(dst) | b(src), 0),
        // A fetch writes its source (or r0); counted as read only, which
        // keeps more alive, never less.
        Insn::Atomic { dst, src, .. } => (b(dst) | b(src) | 1, 0),
        Insn::Lddw { dst, .. } => (0, b(dst)),
        Insn::LdAbs { .. } => (b(Reg::R6), scratch),
        Insn::LdInd { src, .. } => (b(Reg::R6) | b(src), scratch),
        Insn::Jmp { dst, src, .. } => (
            b(dst)
                | match src {
                    Operand::Reg(s) => b(s),
                    Operand::Imm(_) => 0,
                },
            0,
        ),
        Insn::Call { .. } => (args, scratch),
        Insn::Callx { reg } => (args | b(reg), scratch),
        Insn::Exit => (1, 0),
        Insn::Ja { .. } | Insn::Gotol { .. } | Insn::MayGoto { .. } => (0, 0),
    }
}

/// Registers live after each instruction of `f` (r6..r9 are not live at
/// its exits: whoever calls `f` keeps its own).
fn live_out(f: &Body) -> Vec<u16> {
    live_out_by(f, use_def)
}

/// Registers live after each instruction of `f`, with `ud` giving each
/// instruction's (used, defined) register masks.
pub(super) fn live_out_by(f: &Body, ud: impl Fn(&Insn) -> (u16, u16)) -> Vec<u16> {
    let n = f.insns.len();
    let mut live_in = vec![0u16; n + 1];
    let mut out = vec![0u16; n];
    let ud: Vec<(u16, u16)> = f.insns.iter().map(ud).collect();
    loop {
        let mut changed = false;
        for k in (0..n).rev() {
            let insn = &f.insns[k];
            let mut o = 0u16;
            let falls = !insn.ends_block() || matches!(insn, Insn::MayGoto { .. });
            if falls && k + 1 < n {
                o |= live_in[k + 1];
            }
            if let Some(t) = f.jump[k] {
                o |= live_in[t];
            }
            let (u, d) = ud[k];
            let i = u | (o & !d);
            if o != out[k] || i != live_in[k] {
                out[k] = o;
                live_in[k] = i;
                changed = true;
            }
        }
        if !changed {
            return out;
        }
    }
}
