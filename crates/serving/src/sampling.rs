//! Random variates for the arrival generators and the router, drawn from
//! [`SplitMix64`] so that a seed gives the same numbers on every machine.

use tessera_core::rng::SplitMix64;

/// 2^-53: turns the top 53 bits of a draw into a double in `[0, 1)`.
const UNIT: f64 = 1.0 / (1u64 << 53) as f64;

/// A seed for one independent stream, from a run's seed and two labels
/// (e.g. a replication and a service): each step goes through SplitMix64's
/// output function, so neighbouring labels give unrelated streams.
pub(crate) fn stream_seed(seed: u64, first: u64, second: u64) -> u64 {
    let mix = |value: u64| SplitMix64::new(value).next_u64();
    mix(mix(mix(seed) ^ first) ^ second.rotate_left(32))
}

/// Uniform in `(0, 1]`: never zero, so its logarithm is finite.
pub(crate) fn open_unit(rng: &mut SplitMix64) -> f64 {
    ((rng.next_u64() >> 11) + 1) as f64 * UNIT
}

/// Uniform in `[0, 1)`.
pub(crate) fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 * UNIT
}

/// Uniform in `0..n` by a multiply-shift (Lemire): one draw, no division;
/// the bias is below `n / 2^64`.
pub(crate) fn index_below(rng: &mut SplitMix64, n: usize) -> usize {
    ((u128::from(rng.next_u64()) * n as u128) >> 64) as usize
}

/// Exponential with mean 1 (inversion).
pub(crate) fn exponential(rng: &mut SplitMix64) -> f64 {
    -open_unit(rng).ln()
}

/// Standard normal variates by the Box–Muller transform, one pair per two
/// uniform draws (the second kept for the next call).
#[derive(Debug, Clone, Default)]
pub(crate) struct Normal {
    spare: Option<f64>,
}

impl Normal {
    /// The next standard normal variate.
    pub(crate) fn sample(&mut self, rng: &mut SplitMix64) -> f64 {
        if let Some(spare) = self.spare.take() {
            return spare;
        }
        let radius = (-2.0 * open_unit(rng).ln()).sqrt();
        let (sin, cos) = (std::f64::consts::TAU * unit(rng)).sin_cos();
        self.spare = Some(radius * sin);
        radius * cos
    }
}

/// Gamma variates of shape `>= 1` and mean 1 by Marsaglia and Tsang's
/// squeeze method ("A simple method for generating gamma variables", ACM
/// TOMS 26(3), 2000).
#[derive(Debug, Clone)]
pub(crate) struct Gamma {
    /// `shape - 1/3`.
    d: f64,
    /// `1 / sqrt(9 d)`.
    c: f64,
    /// `1 / shape`: scales a unit-scale variate to mean 1.
    scale: f64,
    normal: Normal,
}

impl Gamma {
    /// Mean 1 and shape `shape` (>= 1), so coefficient of variation
    /// `1 / sqrt(shape)`.
    pub(crate) fn with_shape(shape: f64) -> Gamma {
        debug_assert!(shape >= 1.0, "the squeeze method as written needs shape >= 1");
        let d = shape - 1.0 / 3.0;
        Gamma { d, c: 1.0 / (9.0 * d).sqrt(), scale: 1.0 / shape, normal: Normal::default() }
    }

    /// The next variate (mean 1).
    pub(crate) fn sample(&mut self, rng: &mut SplitMix64) -> f64 {
        loop {
            let x = self.normal.sample(rng);
            let v = 1.0 + self.c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = open_unit(rng);
            let x2 = x * x;
            if u < 1.0 - 0.0331 * x2 * x2 || u.ln() < 0.5 * x2 + self.d * (1.0 - v + v.ln()) {
                return self.d * v * self.scale;
            }
        }
    }
}

/// A two-phase hyperexponential with balanced means and mean 1: with
/// probability `p` an exponential of mean `1 / (2 p)`, otherwise one of
/// mean `1 / (2 (1 - p))`, where `p = (1 + sqrt((cv² - 1) / (cv² + 1))) / 2`
/// gives coefficient of variation `cv` (> 1). Each phase carries half the
/// mean (Whitt's "balanced means" H2).
#[derive(Debug, Clone)]
pub(crate) struct Hyperexponential {
    p: f64,
    mean_first: f64,
    mean_second: f64,
}

impl Hyperexponential {
    /// Mean 1, coefficient of variation `cv` (> 1).
    pub(crate) fn with_cv(cv: f64) -> Hyperexponential {
        let cv2 = cv * cv;
        let p = 0.5 * (1.0 + ((cv2 - 1.0) / (cv2 + 1.0)).sqrt());
        Hyperexponential { p, mean_first: 0.5 / p, mean_second: 0.5 / (1.0 - p) }
    }

