//! Shared by the nfkit-dpi tests: the `regex` crate as the reference
//! for every scan (the first match: the smallest end over every
//! pattern, the lowest pattern among those).
#![allow(dead_code)]

use nfkit_dpi::Match;
use regex::bytes::{Regex, RegexBuilder};

/// The patterns as byte regexes (no Unicode, as the DFA compiles them).
pub fn reference(pats: &[&str], ci: bool) -> Vec<Regex> {
    pats.iter()
        .map(|p| {
            RegexBuilder::new(p)
                .unicode(false)
                .case_insensitive(ci)
                .build()
                .expect("reference regex")
        })
        .collect()
}

/// The first match in the first `limit` bytes by the `regex` crate.
pub fn first_match(res: &[Regex], payload: &[u8], limit: usize) -> Option<Match> {
    let n = payload.len().min(limit);
    res.iter()
        .enumerate()
        .filter_map(|(i, r)| r.shortest_match(payload).map(|end| (end, i)))
        .filter(|&(end, _)| end <= n)
        .min()
        .map(|(end, pattern)| Match { pattern, end })
}

/// The NF's result for the whole payload: [`first_match`] as
/// `Match::to_result` encodes it, 0 for none.
pub fn expected(res: &[Regex], payload: &[u8]) -> u64 {
    first_match(res, payload, usize::MAX).map_or(0, Match::to_result)
}
