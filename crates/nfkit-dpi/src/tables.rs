//! Pattern sets as the `dpi` NF's maps (`nf/dpi.c`):
//!
//! * `nf_dpi_next`: array, 1 entry, `u16 next[STATES * 257]`: every
//!   set's transitions, its states numbered after the sets before it;
//! * `nf_dpi_accept`: array, 1 entry, `u16 accept[STATES]`;
//! * `nf_dpi_sets`: array, `SETS` entries of `{u32 start; u32 dead}`
//!   (set `i` is `match(set=i)`; an unused set starts at state 0 of an
//!   all-zero table, which matches nothing).
//!
//! Integers are in host order, as the NF reads them.

use crate::dfa::{Dfa, COLUMNS};
use crate::error::DpiError;

/// DFA states the NF's tables hold over all sets (`NF_DPI_STATES`).
pub const STATES: usize = 2048;
/// Pattern sets the NF holds (`NF_DPI_SETS`).
pub const SETS: usize = 64;

/// The values of the NF's three maps for a list of sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tables {
    /// The one value of `nf_dpi_next` (`STATES * 257 * 2` bytes).
    pub next: Vec<u8>,
    /// The one value of `nf_dpi_accept` (`STATES * 2` bytes).
    pub accept: Vec<u8>,
    /// `nf_dpi_sets[i]` for each set given (8 bytes each).
    pub sets: Vec<[u8; 8]>,
}

impl Tables {
    /// Lays out `sets` (set `i` at index `i`) after one reserved state
    /// 0 that never matches and never leaves (where unused sets start).
    pub fn build(sets: &[Dfa]) -> Result<Tables, DpiError> {
        if sets.len() > SETS {
            return Err(DpiError::TooManySets {
                sets: sets.len(),
                capacity: SETS,
            });
        }
        let states = 1 + sets.iter().map(Dfa::states).sum::<usize>();
        if states > STATES {
            return Err(DpiError::TablesFull {
                states,
                capacity: STATES,
            });
        }
        let mut next = vec![0u16; STATES * COLUMNS];
        let mut accept = vec![0u16; STATES];
        let mut entries = Vec::with_capacity(sets.len());
        let mut base = 1usize;
        for d in sets {
            for (i, &t) in d.next.iter().enumerate() {
                next[base * COLUMNS + i] = (base + t as usize) as u16;
            }
            for (i, &a) in d.accept.iter().enumerate() {
                accept[base + i] = a;
            }
            let dead = if d.dead == u16::MAX {
                u32::MAX
            } else {
                (base + d.dead as usize) as u32
            };
            let mut e = [0u8; 8];
            e[..4].copy_from_slice(&((base + d.start as usize) as u32).to_ne_bytes());
            e[4..].copy_from_slice(&dead.to_ne_bytes());
            entries.push(e);
            base += d.states();
        }
        Ok(Tables {
            next: next.iter().flat_map(|v| v.to_ne_bytes()).collect(),
            accept: accept.iter().flat_map(|v| v.to_ne_bytes()).collect(),
            sets: entries,
        })
    }
}
