//! How far a service is from its edge: its tolerance (the largest uniform
//! slowdown of its batches at which it still meets its percentile SLO) and
//! the offered load of its busiest segment. The planner records both in a
//! plan's service reports; `verify` recomputes them.

use tessera_core::ServiceSlo;
use tessera_serving::{analytic, SegmentShape};

use crate::judge::PREDICTION_TOLERANCE;

/// The slowdowns a service's tolerance is searched among: from twice as
/// fast to three times as slow as profiled.
pub const TOLERANCE_RANGE: (f64, f64) = (-0.5, 2.0);

/// Bisections of the tolerance search: the range halved this often is
/// within 0.1% (of the latency).
const TOLERANCE_STEPS: u32 = 12;

/// The tolerance of `slo`'s segments (each with its shape as profiled and
/// the rate routed to it): the smallest over its segments with traffic of
/// the largest slowdown in [`TOLERANCE_RANGE`] at which the segment meets
/// the percentile at its rate under Poisson arrivals, by bisection (each
/// step one evaluation of the queue); `None` without traffic or when the
/// model refuses a segment.
pub(crate) fn tolerance<'a>(
    slo: &ServiceSlo,
    segments: impl IntoIterator<Item = (&'a SegmentShape, f64)>,
) -> Option<f64> {
    let bound_ms = slo.latency_slo_ms * (1.0 + PREDICTION_TOLERANCE);
    let mut tolerance: Option<f64> = None;
    for (shape, routed_rps) in segments.into_iter().filter(|(_, routed_rps)| *routed_rps > 0.0) {
        let meets = |slowdown: f64| {
            analytic::meets_percentile(&shape.slowed_by(slowdown), routed_rps, slo.percentile, bound_ms)
        };
        let (mut low, mut high) = TOLERANCE_RANGE;
        let segment = if meets(high).ok()? {
            high
        } else if !meets(low).ok()? {
            low
        } else {
            for _ in 0..TOLERANCE_STEPS {
                let middle = 0.5 * (low + high);
                if meets(middle).ok()? {
                    low = middle;
                } else {
                    high = middle;
                }
            }
            low
        };
        tolerance = Some(tolerance.map_or(segment, |tolerance: f64| tolerance.min(segment)));
    }
    tolerance
}

/// The offered load of the busiest of `segments` (each with its shape as
/// profiled and the rate routed to it): the rate over its full-batch
/// throughput as profiled; `None` without segments.
pub(crate) fn busiest_load<'a>(segments: impl IntoIterator<Item = (&'a SegmentShape, f64)>) -> Option<f64> {
    segments.into_iter().map(|(shape, routed_rps)| routed_rps / shape.throughput_rps()).reduce(f64::max)
}
