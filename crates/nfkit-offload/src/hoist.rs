//! Uniform regions: rules placed before every path.
//!
//! A path's pattern keeps only the bits the program branched on, so the
//! parse steps that do not matter for a decision still split it: a
//! blacklisted source gives one DROP path per protocol, fragment and
//! length case, some of which flower cannot express (a length the
//! fields do not imply). [`hoist`] asks, for each decided path, whether
//! the region "this EtherType, IP version/IHL and these addresses" is
//! *uniform*: analysed again with that region's bits fixed from the
//! start ([`analyse_within`]), does every path give the same verdict with
//! the same counter additions? Then one rule for the region, placed
//! before all others, decides exactly like the program for each of its
//! packets whatever order the other rules have, and the paths it covers
//! are left out by the generator.

use crate::error::OffloadError;
use crate::pattern::Pattern;
use crate::rules::{covers, exact};
use crate::source::MapSource;
use crate::symbolic::{analyse_within, Analysis, Limits, Outcome, Path, XdpAction};
use nfkit_object::Image;

/// Bytes a region keeps of a path's pattern: EtherType, the IP
/// version/IHL byte, and the addresses (IPv4 26..34, IPv6 22..54).
fn region(p: &Pattern) -> Pattern {
    let v6 = p.value.get(12..14) == Some(&[0x86, 0xdd]) && p.mask.get(12..14) == Some(&[0xff; 2]);
    let v4 = p.value.get(12..14) == Some(&[0x08, 0x00]) && p.mask.get(12..14) == Some(&[0xff; 2]);
    let addrs = if v6 {
        22..54
    } else if v4 {
        26..34
    } else {
        0..0
    };
    let mut r = p.clone();
    for byte in 0..p.mask.len() {
        if (12..15).contains(&byte) || addrs.contains(&byte) {
            continue;
        }
        for bit in 0..8 {
            r.clear_bit(byte as u32 * 8 + bit);
        }
    }
    r.min_len = if v6 {
        54
    } else if v4 {
        34
    } else {
        14
    };
    r.trim();
    r
}

/// `a` with the uniform regions of its decided paths first (each a path
/// of its own, before the others); returns how many were added.
pub fn hoist(
    image: &Image,
    maps: &dyn MapSource,
    limits: &Limits,
    a: &Analysis,
) -> Result<(Analysis, usize), OffloadError> {
    let mut front: Vec<Path> = Vec::new();
    for p in &a.paths {
        let Outcome::Action(act) = p.outcome else {
            continue;
        };
        if act == XdpAction::Pass {
            continue;
        }
        let u = region(&p.pattern);
        if u.specificity() == 0 || front.iter().any(|f| covers(&f.pattern, &u)) {
            continue;
        }
        let Ok(u) = exact(&u) else {
            continue;
        };
        let within = analyse_within(image, &a.entry, maps, limits, u.clone())?;
        let uniform = !within.truncated
            && !within.paths.is_empty()
            && within.paths.iter().all(|q| {
                q.outcome == Outcome::Action(act) && {
                    let mut x = q.counts.clone();
                    let mut y = p.counts.clone();
                    x.sort();
                    y.sort();
                    x == y
                }
            });
        if uniform {
            front.push(Path {
                pattern: u,
                outcome: p.outcome.clone(),
                steps: within.paths.iter().map(|q| q.steps).max().unwrap_or(0),
                counts: p.counts.clone(),
            });
        }
    }
    let n = front.len();
    let mut out = a.clone();
    front.extend(std::mem::take(&mut out.paths));
    out.paths = front;
    Ok((out, n))
}