    /// The next variate (mean 1).
    pub(crate) fn sample(&self, rng: &mut SplitMix64) -> f64 {
        let mean = if unit(rng) < self.p { self.mean_first } else { self.mean_second };
        mean * exponential(rng)
    }
}

/// Picks one of several outcomes with given weights in one draw (Walker's
/// alias method, Vose's construction).
#[derive(Debug, Clone)]
pub(crate) struct Alias {
    /// Per cell, the chance of keeping the cell rather than its alias.
    keep: Vec<f64>,
    alias: Vec<usize>,
}

impl Alias {
    /// A table for `weights` (non-negative, finite, positive sum).
    pub(crate) fn new(weights: &[f64]) -> Alias {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        let mut keep: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut alias: Vec<usize> = (0..n).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| keep[i] < 1.0);
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            alias[s] = l;
            keep[l] -= 1.0 - keep[s];
            if keep[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // What is left holds probability 1 up to rounding.
        for i in small.into_iter().chain(large) {
            keep[i] = 1.0;
        }
        Alias { keep, alias }
    }

    /// The outcomes.
    pub(crate) fn len(&self) -> usize {
        self.keep.len()
    }

    /// One outcome: the top of a 128-bit product picks the cell, its low
    /// 64 bits (uniform given the cell) decide between cell and alias.
    pub(crate) fn pick(&self, rng: &mut SplitMix64) -> usize {
        let product = u128::from(rng.next_u64()) * self.keep.len() as u128;
        let cell = (product >> 64) as usize;
        let fraction = (product as u64 >> 11) as f64 * UNIT;
        if fraction < self.keep[cell] {
            cell
        } else {
            self.alias[cell]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_and_cv(samples: &[f64]) -> (f64, f64) {
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let variance = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, variance.sqrt() / mean)
    }

    #[test]
    fn gamma_and_hyperexponential_have_mean_one_and_the_asked_cv() {
        let mut rng = SplitMix64::new(11);
        for cv in [0.05, 0.5, 0.9] {
            let mut gamma = Gamma::with_shape(1.0 / (cv * cv));
            let samples: Vec<f64> = (0..400_000).map(|_| gamma.sample(&mut rng)).collect();
            let (mean, got) = mean_and_cv(&samples);
            assert!((mean - 1.0).abs() < 0.01, "gamma cv {cv}: mean {mean}");
            assert!((got / cv - 1.0).abs() < 0.02, "gamma cv {cv}: got {got}");
            assert!(samples.iter().all(|&x| x > 0.0));
        }
        for cv in [1.5, 3.0] {
            let h2 = Hyperexponential::with_cv(cv);
            let samples: Vec<f64> = (0..400_000).map(|_| h2.sample(&mut rng)).collect();
            let (mean, got) = mean_and_cv(&samples);
            assert!((mean - 1.0).abs() < 0.02, "H2 cv {cv}: mean {mean}");
            assert!((got / cv - 1.0).abs() < 0.03, "H2 cv {cv}: got {got}");
        }
    }

    #[test]
    fn normal_has_mean_zero_and_unit_variance() {
        let (mut rng, mut normal) = (SplitMix64::new(5), Normal::default());
        let samples: Vec<f64> = (0..200_000).map(|_| normal.sample(&mut rng)).collect();
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let variance = samples.iter().map(|x| x * x).sum::<f64>() / samples.len() as f64;
        assert!(mean.abs() < 0.01 && (variance - 1.0).abs() < 0.02, "{mean} {variance}");
    }

    #[test]
    fn alias_picks_in_proportion_to_the_weights() {
        let weights = [1.0, 0.0, 3.0, 6.0];
        let alias = Alias::new(&weights);
        let mut rng = SplitMix64::new(9);
        let mut counts = [0usize; 4];
        let draws = 1_000_000;
        for _ in 0..draws {
            counts[alias.pick(&mut rng)] += 1;
        }
        assert_eq!(counts[1], 0, "a zero weight is never picked");
        for (count, weight) in counts.iter().zip(weights) {
            let share = *count as f64 / draws as f64;
            assert!((share - weight / 10.0).abs() < 0.003, "{counts:?}");
        }
    }

    #[test]
    fn index_below_and_stream_seeds_spread() {
        let mut rng = SplitMix64::new(1);
        let mut counts = [0usize; 3];
        for _ in 0..300_000 {
            counts[index_below(&mut rng, 3)] += 1;
        }
        assert!(counts.iter().all(|&c| (c as f64 / 100_000.0 - 1.0).abs() < 0.02), "{counts:?}");
        assert_ne!(stream_seed(1, 0, 1), stream_seed(1, 1, 0));
        assert_ne!(stream_seed(1, 0, 0), stream_seed(2, 0, 0));
        assert_eq!(stream_seed(7, 3, 4), stream_seed(7, 3, 4));
    }
}
