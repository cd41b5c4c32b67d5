//! Per-service summaries of a plan: provisioned throughput and latency.

use std::collections::HashMap;

use tessera_core::{InstanceAssignment, ProfilePoint, SegmentConfig, ServiceReport, ServiceSlo};

use crate::latency::LatencyRule;

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
        throughput_rps: instance.throughput_rps,
        latency_ms: instance.latency_ms,
        memory_gb: None,
    }
}

/// One report per service, in the order of `services`, from the plan's
/// instances as they are written in it. Instances of services not in
/// `services` are ignored.
pub fn service_reports<'a>(
    instances: impl IntoIterator<Item = &'a InstanceAssignment>,
    services: &[ServiceSlo],
    rule: LatencyRule,
) -> Vec<ServiceReport> {
    let index: HashMap<&str, usize> = services.iter().enumerate().map(|(i, s)| (s.service.as_str(), i)).collect();
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
            percentile: None,
            predicted_attainment: None,
        })
        .collect();
    let mine: Vec<(usize, ProfilePoint)> = instances
        .into_iter()
        .filter_map(|instance| index.get(instance.service.as_str()).map(|&i| (i, instance_point(instance))))
        .collect();
    for (i, point) in &mine {
        reports[*i].provisioned_rps += point.throughput_rps;
        reports[*i].segments += 1;
    }
    for (i, point) in &mine {
        let report = &mut reports[*i];
        let utilization = utilization(report.rate_rps, report.provisioned_rps);
        report.worst_latency_ms = report.worst_latency_ms.max(rule.worst_latency_ms(point, utilization));
        report.met &= rule.meets(point, utilization, report.latency_slo_ms);
    }
    for report in &mut reports {
        report.met &= report.segments > 0 && covers(report.provisioned_rps, report.rate_rps);
    }
    reports
}
