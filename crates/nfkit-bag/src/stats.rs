//! Summary statistics of repeated measurements: mean, sample standard
//! deviation and the 95 % confidence interval of the mean (Student t);
//! and the Mann-Whitney U test, for measures such as loss whose samples
//! are mostly zeros with a few large values (where a t interval means
//! little).

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

/// The standard normal CDF (Abramowitz and Stegun 7.1.26 for erf,
/// absolute error below 1.5e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// The result of a two-sided Mann-Whitney U test of samples `a`, `b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MannWhitney {
    /// U of `a`.
    pub u: f64,
    /// Two-sided p-value (normal approximation, tie and continuity
    /// corrections); 1 when every value is equal.
    pub p: f64,
    /// Does `a` tend to be lower than `b` (U below its mean)?
    pub a_lower: bool,
}

impl MannWhitney {
    /// Tests `a` against `b`.
    pub fn test(a: &[f64], b: &[f64]) -> MannWhitney {
        let (n1, n2) = (a.len() as f64, b.len() as f64);
        let mut all: Vec<(f64, bool)> = a
            .iter()
            .map(|x| (*x, true))
            .chain(b.iter().map(|x| (*x, false)))
            .collect();
        all.sort_by(|x, y| x.0.total_cmp(&y.0));
        let n = all.len();
        let (mut r1, mut ties) = (0.0, 0.0);
        let mut i = 0;
        while i < n {
            let mut j = i;
            while j + 1 < n && all[j + 1].0 == all[i].0 {
                j += 1;
            }
            // Ranks i+1 ..= j+1 share their average.
            let rank = (i + j) as f64 / 2.0 + 1.0;
            let t = (j - i + 1) as f64;
            ties += t * t * t - t;
            r1 += rank * all[i..=j].iter().filter(|x| x.1).count() as f64;
            i = j + 1;
        }
        let u = r1 - n1 * (n1 + 1.0) / 2.0;
        let mu = n1 * n2 / 2.0;
        let nf = n as f64;
        let var = if n > 1 {
            n1 * n2 / 12.0 * ((nf + 1.0) - ties / (nf * (nf - 1.0)))
        } else {
            0.0
        };
        if var <= 0.0 || n1 == 0.0 || n2 == 0.0 {
            return MannWhitney {
                u,
                p: 1.0,
                a_lower: false,
            };
        }
        let d = (u - mu).abs() - 0.5;
        let z = d.max(0.0) / var.sqrt();
        MannWhitney {
            u,
            p: (2.0 * (1.0 - normal_cdf(z))).min(1.0),
            a_lower: u < mu,
        }
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

    #[test]
    fn mann_whitney_separates_and_ties() {
        assert!((normal_cdf(1.959964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        let zeros = [0.0; 10];
        let some = [0.0, 0.0, 3.0, 5.0, 0.0, 8.0, 2.0, 0.0, 9.0, 4.0];
        let t = MannWhitney::test(&zeros, &some);
        assert!(t.a_lower && t.p < 0.05, "{t:?}");
        let t = MannWhitney::test(&some, &zeros);
        assert!(!t.a_lower && t.p < 0.05, "{t:?}");
        assert_eq!(MannWhitney::test(&zeros, &zeros).p, 1.0);
        // Fully separated samples of 5: exact two-sided p is 0.0079; the
        // normal approximation gives about 0.012.
        let t = MannWhitney::test(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!(t.a_lower && t.p > 0.005 && t.p < 0.02, "{t:?}");
        assert_eq!(t.u, 0.0);
    }
}
