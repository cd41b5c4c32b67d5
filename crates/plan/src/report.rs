//! Per-service summaries of a plan: provisioned throughput and latency.

use std::collections::HashMap;

use rayon::prelude::*;
use tessera_core::{
    GpuAssignment, GpuModel, InstanceAssignment, ProfilePoint, SegmentConfig, ServiceReport, ServiceSlo,
};
use tessera_serving::{analytic, ArrivalModel, SegmentShape};

use crate::judge::{shape, PREDICTION_TOLERANCE};
use crate::problem::Problem;
use crate::tolerance::{busiest_load, tolerance};

/// Relative slack when comparing provisioned throughput with a rate, to
/// absorb floating-point summation order (1 part in 10⁹).
pub const RATE_TOLERANCE: f64 = 1e-9;

/// `true` when `provisioned_rps` covers `rate_rps`.
pub fn covers(provisioned_rps: f64, rate_rps: f64) -> bool {
    provisioned_rps >= rate_rps * (1.0 - RATE_TOLERANCE)
}

/// The utilization of a service's segments: rate / provisioned, at most 1.
pub fn utilization(rate_rps: f64, provisioned_rps: f64) -> f64 {
    if provisioned_rps > 0.0 {
        (rate_rps / provisioned_rps).min(1.0)
    } else {
        1.0
    }
}

/// The profile point an instance of a plan claims to run.
fn instance_point(instance: &InstanceAssignment) -> ProfilePoint {
    ProfilePoint {
        config: SegmentConfig { size_gpcs: instance.size, batch: instance.batch, procs: instance.procs },
        throughput_rps: instance.capacity(),
        latency_ms: instance.latency_ms,
        memory_gb: None,
        timing: tessera_core::BatchTiming::default(),
    }
}

/// One report per service of `request`, in its order, from the instances
/// of `gpus` as they are written. Instances of services the request does
/// not have are ignored. Under a capacity rule and Poisson arrivals each
/// segment's percentile latency and attainment are predicted by the
/// serving model at the rate routed to it (in proportion to the segments'
/// capacities): the report's worst latency is the slowest segment's, its
/// attainment the routed mixture's. Under other arrival models, or with
/// the request's figures off, nothing is predicted (the worst latency is
/// the slowest batch's; a segment with a capacity meets the SLO by
/// construction).
pub(crate) fn service_reports(gpus: &[GpuAssignment], request: &Problem<'_>) -> Vec<ServiceReport> {
    let services = request.services;
    let rule = request.rule;
    // The analytic model predicts under Poisson arrivals only; under other
    // models a segment's capacity was found by simulation, and the plan is
    // judged by `verify --simulate`.
    let predicting = request.figures && rule.uses_capacity() && *request.arrivals == ArrivalModel::Poisson;
    let mut reports: Vec<ServiceReport> = services
        .iter()
        .map(|slo| ServiceReport {
            service: slo.service.clone(),
            model: slo.model.clone(),
            rate_rps: slo.rate_rps,
            latency_slo_ms: slo.latency_slo_ms,
            provisioned_rps: 0.0,
            worst_latency_ms: 0.0,
            segments: 0,
            met: true,
            percentile: rule.uses_capacity().then_some(slo.percentile),
            predicted_attainment: predicting.then_some(0.0),
            tolerance: None,
            busiest_load: None,
        })
        .collect();
    let mine = dedicated_points(gpus, request);
    for (i, _, point) in &mine {
        reports[*i].provisioned_rps += point.throughput_rps;
        reports[*i].segments += 1;
    }
    let predictions = if predicting { predictions(&mine, &reports, request) } else { Vec::new() };
    for (i, model, point) in &mine {
        let report = &mut reports[*i];
        if predicting {
            let slo = &services[*i];
            let Some(predicted) = &predictions[*i] else {
                report.met = false;
                continue;
            };
            report.worst_latency_ms = predicted.worst_latency_ms;
            report.met &= predicted.worst_latency_ms <= slo.latency_slo_ms * (1.0 + PREDICTION_TOLERANCE);
            let share = point.throughput_rps / report.provisioned_rps.max(f64::MIN_POSITIVE);
            let attainment = predicted.attainment.get(&(*model, point.config)).copied().unwrap_or(0.0);
            report.predicted_attainment = Some(report.predicted_attainment.unwrap_or(0.0) + share * attainment);
        } else {
            let utilization = utilization(report.rate_rps, report.provisioned_rps);
            report.worst_latency_ms = report.worst_latency_ms.max(rule.worst_latency_ms(point, utilization));
            report.met &= rule.meets(point, utilization, report.latency_slo_ms);
        }
    }
    for report in &mut reports {
        report.met &= report.segments > 0 && covers(report.provisioned_rps, report.rate_rps);
    }
    reports
}

/// Every instance of `gpus` that runs a service of `request`, as (the
/// service's index, GPU model, the point it runs); instances of other
/// services are ignored.
fn dedicated_points(gpus: &[GpuAssignment], request: &Problem<'_>) -> Vec<(usize, GpuModel, ProfilePoint)> {
    let index: HashMap<&str, usize> =
        request.services.iter().enumerate().map(|(i, s)| (s.service.as_str(), i)).collect();
    gpus.iter()
        .flat_map(|gpu| gpu.instances.iter().map(move |instance| (gpu.gpu_model, instance)))
        .filter_map(|(model, instance)| {
            index.get(instance.service.as_str()).map(|&i| (i, model, instance_point(instance)))
        })
        .collect()
}

