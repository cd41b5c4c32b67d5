//! Capacities under any arrival model: Poisson's from the analytic model,
//! the others from the request-level simulator.
//!
//! A segment's *capacity* is the highest rate routed to it at which its
//! service's percentile of requests finishes within the latency SLO. Under
//! Poisson arrivals [`crate::analytic`] computes it exactly. Under a
//! renewal, on/off or trace model no formula is known, so it is searched
//! for with [`simulate`]: the segment alone, fed the arrival model at the
//! trial rate, its processes behind the default discipline. A trial meets
//! the SLO when the lower end of the 95% interval of its attainment (batch
//! means over the measured time) reaches the percentile. The first trial
//! runs at the Poisson capacity (bursty arrivals usually lower it, smooth
//! ones raise it); bisection then halves the side it lands on in
//! [`SIMULATED_STEPS`] more trials, and the highest load proven is
//! returned, so the search errs low. A trial measures at least
//! [`SIMULATED_REQUESTS`] requests and, for on/off and trace arrivals, at
//! least [`MODEL_CYCLES`] of the model's own cycles (on plus off periods; the
//! whole trace), so that its bursts are seen.
//!
//! Feeding the segment the service's arrival model at the segment's own
//! rate is what the service sees when the segment is its only one. Where
//! a service has several segments each sees a random share of the
//! service's stream: for a renewal process with `cv >= 1` a random share
//! is less bursty than the whole, so the capacity is conservative; an
//! on/off process keeps its on and off periods under sharing, as here; a
//! trace scaled to a lower rate stretches its bursts in time more than
//! sharing would. `tessera verify --simulate` judges the whole plan with
//! its real routing.
//!
//! Every trial uses the same seed, so the same inputs give the same
//! capacity on every machine.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use crate::analytic::CapacityCache;
use crate::arrivals::ArrivalModel;
use crate::error::ServingError;
use crate::shape::SegmentShape;
use crate::simulate::{simulate, SimulationOptions};
use crate::system::{ServedSegment, ServedService, ServingSystem};

/// Measured requests per trial of the simulated search, at least.
pub const SIMULATED_REQUESTS: f64 = 50_000.0;

/// Bisection steps of the simulated search after its first trial: the
/// capacity is found to `2^-7` of the side of the Poisson capacity it lies
/// on.
pub const SIMULATED_STEPS: u32 = 7;

/// Cycles of an on/off or trace model a trial measures, at least.
pub const MODEL_CYCLES: f64 = 10.0;

/// The seed of every trial.
const SEED: u64 = 0x5eed_ca9a;

/// Requests of warm-up before a trial measures.
const WARMUP_REQUESTS: f64 = 2_000.0;

/// What decides a simulated capacity: the shape's processes and batch
/// latencies as bit patterns, the percentile, the SLO and the arrival
/// model as written.
type SimulatedKey = (u32, Vec<(u32, u64)>, u64, u64, String);

/// Capacities under every arrival model, memoised: Poisson's in the
/// analytic [`CapacityCache`], the others in a table of their own. Clones
/// share both; safe to use from many threads.
#[derive(Debug, Clone, Default)]
pub struct Capacities {
    analytic: CapacityCache,
    simulated: Arc<RwLock<HashMap<SimulatedKey, f64>>>,
}

impl Capacities {
    /// Empty memos.
    pub fn new() -> Capacities {
        Capacities::default()
    }

    /// The capacity (req/s) of a segment of `shape` at `percentile` within
    /// `latency_slo_ms` under `arrivals`: exact for Poisson, simulated
    /// otherwise (see the module docs), each computed once.
    ///
    /// # Errors
    /// A percentile outside `(0, 100)`, an SLO that is negative or not
    /// finite, an arrival model out of range.
    pub fn capacity_rps(
        &self,
        shape: &SegmentShape,
        percentile: f64,
        latency_slo_ms: f64,
        arrivals: &ArrivalModel,
    ) -> Result<f64, ServingError> {
        if *arrivals == ArrivalModel::Poisson {
            return self.analytic.capacity_rps(shape, percentile, latency_slo_ms);
        }
        let latencies = shape.batch_latencies().iter().map(|&(batch, ms)| (batch, ms.to_bits())).collect();
        let key = (shape.procs(), latencies, percentile.to_bits(), latency_slo_ms.to_bits(), arrivals.to_string());
        if let Some(&known) = self.simulated.read().unwrap_or_else(PoisonError::into_inner).get(&key) {
            return Ok(known);
        }
        let capacity_rps = simulated_capacity_rps(shape, percentile, latency_slo_ms, arrivals)?;
        self.simulated.write().unwrap_or_else(PoisonError::into_inner).insert(key, capacity_rps);
        Ok(capacity_rps)
    }
}

