//! What is served: services with their rates and SLOs, and the segments
//! that serve them with their routing weights.

use std::collections::HashMap;

use tessera_core::text::count;
use tessera_core::{Plan, ProfileCatalog, SegmentConfig};

use crate::analytic::AttainmentCache;
use crate::error::ServingError;
use crate::serialized::{busy_share, member_figures, Member, MemberFigures, MemberLoad, SerializedQueue};
use crate::shape::SegmentShape;

/// One service as the serving model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedService {
    /// Its name (unique within a system).
    pub name: String,
    /// Mean request rate, requests per second.
    pub rate_rps: f64,
    /// The latency objective, ms.
    pub latency_slo_ms: f64,
    /// The share of requests (percent, e.g. 99.0) that must finish within
    /// the objective.
    pub percentile: f64,
}

/// One segment: a MIG instance serving one service.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedSegment {
    /// The index of the service it serves in [`ServingSystem::services`].
    pub service: usize,
    /// How it serves.
    pub shape: SegmentShape,
    /// Its routing weight: a service's requests go to its segments at
    /// random in proportion to their weights.
    pub weight: f64,
    /// A name for reports, e.g. `node 0 gpu 1 3g.40gb@4`.
    pub label: String,
}

/// What the analytic model predicts of one service ([`ServingSystem::predict`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServicePrediction {
    /// The service's percentile latency over all its segments, ms.
    pub latency_ms: f64,
    /// The share of its requests within its latency SLO.
    pub attainment: f64,
}

/// Services and the segments that serve them, checked: names unique, rates
/// and objectives positive, every service with a segment of positive
/// weight.
#[derive(Debug, Clone, PartialEq)]
pub struct ServingSystem {
    services: Vec<ServedService>,
    segments: Vec<ServedSegment>,
    /// Shared instances: each the segments (one per member service) one
    /// serialized executor serves.
    shared: Vec<Vec<usize>>,
    /// Each service's segments, by index, in order (derived from
    /// `segments`).
    segments_of: Vec<Vec<usize>>,
    /// Each service's segments' weights summed in that order (derived).
    weight_of: Vec<f64>,
}

impl ServingSystem {
    /// A checked system; the first problem is named.
    pub fn new(services: Vec<ServedService>, segments: Vec<ServedSegment>) -> Result<ServingSystem, ServingError> {
        if services.is_empty() {
            return Err(ServingError::invalid("services", "a system needs at least one service"));
        }
        let mut names = HashMap::new();
        for (index, service) in services.iter().enumerate() {
            let name = &service.name;
            if name.trim().is_empty() {
                return Err(ServingError::invalid("service", format!("service {} has an empty name", index + 1)));
            }
            if names.insert(name.as_str(), index).is_some() {
                return Err(ServingError::invalid("service", format!("'{name}' is listed twice")));
            }
            let positive = |field: &str, value: f64, unit: &str| {
                if value.is_finite() && value > 0.0 {
                    Ok(())
                } else {
                    Err(ServingError::invalid(field, format!("service '{name}': {value}{unit} is not positive")))
                }
            };
            positive("rate_rps", service.rate_rps, " req/s")?;
            positive("latency_slo_ms", service.latency_slo_ms, " ms")?;
            if !(service.percentile > 0.0 && service.percentile < 100.0) {
                return Err(ServingError::invalid(
                    "percentile",
                    format!("service '{name}': {} is not in (0, 100)", service.percentile),
                ));
            }
        }
        let mut weight_of = vec![0.0; services.len()];
        let mut segments_of = vec![Vec::new(); services.len()];
        for (index, segment) in segments.iter().enumerate() {
            let Some(total) = weight_of.get_mut(segment.service) else {
                return Err(ServingError::invalid(
                    "segment",
                    format!("'{}' serves service {}, but there are {}", segment.label, segment.service, services.len()),
                ));
            };
            if !(segment.weight.is_finite() && segment.weight >= 0.0) {
                return Err(ServingError::invalid(
                    "weight",
                    format!("segment '{}': {} is not a non-negative weight", segment.label, segment.weight),
                ));
            }
            *total += segment.weight;
            segments_of[segment.service].push(index);
        }
        if let Some(index) = weight_of.iter().position(|&w| w <= 0.0) {
            return Err(ServingError::invalid(
                "segments",
                format!("service '{}' has no segment with a positive weight", services[index].name),
            ));
        }
        Ok(ServingSystem { services, segments, shared: Vec::new(), segments_of, weight_of })
    }

