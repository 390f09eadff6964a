//! A compiled [`Dfa`] as a file (`nfkit dpi compile -o`, read back by
//! `nfkit dpi test --tables`), so a set is compiled once and its tables
//! loaded into the `dpi` NF's maps later.
//!
//! Layout, integers little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `NFKDFA\0\x01` (the last byte is the format version) |
//! | 4 | `states` (u32) |
//! | 4 | `patterns` (u32) |
//! | 2 | start state (u16) |
//! | 2 | dead state (u16, `0xffff` when none) |
//! | `states * 257 * 2` | `next`, row by row (u16 each) |
//! | `states * 2` | `accept` (u16 each) |
//! | per pattern | length (u32), then the pattern's UTF-8 bytes |
//!
//! Reading checks every state number against `states` and every
//! accept entry against `patterns`, so a file read is safe to load.

use crate::dfa::{Dfa, COLUMNS};
use crate::error::DpiError;

/// The first 8 bytes of a DFA file.
pub const MAGIC: &[u8; 8] = b"NFKDFA\0\x01";

impl Dfa {
    /// The DFA in the file layout above.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.next.len() * 2 + self.accept.len() * 2);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.states() as u32).to_le_bytes());
        out.extend_from_slice(&(self.patterns.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.start.to_le_bytes());
        out.extend_from_slice(&self.dead.to_le_bytes());
        for v in self.next.iter().chain(self.accept.iter()) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for p in &self.patterns {
            out.extend_from_slice(&(p.len() as u32).to_le_bytes());
            out.extend_from_slice(p.as_bytes());
        }
        out
    }

    /// Reads a DFA file; the error says what is wrong and at which byte.
    pub fn from_bytes(b: &[u8]) -> Result<Dfa, DpiError> {
        let mut r = Reader { b, at: 0 };
        if r.take(8)? != MAGIC {
            return Err(bad(0, "not an nfkit DFA file (bad magic or version)"));
        }
        let states = r.u32()? as usize;
        let npat = r.u32()? as usize;
        if states == 0 || states > u16::MAX as usize {
            return Err(bad(8, format!("{states} states (1..65535)")));
        }
        let start = r.u16()?;
        let dead = r.u16()?;
        if start as usize >= states {
            return Err(bad(16, format!("start state {start} of {states}")));
        }
        if dead != u16::MAX && dead as usize >= states {
            return Err(bad(18, format!("dead state {dead} of {states}")));
        }
        let mut next = Vec::with_capacity(states * COLUMNS);
        for _ in 0..states * COLUMNS {
            let at = r.at;
            let v = r.u16()?;
            if v as usize >= states {
                return Err(bad(at, format!("transition to state {v} of {states}")));
            }
            next.push(v);
        }
        let mut accept = Vec::with_capacity(states);
        for _ in 0..states {
            let at = r.at;
            let v = r.u16()?;
            if v as usize > npat {
                return Err(bad(at, format!("accepts pattern {} of {npat}", v - 1)));
            }
            accept.push(v);
        }
        let mut patterns = Vec::with_capacity(npat.min(4096));
        for _ in 0..npat {
            let len = r.u32()? as usize;
            let at = r.at;
            let s = std::str::from_utf8(r.take(len)?)
                .map_err(|_| bad(at, "a pattern that is not UTF-8"))?;
            patterns.push(s.to_string());
        }
        if r.at != b.len() {
            return Err(bad(r.at, "trailing bytes"));
        }
        Ok(Dfa {
            next,
            accept,
            start,
            dead,
            patterns,
        })
    }
}

fn bad(offset: usize, why: impl Into<String>) -> DpiError {
    DpiError::BadFile {
        offset,
        why: why.into(),
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DpiError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| bad(self.at, format!("truncated (wanted {n} more bytes)")))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, DpiError> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Result<u32, DpiError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
}
