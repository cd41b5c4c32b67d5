//! How far a service is from its edge: its tolerance (the largest uniform
//! slowdown of its batches at which it still meets its percentile SLO) and
//! the offered load of its busiest segment. The planner records both in a
//! plan's service reports; `verify` recomputes them.

use tessera_core::plan::TOLERANCE_RANGE;
use tessera_core::ServiceSlo;
use tessera_serving::{analytic, SegmentShape};

use crate::judge::PREDICTION_TOLERANCE;

/// The tolerance of `slo`'s segments (each with its shape as profiled and
/// the rate routed to it): the smallest over its segments with traffic of
/// the largest slowdown in [`TOLERANCE_RANGE`] at which the segment meets
/// the percentile at its rate under Poisson arrivals (the serving model's
/// [`analytic::tolerance`], to within 0.1%); `None` without traffic or when
/// the model refuses a segment.
pub(crate) fn tolerance<'a>(
    slo: &ServiceSlo,
    segments: impl IntoIterator<Item = (&'a SegmentShape, f64)>,
) -> Option<f64> {
    let bound_ms = slo.latency_slo_ms * (1.0 + PREDICTION_TOLERANCE);
    segments
        .into_iter()
        .filter(|(_, routed_rps)| *routed_rps > 0.0)
        .map(|(shape, routed_rps)| {
            analytic::tolerance(shape, routed_rps, slo.percentile, bound_ms, TOLERANCE_RANGE).ok()
        })
        .try_fold(None, |least: Option<f64>, segment| {
            segment.map(|segment| Some(least.map_or(segment, |least| least.min(segment))))
        })
        .flatten()
}

/// The offered load of the busiest of `segments` (each with its shape as
/// profiled and the rate routed to it): the rate over its full-batch
/// throughput as profiled; `None` without segments.
pub(crate) fn busiest_load<'a>(segments: impl IntoIterator<Item = (&'a SegmentShape, f64)>) -> Option<f64> {
    segments.into_iter().map(|(shape, routed_rps)| routed_rps / shape.throughput_rps()).reduce(f64::max)
}
