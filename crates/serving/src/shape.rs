//! How one segment serves requests.

use tessera_core::{BatchTiming, ProfilePoint, SegmentConfig};

use crate::error::ServingError;

/// A shape read from a profile ([`SegmentShape::from_profile`]) and how.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfiledShape {
    /// The shape.
    pub shape: SegmentShape,
    /// Smaller batches the profile had at the segment's size and processes.
    pub partial_batches: usize,
    /// Of those, how many latencies were raised or lowered to keep latency
    /// non-decreasing in the batch and at most the full batch's.
    pub adjusted: usize,
}

/// One segment as the serving model sees it: `procs` MPS processes, each
/// running batches of at most `max_batch` requests; a batch of `k` requests
/// takes the latency of the smallest profiled batch size `>= k` (measured
/// with `procs` processes running side by side, so an idle neighbour never
/// makes a process faster: a conservative reading of the profile). Where
/// the profile measured it, one batch in a hundred runs up to
/// [`SegmentShape::p99_ratio`] times that latency.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentShape {
    procs: u32,
    /// `(batch, latency_ms)` sorted by batch, strictly increasing batches,
    /// the last one `max_batch`.
    batch_latencies: Vec<(u32, f64)>,
    /// A batch's 99th percentile run time over its mean latency, at least
    /// 1 (1: every batch runs exactly its latency).
    p99_ratio: f64,
}

impl SegmentShape {
    /// A shape from its processes and the profiled `(batch, latency_ms)`
    /// points at its instance size and process count, up to and including
    /// its largest batch. Points are sorted here; a latency must be
    /// positive and finite and may not fall as the batch grows (a larger
    /// batch that ran faster would be a profiling error: it is refused).
    pub fn new(procs: u32, mut batch_latencies: Vec<(u32, f64)>) -> Result<SegmentShape, ServingError> {
        if procs == 0 {
            return Err(ServingError::invalid("procs", "a segment needs at least one process"));
        }
        if batch_latencies.is_empty() {
            return Err(ServingError::invalid("batch_latencies", "no batch latency given"));
        }
        batch_latencies.sort_by_key(|&(batch, _)| batch);
        for (i, &(batch, latency_ms)) in batch_latencies.iter().enumerate() {
            if batch == 0 {
                return Err(ServingError::invalid("batch", "a batch holds at least one request"));
            }
            if !(latency_ms.is_finite() && latency_ms > 0.0) {
                return Err(ServingError::invalid(
                    "latency_ms",
                    format!("batch {batch}: {latency_ms} is not a positive latency"),
                ));
            }
            if let Some(&(previous, previous_ms)) = i.checked_sub(1).map(|j| &batch_latencies[j]) {
                if previous == batch {
                    return Err(ServingError::invalid("batch", format!("batch {batch} is given twice")));
                }
                if latency_ms < previous_ms {
                    return Err(ServingError::invalid(
                        "latency_ms",
                        format!(
                            "batch {batch} runs in {latency_ms} ms, faster than batch {previous} ({previous_ms} ms)"
                        ),
                    ));
                }
            }
        }
        Ok(SegmentShape { procs, batch_latencies, p99_ratio: 1.0 })
    }

    /// The same segment whose batches spread: one in a hundred runs up to
    /// `p99_ratio` times its latency (at least 1 and finite).
    pub fn with_p99_ratio(self, p99_ratio: f64) -> Result<SegmentShape, ServingError> {
        if !(p99_ratio.is_finite() && p99_ratio >= 1.0) {
            return Err(ServingError::invalid(
                "p99_ratio",
                format!("{p99_ratio} is not a ratio of a batch's p99 to its mean (at least 1)"),
            ));
        }
        Ok(SegmentShape { p99_ratio, ..self })
    }

    /// A shape that knows only its full batch's latency: every partial
    /// batch is taken to run as long as the full one (conservative).
    pub fn full_batch_only(procs: u32, max_batch: u32, latency_ms: f64) -> Result<SegmentShape, ServingError> {
        SegmentShape::new(procs, vec![(max_batch, latency_ms)])
    }

