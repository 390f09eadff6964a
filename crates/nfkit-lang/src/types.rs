//! The value types of the language and their arithmetic: every value
//! wraps at its type's width, signed types are two's complement. Values
//! are kept in 64-bit registers in canonical form: unsigned types
//! zero-extended, signed types sign-extended, `bool` 0 or 1.

use std::fmt;

/// A value type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    Bool,
}

impl Ty {
    /// All integer types, then bool.
    pub const ALL: [Ty; 9] = [
        Ty::U8,
        Ty::U16,
        Ty::U32,
        Ty::U64,
        Ty::S8,
        Ty::S16,
        Ty::S32,
        Ty::S64,
        Ty::Bool,
    ];

    /// The type a name denotes (`u8` .. `s64`, `bool`).
    pub fn from_name(n: &str) -> Option<Ty> {
        Ty::ALL.into_iter().find(|t| t.name() == n)
    }

    pub fn name(self) -> &'static str {
        match self {
            Ty::U8 => "u8",
            Ty::U16 => "u16",
            Ty::U32 => "u32",
            Ty::U64 => "u64",
            Ty::S8 => "s8",
            Ty::S16 => "s16",
            Ty::S32 => "s32",
            Ty::S64 => "s64",
            Ty::Bool => "bool",
        }
    }

    /// Width in bits (bool: 1).
    pub fn bits(self) -> u32 {
        match self {
            Ty::U8 | Ty::S8 => 8,
            Ty::U16 | Ty::S16 => 16,
            Ty::U32 | Ty::S32 => 32,
            Ty::U64 | Ty::S64 => 64,
            Ty::Bool => 1,
        }
    }

    /// Size in bytes as stored in maps (bool: 1).
    pub fn bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }

    pub fn signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }

    pub fn is_int(self) -> bool {
        self != Ty::Bool
    }

    /// The unsigned or signed type of `bits` width.
    pub fn int(signed: bool, bits: u32) -> Ty {
        match (signed, bits) {
            (false, 8) => Ty::U8,
            (false, 16) => Ty::U16,
            (false, 32) => Ty::U32,
            (true, 8) => Ty::S8,
            (true, 16) => Ty::S16,
            (true, 32) => Ty::S32,
            (true, _) => Ty::S64,
            (false, _) => Ty::U64,
        }
    }

    /// The canonical 64-bit form of `v` in this type (wrapped at the width).
    pub fn wrap(self, v: u64) -> u64 {
        match self {
            Ty::Bool => (v != 0) as u64,
            Ty::U64 | Ty::S64 => v,
            t => {
                let b = t.bits();
                let m = v & ((1u64 << b) - 1);
                if t.signed() && (m >> (b - 1)) & 1 == 1 {
                    m | !((1u64 << b) - 1)
                } else {
                    m
                }
            }
        }
    }

    /// Whether the mathematical integer `v` fits the type.
    pub fn fits(self, v: i128) -> bool {
        match self {
            Ty::Bool => v == 0 || v == 1,
            t if t.signed() => {
                let b = t.bits();
                v >= -(1i128 << (b - 1)) && v < (1i128 << (b - 1))
            }
            t => v >= 0 && v < (1i128 << t.bits()),
        }
    }

    /// The value of canonical `v` as a mathematical integer.
    pub fn value(self, v: u64) -> i128 {
        if self.signed() {
            v as i64 as i128
        } else {
            v as i128
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_sign_extends() {
        assert_eq!(Ty::U8.wrap(0x1ff), 0xff);
        assert_eq!(Ty::S8.wrap(0xff), u64::MAX);
        assert_eq!(Ty::S16.wrap(0x7fff), 0x7fff);
        assert_eq!(Ty::S32.wrap(0x8000_0000), 0xffff_ffff_8000_0000);
        assert_eq!(Ty::U32.wrap(u64::MAX), 0xffff_ffff);
        assert_eq!(Ty::Bool.wrap(7), 1);
        assert!(Ty::S8.fits(-128) && !Ty::S8.fits(128) && Ty::U8.fits(255) && !Ty::U8.fits(-1));
    }
}
