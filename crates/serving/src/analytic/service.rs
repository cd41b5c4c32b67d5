//! A service's prediction from all its segments at once: each segment's
//! attainment of the SLO, and the worst of their percentile latencies,
//! searched for only where it can be the worst.

use super::chain::Stationary;
use super::latency::{miss_probability, Scratch};
use super::process::Process;
use super::search::{latency_on, PREDICTION_TOLERANCE};
use super::{check_percentile, check_rate, check_slo, per_process_per_ms};
use crate::error::ServingError;
use crate::shape::SegmentShape;

/// What the model predicts of a service from its segments ([`predict_service`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentsPrediction {
    /// The largest of the segments' percentile latencies, ms (to `1e-6`,
    /// from above): no segment's percentile exceeds it.
    pub worst_latency_ms: f64,
    /// Each segment's share of requests within the SLO, in the order given.
    pub attainments: Vec<f64>,
}

/// One segment's queue at its routed rate.
struct Queue<'p> {
    process: &'p Process,
    /// `None`: no arrivals (rate 0) or more than the processes can serve.
    chain: Option<Stationary<'p>>,
    /// Whether the processes cannot keep up.
    overloaded: bool,
}

impl Queue<'_> {
    /// `P(T > t_ms)`.
    fn miss(&mut self, t_ms: f64, scratch: &mut Scratch) -> f64 {
        match &mut self.chain {
            Some(chain) => miss_probability(chain, t_ms, scratch),
            None if self.overloaded => 1.0,
            None if self.process.lone_ms() > t_ms => 1.0,
            None => 0.0,
        }
    }

    /// The smallest `t` with `P(T > t) <= late`, `at_slo` bounding it when met.
    fn latency_ms(&mut self, late: f64, at_slo: (f64, f64), scratch: &mut Scratch) -> f64 {
        match &mut self.chain {
            Some(chain) => latency_on(chain, late, Some(at_slo), PREDICTION_TOLERANCE, scratch),
            None if self.overloaded => f64::INFINITY,
            None => self.process.lone_ms(),
        }
    }
}

/// Predicts a service whose segments, of the given shapes, are each routed
/// the given rate (requests/s, Poisson arrivals): every segment's
/// attainment of `latency_slo_ms`, and the largest of their
/// `percentile`-th percentile latencies ([`super::predict`]'s figures).
///
/// Each segment's queue is tabulated once. The latency is searched for on
/// the segment that meets the SLO least often first, then only on a segment
/// whose requests still outlast that latency more often than the percentile
/// allows: a segment that does not has its percentile within it.
///
/// # Errors
/// No segment, a rate that is negative or not finite, a percentile outside
/// `(0, 100)`, an SLO that is negative or not finite.
pub fn predict_service(
    segments: &[(SegmentShape, f64)],
    percentile: f64,
    latency_slo_ms: f64,
) -> Result<SegmentsPrediction, ServingError> {
    let late = check_percentile(percentile)?;
    check_slo(latency_slo_ms)?;
    if segments.is_empty() {
        return Err(ServingError::invalid("segments", "a service needs at least one segment"));
    }
    for (_, rate_rps) in segments {
        check_rate(*rate_rps)?;
    }
    let processes: Vec<Process> = segments.iter().map(|(shape, _)| Process::of(shape)).collect();
    let mut queues: Vec<Queue<'_>> = segments
        .iter()
        .zip(&processes)
        .map(|((shape, rate_rps), process)| {
            let lambda = per_process_per_ms(shape, *rate_rps);
            let chain = if lambda > 0.0 { Stationary::new(process, lambda) } else { None };
            Queue { process, overloaded: lambda > 0.0 && chain.is_none(), chain }
        })
        .collect();
    let mut scratch = Scratch::default();
    let misses: Vec<f64> = queues.iter_mut().map(|queue| queue.miss(latency_slo_ms, &mut scratch)).collect();
    let mut order: Vec<usize> = (0..queues.len()).collect();
    order.sort_by(|&a, &b| misses[b].total_cmp(&misses[a]));
    let mut worst_latency_ms: Option<f64> = None;
    for k in order {
        let slower = match worst_latency_ms {
            None => true,
            Some(worst_ms) if worst_ms.is_finite() => queues[k].miss(worst_ms, &mut scratch) > late,
            Some(_) => false,
        };
        if slower {
            let latency_ms = queues[k].latency_ms(late, (latency_slo_ms, misses[k]), &mut scratch);
            worst_latency_ms = Some(worst_latency_ms.map_or(latency_ms, |worst_ms| worst_ms.max(latency_ms)));
        }
    }
    Ok(SegmentsPrediction {
        worst_latency_ms: worst_latency_ms.expect("at least one segment is searched"),
        attainments: misses.iter().map(|miss| 1.0 - miss).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytic::predict;

    fn shapes() -> [SegmentShape; 3] {
        [
            SegmentShape::new(1, vec![(1, 9.0), (4, 10.0), (16, 12.0), (64, 38.0)]).unwrap(),
            SegmentShape::new(2, vec![(1, 14.0), (2, 18.0), (4, 24.0), (8, 37.0), (16, 64.0)]).unwrap(),
            SegmentShape::new(1, vec![(1, 10.0), (2, 11.0), (4, 16.0)]).unwrap(),
        ]
    }

    #[test]
    fn a_service_is_its_segments_predicted_apart() {
        let [a, b, c] = shapes();
        let full = |shape: &SegmentShape| shape.throughput_rps();
        for (rho, slo_ms) in [(0.3, 60.0), (0.7, 120.0), (0.9, 200.0), (0.95, 90.0)] {
            let segments = vec![(a.clone(), rho * full(&a)), (b.clone(), rho * full(&b)), (c.clone(), rho * full(&c))];
            let together = predict_service(&segments, 99.0, slo_ms).unwrap();
            let apart: Vec<_> =
                segments.iter().map(|(shape, rate_rps)| predict(shape, *rate_rps, 99.0, slo_ms).unwrap()).collect();
            let worst_ms = apart.iter().map(|p| p.latency_ms).fold(f64::NEG_INFINITY, f64::max);
            let relative = (together.worst_latency_ms - worst_ms).abs() / worst_ms;
            assert!(relative < 2e-6, "rho {rho} slo {slo_ms}: {} vs {worst_ms}", together.worst_latency_ms);
            for (k, prediction) in apart.iter().enumerate() {
                assert_eq!(together.attainments[k], prediction.attainment, "rho {rho} slo {slo_ms} segment {k}");
            }
        }
    }

    #[test]
    fn idle_and_overloaded_segments_are_read_as_such() {
        let [a, b, _] = shapes();
        let idle = predict_service(&[(a.clone(), 0.0)], 99.0, 100.0).unwrap();
        assert_eq!(idle, SegmentsPrediction { worst_latency_ms: 9.0, attainments: vec![1.0] });
        let over = predict_service(&[(a.clone(), 0.0), (b.clone(), 2.0 * b.throughput_rps())], 99.0, 100.0).unwrap();
        assert_eq!(over.worst_latency_ms, f64::INFINITY);
        assert_eq!(over.attainments, vec![1.0, 0.0]);
        assert!(predict_service(&[(a, -1.0)], 99.0, 100.0).is_err());
        assert!(predict_service(&[], 99.0, 100.0).is_err());
    }
}
