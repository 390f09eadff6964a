//! Which maps a program may write: a pointer-provenance scan over the
//! bytecode of the code reachable from an entry.
//!
//! The symbolic executor sees the writes of the paths it explored; when
//! some path stopped early, code it never reached may still write maps.
//! This scan answers for all code at once: a forward data-flow over every
//! reachable instruction tracks what each register and spilled stack
//! slot may point to (a map's value, a map handle, the stack, the packet,
//! the context, or a scalar). A store or atomic through a register
//! writes the maps its provenance names; a helper that may write maps
//! writes those it is handed. Whatever the scan cannot follow (a pointer
//! of unknown origin, kfuncs, callbacks, tail calls, a helper not known
//! to return a scalar) makes it answer "every map" with the reason.

use nfkit_isa::{AluOp, AtomicOp, CallKind, Insn, LddwKind, Operand, Size};
use nfkit_object::Image;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// The maps code may write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Writes {
    /// Any map: the scan lost track of a pointer (the reason, with slot).
    All(String),
    /// Only these map indices (bit `i` = map `i`).
    Maps(u128),
}

impl Writes {
    /// Whether map index `m` may be written.
    pub fn may_write(&self, m: usize) -> bool {
        match self {
            Writes::All(_) => true,
            Writes::Maps(b) => m < 128 && b >> m & 1 == 1,
        }
    }
}

/// What a value may be: the union of its possible origins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Prov {
    /// A pointer the scan does not follow.
    any: bool,
    /// Into some stack frame, offset not known (or another frame's).
    stack: bool,
    /// Exactly `r10 + k` of the current frame.
    fp: Option<i64>,
    pkt: bool,
    ctx: bool,
    /// Into values of these maps.
    vals: u128,
    /// These maps' handles (`lddw` of a map).
    handles: u128,
    /// A known constant (only when nothing else is possible).
    konst: Option<i64>,
}

impl Prov {
    fn konst(c: i64) -> Prov {
        Prov {
            konst: Some(c),
            ..Prov::default()
        }
    }

    fn any() -> Prov {
        Prov {
            any: true,
            ..Prov::default()
        }
    }

    fn is_scalar(&self) -> bool {
        !self.any
            && !self.stack
            && self.fp.is_none()
            && !self.pkt
            && !self.ctx
            && self.vals == 0
            && self.handles == 0
    }

    fn join(&self, o: &Prov) -> Prov {
        let (fp, loose) = match (self.fp, o.fp) {
            (Some(a), Some(b)) if a != b => (None, true),
            (a, b) => (a.or(b), false),
        };
        let konst = match (self.konst, o.konst) {
            (Some(a), Some(b)) if a == b && self.is_scalar() && o.is_scalar() => Some(a),
            _ => None,
        };
        Prov {
            any: self.any || o.any,
            stack: self.stack || o.stack || loose,
            fp,
            pkt: self.pkt || o.pkt,
            ctx: self.ctx || o.ctx,
            vals: self.vals | o.vals,
            handles: self.handles | o.handles,
            konst,
        }
    }

    /// The same origins with the stack offset forgotten (handed to or
    /// returned from another frame, or offset by an unknown amount).
    fn loose(&self) -> Prov {
        let mut p = *self;
        if p.fp.take().is_some() {
            p.stack = true;
        }
        p.konst = None;
        p
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    regs: [Prov; 11],
    /// Spilled values of this frame by byte offset from r10 (absent:
    /// scalar).
    slots: BTreeMap<i64, Prov>,
}

impl State {
    fn join(&self, o: &State) -> State {
        let mut slots = self.slots.clone();
        for (k, v) in &o.slots {
            let j = slots.get(k).map_or(*v, |x| x.join(v));
            slots.insert(*k, j);
        }
        State {
            regs: std::array::from_fn(|i| self.regs[i].join(&o.regs[i])),
            slots,
        }
    }
}

/// Helpers whose result is a pointer into a value of the map in r1.
const VALUE_OF_R1: [i32; 3] = [1, 131, 195];
/// Helpers that write no map.
const NO_MAP_WRITES: [i32; 13] = [1, 5, 6, 7, 8, 23, 25, 28, 44, 51, 54, 65, 125];
/// Helpers known to return a scalar (or nothing a program can store
/// through).
const SCALAR_RESULT: [i32; 22] = [
    2, 3, 5, 6, 7, 8, 23, 25, 28, 44, 51, 54, 65, 69, 87, 125, 130, 132, 133, 189, 190, 4,
];
const TAIL_CALL: i32 = 12;

struct Scan<'a> {
    image: &'a Image,
    /// Instruction index of each slot.
    at_slot: Vec<Option<usize>>,
    /// Slot of each instruction.
    slot_of: Vec<usize>,
    written: u128,
    all: Option<String>,
    /// Every value stored to any stack slot (read back through a stack
    /// pointer whose offset is not known).
    spilled: Prov,
    /// Whether a store went through such a pointer.
    loose_store: bool,
    /// Per function start slot: its join of r0 at `exit`.
    ret: BTreeMap<usize, Prov>,
}

