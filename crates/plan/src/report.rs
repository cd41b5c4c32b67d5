//! Per-service summaries of a plan: provisioned throughput and latency.

use std::collections::HashMap;

use tessera_core::{InstanceAssignment, ServiceReport, ServiceSlo};

use crate::latency::LatencyRule;

/// Relative slack when comparing provisioned throughput with a rate, to
/// absorb floating-point summation order (1 part in 10⁹).
pub const RATE_TOLERANCE: f64 = 1e-9;

/// `true` when `provisioned_rps` covers `rate_rps`.
pub fn covers(provisioned_rps: f64, rate_rps: f64) -> bool {
    provisioned_rps >= rate_rps * (1.0 - RATE_TOLERANCE)
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
        })
        .collect();
    for instance in instances {
        let Some(&i) = index.get(instance.service.as_str()) else {
            continue;
        };
        let report = &mut reports[i];
        report.provisioned_rps += instance.throughput_rps;
        report.worst_latency_ms = report.worst_latency_ms.max(rule.predicted_latency_ms(instance.latency_ms));
        report.segments += 1;
        report.met &= rule.meets(instance.latency_ms, report.latency_slo_ms);
    }
    for report in &mut reports {
        report.met &= report.segments > 0 && covers(report.provisioned_rps, report.rate_rps);
    }
    reports
}