    /// The same system with each service `k` at `rate_rps(k)` requests per
    /// second, checked as [`ServingSystem::new`] checks a rate.
    pub fn with_rates(mut self, rate_rps: impl Fn(usize) -> f64) -> Result<ServingSystem, ServingError> {
        for (index, service) in self.services.iter_mut().enumerate() {
            let rate_rps = rate_rps(index);
            if !(rate_rps.is_finite() && rate_rps > 0.0) {
                let name = &service.name;
                return Err(ServingError::invalid(
                    "rate_rps",
                    format!("service '{name}': {rate_rps} req/s is not positive"),
                ));
            }
            service.rate_rps = rate_rps;
        }
        Ok(self)
    }

    /// The system with `shared` instances: each a list of segments (one per
    /// member service, one process each) that one executor serves under the
    /// serialized discipline; a segment is in at most one instance. A
    /// member's service may have other segments (mid-transition: its new
    /// place serves beside its old one), which the analytic model
    /// predicts and the simulator refuses.
    pub fn with_shared(mut self, shared: Vec<Vec<usize>>) -> Result<ServingSystem, ServingError> {
        let mut in_instance = vec![false; self.segments.len()];
        for group in &shared {
            if group.len() < 2 {
                return Err(ServingError::invalid("shared", "a shared instance needs at least two members"));
            }
            for &segment in group {
                let Some(seen) = in_instance.get_mut(segment) else {
                    return Err(ServingError::invalid("shared", format!("no segment {segment}")));
                };
                let label = &self.segments[segment].label;
                if std::mem::replace(seen, true) {
                    return Err(ServingError::invalid("shared", format!("'{label}' is in two shared instances")));
                }
                if self.segments[segment].shape.procs() != 1 {
                    return Err(ServingError::invalid("shared", format!("'{label}' has more than one process")));
                }
            }
        }
        self.shared = shared;
        Ok(self)
    }

    /// A service served by a shared instance and by another segment (its
    /// own or another instance's), if any: the first by index.
    pub fn member_served_elsewhere(&self) -> Option<usize> {
        let mut segments = vec![0usize; self.services.len()];
        for segment in &self.segments {
            segments[segment.service] += 1;
        }
        let members = self.shared.iter().flatten().map(|&segment| self.segments[segment].service);
        members.filter(|&service| segments[service] > 1).min()
    }

    /// The shared instances: each its members' segments.
    pub fn shared(&self) -> &[Vec<usize>] {
        &self.shared
    }

    /// The shared instance whose executor serves `segment`, if any.
    fn instance_of(&self, segment: usize) -> Option<&[usize]> {
        self.shared.iter().find(|group| group.contains(&segment)).map(Vec::as_slice)
    }

    /// The shared instance that serves all of `service` (its one segment
    /// is a member's), if any.
    fn sole_member_of(&self, service: usize) -> Option<&[usize]> {
        match self.segments_of[service][..] {
            [only] => self.instance_of(only),
            _ => None,
        }
    }

    /// The members of the shared instance `group`, each at the rate routed
    /// to its segment. The model takes every request as a batch of its own
    /// (what the planner makes; the verifier refuses other batches).
    fn members(&self, group: &[usize]) -> Vec<Member> {
        let member = |segment: usize| {
            let served = &self.services[self.segments[segment].service];
            let shape = &self.segments[segment].shape;
            let rate_rps = served.rate_rps * self.routed_share(segment);
            let load = MemberLoad { rate_rps, busy_ms: shape.latency_ms(shape.max_batch()) };
            Member { load, slo_ms: served.latency_slo_ms, percentile: served.percentile }
        };
        group.iter().map(|&segment| member(segment)).collect()
    }

