//! The arrival generators: one endless, increasing stream of instants per
//! service, scaled to its mean rate.

use std::sync::Arc;

use tessera_core::rng::SplitMix64;

use crate::arrivals::ArrivalModel;
use crate::error::ServingError;
use crate::sampling::{exponential, index_below, stream_seed, unit, Gamma, Hyperexponential};

/// Keeps arrival streams apart from the other streams of a seed.
const ARRIVALS_LABEL: u64 = 0;

/// The arrival instants of one service (seconds from 0, increasing, never
/// ending): build one with [`ArrivalModel::stream`]. As an iterator it
/// never returns `None`.
#[derive(Debug, Clone)]
pub struct ArrivalStream {
    rng: SplitMix64,
    now_s: f64,
    gaps: Gaps,
}

/// How the next gap is drawn.
#[derive(Debug, Clone)]
enum Gaps {
    /// Exponential gaps of this mean.
    Poisson { mean_s: f64 },
    /// Gamma gaps (mean 1) times the mean.
    Gamma { mean_s: f64, gamma: Gamma },
    /// Hyperexponential gaps (mean 1) times the mean.
    Hyper { mean_s: f64, h2: Hyperexponential },
    /// A two-state MMPP.
    OnOff(OnOff),
    /// The trace's gaps in turn, scaled.
    Trace { times_s: Arc<[f64]>, next: usize, scale: f64 },
}

/// The state of a two-state Markov-modulated Poisson process.
#[derive(Debug, Clone)]
struct OnOff {
    on: bool,
    /// Time left in the current period.
    left_s: f64,
    on_rate_rps: f64,
    off_rate_rps: f64,
    mean_on_s: f64,
    mean_off_s: f64,
}

impl ArrivalStream {
    /// A stream of `model` (already validated) at `rate_rps` (positive).
    pub(crate) fn new(model: &ArrivalModel, rate_rps: f64, seed: u64, stream: u64) -> ArrivalStream {
        let mut rng = SplitMix64::new(stream_seed(seed, stream, ARRIVALS_LABEL));
        let mean_s = 1.0 / rate_rps;
        let mut now_s = 0.0;
        let gaps = match model {
            ArrivalModel::Poisson => Gaps::Poisson { mean_s },
            ArrivalModel::Renewal { cv } if *cv < 1.0 => {
                Gaps::Gamma { mean_s, gamma: Gamma::with_shape(1.0 / (cv * cv)) }
            }
            ArrivalModel::Renewal { cv } if *cv > 1.0 => Gaps::Hyper { mean_s, h2: Hyperexponential::with_cv(*cv) },
            ArrivalModel::Renewal { .. } => Gaps::Poisson { mean_s },
            ArrivalModel::OnOff { burst, mean_on_s, mean_off_s } => {
                let cycle_s = mean_on_s + mean_off_s;
                // The validation keeps this non-negative; max() guards rounding.
                let off_rate_rps = (rate_rps * (cycle_s - burst * mean_on_s) / mean_off_s).max(0.0);
                // Start in the stationary distribution; periods are memoryless.
                let on = unit(&mut rng) < mean_on_s / cycle_s;
                let left_s = exponential(&mut rng) * if on { *mean_on_s } else { *mean_off_s };
                Gaps::OnOff(OnOff {
                    on,
                    left_s,
                    on_rate_rps: burst * rate_rps,
                    off_rate_rps,
                    mean_on_s: *mean_on_s,
                    mean_off_s: *mean_off_s,
                })
            }
            ArrivalModel::Trace { times_s, .. } => {
                let gaps = times_s.len() - 1;
                let span_s = times_s[gaps] - times_s[0];
                let scale = gaps as f64 / (span_s * rate_rps);
                // A seeded gap to start in, and a random point of it.
                let first = index_below(&mut rng, gaps);
                now_s = -unit(&mut rng) * (times_s[first + 1] - times_s[first]) * scale;
                Gaps::Trace { times_s: Arc::clone(times_s), next: first, scale }
            }
        };
        ArrivalStream { rng, now_s, gaps }
    }