/// Scans kept per image, so that the analyses of one program (the whole
/// program, each uniform region, each map sync) scan it once.
static SCANS: Mutex<Vec<(u64, usize, Writes)>> = Mutex::new(Vec::new());

/// Scans [`SCANS`] keeps (the oldest goes first).
const KEPT_SCANS: usize = 32;

/// What the scan of an image depends on, hashed: its instructions, its
/// functions and its maps (names and kinds: the reasons name them).
fn fingerprint(image: &Image) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    image.insns.hash(&mut h);
    for f in &image.functions {
        (&f.name, f.start, f.len).hash(&mut h);
    }
    for m in &image.maps {
        (
            &m.name,
            m.map_type.name(),
            m.key_size,
            m.value_size,
            m.flags,
        )
            .hash(&mut h);
    }
    for l in &image.line_info {
        (l.slot, &l.file, l.line).hash(&mut h);
    }
    h.finish()
}

/// [`written_maps`], computed once per image (by content) and function
/// and then taken from a small process-wide cache: the scan is the same
/// for every analysis of a program, whatever its maps hold.
pub fn written_maps_cached(image: &Image, f: usize) -> Writes {
    let key = fingerprint(image);
    if let Ok(kept) = SCANS.lock() {
        if let Some((_, _, w)) = kept.iter().find(|(k, g, _)| *k == key && *g == f) {
            return w.clone();
        }
    }
    let w = written_maps(image, f);
    if let Ok(mut kept) = SCANS.lock() {
        if kept.len() >= KEPT_SCANS {
            kept.remove(0);
        }
        kept.push((key, f, w.clone()));
    }
    w
}

/// The maps code reachable from function `f` of `image` may write.
pub fn written_maps(image: &Image, f: usize) -> Writes {
    if image.maps.len() > 128 {
        return Writes::All(format!(
            "{} maps (the scan follows at most 128)",
            image.maps.len()
        ));
    }
    let Some(func) = image.functions.get(f) else {
        return Writes::All(format!("function {f} out of range"));
    };
    let slot_of = nfkit_isa::slot_offsets(&image.insns);
    let mut at_slot = vec![None; image.slot_count() + 1];
    for (i, s) in slot_of.iter().enumerate() {
        at_slot[*s] = Some(i);
    }
    let mut scan = Scan {
        image,
        at_slot,
        slot_of,
        written: 0,
        all: None,
        spilled: Prov::default(),
        loose_store: false,
        ret: BTreeMap::new(),
    };
    // The global facts (stack spills, return values) only grow: repeat
    // the data-flow until they stop changing.
    for _ in 0..32 {
        let before = (scan.spilled, scan.loose_store, scan.ret.clone());
        scan.flow(func.start);
        if let Some(why) = scan.all.take() {
            return Writes::All(why);
        }
        if (scan.spilled, scan.loose_store, scan.ret.clone()) == before {
            return Writes::Maps(scan.written);
        }
    }
    Writes::All("the write scan did not settle".into())
}

fn bit(m: usize) -> u128 {
    if m < 128 {
        1u128 << m
    } else {
        0
    }
}

