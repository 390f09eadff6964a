//! The abstract values of the load-time bounds analysis (`bounds`):
//! scalars as a signed interval plus a tristate number (which bits are
//! known), and the arithmetic on them. Every operation over-approximates
//! what the instruction can compute, so a value outside the result never
//! occurs at run time; that is what lets the analysis refuse an access
//! only when every value it can have is out of bounds.

#![forbid(unsafe_code)]

use nfkit_isa::{AluOp, Width};

/// Known and unknown bits: a value `v` is possible iff
/// `v & !mask == value` (the kernel's "tnum").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tnum {
    pub value: u64,
    pub mask: u64,
}

impl Tnum {
    pub const UNKNOWN: Tnum = Tnum {
        value: 0,
        mask: u64::MAX,
    };

    pub fn konst(v: u64) -> Tnum {
        Tnum { value: v, mask: 0 }
    }

    /// Every value of the unsigned range `lo..=hi` (and some more).
    pub fn from_urange(lo: u64, hi: u64) -> Tnum {
        let chi = lo ^ hi;
        let bits = 64 - chi.leading_zeros();
        if bits >= 64 {
            return Tnum::UNKNOWN;
        }
        let delta = (1u64 << bits) - 1;
        Tnum {
            value: lo & !delta,
            mask: delta,
        }
    }

    fn norm(value: u64, mask: u64) -> Tnum {
        Tnum {
            value: value & !mask,
            mask,
        }
    }

    pub fn add(self, o: Tnum) -> Tnum {
        let sm = self.mask.wrapping_add(o.mask);
        let sv = self.value.wrapping_add(o.value);
        let chi = sm.wrapping_add(sv) ^ sv;
        Tnum::norm(sv, chi | self.mask | o.mask)
    }

    pub fn sub(self, o: Tnum) -> Tnum {
        let dv = self.value.wrapping_sub(o.value);
        let alpha = dv.wrapping_add(self.mask);
        let beta = dv.wrapping_sub(o.mask);
        Tnum::norm(dv, (alpha ^ beta) | self.mask | o.mask)
    }

    pub fn and(self, o: Tnum) -> Tnum {
        let v = self.value & o.value;
        let maybe = (self.value | self.mask) & (o.value | o.mask);
        Tnum::norm(v, maybe & !v)
    }

    pub fn or(self, o: Tnum) -> Tnum {
        let v = self.value | o.value;
        Tnum::norm(v, (self.mask | o.mask) & !v)
    }

    pub fn xor(self, o: Tnum) -> Tnum {
        Tnum::norm(self.value ^ o.value, self.mask | o.mask)
    }

    pub fn lsh(self, k: u32) -> Tnum {
        Tnum::norm(self.value << k, self.mask << k)
    }

    pub fn rsh(self, k: u32) -> Tnum {
        Tnum::norm(self.value >> k, self.mask >> k)
    }

    pub fn arsh(self, k: u32) -> Tnum {
        Tnum::norm(
            ((self.value as i64) >> k) as u64,
            ((self.mask as i64) >> k) as u64,
        )
    }

    /// Values possible in both (meaningful when they share one).
    pub fn intersect(self, o: Tnum) -> Tnum {
        Tnum::norm(self.value | o.value, self.mask & o.mask)
    }

    /// Values possible in either.
    pub fn union(self, o: Tnum) -> Tnum {
        let mu = self.mask | o.mask | (self.value ^ o.value);
        Tnum::norm(self.value, mu)
    }

    fn low32(self) -> Tnum {
        Tnum {
            value: self.value & 0xffff_ffff,
            mask: self.mask & 0xffff_ffff,
        }
    }
}

/// A set of 64-bit values: the signed interval `lo..=hi` and the bits
/// `tn` allows, both over-approximations of the same set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Scalar {
    pub lo: i64,
    pub hi: i64,
    pub tn: Tnum,
}

const U32_MAX: i64 = u32::MAX as i64;

impl Scalar {
    pub const ANY: Scalar = Scalar {
        lo: i64::MIN,
        hi: i64::MAX,
        tn: Tnum::UNKNOWN,
    };

    pub fn konst(v: i64) -> Scalar {
        Scalar {
            lo: v,
            hi: v,
            tn: Tnum::konst(v as u64),
        }
    }

