//! Ones'-complement sums as the executor follows them ([`Lin`]), so that
//! a program's IPv4 header checksum fix-up can be proven to give what
//! `action csum ip4h` gives.
//!
//! A checksum is a sum modulo 0xffff (2^16 ≡ 1, so folding the carries
//! back in keeps the residue, and a byte swap multiplies by 2^8). A
//! [`Lin`] is a value known as a linear [`Form`] over packet bits modulo
//! 0xffff plus an integer range; folds (`(s & 0xffff) + (s >> 16)`) name
//! the high part `s >> 16` with a fresh variable ([`Var::Hi`]) that the
//! fold's sum cancels. Whatever the forms cannot follow is unknown, and
//! the rewrite is then refused (`crate::rewrite`).

use crate::value::{literal, Bits, ONE, ZERO};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The modulus of ones'-complement 16-bit arithmetic.
pub const M: u64 = 0xffff;

/// A variable of a [`Form`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Var {
    /// Packet bit `byte * 8 + bit`, as it arrived.
    Bit(u32),
    /// `s >> 16` of the [`Lin`] with this id.
    Hi(u64),
    /// The byte a one-byte store into the packet left (the store's id):
    /// the same value wherever it is read back.
    Stored(u64),
}

/// `k + Σ coef · var` modulo 0xffff.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Form {
    pub k: u64,
    pub terms: BTreeMap<Var, u64>,
}

impl Form {
    pub fn konst(c: u64) -> Form {
        Form {
            k: c % M,
            terms: BTreeMap::new(),
        }
    }

    pub fn var(v: Var) -> Form {
        let mut terms = BTreeMap::new();
        terms.insert(v, 1);
        Form { k: 0, terms }
    }

    pub fn add(&self, o: &Form) -> Form {
        let mut out = self.clone();
        out.k = (out.k + o.k) % M;
        for (v, c) in &o.terms {
            let e = out.terms.entry(*v).or_insert(0);
            *e = (*e + c) % M;
        }
        out.terms.retain(|_, c| *c != 0);
        out
    }

    /// Times `c` (modulo 0xffff).
    pub fn scale(&self, c: u64) -> Form {
        let c = c % M;
        let mut out = Form {
            k: self.k * c % M,
            terms: self.terms.iter().map(|(v, x)| (*v, x * c % M)).collect(),
        };
        out.terms.retain(|_, c| *c != 0);
        out
    }

    pub fn neg(&self) -> Form {
        self.scale(M - 1)
    }

    pub fn sub(&self, o: &Form) -> Form {
        self.add(&o.neg())
    }

    /// Zero for every value of its variables.
    pub fn is_zero(&self) -> bool {
        self.k == 0 && self.terms.is_empty()
    }

    /// Packet bits `fixed` knows replaced by their values.
    pub fn substitute(&self, fixed: &dyn Fn(u32) -> Option<bool>) -> Form {
        let mut out = Form::konst(self.k);
        for (v, c) in &self.terms {
            match v {
                Var::Bit(p) => match fixed(*p) {
                    Some(true) => out = out.add(&Form::konst(*c)),
                    Some(false) => {}
                    None => out = out.add(&Form::var(*v).scale(*c)),
                },
                Var::Hi(_) | Var::Stored(_) => out = out.add(&Form::var(*v).scale(*c)),
            }
        }
        out
    }
}

/// What a [`Lin`] is a part of, for folds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Whole,
    /// `s & 0xffff` of the sum with id `of`, whose range was `lo..=hi`.
    Lo {
        of: u64,
        lo: u64,
        hi: u64,
    },
    /// `s >> 16` of it.
    Hi {
        of: u64,
        lo: u64,
        hi: u64,
    },
}

/// A value made of packet bits by additions and folds: `value ≡ form`
/// (mod 0xffff) and `value` in `lo..=hi`. With `low16`, only the value's
/// low 16 bits are meant (they are the residue and the range).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lin {
    pub id: u64,
    pub form: Form,
    pub lo: u64,
    pub hi: u64,
    pub low16: bool,
    pub part: Part,
}

static NEXT: AtomicU64 = AtomicU64::new(1);

