//! What the bounds analysis (`bounds`) knows about each register at an
//! instruction: a scalar, a pointer into a bounded region (this or a
//! caller's stack frame, one map value, a ring-buffer record, the packet
//! from `data`) with its offset, the context, the packet's `data_end`, a
//! map itself, or nothing; plus, in slot [`PKT_LEN`], how many bytes from
//! `data` comparisons with `data_end` have shown to exist. Joins and
//! widening for merge points, and the refinement a conditional jump gives
//! each of its two edges.

#![forbid(unsafe_code)]

use super::absval::Scalar;
use nfkit_isa::Cond;

/// The memory a pointer may address: offsets are checked against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Region {
    /// A stack frame (`r10`-relative offsets, `-512..0`).
    Stack,
    /// One value of map `map`, `size` bytes.
    MapValue { map: u32, size: u32 },
    /// A ring-buffer record of `size` bytes.
    Mem { size: u32 },
    /// The packet: offsets count from `data`.
    Packet,
}

/// Which context a program's `r1` points to at entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CtxKind {
    /// `struct xdp_md`: `data` at 0, `data_end` at 4.
    Xdp,
    /// `struct __sk_buff` (TC): `data` at 76, `data_end` at 80.
    Skb,
}

impl CtxKind {
    /// Offsets of `data` and `data_end`.
    pub fn data_fields(self) -> (i64, i64) {
        match self {
            CtxKind::Xdp => (0, 4),
            CtxKind::Skb => (76, 80),
        }
    }
}

/// A pointer: `region` start (the frame pointer for stacks) plus
/// `fixed + var`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ptr {
    pub region: Region,
    /// The known part of the offset (the kernel's `off`).
    pub fixed: i64,
    /// The variable part (the kernel's `var_off` and bounds).
    pub var: Scalar,
    /// Not null-checked yet: the helper call that returned it (copies
    /// share the id and are checked together).
    pub maybe_null: Option<u32>,
    /// Packet pointers: bytes from this pointer known to be in the
    /// packet (a comparison with `data_end` of this pointer plus that
    /// many showed it).
    pub range: i64,
    /// Packet pointers: this register is register `.0` plus `.1` (made by
    /// a copy and constant adds; dropped when that register is written),
    /// so a comparison of this one gives that one its range.
    pub link: Option<(u8, i64)>,
}

impl Ptr {
    /// A pointer with no range and no link.
    pub fn new(region: Region, fixed: i64, var: Scalar, maybe_null: Option<u32>) -> Ptr {
        Ptr {
            region,
            fixed,
            var,
            maybe_null,
            range: 0,
            link: None,
        }
    }
}

/// One register's abstract value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Val {
    /// Anything (including pointers the analysis does not follow).
    Unknown,
    Scalar(Scalar),
    /// The map of an `lddw` map reference (index in the Image).
    Map(u32),
    Ptr(Ptr),
    /// The context the run started with (only an entry's own `r1`, and
    /// copies of it).
    Ctx(CtxKind),
    /// The packet's `data_end`, as loaded from the context.
    PacketEnd,
}

/// The registers at one instruction: r0..r10, then [`PKT_LEN`].
pub(super) type Regs = [Val; 12];

/// Slot of [`Regs`] holding, as the low bound of a scalar, the bytes from
/// `data` known to be in the packet (joins keep the smallest).
pub(super) const PKT_LEN: usize = 11;

impl Val {
    pub fn stack(fixed: i64) -> Val {
        Val::Ptr(Ptr::new(Region::Stack, fixed, Scalar::konst(0), None))
    }