    /// The serialized model's prediction of `service`, whose one segment
    /// is a member of the shared instance `group`: none of its requests
    /// within any latency when the executor is busy all the time or more
    /// (its queue grows without bound, as a segment past its throughput).
    fn member_prediction(&self, group: &[usize], service: usize) -> Result<ServicePrediction, ServingError> {
        let members = self.members(group);
        if busy_share(&members) >= 1.0 {
            return Ok(ServicePrediction { latency_ms: f64::INFINITY, attainment: 0.0 });
        }
        let index = group.iter().position(|&segment| self.segments[segment].service == service).unwrap_or(0);
        let MemberFigures { latency_ms, attainment, .. } = member_figures(&members, index, 0.0)?;
        Ok(ServicePrediction { latency_ms, attainment })
    }

    /// How `service`'s requests are served: each of its segments with its
    /// routed share, a member's through its instance's queue.
    fn routes(&self, service: usize) -> Result<Vec<Route<'_>>, ServingError> {
        let rate_rps = self.services[service].rate_rps;
        let mut routes = Vec::new();
        for &k in &self.segments_of[service] {
            let (shape, share) = (&self.segments[k].shape, self.routed_share(k));
            routes.push(match self.instance_of(k) {
                None => Route::Segment { shape, share, routed_rps: rate_rps * share },
                Some(group) => {
                    let members = self.members(group);
                    let queue = match busy_share(&members) < 1.0 {
                        true => Some(SerializedQueue::of(&members, 0.0)?),
                        false => None,
                    };
                    Route::Member { share, busy_ms: shape.latency_ms(shape.max_batch()), queue }
                }
            });
        }
        Ok(routes)
    }

    /// The services.
    pub fn services(&self) -> &[ServedService] {
        &self.services
    }

    /// The segments.
    pub fn segments(&self) -> &[ServedSegment] {
        &self.segments
    }

    /// The indices of `service`'s segments in [`ServingSystem::segments`],
    /// in order.
    pub fn segments_of(&self, service: usize) -> &[usize] {
        &self.segments_of[service]
    }

    /// The share of its service's requests a segment receives (its weight
    /// over the service's total).
    pub fn routed_share(&self, segment: usize) -> f64 {
        self.segments[segment].weight / self.weight_of[self.segments[segment].service]
    }

    /// A segment's offered load: the rate routed to it over its throughput
    /// with full batches (above 1 it cannot keep up).
    pub fn offered_load(&self, segment: usize) -> f64 {
        let routed_rps = self.services[self.segments[segment].service].rate_rps * self.routed_share(segment);
        routed_rps / self.segments[segment].shape.throughput_rps()
    }

    /// What the analytic model predicts of `service` under Poisson arrivals
    /// and random routing to per-process queues (the deployment's
    /// discipline): its percentile latency (ms) — the latency that the
    /// service's percentile of requests, over all its segments, stays
    /// within — and the share of its requests within its SLO. The latency
    /// is found by bisection on the mixture of its segments' latency
    /// distributions, to a relative precision of 1e-4.
    pub fn predict(&self, service: usize) -> Result<ServicePrediction, ServingError> {
        if let Some(group) = self.sole_member_of(service) {
            return self.member_prediction(group, service);
        }
        let served = &self.services[service];
        let routes = self.routes(service)?;
        let within = |latency_ms: f64| within_latency(&routes, latency_ms, None);
        let target = served.percentile / 100.0;
        let attainment = within(served.latency_slo_ms)?;
        // Bracket the percentile latency, then bisect.
        let mut high_ms = routes.iter().map(Route::longest_ms).fold(1.0, f64::max);
        let mut low_ms = 0.0;
        let mut doublings = 0;
        while within(high_ms)? < target {
            low_ms = high_ms;
            high_ms *= 2.0;
            doublings += 1;
            if doublings > 60 {
                return Ok(ServicePrediction { latency_ms: f64::INFINITY, attainment });
            }
        }
        while high_ms - low_ms > 1e-4 * high_ms {
            let middle = 0.5 * (low_ms + high_ms);
            if within(middle)? >= target {
                high_ms = middle;
            } else {
                low_ms = middle;
            }
        }
        Ok(ServicePrediction { latency_ms: high_ms, attainment })
    }

    /// The share of `service`'s requests the analytic model predicts within
    /// its latency SLO (Poisson arrivals, random routing to per-process
    /// queues): [`ServingSystem::predict`]'s attainment, without the
    /// search for the percentile latency.
    pub fn predicted_attainment(&self, service: usize) -> Result<f64, ServingError> {
        self.attainment_with(service, None)
    }

    /// [`ServingSystem::predicted_attainment`] to within
    /// [`crate::analytic::ATTAINMENT_TOLERANCE`], each segment's share
    /// taken from `cache`'s grid of rates where it brackets the segment's
    /// closely enough (see [`AttainmentCache`]): what a caller asking again
    /// and again as rates move wants. The answer does not depend on what
    /// the cache held before.
    pub fn predicted_attainment_cached(&self, service: usize, cache: &AttainmentCache) -> Result<f64, ServingError> {
        self.attainment_with(service, Some(cache))
    }

    /// The model's share of `service`'s requests within its SLO, each
    /// segment's from `cache` where one is given.
    fn attainment_with(&self, service: usize, cache: Option<&AttainmentCache>) -> Result<f64, ServingError> {
        if let Some(group) = self.sole_member_of(service) {
            return Ok(self.member_prediction(group, service)?.attainment);
        }
        within_latency(&self.routes(service)?, self.services[service].latency_slo_ms, cache)
    }

    /// The same system with every batch of every segment `margin` slower
    /// (see [`SegmentShape::slowed_by`]); routing weights unchanged.
    pub fn slowed_by(&self, margin: f64) -> ServingSystem {
        let segments = self
            .segments
            .iter()
            .map(|segment| ServedSegment { shape: segment.shape.slowed_by(margin), ..segment.clone() })
            .collect();
        ServingSystem {
            services: self.services.clone(),
            segments,
            shared: self.shared.clone(),
            segments_of: self.segments_of.clone(),
            weight_of: self.weight_of.clone(),
        }
    }

    /// The system a plan sets up: its services at their rates and SLOs
    /// (each with the percentile the plan records for it, else
    /// `percentile`, e.g. 99.0), one segment per MIG instance.
    ///
    /// A segment's shape takes the instance's processes and batch, its full
    /// batch at the plan's `latency_ms`, and every smaller batch the
    /// catalogue profiled for the instance's model on its GPU model at its
    /// size and processes (a smaller batch slower than the full one is
    /// taken at the full batch's latency, and latencies are made
    /// non-decreasing in the batch: profiling noise, read conservatively).
    /// Without such points (or without a catalogue) every partial batch
    /// runs at the full batch's latency, and a note says for how many
    /// segments. The routing weight is the instance's capacity
    /// ([`tessera_core::InstanceAssignment::capacity`]), as the deployment
    /// routes. A shared instance is one segment per member, each holding
    /// the executor for its full batch, served together under the
    /// serialized discipline; a shared instance of one member (a plan
    /// pruned to the services with traffic) serves it alone.
    pub fn from_plan(
        plan: &Plan,
        catalog: Option<&ProfileCatalog>,
        percentile: f64,
    ) -> Result<(ServingSystem, Vec<String>), ServingError> {
        let services: Vec<ServedService> = plan
            .services
            .iter()
            .map(|report| ServedService {
                name: report.service.clone(),
                rate_rps: report.rate_rps,
                latency_slo_ms: report.latency_slo_ms,
                percentile: report.percentile.unwrap_or(percentile),
            })
            .collect();
        let index: HashMap<&str, usize> = services.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
        let (mut segments, mut full_only, mut adjusted) = (Vec::new(), 0usize, 0usize);
        for gpu in &plan.gpus {
            for instance in &gpu.instances {
                let label = format!("node {} gpu {} {}@{}", gpu.node, gpu.index, instance.profile, instance.start);
                let service = *index.get(instance.service.as_str()).ok_or_else(|| {
                    ServingError::invalid(
                        "plan",
                        format!("{label} serves '{}', which is not among the plan's services", instance.service),
                    )
                })?;
                let config = SegmentConfig { size_gpcs: instance.size, batch: instance.batch, procs: instance.procs };
                let points = catalog
                    .and_then(|catalog| catalog.get(gpu.gpu_model, &instance.model))
                    .map_or(&[][..], |profile| profile.points());
                let read = SegmentShape::from_profile(points, config, instance.latency_ms)
                    .map_err(|error| ServingError::invalid("plan", format!("{label}: {error}")))?;
                full_only += usize::from(read.partial_batches == 0 && instance.batch > 1);
                adjusted += read.adjusted;
                let shape = read.shape;
                // Requests are routed in proportion to the plan's capacities.
                let weight = instance.capacity();
                segments.push(ServedSegment { service, shape, weight, label });
            }
        }
        let mut shared = Vec::new();
        for (gpu, instance) in plan.shared_instances() {
            let label = format!("node {} gpu {} {}@{}", gpu.node, gpu.index, instance.profile, instance.start);
            let mut group = Vec::with_capacity(instance.members.len());
            for member in &instance.members {
                let service = *index.get(member.service.as_str()).ok_or_else(|| {
                    ServingError::invalid(
                        "plan",
                        format!("{label} serves '{}', which is not among the plan's services", member.service),
                    )
                })?;
                // Every batch, full or not, holds the executor as long as
                // the member's full batch (as the serialized model takes it).
                let shape = SegmentShape::full_batch_only(1, member.batch, member.busy_ms())
                    .map_err(|error| ServingError::invalid("plan", format!("{label}: {error}")))?;
                group.push(segments.len());
                segments.push(ServedSegment {
                    service,
                    shape,
                    weight: member.capacity_rps,
                    label: format!("{label} ({} shared)", member.service),
                });
            }
            // An executor left with one member (the others pruned, e.g.
            // at no traffic) serves it as a segment of its own.
            if group.len() > 1 {
                shared.push(group);
            }
        }
        let mut notes = Vec::new();
        if full_only > 0 {
            let why = if catalog.is_some() {
                "the catalogue has no smaller batch of their model at their size and processes"
            } else {
                "no profile catalogue was given"
            };
            notes.push(format!(
                "{full_only} of {} simulated with every partial batch at the full batch's latency ({why})",
                count(segments.len(), "segment")
            ));
        }
        if adjusted > 0 {
            notes.push(format!(
                "{} raised or lowered to keep latency non-decreasing in the batch up to the plan's full-batch latency",
                count(adjusted, "profiled partial-batch latency")
            ));
        }
        Ok((ServingSystem::new(services, segments)?.with_shared(shared)?, notes))
    }
}

