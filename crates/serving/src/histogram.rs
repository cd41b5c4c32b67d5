//! A log-bucketed latency histogram: constant memory whatever the run's
//! length, percentiles to within 0.4% of the value.
//!
//! A latency `v` (ms) falls in the bucket named by its binary exponent and
//! the top 8 bits of its mantissa: each octave `[2^e, 2^(e+1))`
//! holds 256 equal buckets, so a bucket is at most 1/256 (0.39%) of its
//! lower edge wide. A bucket keeps the count and the sum of its latencies
//! and stands for their mean: within the bucket, so within 0.39% of any
//! latency in it, and exact where every latency in it is the same (the
//! requests that never waited, which the simulator produces in numbers).
//! Octaves are allocated when first used (6 KiB each), from 2^-20 ms (about
//! 1 ns) to 2^40 ms (about 35 years); values beyond fall in the end buckets.

/// Mantissa bits that pick the bucket within an octave.
const SUB_BITS: u32 = 8;
/// Buckets per octave.
const SUB: usize = 1 << SUB_BITS;
/// The smallest binary exponent with buckets of its own.
const MIN_EXPONENT: i64 = -20;
/// Octaves covered.
const OCTAVES: usize = 60;

/// One octave's buckets: counts and sums of latencies (ms).
#[derive(Debug, Clone, PartialEq)]
struct Octave {
    counts: [u64; SUB],
    sums_ms: [f64; SUB],
}

impl Octave {
    fn empty() -> Box<Octave> {
        Box::new(Octave { counts: [0; SUB], sums_ms: [0.0; SUB] })
    }
}

/// Latency counts by log bucket, with the exact count, sum, minimum and
/// maximum.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Histogram {
    octaves: Vec<Option<Box<Octave>>>,
    count: u64,
    sum_ms: f64,
    min_ms: f64,
    max_ms: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { octaves: vec![None; OCTAVES], count: 0, sum_ms: 0.0, min_ms: f64::INFINITY, max_ms: 0.0 }
    }
}

/// The (octave, bucket) of a positive latency.
fn locate(latency_ms: f64) -> (usize, usize) {
    let bits = latency_ms.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let sub = ((bits >> (52 - SUB_BITS)) as usize) & (SUB - 1);
    let octave = exponent - MIN_EXPONENT;
    if octave < 0 {
        (0, 0)
    } else if octave >= OCTAVES as i64 {
        (OCTAVES - 1, SUB - 1)
    } else {
        (octave as usize, sub)
    }
}

impl Histogram {
    /// Counts one latency (ms, positive).
    #[inline]
    pub(crate) fn record(&mut self, latency_ms: f64) {
        let (octave, sub) = locate(latency_ms);
        let buckets = self.octaves[octave].get_or_insert_with(Octave::empty);
        buckets.counts[sub] += 1;
        buckets.sums_ms[sub] += latency_ms;
        self.count += 1;
        self.sum_ms += latency_ms;
        self.min_ms = self.min_ms.min(latency_ms);
        self.max_ms = self.max_ms.max(latency_ms);
    }

    /// Adds another histogram's counts.
    pub(crate) fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.octaves.iter_mut().zip(&other.octaves) {
            if let Some(theirs) = theirs {
                let mine = mine.get_or_insert_with(Octave::empty);
                for (a, b) in mine.counts.iter_mut().zip(&theirs.counts) {
                    *a += b;
                }
                for (a, b) in mine.sums_ms.iter_mut().zip(&theirs.sums_ms) {
                    *a += b;
                }
            }
        }
        self.count += other.count;
        self.sum_ms += other.sum_ms;
        self.min_ms = self.min_ms.min(other.min_ms);
        self.max_ms = self.max_ms.max(other.max_ms);
    }

    /// Latencies counted.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// The mean latency (ms), exact; `None` when empty.
    pub(crate) fn mean_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ms / self.count as f64)
    }

    /// The largest latency (ms), exact; `None` when empty.
    pub(crate) fn max_ms(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max_ms)
    }

    /// The `q`-quantile (`0 < q <= 1`) by nearest rank: the mean latency of
    /// the bucket holding the `ceil(q × count)`-th smallest latency; the
    /// first and last ranks are the exact minimum and maximum. `None` when
    /// empty.
    pub(crate) fn quantile_ms(&self, q: f64) -> Option<f64> {
        self.quantiles_ms(&[q]).pop()
    }

    /// Several quantiles (each in `(0, 1]`, ascending) in one pass.
    pub(crate) fn quantiles_ms(&self, qs: &[f64]) -> Vec<f64> {
        if self.count == 0 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(qs.len());
        let mut wanted = qs.iter().map(|q| ((q * self.count as f64).ceil() as u64).clamp(1, self.count)).peekable();
        let mut seen = 0u64;
        'octaves: for buckets in self.octaves.iter().flatten() {
            for (&count, &sum_ms) in buckets.counts.iter().zip(&buckets.sums_ms) {
                seen += count;
                while let Some(rank) = wanted.next_if(|&rank| rank <= seen) {
                    out.push(match rank {
                        1 => self.min_ms,
                        rank if rank == self.count => self.max_ms,
                        _ => (sum_ms / count as f64).clamp(self.min_ms, self.max_ms),
                    });
                }
                if wanted.peek().is_none() {
                    break 'octaves;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_the_bucket_resolution() {
        let mut histogram = Histogram::default();
        // 1 ms to 1000 ms, uniformly in log scale.
        let values: Vec<f64> = (0..100_000).map(|i| 10f64.powf(3.0 * f64::from(i) / 100_000.0)).collect();
        for &v in &values {
            histogram.record(v);
        }
        for q in [0.01, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let exact = values[((q * values.len() as f64).ceil() as usize).max(1) - 1];
            let got = histogram.quantile_ms(q).unwrap();
            assert!((got / exact - 1.0).abs() <= 1.0 / 256.0, "q {q}: {got} vs {exact}");
        }
        assert_eq!(histogram.count(), 100_000);
        assert_eq!(histogram.max_ms(), Some(values[99_999]));
    }

    #[test]
    fn equal_latencies_give_that_latency_and_merging_adds() {
        let mut a = Histogram::default();
        for _ in 0..10 {
            a.record(12.5);
        }
        assert_eq!(a.quantiles_ms(&[0.5, 0.99]), vec![12.5, 12.5]);
        let mut b = Histogram::default();
        b.record(1e-12);
        b.record(1e15);
        a.merge(&b);
        assert_eq!(a.count(), 12);
        assert_eq!(a.quantile_ms(1.0), Some(1e15), "the last rank is the exact maximum");
        assert_eq!(a.quantile_ms(0.01), Some(1e-12), "the first rank is the exact minimum");
        assert!(a.quantile_ms(0.1).unwrap() < 13.0);
        assert!(Histogram::default().quantile_ms(0.5).is_none());
    }
}
