//! [`Pattern`]: what a path (or a rule) requires of a packet: given bits
//! at given byte offsets (a ternary match, byte by byte) and a minimum
//! length. Bit positions are `byte * 8 + bit`, bit 0 the least
//! significant bit of the byte.

use std::fmt;

/// A ternary match on packet bytes plus a minimum frame length.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pattern {
    /// Required bit values (only where `mask` has a 1).
    pub value: Vec<u8>,
    /// Which bits are required.
    pub mask: Vec<u8>,
    /// Frames shorter than this do not match.
    pub min_len: usize,
}

impl Pattern {
    /// The pattern every frame matches.
    pub fn any() -> Pattern {
        Pattern::default()
    }

    /// The required value of bit `pos`, if the pattern fixes it.
    pub fn bit(&self, pos: u32) -> Option<bool> {
        let (byte, bit) = ((pos / 8) as usize, pos % 8);
        let m = *self.mask.get(byte)?;
        if m >> bit & 1 == 1 {
            Some(self.value[byte] >> bit & 1 == 1)
        } else {
            None
        }
    }

    /// Requires bit `pos` to be `v`; false when the pattern requires the
    /// opposite (and then the pattern is unchanged).
    pub fn set_bit(&mut self, pos: u32, v: bool) -> bool {
        match self.bit(pos) {
            Some(old) => old == v,
            None => {
                let (byte, bit) = ((pos / 8) as usize, pos % 8);
                if self.mask.len() <= byte {
                    self.mask.resize(byte + 1, 0);
                    self.value.resize(byte + 1, 0);
                }
                self.mask[byte] |= 1 << bit;
                if v {
                    self.value[byte] |= 1 << bit;
                }
                true
            }
        }
    }

    /// Requires the bits of byte `at` that `mask` has to be those of
    /// `val`; `false` when one was already required otherwise.
    pub fn set_byte(&mut self, at: usize, val: u8, mask: u8) -> bool {
        let mut ok = true;
        for bit in (0..8).filter(|bit| mask >> bit & 1 == 1) {
            ok &= self.set_bit(at as u32 * 8 + bit, val >> bit & 1 == 1);
        }
        ok
    }

    /// Clears bit `pos` from the pattern (any value matches there).
    pub fn clear_bit(&mut self, pos: u32) {
        let (byte, bit) = ((pos / 8) as usize, pos % 8);
        if let Some(m) = self.mask.get_mut(byte) {
            *m &= !(1 << bit);
            self.value[byte] &= !(1 << bit);
        }
        self.trim();
    }

    /// Drops trailing all-wildcard bytes.
    pub fn trim(&mut self) {
        while self.mask.last() == Some(&0) {
            self.mask.pop();
            self.value.pop();
        }
    }

    /// One past the last byte with a required bit.
    pub fn bytes_used(&self) -> usize {
        self.mask.iter().rposition(|&m| m != 0).map_or(0, |i| i + 1)
    }

    /// Whether `frame` matches.
    pub fn matches(&self, frame: &[u8]) -> bool {
        if frame.len() < self.min_len || frame.len() < self.bytes_used() {
            return false;
        }
        self.mask
            .iter()
            .zip(&self.value)
            .zip(frame)
            .all(|((m, v), f)| f & m == v & m)
    }

    /// Whether some frame (of any length) matches both patterns.
    pub fn overlaps(&self, other: &Pattern) -> bool {
        self.mask
            .iter()
            .zip(&self.value)
            .zip(other.mask.iter().zip(&other.value))
            .all(|((m1, v1), (m2, v2))| (v1 ^ v2) & m1 & m2 == 0)
    }

    /// Number of required bits: how specific the pattern is.
    pub fn specificity(&self) -> u32 {
        self.mask.iter().map(|m| m.count_ones()).sum()
    }

    /// The required bits as `(pos, value)`, in increasing position.
    pub fn bits(&self) -> impl Iterator<Item = (u32, bool)> + '_ {
        self.mask.iter().enumerate().flat_map(move |(i, &m)| {
            (0..8)
                .filter(move |b| m >> b & 1 == 1)
                .map(move |b| ((i * 8) as u32 + b, self.value[i] >> b & 1 == 1))
        })
    }

    /// `self` and `other` are the two halves of one pattern (the same
    /// required bits and length except one bit required 0 in one and 1
    /// in the other): that pattern.
    pub fn merge(&self, other: &Pattern) -> Option<Pattern> {
        if self.min_len != other.min_len || self.mask != other.mask {
            return None;
        }
        let diff: Vec<u8> = self
            .value
            .iter()
            .zip(&other.value)
            .map(|(a, b)| a ^ b)
            .collect();
        let ones: u32 = diff.iter().map(|d| d.count_ones()).sum();
        if ones != 1 {
            return None;
        }
        let byte = diff.iter().position(|&d| d != 0)?;
        let mut out = self.clone();
        out.clear_bit(byte as u32 * 8 + diff[byte].trailing_zeros());
        Some(out)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (i, (m, v)) in self.mask.iter().zip(&self.value).enumerate() {
            if *m == 0 {
                continue;
            }
            if !first {
                write!(f, " ")?;
            }
            first = false;
            write!(f, "[{i}]={v:02x}/{m:02x}")?;
        }
        if first {
            write!(f, "*")?;
        }
        if self.min_len > 0 {
            write!(f, " len>={}", self.min_len)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_match_merge() {
        let mut a = Pattern::any();
        assert!(a.set_bit(12 * 8 + 3, true));
        assert!(!a.set_bit(12 * 8 + 3, false));
        assert!(a.matches(&[0; 12].iter().copied().chain([8]).collect::<Vec<_>>()));
        let mut b = a.clone();
        b.set_bit(0, true);
        a.set_bit(0, false);
        assert!(!a.overlaps(&b));
        let m = a.merge(&b).unwrap_or_default();
        assert_eq!(m.specificity(), 1);
    }
}
