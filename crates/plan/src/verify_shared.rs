//! The verifier's checks of a shared instance: every member a known
//! service of its model at a profiled batch-1 point with the profile's
//! numbers, the members' memory within the instance, each member's service
//! served there only, and every member's percentile SLO met by the
//! serialized model with every batch the margin slower.

use std::collections::HashMap;

use tessera_core::{GpuAssignment, SegmentConfig, ServiceSlo, SharedInstance};
use tessera_serving::serialized::{busy_share, member_figures, Member, MemberFigures, MemberLoad};
use tessera_serving::ArrivalModel;

use crate::judge::PREDICTION_TOLERANCE;
use crate::latency::LatencyRule;
use crate::violation::{claims_beyond_profile, InstanceRef, VerifyRequest, Violation};

/// What the check found of one shared instance: each member's service and
/// what it is routed (to add to what the service is provisioned), and the
/// serving model's figures of the members it could judge.
pub(crate) struct SharedFindings<'a> {
    /// Each member's service and claimed capacity, req/s.
    pub provisioned: Vec<(&'a ServiceSlo, f64)>,
    /// The serving model's figures of each member, at the margin.
    pub figures: Vec<(&'a ServiceSlo, MemberFigures, f64)>,
}

/// Checks `shared` on `gpu` against `request`, pushing what is wrong.
pub(crate) fn check_shared<'a>(
    gpu: &GpuAssignment,
    shared: &SharedInstance,
    services: &HashMap<&str, &'a ServiceSlo>,
    request: &VerifyRequest<'a>,
    violations: &mut Vec<Violation>,
) -> SharedFindings<'a> {
    let at = InstanceRef { node: gpu.node, index: gpu.index, profile: shared.profile.clone(), start: shared.start };
    let mut findings = SharedFindings { provisioned: Vec::new(), figures: Vec::new() };
    let problem = |problem: String| Violation::Profile { at: at.clone(), problem };
    if request.rule != LatencyRule::Percentile || *request.arrivals != ArrivalModel::Poisson {
        violations.push(problem(format!(
            "a shared instance is proven under the percentile rule and Poisson arrivals, not the {} rule and {} \
             arrivals",
            request.rule.name(),
            request.arrivals
        )));
    }
    if shared.members.len() < 2 {
        violations
            .push(problem(format!("a shared instance has {} member(s); it needs at least 2", shared.members.len())));
    }
    let mut judged = Vec::new();
    let mut memory_gb = 0.0;
    for member in &shared.members {
        let Some(&slo) = services.get(member.service.as_str()) else {
            violations.push(Violation::UnknownService { at: at.clone(), service: member.service.clone() });
            continue;
        };
        if slo.model != member.model {
            violations.push(Violation::ModelMismatch {
                at: at.clone(),
                service: slo.service.clone(),
                expected: slo.model.clone(),
                found: member.model.clone(),
            });
            continue;
        }
        let config = SegmentConfig { size_gpcs: shared.size, batch: member.batch, procs: 1 };
        let profile = request.catalog.get(gpu.gpu_model, &slo.model);
        let Some((profile, point)) = profile.and_then(|profile| Some((profile, profile.point(config)?))) else {
            violations.push(Violation::NotProfiled {
                at: at.clone(),
                model: slo.model.clone(),
                gpu: gpu.gpu_model.to_string(),
                config,
            });
            continue;
        };
        if member.batch != 1 {
            violations.push(problem(format!(
                "member '{}' runs batches of {}; the serialized model holds for batches of 1",
                member.service, member.batch
            )));
        }
        violations.extend(claims_beyond_profile(&at, (member.throughput_rps, member.latency_ms), point));
        match profile.process_memory_gb(config) {
            Some((needed_gb, _)) => memory_gb += needed_gb.max(member.memory_gb),
            None => violations.push(problem(format!(
                "the profile of '{}' neither measures nor bounds the memory of batch {}",
                slo.model, member.batch
            ))),
        }
        findings.provisioned.push((slo, member.capacity_rps));
        let busy_ms = point.latency_ms.max(1000.0 * f64::from(member.batch) / point.throughput_rps);
        let load = MemberLoad { rate_rps: member.capacity_rps.max(slo.rate_rps), busy_ms };
        judged.push((slo, Member { load, slo_ms: slo.latency_slo_ms, percentile: slo.percentile }));
    }
    let instance_gb = gpu.gpu_model.spec().profile_by_name(&shared.profile).map(|p| f64::from(p.memory_gb));
    if let Some(instance_gb) = instance_gb.ok().filter(|&gb| memory_gb > gb) {
        violations
            .push(problem(format!("its members need {memory_gb:.2} GB together, the instance has {instance_gb} GB")));
    }
    let members: Vec<Member> = judged.iter().map(|(_, member)| *member).collect();
    let busy = busy_share(&members);
    for (index, (slo, _)) in judged.iter().enumerate() {
        let figures = member_figures(&members, index, request.margin).ok();
        let latency_ms = figures.map_or(f64::INFINITY, |f| f.latency_ms);
        if latency_ms > slo.latency_slo_ms * (1.0 + PREDICTION_TOLERANCE) {
            violations.push(Violation::Latency {
                at: at.clone(),
                service: slo.service.clone(),
                rule: request.rule.name(),
                slo_ms: slo.latency_slo_ms,
                requirement: request.rule.requirement(slo),
                worst_ms: latency_ms,
                utilization: busy,
            });
        }
        if let Some(figures) = figures {
            findings.figures.push((slo, figures, busy));
        }
    }
    findings
}