    /// `lo..=hi` (`None` when empty).
    pub fn range(lo: i64, hi: i64) -> Option<Scalar> {
        Scalar {
            lo,
            hi,
            tn: Tnum::UNKNOWN,
        }
        .norm()
    }

    /// An `n`-byte unsigned value.
    pub fn unsigned_bytes(n: usize) -> Scalar {
        match n {
            1 | 2 | 4 => Scalar::range(0, (1i64 << (8 * n)) - 1).unwrap_or(Scalar::ANY),
            _ => Scalar::ANY,
        }
    }

    /// An `n`-byte value sign-extended to 64 bits.
    pub fn signed_bytes(n: usize) -> Scalar {
        match n {
            1 | 2 | 4 => {
                let half = 1i64 << (8 * n - 1);
                Scalar::range(-half, half - 1).unwrap_or(Scalar::ANY)
            }
            _ => Scalar::ANY,
        }
    }

    pub fn as_const(self) -> Option<i64> {
        (self.lo == self.hi).then_some(self.lo)
    }

    pub fn nonneg(self) -> bool {
        self.lo >= 0
    }

    /// Makes interval and bits agree; `None` when no value is left.
    pub fn norm(mut self) -> Option<Scalar> {
        let sign = 1u64 << 63;
        if self.tn.mask & sign == 0 {
            // The sign bit is known: the bits bound the signed value.
            self.lo = self.lo.max(self.tn.value as i64);
            self.hi = self.hi.min((self.tn.value | self.tn.mask) as i64);
        }
        if self.lo > self.hi {
            return None;
        }
        if self.lo >= 0 || self.hi < 0 {
            self.tn = self
                .tn
                .intersect(Tnum::from_urange(self.lo as u64, self.hi as u64));
        }
        if self.lo == self.hi {
            self.tn = Tnum::konst(self.lo as u64);
        }
        Some(self)
    }

    fn or_any(s: Option<Scalar>) -> Scalar {
        s.unwrap_or(Scalar::ANY)
    }

    pub fn join(self, o: Scalar) -> Scalar {
        Scalar {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
            tn: self.tn.union(o.tn),
        }
    }

    /// `self` joined with `newer`, bounds that moved going straight to
    /// the extremes (so loops reach a fixpoint in a few rounds).
    pub fn widen(self, newer: Scalar) -> Scalar {
        let j = self.join(newer);
        Scalar {
            lo: if j.lo < self.lo { i64::MIN } else { j.lo },
            hi: if j.hi > self.hi { i64::MAX } else { j.hi },
            tn: if j.tn == self.tn { j.tn } else { Tnum::UNKNOWN },
        }
    }

    /// The low 32 bits, zero-extended (what a 32-bit ALU result holds).
    pub fn trunc32(self) -> Scalar {
        if self.lo >= 0 && self.hi <= U32_MAX {
            return self;
        }
        Scalar::or_any(
            Scalar {
                lo: 0,
                hi: U32_MAX,
                tn: self.tn.low32(),
            }
            .norm(),
        )
    }

    pub fn add(self, o: Scalar) -> Scalar {
        let tn = self.tn.add(o.tn);
        match (self.lo.checked_add(o.lo), self.hi.checked_add(o.hi)) {
            (Some(lo), Some(hi)) => Scalar::or_any(Scalar { lo, hi, tn }.norm()),
            _ => Scalar::or_any(Scalar { tn, ..Scalar::ANY }.norm()),
        }
    }

    pub fn sub(self, o: Scalar) -> Scalar {
        let tn = self.tn.sub(o.tn);
        match (self.lo.checked_sub(o.hi), self.hi.checked_sub(o.lo)) {
            (Some(lo), Some(hi)) => Scalar::or_any(Scalar { lo, hi, tn }.norm()),
            _ => Scalar::or_any(Scalar { tn, ..Scalar::ANY }.norm()),
        }
    }
}