/// One way a service's requests are served, with the share routed there.
enum Route<'a> {
    /// A segment of its own, at the rate routed to it.
    Segment { shape: &'a SegmentShape, share: f64, routed_rps: f64 },
    /// A member's segment of a shared instance: the executor's wait, then
    /// its batch; no queue when the executor is busy all the time or more.
    Member { share: f64, busy_ms: f64, queue: Option<SerializedQueue> },
}

impl Route<'_> {
    /// The share of the service's requests routed here.
    fn share(&self) -> f64 {
        match self {
            Route::Segment { share, .. } | Route::Member { share, .. } => *share,
        }
    }

    /// The share of the requests routed here that finish within
    /// `latency_ms`, a segment's from `cache` where one is given.
    fn within(&self, latency_ms: f64, cache: Option<&AttainmentCache>) -> Result<f64, ServingError> {
        match self {
            Route::Segment { shape, routed_rps, .. } => match cache {
                Some(cache) => cache.attainment(shape, *routed_rps, latency_ms),
                None => crate::analytic::attainment(shape, *routed_rps, latency_ms),
            },
            Route::Member { busy_ms, queue, .. } => {
                Ok(queue.as_ref().map_or(0.0, |queue| queue.waiting_within(latency_ms - busy_ms)))
            }
        }
    }

    /// Its longest batch, ms.
    fn longest_ms(&self) -> f64 {
        match self {
            Route::Segment { shape, .. } => shape.latency_ms(shape.max_batch()),
            Route::Member { busy_ms, .. } => *busy_ms,
        }
    }
}