fn fresh() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Lin {
    fn new(form: Form, lo: u64, hi: u64, low16: bool, part: Part) -> Lin {
        Lin {
            id: fresh(),
            form,
            lo,
            hi,
            low16,
            part,
        }
    }

    /// The byte store `id` left in the packet, whatever its value.
    pub fn stored_byte(id: u64) -> Lin {
        Lin::new(Form::var(Var::Stored(id)), 0, 255, false, Part::Whole)
    }

    /// A fresh id for a store.
    pub fn store_id() -> u64 {
        fresh()
    }

    pub fn konst(c: u64) -> Lin {
        Lin::new(Form::konst(c), c, c, false, Part::Whole)
    }

    /// A scalar of constants and packet bits (negated ones too); bits
    /// `fixed` knows count as constants. `None` above 48 bits.
    pub fn of_bits(b: &Bits, fixed: &dyn Fn(u32) -> Option<bool>) -> Option<Lin> {
        let mut form = Form::default();
        let (mut lo, mut hi) = (0u64, 0u64);
        for (i, &bit) in b.0.iter().enumerate() {
            if bit == ZERO {
                continue;
            }
            if i >= 48 {
                return None;
            }
            let w = 1u64 << i;
            if bit == ONE {
                form = form.add(&Form::konst(w));
                lo += w;
                hi += w;
                continue;
            }
            let (p, neg) = literal(bit)?;
            match fixed(p) {
                Some(v) => {
                    if v != neg {
                        form = form.add(&Form::konst(w));
                        lo += w;
                        hi += w;
                    }
                }
                None => {
                    let x = Form::var(Var::Bit(p)).scale(w);
                    form = if neg {
                        form.add(&Form::konst(w)).sub(&x)
                    } else {
                        form.add(&x)
                    };
                    hi += w;
                }
            }
        }
        Some(Lin::new(form, lo, hi, false, Part::Whole))
    }

    /// The whole value fits 16 bits (or only its low 16 bits are meant).
    fn is16(&self) -> bool {
        self.low16 || self.hi <= M
    }

    /// `self + o`: sums add; `(s & 0xffff) + (s >> 16)` is the fold of
    /// `s`, and `s + (s >> 16)` has that fold as its low 16 bits.
    pub fn add(&self, o: &Lin) -> Option<Lin> {
        if self.low16 || o.low16 {
            return None;
        }
        let form = self.form.add(&o.form);
        if let (Part::Lo { of, lo, hi }, Part::Hi { of: g, .. })
        | (Part::Hi { of: g, .. }, Part::Lo { of, lo, hi }) = (&self.part, &o.part)
        {
            if of == g {
                let (flo, fhi) = fold_range(*lo, *hi);
                return Some(Lin::new(form, flo, fhi, false, Part::Whole));
            }
        }
        for (s, h) in [(self, o), (o, self)] {
            if let Part::Hi { of, lo, hi } = &h.part {
                if *of == s.id && s.part == Part::Whole {
                    let (flo, fhi) = fold_range(*lo, *hi);
                    if fhi > M {
                        return None;
                    }
                    return Some(Lin::new(s.form.clone(), flo, fhi, true, Part::Whole));
                }
            }
        }
        Some(Lin::new(
            form,
            self.lo.checked_add(o.lo)?,
            self.hi.checked_add(o.hi)?,
            false,
            Part::Whole,
        ))
    }

    /// `self + c` on `w` bits (`c` of 2^(w-1) or more is a subtraction),
    /// when it does not wrap.
    pub fn add_const(&self, c: u64, w: u32) -> Option<Lin> {
        if self.low16 {
            return None;
        }
        let full = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        let c = c & full;
        if c >> (w - 1) & 1 == 1 {
            let neg = (full - c).checked_add(1)?;
            if self.lo < neg {
                return None;
            }
            let form = self.form.sub(&Form::konst(neg % M));
            return Some(Lin::new(
                form,
                self.lo - neg,
                self.hi - neg,
                false,
                Part::Whole,
            ));
        }
        let hi = self.hi.checked_add(c).filter(|h| *h <= full)?;
        let form = self.form.add(&Form::konst(c % M));
        Some(Lin::new(form, self.lo + c, hi, false, Part::Whole))
    }

    /// `self >> 16`: zero below 2^16, else the high part (a fresh
    /// variable).
    pub fn hi16(&self) -> Option<Lin> {
        if self.low16 {
            return None;
        }
        if self.hi <= M {
            return Some(Lin::konst(0));
        }
        let part = Part::Hi {
            of: self.id,
            lo: self.lo,
            hi: self.hi,
        };
        Some(Lin::new(
            Form::var(Var::Hi(self.id)),
            self.lo >> 16,
            self.hi >> 16,
            false,
            part,
        ))
    }

    /// `self & 0xffff`.
    pub fn lo16(&self) -> Lin {
        if self.hi <= M && !self.low16 {
            return self.clone();
        }
        if self.low16 {
            return Lin::new(self.form.clone(), self.lo, self.hi, false, Part::Whole);
        }
        let part = Part::Lo {
            of: self.id,
            lo: self.lo,
            hi: self.hi,
        };
        let form = self.form.sub(&Form::var(Var::Hi(self.id)));
        Lin::new(form, 0, M, false, part)
    }

    /// `self ^ 0xffff` (`all`: `self ^ -1`, whose low 16 bits are that).
    pub fn not16(&self, all: bool) -> Option<Lin> {
        if !self.is16() {
            return None;
        }
        let form = Form::konst(M).sub(&self.form);
        Some(Lin::new(
            form,
            M - self.hi,
            M - self.lo,
            all || self.low16,
            Part::Whole,
        ))
    }

    /// The low 16 bits byte-swapped (`be16`): times 2^8 modulo 0xffff; 0
    /// and 0xffff stay where they are.
    pub fn bswap16(&self) -> Option<Lin> {
        if !self.is16() {
            return None;
        }
        let lo = u64::from(self.lo >= 1);
        let hi = if self.hi < M { M - 1 } else { M };
        Some(Lin::new(self.form.scale(256), lo, hi, false, Part::Whole))
    }

    /// The value modulo 2^(8n) (n = 1 or 2), when its range lies in one
    /// such block (or only its low 16 bits are meant and n = 2).
    pub fn truncate(&self, n: usize) -> Option<Lin> {
        let bits = 8 * n as u32;
        if self.low16 {
            return (n == 2)
                .then(|| Lin::new(self.form.clone(), self.lo, self.hi, false, Part::Whole));
        }
        let k = self.lo >> bits;
        if self.hi >> bits != k {
            return None;
        }
        let base = k << bits;
        let form = self.form.sub(&Form::konst(base % M));
        Some(Lin::new(
            form,
            self.lo - base,
            self.hi - base,
            false,
            Part::Whole,
        ))
    }

    /// Times 2^(8k) (a byte's place in a word), k = 0 or 1.
    pub fn shift_bytes(&self, k: usize) -> Option<Lin> {
        if self.low16 || k > 1 {
            return None;
        }
        let f = 1u64 << (8 * k);
        Some(Lin::new(
            self.form.scale(f),
            self.lo * f,
            self.hi * f,
            false,
            Part::Whole,
        ))
    }

    /// Whether the value (or its meant low half) fits 32 bits.
    pub fn fits32(&self) -> bool {
        self.low16 || self.hi <= u32::MAX as u64
    }
}

