//! A latency rule with what it needs to judge a segment: under the
//! percentile rule, the serving model's capacities, memoised in the cache
//! the inputs carry.
//!
//! Under the percentile rule the planners see every point with its
//! *capacity* in place of its throughput: the highest rate at which its
//! percentile latency stays within the service's SLO (tessera-serving's
//! `Capacities`: random routing to per-process queues, greedy dynamic
//! batching; exact under Poisson arrivals, searched for with the request
//! simulator under the request's other arrival models). Routing is in proportion to capacity, so a
//! segment never runs above it; over-provisioning only shortens queues. So
//! of the points of one instance size only the one with the highest
//! capacity matters, and the planners get that one per size: the planners'
//! searches and bounds stay exact, and only the points that can matter
//! are ever evaluated (in descending throughput, stopping when no lower
//! throughput can beat the best capacity found).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use tessera_core::{GpuModel, ModelProfile, ProfilePoint, ServiceSlo};
use tessera_serving::{ArrivalModel, Capacities, SegmentShape};

use crate::error::{unmeetable, PlanError};
use crate::latency::LatencyRule;

/// Relative tolerance of the serving model's predictions (its searches
/// stop at a relative precision of 5e-4, from below).
pub(crate) const PREDICTION_TOLERANCE: f64 = 1e-3;

/// A rule and the serving model's memo.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Judge<'a> {
    /// The rule.
    pub rule: LatencyRule,
    /// How requests arrive.
    pub arrivals: &'a ArrivalModel,
    /// The robustness margin: capacities hold with every batch this share
    /// slower than profiled.
    pub margin: f64,
    /// Capacities computed so far (shared by every planner of the inputs).
    pub capacities: &'a Capacities,
    /// The points already judged for the catalogue planned with, if it is
    /// the inputs' own.
    pub points: Option<&'a PointsMemo>,
}

/// What decides the points a service is planned with: its profile (GPU
/// model and model, in one catalogue), its latency SLO and percentile
/// (exact bits), the process limit, the rule, the margin (bits) and the
/// arrival model (in words). Not its rate.
type PointsKey = (GpuModel, String, u64, u64, u32, LatencyRule, u64, String);

/// The points services were planned with, memoised per catalogue: an
/// autopilot plans the same services at new rates every minute, and the
/// points do not depend on the rates. Clones share one table.
#[derive(Debug, Clone, Default)]
pub(crate) struct PointsMemo {
    known: Arc<RwLock<HashMap<PointsKey, Vec<ProfilePoint>>>>,
}

impl Judge<'_> {
    /// The points the planners plan `slo` with from `profile`: the usable
    /// ones (`usable_points`: within `max_procs`, fitting their instance's
    /// memory) as `planning_points` sees them, memoised when the judge has
    /// a memo (a refusal is not).
    pub(crate) fn judged_points(
        &self,
        profile: &ModelProfile,
        slo: &ServiceSlo,
        max_procs: u32,
    ) -> Result<Vec<ProfilePoint>, PlanError> {
        let Some(memo) = self.points else {
            return self.planning_points(profile, usable_points(profile, slo, max_procs)?, slo);
        };
        let key = (
            profile.gpu_model,
            profile.model.clone(),
            slo.latency_slo_ms.to_bits(),
            slo.percentile.to_bits(),
            max_procs,
            self.rule,
            self.margin.to_bits(),
            self.arrivals.to_string(),
        );
        if let Some(points) = memo.known.read().unwrap_or_else(PoisonError::into_inner).get(&key) {
            return Ok(points.clone());
        }
        let points = self.planning_points(profile, usable_points(profile, slo, max_procs)?, slo)?;
        memo.known.write().unwrap_or_else(PoisonError::into_inner).insert(key, points.clone());
        Ok(points)
    }

    /// The points the planners plan `slo` with, from `usable` (points of
    /// `profile` that fit the process limit and memory): as profiled, or
    /// under the percentile rule the best point of each size with its
    /// capacity as its throughput (sizes where none has a capacity left
    /// out).
    pub(crate) fn planning_points(
        &self,
        profile: &ModelProfile,
        usable: Vec<ProfilePoint>,
        slo: &ServiceSlo,
    ) -> Result<Vec<ProfilePoint>, PlanError> {
        if !self.rule.uses_capacity() {
            return Ok(usable);
        }
        let mut by_size: BTreeMap<u8, Vec<ProfilePoint>> = BTreeMap::new();
        for point in usable {
            by_size.entry(point.config.size_gpcs).or_default().push(point);
        }
        let mut planned = Vec::new();
        let profiled: Vec<ProfilePoint> = by_size.values().flatten().copied().collect();
        for (_, mut points) in by_size {
            points.sort_by(|a, b| b.throughput_rps.total_cmp(&a.throughput_rps));
            let mut best: Option<ProfilePoint> = None;
            for point in points {
                if best.is_some_and(|best| point.throughput_rps <= best.throughput_rps) {
                    break;
                }
                let capacity_rps = self.capacity_rps(profile, &point, slo)?;
                if capacity_rps > 0.0 && best.is_none_or(|best| capacity_rps > best.throughput_rps) {
                    best = Some(ProfilePoint { throughput_rps: capacity_rps, ..point });
                }
            }
            planned.extend(best);
        }
        if planned.is_empty() && !profiled.is_empty() {
            return Err(unmeetable(profiled.into_iter(), slo, self.rule));
        }
        Ok(planned)
    }

    /// The capacity (req/s) of `point` of `profile` for `slo` under the
    /// percentile rule: the highest routed rate at which its percentile
    /// latency is within the SLO with every batch `margin` slower than
    /// profiled (0 when none is).
    pub(crate) fn capacity_rps(
        &self,
        profile: &ModelProfile,
        point: &ProfilePoint,
        slo: &ServiceSlo,
    ) -> Result<f64, PlanError> {
        let shape = shape(profile, point)?.slowed_by(self.margin);
        if shape.latency_ms(shape.max_batch()) > slo.latency_slo_ms {
            return Ok(0.0);
        }
        self.capacities.capacity_rps(&shape, slo.percentile, slo.latency_slo_ms, self.arrivals).map_err(serving_error)
    }
}