/// `dst op= src` over scalars, as the instruction computes it at `width`.
pub(super) fn alu(op: AluOp, width: Width, a: Scalar, b: Scalar) -> Scalar {
    match width {
        Width::W64 => alu64(op, a, b),
        Width::W32 => {
            let (a32, b32) = (a.trunc32(), b.trunc32());
            match op {
                // Zero-extended operands give the right low 32 bits.
                AluOp::Add
                | AluOp::Sub
                | AluOp::Mul
                | AluOp::Div
                | AluOp::Mod
                | AluOp::And
                | AluOp::Or
                | AluOp::Xor
                | AluOp::Neg
                | AluOp::Mov => alu64(op, a32, b32).trunc32(),
                AluOp::Lsh | AluOp::Rsh => match b32.as_const() {
                    Some(k) => alu64(op, a32, Scalar::konst(k & 31)).trunc32(),
                    None => Scalar::unsigned_bytes(4),
                },
                _ => match (a32.as_const(), b32.as_const()) {
                    (Some(x), Some(y)) => const32(op, x as u32, y as u32)
                        .map_or(Scalar::unsigned_bytes(4), |v| Scalar::konst(v as i64)),
                    _ => Scalar::unsigned_bytes(4),
                },
            }
        }
    }
}

/// The 32-bit signed operations on known values (`None`: not computed).
fn const32(op: AluOp, x: u32, y: u32) -> Option<u32> {
    let (sx, sy) = (x as i32, y as i32);
    Some(match op {
        AluOp::Arsh => (sx >> (y & 31)) as u32,
        AluOp::SDiv if sy == 0 => 0,
        AluOp::SDiv => sx.wrapping_div(sy) as u32,
        AluOp::SMod if sy == 0 => x,
        AluOp::SMod => sx.wrapping_rem(sy) as u32,
        AluOp::MovSx(8) => y as u8 as i8 as i32 as u32,
        AluOp::MovSx(16) => y as u16 as i16 as i32 as u32,
        _ => return None,
    })
}

fn alu64(op: AluOp, a: Scalar, b: Scalar) -> Scalar {
    match op {
        AluOp::Mov => b,
        AluOp::Add => a.add(b),
        AluOp::Sub => a.sub(b),
        AluOp::Neg => Scalar::konst(0).sub(a),
        AluOp::Mul => mul(a, b),
        AluOp::Div => udiv(a, b),
        AluOp::Mod => umod(a, b),
        AluOp::And => {
            let hi = match (a.nonneg(), b.nonneg()) {
                (true, true) => Some(a.hi.min(b.hi)),
                (true, false) => Some(a.hi),
                (false, true) => Some(b.hi),
                (false, false) => None,
            };
            let tn = a.tn.and(b.tn);
            let s = match hi {
                Some(hi) => Scalar { lo: 0, hi, tn },
                None => Scalar { tn, ..Scalar::ANY },
            };
            Scalar::or_any(s.norm())
        }
        AluOp::Or => bits_only(a.tn.or(b.tn)),
        AluOp::Xor => bits_only(a.tn.xor(b.tn)),
        AluOp::Lsh | AluOp::Rsh | AluOp::Arsh => match b.as_const() {
            Some(k) => shift(op, a, (k & 63) as u32),
            None if op == AluOp::Rsh && a.nonneg() => Scalar::or_any(Scalar::range(0, a.hi)),
            None => Scalar::ANY,
        },
        AluOp::MovSx(bits) => movsx(bits, b),
        AluOp::SDiv | AluOp::SMod => match (a.as_const(), b.as_const()) {
            (Some(x), Some(y)) => Scalar::konst(match (op, y) {
                (AluOp::SDiv, 0) => 0,
                (AluOp::SDiv, _) => x.wrapping_div(y),
                (_, 0) => x,
                _ => x.wrapping_rem(y),
            }),
            _ => Scalar::ANY,
        },
    }
}

fn bits_only(tn: Tnum) -> Scalar {
    Scalar::or_any(Scalar { tn, ..Scalar::ANY }.norm())
}

fn mul(a: Scalar, b: Scalar) -> Scalar {
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        return Scalar::konst(x.wrapping_mul(y));
    }
    if a.nonneg() && b.nonneg() {
        if let Some(hi) = a.hi.checked_mul(b.hi) {
            return Scalar::or_any(Scalar::range(a.lo * b.lo, hi));
        }
    }
    Scalar::ANY
}

