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

/// The packet bit position of `b`, if it is one.
pub fn bit_pos(b: Bit) -> Option<u32> {
    b.checked_sub(2)
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
                _ => return None,
            };
        }
        Some(Bits(b))
    }

    /// Bitwise XOR where every bit has a constant on one side that is 0
    /// or both sides are constants.
    pub fn xor(&self, o: &Bits) -> Option<Bits> {
        let mut b = [ZERO; 64];
        for i in 0..64 {
            b[i] = match (self.0[i], o.0[i]) {
                (ZERO, x) | (x, ZERO) => x,
                (ONE, ONE) => ZERO,
                _ => return None,
            };
        }
        Some(Bits(b))
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

/// What a register or a stack slot holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// A scalar: constant or made of packet bits.
    Scalar(Box<Bits>),
    /// `bits + add` modulo 2^`w` (w = 32 or 64): a header field with a
    /// constant added, as compilers emit range tests (`x - lo < n`).
    Affine { bits: Box<Bits>, add: u64, w: u32 },
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
    fn be16_of_packet_load() {
        // ldxh at 12, then be16: the high byte is packet byte 12.
        let v = Bits::packet(12, 2).bswap(16);
        assert_eq!(v.0[8], pkt_bit(12 * 8));
        assert_eq!(v.0[0], pkt_bit(13 * 8));
        assert_eq!(v.0[16], ZERO);
        assert_eq!(Bits::constant(0x1234).bswap(16).as_const(), Some(0x3412));
    }
}
