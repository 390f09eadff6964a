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
//!
//! Each region is one more analysis, most of a derivation's time; a
//! [`RegionCache`] keeps each region's result across map syncs with
//! what it read (the map lookups replayed, the clock window), so a
//! sync analyses again only the regions whose entries changed.

use crate::error::OffloadError;
use crate::pattern::Pattern;
use crate::rules::{covers, exact};
use crate::source::MapSource;
use crate::symbolic::{analyse_within, Analysis, Count, Limits, Outcome, Path, XdpAction};
use nfkit_object::Image;
use std::cell::RefCell;
use std::collections::HashMap;

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
    hoist_cached(image, maps, limits, a, &mut RegionCache::default())
}

/// [`hoist`], with the regions' analyses taken from `cache` where what
/// they read is unchanged, and the cache left holding this call's
/// regions only.
pub fn hoist_cached(
    image: &Image,
    maps: &dyn MapSource,
    limits: &Limits,
    a: &Analysis,
    cache: &mut RegionCache,
) -> Result<(Analysis, usize), OffloadError> {
    let key = LimitsKey::of(limits, &a.entry);
    if cache.limits.as_ref() != Some(&key) {
        cache.regions.clear();
        cache.limits = Some(key);
    }
    cache.generation += 1;
    let mut front: Vec<Path> = Vec::new();
    for p in &a.paths {
        let Outcome::Action(act) = p.outcome else {
            continue;
        };
        if act == XdpAction::Pass || p.rewrite.is_some() {
            continue;
        }
        let u = region(&p.pattern);
        if u.specificity() == 0 || front.iter().any(|f| covers(&f.pattern, &u)) {
            continue;
        }
        let Ok(u) = exact(&u) else {
            continue;
        };
        let summary = cache.summary(image, &a.entry, maps, limits, &u)?;
        let mut counts = p.counts.clone();
        counts.sort();
        if let Some((outcome, c, steps)) = summary {
            if outcome == Outcome::Action(act) && c == counts {
                front.push(Path {
                    pattern: u,
                    outcome,
                    steps,
                    counts: p.counts.clone(),
                    rewrite: None,
                });
            }
        }
    }
    let g = cache.generation;
    cache.regions.retain(|_, r| r.used == g);
    let n = front.len();
    let mut out = a.clone();
    front.extend(std::mem::take(&mut out.paths));
    out.paths = front;
    Ok((out, n))
}

/// A region's analysis in one line: `Some((outcome, sorted counts,
/// most steps))` when every path of it has that outcome and those
/// counts (and the budget did not cut it), else `None`.
type Summary = Option<(Outcome, Vec<Count>, usize)>;

/// The limits a cached region was analysed under, but the clock.
#[derive(Clone, Debug, PartialEq, Eq)]
struct LimitsKey(String, usize, usize, usize, bool, bool);

impl LimitsKey {
    fn of(l: &Limits, entry: &str) -> LimitsKey {
        LimitsKey(
            entry.to_string(),
            l.max_paths,
            l.max_steps,
            l.max_map_entries,
            l.data_path_maps,
            l.now_ns.is_some(),
        )
    }
}

/// One map read a region's analysis made, with what it found.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Read {
    Lookup(String, Vec<u8>, Result<Option<Vec<u8>>, String>),
    Entries(String, Option<Vec<(Vec<u8>, Vec<u8>)>>),
}

impl Read {
    fn still(&self, maps: &dyn MapSource) -> bool {
        match self {
            Read::Lookup(m, k, found) => maps.lookup(m, k) == *found,
            Read::Entries(m, found) => maps.entries(m) == *found,
        }
    }
}

/// A [`MapSource`] that notes every read.
struct Recorder<'a> {
    inner: &'a dyn MapSource,
    reads: RefCell<Vec<Read>>,
}

impl MapSource for Recorder<'_> {
    fn entries(&self, map: &str) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let found = self.inner.entries(map);
        self.reads
            .borrow_mut()
            .push(Read::Entries(map.to_string(), found.clone()));
        found
    }

    fn lookup(&self, map: &str, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let found = self.inner.lookup(map, key);
        self.reads
            .borrow_mut()
            .push(Read::Lookup(map.to_string(), key.to_vec(), found.clone()));
        found
    }
}

#[derive(Debug)]
struct Remembered {
    summary: Summary,
    reads: Vec<Read>,
    window: Option<(u64, u64)>,
    used: u64,
}

/// Regions' analyses kept across derivations (map sync): a region is
/// analysed again only when a map read it made now finds something
/// else, or the clock left the window in which its comparisons of the
/// clock go the same way ([`Analysis::clock_window`]).
#[derive(Debug, Default)]
pub struct RegionCache {
    regions: HashMap<Pattern, Remembered>,
    limits: Option<LimitsKey>,
    generation: u64,
    /// Regions taken from the cache, over its life.
    pub hits: usize,
    /// Regions analysed, over its life.
    pub misses: usize,
}

impl RegionCache {
    /// Regions held (those of the last derivation).
    pub fn len(&self) -> usize {
        self.regions.len()
    }

    /// Whether it holds no region.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    fn summary(
        &mut self,
        image: &Image,
        entry: &str,
        maps: &dyn MapSource,
        limits: &Limits,
        u: &Pattern,
    ) -> Result<Summary, OffloadError> {
        let g = self.generation;
        if let Some(r) = self.regions.get_mut(u) {
            let clock_ok = match (r.window, limits.now_ns) {
                (None, _) => true,
                (Some((lo, hi)), Some(now)) => lo <= now && now <= hi,
                (Some(_), None) => false,
            };
            if clock_ok && r.reads.iter().all(|x| x.still(maps)) {
                r.used = g;
                self.hits += 1;
                return Ok(r.summary.clone());
            }
        }
        self.misses += 1;
        let rec = Recorder {
            inner: maps,
            reads: RefCell::new(Vec::new()),
        };
        let within = analyse_within(image, entry, &rec, limits, u.clone())?;
        let summary = summarise(&within);
        self.regions.insert(
            u.clone(),
            Remembered {
                summary: summary.clone(),
                reads: rec.reads.into_inner(),
                window: within.clock_window,
                used: g,
            },
        );
        Ok(summary)
    }
}

fn summarise(within: &Analysis) -> Summary {
    let first = within.paths.first()?;
    if within.truncated {
        return None;
    }
    let sorted = |p: &Path| {
        let mut c = p.counts.clone();
        c.sort();
        c
    };
    let counts = sorted(first);
    within
        .paths
        .iter()
        .all(|q| q.outcome == first.outcome && sorted(q) == counts && q.rewrite.is_none())
        .then(|| {
            let steps = within.paths.iter().map(|q| q.steps).max().unwrap_or(0);
            (first.outcome.clone(), counts, steps)
        })
}
