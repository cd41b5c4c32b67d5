//! One MPS process of a segment, as its queue sees it: the latency levels of
//! its batches.

use crate::shape::SegmentShape;

/// A process's batches grouped by latency: level `g` holds the batch sizes
/// `top[g-1]+1 ..= top[g]`, which all run for `latency_ms[g]`. Latencies
/// strictly increase from level to level (profiled batches with equal
/// latencies are merged into one level); the last level's top is the
/// largest batch `B`.
///
/// A shape whose batches spread ([`SegmentShape::p99_ratio`] `r > 1`) is
/// modelled as the queue of its mean latencies, every request's latency
/// then taken `(r - 1) S_B` longer (its *allowance*): its own batch may run
/// up to its 99th percentile, the largest batch's excess bounding every
/// smaller batch's. Exact for a lone request; at load the queue's wait is
/// a sum of many batches, whose spread averages out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Process {
    top: Vec<usize>,
    latency_ms: Vec<f64>,
    allowance_ms: f64,
}

impl Process {
    /// The levels of one process of `shape`.
    pub(crate) fn of(shape: &SegmentShape) -> Process {
        let mut top: Vec<usize> = Vec::new();
        let mut latency_ms: Vec<f64> = Vec::new();
        for &(batch, latency) in shape.batch_latencies() {
            match latency_ms.last() {
                // A larger batch as fast as the previous level joins it.
                Some(&previous) if latency <= previous => {
                    if let Some(last) = top.last_mut() {
                        *last = batch as usize;
                    }
                }
                _ => {
                    top.push(batch as usize);
                    latency_ms.push(latency);
                }
            }
        }
        let allowance_ms = (shape.p99_ratio() - 1.0) * latency_ms.last().copied().unwrap_or(0.0);
        Process { top, latency_ms, allowance_ms }
    }

    /// What every request's latency is taken longer than the queue of mean
    /// latencies gives, ms (0 unless the batches spread).
    pub(crate) fn allowance_ms(&self) -> f64 {
        self.allowance_ms
    }

    /// A lone request's latency: `S_1` and the allowance.
    pub(crate) fn lone_ms(&self) -> f64 {
        self.first_ms() + self.allowance_ms
    }

    /// The number of latency levels.
    pub(crate) fn levels(&self) -> usize {
        self.top.len()
    }

    /// The largest batch of level `g`.
    pub(crate) fn top(&self, level: usize) -> usize {
        self.top[level]
    }

    /// The latency (ms) of level `g`.
    pub(crate) fn latency_ms(&self, level: usize) -> f64 {
        self.latency_ms[level]
    }

    /// The latencies of the levels, increasing.
    pub(crate) fn latencies_ms(&self) -> &[f64] {
        &self.latency_ms
    }

    /// The largest batch `B`.
    pub(crate) fn batch(&self) -> usize {
        self.top.last().copied().unwrap_or(1)
    }

    /// `S_1`, the latency of a lone request.
    pub(crate) fn first_ms(&self) -> f64 {
        self.latency_ms.first().copied().unwrap_or(f64::INFINITY)
    }

    /// `S_B`, the latency of a full batch.
    pub(crate) fn full_ms(&self) -> f64 {
        self.latency_ms.last().copied().unwrap_or(f64::INFINITY)
    }

    /// The level of batch size `k` (`1..=B`).
    pub(crate) fn level_of(&self, k: usize) -> usize {
        self.top.partition_point(|&top| top < k)
    }

    /// The largest batch that runs within `tau_ms` (`0` when none does).
    pub(crate) fn largest_batch_within(&self, tau_ms: f64) -> usize {
        let levels = self.latency_ms.partition_point(|&latency| latency <= tau_ms);
        if levels == 0 {
            0
        } else {
            self.top[levels - 1]
        }
    }

    /// The full-batch throughput of the process, requests per ms.
    pub(crate) fn full_rate_per_ms(&self) -> f64 {
        self.batch() as f64 / self.full_ms()
    }

    /// The numbers that decide the process's latencies, as bit patterns:
    /// each level's top batch and latency, then `(0, allowance)` (for
    /// memoisation).
    pub(crate) fn key(&self) -> Vec<(u32, u64)> {
        let levels = self.top.iter().zip(&self.latency_ms).map(|(&top, latency)| (top as u32, latency.to_bits()));
        levels.chain([(0, self.allowance_ms.to_bits())]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_group_batches_by_latency() {
        let shape = SegmentShape::new(3, vec![(1, 10.0), (2, 10.0), (4, 12.0), (8, 20.0)]).unwrap();
        let process = Process::of(&shape);
        assert_eq!(process.levels(), 3);
        assert_eq!((process.top(0), process.top(1), process.top(2)), (2, 4, 8));
        assert_eq!(process.batch(), 8);
        assert_eq!(process.level_of(1), 0);
        assert_eq!(process.level_of(2), 0);
        assert_eq!(process.level_of(3), 1);
        assert_eq!(process.level_of(8), 2);
        assert_eq!(process.largest_batch_within(9.0), 0);
        assert_eq!(process.largest_batch_within(10.0), 2);
        assert_eq!(process.largest_batch_within(19.9), 4);
        assert_eq!(process.largest_batch_within(25.0), 8);
        for k in 1..=8u32 {
            assert_eq!(process.latency_ms(process.level_of(k as usize)), shape.latency_ms(k), "batch {k}");
        }
    }
}
