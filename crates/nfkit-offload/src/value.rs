//! Symbolic values: what a register or stack byte holds during symbolic
//! execution. Scalars are 64 [`Bit`]s, each a constant or one bit of the
//! packet, so loads, masks, shifts, byte swaps and ORs of packet bytes
//! stay exact; arithmetic that mixes packet bits (add, multiply, ...)
//! gives [`Val::Unknown`].

// Bit arrays are combined position by position, several at once.
#![allow(clippy::needless_range_loop)]

use std::rc::Rc;

/// One bit of a scalar: `0`, `1`, or packet bit `n - 2` (`byte * 8 + bit`).
pub type Bit = u32;

/// The constant bit 0.
pub const ZERO: Bit = 0;
/// The constant bit 1.
pub const ONE: Bit = 1;

/// The packet bit at `pos` (`byte * 8 + bit`) as a [`Bit`].
pub fn pkt_bit(pos: u32) -> Bit {
    pos + 2
}

/// Marks a packet bit negated: `NEG | pkt_bit(p)` is NOT bit `p` (from
/// an XOR with a constant 1).
pub const NEG: Bit = 1 << 31;

/// The packet bit position of `b`, if it is one (not negated).
pub fn bit_pos(b: Bit) -> Option<u32> {
    if b & NEG != 0 {
        return None;
    }
    b.checked_sub(2)
}

/// The packet bit `b` stands for and whether it is negated.
pub fn literal(b: Bit) -> Option<(u32, bool)> {
    (b & !NEG).checked_sub(2).map(|p| (p, b & NEG != 0))
}

/// NOT `b`.
pub fn not(b: Bit) -> Bit {
    match b {
        ZERO => ONE,
        ONE => ZERO,
        b => b ^ NEG,
    }
}

/// A 64-bit scalar, least significant bit first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bits(pub [Bit; 64]);

impl Bits {
    /// The constant `v`.
    pub fn constant(v: u64) -> Bits {
        let mut b = [ZERO; 64];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (v >> i & 1) as Bit;
        }
        Bits(b)
    }

    /// A little-endian load of `size` packet bytes at `off`, zero-extended.
    pub fn packet(off: u32, size: usize) -> Bits {
        let mut b = [ZERO; 64];
        for (i, x) in b.iter_mut().take(size * 8).enumerate() {
            *x = pkt_bit(off * 8 + i as u32);
        }
        Bits(b)
    }

    /// The value, if every bit is a constant.
    pub fn as_const(&self) -> Option<u64> {
        let mut v = 0u64;
        for (i, &b) in self.0.iter().enumerate() {
            match b {
                ZERO => {}
                ONE => v |= 1 << i,
                _ => return None,
            }
        }
        Some(v)
    }

    /// The low `n` bits, the rest zero.
    pub fn truncate(&self, n: usize) -> Bits {
        let mut b = self.0;
        for x in b.iter_mut().skip(n) {
            *x = ZERO;
        }
        Bits(b)
    }

    /// Shifted left by `s` (0..64).
    pub fn shl(&self, s: u32) -> Bits {
        let mut b = [ZERO; 64];
        for i in (s as usize)..64 {
            b[i] = self.0[i - s as usize];
        }
        Bits(b)
    }

    /// Shifted right (logically) by `s` (0..64).
    pub fn shr(&self, s: u32) -> Bits {
        let mut b = [ZERO; 64];
        for i in 0..(64 - s as usize) {
            b[i] = self.0[i + s as usize];
        }
        Bits(b)
    }

    /// The low `bits` bits with their bytes reversed, the rest zero.
    pub fn bswap(&self, bits: usize) -> Bits {
        let mut b = [ZERO; 64];
        let n = bits / 8;
        for k in 0..n {
            for j in 0..8 {
                b[k * 8 + j] = self.0[(n - 1 - k) * 8 + j];
            }
        }
        Bits(b)
    }

    /// Bitwise AND, if each result bit is a constant or one operand's bit.
    pub fn and(&self, o: &Bits) -> Option<Bits> {
        let mut b = [ZERO; 64];
        for i in 0..64 {
            b[i] = match (self.0[i], o.0[i]) {
                (ZERO, _) | (_, ZERO) => ZERO,
                (ONE, x) | (x, ONE) => x,
                (x, y) if x == y => x,
                (x, y) if x == not(y) => ZERO,
                _ => return None,
            };
        }
        Some(Bits(b))
    }

    /// Bitwise OR, if each result bit is a constant or one operand's bit.
    pub fn or(&self, o: &Bits) -> Option<Bits> {
        let mut b = [ZERO; 64];
        for i in 0..64 {
            b[i] = match (self.0[i], o.0[i]) {
                (ONE, _) | (_, ONE) => ONE,
                (ZERO, x) | (x, ZERO) => x,
                (x, y) if x == y => x,
                (x, y) if x == not(y) => ONE,
                _ => return None,
            };
        }
        Some(Bits(b))
    }

    /// Bitwise XOR where every bit has a constant on one side (a 1
    /// negates the other side's bit) or both sides are one bit.
    pub fn xor(&self, o: &Bits) -> Option<Bits> {
        let mut b = [ZERO; 64];
        for i in 0..64 {
            b[i] = match (self.0[i], o.0[i]) {
                (ZERO, x) | (x, ZERO) => x,
                (ONE, x) | (x, ONE) => not(x),
                (x, y) if x == y => ZERO,
                (x, y) if x == not(y) => ONE,
                _ => return None,
            };
        }
        Some(Bits(b))
    }

    /// The bits that are neither 0 nor 1, and whether some bit is 1.
    pub fn literals(&self) -> (Vec<Bit>, bool) {
        let mut out = Vec::new();
        let mut one = false;
        for &b in &self.0 {
            match b {
                ZERO => {}
                ONE => one = true,
                b => {
                    if !out.contains(&b) {
                        out.push(b);
                    }
                }
            }
        }
        (out, one)
    }

    /// Addition, when exact in this domain: constants, or operands whose
    /// bits never meet (then it is an OR).
    pub fn add(&self, o: &Bits) -> Option<Bits> {
        if let (Some(a), Some(c)) = (self.as_const(), o.as_const()) {
            return Some(Bits::constant(a.wrapping_add(c)));
        }
        if (0..64).all(|i| self.0[i] == ZERO || o.0[i] == ZERO) {
            return self.or(o);
        }
        None
    }

    /// Byte `k` (0 = least significant) as 8 bits.
    pub fn byte(&self, k: usize) -> [Bit; 8] {
        let mut out = [ZERO; 8];
        out.copy_from_slice(&self.0[k * 8..k * 8 + 8]);
        out
    }
}

