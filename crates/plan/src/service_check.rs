//! Each service as the verifier sees it: what its segments provide,
//! recomputed from the profiles, and the serving model's prediction of its
//! percentile latency and attainment at the rates the plan's weights route
//! to them (under a capacity rule and Poisson arrivals), or the worst
//! latency by the `queueing` or `parva` rule.

use std::collections::{HashMap, HashSet};

use rayon::prelude::*;
use serde::Serialize;
use tessera_core::{GpuModel, SegmentConfig, ServiceSlo};
use tessera_serving::serialized::MemberFigures;
use tessera_serving::{analytic, SegmentShape};

use crate::latency::LatencyRule;
use crate::tolerance::{busiest_load, tolerance};

/// One service as the verifier sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServiceCheck {
    /// The service.
    pub service: String,
    /// Its request rate, req/s.
    pub rate_rps: f64,
    /// What its segments provide, req/s, recomputed from the profiles
    /// (under a capacity rule, the serving model's capacities).
    pub provisioned_rps: f64,
    /// Its latency SLO, ms.
    pub latency_slo_ms: f64,
    /// Under a capacity rule: the percentile its SLO holds at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
    /// Its slowest segment's latency, ms: under a capacity rule and Poisson
    /// arrivals, the predicted percentile latency; under `queueing` and
    /// `parva`, the rule's worst latency. None under other arrival models
    /// (the request-level simulation judges those: `verify --simulate`),
    /// or when no segment of it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_latency_ms: Option<f64>,
    /// Under a capacity rule and Poisson arrivals: the predicted share of
    /// its requests within its SLO (its segments' shares, weighted by the
    /// rate routed to each).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_attainment: Option<f64>,
    /// Under a capacity rule and Poisson arrivals: its tolerance, the
    /// largest uniform slowdown of its batches (a share of their profiled
    /// latency: 0.05 is 5% slower) at which every segment of it still
    /// meets its percentile SLO at the rate routed to it; negative when it
    /// misses at the profiled speed. Searched in [`tessera_core::plan::TOLERANCE_RANGE`] to
    /// within 0.1%.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
    /// Under a capacity rule and Poisson arrivals: the offered load of its
    /// busiest segment, the rate routed to it over its full-batch
    /// throughput as profiled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busiest_load: Option<f64>,
    /// No violation names it: its rate is covered and every segment of it
    /// is within the rule.
    pub met: bool,
}

/// Segments of one service, GPU model, configuration and routing weight:
/// they get the same rate, so they are predicted once.
pub(crate) type SegmentKey<'a> = (&'a str, GpuModel, SegmentConfig, u64);

/// What the check noted of each service's segments, in the plan's order.
#[derive(Debug, Default)]
pub(crate) struct SegmentFigures<'a> {
    /// Per service: what its segments provide, req/s.
    pub provisioned_rps: HashMap<&'a str, f64>,
    /// Per service: its segments' worst latency by the rule (`queueing`,
    /// `parva`), ms.
    pub rule_worst_ms: HashMap<&'a str, f64>,
    /// Under a capacity rule and Poisson arrivals: each distinct segment,
    /// its shape, the rate routed to it and how many there are.
    pub routed: Vec<(SegmentKey<'a>, SegmentShape, f64, usize)>,
    /// Where each key sits in `routed`.
    routed_at: HashMap<SegmentKey<'a>, usize>,
    /// Per member of a shared instance: the serialized model's figures at
    /// the margin and the instance's busy share.
    pub shared: HashMap<&'a str, (MemberFigures, f64)>,
}

impl<'a> SegmentFigures<'a> {
    /// Notes one segment of `key` (a service, GPU model, configuration and
    /// weight) of `shape`, routed `routed_rps`.
    pub fn note_routed(&mut self, key: SegmentKey<'a>, shape: &SegmentShape, routed_rps: f64) {
        let at = *self.routed_at.entry(key).or_insert_with(|| {
            self.routed.push((key, shape.clone(), routed_rps, 0));
            self.routed.len() - 1
        });
        self.routed[at].3 += 1;
    }
}

