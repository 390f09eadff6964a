//! Per-frame latency inside the switch, live ports only: from the
//! moment a worker took the frame off its port's receive ring (the
//! batch's arrival time, `CLOCK_MONOTONIC`) to the moment it put the
//! frame on the output port's transmit ring (one clock read per sent
//! batch). Each worker writes its own [`Histogram`] (log-linear
//! buckets, 8 per power of two: a value is known within 12.5 %);
//! [`Switch::latency`](crate::Switch::latency) sums them.

use crate::counters::Counter;
use serde::Serialize;

/// Buckets: 0..16 exact, then 8 per power of two up to 2^64.
const BUCKETS: usize = 16 + 60 * 8;

/// A histogram of nanoseconds, written by one worker.
#[derive(Debug)]
pub struct Histogram {
    buckets: Vec<Counter>,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            buckets: (0..BUCKETS).map(|_| Counter::default()).collect(),
        }
    }
}

fn index(ns: u64) -> usize {
    if ns < 16 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros() as usize; // >= 4
    let sub = ((ns >> (e - 3)) & 7) as usize;
    16 + (e - 4) * 8 + sub
}

/// The largest value of bucket `i`.
fn upper(i: usize) -> u64 {
    if i < 16 {
        return i as u64;
    }
    let e = (i - 16) / 8 + 4;
    let sub = ((i - 16) % 8) as u64;
    let low = (8 + sub) << (e - 3);
    low.saturating_add((1u64 << (e - 3)) - 1)
}

impl Histogram {
    /// Counts `n` frames of `ns` each (the owning worker only).
    #[inline]
    pub fn record(&self, ns: u64, n: u64) {
        if let Some(b) = self.buckets.get(index(ns)) {
            b.add(n);
        }
    }
}

/// Latency percentiles over every worker's histogram.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LatencySummary {
    /// Frames timed.
    pub frames: u64,
    /// Upper bounds of the buckets holding the 50th, 99th percentile and
    /// the largest value (ns).
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl LatencySummary {
    /// The percentiles of the sum of `hs`.
    pub fn of<'a>(hs: impl IntoIterator<Item = &'a Histogram>) -> LatencySummary {
        let mut sum = vec![0u64; BUCKETS];
        for h in hs {
            for (s, b) in sum.iter_mut().zip(&h.buckets) {
                *s += b.get();
            }
        }
        let frames: u64 = sum.iter().sum();
        if frames == 0 {
            return LatencySummary::default();
        }
        let at = |q: f64| {
            let rank = ((frames as f64 * q).ceil() as u64).max(1);
            let mut seen = 0;
            for (i, n) in sum.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return upper(i);
                }
            }
            0
        };
        let max = sum.iter().rposition(|&n| n > 0).map_or(0, upper);
        LatencySummary {
            frames,
            p50_ns: at(0.50),
            p99_ns: at(0.99),
            max_ns: max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_values_within_an_eighth() {
        for ns in [
            0u64,
            1,
            15,
            16,
            17,
            100,
            999,
            1_000,
            12_345,
            1 << 40,
            u64::MAX,
        ] {
            let i = index(ns);
            assert!(i < BUCKETS, "{ns}");
            assert!(upper(i) >= ns, "{ns}: bucket {i} up to {}", upper(i));
            assert!(
                upper(i) - ns <= ns / 8,
                "{ns}: bucket {i} up to {}",
                upper(i)
            );
            if i > 0 {
                assert!(upper(i - 1) < ns, "{ns}");
            }
        }
    }

    #[test]
    fn percentiles_over_workers() {
        let (a, b) = (Histogram::default(), Histogram::default());
        a.record(1_000, 60);
        b.record(2_000, 39);
        b.record(50_000, 1);
        let s = LatencySummary::of([&a, &b]);
        assert_eq!(s.frames, 100);
        assert!((1_000..1_125).contains(&s.p50_ns), "{s:?}");
        assert!((2_000..2_250).contains(&s.p99_ns), "{s:?}");
        assert!((50_000..56_250).contains(&s.max_ns), "{s:?}");
        assert_eq!(LatencySummary::of([&Histogram::default()]).frames, 0);
    }
}