impl Val {
    /// The value of a [`Val::Shifted`] for a shift amount `n` (taken
    /// modulo the width, as the VM and the kernel do).
    pub fn shifted_value(base: u64, n: u64, left: bool, mask: u64, w: u32) -> u64 {
        let full = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        let s = (n % w as u64) as u32;
        let v = if left { base << s } else { (base & full) >> s };
        v & mask & full
    }
}

/// What a register or a stack slot holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// A scalar: constant or made of packet bits.
    Scalar(Box<Bits>),
    /// `bits + add` modulo 2^`w` (w = 32 or 64): a header field with a
    /// constant added, as compilers emit range tests (`x - lo < n`).
    Affine { bits: Box<Bits>, add: u64, w: u32 },
    /// `(base << amount) & mask` (`left`) or `(base >> amount) & mask`
    /// on `w` bits (32 or 64), the amount made of packet bits: how
    /// compilers write a set-membership test on a header field
    /// (`1 << nexthdr & MASK`). Branching on it splits on the amount.
    Shifted {
        base: u64,
        amount: Box<Bits>,
        left: bool,
        mask: u64,
        w: u32,
    },
    /// A value that is 0 exactly when every one of `lits` is 0 (and
    /// never when `one`): an OR of masked XORs whose bits collide (an
    /// ACL's `(addr ^ rule) & mask | ...`). Only its zero test is
    /// followed.
    AnyOf { lits: Rc<Vec<Bit>>, one: bool },
    /// A sum of packet bits followed modulo 0xffff, for checksum
    /// fix-ups ([`crate::csum`]): fine to carry and store, not to branch
    /// on.
    Lin(Rc<crate::csum::Lin>),
    /// The XDP context pointer.
    Ctx,
    /// `data + off`.
    Pkt(i64),
    /// `data_end`.
    PktEnd,
    /// An address in the (absolute) stack: the entry's r10 is 0, a
    /// callee's is 512 lower.
    Stack(i64),
    /// A map (from `lddw` of a map index).
    Map(usize),
    /// A pointer into a value of map `map` known now (read only).
    MapValue {
        map: usize,
        /// The key it was found under.
        key: Rc<[u8]>,
        value: Rc<[u8]>,
        off: i64,
    },
    /// Something the analysis does not follow (time, random numbers,
    /// arithmetic on packet bits, ...): fine to carry, not to branch on.
    Unknown,
}

impl Val {
    /// The constant `v`.
    pub fn konst(v: u64) -> Val {
        Val::Scalar(Box::new(Bits::constant(v)))
    }

    /// The constant, if the value is one.
    pub fn as_const(&self) -> Option<u64> {
        match self {
            Val::Scalar(b) => b.as_const(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xor_with_a_constant_negates() {
        let x = Bits::packet(0, 1);
        let y = x
            .xor(&Bits::constant(0b101))
            .unwrap_or_else(|| panic!("xor"));
        assert_eq!(y.0[0], not(pkt_bit(0)));
        assert_eq!(y.0[1], pkt_bit(1));
        assert_eq!(literal(y.0[2]), Some((2, true)));
        assert_eq!(bit_pos(y.0[2]), None);
        // x ^ x = 0, x & !x = 0, x | !x = 1.
        assert_eq!(y.xor(&y).and_then(|z| z.as_const()), Some(0));
        assert_eq!(x.and(&y).map(|z| z.0[0]), Some(ZERO));
        assert_eq!(x.or(&y).map(|z| z.0[2]), Some(ONE));
    }

    #[test]
    fn be16_of_packet_load() {
        // ldxh at 12, then be16: the high byte is packet byte 12.
        let v = Bits::packet(12, 2).bswap(16);
        assert_eq!(v.0[8], pkt_bit(12 * 8));
        assert_eq!(v.0[0], pkt_bit(13 * 8));
        assert_eq!(v.0[16], ZERO);
        assert_eq!(Bits::constant(0x1234).bswap(16).as_const(), Some(0x3412));
    }
}