    /// The value as a scalar, if it is one.
    pub fn scalar(self) -> Option<Scalar> {
        match self {
            Val::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// Both values' possibilities; `widen` makes moved bounds extreme.
    pub fn join(self, o: Val, widen: bool) -> Val {
        let js = |a: Scalar, b: Scalar| if widen { a.widen(b) } else { a.join(b) };
        match (self, o) {
            (a, b) if a == b => a,
            (Val::Scalar(a), Val::Scalar(b)) => Val::Scalar(js(a, b)),
            (Val::Ptr(a), Val::Ptr(b)) if a.region == b.region && a.maybe_null == b.maybe_null => {
                let (fixed, av, bv) = if a.fixed == b.fixed {
                    (a.fixed, a.var, b.var)
                } else {
                    // Different known parts: keep the difference variable.
                    (
                        0,
                        a.var.add(Scalar::konst(a.fixed)),
                        b.var.add(Scalar::konst(b.fixed)),
                    )
                };
                let var = if widen && a.region == Region::Packet {
                    widen_packet(av, bv, fixed)
                } else {
                    js(av, bv)
                };
                Val::Ptr(Ptr {
                    fixed,
                    var,
                    // Bytes from the pointer's value: the least of both
                    // (how its offset is split does not change it).
                    range: a.range.min(b.range),
                    link: if a.link == b.link { a.link } else { None },
                    ..a
                })
            }
            _ => Val::Unknown,
        }
    }

    /// `self + s` for a pointer (the known part folds into `fixed`, as
    /// the kernel folds it into `off`).
    pub fn ptr_add(p: Ptr, s: Scalar) -> Val {
        match s.as_const() {
            Some(c) => match p.fixed.checked_add(c) {
                Some(fixed) if fixed.unsigned_abs() < 1 << 40 => Val::Ptr(Ptr {
                    fixed,
                    // Bytes known past the pointer shrink as it moves up,
                    // and nothing is known below it.
                    range: if c >= 0 { (p.range - c).max(0) } else { 0 },
                    link: p.link.and_then(|(r, d)| Some((r, d.checked_add(c)?))),
                    ..p
                }),
                _ => Val::Unknown,
            },
            None => Val::Ptr(Ptr {
                var: p.var.add(s),
                range: 0,
                link: None,
                ..p
            }),
        }
    }
}

/// Joins `new` into `old`; whether anything changed.
pub(super) fn join_into(old: &mut Regs, new: &Regs, widen: bool) -> bool {
    let mut changed = false;
    for (o, n) in old.iter_mut().zip(new) {
        // Most registers are the same on both edges: their join is
        // themselves (compared once, not joined and compared again).
        if *o == *n {
            continue;
        }
        let j = o.join(*n, widen);
        if j != *o {
            *o = j;
            changed = true;
        }
    }
    changed
}

/// The condition that holds on the fall-through edge of `cond`.
fn negate(cond: Cond) -> Option<Cond> {
    Some(match cond {
        Cond::Eq => Cond::Ne,
        Cond::Ne => Cond::Eq,
        Cond::Gt => Cond::Le,
        Cond::Le => Cond::Gt,
        Cond::Ge => Cond::Lt,
        Cond::Lt => Cond::Ge,
        Cond::Sgt => Cond::Sle,
        Cond::Sle => Cond::Sgt,
        Cond::Sge => Cond::Slt,
        Cond::Slt => Cond::Sge,
        Cond::Set => return None,
    })
}

/// The scalars `a` and `b` narrowed to the values where `a cond b`
/// holds; `None` when it never does.
fn narrow(cond: Cond, a: Scalar, b: Scalar) -> Option<(Scalar, Scalar)> {
    // `a < b` (strict) or `a <= b`, signed.
    let lt = |a: Scalar, b: Scalar, strict: bool| {
        let d = i64::from(strict);
        let a2 = Scalar {
            hi: a.hi.min(b.hi.saturating_sub(d)),
            ..a
        }
        .norm()?;
        let b2 = Scalar {
            lo: b.lo.max(a.lo.saturating_add(d)),
            ..b
        }
        .norm()?;
        Some((a2, b2))
    };
    let swap = |r: Option<(Scalar, Scalar)>| r.map(|(x, y)| (y, x));
    let both_nonneg = a.nonneg() && b.nonneg();
    match cond {
        Cond::Eq => {
            let known = !(a.tn.mask | b.tn.mask);
            if (a.tn.value ^ b.tn.value) & known != 0 {
                return None;
            }
            let lo = a.lo.max(b.lo);
            let hi = a.hi.min(b.hi);
            let x = Scalar {
                lo,
                hi,
                tn: a.tn.intersect(b.tn),
            }
            .norm()?;
            Some((x, x))
        }
        Cond::Ne => match (a.as_const(), b.as_const()) {
            (Some(x), Some(y)) if x == y => None,
            (_, Some(y)) => Some((shave(a, y)?, b)),
            (Some(x), _) => Some((a, shave(b, x)?)),
            _ => Some((a, b)),
        },
        Cond::Slt => lt(a, b, true),
        Cond::Sle => lt(a, b, false),
        Cond::Sgt => swap(lt(b, a, true)),
        Cond::Sge => swap(lt(b, a, false)),
        // Unsigned orders are the signed ones on non-negative values.
        Cond::Lt | Cond::Le | Cond::Gt | Cond::Ge if both_nonneg => {
            let signed = match cond {
                Cond::Lt => Cond::Slt,
                Cond::Le => Cond::Sle,
                Cond::Gt => Cond::Sgt,
                _ => Cond::Sge,
            };
            narrow(signed, a, b)
        }
        // `a <u c` with c >= 0: a is in 0..c whatever its sign.
        Cond::Lt | Cond::Le if b.nonneg() => {
            let hi = if cond == Cond::Lt {
                b.hi.checked_sub(1)?
            } else {
                b.hi
            };
            Some((Scalar { lo: 0, hi, ..a }.norm()?, b))
        }
        Cond::Gt | Cond::Ge if a.nonneg() => {
            let hi = if cond == Cond::Gt {
                a.hi.checked_sub(1)?
            } else {
                a.hi
            };
            Some((a, Scalar { lo: 0, hi, ..b }.norm()?))
        }
        Cond::Set => match (a.as_const(), b.as_const()) {
            (Some(x), Some(y)) if x & y == 0 => None,
            _ => Some((a, b)),
        },
        _ => Some((a, b)),
    }
}

/// `a` without the value `v` where that shrinks its interval.
fn shave(a: Scalar, v: i64) -> Option<Scalar> {
    if a.lo == v {
        Scalar {
            lo: v.saturating_add(1),
            ..a
        }
        .norm()
    } else if a.hi == v {
        Scalar {
            hi: v.saturating_sub(1),
            ..a
        }
        .norm()
    } else {
        Some(a)
    }
}

/// The registers on the taken and the fall-through edge of
/// `if dst cond src` (`src` already a value): `None` for an edge no
/// execution takes. `w32` jumps are refined only where the 32-bit and
/// 64-bit comparisons agree.
pub(super) fn branch(
    regs: &Regs,
    cond: Cond,
    w32: bool,
    dst: usize,
    src: Val,
    src_reg: Option<usize>,
) -> (Option<Regs>, Option<Regs>) {
    if let Some(edges) = packet_branch(regs, cond, w32, dst, src, src_reg) {
        return edges;
    }
    // Null checks of a map lookup's result.
    if let (Val::Ptr(p), Some(0)) = (regs[dst], src.scalar().and_then(|s| s.as_const())) {
        if let (Some(id), false, Cond::Eq | Cond::Ne) = (p.maybe_null, w32, cond) {
            let null = null_split(regs, id, true);
            let valid = null_split(regs, id, false);
            return if cond == Cond::Eq {
                (Some(null), Some(valid))
            } else {
                (Some(valid), Some(null))
            };
        }
    }
    let (Val::Scalar(a), Some(b)) = (regs[dst], src.scalar()) else {
        return (Some(*regs), Some(*regs));
    };
    // 32-bit comparisons agree with 64-bit ones on values whose upper
    // bits are 0 (and, signed, whose bit 31 is 0 too).
    let signed = matches!(cond, Cond::Sgt | Cond::Sge | Cond::Slt | Cond::Sle);
    let max32 = if signed {
        i32::MAX as i64
    } else {
        u32::MAX as i64
    };
    let in32 = |s: Scalar| s.nonneg() && s.hi <= max32;
    if w32 && !(in32(a) && in32(b)) {
        return (Some(*regs), Some(*regs));
    }
    let edge = |c: Option<Cond>| -> Option<Regs> {
        let Some(c) = c else {
            return Some(*regs);
        };
        let (a2, b2) = narrow(c, a, b)?;
        let mut r = *regs;
        r[dst] = Val::Scalar(a2);
        if let Some(s) = src_reg {
            r[s] = Val::Scalar(b2);
        }
        Some(r)
    };
    (edge(Some(cond)), edge(negate(cond)))
}

/// A packet pointer compared with `data_end`: on the edge where
/// `p <= data_end` holds, the packet has at least `p`'s smallest offset
/// from `data` bytes. (A pointer whose offset wrapped below `data` has a
/// negative offset, which shows nothing; one past the packet's 32-bit
/// offsets compares above `data_end`.)
fn packet_branch(
    regs: &Regs,
    cond: Cond,
    w32: bool,
    dst: usize,
    src: Val,
    src_reg: Option<usize>,
) -> Option<(Option<Regs>, Option<Regs>)> {
    if w32 {
        return None;
    }
    // (pointer, its register, whether the taken edge is the one where
    // p <= end)
    let (p, preg, taken_le) = match (regs[dst], src, src_reg) {
        (Val::Ptr(p), Val::PacketEnd, _) => (p, dst, matches!(cond, Cond::Le | Cond::Lt)),
        (Val::PacketEnd, Val::Ptr(p), Some(s)) => (p, s, matches!(cond, Cond::Ge | Cond::Gt)),
        _ => return None,
    };
    if p.region != Region::Packet || p.maybe_null.is_some() {
        return None;
    }
    let fall_le = matches!(
        (regs[dst], cond),
        (Val::Ptr(_), Cond::Gt | Cond::Ge) | (Val::PacketEnd, Cond::Lt | Cond::Le)
    );
    let shown = (p.fixed as i128 + p.var.lo as i128).clamp(0, i64::MAX as i128) as i64;
    let known = |r: &Regs| r[PKT_LEN].scalar().map_or(0, |s| s.lo.max(0));
    let with_len = || {
        let mut r = *regs;
        r[PKT_LEN] = Val::Scalar(Scalar::konst(known(regs).max(shown)));
        r
    };
    let with_len = || {
        let mut r = with_len();
        // A pointer at or below `data_end` is less than 2^32 past `data`
        // (a negative offset stays possible).
        cap_offset(&mut r[preg], 0);
        // `p = q + d <= data_end`: d bytes from q exist, and q is at most
        // 2^32 - d past `data`.
        if let Some((q, d)) = p.link {
            if let Some(v) = r.get_mut(q as usize) {
                cap_offset(v, d);
                if let Val::Ptr(qp) = v {
                    if qp.region == Region::Packet && d > 0 {
                        qp.range = qp.range.max(d);
                    }
                }
            }
        }
        r
    };
    let taken = if taken_le { with_len() } else { *regs };
    let fall = if fall_le { with_len() } else { *regs };
    Some((Some(taken), Some(fall)))
}

/// Widening of a packet pointer's offset: a bound that moves goes to the
/// next of 0, the largest packet offset, or the extreme (so loops that
/// step a pointer compared with `data_end` keep a bounded offset).
fn widen_packet(old: Scalar, new: Scalar, fixed: i64) -> Scalar {
    let j = old.join(new);
    let cap = MAX_PACKET_OFFSET - fixed;
    Scalar {
        lo: match j.lo {
            lo if lo >= old.lo => lo,
            lo if lo >= 0 => 0,
            _ => i64::MIN,
        },
        hi: match j.hi {
            hi if hi <= old.hi => hi,
            hi if hi <= cap => cap,
            _ => i64::MAX,
        },
        tn: if j.tn == old.tn {
            j.tn
        } else {
            super::absval::Tnum::UNKNOWN
        },
    }
}

/// Largest offset from `data` a pointer at or below `data_end` can have.
const MAX_PACKET_OFFSET: i64 = 1 << 32;

/// Narrows packet pointer `v`'s offset to at most
/// `MAX_PACKET_OFFSET - d` (it plus `d` is at or below `data_end`).
fn cap_offset(v: &mut Val, d: i64) {
    let Val::Ptr(p) = v else { return };
    if p.region != Region::Packet {
        return;
    }
    let cap = MAX_PACKET_OFFSET - d - p.fixed;
    if p.var.hi > cap && p.var.lo <= cap {
        if let Some(var) = (Scalar { hi: cap, ..p.var }).norm() {
            p.var = var;
        }
    }
}

/// The packet facts gone (a helper or a call may have moved or resized
/// the packet): packet pointers, `data_end` and the known length.
pub(super) fn forget_packet(regs: &mut Regs) {
    for v in regs[..PKT_LEN].iter_mut() {
        match v {
            Val::PacketEnd => *v = Val::Unknown,
            Val::Ptr(p) if p.region == Region::Packet => *v = Val::Unknown,
            _ => {}
        }
    }
    regs[PKT_LEN] = Val::Scalar(Scalar::konst(0));
}

/// Register `w` was written: links to it no longer hold.
pub(super) fn unlink(regs: &mut Regs, w: usize) {
    for v in regs[..PKT_LEN].iter_mut() {
        if let Val::Ptr(p) = v {
            if p.link.is_some_and(|(r, _)| r as usize == w) {
                p.link = None;
            }
        }
    }
}

/// The registers once the lookup `id` is known null (`null`) or not.
fn null_split(regs: &Regs, id: u32, null: bool) -> Regs {
    let mut r = *regs;
    for v in r.iter_mut() {
        if let Val::Ptr(p) = *v {
            if p.maybe_null == Some(id) {
                *v = if null {
                    Val::Scalar(Scalar::konst(0))
                } else {
                    Val::Ptr(Ptr {
                        maybe_null: None,
                        ..p
                    })
                };
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    //! Soundness of branch refinement: values that satisfy the condition
    //! (or its negation) stay members of that edge's registers.
    use super::super::absval::tests::{member, sample, Rng};
    use super::*;

    fn holds(cond: Cond, w32: bool, a: i64, b: i64) -> bool {
        let (ua, ub, sa, sb) = if w32 {
            (
                a as u32 as u64,
                b as u32 as u64,
                a as i32 as i64,
                b as i32 as i64,
            )
        } else {
            (a as u64, b as u64, a, b)
        };
        match cond {
            Cond::Eq => ua == ub,
            Cond::Ne => ua != ub,
            Cond::Gt => ua > ub,
            Cond::Ge => ua >= ub,
            Cond::Lt => ua < ub,
            Cond::Le => ua <= ub,
            Cond::Sgt => sa > sb,
            Cond::Sge => sa >= sb,
            Cond::Slt => sa < sb,
            Cond::Sle => sa <= sb,
            Cond::Set => ua & ub != 0,
        }
    }

    #[test]
    fn refinement_keeps_every_value_that_takes_the_edge() {
        use Cond::*;
        let conds = [Eq, Ne, Gt, Ge, Lt, Le, Sgt, Sge, Slt, Sle, Set];
        let mut rng = Rng(0x5eed);
        let mut checked = 0;
        for _ in 0..3000 {
            let (a, av) = sample(&mut rng);
            let (b, bv) = sample(&mut rng);
            let mut regs = [Val::Unknown; 12];
            regs[1] = Val::Scalar(a);
            regs[2] = Val::Scalar(b);
            for cond in conds {
                for w32 in [false, true] {
                    let (taken, fall) = branch(&regs, cond, w32, 1, Val::Scalar(b), Some(2));
                    for &x in av.iter().take(8) {
                        for &y in bv.iter().take(8) {
                            let edge = if holds(cond, w32, x, y) {
                                &taken
                            } else {
                                &fall
                            };
                            let ok = edge.is_some_and(|r| {
                                matches!((r[1], r[2]), (Val::Scalar(p), Val::Scalar(q))
                                    if member(p, x) && member(q, y))
                            });
                            assert!(
                                ok,
                                "{cond:?} w32={w32}: {x}, {y} lost from {a:?}, {b:?}: {edge:?}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
    }
}