    /// The next arrival instant, seconds.
    pub fn next_s(&mut self) -> f64 {
        let gap_s = match &mut self.gaps {
            Gaps::Poisson { mean_s } => *mean_s * exponential(&mut self.rng),
            Gaps::Gamma { mean_s, gamma } => *mean_s * gamma.sample(&mut self.rng),
            Gaps::Hyper { mean_s, h2 } => *mean_s * h2.sample(&mut self.rng),
            Gaps::OnOff(state) => state.gap_s(&mut self.rng),
            Gaps::Trace { times_s, next, scale } => {
                let gap_s = (times_s[*next + 1] - times_s[*next]) * *scale;
                *next += 1;
                if *next + 1 == times_s.len() {
                    *next = 0;
                }
                gap_s
            }
        };
        self.now_s += gap_s;
        self.now_s
    }
}

impl OnOff {
    /// The time to the next arrival: within the current period at its rate,
    /// or past its end into the next periods (the exponential gap restarts
    /// at every switch, which memorylessness allows).
    fn gap_s(&mut self, rng: &mut SplitMix64) -> f64 {
        let mut gap_s = 0.0;
        loop {
            let rate_rps = if self.on { self.on_rate_rps } else { self.off_rate_rps };
            if rate_rps > 0.0 {
                let draw_s = exponential(rng) / rate_rps;
                if draw_s < self.left_s {
                    self.left_s -= draw_s;
                    return gap_s + draw_s;
                }
            }
            gap_s += self.left_s;
            self.on = !self.on;
            self.left_s = exponential(rng) * if self.on { self.mean_on_s } else { self.mean_off_s };
        }
    }
}

impl Iterator for ArrivalStream {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        Some(self.next_s())
    }
}

impl ArrivalModel {
    /// The arrival instants (seconds from 0) of one service at mean rate
    /// `rate_rps`: an endless, increasing stream determined by `seed` and
    /// `stream` (e.g. the service's index). A trace starts at an offset
    /// into itself drawn from the seed, at a random point of that gap, and
    /// wraps around at its end.
    pub fn stream(&self, rate_rps: f64, seed: u64, stream: u64) -> Result<ArrivalStream, ServingError> {
        self.validate()?;
        if !(rate_rps.is_finite() && rate_rps > 0.0) {
            return Err(ServingError::invalid("rate_rps", format!("{rate_rps} is not a positive rate")));
        }
        Ok(ArrivalStream::new(self, rate_rps, seed, stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_increase_and_depend_on_seed_and_index() {
        let model = ArrivalModel::Renewal { cv: 3.0 };
        let take = |seed, index| model.stream(50.0, seed, index).unwrap().take(1000).collect::<Vec<f64>>();
        let first = take(1, 0);
        assert!(first.windows(2).all(|pair| pair[1] >= pair[0]) && first[0] >= 0.0);
        assert_eq!(first, take(1, 0));
        assert_ne!(first, take(1, 1));
        assert_ne!(first, take(2, 0));
    }

    #[test]
    fn a_trace_wraps_around_and_starts_at_a_seeded_offset() {
        let model = ArrivalModel::trace("t", vec![0.0, 1.0, 3.0, 6.0]).unwrap();
        // Gaps 1, 2, 3 (mean 2 s): at 0.5 rps the scale is 1.
        let gaps = |seed| {
            let times: Vec<f64> = model.stream(0.5, seed, 0).unwrap().take(8).collect();
            times.windows(2).map(|pair| (pair[1] - pair[0]).round() as u32).collect::<Vec<u32>>()
        };
        let seen: Vec<Vec<u32>> = (0..20).map(gaps).collect();
        for g in &seen {
            let start = [1, 2, 3].iter().position(|&x| x == g[0]).unwrap();
            let expected: Vec<u32> = (0..7).map(|i| [1, 2, 3][(start + i) % 3]).collect();
            assert_eq!(g, &expected);
        }
        assert!(seen.iter().any(|g| g[0] != seen[0][0]), "every seed starts at the same gap");
    }
}
