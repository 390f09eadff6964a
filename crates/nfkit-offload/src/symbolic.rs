//! The symbolic executor: runs an XDP entry of an [`Image`] over a
//! symbolic packet and lists its paths, depth first.
//!
//! Every fork on a header field is a list of alternatives, each a set of
//! required packet bits (a ternary), tried in order, plus "none of them".
//! Paths come out with the alternatives' subtrees first, and a path's
//! [`Pattern`] keeps only the bits it *required* (never the negations of
//! the alternatives it skipped). That is what makes the paths, in order,
//! a first-match rule list: a packet that skipped an alternative does
//! not match it, so it cannot match any earlier path's pattern before its
//! own (`docs/offload.md`, "First-match order").

use crate::error::OffloadError;
use crate::pattern::Pattern;
use crate::rewrite::{PCell, Rewrite};
use crate::source::MapSource;
use crate::value::{literal, Bit, Bits, Val, ONE, ZERO};
use nfkit_isa::{
    AluOp, AtomicOp, ByteOrder, CallKind, Cond, Insn, LddwKind, Operand, Reg, Size, Width,
};
use nfkit_object::{Image, MapKind, MapType, ProgType};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::fmt;
use std::rc::Rc;

/// A decided XDP verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XdpAction {
    Drop,
    Pass,
    Tx,
    /// `bpf_redirect(ifindex, 0)` then `XDP_REDIRECT`.
    Redirect(u32),
}

impl fmt::Display for XdpAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XdpAction::Drop => write!(f, "DROP"),
            XdpAction::Pass => write!(f, "PASS"),
            XdpAction::Tx => write!(f, "TX"),
            XdpAction::Redirect(i) => write!(f, "REDIRECT({i})"),
        }
    }
}

/// How a path ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A verdict that depends only on the path's pattern.
    Action(XdpAction),
    /// The eBPF program must decide (state, time, helpers, fields the
    /// model cannot name, budgets): the reason, naming the slot.
    Software(String),
}

/// One path through the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// The packet bits and length the path required.
    pub pattern: Pattern,
    pub outcome: Outcome,
    /// Instructions executed along it.
    pub steps: usize,
    /// Counter additions along it (statistics no decision reads): a
    /// rule standing for the path adds its packet count times these.
    pub counts: Vec<Count>,
    /// The header rewrite a TX or redirect makes first (stores into the
    /// packet that flower can make: `pedit`, `csum`).
    pub rewrite: Option<Rewrite>,
}

/// `add` added atomically to the `size`-byte counter at `off` in the
/// value of `key` in map `map`, which no decision of the program reads.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Count {
    pub map: String,
    pub key: Vec<u8>,
    pub off: usize,
    pub size: usize,
    pub add: u64,
}

/// The paths of one entry, in first-match order.
#[derive(Clone, Debug)]
pub struct Analysis {
    pub entry: String,
    pub paths: Vec<Path>,
    /// Whether the path budget cut the exploration short.
    pub truncated: bool,
    /// Maps the decided paths read that the program writes itself (with
    /// [`Limits::data_path_maps`]): the rules hold while they do not
    /// change, so map sync must follow them.
    pub live_maps: Vec<String>,
    /// Whether a decision compared the clock ([`Limits::now_ns`]): the
    /// rules hold at that time only.
    pub uses_clock: bool,
    /// With [`uses_clock`](Analysis::uses_clock): the clock values
    /// (inclusive) for which every comparison of the clock goes the way
    /// it went, so the analysis is the same at any of them (see
    /// [`Limits::now_ns`]); `(now, now)` once the clock entered any
    /// arithmetic.
    pub clock_window: Option<(u64, u64)>,
}

impl Analysis {
    /// Number of paths with a decided verdict.
    pub fn decided(&self) -> usize {
        self.paths
            .iter()
            .filter(|p| matches!(p.outcome, Outcome::Action(_)))
            .count()
    }
}

/// Exploration budgets.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Finished paths; the rest of the tree becomes software paths.
    pub max_paths: usize,
    /// Instructions per path (bounds loops); beyond it, software.
    pub max_steps: usize,
    /// Entries a lookup may expand into; larger maps make software.
    pub max_map_entries: usize,
    /// Expand lookups in maps the program writes itself (LRU and hash
    /// maps the data path fills) from their current entries, as for any
    /// map, instead of sending such paths to software. Sound only while
    /// rules follow the maps (map sync), and only because an offloaded
    /// path writes nothing a decision reads (its packets would not have
    /// changed the program's state); [`Analysis::live_maps`] lists them.
    pub data_path_maps: bool,
    /// The clock (`bpf_ktime_get_ns`) as this constant instead of
    /// unknown, so decisions comparing it (expiry times) are decided as
    /// of now; [`Analysis::uses_clock`] says whether any did. The clock
    /// is followed while it stays whole (moved, spilled and reloaded,
    /// compared): each comparison narrows
    /// [`Analysis::clock_window`]; arithmetic on it, a 32-bit view of it
    /// or a byte swap pins the window to `now`.
    pub now_ns: Option<u64>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_paths: 4096,
            max_steps: 20_000,
            max_map_entries: 1024,
            data_path_maps: false,
            now_ns: None,
        }
    }
}

const XDP_REDIRECT: u64 = 4;
const STACK_FRAME: i64 = 512;
const MAX_FRAMES: usize = 8;
const HELPER_MAP_LOOKUP: i32 = 1;
const HELPER_REDIRECT: i32 = 23;
const HELPER_KTIME: i32 = 5;
const HELPER_REDIRECT_MAP: i32 = 51;
/// Helpers that only return a value (the clock, the CPU number); random
/// numbers are not among them: their sequence is state.
const VALUE_HELPERS: [i32; 3] = [5, 8, 125];

/// One stack byte.
#[derive(Clone, Debug)]
enum Cell {
    Bits([Bit; 8]),
    /// Byte `k` of a spilled pointer.
    Ptr(Val, u8),
    Unknown,
}

#[derive(Clone, Debug)]
struct Frame {
    ret: usize,
    saved: [Val; 4],
    fp: Val,
}

#[derive(Clone, Debug)]
struct State {
    pc: usize,
    regs: [Val; 11],
    stack: BTreeMap<i64, Cell>,
    frames: Vec<Frame>,
    pat: Pattern,
    max_len: usize,
    steps: usize,
    redirect: Option<u32>,
    /// Maps whose contents the path's decisions used.
    reads: Vec<usize>,
    counts: Vec<Count>,
    /// Run-local scratch bytes this run wrote (see [`SCRATCH_MAPS`]):
    /// `(map, key, offset)`.
    scratch: BTreeMap<(usize, Rc<[u8]>, i64), Cell>,
    /// Bytes this run stored into the packet, by offset.
    pkt: BTreeMap<i64, PCell>,
    /// Set when the pattern left the field model for good
    /// ([`crate::fields::outside_model`]): the path ends in software at
    /// its next step.
    outside: Option<String>,
}

/// nfkit's own per-CPU scratch maps (the parse-once block and the NF
/// frames): the classifier writes a slot before anything reads it in
/// the same run, so they are run-local memory, followed like the stack.
/// A read of a byte the run has not written is state an earlier packet
/// left: software.
pub const SCRATCH_MAPS: [&str; 2] = [nfkit_abi::maps::PKTINFO, nfkit_abi::maps::FRAME];

/// A required value for some bits: `(bit, wanted)`.
type Constraint = Vec<(Bit, bool)>;

/// What taking an alternative does.
#[derive(Clone)]
enum Effect {
    Goto(usize),
    /// A helper's result in r0 (r1-r5 clobbered), then the next slot.
    Return(Val),
    /// Register `.0` set to `.1`, then slot `.2`.
    Set(usize, Val, usize),
}

enum Step {
    Next,
    Fork(Vec<State>),
    Done(Outcome),
}

/// Analyses entry `entry` of `image`, reading map contents from `maps`.
pub fn analyse(
    image: &Image,
    entry: &str,
    maps: &dyn MapSource,
    limits: &Limits,
) -> Result<Analysis, OffloadError> {
    analyse_within(image, entry, maps, limits, Pattern::any())
}