/// The simulated capacity of a segment of `shape` (see the module docs):
/// 0 when a lone request misses the SLO.
///
/// # Errors
/// As [`Capacities::capacity_rps`].
pub fn simulated_capacity_rps(
    shape: &SegmentShape,
    percentile: f64,
    latency_slo_ms: f64,
    arrivals: &ArrivalModel,
) -> Result<f64, ServingError> {
    crate::analytic::check_percentile(percentile)?;
    crate::analytic::check_slo(latency_slo_ms)?;
    arrivals.validate()?;
    if shape.latency_ms(1) > latency_slo_ms {
        return Ok(0.0);
    }
    let poisson_rps = crate::analytic::capacity_rps(shape, percentile, latency_slo_ms)?;
    let (mut met, mut missed) = match trial_meets(shape, poisson_rps, percentile, latency_slo_ms, arrivals)? {
        true => (poisson_rps, shape.throughput_rps()),
        false => (0.0, poisson_rps),
    };
    for _ in 0..SIMULATED_STEPS {
        let rate_rps = 0.5 * (met + missed);
        if trial_meets(shape, rate_rps, percentile, latency_slo_ms, arrivals)? {
            met = rate_rps;
        } else {
            missed = rate_rps;
        }
    }
    Ok(met)
}

/// Whether the segment alone, routed `rate_rps` of `arrivals`, keeps the
/// lower end of its attainment's 95% interval at or above the percentile.
fn trial_meets(
    shape: &SegmentShape,
    rate_rps: f64,
    percentile: f64,
    latency_slo_ms: f64,
    arrivals: &ArrivalModel,
) -> Result<bool, ServingError> {
    let service = ServedService { name: "segment".into(), rate_rps, latency_slo_ms, percentile };
    let segment = ServedSegment { service: 0, shape: shape.clone(), weight: 1.0, label: "segment".into() };
    let system = ServingSystem::new(vec![service], vec![segment])?;
    if rate_rps <= 0.0 {
        return Ok(true);
    }
    let warmup_s = WARMUP_REQUESTS / rate_rps;
    let options = SimulationOptions {
        arrivals: arrivals.clone(),
        seconds: warmup_s + (SIMULATED_REQUESTS / rate_rps).max(MODEL_CYCLES * cycle_s(arrivals, rate_rps)),
        warmup_s,
        seed: SEED,
        ..SimulationOptions::default()
    };
    let report = match simulate(&system, &options) {
        Ok(report) => report,
        // Queues past the simulator's bound: far beyond the capacity.
        Err(ServingError::QueueLimit { .. }) => return Ok(false),
        Err(error) => return Err(error),
    };
    let Some(measures) = report.services.first().and_then(|outcome| outcome.measures.as_ref()) else {
        return Ok(false);
    };
    let lower = measures.attainment_ci.map_or(measures.attainment, |interval| interval.low);
    Ok(lower >= percentile / 100.0)
}

/// How long one cycle of `arrivals` lasts at `rate_rps`, seconds: an on
/// and an off period on average, the whole trace scaled to the rate; 0 for
/// renewal processes.
fn cycle_s(arrivals: &ArrivalModel, rate_rps: f64) -> f64 {
    match arrivals {
        ArrivalModel::Poisson | ArrivalModel::Renewal { .. } => 0.0,
        ArrivalModel::OnOff { mean_on_s, mean_off_s, .. } => mean_on_s + mean_off_s,
        ArrivalModel::Trace { times_s, .. } => times_s.len() as f64 / rate_rps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> SegmentShape {
        SegmentShape::new(2, vec![(1, 4.0), (2, 5.0), (4, 7.0), (8, 12.0)]).unwrap()
    }

    #[test]
    fn burstier_arrivals_lower_the_capacity_and_smoother_ones_raise_it() {
        let capacities = Capacities::new();
        let at = |arrivals: &ArrivalModel| capacities.capacity_rps(&shape(), 99.0, 40.0, arrivals).unwrap();
        let poisson = at(&ArrivalModel::Poisson);
        let smooth = at(&ArrivalModel::Renewal { cv: 0.5 });
        let bursty = at(&ArrivalModel::Renewal { cv: 2.0 });
        assert!(bursty < poisson && poisson < smooth, "cv 2 {bursty}, Poisson {poisson}, cv 0.5 {smooth}");
        assert!(bursty > 0.0 && smooth < shape().throughput_rps());
    }

    #[test]
    fn the_simulated_search_agrees_with_the_analytic_model_under_poisson() {
        // The simulated search under Poisson arrivals (not what planning
        // uses) lands near the exact capacity, below it by the interval.
        let exact = crate::analytic::capacity_rps(&shape(), 99.0, 40.0).unwrap();
        let simulated = simulated_capacity_rps(&shape(), 99.0, 40.0, &ArrivalModel::Poisson).unwrap();
        assert!(simulated <= exact * 1.01 && simulated >= exact * 0.9, "simulated {simulated}, exact {exact}");
    }

    #[test]
    fn a_capacity_is_computed_once_and_a_lone_request_that_misses_gives_none() {
        let capacities = Capacities::new();
        let bursty = ArrivalModel::Renewal { cv: 3.0 };
        let first = capacities.capacity_rps(&shape(), 99.0, 40.0, &bursty).unwrap();
        assert_eq!(capacities.capacity_rps(&shape(), 99.0, 40.0, &bursty).unwrap(), first);
        assert_eq!(capacities.simulated.read().unwrap().len(), 1);
        assert_eq!(simulated_capacity_rps(&shape(), 99.0, 3.0, &bursty).unwrap(), 0.0);
        assert!(simulated_capacity_rps(&shape(), 100.0, 40.0, &bursty).is_err());
    }
}