/// The points of `profile` a planner may run for `slo`: at most `max_procs`
/// processes and, where a point's memory is known, no more than its
/// instance holds. `memory_gb` is the whole segment's (all processes), so it
/// is compared with the memory of the size's primary MIG profile on the
/// profile's GPU model. Empty when the process limit leaves nothing (the
/// latency check then names the problem); an error when memory rules out
/// every point the process limit leaves.
fn usable_points(profile: &ModelProfile, slo: &ServiceSlo, max_procs: u32) -> Result<Vec<ProfilePoint>, PlanError> {
    let spec = profile.gpu_model.spec();
    let instance_gb = |point: &ProfilePoint| {
        spec.profile_for_size(point.config.size_gpcs).map_or(0.0, |instance| f64::from(instance.memory_gb))
    };
    let allowed: Vec<ProfilePoint> = profile.points().iter().filter(|p| p.config.procs <= max_procs).copied().collect();
    let fitting: Vec<ProfilePoint> =
        allowed.iter().filter(|p| p.memory_gb.is_none_or(|gb| gb <= instance_gb(p))).copied().collect();
    if !allowed.is_empty() && fitting.is_empty() {
        let tightest = allowed
            .iter()
            .min_by(|a, b| {
                let excess = |p: &ProfilePoint| p.memory_gb.unwrap_or(0.0) / instance_gb(p);
                excess(a).total_cmp(&excess(b))
            })
            .expect("points remain");
        return Err(PlanError::NoPointFits {
            service: slo.service.clone(),
            model: slo.model.clone(),
            gpu: profile.gpu_model.to_string(),
            closest: tightest.config.to_string(),
            needed_gb: tightest.memory_gb.unwrap_or(0.0),
            instance_gb: instance_gb(tightest),
        });
    }
    Ok(fitting)
}

/// The serving model's shape of `point` of `profile`: its processes, its
/// batch at its latency, and every smaller batch profiled at its size and
/// processes (read conservatively).
pub(crate) fn shape(profile: &ModelProfile, point: &ProfilePoint) -> Result<SegmentShape, PlanError> {
    SegmentShape::from_profile(profile.points(), point.config, point.latency_ms)
        .map(|read| read.shape)
        .map_err(serving_error)
}

/// The serving model refusing its input: a profile it cannot read.
fn serving_error(error: tessera_serving::ServingError) -> PlanError {
    PlanError::ServingModel(error.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::LazyLock;

    use super::*;

    /// One memo for the crate's tests.
    pub(crate) fn capacities() -> &'static Capacities {
        static CAPACITIES: LazyLock<Capacities> = LazyLock::new(Capacities::new);
        &CAPACITIES
    }

    impl Judge<'static> {
        /// `rule` with the tests' memo.
        pub(crate) fn plain(rule: LatencyRule) -> Judge<'static> {
            Judge { rule, arrivals: &ArrivalModel::Poisson, margin: 0.0, capacities: capacities(), points: None }
        }
    }
}