/// [`analyse`] for the packets `start` matches only (its bits required
/// from the first instruction on, its length assumed).
pub fn analyse_within(
    image: &Image,
    entry: &str,
    maps: &dyn MapSource,
    limits: &Limits,
    start: Pattern,
) -> Result<Analysis, OffloadError> {
    let e = image
        .entry(entry)
        .ok_or_else(|| OffloadError::NoEntry(entry.to_string()))?;
    if e.prog_type != ProgType::Xdp {
        return Err(OffloadError::NotXdp {
            entry: entry.to_string(),
            prog_type: e.prog_type.name().to_string(),
        });
    }
    let f = image
        .functions
        .get(e.function)
        .ok_or_else(|| OffloadError::BadFunction(entry.to_string(), e.function))?;
    let mut at_slot = vec![None; image.slot_count() + 1];
    for (i, s) in nfkit_isa::slot_offsets(&image.insns)
        .into_iter()
        .enumerate()
    {
        at_slot[s] = Some(i);
    }
    let ex = Exec {
        image,
        maps,
        limits,
        at_slot,
        written: RefCell::new(BTreeSet::new()),
        loaded: RefCell::new(Vec::new()),
        clock: std::cell::Cell::new(false),
        window: std::cell::Cell::new((0, u64::MAX)),
        scratch: image
            .maps
            .iter()
            .map(|m| m.map_type == MapType::PercpuArray && SCRATCH_MAPS.contains(&m.name.as_str()))
            .collect(),
    };
    let mut regs: [Val; 11] = std::array::from_fn(|_| Val::Unknown);
    regs[1] = Val::Ctx;
    regs[10] = Val::Stack(0);
    let start = State {
        pc: f.start,
        regs,
        stack: BTreeMap::new(),
        frames: Vec::new(),
        pat: start,
        max_len: usize::MAX,
        steps: 0,
        redirect: None,
        reads: Vec::new(),
        counts: Vec::new(),
        scratch: BTreeMap::new(),
        pkt: BTreeMap::new(),
        outside: None,
    };
    let mut work = vec![start];
    let mut paths = Vec::new();
    let mut reads: Vec<Vec<usize>> = Vec::new();
    let mut early_software = false;
    let mut truncated = false;
    while let Some(mut st) = work.pop() {
        if paths.len() >= limits.max_paths {
            truncated = true;
            paths.push(Path {
                pattern: st.pat,
                outcome: Outcome::Software(format!(
                    "path budget ({}) reached at {}",
                    limits.max_paths,
                    image.describe_slot(st.pc)
                )),
                steps: st.steps,
                counts: st.counts,
                rewrite: None,
            });
            reads.push(st.reads);
            continue;
        }
        loop {
            match ex.step(&mut st)? {
                Step::Next => {}
                Step::Fork(mut alts) => {
                    alts.reverse();
                    work.extend(alts);
                    break;
                }
                Step::Done(outcome) => {
                    let (outcome, rewrite) = ex.rewrite_of(&st, outcome);
                    early_software |= matches!(outcome, Outcome::Software(_));
                    reads.push(std::mem::take(&mut st.reads));
                    paths.push(Path {
                        pattern: st.pat.clone(),
                        outcome,
                        steps: st.steps,
                        counts: std::mem::take(&mut st.counts),
                        rewrite,
                    });
                    break;
                }
            }
        }
    }
    // A counter some decision reads (or something writes otherwise) is
    // state: the paths adding to it are software.
    let written = ex.written.borrow();
    let loaded = ex.loaded.borrow();
    for p in paths.iter_mut() {
        if !matches!(p.outcome, Outcome::Action(_)) {
            continue;
        }
        let clash = p.counts.iter().find(|c| {
            let m = image.maps.iter().position(|s| s.name == c.map);
            m.is_some_and(|m| written.contains(&m))
                || loaded.iter().any(|(lm, k, a, n)| {
                    Some(*lm) == m && **k == *c.key && *a < c.off + c.size && c.off < a + n
                })
        });
        if let Some(c) = clash {
            p.outcome = Outcome::Software(format!(
                "adds to map {} (key {:02x?}, offset {}), which the program also reads or writes (state)",
                c.map, c.key, c.off
            ));
        }
    }
    drop(loaded);
    // A decision that read a map the program may write depends on state:
    // a write some explored path made, or, when some path stopped early,
    // one the pointer-provenance scan cannot rule out in the code those
    // paths did not reach.
    let statics = early_software.then(|| crate::writes::written_maps_cached(image, e.function));
    let scan_lost = matches!(statics, Some(crate::writes::Writes::All(_)));
    let may_write = |m: usize| statics.as_ref().is_some_and(|w| w.may_write(m));
    let mut live_maps: Vec<String> = Vec::new();
    for (p, r) in paths.iter_mut().zip(reads) {
        if !matches!(p.outcome, Outcome::Action(_)) {
            continue;
        }
        let hit = r.iter().find(|m| {
            let ro = image.maps.get(**m).is_some_and(|s| {
                s.flags & BPF_F_RDONLY_PROG != 0
                    || matches!(
                        s.kind,
                        MapKind::Global {
                            read_only: true,
                            ..
                        }
                    )
            });
            // nfkit's configuration is the control plane's (docs/abi.md
            // 4): when the scan lost track of a pointer, only a write
            // some explored path made counts for it.
            let control = scan_lost
                && image
                    .maps
                    .get(**m)
                    .is_some_and(|s| s.name == nfkit_abi::maps::CONFIG);
            !ro && ((may_write(**m) && !control) || written.contains(m))
        });
        if let Some(m) = hit {
            let name = image.maps.get(*m).map_or("?", |s| s.name.as_str());
            if limits.data_path_maps {
                for m in r.iter() {
                    let name = image.maps.get(*m).map_or("?", |s| s.name.as_str());
                    let live = written.contains(m) || may_write(*m);
                    if live && !live_maps.iter().any(|l| l == name) {
                        live_maps.push(name.to_string());
                    }
                }
                continue;
            }
            p.outcome = Outcome::Software(format!(
                "reads map {name}, which the program may write (state)"
            ));
        }
    }
    drop(written);
    live_maps.sort();
    Ok(Analysis {
        entry: entry.to_string(),
        paths,
        truncated,
        live_maps,
        uses_clock: ex.clock.get(),
        clock_window: ex.clock.get().then(|| ex.window.get()),
    })
}

const BPF_F_RDONLY_PROG: u32 = 1 << 7;

/// Map value bytes a path loaded: `(map, key, offset, length)`.
type Loaded = (usize, Rc<[u8]>, usize, usize);

struct Exec<'a> {
    image: &'a Image,
    maps: &'a dyn MapSource,
    limits: &'a Limits,
    at_slot: Vec<Option<usize>>,
    /// Maps some path wrote (or handed to a helper that may write).
    written: RefCell<BTreeSet<usize>>,
    /// Map value bytes some path loaded: `(map, key, offset, length)`.
    loaded: RefCell<Vec<Loaded>>,
    /// Whether a path took the clock as [`Limits::now_ns`].
    clock: std::cell::Cell<bool>,
    /// [`Analysis::clock_window`] so far.
    window: std::cell::Cell<(u64, u64)>,
    /// Per map index: whether it is a run-local scratch map.
    scratch: Vec<bool>,
}

fn sw(ex: &Exec, slot: usize, what: impl fmt::Display) -> Step {
    Step::Done(Outcome::Software(format!(
        "{} (slot {slot}): {what}",
        ex.image.describe_slot(slot)
    )))
}