/// A service's segments of one GPU model and configuration (they get the
/// same routed rate).
type SegmentKey = (GpuModel, SegmentConfig);

/// What the serving model predicts of one service's segments.
struct ServicePrediction {
    /// The percentile latency of its slowest segment, ms.
    worst_latency_ms: f64,
    /// The attainment of each of its segments, by GPU model and
    /// configuration (segments of one service, GPU model and configuration
    /// get the same rate).
    attainment: HashMap<SegmentKey, f64>,
}

/// The serving model's prediction for every service of `mine` (service
/// index, GPU model, point) at the rates routed to its segments, services
/// in parallel; `None` for a service with a point the catalogue does not
/// have. The slowest segment's percentile latency needs one search: the
/// search runs on the segment that meets the SLO least often, and another
/// segment is searched only when more than the percentile's share of its
/// requests outlast that latency (so it is slower); its attainment is a
/// single evaluation.
fn predictions(
    mine: &[(usize, GpuModel, ProfilePoint)],
    reports: &[ServiceReport],
    request: &Problem<'_>,
) -> Vec<Option<ServicePrediction>> {
    routed_segments(mine, reports, request)
        .into_par_iter()
        .enumerate()
        .map(|(i, segments)| service_prediction(&request.services[i], segments, request))
        .collect()
}

/// The rate routed to each of every service's segments (in proportion to
/// the segments' capacities), by GPU model and configuration: segments of
/// one service, GPU model and configuration get the same rate.
fn routed_segments(
    mine: &[(usize, GpuModel, ProfilePoint)],
    reports: &[ServiceReport],
    request: &Problem<'_>,
) -> Vec<HashMap<SegmentKey, f64>> {
    let mut routed: Vec<HashMap<SegmentKey, f64>> = vec![HashMap::new(); reports.len()];
    for (i, model, point) in mine {
        let slo = &request.services[*i];
        let routed_rps = slo.rate_rps * point.throughput_rps / reports[*i].provisioned_rps.max(f64::MIN_POSITIVE);
        routed[*i].entry((*model, point.config)).or_insert(routed_rps);
    }
    routed
}

/// [`predictions`] of one service, `slo`, whose segments of each GPU model
/// and configuration are routed the rates of `segments`: the serving
/// model's [`analytic::predict_service`] over them with every batch the
/// request's margin slower.
fn service_prediction(
    slo: &ServiceSlo,
    segments: HashMap<SegmentKey, f64>,
    request: &Problem<'_>,
) -> Option<ServicePrediction> {
    // Cancelled: no figure (the request answers no plan).
    if request.cancelled() {
        return None;
    }
    let profiled = profiled_segments(slo, segments, request)?;
    let margined: Vec<(SegmentShape, f64)> =
        profiled.iter().map(|(_, shape, routed_rps)| (shape.slowed_by(request.margin), *routed_rps)).collect();
    let predicted = analytic::predict_service(&margined, slo.percentile, slo.latency_slo_ms).ok()?;
    let attainment = profiled.into_iter().map(|(key, _, _)| key).zip(predicted.attainments).collect();
    Some(ServicePrediction { worst_latency_ms: predicted.worst_latency_ms, attainment })
}

/// `slo`'s segments of `segments` (each GPU model and configuration with
/// its routed rate) with the serving model's shape as profiled; `None` for
/// a point the catalogue does not have.
fn profiled_segments(
    slo: &ServiceSlo,
    segments: HashMap<SegmentKey, f64>,
    request: &Problem<'_>,
) -> Option<Vec<(SegmentKey, SegmentShape, f64)>> {
    segments
        .into_iter()
        .map(|((model, config), routed_rps)| {
            let profile = request.catalog.get(model, &slo.model)?;
            let shape = shape(profile, profile.point(config)?).ok()?;
            Some(((model, config), shape, routed_rps))
        })
        .collect()
}

/// Writes into `reports` (one per service of `request`, in its order) each
/// service's tolerance and busiest load over its dedicated instances in
/// `gpus` (see `tolerance`), under a capacity rule and Poisson arrivals;
/// reports that already carry a tolerance (members of shared instances)
/// keep theirs. A root search of the serving model per segment: the
/// planner does it once, on the plan it answers.
pub(crate) fn record_tolerances(gpus: &[GpuAssignment], reports: &mut [ServiceReport], request: &Problem<'_>) {
    if !(request.figures && request.rule.uses_capacity() && *request.arrivals == ArrivalModel::Poisson) {
        return;
    }
    let mine = dedicated_points(gpus, request);
    let figures: Vec<(Option<f64>, Option<f64>)> = routed_segments(&mine, reports, request)
        .into_par_iter()
        .enumerate()
        .map(|(i, segments)| {
            let slo = &request.services[i];
            match profiled_segments(slo, segments, request) {
                Some(profiled) if !request.cancelled() => {
                    let segments = || profiled.iter().map(|(_, shape, routed_rps)| (shape, *routed_rps));
                    (tolerance(slo, segments()), busiest_load(segments()))
                }
                _ => (None, None),
            }
        })
        .collect();
    for (report, (tolerance, busiest_load)) in reports.iter_mut().zip(figures) {
        if report.tolerance.is_none() {
            (report.tolerance, report.busiest_load) = (tolerance, busiest_load);
        }
    }
}
