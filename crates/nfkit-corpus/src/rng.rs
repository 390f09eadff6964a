//! A small deterministic generator for randomised tests (xorshift64):
//! the same seed gives the same cases, so a failure names a case that
//! reruns the same.

/// xorshift64 state; the seed must not be 0.
#[derive(Clone, Debug)]
pub struct Xorshift(pub u64);

impl Xorshift {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// An index below `n` (0 when `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::Xorshift;

    #[test]
    fn the_sequence_is_xorshift64_and_stays_in_range() {
        let mut g = Xorshift(1);
        // x ^= x << 13; x ^= x >> 7; x ^= x << 17 from 1.
        let mut x: u64 = 1;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        assert_eq!(g.next(), x);
        assert!((0..1000).all(|_| g.index(7) < 7));
        assert_eq!(g.below(0), 0);
    }
}
