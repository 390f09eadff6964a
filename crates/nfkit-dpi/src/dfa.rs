//! The DFA as the `dpi` NF walks it, and the reference scan.
//!
//! States are numbered densely from 0. Each has 257 columns: one per
//! byte value and [`EOI`] (end of input). As in `regex-automata`, a
//! match is reported one step late: a state's [`Dfa::accept`] entry
//! says that a match of that pattern ended just before the byte (or the
//! end of input) that led into it.

/// Columns per state: 256 byte values and the end of input.
pub const COLUMNS: usize = 257;
/// The end-of-input column.
pub const EOI: usize = 256;

/// A minimised, densely numbered DFA for a set of patterns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dfa {
    /// `next[s * COLUMNS + c]`: the state after state `s` reads byte `c`
    /// (or the end of input, `c = EOI`).
    pub next: Vec<u16>,
    /// `accept[s]`: 0, or 1 + the pattern whose match ended just before
    /// the step into `s` (the lowest-numbered one when several did).
    pub accept: Vec<u16>,
    /// Where a scan starts (the start of the payload).
    pub start: u16,
    /// A state no input leaves and that reports nothing: a scan that
    /// reaches it stops (`u16::MAX` when there is none).
    pub dead: u16,
    /// The patterns, by index.
    pub patterns: Vec<String>,
}

/// The first match a scan finds: the match that ends first, and among
/// those the lowest-numbered pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    /// Index of the pattern in its set.
    pub pattern: usize,
    /// Offset in the payload just after the match's last byte.
    pub end: usize,
}

impl Match {
    /// The `dpi` NF's result for this match: `(pattern + 1) << 32 | end`
    /// (no match is 0).
    pub fn to_result(self) -> u64 {
        ((self.pattern as u64 + 1) << 32) | (self.end as u64 & 0xffff_ffff)
    }

    /// The match an NF result stands for (`None` for 0).
    pub fn from_result(r: u64) -> Option<Match> {
        let p = r >> 32;
        (p != 0).then(|| Match {
            pattern: (p - 1) as usize,
            end: (r & 0xffff_ffff) as usize,
        })
    }
}

impl Dfa {
    /// Number of states.
    pub fn states(&self) -> usize {
        self.accept.len()
    }

    /// The state after `state` reads column `col`.
    #[inline]
    pub fn step(&self, state: u16, col: usize) -> u16 {
        self.next[state as usize * COLUMNS + col]
    }

    /// What the `dpi` NF computes: the first match in the first `limit`
    /// bytes of `payload`. A match may end exactly at `limit`; the end
    /// of input (`$`) is only where the payload really ends.
    pub fn scan(&self, payload: &[u8], limit: usize) -> Option<Match> {
        let n = payload.len().min(limit);
        let mut s = self.start;
        for (i, &b) in payload[..n].iter().enumerate() {
            s = self.step(s, b as usize);
            if let Some(m) = self.reported(s, i) {
                return Some(m);
            }
            if s == self.dead {
                return None;
            }
        }
        // One more step shows a match ending at `n`: on the next byte
        // when the scan was cut short, else on the end of input.
        let col = payload.get(n).map_or(EOI, |&b| b as usize);
        self.reported(self.step(s, col), n)
    }

    fn reported(&self, s: u16, end: usize) -> Option<Match> {
        match self.accept[s as usize] {
            0 => None,
            a => Some(Match {
                pattern: a as usize - 1,
                end,
            }),
        }
    }
}