/// The range of `(s & 0xffff) + (s >> 16)` for `s` in `lo..=hi`: at
/// least 1 when `s` is (a positive sum's fold is never 0).
fn fold_range(lo: u64, hi: u64) -> (u64, u64) {
    let flo = u64::from(lo >= 1);
    let (h0, h1) = (lo >> 16, hi >> 16);
    if h1 - h0 > 4096 {
        return (flo, M + h1);
    }
    let fhi = (h0..=h1)
        .map(|h| (hi - (h << 16)).min(M) + h)
        .max()
        .unwrap_or(M);
    (flo, fhi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Bits;

    fn none(_: u32) -> Option<bool> {
        None
    }

    /// RFC 1624's `~(~HC + ~m + m')` with both folds, as nf/mark.c
    /// writes it: the form is `HC + m - m'` and never 0xffff when `~m` is
    /// positive.
    #[test]
    fn rfc1624_update_folds_to_its_residue() {
        let hc = Lin::of_bits(&Bits::packet(24, 2), &none).unwrap_or_else(|| panic!("hc"));
        let old = Lin::of_bits(&Bits::packet(14, 2), &none).unwrap_or_else(|| panic!("m"));
        let new = Lin::of_bits(&Bits::constant(0xb845), &none).unwrap_or_else(|| panic!("m'"));
        let s = hc
            .not16(false)
            .and_then(|a| a.add(&old.not16(false)?))
            .and_then(|a| a.add(&new))
            .unwrap_or_else(|| panic!("sum"));
        let f1 = s
            .lo16()
            .add(&s.hi16().unwrap_or_else(|| panic!("hi")))
            .unwrap_or_else(|| panic!("fold"));
        let f2 = f1
            .add(&f1.hi16().unwrap_or_else(|| panic!("hi")))
            .unwrap_or_else(|| panic!("fold 2"));
        assert!(f2.low16);
        let out = f2.not16(true).unwrap_or_else(|| panic!("not"));
        let want = hc.form.add(&old.form).sub(&Form::konst(0xb845));
        assert_eq!(out.form, want);
        // m' is a positive constant, so the sum is at least 1 and the
        // result never 0xffff.
        assert_eq!(out.hi, M - 1);
    }

    #[test]
    fn byte_swap_is_times_256() {
        for x in [0u64, 1, 0x1234, 0xfffe, 0xffff] {
            let s = (x >> 8) | ((x & 0xff) << 8);
            assert_eq!(x * 256 % M, s % M);
        }
    }
}