fn udiv(a: Scalar, b: Scalar) -> Scalar {
    match b.as_const() {
        Some(0) => Scalar::konst(0),
        Some(c) if c > 0 && a.nonneg() => Scalar::or_any(Scalar::range(a.lo / c, a.hi / c)),
        Some(c) if c > 1 => Scalar::or_any(Scalar::range(0, (u64::MAX / c as u64) as i64)),
        Some(1) => a,
        _ if a.nonneg() => Scalar::or_any(Scalar::range(0, a.hi)),
        _ => Scalar::ANY,
    }
}

fn umod(a: Scalar, b: Scalar) -> Scalar {
    match b.as_const() {
        Some(0) => a,
        Some(c) if c > 0 && a.nonneg() && a.hi < c => a,
        Some(c) if c > 0 && a.nonneg() => Scalar::or_any(Scalar::range(0, a.hi.min(c - 1))),
        Some(c) if c > 0 => Scalar::or_any(Scalar::range(0, c - 1)),
        _ if a.nonneg() => Scalar::or_any(Scalar::range(0, a.hi)),
        _ => Scalar::ANY,
    }
}

fn shift(op: AluOp, a: Scalar, k: u32) -> Scalar {
    let s = match op {
        AluOp::Lsh => {
            let fits = a.nonneg() && k < 63 && a.hi <= (i64::MAX >> k);
            let tn = a.tn.lsh(k);
            if fits {
                Scalar {
                    lo: a.lo << k,
                    hi: a.hi << k,
                    tn,
                }
            } else {
                Scalar { tn, ..Scalar::ANY }
            }
        }
        AluOp::Rsh => {
            let tn = a.tn.rsh(k);
            if a.nonneg() {
                Scalar {
                    lo: a.lo >> k,
                    hi: a.hi >> k,
                    tn,
                }
            } else if k > 0 {
                Scalar {
                    lo: 0,
                    hi: (u64::MAX >> k) as i64,
                    tn,
                }
            } else {
                a
            }
        }
        _ => Scalar {
            lo: a.lo >> k,
            hi: a.hi >> k,
            tn: a.tn.arsh(k),
        },
    };
    Scalar::or_any(s.norm())
}

fn movsx(bits: u8, b: Scalar) -> Scalar {
    let bits = u32::from(bits.clamp(8, 32));
    let half = 1i64 << (bits - 1);
    if b.lo >= -half && b.hi < half {
        return b;
    }
    if let Some(v) = b.as_const() {
        let shift = 64 - bits;
        return Scalar::konst((v << shift) >> shift);
    }
    Scalar::or_any(Scalar::range(-half, half - 1))
}

#[cfg(test)]
pub(super) mod tests {
    //! Soundness: for random abstract scalars and members of them, the
    //! concrete result of every operation is a member of the abstract
    //! result.
    use super::*;

    pub(in crate::check) struct Rng(pub u64);

    impl Rng {
        pub fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
        fn pick(&mut self, xs: &[i64]) -> i64 {
            xs[(self.next() % xs.len() as u64) as usize]
        }
    }

    pub(in crate::check) fn member(s: Scalar, v: i64) -> bool {
        s.lo <= v && v <= s.hi && (v as u64) & !s.tn.mask == s.tn.value
    }

    /// An abstract scalar and a few of its members.
    pub(in crate::check) fn sample(rng: &mut Rng) -> (Scalar, Vec<i64>) {
        let edges = [
            0,
            1,
            -1,
            7,
            8,
            255,
            4096,
            -4096,
            i64::MAX,
            i64::MIN,
            1 << 32,
        ];
        let x = if rng.next().is_multiple_of(2) {
            rng.pick(&edges)
        } else {
            rng.next() as i64 >> (rng.next() % 64)
        };
        let s = match rng.next() % 5 {
            0 => Scalar::konst(x),
            1 => {
                let d = (rng.next() % 600) as i64;
                Scalar::range(x.saturating_sub(d), x.saturating_add(d)).unwrap()
            }
            2 => Scalar::unsigned_bytes([1, 2, 4][(rng.next() % 3) as usize]),
            3 => {
                let mask = rng.next() & rng.next();
                bits_only(Tnum::norm(x as u64, mask))
            }
            _ => Scalar::ANY,
        };
        let mut vals = vec![s.lo, s.hi];
        for _ in 0..40 {
            let v = (s.tn.value | (rng.next() & s.tn.mask)) as i64;
            if member(s, v) {
                vals.push(v);
            }
        }
        vals.retain(|&v| member(s, v));
        (s, vals)
    }