impl Exec<'_> {
    fn target(&self, slot: usize, off: i64) -> Result<usize, OffloadError> {
        let t = slot as i64 + 1 + off;
        match usize::try_from(t)
            .ok()
            .and_then(|u| self.at_slot.get(u).map(|x| (u, x)))
        {
            Some((u, Some(_))) => Ok(u),
            _ => Err(OffloadError::BadTarget {
                slot,
                at: self.image.describe_slot(slot),
                target: t,
            }),
        }
    }

    fn step(&self, st: &mut State) -> Result<Step, OffloadError> {
        let pc = st.pc;
        let Some(Some(idx)) = self.at_slot.get(pc) else {
            return Err(OffloadError::BadTarget {
                slot: pc,
                at: self.image.describe_slot(pc),
                target: pc as i64,
            });
        };
        let insn = self.image.insns[*idx];
        if let Some(why) = st.outside.take() {
            return Ok(sw(self, pc, why));
        }
        st.steps += 1;
        if st.steps > self.limits.max_steps {
            return Ok(sw(
                self,
                pc,
                format!("depth budget ({} instructions)", self.limits.max_steps),
            ));
        }
        let next = pc + insn.slots();
        match insn {
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Add,
                dst,
                src: Operand::Reg(r),
            } if header_offset(&reg(st, dst), &reg(st, r)).is_some() => {
                // `ip + ihl * 4`: a packet pointer plus a value made of
                // packet bits. The field model's IPv4 header is 20 bytes
                // (IHL 5): that value is one alternative, anything else
                // leaves an unknown pointer (software where it is used).
                let Some((p, x)) = header_offset(&reg(st, dst), &reg(st, r)) else {
                    return Ok(Step::Next);
                };
                let d = dst.num() as usize;
                let c: Constraint = (0..64)
                    .map(|i| (x.0[i], IPV4_HEADER >> i & 1 == 1))
                    .collect();
                let alt = (
                    c,
                    Effect::Set(d, Val::Pkt(p.wrapping_add(IPV4_HEADER as i64)), next),
                );
                return Ok(self.fork(st, vec![alt], Effect::Set(d, Val::Unknown, next)));
            }
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => {
                let b = match src {
                    Operand::Reg(r) => reg(st, r),
                    Operand::Imm(i) => Val::konst(i as i64 as u64),
                };
                let a = reg(st, dst);
                // A move copies the clock whole (a 32-bit one does not);
                // anything else is arithmetic on it.
                if op != AluOp::Mov {
                    self.clock_arithmetic(&a);
                    self.clock_arithmetic(&b);
                } else if width == Width::W32 {
                    self.clock_arithmetic(&b);
                }
                let sum = op == AluOp::Add && b.as_const().is_some() && complemented(&a);
                let r = match sum.then(|| lin_alu(width, op, &a, &b, &st.pat)).flatten() {
                    Some(r) => r,
                    None => match alu(width, op, a.clone(), b.clone()) {
                        Val::Unknown => lin_alu(width, op, &a, &b, &st.pat).unwrap_or(Val::Unknown),
                        r => r,
                    },
                };
                st.regs[dst.num() as usize] = r;
                st.pc = next;
            }
            Insn::Endian { order, bits, dst } => {
                self.clock_arithmetic(&reg(st, dst));
                let v = match reg(st, dst) {
                    Val::Scalar(b) => {
                        let b = match order {
                            ByteOrder::Le => b.truncate(bits as usize),
                            ByteOrder::Be | ByteOrder::Swap => b.bswap(bits as usize),
                        };
                        Val::Scalar(Box::new(b))
                    }
                    Val::Lin(l) if bits == 16 => {
                        let l = match order {
                            ByteOrder::Le => l.truncate(2),
                            ByteOrder::Be | ByteOrder::Swap => l.bswap16(),
                        };
                        l.map_or(Val::Unknown, |l| Val::Lin(Rc::new(l)))
                    }
                    _ => Val::Unknown,
                };
                st.regs[dst.num() as usize] = v;
                st.pc = next;
            }
            Insn::Ldx {
                size,
                signed,
                dst,
                src,
                off,
            } => {
                if let Val::MapValue {
                    map, key, off: o, ..
                } = reg(st, src)
                {
                    if self.is_scratch(map) {
                        // Run-local: `load` reads what this run wrote.
                    } else if !st.reads.contains(&map) {
                        st.reads.push(map);
                    }
                    let at = o.wrapping_add(off as i64).max(0) as usize;
                    if !self.is_scratch(map) {
                        self.loaded.borrow_mut().push((map, key, at, size.bytes()));
                    }
                }
                let v = match self.load(st, reg(st, src), off as i64, size) {
                    Ok(v) => v,
                    Err(why) => return Ok(sw(self, pc, why)),
                };
                let v = match (v, signed) {
                    (Val::Scalar(b), true) => Val::Scalar(Box::new(sign_extend(&b, size.bits()))),
                    (v, _) => v,
                };
                st.regs[dst.num() as usize] = v;
                st.pc = next;
            }
            Insn::St {
                size,
                dst,
                off,
                imm,
            } => {
                let v = Val::konst(imm as i64 as u64);
                self.note_write(&reg(st, dst));
                if let Err(why) = self.store(st, reg(st, dst), off as i64, size, v) {
                    return Ok(sw(self, pc, why));
                }
                st.pc = next;
            }
            Insn::Stx {
                size,
                dst,
                src,
                off,
            } => {
                self.note_write(&reg(st, dst));
                if let Err(why) = self.store(st, reg(st, dst), off as i64, size, reg(st, src)) {
                    return Ok(sw(self, pc, why));
                }
                st.pc = next;
            }
            Insn::Atomic {
                size,
                op: AtomicOp::Add { fetch: false },
                dst,
                src,
                off,
            } => {
                // A counter: fine while no decision reads it (checked
                // once every path is known).
                let (
                    Val::MapValue {
                        map, key, off: o, ..
                    },
                    Some(add),
                ) = (reg(st, dst), reg(st, src).as_const())
                else {
                    self.note_write(&reg(st, dst));
                    return Ok(sw(self, pc, "atomic update (state)"));
                };
                let Some(spec) = self.image.maps.get(map) else {
                    return Ok(sw(self, pc, format!("map index {map} out of range")));
                };
                st.counts.push(Count {
                    map: spec.name.clone(),
                    key: key.to_vec(),
                    off: o.wrapping_add(off as i64).max(0) as usize,
                    size: size.bytes(),
                    add,
                });
                st.pc = next;
            }
            Insn::Atomic { dst, .. } => {
                self.note_write(&reg(st, dst));
                return Ok(sw(self, pc, "atomic update (state)"));
            }
            Insn::Lddw {
                kind,
                dst,
                imm,
                next_imm,
            } => {
                let v = match kind {
                    LddwKind::Imm64 => Val::konst(Insn::imm64(imm, next_imm)),
                    LddwKind::MapIdx => Val::Map(imm as usize),
                    LddwKind::MapIdxValue => {
                        if !st.reads.contains(&(imm as usize)) {
                            st.reads.push(imm as usize);
                        }
                        self.global(imm as usize, next_imm as i64)
                    }
                    _ => Val::Unknown,
                };
                st.regs[dst.num() as usize] = v;
                st.pc = next;
            }
            Insn::Ja { off } => st.pc = self.target(pc, off as i64)?,
            Insn::Gotol { imm } => st.pc = self.target(pc, imm as i64)?,
            Insn::Jmp {
                width,
                cond,
                dst,
                src,
                off,
            } => {
                let t = self.target(pc, off as i64)?;
                let b = match src {
                    Operand::Reg(r) => reg(st, r),
                    Operand::Imm(i) => Val::konst(i as i64 as u64),
                };
                return Ok(self.branch(st, width, cond, reg(st, dst), b, t, next));
            }
            Insn::Call {
                kind: CallKind::Helper,
                imm,
            } => return Ok(self.helper(st, imm, next)),
            Insn::Call {
                kind: CallKind::Local,
                imm,
            } => {
                if st.frames.len() + 1 >= MAX_FRAMES {
                    return Ok(sw(self, pc, "call depth"));
                }
                let t = self.target(pc, imm as i64)?;
                let fp = reg(st, Reg::FP);
                let Val::Stack(base) = fp else {
                    return Ok(sw(self, pc, "frame pointer lost"));
                };
                st.frames.push(Frame {
                    ret: next,
                    saved: std::array::from_fn(|i| st.regs[6 + i].clone()),
                    fp: fp.clone(),
                });
                st.regs[10] = Val::Stack(base - STACK_FRAME);
                st.pc = t;
            }
            Insn::Exit => {
                if let Some(fr) = st.frames.pop() {
                    for (i, v) in fr.saved.into_iter().enumerate() {
                        st.regs[6 + i] = v;
                    }
                    for r in 1..=5 {
                        st.regs[r] = Val::Unknown;
                    }
                    st.regs[10] = fr.fp;
                    st.pc = fr.ret;
                } else {
                    return Ok(self.finish(st));
                }
            }
            other => return Ok(sw(self, pc, format!("unsupported instruction {other:?}"))),
        }
        Ok(Step::Next)
    }

    fn note_write(&self, base: &Val) {
        if let Val::MapValue { map, .. } = base {
            if !self.is_scratch(*map) {
                self.written.borrow_mut().insert(*map);
            }
        }
    }

    /// Whether map index `m` is one of [`SCRATCH_MAPS`].
    fn is_scratch(&self, m: usize) -> bool {
        self.scratch.get(m).copied().unwrap_or(false)
    }

    /// A store: stack and scratch bytes are followed, anything else
    /// ends the path (the reason).
    fn store(&self, st: &mut State, base: Val, off: i64, size: Size, v: Val) -> Result<(), String> {
        let n = size.bytes();
        match base {
            Val::MapValue {
                map, key, off: o, ..
            } if self.is_scratch(map) => {
                let at = o.wrapping_add(off);
                self.scratch_range(map, &key, at, n)?;
                for (i, cell) in cells(&v, n).into_iter().enumerate() {
                    st.scratch
                        .insert((map, key.clone(), at.wrapping_add(i as i64)), cell);
                }
                Ok(())
            }
            Val::Pkt(a) => {
                let at = a.wrapping_add(off);
                if at < 0 || (at as usize).saturating_add(n) > st.pat.min_len {
                    return Err(format!(
                        "writes packet bytes {at}..{} beyond the checked length {}",
                        at + n as i64,
                        st.pat.min_len
                    ));
                }
                let id = crate::csum::Lin::store_id();
                for i in 0..n {
                    let cell = match &v {
                        Val::Scalar(b) => PCell::Bits(b.byte(i)),
                        Val::Lin(_) | Val::Affine { .. } if n <= 2 => PCell::Val {
                            v: v.clone(),
                            k: i as u8,
                            n: n as u8,
                            at,
                            id,
                        },
                        _ => PCell::Unknown,
                    };
                    st.pkt.insert(at + i as i64, cell);
                }
                Ok(())
            }
            base => store(st, base, off, size, v),
        }
    }

    /// The outcome of a finished path with what it stored into the
    /// packet: a TX or redirect takes the rewrite along (or goes to
    /// software when flower cannot make it); a drop makes stores moot;
    /// a pass hands the packet to the program, which makes them.
    fn rewrite_of(&self, st: &State, outcome: Outcome) -> (Outcome, Option<Rewrite>) {
        if st.pkt.is_empty() {
            return (outcome, None);
        }
        match outcome {
            Outcome::Action(a @ (XdpAction::Tx | XdpAction::Redirect(_))) => {
                match crate::rewrite::classify(&st.pkt, &st.pat) {
                    Ok(rw) => (Outcome::Action(a), rw),
                    Err(why) => (
                        Outcome::Software(format!(
                            "{} (slot {}): {why}",
                            self.image.describe_slot(st.pc),
                            st.pc
                        )),
                        None,
                    ),
                }
            }
            o => (o, None),
        }
    }

    /// A load of packet bytes some of which this run stored: their
    /// bits, a stored 16-bit sum read back whole, or a word of bytes
    /// that are each bits or a one-byte sum; else unknown.
    fn load_written(&self, st: &State, at: i64, n: usize) -> Val {
        let cells: Vec<Option<&PCell>> = (0..n as i64).map(|i| st.pkt.get(&(at + i))).collect();
        if cells
            .iter()
            .all(|c| matches!(c, None | Some(PCell::Bits(_))))
        {
            let mut b = Bits::packet(at as u32, n);
            for (i, c) in cells.iter().enumerate() {
                if let Some(PCell::Bits(x)) = c {
                    b.0[i * 8..i * 8 + 8].copy_from_slice(x);
                }
            }
            return Val::Scalar(Box::new(b));
        }
        if n == 2 {
            if let (
                Some(PCell::Val {
                    v, k: 0, n: 2, id, ..
                }),
                Some(PCell::Val {
                    k: 1, n: 2, id: i2, ..
                }),
            ) = (cells[0], cells[1])
            {
                if id == i2 {
                    return match crate::rewrite::lin_of(v, &st.pat).and_then(|l| l.truncate(2)) {
                        Some(l) => Val::Lin(Rc::new(l)),
                        None => Val::Unknown,
                    };
                }
            }
            let byte = |i: usize| -> Option<crate::csum::Lin> {
                let fixed = |p: u32| st.pat.bit(p);
                match cells[i] {
                    None => {
                        crate::csum::Lin::of_bits(&Bits::packet((at + i as i64) as u32, 1), &fixed)
                    }
                    Some(PCell::Bits(x)) => {
                        let mut b = Bits::constant(0);
                        b.0[..8].copy_from_slice(x);
                        crate::csum::Lin::of_bits(&b, &fixed)
                    }
                    Some(PCell::Val { k: 0, n: 1, id, .. }) => {
                        Some(crate::csum::Lin::stored_byte(*id))
                    }
                    _ => None,
                }
            };
            let word = byte(0)
                .zip(byte(1))
                .and_then(|(lo, hi)| lo.add(&hi.shift_bytes(1)?));
            if let Some(l) = word {
                return Val::Lin(Rc::new(l));
            }
        }
        Val::Unknown
    }

    /// An error unless `at..at + n` lies in a value of scratch map `m`.
    fn scratch_range(&self, m: usize, key: &[u8], at: i64, n: usize) -> Result<(), String> {
        let size = self.image.maps.get(m).map_or(0, |s| s.value_size as i64);
        if at < 0 || at + n as i64 > size {
            let name = self.image.maps.get(m).map_or("?", |s| s.name.as_str());
            return Err(format!(
                "scratch map {name} (key {key:02x?}) bytes {at}..{} out of its {size}-byte value",
                at + n as i64
            ));
        }
        Ok(())
    }

    fn finish(&self, st: &State) -> Step {
        let Some(code) = st.regs[0].as_const() else {
            return sw(self, st.pc, "returns a value not decided by header fields");
        };
        let a = match code as u32 {
            1 => XdpAction::Drop,
            2 => XdpAction::Pass,
            3 => XdpAction::Tx,
            4 => match st.redirect {
                Some(i) => XdpAction::Redirect(i),
                None => return sw(self, st.pc, "XDP_REDIRECT without a known target"),
            },
            c => return sw(self, st.pc, format!("returns {c}")),
        };
        Step::Done(Outcome::Action(a))
    }

    /// The value of global-data map `m` (key 0) from offset `off`.
    fn global(&self, m: usize, off: i64) -> Val {
        let Some(spec) = self.image.maps.get(m) else {
            return Val::Unknown;
        };
        match self.maps.lookup(&spec.name, &0u32.to_le_bytes()) {
            Ok(Some(v)) => Val::MapValue {
                map: m,
                key: Rc::from(0u32.to_le_bytes().as_slice()),
                value: Rc::from(v),
                off,
            },
            _ => Val::Unknown,
        }
    }

    fn load(&self, st: &State, base: Val, off: i64, size: Size) -> Result<Val, String> {
        let n = size.bytes();
        match base {
            Val::Ctx => Ok(match (off, size) {
                (0, Size::W) => Val::Pkt(0),
                (4, Size::W) => Val::PktEnd,
                _ => Val::Unknown,
            }),
            Val::Pkt(a) => {
                let at = a.wrapping_add(off);
                if at < 0 || (at as usize).saturating_add(n) > st.pat.min_len {
                    return Err(format!(
                        "reads packet bytes {at}..{} beyond the checked length {}",
                        at + n as i64,
                        st.pat.min_len
                    ));
                }
                if (0..n as i64).any(|i| st.pkt.contains_key(&(at + i))) {
                    return Ok(self.load_written(st, at, n));
                }
                Ok(Val::Scalar(Box::new(Bits::packet(at as u32, n))))
            }
            Val::Stack(a) => Ok(load_stack(st, a.wrapping_add(off), n)),
            Val::MapValue {
                map, key, off: o, ..
            } if self.is_scratch(map) => {
                let at = o.wrapping_add(off);
                self.scratch_range(map, &key, at, n)?;
                let cs: Vec<Option<&Cell>> = (0..n as i64)
                    .map(|i| st.scratch.get(&(map, key.clone(), at.wrapping_add(i))))
                    .collect();
                if let Some(i) = cs.iter().position(|c| c.is_none()) {
                    let name = self.image.maps.get(map).map_or("?", |s| s.name.as_str());
                    return Err(format!(
                        "reads byte {} of scratch map {name} (key {key:02x?}), which this run did not write (state an earlier packet left)",
                        at + i as i64
                    ));
                }
                Ok(val_of_cells(&cs))
            }
            Val::MapValue { map, .. }
                if self
                    .image
                    .maps
                    .get(map)
                    .is_some_and(|s| s.map_type == MapType::PercpuArray) =>
            {
                Err("reads a per-CPU map value (state)".into())
            }
            Val::MapValue { value, off: o, .. } => {
                let at = o.wrapping_add(off);
                let bytes = usize::try_from(at)
                    .ok()
                    .and_then(|s| value.get(s..s + n))
                    .ok_or_else(|| format!("reads map value bytes {at}+{n} out of range"))?;
                let mut v = 0u64;
                for (i, b) in bytes.iter().enumerate() {
                    v |= (*b as u64) << (8 * i);
                }
                Ok(Val::konst(v))
            }
            other => Err(format!("load through {other:?}")),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn branch(
        &self,
        st: &State,
        width: Width,
        cond: Cond,
        a: Val,
        b: Val,
        jump: usize,
        fall: usize,
    ) -> Step {
        let pc = st.pc;
        match (&a, &b) {
            (Val::Scalar(x), Val::Scalar(y)) => {
                let w = if width == Width::W32 { 32 } else { 64 };
                if let (Some(p), Some(q)) = (x.as_const(), y.as_const()) {
                    self.clock_compare(cond, w as u32, p, q);
                }
                let (x, y, cond) = match (x.as_const(), y.as_const()) {
                    (_, Some(c)) => (x.truncate(w), c, cond),
                    (Some(c), None) => (y.truncate(w), c, swap(cond)),
                    (None, None) => return sw(self, pc, "compares two values made of packet bits"),
                };
                let y = if w == 32 { y & 0xffff_ffff } else { y };
                let (sets, taken_in) = cond_sets(cond, y, w);
                let max = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
                let (sets, taken_in) = match cond {
                    Cond::Gt | Cond::Ge | Cond::Lt | Cond::Le => {
                        let r = match cond {
                            Cond::Gt if y < max => vec![(y + 1, max)],
                            Cond::Ge => vec![(y, max)],
                            Cond::Lt if y > 0 => vec![(0, y - 1)],
                            Cond::Le => vec![(0, y)],
                            _ => Vec::new(),
                        };
                        smaller_side(sets, &r, max, w, taken_in)
                    }
                    _ => (sets, taken_in),
                };
                let alts = sets
                    .into_iter()
                    .map(|(v, m)| {
                        let c: Constraint = (0..w)
                            .filter(|i| m >> i & 1 == 1)
                            .map(|i| (x.0[i], v >> i & 1 == 1))
                            .collect();
                        (c, Effect::Goto(if taken_in { jump } else { fall }))
                    })
                    .collect();
                self.fork(st, alts, Effect::Goto(if taken_in { fall } else { jump }))
            }
            (Val::Affine { bits, add, w }, Val::Scalar(y))
            | (Val::Scalar(y), Val::Affine { bits, add, w }) => {
                let Some(c) = y.as_const() else {
                    return sw(self, pc, "compares two values made of packet bits");
                };
                let cond = if matches!(a, Val::Scalar(_)) {
                    swap(cond)
                } else {
                    cond
                };
                let jw = if width == Width::W32 { 32 } else { 64 };
                let max = if *w == 64 { u64::MAX } else { (1u64 << *w) - 1 };
                let c = if jw == 32 { c & 0xffff_ffff } else { c };
                if jw < *w as usize {
                    return sw(self, pc, "compares a shifted field at a narrower width");
                }
                let (lo, hi, taken_in) = match cond {
                    _ if c > max => match cond {
                        Cond::Eq | Cond::Gt | Cond::Ge => (1, 0, true),
                        Cond::Ne => (1, 0, false),
                        Cond::Lt | Cond::Le => (0, max, true),
                        _ => return sw(self, pc, "signed or bit test of a shifted field"),
                    },
                    Cond::Eq => (c, c, true),
                    Cond::Ne => (c, c, false),
                    Cond::Gt if c < max => (c + 1, max, true),
                    Cond::Ge => (c, max, true),
                    Cond::Lt if c > 0 => (0, c - 1, true),
                    Cond::Le => (0, c, true),
                    Cond::Gt | Cond::Lt => (1, 0, true),
                    _ => return sw(self, pc, "signed or bit test of a shifted field"),
                };
                let mut ranges = Vec::new();
                if lo <= hi {
                    let (l, h) = (lo.wrapping_sub(*add) & max, hi.wrapping_sub(*add) & max);
                    if l <= h {
                        ranges.push((l, h));
                    } else {
                        ranges.push((l, max));
                        ranges.push((0, h));
                    }
                }
                let set: Vec<(u64, u64)> = ranges
                    .iter()
                    .flat_map(|&(l, h)| prefixes(l, h, *w as usize))
                    .collect();
                let (set, taken_in) = smaller_side(set, &ranges, max, *w as usize, taken_in);
                let x = bits.truncate(*w as usize);
                let alts = set
                    .into_iter()
                    .map(|(v, m)| {
                        let c: Constraint = (0..*w as usize)
                            .filter(|i| m >> i & 1 == 1)
                            .map(|i| (x.0[i], v >> i & 1 == 1))
                            .collect();
                        (c, Effect::Goto(if taken_in { jump } else { fall }))
                    })
                    .collect();
                self.fork(st, alts, Effect::Goto(if taken_in { fall } else { jump }))
            }
            (Val::AnyOf { lits, one }, Val::Scalar(y))
            | (Val::Scalar(y), Val::AnyOf { lits, one })
                if y.as_const() == Some(0)
                    && width == Width::W64
                    && matches!(cond, Cond::Eq | Cond::Ne) =>
            {
                // Zero exactly when every literal is 0.
                let zero_to = if cond == Cond::Eq { jump } else { fall };
                let other = if cond == Cond::Eq { fall } else { jump };
                if *one {
                    let mut s = st.clone();
                    s.pc = other;
                    return Step::Fork(vec![s]);
                }
                let c: Constraint = lits.iter().map(|b| (*b, false)).collect();
                self.fork(st, vec![(c, Effect::Goto(zero_to))], Effect::Goto(other))
            }
            (Val::Shifted { .. }, Val::Scalar(y)) | (Val::Scalar(y), Val::Shifted { .. }) => {
                let Some(c) = y.as_const() else {
                    return sw(self, pc, "compares two values made of packet bits");
                };
                let (cond, sh) = if matches!(a, Val::Scalar(_)) {
                    (swap(cond), &b)
                } else {
                    (cond, &a)
                };
                self.branch_shifted(st, width, cond, sh, c, jump, fall)
            }
            (Val::Pkt(p), Val::PktEnd) | (Val::PktEnd, Val::Pkt(p)) if width == Width::W64 => {
                let cond = if matches!(a, Val::PktEnd) {
                    swap(cond)
                } else {
                    cond
                };
                // p cond len  ->  "len >= k" on the jump or fall side.
                let (k, ge_jumps) = match cond {
                    Cond::Gt | Cond::Sgt => (*p, false),
                    Cond::Ge | Cond::Sge => (*p + 1, false),
                    Cond::Lt | Cond::Slt => (*p + 1, true),
                    Cond::Le | Cond::Sle => (*p, true),
                    _ => return sw(self, pc, "packet pointer tested with ==, != or &"),
                };
                let k = k.max(0) as usize;
                let (ge, lt) = if ge_jumps { (jump, fall) } else { (fall, jump) };
                let mut out = Vec::new();
                if st.max_len >= k {
                    let mut s = st.clone();
                    s.pat.min_len = s.pat.min_len.max(k);
                    s.pc = ge;
                    out.push(s);
                }
                if st.pat.min_len < k {
                    let mut s = st.clone();
                    s.max_len = s.max_len.min(k - 1);
                    s.pc = lt;
                    out.push(s);
                }
                Step::Fork(out)
            }
            _ => {
                let ord = match (&a, &b) {
                    (Val::Pkt(x), Val::Pkt(y)) | (Val::Stack(x), Val::Stack(y)) => Some((*x, *y)),
                    // Pointers are never null.
                    (
                        Val::MapValue { .. } | Val::Pkt(_) | Val::PktEnd | Val::Stack(_) | Val::Ctx,
                        Val::Scalar(z),
                    ) if z.as_const() == Some(0) => Some((1, 0)),
                    _ => None,
                };
                match ord {
                    Some((x, y)) => {
                        let mut s = st.clone();
                        s.pc = if eval(cond, x, y) { jump } else { fall };
                        Step::Fork(vec![s])
                    }
                    None => sw(
                        self,
                        pc,
                        "branches on a value not made of header fields (state, time, ...)",
                    ),
                }
            }
        }
    }

    /// A branch on a constant shifted by packet bits against constant
    /// `c`: the amount's bits that matter (the low 5 or 6, as the shift
    /// takes it modulo its width) and that the path has not fixed are
    /// enumerated, and the amounts for which the branch jumps become
    /// ternaries on them (merged where they differ in one bit), or those
    /// for which it falls through, whichever are fewer.
    #[allow(clippy::too_many_arguments)]
    fn branch_shifted(
        &self,
        st: &State,
        width: Width,
        cond: Cond,
        sh: &Val,
        c: u64,
        jump: usize,
        fall: usize,
    ) -> Step {
        let pc = st.pc;
        let Val::Shifted {
            base,
            amount,
            left,
            mask,
            w,
        } = sh
        else {
            return sw(self, pc, "not a shifted value");
        };
        // The shift takes the low 5 or 6 bits of the amount; the rest
        // of its low byte is enumerated too, so that each alternative is
        // an exact header value (an exact `ip_proto` is a flower key, a
        // ternary is not) when there are few of them.
        let used = 8;
        // Per amount bit: a constant, or the index of a free packet bit.
        let mut free: Vec<Bit> = Vec::new();
        let mut fixed = 0u64;
        let mut which = [None; 8];
        for (i, (slot, &bit)) in which.iter_mut().zip(amount.0.iter()).enumerate() {
            match bit {
                ZERO => {}
                ONE => fixed |= 1 << i,
                b => match literal(b).map(|(p, n)| (st.pat.bit(p).map(|v| v != n), n)) {
                    Some((Some(true), _)) => fixed |= 1 << i,
                    Some((Some(false), _)) => {}
                    Some((None, true)) | None => {
                        return sw(self, pc, "shifts by a negated or unknown bit");
                    }
                    Some((None, false)) => {
                        let k = free.iter().position(|x| *x == b).unwrap_or_else(|| {
                            free.push(b);
                            free.len() - 1
                        });
                        *slot = Some(k);
                    }
                },
            }
        }
        let jw = if width == Width::W32 { 32 } else { 64 };
        let holds = |v: u64| -> bool {
            let (x, y) = if jw == 32 {
                match cond {
                    Cond::Sgt | Cond::Sge | Cond::Slt | Cond::Sle => {
                        (v as u32 as i32 as i64, c as u32 as i32 as i64)
                    }
                    _ => ((v & 0xffff_ffff) as i64, (c & 0xffff_ffff) as i64),
                }
            } else {
                (v as i64, c as i64)
            };
            eval(cond, x, y)
        };
        let n = free.len();
        let mut taken = Vec::new();
        let mut not_taken = Vec::new();
        for assign in 0..(1u64 << n) {
            let mut amt = fixed;
            for (i, k) in which.iter().enumerate().take(used) {
                if let Some(k) = k {
                    amt |= (assign >> k & 1) << i;
                }
            }
            if holds(Val::shifted_value(*base, amt, *left, *mask, *w)) {
                taken.push(assign);
            } else {
                not_taken.push(assign);
            }
        }
        let full = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let cover_of = |terms: &[u64]| {
            if terms.len() <= 32 {
                terms.iter().map(|t| (*t, full)).collect()
            } else {
                merge_minterms(terms, full)
            }
        };
        let (cover, to, other) = {
            let t = cover_of(&taken);
            let f = cover_of(&not_taken);
            if f.len() < t.len() {
                (f, fall, jump)
            } else {
                (t, jump, fall)
            }
        };
        let alts = cover
            .into_iter()
            .map(|(v, m)| {
                let c: Constraint = (0..n)
                    .filter(|k| m >> k & 1 == 1)
                    .map(|k| (free[k], v >> k & 1 == 1))
                    .collect();
                (c, Effect::Goto(to))
            })
            .collect();
        self.fork(st, alts, Effect::Goto(other))
    }

    /// The alternatives in order, then "none of them"; infeasible ones
    /// left out, and nothing after an alternative the path already implies.
    fn fork(&self, st: &State, alts: Vec<(Constraint, Effect)>, otherwise: Effect) -> Step {
        let mut out = Vec::new();
        for (c, eff) in alts {
            let mut s = st.clone();
            let mut feasible = true;
            let mut implied = true;
            for (bit, want) in c {
                match bit {
                    ZERO | ONE => {
                        if (bit == ONE) != want {
                            feasible = false;
                        }
                    }
                    b => {
                        // A negated bit wants the opposite value.
                        let Some((pos, neg)) = literal(b) else {
                            feasible = false;
                            continue;
                        };
                        if st.pat.bit(pos).is_none() {
                            implied = false;
                        }
                        if !s.pat.set_bit(pos, want != neg) {
                            feasible = false;
                        }
                    }
                }
            }
            if !feasible {
                continue;
            }
            if !implied {
                s.outside = crate::fields::outside_model(&s.pat);
            }
            apply(&mut s, eff);
            out.push(s);
            if implied {
                return Step::Fork(out);
            }
        }
        let mut s = st.clone();
        apply(&mut s, otherwise);
        out.push(s);
        Step::Fork(out)
    }

    /// The clock's window after `v` entered arithmetic: pinned to now
    /// if `v` is the clock (or equal to it: pinning is always safe).
    fn clock_arithmetic(&self, v: &Val) {
        let Some(now) = self.limits.now_ns.filter(|_| self.clock.get()) else {
            return;
        };
        if v.as_const() == Some(now) {
            self.narrow((now, now));
        }
    }

    /// The window after comparing constants `p cond q` on `w` bits:
    /// when one of them is the clock, the clock values giving the same
    /// outcome (an interval around now; now alone when it is not one).
    fn clock_compare(&self, cond: Cond, w: u32, p: u64, q: u64) {
        let Some(now) = self.limits.now_ns.filter(|_| self.clock.get()) else {
            return;
        };
        let low = |v: u64| v & 0xffff_ffff;
        let is_now = |v: u64| v == now || (w == 32 && low(v) == low(now));
        let (cond, c) = match (is_now(p), is_now(q)) {
            (true, false) => (cond, q),
            (false, true) => (swap(cond), p),
            (false, false) => return,
            (true, true) => {
                self.narrow((now, now));
                return;
            }
        };
        self.narrow(same_outcome(cond, w, c, now));
    }

    fn narrow(&self, (lo, hi): (u64, u64)) {
        let (a, b) = self.window.get();
        self.window.set((a.max(lo), b.min(hi)));
    }

    fn helper(&self, st: &mut State, id: i32, next: usize) -> Step {
        let pc = st.pc;
        match id {
            HELPER_MAP_LOOKUP => self.lookup(st),
            HELPER_KTIME if self.limits.now_ns.is_some() => {
                self.clock.set(true);
                let now = self.limits.now_ns.unwrap_or(0);
                apply(st, Effect::Return(Val::konst(now)));
                Step::Next
            }
            id if VALUE_HELPERS.contains(&id) => {
                // No side effect: the result is unknown, fine until a
                // branch depends on it.
                apply(st, Effect::Return(Val::Unknown));
                Step::Next
            }
            HELPER_REDIRECT => {
                match (st.regs[1].as_const(), st.regs[2].as_const()) {
                    (Some(i), Some(0)) => st.redirect = Some(i as u32),
                    _ => return sw(self, pc, "bpf_redirect with a target not known now"),
                }
                st.regs[0] = Val::konst(XDP_REDIRECT);
                for r in 1..=5 {
                    st.regs[r] = Val::Unknown;
                }
                st.pc = next;
                Step::Next
            }
            HELPER_REDIRECT_MAP => self.redirect_map(st, next),
            _ => {
                for r in 1..=5 {
                    if let Val::Map(m) | Val::MapValue { map: m, .. } = st.regs[r] {
                        self.written.borrow_mut().insert(m);
                    }
                }
                sw(
                    self,
                    pc,
                    format!(
                        "calls helper {}",
                        nfkit_isa::helpers::helper_name(id)
                            .map(str::to_string)
                            .unwrap_or_else(|| id.to_string())
                    ),
                )
            }
        }
    }

    /// `bpf_redirect_map(devmap, key, flags)` with a constant key and
    /// flags (no broadcast): the entry's ifindex as known now, or the
    /// verdict in the flags' low bits when the key has no entry, as the
    /// kernel's `__bpf_xdp_redirect_map` does. Other maps (cpumap,
    /// xskmap), packet-derived keys and broadcasts: software.
    fn redirect_map(&self, st: &mut State, next: usize) -> Step {
        const ACTIONS: u64 = 3;
        let pc = st.pc;
        let Val::Map(m) = st.regs[1] else {
            return sw(self, pc, "bpf_redirect_map on a map not known now");
        };
        let Some(spec) = self.image.maps.get(m) else {
            return sw(self, pc, format!("map index {m} out of range"));
        };
        if !matches!(spec.map_type, MapType::Devmap | MapType::DevmapHash) {
            return sw(
                self,
                pc,
                format!(
                    "bpf_redirect_map on {} map {} (not a devmap)",
                    spec.map_type.name(),
                    spec.name
                ),
            );
        }
        let (Some(key), Some(flags)) = (st.regs[2].as_const(), st.regs[3].as_const()) else {
            return sw(
                self,
                pc,
                format!(
                    "bpf_redirect_map on {} with a key or flags not known now",
                    spec.name
                ),
            );
        };
        if flags & !ACTIONS != 0 {
            return sw(
                self,
                pc,
                format!("bpf_redirect_map on {} with flags {flags:#x}", spec.name),
            );
        }
        if !st.reads.contains(&m) {
            st.reads.push(m);
        }
        let k = (key as u32).to_le_bytes();
        let r0 = match self.maps.lookup(&spec.name, &k) {
            Ok(Some(v)) => {
                let Some(b) = v.get(..4) else {
                    return sw(
                        self,
                        pc,
                        format!("devmap {} value shorter than 4 bytes", spec.name),
                    );
                };
                st.redirect = Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                XDP_REDIRECT
            }
            Ok(None) => flags & ACTIONS,
            Err(e) => return sw(self, pc, format!("map {}: {e}", spec.name)),
        };
        st.regs[0] = Val::konst(r0);
        for r in 1..=5 {
            st.regs[r] = Val::Unknown;
        }
        st.pc = next;
        Step::Next
    }

    /// `bpf_map_lookup_elem`: expanded from the map's current entries.
    fn lookup(&self, st: &mut State) -> Step {
        let pc = st.pc;
        let Val::Map(m) = st.regs[1] else {
            return sw(self, pc, "map lookup on a map not known now");
        };
        let Some(spec) = self.image.maps.get(m) else {
            return sw(self, pc, format!("map index {m} out of range"));
        };
        // The key's bytes: on the stack, or in a scratch map slot this
        // run wrote (the parse-once block's flow key).
        let key_cell = |i: i64| -> Option<&Cell> {
            match &st.regs[2] {
                Val::Stack(k) => st.stack.get(&k.wrapping_add(i)),
                Val::MapValue {
                    map, key, off: o, ..
                } if self.is_scratch(*map) => {
                    st.scratch.get(&(*map, key.clone(), o.wrapping_add(i)))
                }
                _ => None,
            }
        };
        if !matches!(st.regs[2], Val::Stack(_))
            && !matches!(st.regs[2], Val::MapValue { map, .. } if self.is_scratch(map))
        {
            return sw(self, pc, "map key not on the stack");
        }
        let mut key = Vec::with_capacity(spec.key_size as usize);
        for i in 0..spec.key_size as i64 {
            match key_cell(i) {
                // Packet bits the path already fixed are constants: a
                // key the pattern determines is looked up directly.
                Some(Cell::Bits(b)) => key.push(b.map(|x| {
                    match literal(x).and_then(|(p, n)| st.pat.bit(p).map(|v| v != n)) {
                        Some(v) => v as Bit,
                        None => x,
                    }
                })),
                _ => {
                    return sw(
                        self,
                        pc,
                        format!("key of map {} not built from header fields", spec.name),
                    )
                }
            }
        }
        let lru = self.limits.data_path_maps && spec.map_type == MapType::LruHash;
        let percpu = spec.map_type == MapType::PercpuArray;
        if !lru
            && !percpu
            && !matches!(
                spec.map_type,
                MapType::Hash | MapType::Array | MapType::LpmTrie
            )
        {
            return sw(
                self,
                pc,
                format!(
                    "lookup in {} map {} (state)",
                    spec.map_type.name(),
                    spec.name
                ),
            );
        }
        let konst: Option<Vec<u8>> = key
            .iter()
            .map(|b| Bits(pad8(b)).as_const().map(|v| v as u8))
            .collect();
        // A constant-key array lookup finds an entry whatever the map
        // holds: only loads from the value read its contents.
        let array = matches!(spec.map_type, MapType::Array | MapType::PercpuArray);
        let contents_irrelevant = array && konst.is_some();
        if !contents_irrelevant && !st.reads.contains(&m) {
            st.reads.push(m);
        }
        if percpu {
            // Per-CPU slots: a value pointer to count into; loads from it
            // are refused (`load`).
            let Some(kb) = konst else {
                return sw(
                    self,
                    pc,
                    format!("per-CPU map {} with a packet key", spec.name),
                );
            };
            let idx = kb
                .get(..4)
                .map_or(u32::MAX, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            let r0 = if idx < spec.max_entries {
                Val::MapValue {
                    map: m,
                    key: Rc::from(kb.as_slice()),
                    value: Rc::from(vec![0u8; spec.value_size as usize]),
                    off: 0,
                }
            } else {
                Val::konst(0)
            };
            apply(st, Effect::Return(r0));
            return Step::Next;
        }
        let value = |k: &[u8], v: Vec<u8>| Val::MapValue {
            map: m,
            key: Rc::from(k),
            value: Rc::from(v),
            off: 0,
        };
        if let Some(kb) = konst {
            let r0 = match self.maps.lookup(&spec.name, &kb) {
                Ok(Some(v)) => value(&kb, v),
                Ok(None) => Val::konst(0),
                Err(e) => return sw(self, pc, format!("map {}: {e}", spec.name)),
            };
            apply(st, Effect::Return(r0));
            return Step::Next;
        }
        let Some(mut entries) = self.maps.entries(&spec.name) else {
            return sw(self, pc, format!("contents of map {} unknown", spec.name));
        };
        if entries.len() > self.limits.max_map_entries {
            return sw(
                self,
                pc,
                format!(
                    "map {} has {} entries (more than {})",
                    spec.name,
                    entries.len(),
                    self.limits.max_map_entries
                ),
            );
        }
        let mut alts = Vec::new();
        if spec.map_type == MapType::LpmTrie {
            let Some(kp) = key
                .get(..4)
                .and_then(|b| {
                    b.iter()
                        .map(|x| Bits(pad8(x)).as_const())
                        .collect::<Option<Vec<_>>>()
                })
                .map(|b| {
                    b.iter()
                        .enumerate()
                        .fold(0u64, |a, (i, x)| a | x << (8 * i))
                })
            else {
                return sw(self, pc, "LPM key with a prefix length not known now");
            };
            let plen = |e: &(Vec<u8>, Vec<u8>)| {
                e.0.get(..4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .unwrap_or(0)
            };
            entries.sort_by(|a, b| plen(b).cmp(&plen(a)).then_with(|| a.0.cmp(&b.0)));
            for e in entries {
                let p = plen(&e) as u64;
                if p > kp {
                    continue;
                }
                let mut c = Constraint::new();
                for t in 0..p as usize {
                    let (byte, bit) = (4 + t / 8, 7 - t % 8);
                    let (Some(kb), Some(eb)) = (key.get(byte), e.0.get(byte)) else {
                        break;
                    };
                    c.push((kb[bit], eb >> bit & 1 == 1));
                }
                alts.push((c, Effect::Return(value(&e.0, e.1))));
            }
        } else {
            entries.sort();
            for (ek, ev) in entries {
                let c: Constraint = key
                    .iter()
                    .zip(&ek)
                    .flat_map(|(kb, eb)| (0..8).map(move |i| (kb[i], eb >> i & 1 == 1)))
                    .collect();
                alts.push((c, Effect::Return(value(&ek, ev))));
            }
        }
        self.fork(st, alts, Effect::Return(Val::konst(0)))
    }
}

fn pad8(b: &[Bit; 8]) -> [Bit; 64] {
    let mut out = [ZERO; 64];
    out[..8].copy_from_slice(b);
    out
}

/// Bytes of an IPv4 header without options.
const IPV4_HEADER: u64 = 20;

/// A packet pointer and a non-constant value of packet bits (either
/// order): the pointer's offset and the value.
fn header_offset(a: &Val, b: &Val) -> Option<(i64, Bits)> {
    let (p, x) = match (a, b) {
        (Val::Pkt(p), Val::Scalar(x)) | (Val::Scalar(x), Val::Pkt(p)) => (*p, x),
        // `data + (l3 + ihl * 4)`: the constant joins the pointer.
        (Val::Pkt(p), Val::Affine { bits, add, w })
        | (Val::Affine { bits, add, w }, Val::Pkt(p))
            if *add < 1 << 16 && bits.as_const().is_none() =>
        {
            return Some((p.wrapping_add(*add as i64), bits.truncate(*w as usize)));
        }
        _ => return None,
    };
    (x.as_const().is_none()).then(|| (p, (**x).clone()))
}

fn apply(s: &mut State, eff: Effect) {
    match eff {
        Effect::Goto(t) => s.pc = t,
        Effect::Set(r, v, t) => {
            s.regs[r] = v;
            s.pc = t;
        }
        Effect::Return(v) => {
            s.regs[0] = v;
            for r in 1..=5 {
                s.regs[r] = Val::Unknown;
            }
            s.pc += 1;
        }
    }
}

fn reg(st: &State, r: Reg) -> Val {
    st.regs[r.num() as usize].clone()
}

fn sign_extend(b: &Bits, bits: u32) -> Bits {
    let mut out = b.0;
    let top = out[bits as usize - 1];
    for x in out.iter_mut().skip(bits as usize) {
        *x = top;
    }
    Bits(out)
}

fn alu(width: Width, op: AluOp, a: Val, b: Val) -> Val {
    let w32 = width == Width::W32;
    if let (AluOp::Mov, Val::Scalar(x)) = (op, &b) {
        return Val::Scalar(Box::new(if w32 { x.truncate(32) } else { (**x).clone() }));
    }
    if op == AluOp::Mov {
        return match b {
            Val::Shifted {
                base,
                amount,
                left,
                mask,
                w,
            } if w32 => Val::Shifted {
                base,
                amount,
                left,
                mask: mask & 0xffff_ffff,
                w,
            },
            // A 32-bit move of a 32-bit (or narrower) affine value keeps it.
            Val::Affine { w, .. } if w32 && w <= 32 => b,
            _ if w32 => Val::Unknown,
            _ => b,
        };
    }
    if let Val::Shifted {
        base,
        amount,
        left,
        mask,
        w,
    } = &a
    {
        // Only masking keeps a shifted value; anything else loses it.
        let m = if w32 { 0xffff_ffff } else { u64::MAX };
        return match (op, b.as_const()) {
            (AluOp::And, Some(c)) => Val::Shifted {
                base: *base,
                amount: amount.clone(),
                left: *left,
                mask: mask & c & m,
                w: *w,
            },
            _ => Val::Unknown,
        };
    }
    if let (AluOp::Lsh | AluOp::Rsh, Val::Scalar(x), Val::Scalar(y)) = (op, &a, &b) {
        // A constant shifted by packet bits.
        if let (Some(c), None) = (x.as_const(), y.as_const()) {
            let m = if w32 { 0xffff_ffff } else { u64::MAX };
            return Val::Shifted {
                base: c & m,
                amount: y.clone(),
                left: op == AluOp::Lsh,
                mask: m,
                w: if w32 { 32 } else { 64 },
            };
        }
    }
    if let (AluOp::MovSx(n), Val::Scalar(x)) = (op, &b) {
        let v = sign_extend(x, n as u32);
        return Val::Scalar(Box::new(if w32 { v.truncate(32) } else { v }));
    }
    if let (Val::Affine { bits, add, w }, AluOp::Add | AluOp::Sub, Some(c)) = (&a, op, b.as_const())
    {
        if (*w == 32) == w32 {
            let c = if op == AluOp::Sub {
                c.wrapping_neg()
            } else {
                c
            };
            let m = if w32 { 0xffff_ffff } else { u64::MAX };
            return Val::Affine {
                bits: bits.clone(),
                add: add.wrapping_add(c) & m,
                w: *w,
            };
        }
    }
    if let (Val::Affine { bits, add, w }, AluOp::And, Some(m)) = (&a, op, b.as_const()) {
        let k = m.trailing_ones();
        if m != 0 && m.count_ones() == k && k <= *w {
            return Val::Affine {
                bits: Box::new(bits.truncate(k as usize)),
                add: add & m,
                w: k,
            };
        }
    }
    // Pointer arithmetic with constants.
    if !w32 {
        let c = b.as_const().map(|c| c as i64);
        match (&a, op, c) {
            (Val::Pkt(p), AluOp::Add, Some(c)) => return Val::Pkt(p.wrapping_add(c)),
            (Val::Pkt(p), AluOp::Sub, Some(c)) => return Val::Pkt(p.wrapping_sub(c)),
            (Val::Stack(p), AluOp::Add, Some(c)) => return Val::Stack(p.wrapping_add(c)),
            (Val::Stack(p), AluOp::Sub, Some(c)) => return Val::Stack(p.wrapping_sub(c)),
            (
                Val::MapValue {
                    map,
                    key,
                    value,
                    off,
                },
                AluOp::Add,
                Some(c),
            ) => {
                return Val::MapValue {
                    map: *map,
                    key: key.clone(),
                    value: value.clone(),
                    off: off.wrapping_add(c),
                }
            }
            _ => {}
        }
        if let (Val::Pkt(x), AluOp::Sub, Val::Pkt(y)) = (&a, op, &b) {
            return Val::konst(x.wrapping_sub(*y) as u64);
        }
    }
    if op == AluOp::Or && !w32 {
        // Zero tests of ORs whose bits collide: `a | b` is 0 iff both are.
        let part = |v: &Val| match v {
            Val::Scalar(x) => Some(x.literals()),
            Val::AnyOf { lits, one } => Some(((**lits).clone(), *one)),
            _ => None,
        };
        let collide = match (&a, &b) {
            (Val::Scalar(x), Val::Scalar(y)) => x.or(y).is_none(),
            _ => true,
        };
        if collide {
            if let (Some((mut l, o1)), Some((m, o2))) = (part(&a), part(&b)) {
                for x in m {
                    if !l.contains(&x) {
                        l.push(x);
                    }
                }
                return Val::AnyOf {
                    lits: std::rc::Rc::new(l),
                    one: o1 || o2,
                };
            }
        }
    }
    let (Val::Scalar(x), Val::Scalar(y)) = (&a, &b) else {
        return Val::Unknown;
    };
    let (x, y) = if w32 {
        (x.truncate(32), y.truncate(32))
    } else {
        ((**x).clone(), (**y).clone())
    };
    let bits = if w32 { 32 } else { 64 };
    if matches!(op, AluOp::Add | AluOp::Sub) && x.as_const().is_none() {
        if let Some(c) = y.as_const() {
            if op == AluOp::Add && x.add(&y).is_some() {
                // exact as an OR
            } else {
                let c = if op == AluOp::Sub {
                    c.wrapping_neg()
                } else {
                    c
                };
                let m = if w32 { 0xffff_ffff } else { u64::MAX };
                return Val::Affine {
                    bits: Box::new(x),
                    add: c & m,
                    w: bits as u32,
                };
            }
        }
    }
    if op == AluOp::Add && y.as_const().is_none() && x.add(&y).is_none() {
        // `constant + field` (an offset plus a header length).
        if let Some(c) = x.as_const() {
            let m = if w32 { 0xffff_ffff } else { u64::MAX };
            return Val::Affine {
                bits: Box::new(y),
                add: c & m,
                w: bits as u32,
            };
        }
    }
    let shift = y.as_const().map(|s| (s % bits) as u32);
    let r = match op {
        AluOp::And => x.and(&y),
        AluOp::Or => x.or(&y),
        AluOp::Xor => x.xor(&y),
        AluOp::Add => x.add(&y),
        AluOp::Lsh => shift.map(|s| x.shl(s)),
        AluOp::Rsh => shift.map(|s| x.shr(s)),
        AluOp::Arsh => shift.map(|s| {
            let mut o = x.0;
            for (i, v) in o.iter_mut().enumerate().take(bits as usize) {
                *v = x.0[(i + s as usize).min(bits as usize - 1)];
            }
            Bits(o)
        }),
        _ => match (x.as_const(), y.as_const()) {
            (Some(p), Some(q)) => konst_alu(op, p, q, w32).map(Bits::constant),
            _ => None,
        },
    };
    match r {
        Some(v) => Val::Scalar(Box::new(if w32 { v.truncate(32) } else { v })),
        None => Val::Unknown,
    }
}

/// Arithmetic [`alu`] leaves unknown that a checksum sum follows
/// ([`crate::csum::Lin`]): additions of packet-bit values, folds
/// (`& 0xffff`, `>> 16`), complements (`^ 0xffff`, `^ -1`) and moves.
/// Whether `v` holds a complemented packet bit: a complemented field
/// plus a constant is a ones'-complement sum (`~check + (~m + m')` with
/// the constants folded by the compiler), not the `x - c` of a range
/// test, which adds to the field itself.
fn complemented(v: &Val) -> bool {
    match v {
        Val::Scalar(bits) => bits
            .0
            .iter()
            .any(|&x| crate::value::literal(x).is_some_and(|(_, neg)| neg)),
        _ => false,
    }
}

fn lin_alu(width: Width, op: AluOp, a: &Val, b: &Val, pat: &Pattern) -> Option<Val> {
    use crate::rewrite::lin_of;
    let w = if width == Width::W32 { 32 } else { 64 };
    let wrap = |l: crate::csum::Lin| -> Option<Val> {
        if w == 32 && !l.fits32() {
            return None;
        }
        Some(match (l.lo == l.hi && !l.low16, l.form.terms.is_empty()) {
            (true, true) => Val::konst(l.lo),
            _ => Val::Lin(Rc::new(l)),
        })
    };
    let lin = |v: &Val| -> Option<crate::csum::Lin> {
        match v {
            Val::Lin(_) | Val::Scalar(_) | Val::Affine { .. } => lin_of(v, pat),
            _ => None,
        }
    };
    let interesting = matches!(a, Val::Lin(_))
        || matches!(b, Val::Lin(_))
        || (op == AluOp::Add && b.as_const().is_none())
        || (op == AluOp::Add && complemented(a));
    if !interesting {
        return None;
    }
    let c = b.as_const();
    let all = if w == 32 { u32::MAX as u64 } else { u64::MAX };
    match op {
        AluOp::Mov => match b {
            Val::Lin(l) => wrap((**l).clone()),
            _ => None,
        },
        AluOp::Add => {
            let x = lin(a)?;
            match c {
                Some(c) => wrap(x.add_const(c, w)?),
                None => wrap(x.add(&lin(b)?)?),
            }
        }
        AluOp::Sub => wrap(lin(a)?.add_const(c?.wrapping_neg(), w)?),
        AluOp::Rsh if c == Some(16) => wrap(lin(a)?.hi16()?),
        AluOp::And if c == Some(0xffff) => wrap(lin(a)?.lo16()),
        AluOp::Xor if c == Some(0xffff) => wrap(lin(a)?.not16(false)?),
        AluOp::Xor if c.map(|c| c & all) == Some(all) => wrap(lin(a)?.not16(true)?),
        _ => None,
    }
}

fn konst_alu(op: AluOp, p: u64, q: u64, w32: bool) -> Option<u64> {
    let (p, q) = if w32 {
        (p & 0xffff_ffff, q & 0xffff_ffff)
    } else {
        (p, q)
    };
    Some(match op {
        AluOp::Sub => p.wrapping_sub(q),
        AluOp::Mul => p.wrapping_mul(q),
        AluOp::Div => p.checked_div(q).unwrap_or(0),
        AluOp::Mod => p.checked_rem(q).unwrap_or(p),
        AluOp::Neg => p.wrapping_neg(),
        _ => return None,
    })
}

/// The clock values `t` (an interval containing `now`) for which
/// `t cond c` on `w` bits is what it is for `now`; `(now, now)` when
/// that is not an interval or the comparison is not a plain unsigned
/// one on the whole clock.
fn same_outcome(cond: Cond, w: u32, c: u64, now: u64) -> (u64, u64) {
    let signed_ok = now <= i64::MAX as u64 && c <= i64::MAX as u64;
    let cond = match cond {
        Cond::Sgt if signed_ok => Cond::Gt,
        Cond::Sge if signed_ok => Cond::Ge,
        Cond::Slt if signed_ok => Cond::Lt,
        Cond::Sle if signed_ok => Cond::Le,
        c => c,
    };
    let max = if signed_ok && cond != Cond::Eq && cond != Cond::Ne {
        i64::MAX as u64
    } else {
        u64::MAX
    };
    if w != 64 {
        return (now, now);
    }
    let split = |first_end: u64| {
        // [0, first_end] and [first_end + 1, max]: the one holding now.
        if now <= first_end {
            (0, first_end)
        } else {
            (first_end.saturating_add(1), max)
        }
    };
    match cond {
        Cond::Eq | Cond::Ne if c == now => (now, now),
        Cond::Eq | Cond::Ne if c > now => (0, c - 1),
        Cond::Eq | Cond::Ne => (c + 1, u64::MAX),
        Cond::Gt | Cond::Le => split(c),
        Cond::Ge | Cond::Lt if c == 0 => (0, max),
        Cond::Ge | Cond::Lt => split(c - 1),
        _ => (now, now),
    }
}

fn swap(c: Cond) -> Cond {
    match c {
        Cond::Gt => Cond::Lt,
        Cond::Lt => Cond::Gt,
        Cond::Ge => Cond::Le,
        Cond::Le => Cond::Ge,
        Cond::Sgt => Cond::Slt,
        Cond::Slt => Cond::Sgt,
        Cond::Sge => Cond::Sle,
        Cond::Sle => Cond::Sge,
        c => c,
    }
}

fn eval(c: Cond, x: i64, y: i64) -> bool {
    match c {
        Cond::Eq => x == y,
        Cond::Ne => x != y,
        Cond::Gt => (x as u64) > (y as u64),
        Cond::Ge => (x as u64) >= (y as u64),
        Cond::Lt => (x as u64) < (y as u64),
        Cond::Le => (x as u64) <= (y as u64),
        Cond::Sgt => x > y,
        Cond::Sge => x >= y,
        Cond::Slt => x < y,
        Cond::Sle => x <= y,
        Cond::Set => x & y != 0,
    }
}

/// `x cond c` on `w` bits as ternaries `(value, mask)` whose union is the
/// set of `x` for which the condition holds (`true`) or fails (`false`).
fn cond_sets(cond: Cond, c: u64, w: usize) -> (Vec<(u64, u64)>, bool) {
    let max = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
    let exact = vec![(c, max)];
    let sb = 1u64 << (w - 1);
    let range = |lo: Option<u64>, hi: Option<u64>| match (lo, hi) {
        (Some(l), Some(h)) if l <= h => prefixes(l, h, w),
        _ => Vec::new(),
    };
    let signed = |lo: Option<u64>, hi: Option<u64>| {
        range(lo, hi)
            .into_iter()
            .map(|(v, m)| (v ^ (sb & m), m))
            .collect::<Vec<_>>()
    };
    let cs = c ^ sb;
    match cond {
        Cond::Eq => (exact, true),
        Cond::Ne => (exact, false),
        Cond::Set => (
            (0..w)
                .filter(|i| c >> i & 1 == 1)
                .map(|i| (1u64 << i, 1u64 << i))
                .collect(),
            true,
        ),
        Cond::Gt => (
            range(c.checked_add(1).filter(|&v| v <= max), Some(max)),
            true,
        ),
        Cond::Ge => (range(Some(c), Some(max)), true),
        Cond::Lt => (range(Some(0), c.checked_sub(1)), true),
        Cond::Le => (range(Some(0), Some(c)), true),
        Cond::Sgt => (
            signed(cs.checked_add(1).filter(|&v| v <= max), Some(max)),
            true,
        ),
        Cond::Sge => (signed(Some(cs), Some(max)), true),
        Cond::Slt => (signed(Some(0), cs.checked_sub(1)), true),
        Cond::Sle => (signed(Some(0), Some(cs)), true),
    }
}

/// Minterms (values of the bits in `full`) as ternaries `(value, mask)`
/// covering exactly them: pairs differing in one cared-for bit are
/// merged until none are, each minterm kept in the first ternary that
/// covers it (the ternaries may overlap; their union is exact).
fn merge_minterms(terms: &[u64], full: u64) -> Vec<(u64, u64)> {
    let mut cur: Vec<(u64, u64)> = terms.iter().map(|t| (*t, full)).collect();
    let mut primes: Vec<(u64, u64)> = Vec::new();
    while !cur.is_empty() {
        let mut merged = vec![false; cur.len()];
        let mut next: Vec<(u64, u64)> = Vec::new();
        for i in 0..cur.len() {
            for j in i + 1..cur.len() {
                let ((a, ma), (b, mb)) = (cur[i], cur[j]);
                let d = a ^ b;
                if ma == mb && d.count_ones() == 1 && d & ma == d {
                    merged[i] = true;
                    merged[j] = true;
                    let t = (a & !d, ma & !d);
                    if !next.contains(&t) {
                        next.push(t);
                    }
                }
            }
        }
        for (i, t) in cur.iter().enumerate() {
            if !merged[i] && !primes.contains(t) {
                primes.push(*t);
            }
        }
        cur = next;
    }
    // Greedy cover: the prime covering most uncovered minterms first.
    let mut left: Vec<u64> = terms.to_vec();
    let mut out = Vec::new();
    while !left.is_empty() {
        let best = primes
            .iter()
            .max_by_key(|(v, m)| left.iter().filter(|t| *t & m == *v).count())
            .copied();
        let Some((v, m)) = best else { break };
        left.retain(|t| t & m != v);
        out.push((v, m));
    }
    out.sort();
    out
}

/// `set` (the prefixes of `ranges`, sorted, disjoint) or the prefixes
/// of its complement, whichever has fewer, with the side it stands for:
/// fewer alternatives explored first, so fewer rules.
fn smaller_side(
    set: Vec<(u64, u64)>,
    ranges: &[(u64, u64)],
    max: u64,
    w: usize,
    taken_in: bool,
) -> (Vec<(u64, u64)>, bool) {
    let mut sorted = ranges.to_vec();
    sorted.sort();
    let mut comp = Vec::new();
    let mut next: Option<u64> = Some(0);
    for &(l, h) in &sorted {
        if let Some(n) = next {
            if l > n {
                comp.extend(prefixes(n, l - 1, w));
            }
        }
        next = if h >= max { None } else { Some(h + 1) };
    }
    if let Some(n) = next {
        comp.extend(prefixes(n, max, w));
    }
    if comp.len() < set.len() {
        (comp, !taken_in)
    } else {
        (set, taken_in)
    }
}

/// The range `lo..=hi` of `w`-bit numbers as disjoint prefix ternaries.
pub fn prefixes(lo: u64, hi: u64, w: usize) -> Vec<(u64, u64)> {
    let full = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
    let mut out = Vec::new();
    let mut cur = lo as u128;
    let hi = hi as u128;
    while cur <= hi {
        let mut size: u128 = 1;
        while cur & (size * 2 - 1) == 0
            && cur + size * 2 - 1 <= hi
            && size * 2 <= (full as u128 + 1)
        {
            size *= 2;
        }
        let mask = full & !((size - 1) as u64);
        out.push((cur as u64, mask));
        cur += size;
    }
    out
}

fn load_stack(st: &State, at: i64, n: usize) -> Val {
    let cells: Vec<Option<&Cell>> = (0..n as i64)
        .map(|i| st.stack.get(&at.wrapping_add(i)))
        .collect();
    val_of_cells(&cells)
}

/// The value `cells` (one per byte, little-endian) hold: a pointer
/// spilled whole, bits, or unknown.
fn val_of_cells(cells: &[Option<&Cell>]) -> Val {
    let n = cells.len();
    if let Some(Some(Cell::Ptr(v, 0))) = cells.first() {
        let same = n == 8
            && cells
                .iter()
                .enumerate()
                .all(|(i, c)| matches!(c, Some(Cell::Ptr(w, k)) if w == v && *k as usize == i));
        return if same { v.clone() } else { Val::Unknown };
    }
    let mut b = [ZERO; 64];
    for (i, c) in cells.iter().enumerate() {
        match c {
            Some(Cell::Bits(x)) => b[i * 8..i * 8 + 8].copy_from_slice(x),
            _ => return Val::Unknown,
        }
    }
    Val::Scalar(Box::new(Bits(b)))
}

/// The `n` byte cells storing `v` leaves.
fn cells(v: &Val, n: usize) -> Vec<Cell> {
    (0..n)
        .map(|i| match v {
            Val::Scalar(b) => Cell::Bits(b.byte(i)),
            Val::Unknown => Cell::Unknown,
            p if n == 8 => Cell::Ptr(p.clone(), i as u8),
            _ => Cell::Unknown,
        })
        .collect()
}

fn store(st: &mut State, base: Val, off: i64, size: Size, v: Val) -> Result<(), String> {
    let n = size.bytes();
    match base {
        Val::Stack(a) => {
            let at = a.wrapping_add(off);
            for (i, cell) in cells(&v, n).into_iter().enumerate() {
                st.stack.insert(at.wrapping_add(i as i64), cell);
            }
            Ok(())
        }
        Val::Pkt(_) => Err("writes the packet".into()),
        Val::MapValue { .. } => Err("writes a map value (state)".into()),
        other => Err(format!("store through {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_cover() {
        assert_eq!(prefixes(0, 255, 8), vec![(0, 0)]);
        assert_eq!(prefixes(1024, 65535, 16).len(), 6);
        let p = prefixes(3, 9, 8);
        let covered: Vec<u64> = (0..256)
            .filter(|x| p.iter().any(|(v, m)| x & m == *v))
            .collect();
        assert_eq!(covered, (3..=9).collect::<Vec<_>>());
    }
}