impl Scan<'_> {
    fn give_up(&mut self, slot: usize, why: &str) {
        if self.all.is_none() {
            self.all = Some(format!(
                "{} (slot {slot}): {why}",
                self.image.describe_slot(slot)
            ));
        }
    }

    fn index(&self, slot: i64) -> Option<usize> {
        usize::try_from(slot)
            .ok()
            .and_then(|s| self.at_slot.get(s).copied().flatten())
    }

    /// One data-flow pass over everything reachable from the entry at
    /// slot `entry` (callees entered with the join of their callers'
    /// arguments).
    fn flow(&mut self, entry: usize) {
        let n = self.image.insns.len();
        let mut at: Vec<Option<State>> = vec![None; n];
        let Some(e) = self.index(entry as i64) else {
            self.give_up(entry, "entry outside the code");
            return;
        };
        let mut regs = [Prov::default(); 11];
        regs[1] = Prov {
            ctx: true,
            ..Prov::default()
        };
        regs[10] = Prov {
            fp: Some(0),
            ..Prov::default()
        };
        at[e] = Some(State {
            regs,
            slots: BTreeMap::new(),
        });
        // Call sites of each callee (instruction indices), to resume
        // after it returns.
        let mut callers: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut work = vec![e];
        let mut budget = 200_000usize;
        while let Some(i) = work.pop() {
            if self.all.is_some() {
                return;
            }
            budget = budget.saturating_sub(1);
            if budget == 0 {
                self.give_up(self.slot_of[i], "write scan budget");
                return;
            }
            let Some(st) = at[i].clone() else { continue };
            let slot = self.slot_of[i];
            let insn = self.image.insns[i];
            let mut out: Vec<(usize, State)> = Vec::new();
            let next = self.index((slot + insn.slots()) as i64);
            let mut s = st.clone();
            match insn {
                Insn::Alu { op, dst, src, .. } => {
                    let d = dst.num() as usize;
                    let b = match src {
                        Operand::Reg(r) => s.regs[r.num() as usize],
                        Operand::Imm(c) => Prov::konst(c as i64),
                    };
                    s.regs[d] = alu(op, &s.regs[d], &b);
                    push(&mut out, next, s);
                }
                Insn::Endian { dst, .. } => {
                    let d = dst.num() as usize;
                    s.regs[d] = s.regs[d].loose();
                    push(&mut out, next, s);
                }
                Insn::AddrSpaceCast { dst, .. } => {
                    s.regs[dst.num() as usize] = Prov::any();
                    push(&mut out, next, s);
                }
                Insn::Ldx {
                    size,
                    dst,
                    src,
                    off,
                    ..
                } => {
                    let p = s.regs[src.num() as usize];
                    s.regs[dst.num() as usize] = self.load(&s, &p, off as i64, size);
                    push(&mut out, next, s);
                }
                Insn::St { size, dst, off, .. } => {
                    let p = s.regs[dst.num() as usize];
                    self.store(&mut s, &p, off as i64, size, Prov::default(), slot);
                    push(&mut out, next, s);
                }
                Insn::Stx {
                    size,
                    dst,
                    src,
                    off,
                } => {
                    let p = s.regs[dst.num() as usize];
                    let v = s.regs[src.num() as usize];
                    self.store(&mut s, &p, off as i64, size, v, slot);
                    push(&mut out, next, s);
                }
                Insn::Atomic {
                    size,
                    op,
                    dst,
                    src,
                    off,
                } => {
                    let p = s.regs[dst.num() as usize];
                    let v = s.regs[src.num() as usize];
                    let old = self.load(&s, &p, off as i64, size);
                    self.store(&mut s, &p, off as i64, size, v, slot);
                    match op {
                        AtomicOp::CmpXchg => s.regs[0] = old,
                        AtomicOp::Xchg => s.regs[src.num() as usize] = old,
                        AtomicOp::Add { fetch: true }
                        | AtomicOp::And { fetch: true }
                        | AtomicOp::Or { fetch: true }
                        | AtomicOp::Xor { fetch: true } => s.regs[src.num() as usize] = old,
                        _ => {}
                    }
                    push(&mut out, next, s);
                }
                Insn::Lddw {
                    kind,
                    dst,
                    imm,
                    next_imm,
                } => {
                    s.regs[dst.num() as usize] = match kind {
                        LddwKind::Imm64 => Prov::konst(Insn::imm64(imm, next_imm) as i64),
                        LddwKind::MapIdx => Prov {
                            handles: bit(imm as usize),
                            ..Prov::default()
                        },
                        LddwKind::MapIdxValue => Prov {
                            vals: bit(imm as usize),
                            ..Prov::default()
                        },
                        LddwKind::Func => {
                            self.give_up(slot, "takes a function's address (a callback)");
                            return;
                        }
                        _ => Prov::any(),
                    };
                    push(&mut out, next, s);
                }
                Insn::LdAbs { .. } | Insn::LdInd { .. } => {
                    for r in 0..=5 {
                        s.regs[r] = Prov::default();
                    }
                    push(&mut out, next, s);
                }
                Insn::Ja { off } => {
                    push(&mut out, self.index(slot as i64 + 1 + off as i64), s);
                }
                Insn::Gotol { imm } => {
                    push(&mut out, self.index(slot as i64 + 1 + imm as i64), s);
                }
                Insn::Jmp { off, .. } | Insn::MayGoto { off } => {
                    push(
                        &mut out,
                        self.index(slot as i64 + 1 + off as i64),
                        s.clone(),
                    );
                    push(&mut out, next, s);
                }
                Insn::Call {
                    kind: CallKind::Helper,
                    imm,
                } => {
                    self.helper(&mut s, imm, slot);
                    push(&mut out, next, s);
                }
                Insn::Call {
                    kind: CallKind::Local,
                    imm,
                } => {
                    let target = slot as i64 + 1 + imm as i64;
                    let Some(t) = self.index(target) else {
                        self.give_up(slot, "call outside the code");
                        return;
                    };
                    let mut regs = [Prov::default(); 11];
                    for (r, v) in regs.iter_mut().enumerate().take(6).skip(1) {
                        *v = s.regs[r].loose();
                    }
                    regs[10] = Prov {
                        fp: Some(0),
                        ..Prov::default()
                    };
                    out.push((
                        t,
                        State {
                            regs,
                            slots: BTreeMap::new(),
                        },
                    ));
                    let sites = callers.entry(target as usize).or_default();
                    if !sites.contains(&i) {
                        sites.push(i);
                    }
                    if let Some(r0) = self.ret.get(&(target as usize)) {
                        s.regs[0] = *r0;
                        for r in 1..=5 {
                            s.regs[r] = Prov::default();
                        }
                        push(&mut out, next, s);
                    }
                }
                Insn::Call { .. } | Insn::Callx { .. } => {
                    self.give_up(slot, "calls a kfunc or an indirect target");
                    return;
                }
                Insn::Exit => {
                    let Some(f) = self.image.function_at(slot) else {
                        continue;
                    };
                    let start = f.start;
                    let r0 = s.regs[0].loose();
                    let old = self.ret.get(&start).copied();
                    let new = old.map_or(r0, |o| o.join(&r0));
                    if old != Some(new) {
                        self.ret.insert(start, new);
                        // Resume every caller seen so far.
                        for &c in callers.get(&start).map(Vec::as_slice).unwrap_or(&[]) {
                            let Some(cs) = at[c].clone() else { continue };
                            let mut r = cs;
                            r.regs[0] = new;
                            for k in 1..=5 {
                                r.regs[k] = Prov::default();
                            }
                            let cslot = self.slot_of[c];
                            let nx = self.index((cslot + 1) as i64);
                            push(&mut out, nx, r);
                        }
                    }
                }
            }
            for (t, ns) in out {
                let merged = match &at[t] {
                    Some(old) => {
                        let j = old.join(&ns);
                        if &j == old {
                            continue;
                        }
                        j
                    }
                    None => ns,
                };
                at[t] = Some(merged);
                work.push(t);
            }
        }
    }

    fn load(&self, s: &State, p: &Prov, off: i64, size: Size) -> Prov {
        if p.any {
            return Prov::any();
        }
        let mut v = Prov::default();
        if p.ctx && size == Size::W && matches!(off, 0 | 4 | 8) {
            v.pkt = true;
        }
        if p.stack {
            v = v.join(&self.spilled);
        }
        if let Some(k) = p.fp {
            let at = k.wrapping_add(off);
            let n = size.bytes() as i64;
            for (&a, x) in s.slots.range(at.saturating_sub(7)..at.saturating_add(n)) {
                if a == at && n == 8 {
                    v = v.join(x);
                } else if !x.is_scalar() {
                    // Part of a spilled pointer: keep its origins.
                    v = v.join(&x.loose());
                }
            }
            if self.loose_store {
                v = v.join(&self.spilled);
            }
            if n == 8 && v.is_scalar() {
                if let Some(x) = s.slots.get(&at) {
                    v.konst = x.konst;
                }
            }
        }
        v
    }

    fn store(&mut self, s: &mut State, p: &Prov, off: i64, size: Size, v: Prov, slot: usize) {
        if p.any {
            self.give_up(slot, "stores through a pointer the scan does not follow");
            return;
        }
        self.written |= p.vals | p.handles;
        if !v.is_scalar() {
            self.spilled = self.spilled.join(&v.loose());
        }
        if p.stack {
            self.loose_store = true;
        }
        if let Some(k) = p.fp {
            let at = k.wrapping_add(off);
            let n = size.bytes() as i64;
            let only = !p.stack && !p.pkt && !p.ctx && p.vals == 0 && p.handles == 0;
            if only {
                let stale: Vec<i64> = s
                    .slots
                    .range(at.saturating_sub(7)..at.saturating_add(n))
                    .map(|(a, _)| *a)
                    .collect();
                for a in stale {
                    s.slots.remove(&a);
                }
                if n == 8 || !v.is_scalar() {
                    s.slots.insert(at, v);
                }
            } else {
                let j = s.slots.get(&at).map_or(v, |x| x.join(&v));
                s.slots.insert(at, j);
            }
        }
    }

    fn helper(&mut self, s: &mut State, id: i32, slot: usize) {
        if id == TAIL_CALL {
            self.give_up(slot, "tail call (the called program is not scanned)");
            return;
        }
        if !NO_MAP_WRITES.contains(&id) {
            for r in 1..=5 {
                let a = s.regs[r];
                if a.any {
                    self.give_up(slot, "hands a pointer the scan does not follow to a helper");
                    return;
                }
                self.written |= a.vals | a.handles;
            }
        }
        let r0 = if VALUE_OF_R1.contains(&id) {
            let h = s.regs[1];
            if h.any || h.handles == 0 {
                Prov::any()
            } else {
                Prov {
                    vals: h.handles,
                    ..Prov::default()
                }
            }
        } else if SCALAR_RESULT.contains(&id) {
            Prov::default()
        } else {
            Prov::any()
        };
        s.regs[0] = r0;
        for r in 1..=5 {
            s.regs[r] = Prov::default();
        }
    }
}