/// What the service checks are judged by: the services, in their order,
/// the rule, the margin, and the services a violation names.
pub(crate) struct Judged<'a> {
    /// The services.
    pub services: &'a [ServiceSlo],
    /// The rule they are checked under.
    pub rule: LatencyRule,
    /// Every batch this share slower than profiled.
    pub margin: f64,
    /// The services some violation names.
    pub flagged: HashSet<&'a str>,
}

/// Every service of `judged` as the verifier sees it, in its order, from
/// what the check noted (`figures`); the serving model's predictions run
/// for services in parallel.
pub(crate) fn service_checks(judged: &Judged<'_>, figures: SegmentFigures<'_>) -> Vec<ServiceCheck> {
    let mut routed: HashMap<&str, Vec<(SegmentShape, f64, usize)>> = HashMap::new();
    for ((service, ..), shape, routed_rps, segments) in figures.routed {
        routed.entry(service).or_default().push((shape, routed_rps, segments));
    }
    judged
        .services
        .par_iter()
        .map(|slo| {
            let name = slo.service.as_str();
            if let Some((member, busy)) = figures.shared.get(name) {
                return ServiceCheck {
                    service: slo.service.clone(),
                    rate_rps: slo.rate_rps,
                    provisioned_rps: figures.provisioned_rps.get(name).copied().unwrap_or(0.0),
                    latency_slo_ms: slo.latency_slo_ms,
                    percentile: Some(slo.percentile),
                    worst_latency_ms: Some(member.latency_ms),
                    predicted_attainment: Some(member.attainment),
                    tolerance: Some(member.tolerance),
                    busiest_load: Some(*busy),
                    met: !judged.flagged.contains(name),
                };
            }
            let segments = routed.get(name);
            let predicted = segments.and_then(|segments| predicted(slo, segments, judged.margin));
            ServiceCheck {
                service: slo.service.clone(),
                rate_rps: slo.rate_rps,
                provisioned_rps: figures.provisioned_rps.get(name).copied().unwrap_or(0.0),
                latency_slo_ms: slo.latency_slo_ms,
                percentile: judged.rule.uses_capacity().then_some(slo.percentile),
                worst_latency_ms: predicted
                    .map(|(worst_ms, _)| worst_ms)
                    .or_else(|| figures.rule_worst_ms.get(name).copied()),
                predicted_attainment: predicted.and_then(|(_, attainment)| attainment),
                tolerance: segments
                    .and_then(|segments| tolerance(slo, segments.iter().map(|(shape, rps, _)| (shape, *rps)))),
                busiest_load: segments
                    .and_then(|segments| busiest_load(segments.iter().map(|(shape, rps, _)| (shape, *rps)))),
                met: !judged.flagged.contains(name),
            }
        })
        .collect()
}

/// The serving model's worst percentile latency of `slo`'s `segments`
/// (each distinct one with its shape as profiled, routed rate and count)
/// with every batch `margin` slower, and their attainment weighted by the
/// rate routed (none without traffic); `None` when the model refuses them.
fn predicted(slo: &ServiceSlo, segments: &[(SegmentShape, f64, usize)], margin: f64) -> Option<(f64, Option<f64>)> {
    let shapes: Vec<(SegmentShape, f64)> =
        segments.iter().map(|(shape, routed_rps, _)| (shape.slowed_by(margin), *routed_rps)).collect();
    let prediction = analytic::predict_service(&shapes, slo.percentile, slo.latency_slo_ms).ok()?;
    let weights = segments.iter().map(|(_, routed_rps, count)| routed_rps * *count as f64);
    let routed_rps: f64 = weights.clone().sum();
    let within_rps: f64 = weights.zip(&prediction.attainments).map(|(weight, attainment)| weight * attainment).sum();
    let attainment = (routed_rps > 0.0).then(|| within_rps / routed_rps);
    Some((prediction.worst_latency_ms, attainment))
}
