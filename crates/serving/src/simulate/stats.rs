//! Confidence intervals: Student's t over independent units (replications,
//! or batches of one run's time).

/// A two-sided interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Interval {
    /// The lower end.
    pub low: f64,
    /// The upper end.
    pub high: f64,
}

/// The 0.975 quantiles of Student's t with 1 to 30 degrees of freedom.
const T_975: [f64; 30] = [
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788, 2.1604, 2.1448,
    2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484,
    2.0452, 2.0423,
];

/// The 0.975 quantile of Student's t with `df` (>= 1) degrees of freedom:
/// a table to 30, then the Cornish–Fisher expansion about the normal
/// quantile (within 1e-4 from 30 on).
pub(crate) fn t_975(df: usize) -> f64 {
    if let Some(&t) = df.checked_sub(1).and_then(|i| T_975.get(i)) {
        return t;
    }
    let (z, v) = (1.959_963_984_540_054_f64, df as f64);
    let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
    z + (z3 + z) / (4.0 * v)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * v * v)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * v * v * v)
}

/// The 95% half-width of the mean of `samples` (at least two):
/// `t(n − 1) × s / sqrt(n)`.
pub(crate) fn half_width_95(samples: &[f64]) -> Option<f64> {
    let n = samples.len();
    if n < 2 {
        return None;
    }
    let mean = samples.iter().sum::<f64>() / n as f64;
    let variance = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some(t_975(n - 1) * (variance / n as f64).sqrt())
}

/// `estimate ± ` the 95% half-width of `samples`, clamped to `[floor, ceiling]`.
pub(crate) fn interval_95(estimate: f64, samples: &[f64], floor: f64, ceiling: f64) -> Option<Interval> {
    half_width_95(samples).map(|half| Interval {
        low: (estimate - half).clamp(floor, ceiling),
        high: (estimate + half).clamp(floor, ceiling),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_join_the_expansion_smoothly() {
        assert_eq!(t_975(1), 12.7062);
        assert!((t_975(9) - 2.2622).abs() < 1e-9);
        // The expansion at 30 agrees with the table's last entry.
        let (z, v) = (1.959_963_984_540_054_f64, 30.0);
        let expansion = z
            + (z.powi(3) + z) / (4.0 * v)
            + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * v * v)
            + (3.0 * z.powi(7) + 19.0 * z.powi(5) + 17.0 * z.powi(3) - 15.0 * z) / (384.0 * v * v * v);
        assert!((expansion - t_975(30)).abs() < 1e-4, "{expansion}");
        assert!((t_975(60) - 2.0003).abs() < 1e-3 && t_975(1000) > 1.96 && t_975(1000) < 1.963);
    }

    #[test]
    fn intervals_shrink_with_agreement_and_are_clamped() {
        assert!(half_width_95(&[1.0]).is_none());
        assert_eq!(half_width_95(&[2.0, 2.0, 2.0]), Some(0.0));
        // Samples 0 and 1: variance 0.5, so t(1) × sqrt(0.5 / 2) = t(1) / 2.
        let half = half_width_95(&[0.0, 1.0]).unwrap();
        assert!((half - 12.7062 * 0.5).abs() < 1e-9);
        let interval = interval_95(0.99, &[0.98, 1.0], 0.0, 1.0).unwrap();
        assert_eq!(interval.high, 1.0);
        assert!(interval.low < 0.99);
    }
}
