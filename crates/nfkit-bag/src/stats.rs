//! Summary statistics of repeated measurements: mean, sample standard
//! deviation and the 95 % confidence interval of the mean (Student t).

/// Two-sided 95 % quantiles of Student's t for 1..=30 degrees of freedom.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The t quantile for `df` degrees of freedom (95 %, two-sided).
pub fn t95(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T95[df - 1],
        31..=40 => 2.021,
        41..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

/// Mean and 95 % CI of a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub sd: f64,
    /// Half-width of the 95 % CI of the mean (0 for n < 2).
    pub ci: f64,
}

impl Summary {
    /// Summarises `xs`.
    pub fn of(xs: &[f64]) -> Summary {
        let n = xs.len();
        if n == 0 {
            return Summary::default();
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Summary {
                n,
                mean,
                sd: 0.0,
                ci: 0.0,
            };
        }
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let sd = var.sqrt();
        Summary {
            n,
            mean,
            sd,
            ci: t95(n - 1) * sd / (n as f64).sqrt(),
        }
    }

    pub fn lo(&self) -> f64 {
        self.mean - self.ci
    }

    pub fn hi(&self) -> f64 {
        self.mean + self.ci
    }

    /// Is `self` below `other` with non-overlapping CIs?
    pub fn clearly_below(&self, other: &Summary) -> bool {
        self.hi() < other.lo()
    }

    /// Do the CIs overlap?
    pub fn overlaps(&self, other: &Summary) -> bool {
        !self.clearly_below(other) && !other.clearly_below(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_a_known_sample() {
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!((s.mean - 5.0).abs() < 1e-12);
        assert!((s.sd - 2.138089935).abs() < 1e-6);
        assert!((s.ci - 2.365 * s.sd / 8f64.sqrt()).abs() < 1e-12);
        let one = Summary::of(&[3.0]);
        assert_eq!((one.mean, one.ci), (3.0, 0.0));
        let a = Summary::of(&[1.0, 1.1, 0.9]);
        let b = Summary::of(&[5.0, 5.1, 4.9]);
        assert!(a.clearly_below(&b) && !a.overlaps(&b));
    }
}