    /// The shape of segment `config` read from a model's profile `points`
    /// on one GPU model: its full batch at `full_latency_ms`, every smaller
    /// batch profiled at the same size and processes read conservatively —
    /// capped at the full batch's latency, then raised to the latency of
    /// any smaller batch (profiling noise never makes a batch faster than a
    /// smaller one). Without smaller batches every partial batch runs as
    /// long as the full one.
    ///
    /// Where the points carry a [`BatchTiming`], each batch keeps its
    /// process busy for [`BatchTiming::serving_ms`] (its serving slowdown
    /// and dispatch gap added), and the shape's
    /// [`SegmentShape::p99_ratio`] is the largest of its batches'.
    pub fn from_profile(
        points: &[ProfilePoint],
        config: SegmentConfig,
        full_latency_ms: f64,
    ) -> Result<ProfiledShape, ServingError> {
        let smaller = points
            .iter()
            .filter(|p| {
                p.config.size_gpcs == config.size_gpcs
                    && p.config.procs == config.procs
                    && p.config.batch < config.batch
            })
            .map(|p| (p.config.batch, p.latency_ms, p.timing));
        let full_timing = points.iter().find(|p| p.config == config).map_or(BatchTiming::default(), |p| p.timing);
        SegmentShape::timed(config.procs, config.batch, (full_latency_ms, full_timing), smaller)
    }

    /// [`SegmentShape::conservative`] of batches each with what was
    /// measured of its timing: each keeps its process busy for
    /// [`BatchTiming::serving_ms`], and the shape's
    /// [`SegmentShape::p99_ratio`] is the largest of its batches'.
    pub fn timed(
        procs: u32,
        max_batch: u32,
        (full_latency_ms, full_timing): (f64, BatchTiming),
        partial: impl IntoIterator<Item = (u32, f64, BatchTiming)>,
    ) -> Result<ProfiledShape, ServingError> {
        let mut p99_ratio = full_timing.p99_ratio(full_latency_ms);
        let mut busy = Vec::new();
        for (batch, latency_ms, timing) in partial {
            p99_ratio = p99_ratio.max(timing.p99_ratio(latency_ms));
            busy.push((batch, timing.serving_ms(latency_ms)));
        }
        let read = SegmentShape::conservative(procs, max_batch, full_timing.serving_ms(full_latency_ms), busy)?;
        Ok(ProfiledShape { shape: read.shape.with_p99_ratio(p99_ratio)?, ..read })
    }

    /// A shape from its processes, its full batch `max_batch` at
    /// `full_latency_ms` and the profiled `(batch, latency_ms)` points of
    /// smaller batches, read conservatively: each capped at the full
    /// batch's latency, then raised to the latency of any smaller batch.
    pub fn conservative(
        procs: u32,
        max_batch: u32,
        full_latency_ms: f64,
        mut partial: Vec<(u32, f64)>,
    ) -> Result<ProfiledShape, ServingError> {
        partial.retain(|&(batch, _)| batch < max_batch);
        partial.sort_by_key(|&(batch, _)| batch);
        let (mut adjusted, mut floor_ms) = (0, 0.0f64);
        for (_, latency_ms) in &mut partial {
            let kept = latency_ms.min(full_latency_ms).max(floor_ms);
            if kept != *latency_ms {
                adjusted += 1;
                *latency_ms = kept;
            }
            floor_ms = kept;
        }
        let partial_batches = partial.len();
        partial.push((max_batch, full_latency_ms));
        Ok(ProfiledShape { shape: SegmentShape::new(procs, partial)?, partial_batches, adjusted })
    }

    /// The same segment with every batch `margin` slower (each latency ×
    /// `1 + margin`; a negative margin is faster): a GPU slower than its
    /// profile, or a plan's robustness margin.
    pub fn slowed_by(&self, margin: f64) -> SegmentShape {
        let factor = 1.0 + margin;
        let batch_latencies = self.batch_latencies.iter().map(|&(batch, ms)| (batch, ms * factor)).collect();
        SegmentShape { procs: self.procs, batch_latencies, p99_ratio: self.p99_ratio }
    }

    /// A batch's 99th percentile run time over its mean latency (1 unless
    /// the profile measured a spread).
    pub fn p99_ratio(&self) -> f64 {
        self.p99_ratio
    }

    /// MPS processes.
    pub fn procs(&self) -> u32 {
        self.procs
    }

    /// The largest batch a process runs.
    pub fn max_batch(&self) -> u32 {
        self.batch_latencies.last().map_or(1, |&(batch, _)| batch)
    }

    /// The profiled `(batch, latency_ms)` points, sorted by batch.
    pub fn batch_latencies(&self) -> &[(u32, f64)] {
        &self.batch_latencies
    }

    /// The latency (ms) of a batch of `requests` (1 ..= `max_batch`): the
    /// profiled latency of the smallest profiled batch that holds them.
    /// Beyond `max_batch`, the full batch's.
    pub fn latency_ms(&self, requests: u32) -> f64 {
        self.batch_latencies
            .iter()
            .find(|&&(batch, _)| batch >= requests)
            .or(self.batch_latencies.last())
            .map_or(f64::INFINITY, |&(_, latency_ms)| latency_ms)
    }