    /// What the instruction computes (the interpreter's semantics).
    fn concrete(op: AluOp, w: Width, a: i64, b: i64) -> i64 {
        let (ua, ub) = (a as u64, b as u64);
        match w {
            Width::W64 => {
                (match op {
                    AluOp::Add => ua.wrapping_add(ub),
                    AluOp::Sub => ua.wrapping_sub(ub),
                    AluOp::Mul => ua.wrapping_mul(ub),
                    AluOp::Div => ua.checked_div(ub).unwrap_or(0),
                    AluOp::Mod => ua.checked_rem(ub).unwrap_or(ua),
                    AluOp::SDiv if b == 0 => 0,
                    AluOp::SDiv => a.wrapping_div(b) as u64,
                    AluOp::SMod if b == 0 => ua,
                    AluOp::SMod => a.wrapping_rem(b) as u64,
                    AluOp::Or => ua | ub,
                    AluOp::And => ua & ub,
                    AluOp::Xor => ua ^ ub,
                    AluOp::Lsh => ua << (ub & 63),
                    AluOp::Rsh => ua >> (ub & 63),
                    AluOp::Arsh => (a >> (ub & 63)) as u64,
                    AluOp::Neg => ua.wrapping_neg(),
                    AluOp::Mov => ub,
                    AluOp::MovSx(8) => b as i8 as i64 as u64,
                    AluOp::MovSx(16) => b as i16 as i64 as u64,
                    AluOp::MovSx(_) => b as i32 as i64 as u64,
                }) as i64
            }
            Width::W32 => {
                let (x, y) = (ua as u32, ub as u32);
                (match op {
                    AluOp::Add => x.wrapping_add(y),
                    AluOp::Sub => x.wrapping_sub(y),
                    AluOp::Mul => x.wrapping_mul(y),
                    AluOp::Div => x.checked_div(y).unwrap_or(0),
                    AluOp::Mod => x.checked_rem(y).unwrap_or(x),
                    AluOp::Or => x | y,
                    AluOp::And => x & y,
                    AluOp::Xor => x ^ y,
                    AluOp::Lsh => x << (y & 31),
                    AluOp::Rsh => x >> (y & 31),
                    AluOp::Neg => x.wrapping_neg(),
                    AluOp::Mov => y,
                    _ => const32(op, x, y).unwrap_or(0),
                }) as u64 as i64
            }
        }
    }

    #[test]
    fn every_operation_over_approximates() {
        use AluOp::*;
        let ops = [
            Add,
            Sub,
            Mul,
            Div,
            SDiv,
            Or,
            And,
            Lsh,
            Rsh,
            Neg,
            Mod,
            SMod,
            Xor,
            Mov,
            MovSx(8),
            MovSx(16),
            MovSx(32),
            Arsh,
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut checked = 0;
        for _ in 0..4000 {
            let (a, av) = sample(&mut rng);
            let (b, bv) = sample(&mut rng);
            for op in ops {
                for w in [Width::W64, Width::W32] {
                    if w == Width::W32 && op == MovSx(32) {
                        continue;
                    }
                    let r = alu(op, w, a, b);
                    for &x in av.iter().take(6) {
                        for &y in bv.iter().take(6) {
                            let c = concrete(op, w, x, y);
                            assert!(
                                member(r, c),
                                "{op:?} {w:?}: {x} op {y} = {c} not in {r:?} (from {a:?}, {b:?})"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    #[test]
    fn joins_and_widening_keep_both_sides() {
        let mut rng = Rng(77);
        for _ in 0..2000 {
            let (a, av) = sample(&mut rng);
            let (b, bv) = sample(&mut rng);
            for j in [a.join(b), a.widen(b)] {
                assert!(
                    av.iter().chain(&bv).all(|&v| member(j, v)),
                    "{a:?} {b:?} {j:?}"
                );
            }
        }
    }
}