/// The share of a service's requests within `latency_ms` over its
/// `routes`. Segments of one shape at one routed rate (a service's
/// identical segments) are evaluated once: the same numbers give the same
/// share. A segment's share comes from `cache` where one is given.
fn within_latency(routes: &[Route<'_>], latency_ms: f64, cache: Option<&AttainmentCache>) -> Result<f64, ServingError> {
    let mut evaluated: Vec<(&SegmentShape, u64, f64)> = Vec::new();
    routes.iter().try_fold(0.0, |sum, route| {
        let within = match route {
            Route::Segment { shape, routed_rps, .. } => {
                let same = |&&(known, rate_bits, _): &&(&SegmentShape, u64, f64)| {
                    rate_bits == routed_rps.to_bits() && known == *shape
                };
                match evaluated.iter().find(same) {
                    Some(&(_, _, within)) => within,
                    None => {
                        let within = route.within(latency_ms, cache)?;
                        evaluated.push((shape, routed_rps.to_bits(), within));
                        within
                    }
                }
            }
            Route::Member { .. } => route.within(latency_ms, cache)?,
        };
        Ok(sum + route.share() * within)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str) -> ServedService {
        ServedService { name: name.into(), rate_rps: 10.0, latency_slo_ms: 100.0, percentile: 99.0 }
    }

    fn segment(service: usize, weight: f64) -> ServedSegment {
        let shape = SegmentShape::full_batch_only(2, 4, 20.0).unwrap();
        ServedSegment { service, shape, weight, label: format!("s{service}") }
    }

    #[test]
    fn a_system_is_checked_naming_the_problem() {
        let error = |services, segments| ServingSystem::new(services, segments).unwrap_err().to_string();
        assert!(error(vec![service("a"), service("a")], vec![segment(0, 1.0)]).contains("'a' is listed twice"));
        assert!(error(vec![service("a"), service("b")], vec![segment(0, 1.0), segment(1, 0.0)])
            .contains("service 'b' has no segment with a positive weight"));
        assert!(error(vec![service("a")], vec![segment(3, 1.0)]).contains("serves service 3"));
        let slow = ServedService { latency_slo_ms: 0.0, ..service("a") };
        assert_eq!(error(vec![slow], vec![segment(0, 1.0)]), "latency_slo_ms: service 'a': 0 ms is not positive");
        let odd = ServedService { percentile: 100.0, ..service("a") };
        assert!(error(vec![odd], vec![segment(0, 1.0)]).starts_with("percentile:"));
        assert!(error(vec![], vec![]).contains("at least one service"));
    }

    #[test]
    fn shares_and_offered_load_follow_the_weights() {
        let system = ServingSystem::new(vec![service("a")], vec![segment(0, 1.0), segment(0, 3.0)]).unwrap();
        assert_eq!(system.routed_share(1), 0.75);
        // 7.5 req/s on 2 × 4 / 20 ms = 400 req/s.
        assert!((system.offered_load(1) - 7.5 / 400.0).abs() < 1e-12);
    }

    #[test]
    fn predicted_attainment_is_the_predictions_and_falls_with_the_rate() {
        let system = ServingSystem::new(vec![service("a")], vec![segment(0, 1.0), segment(0, 3.0)]).unwrap();
        let attainment = system.predicted_attainment(0).unwrap();
        assert_eq!(attainment, system.predict(0).unwrap().attainment);
        let busy = ServedService { rate_rps: 390.0, ..service("a") };
        let loaded = ServingSystem::new(vec![busy], vec![segment(0, 1.0), segment(0, 3.0)]).unwrap();
        assert!(loaded.predicted_attainment(0).unwrap() < attainment, "{attainment}");
    }

    #[test]
    fn identical_segments_are_evaluated_once_and_give_the_same_share() {
        let busy = ServedService { rate_rps: 300.0, ..service("a") };
        let segments = vec![segment(0, 1.0), segment(0, 1.0), segment(0, 3.0), segment(0, 1.0)];
        let system = ServingSystem::new(vec![busy], segments).unwrap();
        let shape = SegmentShape::full_batch_only(2, 4, 20.0).unwrap();
        // Each segment on its own, summed in the same order.
        let expected = [1.0, 1.0, 3.0, 1.0].iter().fold(0.0, |sum, weight| {
            let share = weight / 6.0;
            sum + share * crate::analytic::attainment(&shape, 300.0 * share, 100.0).unwrap()
        });
        assert_eq!(system.predicted_attainment(0).unwrap(), expected);
        assert!(expected < 1.0, "{expected}");
    }

    #[test]
    fn a_shared_executor_past_its_time_serves_nothing_in_time() {
        // Two members whose batches of one hold the executor 20 ms each.
        let member = |service| {
            let shape = SegmentShape::full_batch_only(1, 1, 20.0).unwrap();
            ServedSegment { service, shape, weight: 1.0, label: format!("m{service}") }
        };
        let at = |rate_rps: f64| {
            let services = vec![ServedService { rate_rps, ..service("a") }, ServedService { rate_rps, ..service("b") }];
            ServingSystem::new(services, vec![member(0), member(1)]).unwrap().with_shared(vec![vec![0, 1]]).unwrap()
        };
        // 10 req/s each: busy 40% of the time, most requests in time.
        let calm = at(10.0).predict(0).unwrap();
        assert!(calm.attainment > 0.9 && calm.latency_ms.is_finite(), "{calm:?}");
        // 26 req/s each: busy 104%, the queue grows without bound.
        let over = at(26.0).predict(1).unwrap();
        assert_eq!((over.attainment, over.latency_ms), (0.0, f64::INFINITY));
        assert_eq!(at(26.0).predicted_attainment(0).unwrap(), 0.0);
    }

    #[test]
    fn a_member_also_served_elsewhere_mixes_its_routes_and_is_not_simulated() {
        let segment = |service, label: &str| {
            let shape = SegmentShape::full_batch_only(1, 1, 20.0).unwrap();
            ServedSegment { service, shape, weight: 1.0, label: label.into() }
        };
        let at = |name, rate_rps| ServedService { rate_rps, ..service(name) };
        // a (20 req/s) half on the executor it shares with b, half on a
        // segment of its own (a member moving out, mid-transition).
        let mixed = ServingSystem::new(
            vec![at("a", 20.0), at("b", 10.0)],
            vec![segment(0, "shared a"), segment(1, "shared b"), segment(0, "own a")],
        )
        .unwrap()
        .with_shared(vec![vec![0, 1]])
        .unwrap();
        let executor = ServingSystem::new(
            vec![at("a", 10.0), at("b", 10.0)],
            vec![segment(0, "shared a"), segment(1, "shared b")],
        )
        .unwrap()
        .with_shared(vec![vec![0, 1]])
        .unwrap();
        let own = ServingSystem::new(vec![at("a", 10.0)], vec![segment(0, "own a")]).unwrap();
        // b waits behind the half of a routed to the executor only.
        assert_eq!(mixed.predict(1).unwrap(), executor.predict(1).unwrap());
        let expected = 0.5 * executor.predicted_attainment(0).unwrap() + 0.5 * own.predicted_attainment(0).unwrap();
        assert!((mixed.predicted_attainment(0).unwrap() - expected).abs() < 1e-12);
        let latency_ms = mixed.predict(0).unwrap().latency_ms;
        assert!(latency_ms.is_finite() && latency_ms >= 20.0, "{latency_ms}");
        assert_eq!(mixed.member_served_elsewhere(), Some(0));
        assert_eq!(executor.member_served_elsewhere(), None);
        let refused = crate::simulate(&mixed, &crate::SimulationOptions::default()).unwrap_err().to_string();
        assert!(refused.contains("service 'a' is served by a shared instance and by other segments"), "{refused}");
    }
}