    /// The segment's throughput (req/s, all processes) when every batch is
    /// full.
    pub fn throughput_rps(&self) -> f64 {
        f64::from(self.procs) * f64::from(self.max_batch()) * 1000.0 / self.latency_ms(self.max_batch())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_batch_runs_at_the_smallest_profiled_batch_that_holds_it() {
        let shape = SegmentShape::new(2, vec![(8, 40.0), (1, 10.0), (4, 25.0), (2, 15.0)]).unwrap();
        assert_eq!(shape.max_batch(), 8);
        assert_eq!(shape.latency_ms(1), 10.0);
        assert_eq!(shape.latency_ms(3), 25.0);
        assert_eq!(shape.latency_ms(5), 40.0);
        assert!((shape.throughput_rps() - 2.0 * 8.0 * 1000.0 / 40.0).abs() < 1e-9);
        let slowed = shape.slowed_by(0.05);
        assert_eq!(slowed.batch_latencies().len(), 4);
        assert!((slowed.latency_ms(3) - 25.0 * 1.05).abs() < 1e-12);
        assert!((slowed.throughput_rps() * 1.05 - shape.throughput_rps()).abs() < 1e-9);
    }

    #[test]
    fn a_profile_is_read_conservatively_at_the_segments_size_and_processes() {
        let point = |size_gpcs, batch, procs, latency_ms: f64| {
            let config = SegmentConfig { size_gpcs, batch, procs };
            ProfilePoint::new(config, f64::from(batch * procs) * 1000.0 / latency_ms, latency_ms, None).unwrap()
        };
        let points = [
            point(2, 1, 2, 10.0),
            point(2, 2, 2, 9.0),
            point(2, 4, 2, 30.0),
            point(2, 8, 2, 60.0),
            point(2, 16, 2, 90.0),
            point(3, 2, 2, 1.0),
            point(2, 2, 1, 1.0),
        ];
        let read =
            SegmentShape::from_profile(&points, SegmentConfig { size_gpcs: 2, batch: 8, procs: 2 }, 50.0).unwrap();
        assert_eq!(read.shape.batch_latencies(), &[(1, 10.0), (2, 10.0), (4, 30.0), (8, 50.0)]);
        assert_eq!((read.partial_batches, read.adjusted, read.shape.procs()), (3, 1, 2));
        let alone = SegmentShape::from_profile(&[], SegmentConfig { size_gpcs: 2, batch: 8, procs: 2 }, 50.0).unwrap();
        assert_eq!((alone.shape.latency_ms(1), alone.partial_batches), (50.0, 0));
    }

    #[test]
    fn measured_timing_slows_batches_and_spreads_them() {
        let point = |batch, latency_ms: f64, p99_ms: f64| {
            let config = SegmentConfig { size_gpcs: 1, batch, procs: 1 };
            let timing = BatchTiming {
                latency_p99_ms: Some(p99_ms),
                dispatch_gap_ms: Some(0.01),
                serving_slowdown: Some(0.004),
                ..BatchTiming::default()
            };
            ProfilePoint::new(config, f64::from(batch) * 1000.0 / latency_ms, latency_ms, None)
                .unwrap()
                .with_timing(timing)
                .unwrap()
        };
        let points = [point(1, 1.0, 1.06), point(2, 2.0, 2.02), point(4, 3.0, 3.03)];
        let read =
            SegmentShape::from_profile(&points, SegmentConfig { size_gpcs: 1, batch: 2, procs: 1 }, 2.0).unwrap();
        let busy = |ms: f64| ms * 1.004 + 0.01;
        assert_eq!(read.shape.batch_latencies(), &[(1, busy(1.0)), (2, busy(2.0))]);
        // The largest p99 ratio of its batches (batch 4 is not among them).
        assert!((read.shape.p99_ratio() - 1.06).abs() < 1e-12);
        assert_eq!(read.shape.slowed_by(0.05).p99_ratio(), read.shape.p99_ratio());
    }

    #[test]
    fn bad_shapes_are_refused_naming_the_field() {
        assert!(SegmentShape::new(0, vec![(1, 1.0)]).unwrap_err().to_string().starts_with("procs:"));
        assert!(SegmentShape::new(1, vec![]).is_err());
        assert!(SegmentShape::new(1, vec![(1, 0.0)]).unwrap_err().to_string().contains("positive"));
        let error = SegmentShape::new(1, vec![(1, 10.0), (2, 5.0)]).unwrap_err().to_string();
        assert!(error.contains("faster than batch 1"), "{error}");
        assert!(SegmentShape::new(1, vec![(2, 1.0), (2, 3.0)]).is_err());
    }
}
