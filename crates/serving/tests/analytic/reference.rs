//! A reference simulation of one process, written to be obviously right:
//! Poisson arrivals, one FIFO queue, greedy batches of at most `B`.

use std::collections::VecDeque;

use tessera_core::rng::SplitMix64;
use tessera_serving::SegmentShape;

/// An exponential variate of rate `rate`, from `rng` (uniform on (0, 1]).
fn exponential(rng: &mut SplitMix64, rate: f64) -> f64 {
    -(1.0 - rng.uniform(0.0, 1.0)).ln() / rate
}

/// Simulates one process of `shape` fed Poisson arrivals at `lambda_per_ms`
/// requests per ms, and hands each request's latency (ms), in arrival
/// order, to `observe`, after skipping the first `warmup` requests, until
/// `requests` have been observed.
pub fn simulate(
    shape: &SegmentShape,
    lambda_per_ms: f64,
    warmup: usize,
    requests: usize,
    seed: u64,
    mut observe: impl FnMut(f64),
) {
    let batch = shape.max_batch() as usize;
    let latency_ms: Vec<f64> = (0..=batch).map(|k| shape.latency_ms(k.max(1) as u32)).collect();
    let mut rng = SplitMix64::new(seed);
    let mut queue: VecDeque<f64> = VecDeque::new();
    let mut next_arrival = exponential(&mut rng, lambda_per_ms);
    let mut now = 0.0_f64;
    let mut done = 0usize;
    while done < warmup + requests {
        if queue.is_empty() {
            // Idle until the next arrival, which starts a batch at once.
            now = now.max(next_arrival);
            queue.push_back(next_arrival);
            next_arrival += exponential(&mut rng, lambda_per_ms);
        }
        let size = queue.len().min(batch);
        let finish = now + latency_ms[size];
        for _ in 0..size {
            let arrival = queue.pop_front().expect("the batch's requests wait");
            if done >= warmup && done < warmup + requests {
                observe(finish - arrival);
            }
            done += 1;
        }
        // Whoever arrives while the batch runs waits for the next one.
        while next_arrival < finish {
            queue.push_back(next_arrival);
            next_arrival += exponential(&mut rng, lambda_per_ms);
        }
        now = finish;
    }
}

/// The simulated latencies that decide a percentile near `guess_ms`: the
/// exact values within `[guess / 1.25, guess * 1.25]`, counts outside, and
/// the misses of each of two latencies in consecutive blocks (batch means).
#[derive(Debug, Clone)]
pub struct Sample {
    below: u64,
    window: Vec<f64>,
    above: u64,
    low_ms: f64,
    high_ms: f64,
    limits_ms: [f64; 2],
    block: u64,
    block_seen: u64,
    block_late: [u64; 2],
    block_fractions: [Vec<f64>; 2],
}

impl Sample {
    /// An empty sample around `guess_ms`, counting misses of the two
    /// `limits_ms` in blocks of `block` requests.
    pub fn new(guess_ms: f64, limits_ms: [f64; 2], block: u64) -> Sample {
        Sample {
            below: 0,
            window: Vec::new(),
            above: 0,
            low_ms: guess_ms / 1.25,
            high_ms: guess_ms * 1.25,
            limits_ms,
            block,
            block_seen: 0,
            block_late: [0, 0],
            block_fractions: [Vec::new(), Vec::new()],
        }
    }

    /// Records one latency.
    pub fn observe(&mut self, latency_ms: f64) {
        if latency_ms < self.low_ms {
            self.below += 1;
        } else if latency_ms > self.high_ms {
            self.above += 1;
        } else {
            self.window.push(latency_ms);
        }
        self.block_seen += 1;
        for (late, limit) in self.block_late.iter_mut().zip(self.limits_ms) {
            *late += u64::from(latency_ms > limit);
        }
        if self.block_seen == self.block {
            for (fractions, late) in self.block_fractions.iter_mut().zip(&mut self.block_late) {
                fractions.push(*late as f64 / self.block as f64);
                *late = 0;
            }
            self.block_seen = 0;
        }
    }

    /// Requests seen.
    pub fn len(&self) -> u64 {
        self.below + self.window.len() as u64 + self.above
    }

    /// The exact `percentile`-th order statistic (the `ceil(p n / 100)`-th
    /// smallest), or `None` when it lies outside the window.
    pub fn percentile_ms(&mut self, percentile: f64) -> Option<f64> {
        let rank = ((percentile / 100.0 * self.len() as f64).ceil() as u64).max(1);
        if rank <= self.below || rank > self.below + self.window.len() as u64 {
            return None;
        }
        let index = (rank - self.below - 1) as usize;
        let (_, value, _) = self.window.select_nth_unstable_by(index, f64::total_cmp);
        Some(*value)
    }

    /// For limit `which` (0 or 1): the fraction of complete blocks'
    /// requests within it, and the standard error of that fraction from
    /// the spread of the blocks (the larger of the estimates from the
    /// blocks and from the blocks merged by fours).
    pub fn attainment(&self, which: usize) -> (f64, f64) {
        let fractions = &self.block_fractions[which];
        let (mean, fine) = spread(fractions);
        let (_, coarse) = spread(&merged(fractions));
        (1.0 - mean, fine.max(coarse))
    }

    /// Whether the blocks look independent for limit `which`: at least
    /// three quarters of them saw a miss, and merging them by fours does not
    /// raise the standard error by half (misses not bunched in spells
    /// longer than a block).
    pub fn mixed(&self, which: usize) -> bool {
        let fractions = &self.block_fractions[which];
        let late = fractions.iter().filter(|&&f| f > 0.0).count();
        let (_, fine) = spread(fractions);
        let (_, coarse) = spread(&merged(fractions));
        4 * late >= 3 * fractions.len() && coarse <= 1.5 * fine
    }
}

/// Consecutive fours of `values`, averaged.
fn merged(values: &[f64]) -> Vec<f64> {
    values.chunks_exact(4).map(|c| c.iter().sum::<f64>() / 4.0).collect()
}

/// The mean of `values` and its standard error.
fn spread(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (variance / n).sqrt())
}