fn push(out: &mut Vec<(usize, State)>, to: Option<usize>, s: State) {
    if let Some(t) = to {
        out.push((t, s));
    }
}

/// `a op b`'s origins: pointer arithmetic keeps the pointer's, constants
/// are followed through moves, adds and subtractions.
fn alu(op: AluOp, a: &Prov, b: &Prov) -> Prov {
    match op {
        AluOp::Mov | AluOp::MovSx(_) => *b,
        AluOp::Add | AluOp::Sub => {
            let neg = op == AluOp::Sub;
            if let (Some(k), Some(c)) = (a.fp, b.konst) {
                if b.is_scalar() {
                    let mut p = *a;
                    p.fp = Some(if neg {
                        k.wrapping_sub(c)
                    } else {
                        k.wrapping_add(c)
                    });
                    return p;
                }
            }
            if let (Some(x), Some(y)) = (a.konst, b.konst) {
                if a.is_scalar() && b.is_scalar() {
                    return Prov::konst(if neg {
                        x.wrapping_sub(y)
                    } else {
                        x.wrapping_add(y)
                    });
                }
            }
            if !neg {
                if let (Some(c), Some(k)) = (a.konst, b.fp) {
                    if a.is_scalar() {
                        let mut p = *b;
                        p.fp = Some(k.wrapping_add(c));
                        return p;
                    }
                }
            }
            a.loose().join(&b.loose())
        }
        _ => a.loose().join(&b.loose()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfkit_isa::{Cond, Reg, Width};
    use nfkit_object::{MapKind, MapSpec, MapType, ProgType};

    fn image(insns: Vec<Insn>, maps: usize) -> Image {
        let mut img = Image::from_insns("f", ProgType::Xdp, insns);
        img.maps = (0..maps)
            .map(|i| MapSpec {
                name: format!("m{i}"),
                kind: MapKind::Declared,
                map_type: MapType::Array,
                key_size: 4,
                value_size: 8,
                max_entries: 1,
                flags: 0,
                key_type_id: None,
                value_type_id: None,
                data: None,
                pin_by_name: false,
                inner: None,
            })
            .collect();
        img
    }

    fn lookup(map: i32) -> Vec<Insn> {
        vec![
            Insn::St {
                size: Size::W,
                dst: Reg::FP,
                off: -4,
                imm: 0,
            },
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst: Reg::R2,
                src: Operand::Reg(Reg::FP),
            },
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Add,
                dst: Reg::R2,
                src: Operand::Imm(-4),
            },
            Insn::Lddw {
                kind: LddwKind::MapIdx,
                dst: Reg::R1,
                imm: map,
                next_imm: 0,
            },
            Insn::Call {
                kind: CallKind::Helper,
                imm: 1,
            },
        ]
    }

    fn r(n: u8) -> Reg {
        [
            Reg::R0,
            Reg::R1,
            Reg::R2,
            Reg::R3,
            Reg::R4,
            Reg::R5,
            Reg::R6,
        ][n as usize]
    }

    /// Looks up map 0 (read) and map 1, spills map 1's value pointer,
    /// reloads it and stores through it: only map 1 is written.
    #[test]
    fn store_through_a_spilled_value_pointer() {
        let mut p = lookup(0);
        p.push(Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: r(6),
            src: Operand::Reg(Reg::R0),
        });
        p.extend(lookup(1));
        p.extend([
            Insn::Jmp {
                width: Width::W64,
                cond: Cond::Eq,
                dst: Reg::R0,
                src: Operand::Imm(0),
                off: 4,
            },
            Insn::Stx {
                size: Size::DW,
                dst: Reg::FP,
                src: Reg::R0,
                off: -16,
            },
            Insn::Ldx {
                size: Size::DW,
                signed: false,
                dst: r(3),
                src: Reg::FP,
                off: -16,
            },
            Insn::Ldx {
                size: Size::DW,
                signed: false,
                dst: r(4),
                src: r(6),
                off: 0,
            },
            Insn::Stx {
                size: Size::DW,
                dst: r(3),
                src: r(4),
                off: 0,
            },
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst: Reg::R0,
                src: Operand::Imm(2),
            },
            Insn::Exit,
        ]);
        let w = written_maps(&image(p, 3), 0);
        assert_eq!(w, Writes::Maps(0b10));
        assert!(!w.may_write(0) && w.may_write(1) && !w.may_write(2));
    }

    /// A pointer loaded from a map value is not followed: every map.
    #[test]
    fn store_through_a_loaded_pointer_is_every_map() {
        let mut p = lookup(0);
        p.extend([
            Insn::Jmp {
                width: Width::W64,
                cond: Cond::Eq,
                dst: Reg::R0,
                src: Operand::Imm(0),
                off: 2,
            },
            Insn::Ldx {
                size: Size::DW,
                signed: false,
                dst: r(1),
                src: Reg::R0,
                off: 0,
            },
            Insn::St {
                size: Size::B,
                dst: r(1),
                off: 0,
                imm: 1,
            },
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst: Reg::R0,
                src: Operand::Imm(2),
            },
            Insn::Exit,
        ]);
        // A map value's bytes are scalars: the store goes through a
        // scalar, which no map is.
        assert_eq!(written_maps(&image(p.clone(), 2), 0), Writes::Maps(0));
        // An unknown helper's result is not followed.
        p[4] = Insn::Call {
            kind: CallKind::Helper,
            imm: 160,
        };
        assert!(matches!(written_maps(&image(p, 2), 0), Writes::All(_)));
    }

    /// `bpf_map_update_elem` on `map` (the lookup's set-up), then XDP_PASS.
    fn update(map: i32) -> Vec<Insn> {
        let mut p = lookup(map);
        p[4] = Insn::Call {
            kind: CallKind::Helper,
            imm: 2,
        };
        p.extend([
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst: Reg::R0,
                src: Operand::Imm(2),
            },
            Insn::Exit,
        ]);
        p
    }

    /// `bpf_map_update_elem` writes the map it is handed.
    #[test]
    fn update_helper_writes_its_map() {
        assert_eq!(written_maps(&image(update(1), 2), 0), Writes::Maps(0b10));
    }

    /// The cache answers per image content: an image that differs in
    /// one instruction is scanned again, the same content is not.
    #[test]
    fn cache_is_per_image_content() {
        let a = image(update(1), 2);
        assert_eq!(written_maps_cached(&a, 0), written_maps(&a, 0));
        assert_eq!(written_maps_cached(&a, 0), Writes::Maps(0b10));
        // The same program on map 0: another image, another answer.
        let b = image(update(0), 2);
        assert_eq!(written_maps_cached(&b, 0), Writes::Maps(0b01));
        assert_eq!(written_maps_cached(&a, 0), Writes::Maps(0b10));
    }
}
